#!/usr/bin/env bash
# End-to-end: `mesh.devices: gpu`. The MNIST tutorial's data-parallel shape (configs/mnist_core_dp.yaml, narrower,
# on the small generated MNIST set) trains a few steps on the GPU with the CPU run's losses (1e-4 relative) and
# accuracy, saves a checkpoint that `dtrain eval` reads on the CPU, and `dtrain plan` shows the GPU memory of a
# step. Exit 77 (skipped) when `nvidia-smi -L` lists no GPU or this dtrain has no CUDA.
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

# The GPU's checkpoint loads on the CPU, on another mesh.
sed 's/devices: gpu/devices: cpu/; s/{batch: 2}/{batch: 4}/' gpu.yaml >gpu_on_cpu.yaml
expect 0 "accuracy" -- eval --config gpu_on_cpu.yaml
expect 0 "GPU memory of that step" -- plan --config gpu.yaml
report
