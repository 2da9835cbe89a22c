#!/usr/bin/env bash
# Training throughput on one GPU, side by side in one run: dtrain (bench_train_step with mesh.devices=gpu)
# against PyTorch eager on the same GPU with the same model, batch size, optimizer and data shapes
# (bench/gpu_train_peer.py), for configs/mnist_core_dp.yaml and configs/imdb_dp.yaml:
#   dtrain mesh {batch: 1} (one rank on the GPU)              vs  pytorch eager
#   dtrain the config's mesh {batch: 8} (8 ranks share it)    vs  pytorch eager
# Each repetition runs the three sides one after the other (interleaved), REPS times; every figure is the
# median over the repetitions (a dtrain run's own figures are its median step, examples_per_s, and its mean
# step, examples_per_s_mean; the peer times all its steps together, a mean, so the ratio takes dtrain's
# mean); the *_runs lists give every repetition's. Only the first visible GPU is used (CUDA_VISIBLE_DEVICES
# defaults to 0).
#
# Data: the configs' own training splits when ../shared/data has them (MNIST IDX under mnist/, for the peer
# too; the aclImdb tarball, extracted into a temporary folder: dtrain fits its TF-IDF vocabulary outside the
# timed steps and feeds sparse rows), else generated data of the same shapes (bench_train_step's). The peer
# trains IMDB on dense float rows with the real vectors' density (8% non-zero).
#
# Prints one JSON line per model and mesh: {"name": "<config> gpu mesh {batch:B} vs pytorch eager", "device",
# "examples_per_s", "examples_per_s_mean", "peer_examples_per_s", "ratio", ...} (target: ratio >= 1).
# Without a GPU it prints {"name": "gpu training", "skipped": "no GPU"} and exits 0.
#
#   bash scripts/build.sh && bash bench/gpu_train.sh [build_dir]    env: STEPS (default 300), REPS (default 3),
#                                                                  PYTHON (a python with CUDA torch),
#                                                                  PRECISIONS (default "float32"; "float32 bf16":
#                                                                  each also in train.precision bf16 against the
#                                                                  peer under torch.autocast(bfloat16))
# The GEMM side of the same step: build/bench_gpu_gemm (dtrain's CUDA GEMM vs cuBLAS, and the allocator).
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
shared_data="${SHARED_DATA:-$root/../shared/data}"
steps="${STEPS:-300}"
reps="${REPS:-3}"
precisions="${PRECISIONS:-float32}"
program="$build_dir/bench_train_step"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"

skip() {
  echo "{\"name\": \"gpu training\", \"skipped\": \"$1\"}"
  echo "gpu_train.sh: skipped: $1" >&2
  exit 0
}

# The first python whose torch sees a CUDA device (the GPU machine's torch may not be Debian's).
peer_python=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3 python; do
  command -v "$candidate" >/dev/null || continue
  if "$candidate" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    peer_python="$candidate"
    break
  fi
done
python="${peer_python:-python3}"  # for the JSON below: any python 3

gpus=0
if command -v nvidia-smi >/dev/null; then gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"; fi
[[ $gpus -gt 0 || -n $peer_python ]] || skip "no GPU"

[[ -x "$program" ]] || { echo "gpu_train.sh: build $program first (bash scripts/build.sh $build_dir)" >&2; exit 2; }
[[ -n $peer_python ]] ||
  echo "gpu_train.sh: no python with a CUDA build of torch (set PYTHON): the peer's keys are null" >&2

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The data the configs use, where it exists.
mnist_data=() imdb_data=() peer_mnist_data=()
if [[ -f "$shared_data/mnist/train-images-idx3-ubyte.gz" ]]; then
  mnist_data=(--real-data --set "data.path=$shared_data/mnist")
  peer_mnist_data=(--mnist-dir "$shared_data/mnist")
fi
if [[ -f "$shared_data/aclImdb_v1.tar.gz" ]] && tar -xzf "$shared_data/aclImdb_v1.tar.gz" -C "$tmp" 2>/dev/null \
   && [[ -d "$tmp/aclImdb/train" ]]; then
  imdb_data=(--real-data --set "data.path=$tmp/aclImdb")
fi

# One dtrain run on the GPU: its JSON line into $tmp/NAME, its last error line into $tmp/NAME.error.
run_dtrain() {  # name, config, then bench_train_step's own options
  local name="$1" config="$2"
  shift 2
  "$program" --config "$config" --set mesh.devices=gpu --steps "$steps" --name "$name" "$@" \
    >>"$tmp/$name" 2>"$tmp/stderr" || tail -n 1 "$tmp/stderr" >"$tmp/$name.error"
}

for precision in $precisions; do
  [[ $precision == float32 || $precision == bf16 ]] || { echo "gpu_train.sh: PRECISIONS: float32 or bf16, not $precision" >&2; exit 2; }
  peer_precision=() dtrain_precision=(--set "train.precision=$precision")
  [[ $precision == bf16 ]] && peer_precision=(--bf16)
  for model in mnist imdb; do
    if [[ $model == mnist ]]; then
      config="$root/configs/mnist_core_dp.yaml" data=("${mnist_data[@]}") peer_data=("${peer_mnist_data[@]}")
    else
      config="$root/configs/imdb_dp.yaml" data=("${imdb_data[@]}") peer_data=()
    fi
    for ((rep = 0; rep < reps; ++rep)); do
      run_dtrain "$model.$precision.1" "$config" --set "mesh.dims={batch: 1}" "${dtrain_precision[@]}" "${data[@]}"
      run_dtrain "$model.$precision.8" "$config" "${dtrain_precision[@]}" "${data[@]}"
      if [[ -n $peer_python ]]; then
        "$peer_python" "$here/gpu_train_peer.py" --model "$model" --steps "$steps" "${peer_data[@]}" \
          "${peer_precision[@]}" >>"$tmp/$model.$precision.peer" || echo "gpu_train.sh: the PyTorch peer failed on $model" >&2
      fi
    done
  done
done

device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)"
"$python" - "$tmp" "$device" "$precisions" <<'PY'
import json, os, statistics, sys
tmp, device, precisions = sys.argv[1], sys.argv[2], sys.argv[3].split()

def runs(name):
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path) if line.strip().startswith("{")]

def med(rows, key):
    values = [row[key] for row in rows if row.get(key) is not None]
    return round(statistics.median(values), 1) if values else None

configs = {"mnist": "mnist_core_dp", "imdb": "imdb_dp"}
for precision, model in [(p, m) for p in precisions for m in ("mnist", "imdb")]:
    peer = [row for row in runs(f"{model}.{precision}.peer") if "skipped" not in row]
    for ranks in (1, 8):
        name = f"{configs[model]} gpu mesh {{batch:{ranks}}}" + (" (8 ranks on one GPU)" if ranks > 1 else "")
        name += " bf16" if precision == "bf16" else ""
        ours = runs(f"{model}.{precision}.{ranks}")
        if not ours:
            error_path = os.path.join(tmp, f"{model}.{precision}.{ranks}.error")
            error = open(error_path).read().strip() if os.path.exists(error_path) else "it printed nothing"
            print(json.dumps({"name": name + " vs pytorch eager", "failed": error}))
            continue
        line = {"name": name + " vs pytorch eager", "config": f"configs/{configs[model]}.yaml",
                "device": device or (peer[0]["device"] if peer else None), "mesh": f"{{batch: {ranks}}}",
                "precision": precision, "batch": ours[0]["batch"], "steps": ours[0]["steps"], "repetitions": len(ours),
                "data": ours[0].get("data", "generated"),
                "examples_per_s": med(ours, "examples_per_s"), "examples_per_s_mean": med(ours, "examples_per_s_mean"),
                "examples_per_s_runs": [row["examples_per_s"] for row in ours],
                "peak_rss_bytes": max(row.get("peak_rss_bytes", 0) for row in ours),
                "peer": (peer[0]["peer"] + f" {peer[0]['torch']}, {peer[0]['data']} data") if peer else "pytorch eager cuda",
                "peer_batch": peer[0]["batch"] if peer else None,
                "peer_examples_per_s": med(peer, "examples_per_s"),
                "peer_examples_per_s_runs": [row["examples_per_s"] for row in peer]}
        line["ratio"] = round(line["examples_per_s_mean"] / line["peer_examples_per_s"], 3) if peer else None
        if peer and line["peer_batch"] != line["batch"]:
            line["warning"] = "the peer's batch differs from the config's: compare per example only"
        print(json.dumps(line))
PY
