#!/usr/bin/env bash
# Training throughput of the spatially partitioned CNN (configs/mnist_cnn_sp.yaml, issue 16) against PyTorch on
# the CPU, side by side in one run. The same model, batch 64 and Adam on every side:
#   dtrain mesh {batch: 4, spatial: 2} (the config's own: 8 devices, images cut into bands of rows),
#   dtrain mesh {batch: 1} and {batch: 8} (data.layout [batch, unsharded, unsharded, unsharded]),
#   dtrain `mpirun -np 2` on {batch: 4, spatial: 2} (2 processes x 4 devices, one core each; skipped without
#   mpirun or with NO_MPI=1),
#   PyTorch (bench/cnn_peer.py) on 1 and 2 threads, NCHW and channels_last.
# Each repetition runs every side once, one after the other (interleaved), REPS times, as the machine is shared
# and noisy. dtrain's figures come from bench_train_step (the trainer `dtrain train` runs, on the config's
# training split; its median and mean step after WARMUP steps), the peer's from its own median and mean step.
# Every figure printed is the median over the repetitions; the *_runs lists give each repetition's.
#
# Data: the MNIST IDX files under ../shared/data/mnist when present (both sides train on them), else generated
# pixels of the same shape (bench_train_step without --real-data; the peer's random pixels).
#
# Prints one JSON line per dtrain mesh against PyTorch: "peer_examples_per_s" is, in each repetition, the
# best of the four PyTorch runs (threads x memory format) of that repetition; "ratio" = dtrain / that, from
# the medians, "ratio_runs" per repetition (its runs were back to back) and "ratio_runs_median" their median. Then one line per PyTorch setting, and one line for
# 2 processes x 4 devices against 1 process x 8 devices on the same mesh.
#   bench/train_cnn.sh [build_dir]        env: STEPS (default 150), WARMUP (20), REPS (5), NO_MPI=1
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
shared_data="${SHARED_DATA:-$root/../shared/data}"
python=/usr/bin/python3
steps="${STEPS:-150}"
warmup="${WARMUP:-20}"
reps="${REPS:-5}"
program="$build_dir/bench_train_step"
config="$root/configs/mnist_cnn_sp.yaml"
[[ -x "$program" ]] || { echo "train_cnn.sh: build $program first" >&2; exit 2; }
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  echo "train_cnn.sh: the peer needs Debian's python3-torch and python3-numpy (scripts/setup.sh --bench)" >&2
  exit 2
fi
source "$here/lib/mpi_pair.sh"

load_start="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -1)"  # the machine is shared: say how busy
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

data=() peer_data=()
if [[ -f "$shared_data/mnist/train-images-idx3-ubyte.gz" ]]; then
  data=(--real-data --set "data.path=$shared_data/mnist")
  peer_data=(--mnist-dir "$shared_data/mnist")
fi
whole_images=(--set "data.layout=[batch, unsharded, unsharded, unsharded]")
timing=(--steps "$steps" --warmup "$warmup")

dtrain() {  # case name, then bench_train_step's options; appends its JSON line to $tmp/<case>
  local name="$1"
  shift
  "$@" --config "$config" "${timing[@]}" "${data[@]}" --name "$name" | grep '^{' >>"$tmp/$name" ||
    echo "train_cnn.sh: the dtrain run '$name' failed" >&2
}

for ((rep = 0; rep < reps; ++rep)); do
  dtrain sp "$program"
  dtrain b1 "$program" --set "mesh.dims={batch: 1}" "${whole_images[@]}"
  dtrain b8 "$program" --set "mesh.dims={batch: 8}" "${whole_images[@]}"
  [[ ${#mpi[@]} -gt 0 ]] && dtrain mpi "${mpi[@]}" "$program"
  for threads in 1 2; do
    for format in nchw channels_last; do
      flag=()
      [[ $format == channels_last ]] && flag=(--channels-last)
      if ! "$python" "$here/cnn_peer.py" --threads "$threads" "${timing[@]}" "${peer_data[@]}" "${flag[@]}" \
           >>"$tmp/torch.$threads.$format"; then
        echo "train_cnn.sh: the PyTorch peer failed (threads $threads, $format)" >&2
      fi
    done
  done
done

"$python" "$here/peer_summary.py" "$tmp" --config configs/mnist_cnn_sp.yaml --model mnist_cnn_sp --batch 64 \
  --load-start "$load_start" --case "sp|{batch: 4, spatial: 2}|1" --case "b1|{batch: 1}|1" \
  --case "b8|{batch: 8}|1" --case "mpi|{batch: 4, spatial: 2}|2" --optional mpi --pair sp,mpi \
  --peer-settings "pytorch cpu, best of 1 and 2 threads x nchw and channels_last in each repetition"
