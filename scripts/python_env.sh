#!/usr/bin/env bash
# The Python readers the end-to-end tests check dtrain's files with, from PyPI (TensorBoard's event reader,
# onnxruntime, safetensors): a virtual environment at .venv beside the sources, which sees Debian's Python
# packages too (h5py, numpy, matplotlib; numpy stays below 2, which their builds need). Idempotent; a test that finds a reader missing reports SKIPPED.
# Usage: scripts/python_env.sh [PACKAGE...]   (default: the list below)
set -euo pipefail
cd "$(dirname "$0")/.."
packages=("$@")
[[ ${#packages[@]} -gt 0 ]] || packages=(tensorboard onnx onnxruntime safetensors "numpy<2")
[[ -x .venv/bin/python ]] || /usr/bin/python3 -m venv --system-site-packages .venv
missing=()
for package in "${packages[@]}"; do
  .venv/bin/python -m pip show -q "$package" >/dev/null 2>&1 || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "python_env: installing ${missing[*]} into .venv"
# A machine without the index reachable keeps what it has: the tests that need a missing reader skip.
.venv/bin/python -m pip install -q --disable-pip-version-check "${missing[@]}" || echo "python_env: pip failed; tests that need ${missing[*]} will be SKIPPED"
