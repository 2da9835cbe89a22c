#!/usr/bin/env bash
# Training throughput of a mesh spread over processes, side by side in one run, for the MNIST Core MLP
# (configs/mnist_core_dp.yaml) and the IMDB tutorial MLP (configs/imdb_dp.yaml), both on mesh {batch: 8}:
#   dtrain 1 process x 8 devices   vs   dtrain `mpirun -np 2` (2 processes x 4 devices), same mesh;
#   dtrain 2 x 4                   vs   PyTorch DistributedDataParallel over gloo, 2 processes x 1 thread
#                                       (../shared/bench/torch_mlp.py --ddp 2 --threads 1).
# Each repetition runs the three sides one after the other (interleaved), REPS times; every figure is the
# median over the repetitions (each dtrain run's own figure is its median step, and its mean step for
# examples_per_s_mean; the peer reports its mean step); the *_runs lists give every repetition's, as the
# machine is shared and noisy. Peak RSS is per process: the largest process's over the repetitions
# (dtrain gathers every process's; the peer's is the largest of its process tree).
#
# Data: the configs' own training splits when ../shared/data has them (MNIST IDX under mnist/, the
# aclImdb tarball, extracted into a temporary folder), else generated data of the same shapes (as
# bench_train_step does without --real-data). The PyTorch peer trains on the MNIST files too
# (--mnist-dir), and on random dense input for IMDB (it has no TF-IDF pipeline).
#
# Prints two JSON lines per model:
#   "<model> mesh {batch:8} 2x4 processes vs 1x8": ratio = 2x4 / 1x8 median examples/s (target >= 0.8)
#   "<model> mesh {batch:8} 2x4 processes vs pytorch ddp": ratio = dtrain 2x4 / DDP mean examples/s
#                                                           (target >= 4)
#   bench/train_mpi.sh [build_dir]        env: STEPS (default 200), REPS (default 5)
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
peer="${TORCH_MLP:-$root/../shared/bench/torch_mlp.py}"
shared_data="${SHARED_DATA:-$root/../shared/data}"
python=/usr/bin/python3
steps="${STEPS:-200}"
reps="${REPS:-5}"
program="$build_dir/bench_train_step"
[[ -x "$program" ]] || { echo "train_mpi.sh: build $program first" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "train_mpi.sh: needs mpirun (scripts/setup.sh installs openmpi-bin)" >&2; exit 2; }
mpirun=(mpirun -np 2 --oversubscribe --bind-to none)
if [[ $(id -u) -eq 0 ]]; then
  mpirun+=(--allow-run-as-root)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
have_torch=1
if [[ ! -f "$peer" ]] || ! "$python" -c 'import torch' 2>/dev/null; then
  have_torch=0
  echo "train_mpi.sh: no PyTorch peer ($peer and Debian's python3-torch, scripts/setup.sh --bench): its keys are null" >&2
fi

load_start="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -1)"  # the machine is shared: say how busy
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The data the configs use, where it exists.
mnist_data=() imdb_data=() torch_mnist_data=()
if [[ -f "$shared_data/mnist/train-images-idx3-ubyte.gz" ]]; then
  mnist_data=(--real-data --set "data.path=$shared_data/mnist")
  torch_mnist_data=(--mnist-dir "$shared_data/mnist")
fi
if [[ -f "$shared_data/aclImdb_v1.tar.gz" ]] && tar -xzf "$shared_data/aclImdb_v1.tar.gz" -C "$tmp" 2>/dev/null \
   && [[ -d "$tmp/aclImdb/train" ]]; then
  imdb_data=(--real-data --set "data.path=$tmp/aclImdb")
fi

# The peer's examples/s and the largest RSS of its process tree (DDP spawns one process per rank).
ddp() {  # model, then torch_mlp.py's own options
  local model="$1"
  shift
  "$python" - "$python" "$peer" --model "$model" --ddp 2 --threads 1 --steps "$steps" "$@" <<'PY'
import json, resource, subprocess, sys
out = subprocess.run(sys.argv[1:], check=True, capture_output=True, text=True).stdout
run = json.loads(out.strip().splitlines()[-1])
run["peak_rss_bytes_max_process"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps(run))
PY
}

for model in mnist imdb; do
  if [[ $model == mnist ]]; then
    config="$root/configs/mnist_core_dp.yaml" data=("${mnist_data[@]}") torch_data=("${torch_mnist_data[@]}")
  else
    config="$root/configs/imdb_dp.yaml" data=("${imdb_data[@]}") torch_data=()
  fi
  for ((rep = 0; rep < reps; ++rep)); do
    "$program" --config "$config" --steps "$steps" --name "$model 1x8" "${data[@]}" >>"$tmp/$model.1x8"
    "${mpirun[@]}" "$program" --config "$config" --steps "$steps" --name "$model 2x4" "${data[@]}" >>"$tmp/$model.2x4"
    if [[ $have_torch == 1 ]]; then
      ddp "$model" "${torch_data[@]}" >>"$tmp/$model.ddp" || echo "train_mpi.sh: the PyTorch DDP peer failed" >&2
    fi
  done
done

"$python" - "$tmp" "$reps" "$steps" "$load_start" <<'PY'
import json, os, statistics, sys
tmp, reps, steps, load_start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
try:
    load_end = float(open("/proc/loadavg").read().split()[0])
except OSError:
    load_end = -1.0

def runs(name):
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path) if line.strip().startswith("{")]

def med(rows, key):
    values = [row[key] for row in rows if row.get(key) is not None]
    return round(statistics.median(values), 1) if values else None

def rss(rows, key):
    values = [row[key] for row in rows if row.get(key) is not None]
    return max(values) if values else None

configs = {"mnist": "mnist_core_dp", "imdb": "imdb_dp"}
for model in ("mnist", "imdb"):
    one, two, ddp = runs(model + ".1x8"), runs(model + ".2x4"), runs(model + ".ddp")
    if not one or not two:
        print(json.dumps({"name": f"{configs[model]} mesh {{batch:8}}", "failed": "a dtrain run printed nothing (see stderr)"}))
        continue
    data = "real" if two[0].get("data") == "real" else "generated"
    common = {"config": f"configs/{configs[model]}.yaml", "mesh": "{batch: 8}", "batch": two[0]["batch"],
              "steps": two[0]["steps"], "repetitions": len(two), "data": data,
              "load_average_1m_start": load_start, "load_average_1m_end": load_end}
    ours = {"examples_per_s": med(two, "examples_per_s"), "examples_per_s_mean": med(two, "examples_per_s_mean"),
            "peak_rss_bytes_max_process": rss(two, "peak_rss_bytes_max_process"),
            "peak_rss_bytes_per_process": two[-1].get("peak_rss_bytes_per_process")}
    line = {"name": f"{configs[model]} mesh {{batch:8}} 2 processes x 4 devices vs 1 process x 8 devices", **common,
            "processes": 2, **ours,
            "examples_per_s_runs": [row["examples_per_s"] for row in two],
            "peer": "dtrain 1 process x 8 devices", "peer_examples_per_s": med(one, "examples_per_s"),
            "peer_examples_per_s_mean": med(one, "examples_per_s_mean"),
            "peer_peak_rss_bytes": rss(one, "peak_rss_bytes"),
            "peer_examples_per_s_runs": [row["examples_per_s"] for row in one]}
    line["ratio"] = round(line["examples_per_s"] / line["peer_examples_per_s"], 3)
    # Each repetition's own ratio (its two runs were back to back): how far the noise moves it.
    line["ratio_runs"] = [round(b["examples_per_s"] / a["examples_per_s"], 3) for a, b in zip(one, two)]
    print(json.dumps(line))
    # The peer times all its steps together (a mean): the ratio takes dtrain's mean step too.
    line = {"name": f"{configs[model]} mesh {{batch:8}} 2 processes x 4 devices vs pytorch ddp", **common,
            "processes": 2, **ours,
            "peer": "pytorch DDP gloo 2 processes x 1 thread" + (", MNIST files" if model == "mnist" and data == "real" else ", random input"),
            "peer_examples_per_s": med(ddp, "examples_per_s"),
            "peer_examples_per_s_runs": [row["examples_per_s"] for row in ddp],
            "peer_peak_rss_bytes_max_process": rss(ddp, "peak_rss_bytes_max_process")}
    line["ratio"] = round(ours["examples_per_s_mean"] / line["peer_examples_per_s"], 3) if ddp else None
    print(json.dumps(line))
PY
