#!/usr/bin/env bash
# End-to-end: the CUDA backend is a library dtrain loads at run time. dtrain links no CUDA library, a CPU run loads
# none, and `devices: gpu` where the backend cannot be loaded is a config error (exit 2) at mesh.devices saying why.
# Usage: cuda_backend.sh DTRAIN [SOURCE_DIR]; $STALE_BACKEND and $NEEDS_ABSENT_BACKEND: ctest's stand-ins.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib/tally.sh"

command -v python3 >/dev/null || { echo "skipped: no python3 (the data set is generated with it)"; exit 77; }

dtrain=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
source "$here/lib/cli.sh"  # expect, check
source "$here/lib/mnist_fixture.sh"  # data/

cuda_libraries='libcudart|libcublas|libcublasLt|libnccl|libcuda\.so|libdtrain_cuda'
check "ldd dtrain lists no CUDA library" bash -c "! ldd '$dtrain' | grep -E '$cuda_libraries'"

# config NAME DEVICES: a few steps of a small MLP on the generated MNIST set.
config() {
  cat >"$1.yaml" <<YAML
mesh: {dims: {batch: 2}, devices: $2}
data: {dataset: mnist, path: data, batch_size: 32, image_shape: flat, layout: [batch, unsharded]}
model:
  - {dense: 16, activation: relu}
  - {dense: 10}
train: {epochs: 1, max_steps: 3, optimizer: {sgd: {learning_rate: 0.1}}}
checkpoint: {dir: $1-ckpt, every: epoch}
run_dir: $1-run
YAML
}
config cpu cpu
config gpu gpu

# A CPU run never opens the backend nor any CUDA library (the dynamic loader's own log of what it opens).
LD_DEBUG=files "$dtrain" train --config cpu.yaml >cpu.out 2>cpu.loads || { cat cpu.out cpu.loads | tail; bad "the CPU run failed"; }
check "the CPU run loads no CUDA library" bash -c "! grep -E 'file=.*($cuda_libraries)' cpu.loads"
check "the loader's log was read (it names libc)" grep -q 'file=libc\.so' cpu.loads

# Where the backend cannot be loaded, `devices: gpu` says why at mesh.devices (line 1), and exits 2.
rc=0
"$dtrain" train --config gpu.yaml >gpu.out 2>&1 || rc=$?
if grep -q "built without CUDA" gpu.out; then
  check "a build without CUDA says so at mesh.devices" grep -Eq "gpu\.yaml:1:[0-9]+: .*built without CUDA" gpu.out
  check "... and exits 2" test "$rc" = 2
  report
  exit
fi
unloadable() {  # unloadable LIBRARY PATTERN
  local rc=0
  DTRAIN_CUDA_LIBRARY=$1 "$dtrain" train --config gpu.yaml >"$work/out" 2>&1 || rc=$?
  if [[ $rc != 2 ]]; then
    bad "with DTRAIN_CUDA_LIBRARY=$1, devices: gpu exited $rc, expected 2: $(tail -3 "$work/out")"
  elif ! grep -Eq -- "gpu\.yaml:1:[0-9]+: .*devices: gpu, but the CUDA backend cannot be loaded: .*$2" "$work/out"; then
    bad "with DTRAIN_CUDA_LIBRARY=$1, the message does not match /$2/: $(tail -3 "$work/out")"
  else
    ok
  fi
}
# A library that is not there (a build of the `dtrain` target alone) is named, with how to build it.
unloadable "$work/missing/libdtrain_cuda.so" "$work/missing/libdtrain_cuda.so does not exist \(build it: cmake --build BUILD_DIR --target dtrain_cuda\)"
echo "not a library" >not_elf.so
unloadable "$work/not_elf.so" "not_elf.so: (invalid ELF header|file too short)"
# A library of another kind (no entry point), one of another version, one that needs a missing library.
libc=$(ldd "$dtrain" | awk '/libc\.so/ {print $3}')
unloadable "$libc" "has no dtrain_cuda_backend"
unloadable "${STALE_BACKEND:-stale backend not given}" "is from another build of dtrain \(backend version"
unloadable "${NEEDS_ABSENT_BACKEND:-needs-absent backend not given}" \
  "libdtrain_absent_dependency\.so: cannot open shared object file"

# The real backend, beside dtrain: it loads here; without a GPU (or a driver) there is no device to use.
if [[ $rc == 0 ]]; then
  check "the GPU run says which GPU each device runs on" grep -q "on cuda:0" gpu.out
else
  check "without a GPU, devices: gpu exits 2 ($(tail -1 gpu.out))" test "$rc" = 2
  check "... saying no CUDA device is visible" grep -Eq "gpu\.yaml:1:[0-9]+: .*no CUDA device is visible" gpu.out
fi
report
