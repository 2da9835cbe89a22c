#!/usr/bin/env bash
# Predicted vs measured, for every shipped config that trains on the real data (../shared/data): peak memory
# per process (the plan's prediction beside the VmHWM of each `dtrain train` process) and examples/s, as
# 1 process and as `mpirun -np 2`. Prints the CPU, one JSON line per run, then a table (bench/plan_memory_summary.py).
#   bench/plan_memory_vs_measured.sh [build_dir]   env: STEPS (default 60), CONFIGS ("imdb_dp mnist_mp ..."), SHARED_DATA
# The prediction: `dtrain plan --json`'s peak_bytes_per_process, its items and examples_per_second.
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
dtrain="$(cd "$build_dir" && pwd)/dtrain"
shared="${SHARED_DATA:-$root/../shared/data}"  # beside the source tree (or set SHARED_DATA)
steps="${STEPS:-60}"
[[ -x "$dtrain" ]] || { echo "plan_memory_vs_measured.sh: build dtrain in $build_dir first" >&2; exit 2; }
[[ -d "$shared/mnist" && -f "$shared/aclImdb_v1.tar.gz" ]] || { echo "plan_memory_vs_measured.sh: no real data at $shared" >&2; exit 2; }
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$shared/aclImdb_v1.tar.gz" -C "$tmp"
cd "$root"
# A tiny data set of each kind (256 examples a split): the same config trained on it peaks at about the
# runtime, the threads and the device tensors alone, which splits a gap between the devices and the rest.
python3 - "$tmp/tiny" <<'PY'
import os, random, struct, sys
root = sys.argv[1]
os.makedirs(f"{root}/mnist")
for split in ("train", "t10k"):
    with open(f"{root}/mnist/{split}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, 256, 28, 28) + bytes((i * 7) % 256 for i in range(256 * 784)))
    with open(f"{root}/mnist/{split}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, 256) + bytes(i % 10 for i in range(256)))
rng = random.Random(0)
for split in ("train", "test"):
    for label in ("neg", "pos"):
        os.makedirs(f"{root}/aclImdb/{split}/{label}")
        for i in range(128):
            words = [f"w{int(3000 ** rng.random())}" for _ in range(rng.randint(40, 400))]
            open(f"{root}/aclImdb/{split}/{label}/{i}_5.txt", "w").write(" ".join(words))
PY

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
default_configs=""
for file in configs/*.yaml; do default_configs+="$(basename "$file" .yaml) "; done
configs="${CONFIGS:-$default_configs}"
results="$tmp/results.jsonl"
: >"$results"
for name in $configs; do
  case "$(grep -m1 -E '^ *dataset:' "configs/$name.yaml" | awk '{print $2}')" in
    imdb) path="$tmp/aclImdb" ;;
    mnist) path="$shared/mnist" ;;
    *) echo "skipped: $name (its data is not in $shared)"; continue ;;
  esac
  steps_here=$steps
  [[ $name == imdb_transformer ]] && steps_here=$((steps / 3))  # ~1 s a step here: keep the run under a minute
  sets=(--set data.path="$path" --set train.max_steps="$steps_here" --set train.log_every=$((steps_here / 3))
        --set checkpoint.every=never)
  tiny_path="$tmp/tiny/$(basename "$path")"
  tiny_sets=(--set data.path="$tiny_path" --set data.train_split=train --set data.test_split=test --set train.max_steps=4
             --set checkpoint.every=never)
  for processes in 1 2; do
    run="$tmp/$name.np$processes"
    mkdir -p "$run"
    # The prediction first.
    predicted="$("$dtrain" plan --config "configs/$name.yaml" "${sets[@]}" --processes "$processes" --json 2>/dev/null || true)"
    # Each process's VmHWM: GNU time's maximum resident set size of that process (KiB).
    command=(/usr/bin/time -f %M -o "$run/rss" "$dtrain" train --config "configs/$name.yaml" "${sets[@]}" --run-dir "$run/out")
    if [[ $processes == 1 ]]; then
      timeout 300 "${command[@]}" >"$run/log" 2>&1 </dev/null || echo "warning: $name np1 failed: $(tail -1 "$run/log")" >&2
      mv "$run/rss" "$run/rss.0" 2>/dev/null || true
    else
      # shellcheck disable=SC2016  # the rank is the child's variable
      timeout 300 mpirun -np 2 --oversubscribe --bind-to none bash -c '"${@/%rss/rss.$OMPI_COMM_WORLD_RANK}"' _ \
        "${command[@]}" >"$run/log" 2>&1 </dev/null || echo "warning: $name np2 failed: $(tail -1 "$run/log")" >&2
    fi
    # The tiny run, as the real one.
    tiny=(/usr/bin/time -f %M -o "$run/tiny_rss" "$dtrain" train --config "configs/$name.yaml" "${tiny_sets[@]}" --run-dir "$run/tiny")
    if [[ $processes == 1 ]]; then
      if "${tiny[@]}" >"$run/tiny_log" 2>&1 </dev/null; then mv "$run/tiny_rss" "$run/tiny_rss.0"; fi
    else
      # shellcheck disable=SC2016
      timeout 300 mpirun -np 2 --oversubscribe --bind-to none bash -c '"${@/%tiny_rss/tiny_rss.$OMPI_COMM_WORLD_RANK}"' _ \
        "${tiny[@]}" >"$run/tiny_log" 2>&1 </dev/null || true
    fi
    python3 "$here/plan_memory_summary.py" row "$name" "$processes" "$run" <<<"$predicted" | tee -a "$results"
  done
done
python3 "$here/plan_memory_summary.py" table <"$results"
