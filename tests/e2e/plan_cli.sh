#!/usr/bin/env bash
# End-to-end: `dtrain plan` as a dry run on the real binary. A config far larger than this machine is planned
# at once in little memory and said not to fit, and train refuses it before allocating; --json gives scripts
# the verdict, the peaks, the step time and the step's collectives (across processes under --processes 2);
# --search proposes other layouts as --set lines, and what it proposes trains.
# Usage: plan_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
export XDG_CACHE_HOME="$work/cache"
imdb_dp="$source_dir/configs/imdb_dp.yaml"

# Runs dtrain ARGS; prints its exit code and its peak resident memory (MiB) to $work/usage; output to $work/out.
measured() {
  python3 - "$dtrain" "$@" <<'PY' >"$work/usage"
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=open("out", "w"), stderr=subprocess.STDOUT).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
PY
}
usage_is() {  # CODE MAX_MIB
  local code mib
  read -r code mib <"$work/usage"
  [[ $code == "$1" && $mib -lt $2 ]] || { echo "exit $code, $mib MiB" >&2; return 1; }
}

# 1200 x 500000 weights on 8 devices in one process: tens of GiB. Planned without allocating them.
measured plan --config "$imdb_dp" --set model.0.dense=500000
check "plan of dense=500000: exit 2 in under 100 MiB" usage_is 2 100
check "plan says it does not fit and by how much" grep -Eq "this machine has [0-9.]+ [MG]iB available: does not fit, [0-9.]+ GiB short" out
check "plan shows the step's peak per device" grep -Eq "per device at the step's peak: [0-9.]+ GiB \(variables 2.24 GiB, gradients 2.24 GiB" out
check "plan names the bytes in its error" grep -Eq "dtrain: error: --set model.0.dense=500000: the run needs [0-9.]+ GiB per process .*the largest variable: dense1/kernel \(1200,500000\), 2.24 GiB a device" out
mkdir -p empty/train empty/test  # an aclImdb with no review: the refusal comes before any data is read
measured train --config "$imdb_dp" --set model.0.dense=500000 --set data.path=empty
check "train of dense=500000: exit 2 in under 100 MiB, before reading data" usage_is 2 100
check "train names the bytes needed and available" grep -Eq "the run needs [0-9.]+ GiB per process .*this machine has [0-9.]+ [MG]iB available, [0-9.]+ GiB short" out

# --json: one object for scripts.
expect 0 '"fits": true' -- plan --config "$imdb_dp" --json
check "--json is one JSON object with the promised keys" python3 -c "
import json
plan = json.load(open('out'))
for key in ('fits', 'peak_bytes_per_process', 'peak_bytes_per_device', 'step_seconds', 'examples_per_second', 'collectives'):
    assert key in plan, key
assert plan['peak_bytes_per_device'] > 0 and plan['step_seconds'] > 0 and plan['examples_per_second'] > 0, plan
kinds = {c['kind'] for c in plan['collectives']}
assert 'all_reduce' in kinds and 'all_gather' in kinds, kinds
assert not any(c['across_processes'] for c in plan['collectives']), plan['collectives']
assert plan['peak_bytes_per_process'] >= plan['peak_bytes_per_device'] * 2, plan"
expect 0 '"fits": true' -- plan --config "$imdb_dp" --json --processes 2
check "--processes 2: the batch collectives cross processes" python3 -c "
import json
plan = json.load(open('out'))
assert plan['processes'] == 2 and plan['devices_per_process'] == 4, plan
assert all(c['across_processes'] for c in plan['collectives'] if len(c['ranks']) == 8), plan['collectives']"
expect 2 '"fits": false' -- plan --config "$imdb_dp" --json --set model.0.dense=500000

# --search: five candidates at most, each as --set lines that plan and train accept.
expect 0 "the fastest that fit, predicted:" -- plan --config "$source_dir/configs/imdb_mp.yaml" --search
check "--search prints the config's own plan" grep -Eq "^the config as given: +[0-9.]+ (us|ms|s) " out
check "--search proposes at most five" test "$(grep -Ec '^[0-9]\. ' out)" -ge 1 -a "$(grep -Ec '^[0-9]\. ' out)" -le 5
mapfile -t sets < <(awk '/^1\. /{first=1; next} first && /^ +--set /{sub(/^ +--set "/, ""); sub(/"$/, ""); print; next} first{exit}' out)
check "the first proposal has --set lines" test "${#sets[@]}" -ge 2
args=()
for line in "${sets[@]}"; do args+=(--set "$line"); done
expect 0 "collectives of one training step" -- plan --config "$source_dir/configs/imdb_mp.yaml" "${args[@]}"
report
