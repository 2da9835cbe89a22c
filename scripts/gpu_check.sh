#!/usr/bin/env bash
# The GPU checks, on a GPU machine, from a bundle made by scripts/gpu_bundle.sh (run in the source tree):
# every "needs a GPU" unit case, the CUDA backend's own cases, tests/e2e/gpu_training.sh and the GPU GEMM
# benchmark. The CUDA libraries are the machine's (cuBLAS and NCCL looked for where CUDA and pip put them).
#   scripts/gpu_check.sh [BUNDLE]    (default: build-gpu); logs under $OUT when set
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=$(realpath "${1:-build-gpu}")
logs="${OUT:-/tmp/gpu_check}"; mkdir -p "$logs"
paths="$bundle/lib"
for library in libcublas.so.13 libnccl.so.2 libcudart.so.13; do
  found=$(find /usr/local/cuda* /usr/lib /opt -name "$library" 2>/dev/null | head -1)
  [[ -n $found ]] && paths="$paths:$(dirname "$found")" || echo "gpu_check: $library not found"
done
export LD_LIBRARY_PATH="$paths${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$bundle"  # the unit tests find ../configs from a folder in the source tree, as from build/
nvidia-smi -L
failed=0
run() {  # NAME COMMAND...: runs, logs, prints the verdict
  local name=$1; shift
  if "$@" >"$logs/$name.log" 2>&1; then echo "PASS $name"; else echo "FAIL $name (rc $?)"; failed=$((failed + 1)); tail -n 30 "$logs/$name.log"; fi
}
run needs_a_gpu "$bundle/dtrain_tests" "--test-case=needs a GPU*" --no-intro --no-version
grep -c "skipped:" "$logs/needs_a_gpu.log" | sed 's/^/  cases that skipped: /'
grep -E "test cases:|assertions:" "$logs/needs_a_gpu.log"
run cuda_backend "$bundle/dtrain_tests" --source-file=*/test_cuda_backend.cpp --no-intro --no-version
run gpu_collectives "$bundle/dtrain_tests" --source-file=*/test_gpu_collectives.cpp --no-intro --no-version
run gpu_training_e2e bash ../tests/e2e/gpu_training.sh "$bundle/dtrain" ..
run bench_gpu_gemm "$bundle/bench_gpu_gemm" --samples 3
tail -n 12 "$logs/bench_gpu_gemm.log"
echo "gpu_check: $failed failed"
exit $((failed > 0))
