#!/usr/bin/env bash
# A/B of two builds on bench_train_step, interleaved (A then B for each config, every round) so that a
# shared or throttling machine hits both alike. Prints, per config, the median step time of each build
# and the median of the per-round ratios B/A (above 1: B is slower).
#   bench/ab_train_step.sh BUILD_A BUILD_B [ROUNDS] [CONFIG...]
#   e.g. bench/ab_train_step.sh /tmp/gemm-a/build /tmp/gemm-b/build 15 configs/mnist_core_dp.yaml configs/imdb_dp.yaml
# Extra bench_train_step flags through AB_FLAGS (default "--steps 300 --warmup 30").
set -euo pipefail
a="$1"; b="$2"; rounds="${3:-12}"; shift 2; [[ $# -gt 0 ]] && shift
configs=("$@")
[[ ${#configs[@]} -gt 0 ]] || configs=(configs/mnist_core_dp.yaml configs/mnist_mp.yaml configs/imdb_dp.yaml configs/imdb_mp.yaml)
flags=(${AB_FLAGS:---steps 300 --warmup 30})
out=$(mktemp)
for ((round = 1; round <= rounds; ++round)); do
  for config in "${configs[@]}"; do
    for side in A B; do
      build=$a; [[ $side == B ]] && build=$b
      seconds=$("$build/bench_train_step" --config "$config" "${flags[@]}" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readlines()[-1])["seconds"])')
      echo "$round $config $side $seconds" >> "$out"
    done
  done
done
python3 - "$out" <<'EOF'
import sys, statistics as st, collections
rows = [line.split() for line in open(sys.argv[1])]
by = collections.defaultdict(dict)
for r, config, side, s in rows:
    by[config].setdefault(r, {})[side] = float(s)
print(f"{'config':32} {'rounds':>6} {'A median ms':>12} {'B median ms':>12} {'B/A medians':>12} {'median B/A per round':>21} {'B faster rounds':>16}")
for config, rounds in by.items():
    a = [v["A"] for v in rounds.values()]; b = [v["B"] for v in rounds.values()]
    ratios = [v["B"] / v["A"] for v in rounds.values()]
    print(f"{config:32} {len(a):6} {st.median(a)*1e3:12.4f} {st.median(b)*1e3:12.4f} {st.median(b)/st.median(a):12.3f} "
          f"{st.median(ratios):21.3f} {sum(x < 1 for x in ratios):>10}/{len(ratios)}")
EOF
rm -f "$out"
