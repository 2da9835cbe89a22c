#!/usr/bin/env bash
# Installs the Debian packages dtrain needs to build and test (idempotent; silent when all are there).
# `scripts/setup.sh --test` also installs what the end-to-end tests read checkpoints and plots with (h5py,
# matplotlib), make test hosts with (iproute2, iptables: scripts/hosts.sh), emulate other CPUs with (qemu-user:
# tests/e2e/cpu_kernels.sh), run a private one-node Slurm with (slurmctld, slurmd, slurm-client: tests/e2e/slurm_cli.sh), and PyPI's readers of TensorBoard, ONNX and safetensors files (scripts/python_env.sh): without them those parts of the tests would be SKIPPED; `--bench` the peers the benchmarks compare against (numpy, PyTorch, sklearn) as well.
set -euo pipefail

packages=(cmake g++ make libcli11-dev libyaml-cpp-dev libeigen3-dev libhdf5-dev libfmt-dev doctest-dev libxxhash-dev libre2-dev pkg-config
          libboost-context-dev libboost-dev libopenmpi-dev openmpi-bin zlib1g-dev libpng-dev libjpeg62-turbo-dev hdf5-tools python3 curl ca-certificates)
# protobuf: `dtrain export --onnx` writes ONNX's model format, and every run TensorBoard's event files
packages+=(libprotobuf-dev protobuf-compiler)
case "${1:-}" in
  --test) packages+=(python3-h5py python3-matplotlib python3-venv iproute2 iptables qemu-user slurmctld slurmd slurm-client) ;;
  --bench) packages+=(python3-h5py python3-matplotlib python3-numpy python3-torch libopenblas0-pthread python3-sklearn) ;;
esac

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ ${1:-} == --test ]] && scripts/python_env.sh
exit 0
