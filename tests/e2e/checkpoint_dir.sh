#!/usr/bin/env bash
# End-to-end: who may write a checkpoint dir, and that nothing the user had is lost around it: one writer
# (a second exits 2 naming the first's PID and host), a dir that cannot be written fails before step 1,
# resume refuses a dir holding another run's checkpoints, `train --overwrite` deletes the old checkpoints
# only after its first one is committed, a kill during pruning leaves no half-deleted checkpoint, and an
# eval reading a dir while a run prunes it gets a whole checkpoint.
# Usage: checkpoint_dir.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source "$lib/tally.sh"

dtrain=$(realpath "$1")
work=$(mktemp -d)
victims=()
cleanup() {
  for pid in "${victims[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
source "$lib/cli.sh"
source "$lib/mnist_fixture.sh"  # data/, config() and dp/mp/sp.yaml (checkpoint dir ckpt, 8 steps an epoch)

run_id() { sed -n 's/^run_id //p' "$1/manifest"; }
# wait_for PATH: until PATH exists (30 s at most).
wait_for() { for _ in $(seq 600); do [[ -e $1 ]] && return 0; sleep 0.05; done; return 1; }
# start_slow ARGS...: dtrain ARGS in the background, each checkpoint dataset write taking 200 ms.
start_slow() {
  DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=200 "$dtrain" "$@" >slow.log 2>&1 &
  slow=$!
  victims+=("$slow")
}

# A checkpoint dir that cannot be created: exit 2 at the config's checkpoint.dir (or the --set that gave
# it), before any training.
touch a_file
sed 's|dir: ckpt|dir: a_file/ckpt|' dp.yaml >unwritable.yaml
expect 2 "unwritable.yaml:[0-9]+:[0-9]+: checkpoint.dir: cannot create or write 'a_file/ckpt': .*a_file' is a file, not a folder" -- \
  train --config unwritable.yaml
expect 2 "^dtrain: error: --set checkpoint.dir=a_file/x: checkpoint.dir: cannot create or write 'a_file/x'" -- train --config dp.yaml \
  --set checkpoint.dir=a_file/x
check "the refused runs trained nothing" test ! -e run/metrics.jsonl

# Run A: two epochs, ckpt-8 and ckpt-16.
expect 0 "last checkpoint: ckpt/ckpt-16" -- train --config dp.yaml
run_a=$(run_id ckpt/ckpt-16)
check "every checkpoint names its run" test -n "$run_a" -a "$(run_id ckpt/ckpt-8)" = "$run_a"

# One writer at a time: while run B writes ckpt (slowly), a second train --overwrite and a resume are refused.
start_slow train --config dp.yaml --set checkpoint.dir=busy
wait_for busy/ckpt-8.partial || bad "run B never started its first save"
expect 2 "checkpoint dir 'busy' is in use by another dtrain run \(PID $slow on host $(hostname)" -- \
  train --config dp.yaml --set checkpoint.dir=busy --overwrite
expect 2 "in use by another dtrain run \(PID $slow " -- resume --config dp.yaml --set checkpoint.dir=busy
wait "$slow" || bad "run B failed: $(tail -3 slow.log)"
check "run B was not disturbed" test "$(latest busy)" = ckpt-16
expect 0 "last checkpoint: busy/ckpt-16" -- train --config dp.yaml --set checkpoint.dir=busy --overwrite
check "the lock went with its holder" test "$(run_id busy/ckpt-16)" != "$(run_id ckpt/ckpt-16)"

# train --overwrite killed before its first checkpoint is committed: run A's checkpoints are all there.
cp -r ckpt before
start_slow train --config dp.yaml --overwrite
wait_for ckpt/ckpt-8.partial || bad "the overwriting run never started its first save"
kill -9 "$slow"
wait "$slow" 2>/dev/null || true
check "a killed --overwrite run lost nothing" test "$(latest ckpt)" = ckpt-16 -a "$(run_id ckpt/ckpt-8)" = "$run_a"
expect 0 "step 16" -- eval --config dp.yaml --checkpoint ckpt
# Run to completion, it replaces them: only its own checkpoints are left.
expect 0 "last checkpoint: ckpt/ckpt-16" -- train --config dp.yaml --overwrite
run_c=$(run_id ckpt/ckpt-16)
check "--overwrite replaced run A's checkpoints once it had its own" \
  test "$run_c" != "$run_a" -a "$(run_id ckpt/ckpt-8)" = "$run_c" -a "$(ls ckpt | grep -c ckpt-)" = 2

# resume --from another run's checkpoint into a dir holding run C's checkpoints: refused, nothing touched.
expect 2 "checkpoint dir 'ckpt' holds checkpoints of another run .*--overwrite" -- \
  resume --config dp.yaml --from before --set train.epochs=3
check "the refused resume left run C's checkpoints" test "$(latest ckpt)" = ckpt-16 -a "$(run_id ckpt/ckpt-16)" = "$run_c"
expect 0 "checkpoints of this run go to ckpt" -- resume --config dp.yaml --from before --set train.epochs=3 --overwrite
check "resume --overwrite continued run A in ckpt and replaced run C's checkpoints" \
  test "$(latest ckpt)" = ckpt-24 -a "$(run_id ckpt/ckpt-24)" = "$run_a" -a "$(ls ckpt | grep -c ckpt-)" = 1
check "the resumed-from dir is untouched" test "$(latest before)" = ckpt-16 -a -d before/ckpt-8

# A kill while pruning (between the rename to a hidden name and the deletion): every ckpt-N left is whole.
DTRAIN_TEST_DELETE_DELAY_MS=3000 "$dtrain" train --config dp.yaml --set checkpoint.dir=pruned \
  --set checkpoint.max_to_keep=1 >prune.log 2>&1 &
slow=$!
victims+=("$slow")
wait_for pruned/.deleting-ckpt-8 || bad "the run never pruned ckpt-8"
kill -9 "$slow"
wait "$slow" 2>/dev/null || true
check "no half-deleted ckpt-8 is visible" test ! -e pruned/ckpt-8
expect 0 "step 16" -- eval --config dp.yaml --checkpoint pruned
expect 0 "resuming pruned/ckpt-16" -- resume --config dp.yaml --set checkpoint.dir=pruned --set train.epochs=3
check "the next run cleared the leftover" test ! -e pruned/.deleting-ckpt-8 -a "$(latest pruned)" = ckpt-24

# Evals of the latest checkpoint while a run saves every step and keeps one: each gets a whole checkpoint.
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=20 "$dtrain" train --config dp.yaml --set checkpoint.dir=churn \
  --set checkpoint.every=1 --set checkpoint.max_to_keep=1 --set train.epochs=4 >churn.log 2>&1 &
churn=$!
victims+=("$churn")
wait_for churn/latest || bad "the churning run never saved"
evals=0
while kill -0 "$churn" 2>/dev/null && ((evals < 12)); do
  expect 0 "accuracy" -- eval --config dp.yaml --checkpoint churn
  evals=$((evals + 1))
done
wait "$churn" || bad "the churning run failed: $(tail -3 churn.log)"
check "evals ran while the run pruned ($evals)" test "$evals" -ge 3
check "the churning run kept one checkpoint" test "$(ls churn | grep -c ckpt-)" = 1

report
