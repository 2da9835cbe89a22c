#!/usr/bin/env bash
# The main job on a fresh machine: installs, builds, gets MNIST (the official files, or Fashion-MNIST from
# Debian's dataset-fashion-mnist when offline) and trains configs/mnist_keras_dp.yaml on 8 virtual devices.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build

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
