#!/usr/bin/env bash
# End-to-end: the step timeline. `dtrain train --profile START:STEPS` (and resume) on small generated MNIST-format
# files writes RUN_DIR/trace/process-P.trace.json, Chrome trace-event JSON that /usr/bin/python3's json reads, with
# a host track and one track per device holding exactly the traced steps, kernel events, collectives and the
# epoch's checkpoint save (with checkpoint.async too); a run that ends before START writes none; a bad --profile
# is a usage error. Under
# `mpirun -np 2`, one trace per process whose collectives say whether they crossed processes (as their groups
# do). scripts/plot_trace.py draws its summary PNG.
# Usage: profile_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
source "$lib/start.sh"
source "$lib/mnist_fixture.sh"  # data/, dp/mp/sp.yaml (run_dir: run, 8 steps an epoch, 2 epochs)

python=/usr/bin/python3
[[ -x $python ]] || python=python3

# check_trace FILE PROCESS PROCESSES DEVICES STEPS...: the trace of process PROCESS of PROCESSES (each holding
# DEVICES devices) holds steps STEPS on its host track and on each of its device tracks, with kernels and
# collectives inside them, each collective marked crossed exactly when its group spans processes.
check_trace() {
  "$python" - "$@" <<'PY'
import json, sys
path, process, processes, devices = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
steps = [int(s) for s in sys.argv[5:]]
trace = json.load(open(path))
events = trace["traceEvents"]
problems = []
names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
first = process * devices
want = {0: "host (steps)"}
want.update({rank + 1: f"device {rank} (cpu)" for rank in range(first, first + devices)})
if names != want: problems.append(f"tracks {names}, expected {want}")
complete = [e for e in events if e["ph"] == "X"]
if any(e["pid"] != process for e in events): problems.append("an event of another pid")
if any(not (e["ts"] >= 0 and e["dur"] >= 0) for e in complete): problems.append("an event with ts or dur < 0")
crossed = {True: 0, False: 0}
for tid in want:
    track = [e for e in complete if e["tid"] == tid]
    got = sorted(e["args"]["step"] for e in track if e["cat"] == "step")
    if got != steps: problems.append(f"track {tid}: steps {got}, expected {steps}")
    if any(e["args"]["step"] not in steps for e in track): problems.append(f"track {tid}: an event outside the steps")
    if tid == 0: continue
    cats = {e["cat"] for e in track}
    for needed in ("kernel", "collective", "data"):
        if needed not in cats: problems.append(f"track {tid}: no {needed} event")
    for e in track:
        if e["cat"] == "collective":
            spans = len({rank // devices for rank in e["args"]["group"]}) > 1
            if e["args"]["crossed_processes"] != spans: problems.append(f"track {tid}: {e} crossed is wrong")
            crossed[spans] += 1
        if e["cat"] == "kernel" and "/" not in e["name"]: problems.append(f"track {tid}: kernel {e['name']}")
if processes > 1 and crossed[True] == 0: problems.append("no collective crossed processes")
if crossed[False] == 0: problems.append("no collective stayed in the process")
print("\n".join(problems) if problems else "ok")
sys.exit(1 if problems else 0)
PY
}
# has_save FILE STEP: in STEP, a checkpoint save on every device track holding its shard write, and the commit
# on device 0's.
has_save() {
  "$python" -c '
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X" and e["args"]["step"] == int(sys.argv[2])]
tids = {e["tid"] for e in events if e["tid"] > 0}
def on(name): return {e["tid"] for e in events if e["name"] == name and e["cat"] == "checkpoint"}
sys.exit(0 if tids and on("checkpoint save") == tids and on("write shards") == tids and on("commit") == {1} else 1)' "$@"
}

# Steps 7..9 of 16 on {batch: 8}: the first epoch's checkpoint save is at step 8.
expect 0 "test accuracy" -- train --config dp.yaml --profile 7:3
check "the trace file is written" test -f run/trace/process-0.trace.json
check "trace: 8 device tracks and the host's, steps 7-9, kernels and collectives" \
  check_trace run/trace/process-0.trace.json 0 1 8 7 8 9
check "trace: the epoch's checkpoint save in step 8 (shard writes, the commit)" has_save run/trace/process-0.trace.json 8
check "no partial file left" test ! -e run/trace/process-0.trace.json.partial

# The summary PNG and its table.
if "$python" -c "import matplotlib" 2>/dev/null; then
  check "plot_trace.py runs" "$python" "$source_dir/scripts/plot_trace.py" run/trace/process-0.trace.json trace.png
  "$python" "$source_dir/scripts/plot_trace.py" run/trace/process-0.trace.json trace.png >table.txt 2>&1 || true
  check "plot_trace.py writes a PNG" "$python" -c 'import sys; sys.exit(open("trace.png", "rb").read(8) != b"\x89PNG\r\n\x1a\n")'
  check "plot_trace.py prints a row per device" test "$(grep -c '^device ' table.txt)" = 8
  check "plot_trace.py prints the categories" grep -q "compute ops.*collectives.*data wait.*checkpoint.*other" table.txt
else
  skip_part "no matplotlib for $python"
fi

# checkpoint.async: the step's stall (the snapshot, the wait for the save before) on every device track.
rm -rf run ckpt
expect 0 "test accuracy" -- train --config dp.yaml --set checkpoint.async=true --profile 7:3
check "checkpoint.async: steps 7-9 traced" check_trace run/trace/process-0.trace.json 0 1 8 7 8 9
check "checkpoint.async: the save in step 8 and the waits on every device" "$python" -c '
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X" and e["tid"] > 0]
tids = {e["tid"] for e in events}
saves = {e["tid"] for e in events if e["name"] == "checkpoint save" and e["args"]["step"] == 8}
waits = {e["tid"] for e in events if e["name"] == "checkpoint wait"}
sys.exit(0 if len(tids) == 8 and saves == tids and waits == tids else 1)' run/trace/process-0.trace.json

# config keys do the same; a run that ends before the window writes nothing.
rm -rf run ckpt
expect 0 "test accuracy" -- train --config mp.yaml --set "train.profile={start_step: 2, steps: 1}"
check "train.profile: steps 2 on {batch: 4, model: 2}" check_trace run/trace/process-0.trace.json 0 1 8 2
rm -rf run ckpt
expect 0 "test accuracy" -- train --config dp.yaml --profile 17:2
check "a run of 16 steps traced from step 17 writes no trace" test ! -e run/trace

# resume goes on counting: steps 5 and 6 after a run stopped at step 4.
rm -rf run ckpt
expect 0 "" -- train --config dp.yaml --set train.max_steps=4
expect 0 "" -- resume --config dp.yaml --set train.max_steps=8 --profile 5:2
check "resume --profile 5:2 traces steps 5 and 6" check_trace run/trace/process-0.trace.json 0 1 8 5 6

# Bad flags: usage errors that name --profile.
expect 2 "--profile 0:2: expected START:STEPS" -- train --config dp.yaml --profile 0:2 --overwrite
expect 2 "--profile 3: expected START:STEPS" -- train --config dp.yaml --profile 3 --overwrite
expect 2 "--profile 3:x: expected START:STEPS" -- train --config dp.yaml --profile 3:x --overwrite
expect 2 "train.profile.steps" -- train --config dp.yaml --set "train.profile={start_step: 1, steps: 0}" --overwrite

# Two processes: a trace each, devices 0-3 and 4-7; the batch dim's groups cross processes, the model dim's do not.
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rm -rf run ckpt
  rc=0
  timeout 180 mpirun --oversubscribe -np 2 "$dtrain" train --config mp.yaml --profile 3:2 </dev/null >out 2>&1 || rc=$?
  check "mpirun -np 2 train --profile 3:2 exits 0 (rc $rc): $(tail -3 out)" test "$rc" = 0
  check "process 0's trace: devices 0-3, steps 3-4, crossed collectives marked" \
    check_trace run/trace/process-0.trace.json 0 2 4 3 4
  check "process 1's trace: devices 4-7, steps 3-4, crossed collectives marked" \
    check_trace run/trace/process-1.trace.json 1 2 4 3 4
else
  skip_part "no mpirun, or $dtrain was built without MPI"
fi

report
