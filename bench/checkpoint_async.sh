#!/usr/bin/env bash
# The training stall per checkpoint save, synchronous against checkpoint.async, for configs/imdb_dp.yaml and
# configs/mnist_cnn_sp.yaml, in 1 process and under `mpirun -np 2` (the same 8-device mesh).
# Each case trains MAX_STEPS steps (default 200) saving every EVERY steps (default 20) with `dtrain train`, once
# synchronous and once async, REPS times interleaved (default 3; the machine is shared). The stall of a save is
# what the trainer measures around its save hook (metrics.jsonl "save" rows, stall_s: the whole save when
# synchronous; the snapshot and any wait for the save before when async); the run's last save is left out (a
# stop's). Also reported: the median step time without a save, and, async, of the EVERY/2 steps after each save
# (they share the cores with the background writing), so that the cost moved off the loop is visible too.
# Prints one JSON line per config and process count: medians over every save of every repetition:
#   "sync_stall_seconds", "async_stall_seconds", "ratio" (async / sync; the target is under 0.2), "saves",
#   "step_seconds" (no save, sync runs), "async_steps_after_save_seconds".
#   bench/checkpoint_async.sh [build_dir]     env: MAX_STEPS, EVERY, REPS, NO_MPI=1, CONFIGS, SHARED_DATA (default
#   ../shared/data beside the project; the MNIST IDX files and aclImdb_v1.tar.gz are read from it)
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
shared_data="${SHARED_DATA:-$root/../shared/data}"
max_steps="${MAX_STEPS:-200}"
every="${EVERY:-20}"
reps="${REPS:-3}"
dtrain="$(realpath "$build_dir/dtrain")"
[[ -x "$dtrain" ]] || { echo "checkpoint_async.sh: build $build_dir/dtrain first" >&2; exit 2; }
[[ -f "$shared_data/aclImdb_v1.tar.gz" && -f "$shared_data/mnist/train-images-idx3-ubyte.gz" ]] ||
  { echo "checkpoint_async.sh: no aclImdb_v1.tar.gz or mnist/ under $shared_data (set SHARED_DATA)" >&2; exit 2; }
source "$here/lib/mpi_pair.sh"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$shared_data/aclImdb_v1.tar.gz" -C "$tmp"
mnist_data="$shared_data/mnist"

declare -A data_of=([imdb_dp]="$tmp/aclImdb" [mnist_cnn_sp]="$mnist_data")
launchers=("one")
((${#mpi[@]} > 0)) && launchers+=("two")

for ((rep = 0; rep < reps; ++rep)); do
  for config in ${CONFIGS:-imdb_dp mnist_cnn_sp}; do
    for launcher in "${launchers[@]}"; do
      for mode in sync async; do
        run="$tmp/$config.$launcher.$mode.$rep"
        start=()
        [[ $launcher == two ]] && start=("${mpi[@]}")
        async=false
        [[ $mode == async ]] && async=true
        "${start[@]}" "$dtrain" train --config "$root/configs/$config.yaml" --set "data.path=${data_of[$config]}" \
          --set "checkpoint.dir=$run/ckpt" --set "checkpoint.every=$every" --set checkpoint.max_to_keep=2 \
          --set "checkpoint.async=$async" --set "train.max_steps=$max_steps" --set train.log_every=1 \
          --set train.eval_every_epoch=false --run-dir "$run" </dev/null >"$run.log" 2>&1 ||
          { echo "checkpoint_async.sh: $config $launcher $mode failed: $(tail -2 "$run.log")" >&2; continue; }
      done
    done
  done
done

python3 - "$tmp" "$max_steps" "$every" "$reps" <<'PY'
import glob, json, statistics, sys
tmp, max_steps, every, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rows(path):
    return [json.loads(line) for line in open(path) if line.startswith("{")]
def median(values):
    return statistics.median(values) if values else None
for config in ("imdb_dp", "mnist_cnn_sp"):
    for launcher, processes in (("one", 1), ("two", 2)):
        figures = {}
        for mode in ("sync", "async"):
            stalls, plain, after = [], [], []
            for path in glob.glob(f"{tmp}/{config}.{launcher}.{mode}.*/metrics.jsonl"):
                metrics = rows(path)
                saved = {r["step"]: r["stall_s"] for r in metrics if r.get("split") == "save" and r["step"] < max_steps}
                stalls += list(saved.values())
                for r in metrics:
                    if r.get("split") != "train_steps" or r.get("steps") != 1: continue
                    since = (r["step"] - 1) % every  # steps since the last save (0: the step right after one)
                    (after if since < every // 2 and r["step"] > every else plain).append(r["seconds"])
            figures[mode] = (stalls, plain, after)
        sync, asynchronous = figures["sync"], figures["async"]
        if not sync[0] or not asynchronous[0]: continue
        s, a = median(sync[0]), median(asynchronous[0])
        print(json.dumps({
            "name": f"checkpoint stall {config} processes={processes} every={every} steps={max_steps}",
            "sync_stall_seconds": round(s, 6), "async_stall_seconds": round(a, 6), "ratio": round(a / s, 4),
            "saves": len(asynchronous[0]), "reps": reps,
            "step_seconds": round(median(sync[1]), 6),
            "async_steps_after_save_seconds": round(median(asynchronous[2]), 6),
            "sync_steps_after_save_seconds": round(median(sync[2]), 6),
        }))
PY
