#!/usr/bin/env bash
# Packs a CUDA build for a GPU machine that has the CUDA libraries but none of dtrain's Debian packages:
# dtrain, dtrain_tests, libdtrain_cuda.so, bench_gpu_gemm and bench_train_step into OUT/, and the shared libraries they need from
# this machine (yaml-cpp, HDF5, fmt, OpenMPI, ...) into OUT/lib, leaving out the C library and every CUDA
# library (cudart, cuBLAS, NCCL, the driver: the GPU machine's own are used). scripts/gpu_check.sh runs it there.
#   scripts/gpu_bundle.sh [BUILD] [OUT]    (default: build build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"; out="${2:-build-gpu}"
rm -rf "$out"; mkdir -p "$out/lib"
programs=(dtrain dtrain_tests libdtrain_cuda.so bench_gpu_gemm bench_train_step)
for program in "${programs[@]}"; do cp "$build/$program" "$out/"; done
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libnccl)'
for program in "${programs[@]}"; do
  ldd "$build/$program" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] || cp -Ln "$path" "$out/lib/$name"
  done
done
strip --strip-debug "$out"/* "$out"/lib/* 2>/dev/null || true
du -sh "$out"
