#!/usr/bin/env bash
# The main job on a fresh machine: installs, builds the dtrain binary, gets MNIST (the official files, or
# Fashion-MNIST from Debian's dataset-fashion-mnist when offline) and trains configs/mnist_keras_dp.yaml on 8
# virtual devices.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The binary alone: the tests, benchmarks and CUDA kernels are built by scripts/test.sh (or `cmake --build build`);
# the CUDA backend too when this machine has a GPU to run it.
targets=(dtrain)
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && targets+=(dtrain_cuda)
scripts/build.sh build "${targets[@]}"

data_dir=data/mnist
if ! scripts/fetch_data.sh mnist "$data_dir"; then
  echo "dtrain.sh: no network for MNIST; training on Fashion-MNIST from Debian's dataset-fashion-mnist instead"
  if ! dpkg-query -W -f='${Status}' dataset-fashion-mnist 2>/dev/null | grep -q "ok installed"; then
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get install -y -qq dataset-fashion-mnist >/dev/null
  fi
  data_dir=/usr/share/datasets/fashion-mnist
fi
build/dtrain train --config configs/mnist_keras_dp.yaml --set data.path="$data_dir" --overwrite "$@"
