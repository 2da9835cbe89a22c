#!/usr/bin/env bash
# README's elastic demo, on one machine (root): 3 test hosts (scripts/hosts.sh), `dtrain elastic` training
# TensorFlow's DTensor MNIST MLP (configs/mnist_core_dp.yaml, train.bitwise: true) on them, host 2's processes
# all killed mid-epoch, the run going on on hosts 1 and 3 to its end; then the same training uninterrupted in
# one process, `dtrain diff` of the two, and the metrics plot (restart marked) in OUT/metrics.png.
#   scripts/elastic_demo.sh DTRAIN MNIST_DIR [OUT]     e.g. scripts/elastic_demo.sh build/dtrain ../shared/data/mnist
set -euo pipefail
dtrain=$(realpath "$1")
mnist=$(realpath "$2")
out=$(mkdir -p "${3:-/tmp/dtrain-elastic-demo}" && cd "${3:-/tmp/dtrain-elastic-demo}" && pwd)
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hosts() { "$source_dir/scripts/hosts.sh" "$@" --name demo --net 10.213.250 --dir "$out/hosts"; }
trap 'hosts down >/dev/null 2>&1 || true' EXIT
hosts up 3
cd "$out"
rm -rf elastic reference
settings=(--set data.path="$mnist" --set train.bitwise=true --set train.epochs=6)

echo "== dtrain elastic on 3 hosts; host 2 (10.213.250.12) killed in epoch 4 =="
start=$(date +%s.%N)
"$dtrain" elastic --hostfile hosts/hostfile --mpirun "$out/hosts/mpirun" -- train --config \
  "$source_dir/configs/mnist_core_dp.yaml" "${settings[@]}" --set checkpoint.dir=elastic/ckpt --run-dir elastic \
  >elastic.log 2>&1 &
job=$!
until [[ $(cat elastic/ckpt/latest 2>/dev/null) == ckpt-120 ]] || ! kill -0 "$job" 2>/dev/null; do sleep 0.05; done
sleep 0.5
hosts kill 2
wait "$job"
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
grep -E "^dtrain|epoch .* done|test accuracy|elastic" elastic.log
echo "(elastic run: $elapsed s in all)"

echo "== the same training, uninterrupted, in one process =="
"$dtrain" train --config "$source_dir/configs/mnist_core_dp.yaml" "${settings[@]}" --set checkpoint.dir=reference/ckpt \
  --run-dir reference | grep -E "test accuracy"
echo "== dtrain diff elastic/ckpt reference/ckpt =="
"$dtrain" diff elastic/ckpt reference/ckpt | tail -1
for python in python3 /usr/bin/python3; do  # the first with matplotlib
  if "$python" -c "import matplotlib" 2>/dev/null; then
    "$python" "$source_dir/scripts/plot_metrics.py" elastic --out "$out/metrics.png" && echo "plot: $out/metrics.png"
    break
  fi
done
