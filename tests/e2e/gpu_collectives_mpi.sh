#!/usr/bin/env bash
# End-to-end: the GPU communicators across processes (NCCL between processes, device memory inside each):
# test_gpu_collectives.cpp's "needs 2 GPUs and MPI" case under `mpirun -np 2`, one GPU per process. Without
# mpirun, an MPI build, the test program or 2 GPUs: "skipped: ..." and exit 77 (ctest says SKIPPED).
# Usage: gpu_collectives_mpi.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
skip() {
  echo "skipped: $*"
  exit 77
}
dtrain=$(realpath "$1")
tests="$(dirname "$dtrain")/dtrain_tests"
[[ -x "$tests" ]] || skip "no dtrain_tests next to $dtrain"
command -v mpirun >/dev/null || skip "no mpirun on PATH"
command -v nvidia-smi >/dev/null || skip "no GPU (no nvidia-smi)"
gpus=$(nvidia-smi --list-gpus 2>/dev/null | grep -c '^GPU' || true)
((gpus >= 2)) || skip "$gpus GPU(s); 2 needed (NCCL takes one GPU per process)"
cache="$(dirname "$dtrain")/CMakeCache.txt"
grep -Eqi '^DTRAIN_WITH_MPI:BOOL=(ON|TRUE|1|YES)$' "$cache" 2>/dev/null || skip "built without MPI"
grep -Eqi '^DTRAIN_WITH_CUDA:BOOL=(ON|TRUE|1|YES)$' "$cache" 2>/dev/null || skip "built without CUDA"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
output=$(timeout 600 mpirun --oversubscribe -np 2 "$tests" --source-file='*/test_gpu_collectives.cpp' \
  '--test-case=needs 2 GPUs and MPI*' --no-intro --no-version 2>&1) || {
  echo "$output"
  echo "FAILED: the NCCL collectives under mpirun -np 2"
  exit 1
}
echo "$output"
if grep -q "skipped: " <<<"$output"; then skip "the test case skipped itself"; fi
grep -q "Status: SUCCESS" <<<"$output" || { echo "FAILED: no success line"; exit 1; }
echo "passed: every collective across 2 processes equals plain loops over the inputs"
