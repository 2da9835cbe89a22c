# Sourced first by an e2e script, with the script's arguments (DTRAIN [SOURCE_DIR]): the tally (check,
# summary at exit), $lib (this folder), $dtrain (the binary, absolute), a temporary folder $work that is
# the current folder and is removed at exit, and the CLI helpers (expect, check, latest).
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$lib/tally.sh"
dtrain=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
source "$lib/cli.sh"
