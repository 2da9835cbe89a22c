#!/usr/bin/env bash
# Checkpoint save/restore benchmark (~805 MB of model + Adam state on 8 virtual devices) against this
# disk's dd bandwidth. Usage: bench/checkpoint.sh [BUILD_DIR (default build)] [PARENT_DIR (default: the build dir)]
# It works in a new folder inside PARENT_DIR and removes only that folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scratch=${2:-$build}
cmake --build "$build" --target bench_checkpoint >/dev/null
"$build/bench_checkpoint" "$scratch"
