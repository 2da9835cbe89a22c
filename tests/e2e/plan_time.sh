#!/usr/bin/env bash
# End-to-end: plan's step-time side on the real binary: --calibrate writes its cache (and reads it back),
# --cluster FILE reads a cluster and refuses a bad one at FILE:LINE:COL, a run's metrics.jsonl records its
# peak memory and plan's predictions, and --compare sets them beside its measurements (exit 2 when there are none).
# Usage: plan_time.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
export XDG_CACHE_HOME="$work/cache"

# --calibrate: the rates, the CPU's name, and a cache named by the CPU and the build.
expect 0 "gemm 128x784x700 .*GFLOP/s" -- plan --calibrate
check "--calibrate names the CPU" grep -q "measured on $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" out
check "--calibrate caches one file" test "$(ls cache/dtrain/calibration-*.json | wc -l)" = 1
check "the cache is JSON with the rates" grep -q '"in_process": {"latency_s": ' cache/dtrain/calibration-*.json
expect 2 "plan: give one of --calibrate, --cluster FILE and --compare RUN_DIR" -- plan --calibrate --compare x
expect 2 "plan: --config is required" -- plan
# Under mpirun -np 2 it adds the link between the processes (its engine-overhead model, one device, runs in each
# process: it was refused as a mesh of 1 device that 2 processes cannot share).
if mpi_runnable "$dtrain"; then
  rc=0
  timeout 300 mpirun --oversubscribe -np 2 "$dtrain" plan --calibrate </dev/null >out 2>&1 || rc=$?
  check "mpirun -np 2 dtrain plan --calibrate exits 0 (got $rc): $(tail -3 out)" test "$rc" = 0
  check "mpirun -np 2 --calibrate measures the processes' link" grep -qE "processes on host +latency [0-9.]+ us" out
  check "the cache holds the processes' link" grep -q '"processes": {"latency_s": ' cache/dtrain/calibration-*.json
else
  skip_part "mpirun -np 2 --calibrate: no mpirun, or dtrain built without MPI"
fi

# --cluster: the shipped example, a mesh of the wrong size, a bad file.
expect 0 "8 hosts x 8 processes x 1 GPU device = 64 devices, 80.00 GiB each" -- \
  plan --cluster "$source_dir/configs/clusters/h100_8x8.yaml"
check "the example's network link" grep -q "link between hosts: 50.0 GB/s, latency 10.0 us" out
printf 'hosts: 2\ndevice:\n  kind: gpu\n  flops: 1 TFLOPS\n' >bad.yaml
expect 2 "dtrain: error: bad.yaml:4:10: flops: expected a rate such as '67 TFLOP/s'" -- plan --cluster bad.yaml
printf 'hosts: 2\nprocess_per_host: 2\n' >typo.yaml
expect 2 "typo.yaml:2:1: unknown key 'process_per_host' in the cluster .*did you mean 'processes_per_host'" -- \
  plan --cluster typo.yaml
expect 2 "cannot read the file" -- plan --cluster missing.yaml
printf 'hosts: 1\nprocesses_per_host: 2\n' >two.yaml
cat >tiny.yaml <<'YAML'
mesh: {dims: {batch: 4}}
data:
  dataset: arrays
  path: npy
  arrays: {train: {features: train_x.npy, labels: train_y.npy}, test: {features: test_x.npy, labels: test_y.npy}}
  batch_size: 8
model:
  - {flatten: {}}
  - {dense: 4}
train: {epochs: 2, optimizer: {sgd: {learning_rate: 0.05}}, log_every: 2}
checkpoint: {dir: ckpt, every: never}
run_dir: run
YAML

# A run: its epoch and end rows carry the peak memory; --compare wants predictions in its run row.
PYTHONPATH="$lib" python3 - <<'PY'
import os, random, struct
from npy_file import npy
random.seed(3)
os.makedirs("npy")
for split, count in (("train", 64), ("test", 16)):
    labels = [random.randrange(4) for _ in range(count)]
    pixels = bytes(random.randrange(0, 100) + (150 if k % 4 == l else 0) for l in labels for k in range(16))
    npy(f"npy/{split}_x.npy", "|u1", (count, 4, 4), pixels)
    npy(f"npy/{split}_y.npy", "<i8", (count,), struct.pack(f"<{count}q", *labels))
PY
expect 2 "tiny.yaml:1:[0-9]+: mesh.dims: the mesh has 4 devices, the cluster 2" -- plan --config tiny.yaml --cluster two.yaml
expect 0 "metrics: " -- train --config tiny.yaml
check "the epoch rows carry peak_rss_bytes" grep -Eq '"split": "train", .*"peak_rss_bytes": [1-9][0-9]{6,}' run/metrics.jsonl
check "the end row carries peak_rss_bytes" grep -Eq '"event": "end", .*"peak_rss_bytes": [1-9][0-9]{6,}' run/metrics.jsonl
check "the run row carries plan's predictions" grep -Eq '"event": "start".*"predicted_step_seconds": [0-9.e-]+.*"predicted_peak_bytes_per_process": [1-9]' run/metrics.jsonl
expect 0 "peak memory per process +[0-9.]+ [KMG]iB +[0-9.]+ [KMG]iB +[0-9.]+" -- plan --compare run
check "--compare shows examples/s" grep -Eq "examples/s +[0-9.]+ +[0-9.]+ +[0-9.]+" out
check "--compare counts the training steps" grep -q "(measured over 14 training steps)" out
expect 2 "plan --compare: no run dir 'nowhere'" -- plan --compare nowhere
expect 2 "has no metrics.jsonl" -- plan --compare npy
# A run row without predictions (a run of an older dtrain): said so.
mkdir old && sed '1s/, "predicted_[a-z_]*": [0-9.e+-]*//g' run/metrics.jsonl >old/metrics.jsonl
expect 2 "plan --compare: the run row of .*has no predictions" -- plan --compare old
report
