#!/usr/bin/env bash
# TensorFlow's DTensor IMDB tutorial as a shell session: train data-parallel for 2 epochs, resume the
# checkpoint model-parallel for 2 more, then spatial-parallel for 2 more, then evaluate; accuracy after each.
# Usage: scripts/imdb_tutorial.sh [DATA_DIR (default data/aclImdb)] [DTRAIN (default build/dtrain)]
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-data/aclImdb}
dtrain=${2:-build/dtrain}
run() {
  echo "+ dtrain $*"
  "$dtrain" "$@" --set data.path="$data"
}
accuracy() { grep -E "^test accuracy" "$1" | tail -1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "== phase 1: data parallel, mesh {batch: 8}, epochs 1-2"
run train --config configs/imdb_dp.yaml --overwrite | tee "$log"
echo "after data parallel: $(accuracy "$log")"
echo "== phase 2: model parallel, mesh {batch: 4, model: 2}, epochs 3-4 (resumed from the DP checkpoint)"
run resume --config configs/imdb_mp.yaml --set train.epochs=4 | tee "$log"
echo "after model parallel: $(accuracy "$log")"
echo "== phase 3: spatial parallel, mesh {batch: 2, feature: 2, model: 2}, epochs 5-6 (resumed from the MP checkpoint)"
run resume --config configs/imdb_sp.yaml --set train.epochs=6 | tee "$log"
echo "after spatial parallel: $(accuracy "$log")"
echo "== eval of the final checkpoint on the spatial-parallel mesh"
run eval --config configs/imdb_sp.yaml | tee "$log"
"$dtrain" inspect runs/imdb/ckpt | head -8
