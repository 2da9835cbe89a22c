#!/usr/bin/env bash
# End-to-end: runs lose nothing. SIGTERM, SIGINT or SIGHUP mid-training ends `dtrain train` after its step
# with exit 128 + signal and a committed checkpoint of that step, which `dtrain resume` continues; a second
# signal during that save kills it at once and the previous checkpoint still loads; under `mpirun -np 2` a
# SIGTERM to one process stops both at the same step; a loss that overflows exits 1 naming the step, with no
# checkpoint of it and metrics.jsonl still JSON; train.max_steps saves the step it stops at; eval counts
# every example on meshes that do not divide the last batch.
# Usage: train_stops.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
source "$lib/mnist_fixture.sh"  # data/, config() and dp/mp/sp.yaml (8 steps an epoch)

# drive.py LOG SIGNAL@WHEN... -- COMMAND...: runs COMMAND (output to LOG) with SIGINT, SIGTERM, SIGHUP, SIGUSR1 at
# their default actions, and sends each SIGNAL (TERM, INT, HUP, USR1; NAME:R: to $dtrain's process of MPI rank R,
# under mpirun) once WHEN holds, in order: WHEN is line:REGEX (an output line matches) or glob:PATTERN (a
# path matches that did not when the previous signal was sent). Prints "rc N" (-S: killed by signal S) and
# "seconds S" (from the last signal sent to the exit).
cat >drive.py <<'PY'
import glob, os, re, signal, subprocess, sys, threading, time
def rank_pid(rank):  # $dtrain's process of MPI rank `rank` working here, or None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0] != os.environ["DTRAIN"].encode():
                continue
            if os.readlink(f"/proc/{pid}/cwd") != os.getcwd():
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                return int(pid)
        except OSError:
            pass
    return None
log, rest = sys.argv[1], sys.argv[2:]
split = rest.index("--")
steps, command = [s.split("@", 1) for s in rest[:split]], rest[split + 1:]
def defaults():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(s, signal.SIG_DFL)
proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=defaults)
lines = []
def read():
    for line in proc.stdout:
        lines.append(line)
reader = threading.Thread(target=read)
reader.start()
sent, before = time.time(), set()
deadline = time.time() + 300
for name, when in steps:
    kind, what = when.split(":", 1)
    def holds():
        if kind == "line":
            return any(re.search(what, line) for line in list(lines))
        return bool(set(glob.glob(what)) - before)
    while not holds() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    if proc.poll() is not None or not holds():
        print(f"never saw {when}", file=sys.stderr)
        break
    before = set(glob.glob(what)) if kind == "glob" else set()
    name, _, rank = name.partition(":")
    target = rank_pid(int(rank)) if rank else proc.pid
    if target is None:
        print(f"no process of rank {rank}", file=sys.stderr)
        break
    os.kill(target, getattr(signal, "SIG" + name))
    sent = time.time()
try:
    rc = proc.wait(timeout=300)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = proc.wait()
seconds = time.time() - sent
reader.join()
open(log, "w").write("".join(lines))
print(f"rc {rc}\nseconds {seconds:.2f}")
PY
# drive LOG SIGNAL@WHEN... -- ARGS...: drive.py's lines, in $rc and $seconds.
drive() {
  local result
  result=$(DTRAIN=$dtrain python3 drive.py "$@")
  rc=$(sed -n 's/^rc //p' <<<"$result")
  seconds=$(sed -n 's/^seconds //p' <<<"$result")
}
stopped_step() { sed -nE 's/.*stopping after step ([0-9]+): .*/\1/p' "$1" | head -1; }
valid_json() {  # every line of $1 is a JSON object with no NaN or Infinity
  python3 - "$1" <<'PY'
import json, sys
def refuse(constant):
    raise ValueError(f"{constant} is not JSON")
for number, line in enumerate(open(sys.argv[1]), 1):
    assert isinstance(json.loads(line, parse_constant=refuse), dict), f"line {number}: {line}"
PY
}

# The signal tests train a wider model (dense 1024: about 10 ms a step here), so that the ranks look for a
# signal after every step (they look about every 5 ms of training) and a stop lands mid-epoch.
wide=(--set model.0.dense=1024)

# One signal while the checkpoint of epoch 1 (step 8) is written (each dataset write sleeps 100 ms): that save
# completes, the next step (9, or a few more when steps are fast) finishes, is saved and committed; the exit
# code tells the signal; resume continues from that step to the end of its epoch.
for pair in TERM:143 INT:130 HUP:129; do
  sig=${pair%:*} code=${pair#*:}
  DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=100 drive "$sig.log" "$sig@glob:ck_$sig/ckpt-8.partial" -- "$dtrain" train \
    --config dp.yaml "${wide[@]}" --set train.epochs=50 --set train.log_every=1 --set checkpoint.dir="ck_$sig" \
    --set train.eval_every_epoch=true --run-dir "run_$sig"
  step=$(stopped_step "$sig.log")
  step=${step:-0}
  echo "SIG$sig: stopped after step $step"
  check "SIG$sig: exit $code, not $rc: $(tail -3 "$sig.log")" test "$rc" = "$code"
  check "SIG$sig: the stop notice names SIG$sig: $(tail -3 "$sig.log")" grep -q "stopping after step $step: SIG$sig received" "$sig.log"
  check "SIG$sig: stopped after step $step, past 8" test "$step" -ge 9
  check "SIG$sig: latest is ckpt-$step ($(latest "ck_$sig"))" test "$(latest "ck_$sig")" = "ckpt-$step"
  if ((step % 8 != 0)); then
    check "SIG$sig: epoch $((step / 8 + 1)) not reported done" test -z "$(grep "^epoch $((step / 8 + 1)) done" "$sig.log")"
  fi
  check "SIG$sig: metrics.jsonl is JSON" valid_json "run_$sig/metrics.jsonl"
  # The summary's test result is epoch 1's (tested after each epoch here): it says so, and that the run
  # stopped later (issue 28).
  if ((step > 8)); then
    check "SIG$sig: the test result names its step and the later stop: $(grep '^test accuracy' "$sig.log" || true)" \
      grep -Eq "^test accuracy: [0-9.]+ \(loss [0-9.]+, 128 examples; evaluated at step 8, epoch 1; the run stopped later, at step $step\)$" "$sig.log"
  fi
  end=$((step / 8 + 1))
  where="epoch $end, batch $((step % 8)) done"  # 1-based, as the console counts epochs
  ((step % 8 == 0)) && where="the end of epoch $((step / 8))"
  expect 0 "resuming ck_$sig/ckpt-$step \(step $step, $where, " -- resume --config dp.yaml "${wide[@]}" --set checkpoint.dir="ck_$sig" \
    --set train.epochs=$end --run-dir "run_$sig"
  check "SIG$sig: resumed to ckpt-$((8 * end)) ($(latest "ck_$sig"))" test "$(latest "ck_$sig")" = "ckpt-$((8 * end))"
done

# A second SIGTERM while the stop's checkpoint is written (each dataset write sleeps 300 ms): the process dies
# of it at once, leaving the last committed checkpoint (ckpt-8) as it was.
DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=300 drive twice.log "TERM@glob:ck2/ckpt-8.partial" "TERM@glob:ck2/ckpt-*.partial" \
  -- "$dtrain" train --config dp.yaml "${wide[@]}" --set train.epochs=50 --set train.log_every=1 --set checkpoint.dir=ck2 \
  --run-dir run2
step=$(stopped_step twice.log)
check "second SIGTERM: killed by it (rc -15), not rc $rc: $(tail -3 twice.log)" test "$rc" = -15
check "second SIGTERM: dead within 2 s, not $seconds s" python3 -c "assert $seconds < 2"
check "second SIGTERM: latest still ckpt-8, not $(latest ck2)" test "$(latest ck2)" = ckpt-8
check "second SIGTERM: it came during the save of ckpt-${step:-?}" test -n "$step" -a -d "ck2/ckpt-$step.partial"
check "second SIGTERM: ckpt-${step:-?} never committed" test -n "$step" -a ! -e "ck2/ckpt-$step"
expect 0 "accuracy" -- eval --config dp.yaml "${wide[@]}" --checkpoint ck2
expect 0 "resuming ck2/ckpt-8 " -- resume --config dp.yaml "${wide[@]}" --set checkpoint.dir=ck2 --run-dir run2
check "after the kill, resume finished at ckpt-16" test "$(latest ck2)" = ckpt-16

# Under `mpirun -np 2`, SIGTERM to process 1 alone (while ckpt-8 is written): both processes stop after the
# same step (the save of it is collective, so it is committed only if they do), and the job fails.
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=100 drive mpi.log "TERM:1@glob:ck_mpi/ckpt-8.partial" -- timeout 120 mpirun \
    --oversubscribe -x DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS -np 2 "$dtrain" train --config dp.yaml "${wide[@]}" \
    --set train.epochs=50 --set train.log_every=1 --set checkpoint.dir=ck_mpi --run-dir run_mpi </dev/null
  step=$(stopped_step mpi.log)
  step=${step:-0}
  echo "2 processes, SIGTERM to process 1: stopped after step $step, mpirun exited $rc"
  check "mpi: the job exits 143, not $rc: $(tail -3 mpi.log)" test "$rc" = 143
  check "mpi: process 0 tells process 1's SIGTERM: $(tail -3 mpi.log)" grep -q "stopping after step $step: SIGTERM received" mpi.log
  check "mpi: stopped after step $step, past 8" test "$step" -ge 9
  check "mpi: latest is ckpt-$step ($(latest ck_mpi))" test "$(latest ck_mpi)" = "ckpt-$step"
  end=$((step / 8 + 1))
  expect 0 "resuming ck_mpi/ckpt-$step " -- resume --config dp.yaml "${wide[@]}" --set checkpoint.dir=ck_mpi \
    --set train.epochs=$end --run-dir run_mpi
  check "mpi: resumed in one process to ckpt-$((8 * end)) ($(latest ck_mpi))" test "$(latest ck_mpi)" = "ckpt-$((8 * end))"
  # SIGUSR1 to mpirun itself (mpirun ends a job at once on SIGTERM or SIGINT; SIGUSR1 it forwards to every
  # process): the job stops after one step everywhere, saves it and exits 138.
  DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS=100 drive usr1.log "USR1@glob:ck_usr1/ckpt-8.partial" -- mpirun \
    --oversubscribe -x DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS -np 2 "$dtrain" train --config dp.yaml "${wide[@]}" \
    --set train.epochs=50 --set train.log_every=1 --set checkpoint.dir=ck_usr1 --run-dir run_usr1 </dev/null
  step=$(stopped_step usr1.log)
  check "usr1: mpirun exits 138, not $rc: $(tail -3 usr1.log)" test "$rc" = 138
  check "usr1: stopped after step ${step:-none}, saved as latest ($(latest ck_usr1))" \
    test -n "$step" -a "$(latest ck_usr1)" = "ckpt-${step:-none}"
  expect 0 "verdict: intact: step $step " -- inspect --verify ck_usr1
else
  echo "skipped: the 2-process case (no mpirun, or $dtrain was built without MPI)"
fi

# A loss that overflows (SGD's learning rate raised to 1e30 after a normal first epoch; saving every step):
# exit 1 naming the step; that step has no checkpoint, the one before is the latest; metrics.jsonl stays JSON.
expect 0 "test accuracy" -- train --config dp.yaml --set train.epochs=1 --set checkpoint.dir=ck_nan --run-dir run_nan \
  --set "train.optimizer={sgd: {learning_rate: 0.1}}" --set train.eval_every_epoch=true
expect 1 "the loss is not finite .* at step [0-9]+ \(epoch 2, batch [0-9]+ of 8\)" -- resume --config dp.yaml \
  --set "train.optimizer={sgd: {learning_rate: 1.0e+30}}" --set checkpoint.dir=ck_nan --set checkpoint.every=1 \
  --run-dir run_nan
bad_step=$(sed -nE 's/.*at step ([0-9]+) \(epoch.*/\1/p' out | head -1)
check "NaN: no checkpoint of step ${bad_step:-?}" test -n "$bad_step" -a ! -e "ck_nan/ckpt-$bad_step"
check "NaN: latest is the step before (ckpt-$((${bad_step:-1} - 1)), not $(latest ck_nan))" \
  test "$(latest ck_nan)" = "ckpt-$((${bad_step:-1} - 1))"
check "NaN: metrics.jsonl is JSON" valid_json run_nan/metrics.jsonl
check "NaN: no nan in metrics.jsonl's numbers" test -z "$(grep -iE '(: |\[)-?nan' run_nan/metrics.jsonl)"

# train.max_steps mid-epoch: that step is saved; epoch 2 is not reported done; resume goes on from it.
expect 0 "stopped at train.max_steps = 11 \(epoch 2, batch 3 of 8\)" -- train --config dp.yaml --set train.max_steps=11 \
  --set checkpoint.dir=ck_max --run-dir run_max
check "max_steps: latest is ckpt-11 ($(latest ck_max))" test "$(latest ck_max)" = ckpt-11
check "max_steps: epoch 2 not reported done" test -z "$(grep '^epoch 2 done' out)"
check "max_steps: test accuracy reported" grep -q "^test accuracy" out
check "max_steps: metrics.jsonl is JSON" valid_json run_max/metrics.jsonl
check "max_steps: metrics.jsonl has epoch 1's train line, no epoch 2 train line" python3 - <<'PY'
import json
lines = [json.loads(l) for l in open("run_max/metrics.jsonl")]
train = [l for l in lines if l["split"] == "train"]
assert [l["epoch"] for l in train] == [1], lines  # epochs are 1-based, as on the console
PY
expect 0 "resuming ck_max/ckpt-11 " -- resume --config dp.yaml --set checkpoint.dir=ck_max --run-dir run_max
check "max_steps: resumed to ckpt-16" test "$(latest ck_max)" = ckpt-16
# The epoch resumed mid-way reports the whole epoch (issue 28): its row equals the uninterrupted run's.
expect 0 "test accuracy" -- train --config dp.yaml --set checkpoint.dir=ck_whole --run-dir run_whole
check "the resumed epoch 2's train row equals the uninterrupted run's" python3 - <<'PY'
import json
def epoch2(path):
    rows = [json.loads(l) for l in open(path)]
    return [r for r in rows if r["split"] == "train" and r["epoch"] == 2][-1]
resumed, whole = epoch2("run_max/metrics.jsonl"), epoch2("run_whole/metrics.jsonl")
assert resumed["examples"] == whole["examples"] == 512, (resumed, whole)
assert abs(resumed["loss"] - whole["loss"]) <= 1e-9 and abs(resumed["accuracy"] - whole["accuracy"]) <= 1e-9, (resumed, whole)
PY

# Eval of 100 test examples (a last batch of 36, which 8 batch shards do not divide) counts all 100 on every
# mesh, with the one-device loss and accuracy.
for name in dp mp sp one; do
  extra=()
  [[ $name == one ]] && extra=(--set "mesh.dims={batch: 1}")
  config=$name
  [[ $name == one ]] && config=dp
  expect 0 "\(100 examples\)" -- eval --config $config.yaml --checkpoint ck_max --set "data.test_split=test[:100]" "${extra[@]}"
  check "eval on $name names no skipped examples" test -z "$(grep -i skip out)"
  sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+) .*/\1 \2/p' out >"eval_$name"
done
check "eval on dp, mp, sp equals one device's within 1e-5" python3 - <<'PY'
one = [float(v) for v in open("eval_one").read().split()]
assert len(one) == 2 and one[1] > 0, one
for name in ("dp", "mp", "sp"):
    other = [float(v) for v in open(f"eval_{name}").read().split()]
    assert len(other) == 2 and all(abs(a - b) <= 1e-5 for a, b in zip(one, other)), (name, one, other)
PY

report
