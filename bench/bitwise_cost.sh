#!/usr/bin/env bash
# The cost of train.bitwise: bench_train_step with train.bitwise false and true, interleaved (off then on,
# each round), in one process and under `mpirun -np 2`. Prints per config and process count the median step
# time of each and the median of the per-round ratios on/off.
#   bench/bitwise_cost.sh BUILD [ROUNDS] [CONFIG...]
# Extra bench_train_step flags through FLAGS (default "--steps 200 --warmup 20").
set -euo pipefail
build="$1"; rounds="${2:-5}"; shift; [[ $# -gt 0 ]] && shift
configs=("$@")
[[ ${#configs[@]} -gt 0 ]] || configs=(configs/imdb_dp.yaml configs/imdb_dp_adam.yaml configs/imdb_mp.yaml configs/imdb_sp.yaml
                                        configs/mnist_core_dp.yaml configs/mnist_keras_dp.yaml configs/mnist_mp.yaml
                                        configs/mnist_cnn_sp.yaml configs/imdb_embedding.yaml configs/imdb_transformer.yaml)
flags=(${FLAGS:---steps 200 --warmup 20})
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp)
seconds() { python3 -c 'import json,sys; print(json.loads(sys.stdin.readlines()[-1])["seconds"])'; }
for ((round = 1; round <= rounds; ++round)); do
  for config in "${configs[@]}"; do
    for np in 1 2; do
      for mode in false true; do
        if [[ $np == 1 ]]; then
          s=$("$build/bench_train_step" --config "$config" --set train.bitwise=$mode "${flags[@]}" | seconds)
        else
          s=$(mpirun --oversubscribe -np 2 "$build/bench_train_step" --config "$config" --set train.bitwise=$mode "${flags[@]}" | seconds)
        fi
        echo "$round $config $np $mode $s" >>"$out"
      done
    done
  done
done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; $rounds rounds, ${flags[*]}"
python3 - "$out" <<'PY'
import sys, statistics as st, collections
by = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, config, np, mode, s = line.split()
    by[(config, np)].setdefault(r, {})[mode] = float(s)
print(f"{'config':30} {'processes':>9} {'off ms':>9} {'on ms':>9} {'on/off per round (median)':>26}")
for (config, np), rounds in by.items():
    off = [v["false"] for v in rounds.values()]
    on = [v["true"] for v in rounds.values()]
    ratio = st.median(v["true"] / v["false"] for v in rounds.values())
    print(f"{config:30} {np:>9} {st.median(off) * 1e3:9.3f} {st.median(on) * 1e3:9.3f} {ratio:26.3f}")
PY
rm -f "$out"
