#!/usr/bin/env bash
# Training throughput of four configs against the same models in PyTorch on the CPU (issue 32's table), each
# dtrain config on {batch: 1} and on its own mesh, side by side in one run:
#   mnist_core_dp   {batch: 8}               vs bench/mlp_peer.py --model mnist
#   imdb_dp         {batch: 8}               vs bench/mlp_peer.py --model imdb
#   mnist_cnn_sp    {batch: 4, spatial: 2}   vs bench/cnn_peer.py (NCHW and channels_last)
#   imdb_embedding  {batch: 4, model: 2}     vs bench/embedding_peer.py
# {batch: 1} runs the config with nothing sharded but the batch (the CNN's images whole, the embedding's table
# whole). Every PyTorch peer runs on 1 and 2 threads. Each repetition runs every side of a config once, one after
# the other (interleaved), REPS times, as the machine is shared and noisy; bench/peer_summary.py then prints, per
# config, each dtrain mesh against the best PyTorch setting of each repetition ("ratio_runs_median": the median of
# the per-repetition ratios), and each PyTorch setting. dtrain's figures come from bench_train_step (the trainer
# `dtrain train` runs; its median step after WARMUP steps), the peers' from their median step.
#
# Data: the MNIST IDX files under ../shared/data/mnist when present, on both sides (else generated pixels and
# random ones). IMDB: dtrain reads the reviews of IMDB_DIR (an extracted aclImdb folder: TF-IDF or token ids,
# vectorized before the timed steps) when given, else bench_train_step's generated rows of the same shape; the
# peers train on random TF-IDF-like rows and generated token ids (their dense layers and embedding take the same
# time whatever the values).
#   bench/train_vs_pytorch.sh [build_dir]   env: REPS (5), WARMUP (20), STEPS (each config's: 300, 1000 for
#                                           imdb_dp, 150 for the CNN), CONFIGS (a subset, space separated), IMDB_DIR
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
shared_data="${SHARED_DATA:-$root/../shared/data}"
python=/usr/bin/python3
reps="${REPS:-5}"
warmup="${WARMUP:-20}"
program="$build_dir/bench_train_step"
configs="${CONFIGS:-mnist_core_dp imdb_dp mnist_cnn_sp imdb_embedding}"
[[ -x "$program" ]] || { echo "train_vs_pytorch.sh: build $program first" >&2; exit 2; }
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  echo "train_vs_pytorch.sh: the peers need Debian's python3-torch and python3-numpy (scripts/setup.sh --bench)" >&2
  exit 2
fi
if [[ -n "${IMDB_DIR:-}" && ! -d "${IMDB_DIR:-}/train" ]]; then
  echo "train_vs_pytorch.sh: IMDB_DIR=$IMDB_DIR holds no train/ folder (extract aclImdb_v1.tar.gz first)" >&2
  exit 2
fi
load_start="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -1)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

mnist_data=() mnist_peer_data=() imdb_data=()
if [[ -f "$shared_data/mnist/train-images-idx3-ubyte.gz" ]]; then
  mnist_data=(--real-data --set "data.path=$shared_data/mnist")
  mnist_peer_data=(--mnist-dir "$shared_data/mnist")
fi
[[ -n "${IMDB_DIR:-}" ]] && imdb_data=(--real-data --set "data.path=$IMDB_DIR")

# The config's facts: its mesh as peer_summary prints it, batch, steps, the {batch: 1} overrides and data.
describe() {
  case $1 in
    mnist_core_dp) mesh="{batch: 8}" batch=128 steps=300 one=() data=("${mnist_data[@]}") ;;
    imdb_dp) mesh="{batch: 8}" batch=64 steps=1000 one=() data=("${imdb_data[@]}") ;;
    mnist_cnn_sp) mesh="{batch: 4, spatial: 2}" batch=64 steps=150
      one=(--set "data.layout=[batch, unsharded, unsharded, unsharded]") data=("${mnist_data[@]}") ;;
    imdb_embedding) mesh="{batch: 4, model: 2}" batch=64 steps=300 one=(--set "layouts={}") data=("${imdb_data[@]}") ;;
    *) echo "train_vs_pytorch.sh: no such config in this bench: $1" >&2; exit 2 ;;
  esac
  steps="${STEPS:-$steps}"
}

run_peer() {  # config, setting, then the peer's script and options; appends its JSON line to $tmp/<config>/torch.<setting>
  local name="$1" setting="$2"
  shift 2
  "$python" "$@" >>"$tmp/$name/torch.$setting" ||
    echo "train_vs_pytorch.sh: the PyTorch peer of $name failed (setting $setting)" >&2
}

peers() {  # the PyTorch runs of config $1 for one repetition
  local threads timing
  for threads in 1 2; do
    timing=(--threads "$threads" --steps "$steps" --warmup "$warmup")
    case $1 in
      mnist_core_dp) run_peer "$1" "$threads" "$here/mlp_peer.py" --model mnist "${timing[@]}" "${mnist_peer_data[@]}" ;;
      imdb_dp) run_peer "$1" "$threads" "$here/mlp_peer.py" --model imdb "${timing[@]}" ;;
      mnist_cnn_sp)
        run_peer "$1" "$threads.nchw" "$here/cnn_peer.py" "${timing[@]}" "${mnist_peer_data[@]}"
        run_peer "$1" "$threads.channels_last" "$here/cnn_peer.py" "${timing[@]}" "${mnist_peer_data[@]}" --channels-last ;;
      imdb_embedding) run_peer "$1" "$threads" "$here/embedding_peer.py" "${timing[@]}" ;;
    esac
  done
}

for ((rep = 0; rep < reps; ++rep)); do
  for name in $configs; do
    describe "$name"
    mkdir -p "$tmp/$name"
    common=(--config "$root/configs/$name.yaml" --steps "$steps" --warmup "$warmup" "${data[@]}")
    "$program" "${common[@]}" --name "$name mesh $mesh" | grep '^{' >>"$tmp/$name/mesh" ||
      echo "train_vs_pytorch.sh: the dtrain run of $name on $mesh failed" >&2
    "$program" "${common[@]}" --set "mesh.dims={batch: 1}" "${one[@]}" --name "$name mesh {batch: 1}" |
      grep '^{' >>"$tmp/$name/b1" || echo "train_vs_pytorch.sh: the dtrain run of $name on {batch: 1} failed" >&2
    peers "$name"
  done
done

for name in $configs; do
  describe "$name"
  "$python" "$here/peer_summary.py" "$tmp/$name" --config "configs/$name.yaml" --model "$name" --batch "$batch" \
    --load-start "$load_start" --case "mesh|$mesh|1" --case "b1|{batch: 1}|1" \
    --peer-settings "pytorch cpu, best of 1 and 2 threads$([[ $name == mnist_cnn_sp ]] && echo ' x nchw and channels_last') in each repetition"
done
