#!/usr/bin/env bash
# End-to-end: `dtrain` under `mpirun -np P` (the mesh's devices spread over P processes) on checkpoint_cli.sh's
# generated MNIST-format files: output and run dir written once; the same losses for P = 1, 2, 4, 8 on DP, MP and
# SP meshes; checkpoints saved under one P, resumed or evaluated under another; a P that does not divide the
# mesh, a failure on one process only, SIGKILL of one process mid-epoch and mid-save, and a stopped process end
# the whole job promptly with a clear message. Without mpirun or an MPI build: "skipped: ..." and exit 77 (ctest
# says SKIPPED given the test property SKIP_RETURN_CODE 77; without it, a skip shows as failed, never passed).
# Usage: mpi_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source "$lib/tally.sh"
source "$lib/waits.sh"

dtrain=$(realpath "$1")
skip() {
  echo "skipped: $*"
  echo "0 passed, 0 failed, 1 skipped"
  exit 77
}
command -v mpirun >/dev/null || skip "no mpirun on PATH"
mpi_runnable "$dtrain" || skip "$dtrain was built without MPI (DTRAIN_WITH_MPI off)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

work=$(cd "$(mktemp -d)" && pwd -P)
started=()  # background jobs (mpirun) and processes this script stopped: none outlives it
cleanup() {
  local pid
  for pid in "${started[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

# run NP ARGS...: dtrain ARGS as one process without mpirun (NP = 1) or under `mpirun -np NP`; 120 s at most.
run() {
  local np=$1
  shift
  if [[ $np == 1 ]]; then
    timeout 120 "$dtrain" "$@" </dev/null
  else
    timeout 120 mpirun --oversubscribe -np "$np" "$dtrain" "$@" </dev/null
  fi
}
# expect CODE PATTERN... -- NP ARGS...: runs `run NP ARGS` into $work/out; checks the exit code and that
# stdout+stderr match every PATTERN (each on some line).
expect() {
  local code=$1 patterns=()
  shift
  while [[ $1 != -- ]]; do
    patterns+=("$1")
    shift
  done
  shift
  local np=$1
  shift
  local rc=0 pattern
  run "$np" "$@" >"$work/out" 2>&1 || rc=$?
  if [[ $rc != "$code" ]]; then
    bad "(P=$np) dtrain $* exited $rc, expected $code: $(tail -5 "$work/out")"
    return
  fi
  for pattern in "${patterns[@]}"; do
    if ! grep -Eaq -- "$pattern" "$work/out"; then
      bad "(P=$np) dtrain $* output does not match /$pattern/: $(tail -5 "$work/out")"
      return
    fi
  done
  ok
}
latest() { cat "$1/latest" 2>/dev/null || echo none; }
# rank_pid RANK PATTERN: the PID of the MPI process of rank RANK whose command line starts with PATTERN
# (mpirun's own command line starts with "mpirun", so it never matches); empty when there is none (yet).
rank_pid() {
  local pid
  for pid in $(pgrep -f -- "^$2" || true); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$pid"
      return
    fi
  done
}
source "$lib/mnist_fixture.sh"  # data/, h5python, config() and dp/mp/sp.yaml

# same_metrics A B: two metrics.jsonl hold the same records (split, epoch, step, examples) whose loss and
# accuracy agree within 1e-5 relative.
same_metrics() {
  python3 - "$1" "$2" <<'PY'
import json, sys
# The run rows (run id, mesh, processes) differ between runs by design: the records after them compare.
a, b = ([r for r in map(json.loads, open(path)) if r["split"] != "run"] for path in sys.argv[1:3])
assert len(a) == len(b) and len(a) >= 3, f"{len(a)} records vs {len(b)}"
assert any(r["split"] == "test" for r in a), "no test record"
for x, y in zip(a, b):
    for key in ("split", "epoch", "step", "examples"):
        assert x[key] == y[key], (key, x, y)
    for key in ("loss", "accuracy"):
        assert abs(x[key] - y[key]) <= 1e-5 * max(abs(x[key]), abs(y[key])), (key, x, y)
PY
}

# ---- 1 and 2: one training run under P = 1, 2, 4, 8: output and metrics once, the same numbers ----
for name in dp mp sp; do
  expect 0 "test accuracy" -- 1 train --config $name.yaml --set checkpoint.every=never --run-dir run_${name}_1
  cp out out_${name}_1
done
expect 0 "test accuracy" -- 2 train --config dp.yaml --set checkpoint.every=never --run-dir run_dp_2
cp out out_dp_2
check "P=2 prints the start-up line once, naming the 2 processes and their devices:
$(grep -a "parameters on mesh" out_dp_2 || true)" \
  test "$(grep -ac "over 2 processes: process 0: devices 0-3; process 1: devices 4-7)" out_dp_2)" = 1
for line in "parameters on mesh" "^Epoch 1/2" "epoch 2 done" "test accuracy" "metrics: run_dp_2/metrics.jsonl"; do
  check "P=2 prints /$line/ once, not once per process: $(grep -ac -- "$line" out_dp_2) times" \
    test "$(grep -ac -- "$line" out_dp_2)" = 1
done
check "P=2 writes metrics.jsonl once: $(wc -l <run_dp_2/metrics.jsonl) lines, $(wc -l <run_dp_1/metrics.jsonl) for P=1" \
  test "$(wc -l <run_dp_2/metrics.jsonl)" = "$(wc -l <run_dp_1/metrics.jsonl)"
check "P=2 {batch: 8}: metrics as P=1's within 1e-5" same_metrics run_dp_1/metrics.jsonl run_dp_2/metrics.jsonl
for np in 4 8; do
  expect 0 "over $np processes" "test accuracy" -- $np train --config dp.yaml --set checkpoint.every=never \
    --run-dir run_dp_$np
  check "P=$np {batch: 8}: metrics as P=1's within 1e-5" same_metrics run_dp_1/metrics.jsonl run_dp_$np/metrics.jsonl
done
for name in mp sp; do
  for np in 2 4; do
    expect 0 "over $np processes" "test accuracy" -- $np train --config $name.yaml --set checkpoint.every=never \
      --run-dir run_${name}_$np
    check "P=$np $name mesh: metrics as P=1's within 1e-5" \
      same_metrics run_${name}_1/metrics.jsonl run_${name}_$np/metrics.jsonl
  done
done

# ---- 3: checkpoints across process counts ----
# Train 1 epoch of DP under P=2, resume onto SP under P=4 for a second; the same sequence in one process.
expect 0 "test accuracy" -- 2 train --config dp.yaml --set train.epochs=1 --set checkpoint.dir=multi --run-dir r_multi
check "P=2 train saved multi/ckpt-8" test "$(latest multi)" = ckpt-8 -a -f multi/ckpt-8/index.h5
expect 0 "resuming multi/ckpt-8 " "over 4 processes" -- 4 resume --config sp.yaml --set checkpoint.dir=multi \
  --run-dir r_multi
check "P=4 resume saved multi/ckpt-16" test "$(latest multi)" = ckpt-16 -a -f multi/ckpt-16/index.h5
expect 0 "test accuracy" -- 1 train --config dp.yaml --set train.epochs=1 --set checkpoint.dir=single --run-dir r_single
expect 0 "resuming single/ckpt-8 " -- 1 resume --config sp.yaml --set checkpoint.dir=single --run-dir r_single
check "single-process resume saved single/ckpt-16" test "$(latest single)" = ckpt-16
for name in multi single; do
  expect 0 "accuracy" -- 1 eval --config sp.yaml --checkpoint $name
  sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_$name
done
# Within 1e-6: the sums across processes are grouped otherwise than in one process (below), ~1e-7 a step.
check "eval of the P=2 -> P=4 checkpoint prints the uninterrupted single-process one's loss and accuracy:
$(cat eval_multi) vs $(cat eval_single)" python3 -c '
import sys
a, b = (open(f).read().split() for f in sys.argv[1:])
sys.exit(0 if len(a) == len(b) == 2 and all(abs(float(x) - float(y)) <= 1e-6 * max(1.0, abs(float(y))) for x, y in zip(a, b)) else 1)' eval_multi eval_single
if [[ -n $h5python ]]; then
  # Not bitwise: a sum over a group that spans processes adds each process's partial sum, grouped
  # differently from one process's left-to-right sum (float rounding, ~1e-7). Restores themselves are
  # bitwise across process counts (tests/test_mpi.cpp, "checkpoints move between ...").
  check "every tensor of the P=2 -> P=4 ckpt-16 equals the single-process one's within 1e-5" "$h5python" - <<'PY'
import h5py, numpy as np
a, b = h5py.File("multi/ckpt-16/index.h5"), h5py.File("single/ckpt-16/index.h5")
names = [n.decode() if isinstance(n, bytes) else n for n in a["meta/tensors"][()]]
other = [n.decode() if isinstance(n, bytes) else n for n in b["meta/tensors"][()]]
assert len(names) == 12 and sorted(names) == sorted(other), (names, other)
differ = []
for name in names:
    x, y = a[name][()], b[name][()]
    assert x.shape == y.shape and x.dtype == y.dtype, name
    # NaN anywhere fails: the comparison is false for it.
    if not np.all(np.abs(x - y) <= 1e-5 * np.maximum(1.0, np.abs(y))):
        differ.append(f"{name} ({int(np.sum(x != y))} of {x.size} differ, max |diff| {float(np.nanmax(np.abs(x - y))):.3g})")
assert not differ, "; ".join(differ)
PY
else
  skip_part "h5py checks (no python3 with h5py)"
fi
# One checkpoint evaluated under P = 1, 2, 4, 8 on each mesh: the numbers printed by P=1 on that mesh, and
# within 1e-5 of each other across meshes.
for run_as in "dp 1" "dp 2" "dp 4" "dp 8" "mp 1" "mp 2" "mp 8" "sp 1" "sp 4" "sp 8"; do
  read -r name np <<<"$run_as"
  expect 0 "split test: loss" -- $np eval --config $name.yaml --checkpoint multi
  check "P=$np eval on $name prints one result line" test "$(grep -c "split test: loss" out)" = 1
  sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_${name}_$np
  grep "^  class " out >classes_${name}_$np || true
  check "P=$np eval on $name prints a line per class (10)" test "$(wc -l <classes_${name}_$np)" = 10
  if [[ $np != 1 ]]; then
    check "P=$np eval on $name prints what P=1 does: $(cat eval_${name}_$np) vs $(cat eval_${name}_1)" \
      cmp -s eval_${name}_$np eval_${name}_1
    check "P=$np eval on $name prints the per-class counts P=1 does" cmp -s classes_${name}_$np classes_${name}_1
  fi
done
check "eval on DP/MP/SP count the same per class, adding up to the accuracy" python3 - <<'PY'
import re
counts = [re.findall(r"\((\d+) of (\d+) examples\)", open(f"classes_{n}_1").read()) for n in ("dp", "mp", "sp")]
assert len(counts[0]) == 10 and counts[0] == counts[1] == counts[2], counts
accuracy = float(open("eval_dp_1").read().split()[1])
right, examples = (sum(int(c[i]) for c in counts[0]) for i in (0, 1))
assert abs(right / examples - accuracy) < 1e-7, (right, examples, accuracy)
PY
check "eval on DP/MP/SP agree within 1e-5: $(cat eval_dp_1) / $(cat eval_mp_1) / $(cat eval_sp_1)" python3 - <<'PY'
dp, mp, sp = ([float(v) for v in open(f"eval_{n}_1").read().split()] for n in ("dp", "mp", "sp"))
assert dp[1] > 0.3, f"the model did not learn: {dp}"
assert all(abs(a - b) <= 1e-5 for other in (mp, sp) for a, b in zip(dp, other)), (dp, mp, sp)
PY

# ---- 4: errors ----
expect 2 "dtrain: error: .*8 devices.*3 processes" -- 3 train --config dp.yaml --set checkpoint.dir=three \
  --run-dir r_three
check "the refused P=3 run wrote no checkpoint" test ! -e three/latest
# Every process meets that error alike (issue 28): process 0 alone prints it, and the job ends with its code
# without MPI_Abort's banners.
check "an error every process meets is printed once: $(grep -ac 'dtrain: error' out) times" \
  test "$(grep -ac 'dtrain: error' out)" = 1
check "and it names no process" test -z "$(grep -a 'dtrain: error: \[process' out || true)"
check "and no ORTE_ERROR_LOG or MPI_ABORT banner follows" test -z "$(grep -aE 'ORTE_ERROR_LOG|MPI_ABORT' out || true)"
expect 2 "dtrain: error: .*train.epochs" -- 3 train --config dp.yaml --set train.epochs=0
check "a config error under mpirun -np 3 is printed once" test "$(grep -ac 'dtrain: error' out)" = 1

# A failure that only process 1 meets (its config names a data folder that does not exist).
sed 's#path: data,#path: no_such_data,#' dp.yaml >bad.yaml
start=$(now)
rc=0
timeout 120 mpirun --oversubscribe -np 1 "$dtrain" train --config dp.yaml --set checkpoint.dir=mpmd --run-dir r_mpmd : \
  -np 1 "$dtrain" train --config bad.yaml --set checkpoint.dir=mpmd --run-dir r_mpmd </dev/null >out 2>&1 || rc=$?
took=$(seconds_since "$start")
check "a failure on process 1 only ends the job with exit 2 (got $rc) in <= 30 s (took $took s): $(tail -3 out)" \
  eval '[[ $rc == 2 ]] && within "$took" 30'
check "the error names process 1 and the cause: $(grep -a "dtrain: error" out || tail -3 out)" \
  grep -Eq "dtrain: error: \[process 1 of 2\].*no_such_data.*does not exist" out

# An exception on process 1 only, mid-training (device 5 throws at step 12, in the second epoch): the job
# ends at once with exit 1 and the message naming process and device; the epoch-1 checkpoint is intact.
start=$(now)
rc=0
DTRAIN_TEST_FAIL_AT=5:12 timeout 120 mpirun --oversubscribe -np 2 "$dtrain" train --config dp.yaml \
  --set checkpoint.dir=thrown --run-dir r_thrown </dev/null >out 2>&1 || rc=$?
took=$(seconds_since "$start")
check "an exception on process 1 mid-training ends the job with exit 1 (got $rc) in <= 30 s (took $took s)" \
  eval '[[ $rc == 1 ]] && within "$took" 30'
check "the error names process 1, device 5 and the cause: $(grep -a "dtrain: error" out || tail -3 out)" \
  grep -Eq "dtrain: error: \[process 1 of 2, device 5\].*fails at step 12" out
check "the checkpoint of epoch 1 survived the failure" test "$(latest thrown)" = ckpt-8
expect 0 "resuming thrown/ckpt-8 " -- 1 resume --config dp.yaml --set checkpoint.dir=thrown --run-dir r_thrown

# The kill and stop cases: a run under mpirun in the background, its processes found by config name.
victim_config() {  # victim_config NAME BASE: BASE.yaml under a name its processes can be found by
  sed "s#dir: ckpt#dir: $1#" "$2.yaml" >"$1.yaml"
}
# launch NAME NP ARGS...: `mpirun -np NP dtrain train --config NAME.yaml ARGS` in the background (job
# $job, log NAME.log); the environment's DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS goes to every process.
launch() {
  local name=$1 np=$2
  shift 2
  local forward=()
  [[ -n ${DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS:-} ]] && forward=(-x DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS)
  mpirun --oversubscribe "${forward[@]}" -np "$np" "$dtrain" train --config "$name.yaml" --run-dir "r_$name" "$@" \
    </dev/null >"$name.log" 2>&1 &
  job=$!
  started+=("$job")
}
# wait_job NAME WHAT: waits (60 s at most) for $job to end after WHAT was done to process $victim; sets rc
# (the exit status, or "running") and took (seconds), and checks a non-zero exit within 30 s.
ended() { ! kill -0 "$job" 2>/dev/null; }
wait_job() {
  local start
  start=$(now)
  wait_for 60 ended || true
  took=$(seconds_since "$start")
  rc=0
  if ended; then wait "$job" || rc=$?; else rc=running; fi
  echo "$2 (pid $victim): mpirun exited $rc after $took s"
  check "$1: mpirun ends with a non-zero exit ($rc) within 30 s ($took s) after $2" \
    eval '[[ $rc != 0 && $rc != running ]] && within "$took" 30'
  if [[ $rc == running ]]; then
    tail -5 "$1.log" >&2
    kill -9 "$job" 2>/dev/null || true
  fi
}
# find_victim NAME RANK: sets victim to the PID of process RANK of NAME's job (a failed check if none).
find_victim() {
  victim=
  has_victim() { victim=$(rank_pid "$2" "$dtrain train --config $1.yaml"); [[ -n $victim ]] || ended; }
  wait_for 30 has_victim "$1" "$2" || true
  [[ -n $victim ]] || bad "$1: no process of rank $2 found (the job ended before: $(tail -3 "$1.log"))"
  [[ -n $victim ]]
}
# Conditions to wait for in a background job; each is also true once the job has ended (nothing more to wait for).
has_checkpoint() { [[ -f "$1/latest" ]] || ended; }
has_metrics() { [[ -s "$1/metrics.jsonl" ]] || ended; }
writing() { [[ -e $1 ]] || ended; }
# resumes_from NAME CONFIG CKPT ARGS...: single-process `resume` of NAME's checkpoints continues from CKPT.
resumes_from() {
  local name=$1 base=$2 from=$3
  shift 3
  expect 0 "resuming $name/$from " "test accuracy" -- 1 resume --config "$base.yaml" --set checkpoint.dir="$name" \
    --run-dir "r_$name" "$@"
}

# SIGKILL of process 1 in the middle of an epoch: a long run, checkpoints every 400 steps (50 epochs, about
# 1 s); the kill comes 0.2 s after a checkpoint was committed, so between two saves.
victim_config kill_epoch dp
launch kill_epoch 2 --set train.epochs=100000 --set checkpoint.every=400
wait_for 60 has_checkpoint kill_epoch || true
first=$(latest kill_epoch)
moved_on() { [[ $(latest kill_epoch) != "$first" ]] || ended; }
wait_for 60 moved_on || true
sleep 0.2
if find_victim kill_epoch 1; then
  partial=$(ls -d kill_epoch/*.partial 2>/dev/null || true)
  kill -9 "$victim"
  wait_job kill_epoch "kill -9 of process 1 mid-epoch (a save in progress: ${partial:-none})"
  done_at=$(latest kill_epoch)
  check "kill_epoch: latest names a complete checkpoint ($done_at)" \
    test -f "kill_epoch/$done_at/index.h5" -a ! -e "kill_epoch/$done_at.partial"
  step=${done_at#ckpt-}
  if [[ $step =~ ^[0-9]+$ ]]; then
    resumes_from kill_epoch dp "$done_at" --set train.epochs=$((step / 8 + 1))
    check "kill_epoch: single-process resume saved ckpt-$((step / 8 * 8 + 8)) (latest $(latest kill_epoch))" \
      test "$(latest kill_epoch)" = "ckpt-$((step / 8 * 8 + 8))"
  fi
fi

# SIGKILL of process 1 in the middle of writing its shards of the second checkpoint: SP under P=4, where
# process 1 holds devices 2-3 and writes shard-2-of-8.h5 and shard-3-of-8.h5 (each dataset write sleeps 300 ms);
# process 0 must not commit ckpt-16 without them.
victim_config kill_save sp
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=300 launch kill_save 4
wait_for 60 writing kill_save/ckpt-16.partial/shard-2-of-8.h5 || true
sleep 0.1
if find_victim kill_save 1; then
  kill -9 "$victim"
  wait_job kill_save "kill -9 of process 1 while it wrote its shards of ckpt-16"
  check "kill_save: the kill landed mid-write of ckpt-16" test -d kill_save/ckpt-16.partial -a ! -e kill_save/ckpt-16
  check "kill_save: latest still names the complete ckpt-8 ($(latest kill_save))" \
    test "$(latest kill_save)" = ckpt-8 -a -f kill_save/ckpt-8/index.h5
  resumes_from kill_save sp ckpt-8
  check "kill_save: single-process resume finished at ckpt-16" \
    test "$(latest kill_save)" = ckpt-16 -a ! -e kill_save/ckpt-16.partial
  # Uninterrupted, the same training (SP, 2 epochs) ended with run_sp_1's test record.
  expect 0 "accuracy" -- 1 eval --config sp.yaml --checkpoint kill_save
  sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_kill_save
  check "kill_save: the resumed run evaluates within 1e-5 of the uninterrupted one's test record: $(cat eval_kill_save)" \
    python3 - <<'PY'
import json
got = [float(v) for v in open("eval_kill_save").read().split()]
test = [r for r in map(json.loads, open("run_sp_1/metrics.jsonl")) if r["split"] == "test"][-1]
assert len(got) == 2 and abs(got[0] - test["loss"]) <= 1e-5 and abs(got[1] - test["accuracy"]) <= 1e-5, (got, test)
PY
fi

# SIGKILL of process 0 (the one that writes index.h5 and commits) in the middle of writing ckpt-16: DP, P=2.
victim_config kill_zero dp
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=300 launch kill_zero 2
wait_for 60 writing kill_zero/ckpt-16.partial || true
sleep 0.5
if find_victim kill_zero 0; then
  kill -9 "$victim"
  wait_job kill_zero "kill -9 of process 0 while it wrote ckpt-16"
  check "kill_zero: the kill landed mid-write of ckpt-16" test -d kill_zero/ckpt-16.partial -a ! -e kill_zero/ckpt-16
  check "kill_zero: latest still names the complete ckpt-8 ($(latest kill_zero))" \
    test "$(latest kill_zero)" = ckpt-8 -a -f kill_zero/ckpt-8/index.h5
  resumes_from kill_zero dp ckpt-8
  check "kill_zero: single-process resume finished at ckpt-16" \
    test "$(latest kill_zero)" = ckpt-16 -a ! -e kill_zero/ckpt-16.partial
fi

# A stuck peer: one process stopped (SIGSTOP); with comm.timeout_s=5 the others give up with a message.
# stuck NAME WHAT: after $job's process $victim was stopped (and is in `started`, so it never outlives
# the script): the job ends within 30 s, says why, and leaves the stopped process gone.
stuck() {
  wait_job "$1" "$2"
  check "$1: the error says a process gave up waiting: $(grep -a "dtrain: error" "$1.log" || tail -3 "$1.log")" \
    grep -Eqi "dtrain: error: .*(gave up|timeout)" "$1.log"
  # mpirun's SIGKILL of the stopped process may still be landing when mpirun returns (a loaded machine):
  # gone (or a zombie) within 10 s of the job's end.
  victim_gone() { ! kill -0 "$victim" 2>/dev/null || grep -q "^State:.*zombie" "/proc/$victim/status" 2>/dev/null; }
  local start took
  start=$(now)
  wait_for 10 victim_gone || true
  took=$(seconds_since "$start")
  check "$1: the stopped process ($victim) is gone within 10 s after the job ended ($took s)" victim_gone
  kill -CONT "$victim" 2>/dev/null || true
  kill -9 "$victim" 2>/dev/null || true
}
# Mid-training (no checkpoints).
victim_config stuck dp
launch stuck 2 --set train.epochs=100000 --set checkpoint.every=never --set comm.timeout_s=5
wait_for 60 has_metrics r_stuck || true
if find_victim stuck 1; then
  kill -STOP "$victim"
  started+=("$victim")
  stuck stuck "kill -STOP of process 1 mid-training"
fi
# mpirun itself killed mid-training: its processes end within seconds (OpenMPI's runtime ends them when
# their launcher is gone), not after the collective timeout (300 s here), and none trains on alone.
victim_config orphans dp
launch orphans 2 --set train.epochs=100000 --set checkpoint.every=never
wait_for 60 has_metrics r_orphans || true
if find_victim orphans 1; then
  kill -9 "$job"
  wait "$job" 2>/dev/null || true
  gone() { [[ -z $(rank_pid 0 "$dtrain train --config orphans.yaml") && -z $(rank_pid 1 "$dtrain train --config orphans.yaml") ]]; }
  start=$(now)
  wait_for 30 gone || true
  took=$(seconds_since "$start")
  check "orphans: the processes of a killed mpirun are gone within 10 s (after $took s)" eval 'gone && within "$took" 10'
  for pid in $(rank_pid 0 "$dtrain train --config orphans.yaml") $(rank_pid 1 "$dtrain train --config orphans.yaml"); do
    kill -9 "$pid"
  done
fi
# Mid-save: process 1 stopped while it writes its shards of ckpt-16 (SP, P=4); ckpt-8 stays the latest.
# (100 ms per dataset: process 0's part of a save, about 20 datasets, stays well under the 5 s timeout.)
victim_config stuck_save sp
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=100 launch stuck_save 4 --set comm.timeout_s=5
# The victim is found first, so that it is stopped the moment its shard file appears (its write takes
# well under a second).
if find_victim stuck_save 1; then
  wait_for 60 writing stuck_save/ckpt-16.partial/shard-2-of-8.h5 || true
  kill -STOP "$victim"
  started+=("$victim")
  stuck stuck_save "kill -STOP of process 1 while it wrote its shards of ckpt-16"
  # Stopped mid-write, process 1 never sent its digests: ckpt-8 stays the latest. A stop that lands just
  # after process 1 posted them may still let process 0 commit the (complete) ckpt-16. Either way latest
  # names a whole checkpoint.
  check "stuck_save: latest names a whole checkpoint ($(latest stuck_save))" \
    "$dtrain" inspect --verify "stuck_save/$(latest stuck_save)"
fi

# Nothing this script started is left running (its dtrain processes are the ones working in $work).
sleep 0.5
left=$(for pid in $(pgrep -f -- "^$dtrain " || true); do
  [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$work" ]] || continue
  grep -q "^State:.*zombie" "/proc/$pid/status" 2>/dev/null || ps -o pid=,stat=,args= -p "$pid" || true
done)
check "no dtrain process of this script is left behind: $left" test -z "$left"

report
