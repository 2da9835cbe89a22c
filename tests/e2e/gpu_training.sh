#!/usr/bin/env bash
# End-to-end: `mesh.devices: gpu`. The MNIST tutorial's data-parallel shape (configs/mnist_core_dp.yaml, narrower,
# on the small generated MNIST set) trains a few steps on the GPU with the CPU run's losses (1e-4 relative) and
# accuracy, saves a checkpoint that `dtrain eval` reads on the CPU, and `dtrain plan` shows the GPU memory of a
# step. train.precision bf16 gives the CPU bf16 run's losses (1%); a profiled run's trace times every kernel call
# by CUDA events (the CPU trace's products per device and step); plan and train check each GPU's free memory. Exit 77 (skipped) when `nvidia-smi -L` lists no GPU or this dtrain has no CUDA.
# Usage: gpu_training.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib/tally.sh"

command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "skipped: nvidia-smi -L shows no GPU"
  exit 77
fi
dtrain=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

source "$here/lib/cli.sh"  # expect, check
source "$here/lib/mnist_fixture.sh"  # data/

# gpu_config NAME DEVICES MESH: mnist_core_dp's model (784-64-32-10, Glorot, Adam 1e-3, mean loss), 6 steps, each
# a row of metrics.jsonl (log_every: 1; the default, 100, would leave none to compare).
gpu_config() {
  cat >"$1.yaml" <<YAML
mesh: {dims: $3, devices: $2}
data: {dataset: mnist, path: data, batch_size: 64, shuffle: {seed: 0}, image_shape: flat, layout: [batch, unsharded]}
model:
  - {dense: 64, activation: relu, init: {glorot_uniform: {seed: [22, 23]}}}
  - {dense: 32, activation: relu, init: {glorot_uniform: {seed: [22, 23]}}}
  - {dense: 10, init: {glorot_uniform: {seed: [22, 23]}}}
train: {epochs: 1, max_steps: 6, log_every: 1, optimizer: {adam: {learning_rate: 0.001}}}
checkpoint: {dir: $1-ckpt, every: epoch, max_to_keep: 1}
run_dir: $1-run
YAML
}

gpu_config cpu cpu "{batch: 2}"
gpu_config gpu gpu "{batch: 2}"
"$dtrain" train --config cpu.yaml >cpu.out 2>&1 || { cat cpu.out; bad "the CPU run failed"; report; exit; }
rc=0
"$dtrain" train --config gpu.yaml >gpu.out 2>&1 || rc=$?
if grep -q "built without CUDA" gpu.out; then echo "skipped: this dtrain has no CUDA"; exit 77; fi
check "the GPU run exits 0 ($(tail -3 gpu.out))" test "$rc" = 0
check "the GPU run says which GPU each device runs on" grep -q "on cuda:0" gpu.out

# The per-step losses and the accuracy of metrics.jsonl, CPU vs GPU.
cat >compare.py <<'PY'
import json, sys
def rows(path):
    steps, train = [], []
    for line in open(path):
        row = json.loads(line)
        if row.get("split") == "train_steps": steps.append(row)
        if row.get("split") == "train": train.append(row)
    return steps, train
cpu_steps, cpu_train = rows("cpu-run/metrics.jsonl")
gpu_steps, gpu_train = rows("gpu-run/metrics.jsonl")
ok = len(cpu_steps) == len(gpu_steps) > 0
for a, b in zip(cpu_steps, gpu_steps):
    ok = ok and a["step"] == b["step"] and abs(a["loss"] - b["loss"]) <= 1e-4 * max(1e-3, abs(a["loss"]))
    ok = ok and abs(a["accuracy"] - b["accuracy"]) <= 1e-6
for a, b in zip(cpu_train, gpu_train):
    ok = ok and abs(a["loss"] - b["loss"]) <= 1e-4 * max(1e-3, abs(a["loss"])) and a["accuracy"] == b["accuracy"]
if not ok:
    print("cpu", cpu_steps, cpu_train, "\ngpu", gpu_steps, gpu_train)
sys.exit(0 if ok else 1)
PY
check "the GPU run's losses and accuracy are the CPU run's" python3 compare.py

# train.precision bf16: the GPU's products take its bf16 tensor cores; the CPU's bf16 run rounds at the same
# points and multiplies in float32, so the losses agree up to float32 order and the bf16 roundings it flips (1%).
"$dtrain" train --config cpu.yaml --set train.precision=bf16 --set run_dir=cpu-bf16-run --set checkpoint.dir=cpu-bf16-ckpt \
  >cpu-bf16.out 2>&1 || { cat cpu-bf16.out; bad "the CPU bf16 run failed"; }
rc=0
"$dtrain" train --config gpu.yaml --set train.precision=bf16 --set run_dir=gpu-bf16-run --set checkpoint.dir=gpu-bf16-ckpt \
  >gpu-bf16.out 2>&1 || rc=$?
check "the GPU bf16 run exits 0 ($(tail -3 gpu-bf16.out))" test "$rc" = 0
cat >compare_bf16.py <<'PY'
import json, sys
def losses(path):
    return [row["loss"] for row in map(json.loads, open(path)) if row.get("split") == "train_steps"]
cpu, gpu = losses("cpu-bf16-run/metrics.jsonl"), losses("gpu-bf16-run/metrics.jsonl")
ok = len(cpu) == len(gpu) > 0 and all(abs(a - b) <= 1e-2 * abs(a) for a, b in zip(cpu, gpu))
print("cpu", cpu, "\ngpu", gpu)
sys.exit(0 if ok else 1)
PY
check "the GPU bf16 run's losses are the CPU bf16 run's (1%)" python3 compare_bf16.py

# The step timeline on GPU ranks: each kernel call timed by CUDA events on the rank's stream, on a track of its
# own, for each device and each traced step: the model's forward products (the CPU trace's too), the same calls
# on every device and step (SPMD), in launch order one after the other on the stream, with real durations.
"$dtrain" train --config cpu.yaml --profile 3:2 --set run_dir=cpu-prof-run --set checkpoint.dir=cpu-prof-ckpt \
  >cpu-prof.out 2>&1 || { cat cpu-prof.out; bad "the profiled CPU run failed"; }
rc=0
"$dtrain" train --config gpu.yaml --profile 3:2 --set run_dir=gpu-prof-run --set checkpoint.dir=gpu-prof-ckpt \
  >gpu-prof.out 2>&1 || rc=$?
check "the profiled GPU run exits 0 ($(tail -3 gpu-prof.out))" test "$rc" = 0
cat >compare_traces.py <<'PY'
import json, sys
def kernels(path):
    trace = json.load(open(path))
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    out = {}
    for e in trace["traceEvents"]:
        if e["ph"] != "X" or e["cat"] != "kernel":
            continue
        gpu = e["tid"] > 100000
        rank = e["tid"] - (100001 if gpu else 1)
        out.setdefault((gpu, rank, e["args"]["step"]), []).append(e)
    return names, out
_, cpu = kernels("cpu-prof-run/trace/process-0.trace.json")
names, gpu = kernels("gpu-prof-run/trace/process-0.trace.json")
problems = []
if any(key[0] for key in cpu): problems.append("a CPU run with GPU kernel events")
want = sorted((True, rank, step) for (_, rank, step) in cpu)
if not want or sorted(gpu) != want: problems.append(f"GPU kernel tracks {sorted(gpu)}, expected {want}")
for rank in (0, 1):
    if "CUDA events" not in names.get(100001 + rank, ""): problems.append(f"device {rank}: no CUDA events track")
shape = lambda e: (e["name"].replace("gemm_bf16", "gemm"), e["args"].get("m"), e["args"].get("n"), e["args"].get("k"))
forward = {("gemm/gemm", 32, 64, 784), ("gemm/gemm", 32, 32, 64), ("gemm/gemm", 32, 10, 32)}  # 64 rows on 2 devices
calls = {key: [e["name"] for e in events] for key, events in gpu.items()}
if len(set(map(tuple, calls.values()))) != 1: problems.append(f"devices or steps called other kernels: {calls}")
for (_, rank, step), events in gpu.items():
    gemms = {shape(e) for e in events if e["name"].startswith("gemm/")}
    cpu_gemms = {shape(e) for e in cpu.get((False, rank, step), []) if e["name"].startswith("gemm/")}
    if not forward <= gemms or not forward <= cpu_gemms:
        problems.append(f"device {rank} step {step}: forward products {sorted(forward)}: GPU {sorted(gemms)}, CPU {sorted(cpu_gemms)}")
    if not any(e["dur"] > 0 for e in events if e["name"].startswith("gemm/")): problems.append(f"device {rank} step {step}: no gemm took time")
    if not all(e["args"]["host_us"] > 0 for e in events): problems.append(f"device {rank} step {step}: a call without its host time")
    # One stream: each starts after the one launched before it ends (CUDA events resolve ~0.5 us: 2 us slack).
    for before, after in zip(events, events[1:]):
        if not (after["ts"] >= before["ts"] + before["dur"] - 2.0 and before["dur"] >= 0):
            problems.append(f"device {rank} step {step}: {after['name']} at {after['ts']} overlaps {before['name']} ({before['ts']}+{before['dur']})")
            break
print("\n".join(problems) if problems else f"ok: {sum(map(len, gpu.values()))} GPU kernel events")
sys.exit(1 if problems else 0)
PY
check "the GPU trace times each kernel call by CUDA events, the CPU's products per device and step" python3 compare_traces.py

# The GPU's checkpoint loads on the CPU, on another mesh.
sed 's/devices: gpu/devices: cpu/; s/{batch: 2}/{batch: 4}/' gpu.yaml >gpu_on_cpu.yaml
expect 0 "accuracy" -- eval --config gpu_on_cpu.yaml
expect 0 "per device at the step's peak" -- plan --config gpu.yaml
# The memory check on a GPU mesh: each GPU's free memory against the devices on it, in plan and before a run.
expect 0 "on cuda:0 \(2 devices of this process\): .*free: fits" -- plan --config gpu.yaml
# dense1 of 4,000,000 units: ~50 GB a device with its gradient and Adam's slots; 4 devices on the one GPU need
# more than a GPU has. Refused at dense1's units (the --set that gave them) with exit 2 before anything is allocated.
started=$(date +%s)
expect 2 "set model.0.dense=4000000: the run needs .* on cuda:0 \(4 devices x .* free, .* short" -- train --config gpu.yaml \
  --set model.0.dense=4000000 --set "mesh.dims={batch: 4}" --set run_dir=huge-run --set checkpoint.dir=huge-ckpt
check "the run too large for the GPU is refused within 30 s" test $(($(date +%s) - started)) -lt 30
check "the refused run wrote no checkpoint" test ! -e huge-ckpt
expect 2 "does not fit" -- plan --config gpu.yaml --set model.0.dense=4000000 --set "mesh.dims={batch: 4}"
report
