#!/usr/bin/env bash
# Training throughput of Keras' IMDB transformer (configs/imdb_transformer.yaml, issue 27) against the same
# model in PyTorch on the CPU (bench/transformer_peer.py), side by side in one run. Batch 32, Adam, on every side:
#   dtrain mesh {batch: 2, model: 2, seq: 2} (the config's own: heads and the feed-forward pair on `model`,
#   the sequence on `seq`), {batch: 1} and {batch: 8} (no layout rules, the sequence whole),
#   dtrain `mpirun -np 2` on the config's mesh (2 processes x 4 devices; skipped without mpirun or with NO_MPI=1),
#   PyTorch on 1 and 2 threads, with Keras' attention sizes and with nn.MultiheadAttention.
# Each repetition runs every side once, one after the other (interleaved), REPS times: the machine is shared.
# Both sides train on generated token ids of the same shape and distribution (the step time does not depend
# on which words a review holds). Prints bench/peer_summary.py's lines: each dtrain mesh against the best
# PyTorch setting of each repetition, each PyTorch setting, and 2 processes x 4 devices against 1 x 8.
# Where the step's time goes inside the attention layer: bench_attention_step.
#   bench/train_transformer.sh [build_dir]        env: STEPS (default 100), WARMUP (20), REPS (5), NO_MPI=1
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python=/usr/bin/python3
reps="${REPS:-5}"
program="$build_dir/bench_train_step"
config="$(dirname "$here")/configs/imdb_transformer.yaml"
[[ -x "$program" ]] || { echo "train_transformer.sh: build $program first" >&2; exit 2; }
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  echo "train_transformer.sh: the peer needs Debian's python3-torch and python3-numpy (scripts/setup.sh --bench)" >&2
  exit 2
fi
source "$here/lib/mpi_pair.sh"
load_start="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -1)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
timing=(--steps "${STEPS:-100}" --warmup "${WARMUP:-20}")
whole=(--set "data.layout=[batch, unsharded]" --set "layouts={}")

dtrain() {  # case name, then bench_train_step's command; appends its JSON line to $tmp/<case>
  local name="$1"
  shift
  "$@" --config "$config" "${timing[@]}" --name "$name" | grep '^{' >>"$tmp/$name" ||
    echo "train_transformer.sh: the dtrain run '$name' failed" >&2
}

for ((rep = 0; rep < reps; ++rep)); do
  dtrain mesh "$program"
  dtrain b1 "$program" --set "mesh.dims={batch: 1}" "${whole[@]}"
  dtrain b8 "$program" --set "mesh.dims={batch: 8}" "${whole[@]}"
  [[ ${#mpi[@]} -gt 0 ]] && dtrain mpi "${mpi[@]}" "$program"
  for threads in 1 2; do
    for attention in keras torch; do
      "$python" "$here/transformer_peer.py" --threads "$threads" --attention "$attention" "${timing[@]}" \
        >>"$tmp/torch.$threads.$attention" ||
        echo "train_transformer.sh: the PyTorch peer failed (threads $threads, $attention)" >&2
    done
  done
done

"$python" "$here/peer_summary.py" "$tmp" --config configs/imdb_transformer.yaml --model imdb_transformer \
  --batch 32 --load-start "$load_start" --case "mesh|{batch: 2, model: 2, seq: 2}|1" --case "b1|{batch: 1}|1" \
  --case "b8|{batch: 8}|1" --case "mpi|{batch: 2, model: 2, seq: 2}|2" --optional mpi --pair mesh,mpi \
  --peer-settings "pytorch cpu, best of 1 and 2 threads x keras and torch attention in each repetition"
