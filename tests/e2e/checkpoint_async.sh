#!/usr/bin/env bash
# End-to-end: checkpoint.async on small generated MNIST-format data. Its checkpoints are bitwise the synchronous
# run's (dtrain diff), under 1 process and `mpirun -np 2`, keep_best's DIR/best and restore_best_weights too; a
# resume from them ends where the uninterrupted run does; a background save that fails (a file size limit) ends
# the run with exit 1, one line naming the checkpoint and the cause, `latest` on the last complete checkpoint;
# SIGKILL while a background save is written (training gone on past it; one process of 2 under mpirun) leaves
# `latest` loadable; SIGTERM commits the stop's checkpoint before exit 143.
# Usage: checkpoint_async.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source "$lib/tally.sh"

dtrain=$(realpath "$1")
work=$(mktemp -d)
cleanup() {
  [[ -n ${victim:-} ]] && kill -9 "$victim" 2>/dev/null || true
  [[ -n ${job:-} ]] && kill "$job" 2>/dev/null || true  # mpirun ends its processes
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

source "$lib/cli.sh"  # expect, check, latest
source "$lib/mnist_fixture.sh"  # data/, h5python, config() and dp/mp/sp.yaml
# The model-sharded tensors on the mesh's first dim: under mpirun -np 2, process 1's ranks write shard files too.
config mp2 "{model: 2, batch: 4}" "[batch, unsharded]" "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

every4=(--set checkpoint.every=4 --set checkpoint.max_to_keep=10)
async=(--set checkpoint.async=true)
# same_checkpoints A B: every checkpoint of dir A has a bitwise-identical twin in dir B, and B has no other.
same_checkpoints() {
  local a=$1 b=$2 name
  [[ "$(ls "$a" | grep '^ckpt-' | sort)" == "$(ls "$b" | grep '^ckpt-' | sort)" ]] || { echo "$a and $b hold other checkpoints" >&2; return 1; }
  for name in $(ls "$a" | grep '^ckpt-'); do
    quiet_diff "$a/$name" "$b/$name" || return 1
  done
}

quiet_diff() { "$dtrain" diff "$1" "$2" >diff.out 2>&1 || { tail -3 diff.out >&2; return 1; }; }

# 1 process: async equals sync, checkpoint by checkpoint (every 4 steps and at the epochs' ends).
for name in dp mp2; do
  expect 0 "test accuracy" -- train --config $name.yaml "${every4[@]}" --set checkpoint.dir=sync_$name --run-dir r_sync_$name
  expect 0 "test accuracy" -- train --config $name.yaml "${every4[@]}" "${async[@]}" --set checkpoint.dir=async_$name \
    --run-dir r_async_$name
  check "$name: async wrote ckpt-4 ... ckpt-16 and latest is ckpt-16" \
    test "$(ls async_$name | grep -c '^ckpt-')" = 4 -a "$(latest async_$name)" = ckpt-16
  check "$name: every async checkpoint is bitwise the sync one's" same_checkpoints sync_$name async_$name
  check "$name: the async run's losses are the sync run's" \
    cmp -s <(grep -a train_steps r_sync_$name/metrics.jsonl | sed 's/"examples_per_s.*//') \
    <(grep -a train_steps r_async_$name/metrics.jsonl | sed 's/"examples_per_s.*//')
  check "$name: each save is a metrics row" test "$(grep -c '"split": "save"' r_async_$name/metrics.jsonl)" = 4
done
expect 0 "verdict: intact: step 16" -- inspect --verify async_dp

# Resume from an async checkpoint (async again) to a third epoch: bitwise an uninterrupted 3-epoch run.
expect 0 "test accuracy" -- train --config dp.yaml "${every4[@]}" --set train.epochs=3 --set checkpoint.dir=whole \
  --run-dir r_whole
expect 0 "resuming async_dp/ckpt-16 " -- resume --config dp.yaml "${every4[@]}" "${async[@]}" --set train.epochs=3 \
  --set checkpoint.dir=async_dp --run-dir r_async_dp
check "the resumed async run committed ckpt-24" test "$(latest async_dp)" = ckpt-24
expect 0 "verdict: identical" -- diff async_dp/ckpt-24 whole/ckpt-24

# keep_best and restore_best_weights: validated every 2 steps, only step 2's validation is ever the best
# (min_delta 10), so the run stops after step 4 and reads step 2's weights back from DIR/best; the async save of
# step 2 is slow (each dataset write sleeps 200 ms), so the read must wait for its commit. Same as sync.
restoring=(--set data.validation_split=0.25 --set train.validation_every=2 --set train.epochs=3
           --set "train.early_stopping={patience: 1, min_delta: 10, restore_best_weights: true}"
           --set checkpoint.keep_best=val_loss --set checkpoint.max_to_keep=1 --set checkpoint.every=100)
expect 0 "restored the weights of epoch 1 \(step 2, val_loss [0-9.]+\), the best validation" -- \
  train --config mp.yaml "${restoring[@]}" --set checkpoint.dir=best_sync --run-dir r_best_sync
grep -a 'test accuracy' out >best_sync.out
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=200 expect 0 "restored the weights of epoch 1 \(step 2, val_loss [0-9.]+\), the best validation" -- \
  train --config mp.yaml "${restoring[@]}" "${async[@]}" --set checkpoint.dir=best_async --run-dir r_best_async
check "keep_best async: stopped at step 4, DIR/best is step 2" test "$(latest best_async) $(cat best_async/best)" = "ckpt-4 ckpt-2"
check "keep_best async: the restored weights' test result is the sync run's" \
  test "$(grep -a 'test accuracy' out)" = "$(cat best_sync.out)"
check "keep_best async: DIR/best is bitwise the sync run's" quiet_diff best_sync/best best_async/best
check "keep_best async: latest is bitwise the sync run's" quiet_diff best_sync best_async

# mpirun -np 2: the same (bitwise the P=2 sync run's; P=1's differ in the sums' order without train.bitwise).
if mpi_runnable "$dtrain"; then
  for name in dp mp2; do
    for mode in sync async; do
      extra=()
      [[ $mode == async ]] && extra=("${async[@]}")
      rc=0
      timeout 300 mpirun --oversubscribe -np 2 "$dtrain" train --config $name.yaml "${every4[@]}" "${extra[@]}" \
        --set checkpoint.dir=mpi_${mode}_$name --run-dir r_mpi_${mode}_$name </dev/null >out 2>&1 || rc=$?
      check "P=2 $name $mode: exit 0 (got $rc): $(tail -2 out)" test $rc = 0
    done
    check "P=2 $name: every async checkpoint is bitwise the sync one's" same_checkpoints mpi_sync_$name mpi_async_$name
  done
else
  skip_part "the mpirun -np 2 runs (no mpirun, or dtrain built without MPI)"
fi

# A background save that fails: a file size limit under the shard file's size (write(2) fails with EFBIG;
# SIGXFSZ is ignored). The run ends with exit 1 by the next save at the latest, one error line naming the
# checkpoint and the cause; latest still names the complete ckpt-16, which verifies.
# Under mpirun the limit is set in each dtrain process only (mpirun's own files would hit it).
limit_kb=$(( $(stat -c %s sync_dp/ckpt-16/shard-0-of-8.h5) / 2048 ))
launchers=("")
mpi_runnable "$dtrain" && launchers+=("mpirun --oversubscribe -np 2")
for launcher in "${launchers[@]}"; do
  rm -rf limited r_limited && cp -r sync_dp limited
  rc=0
  # shellcheck disable=SC2086
  timeout 300 $launcher bash -c "trap '' XFSZ; ulimit -f $limit_kb; exec \"\$0\" \"\$@\"" "$dtrain" resume --config dp.yaml \
    "${every4[@]}" "${async[@]}" --set checkpoint.dir=limited --set train.epochs=5 --set train.log_every=1 \
    --run-dir r_limited </dev/null >out 2>&1 || rc=$?
  what="failed background save${launcher:+ (mpirun -np 2)}"
  check "$what: exit 1 (not $rc): $(tail -3 out)" test $rc = 1
  check "$what: an error naming the checkpoint, the cause and latest: $(grep -a '^dtrain: error' out | head -2)" \
    grep -Eaq "^dtrain: error: (\[process [0-9] of 2, device [0-9]\] )?\[checkpoint\] the background save of limited/ckpt-20 failed( on device 0)?: file too large writing limited/ckpt-20.partial/shard-0-of-8.h5 \(limited/latest still names ckpt-16\)$" out
  check "$what: nothing from HDF5" test "$(grep -ac HDF5-DIAG out)" = 0
  check "$what: latest is still ckpt-16" test "$(latest limited)" = ckpt-16
  check "$what: the run stopped by the next save (step 24)" python3 - <<'PY'
import json
steps = [r["step"] for r in map(json.loads, open("r_limited/metrics.jsonl")) if r.get("split") == "train_steps"]
assert steps and min(steps) == 17 and max(steps) <= 24, steps
PY
  expect 0 "verdict: intact: step 16" -- inspect --verify limited
done

# SIGKILL while a background save is written: each dataset write sleeps 300 ms (seconds a save), so the kill
# lands with ckpt-8 being written, ckpt-4 committed, and training gone on to step 10 meanwhile.
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=300 "$dtrain" train --config dp.yaml "${every4[@]}" "${async[@]}" \
  --set checkpoint.dir=killed --set train.log_every=1 --run-dir r_killed >kill.log 2>&1 &
victim=$!
mid_save() {
  [[ -e killed/ckpt-8.partial && $(latest killed) == ckpt-4 ]] &&
    grep -aq '"split": "train_steps", "epoch": 2, "step": 10,' r_killed/metrics.jsonl 2>/dev/null
}
for _ in $(seq 1200); do mid_save && break; sleep 0.02; done
kill -9 "$victim" 2>/dev/null || true
wait "$victim" 2>/dev/null || true
victim=
check "the kill landed with ckpt-8 in the background and training at step 10 or beyond" \
  test -d killed/ckpt-8.partial -a ! -e killed/ckpt-8 -a -d killed/ckpt-4
check "latest still names the complete ckpt-4 after SIGKILL" test "$(latest killed)" = ckpt-4
expect 0 "verdict: intact: step 4" -- inspect --verify killed
expect 0 "accuracy" -- eval --config dp.yaml --checkpoint killed
expect 0 "verdict: identical" -- diff killed/latest sync_dp/ckpt-4
expect 0 "resuming killed/ckpt-4 " -- resume --config dp.yaml "${every4[@]}" "${async[@]}" --set checkpoint.dir=killed \
  --run-dir r_killed
check "the resumed run committed ckpt-16, no .partial left" test "$(latest killed)" = ckpt-16 -a ! -e killed/ckpt-8.partial
expect 0 "verdict: identical" -- diff killed/ckpt-16 sync_dp/ckpt-16

# The same under mpirun -np 2, process 1 killed (it writes shards of mp2's model-sharded tensors) while
# ckpt-8 is written in the background: the job ends, latest is the complete ckpt-4.
if mpi_runnable "$dtrain"; then
  DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=100 timeout 120 mpirun --oversubscribe -x DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS \
    -np 2 "$dtrain" train --config mp2.yaml "${every4[@]}" "${async[@]}" --set checkpoint.dir=killed_mpi \
    --set train.log_every=1 --run-dir r_killed_mpi </dev/null >kill_mpi.log 2>&1 &
  job=$!
  mid_mpi_save() { [[ -e killed_mpi/ckpt-8.partial && $(latest killed_mpi) == ckpt-4 ]]; }
  for _ in $(seq 1500); do mid_mpi_save && break; sleep 0.02; done
  process_1=
  for pid in $(pgrep -f -- "^$dtrain train --config mp2.yaml" || true); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && process_1=$pid
  done
  check "mpirun: found process 1 mid-save" test -n "$process_1"
  [[ -n $process_1 ]] && kill -9 "$process_1"
  rc=0
  wait "$job" || rc=$?
  job=
  check "mpirun: the job ends non-zero after process 1's SIGKILL (got $rc)" test $rc != 0 -a $rc != 124
  check "mpirun: latest is still the complete ckpt-4, ckpt-8 never committed" \
    test "$(latest killed_mpi)" = ckpt-4 -a ! -e killed_mpi/ckpt-8
  expect 0 "verdict: intact: step 4" -- inspect --verify killed_mpi
  expect 0 "verdict: identical" -- diff killed_mpi/latest mpi_sync_mp2/ckpt-4
else
  skip_part "SIGKILL of one process under mpirun (no mpirun, or dtrain built without MPI)"
fi

# SIGTERM while saves are slow (SIGINT stays ignored in a script's background job): the step under way ends,
# its checkpoint is saved (after the save in flight) and committed before the run exits 143.
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=100 "$dtrain" train --config dp.yaml "${every4[@]}" "${async[@]}" \
  --set train.epochs=50 --set checkpoint.dir=stopped --set train.log_every=1 --run-dir r_stopped >stop.log 2>&1 &
victim=$!
past_step_6() { grep -aq '"split": "train_steps", "epoch": 1, "step": 6,' r_stopped/metrics.jsonl 2>/dev/null; }
for _ in $(seq 1500); do past_step_6 && break; sleep 0.02; done
kill -TERM "$victim" 2>/dev/null || true
rc=0
wait "$victim" || rc=$?
victim=
stop_step=$(grep -a '"split": "train_steps"' r_stopped/metrics.jsonl | tail -1 | sed -E 's/.*"step": ([0-9]+),.*/\1/')
check "SIGTERM: exit 143 (got $rc): $(tail -2 stop.log)" test $rc = 143
check "SIGTERM: the stop's step ($stop_step) is committed and latest" test "$(latest stopped)" = "ckpt-$stop_step"
expect 0 "verdict: intact: step $stop_step" -- inspect --verify stopped
check "SIGTERM: no .partial left" test -z "$(ls stopped | grep partial)"

report
