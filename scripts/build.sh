#!/usr/bin/env bash
# Configures and builds dtrain (Release) into build/ (or $1). The CUDA backend is built when nvcc is
# found (it is looked for in /usr/local/cuda too), as build/libdtrain_cuda.so beside dtrain, which loads it
# from there; MPI when OpenMPI is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
[[ -d /usr/local/cuda/bin ]] && export PATH="$PATH:/usr/local/cuda/bin"
launcher=()  # ccache, when installed, makes rebuilds in several build folders cheap
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
