#!/usr/bin/env bash
# Training throughput of the spatially partitioned CNN (configs/mnist_cnn_sp.yaml, issue 16) against PyTorch on
# the CPU, side by side in one run. The same model, batch 64 and Adam on every side:
#   dtrain mesh {batch: 4, spatial: 2} (the config's own: 8 devices, images cut into bands of rows),
#   dtrain mesh {batch: 1} and {batch: 8} (data.layout [batch, unsharded, unsharded, unsharded]),
#   dtrain `mpirun -np 2` on {batch: 4, spatial: 2} (2 processes x 4 devices, one core each; skipped without
#   mpirun or with NO_MPI=1),
#   PyTorch (bench/cnn_peer.py) on 1 and 2 threads, NCHW and channels_last.
# Each repetition runs every side once, one after the other (interleaved), REPS times, as the machine is shared
# and noisy. dtrain's figures come from bench_train_step (the trainer `dtrain train` runs, on the config's
# training split; its median and mean step after WARMUP steps), the peer's from its own median and mean step.
# Every figure printed is the median over the repetitions; the *_runs lists give each repetition's.
#
# Data: the MNIST IDX files under ../shared/data/mnist when present (both sides train on them), else generated
# pixels of the same shape (bench_train_step without --real-data; the peer's random pixels).
#
# Prints one JSON line per dtrain mesh against PyTorch: "peer_examples_per_s" is, in each repetition, the
# best of the four PyTorch runs (threads x memory format) of that repetition; "ratio" = dtrain / that, from
# the medians, "ratio_runs" per repetition (its runs were back to back) and "ratio_runs_median" their median. Then one line per PyTorch setting, and one line for
# 2 processes x 4 devices against 1 process x 8 devices on the same mesh.
#   bench/train_cnn.sh [build_dir]        env: STEPS (default 150), WARMUP (20), REPS (5), NO_MPI=1
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
shared_data="${SHARED_DATA:-$root/../shared/data}"
python=/usr/bin/python3
steps="${STEPS:-150}"
warmup="${WARMUP:-20}"
reps="${REPS:-5}"
program="$build_dir/bench_train_step"
config="$root/configs/mnist_cnn_sp.yaml"
[[ -x "$program" ]] || { echo "train_cnn.sh: build $program first" >&2; exit 2; }
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  echo "train_cnn.sh: the peer needs Debian's python3-torch and python3-numpy (scripts/setup.sh --bench)" >&2
  exit 2
fi
mpi=()
if [[ -z "${NO_MPI:-}" ]] && command -v mpirun >/dev/null; then
  mpi=(mpirun -np 2 --oversubscribe --bind-to none)
  if [[ $(id -u) -eq 0 ]]; then  # OpenMPI refuses root without both the flag and the variables
    mpi+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
fi

load_start="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -1)"  # the machine is shared: say how busy
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

data=() peer_data=()
if [[ -f "$shared_data/mnist/train-images-idx3-ubyte.gz" ]]; then
  data=(--real-data --set "data.path=$shared_data/mnist")
  peer_data=(--mnist-dir "$shared_data/mnist")
fi
whole_images=(--set "data.layout=[batch, unsharded, unsharded, unsharded]")
timing=(--steps "$steps" --warmup "$warmup")

dtrain() {  # case name, then bench_train_step's options; appends its JSON line to $tmp/<case>
  local name="$1"
  shift
  "$@" --config "$config" "${timing[@]}" "${data[@]}" --name "$name" | grep '^{' >>"$tmp/$name" ||
    echo "train_cnn.sh: the dtrain run '$name' failed" >&2
}

for ((rep = 0; rep < reps; ++rep)); do
  dtrain sp "$program"
  dtrain b1 "$program" --set "mesh.dims={batch: 1}" "${whole_images[@]}"
  dtrain b8 "$program" --set "mesh.dims={batch: 8}" "${whole_images[@]}"
  [[ ${#mpi[@]} -gt 0 ]] && dtrain mpi "${mpi[@]}" "$program"
  for threads in 1 2; do
    for format in nchw channels_last; do
      flag=()
      [[ $format == channels_last ]] && flag=(--channels-last)
      if ! "$python" "$here/cnn_peer.py" --threads "$threads" "${timing[@]}" "${peer_data[@]}" "${flag[@]}" \
           >>"$tmp/torch.$threads.$format"; then
        echo "train_cnn.sh: the PyTorch peer failed (threads $threads, $format)" >&2
      fi
    done
  done
done

"$python" - "$tmp" "$load_start" <<'PY'
import json, os, statistics, sys

tmp, load_start = sys.argv[1], float(sys.argv[2])
try:
    load_end = float(open("/proc/loadavg").read().split()[0])
except OSError:
    load_end = -1.0


def runs(name):
    path = os.path.join(tmp, name)
    return [json.loads(line) for line in open(path) if line.startswith("{")] if os.path.exists(path) else []


def median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 1) if values else None


peers = {f"{t}.{f}": runs(f"torch.{t}.{f}") for t in (1, 2) for f in ("nchw", "channels_last")}
repetitions = max([len(r) for r in peers.values()] + [0])
# The best PyTorch setting of each repetition (its four runs were back to back with dtrain's).
best = []
for rep in range(repetitions):
    rates = [(r[rep]["examples_per_s"], key) for key, r in peers.items() if rep < len(r)]
    best.append(max(rates) if rates else (None, None))
peer_data = next((r[0]["data"] for r in peers.values() if r), None)
common = {"config": "configs/mnist_cnn_sp.yaml", "batch": 64, "load_average_1m_start": load_start,
          "load_average_1m_end": load_end}

cases = [("sp", "{batch: 4, spatial: 2}", 1), ("b1", "{batch: 1}", 1), ("b8", "{batch: 8}", 1),
         ("mpi", "{batch: 4, spatial: 2}", 2)]
for case, mesh, processes in cases:
    rows = runs(case)
    if not rows:
        if case != "mpi":
            print(json.dumps({"name": f"mnist_cnn_sp mesh {mesh}", "failed": "no dtrain figures (see stderr)"}))
        continue
    rss_key = "peak_rss_bytes" if processes == 1 else "peak_rss_bytes_max_process"
    line = {"name": f"mnist_cnn_sp mesh {mesh}" + (f" {processes} processes" if processes > 1 else "") + " vs pytorch cpu",
            **common, "mesh": mesh, "processes": processes, "steps": rows[0]["steps"], "repetitions": len(rows),
            "data": "real" if rows[0].get("data") == "real" else "generated",
            "examples_per_s": median(r["examples_per_s"] for r in rows),
            "examples_per_s_mean": median(r["examples_per_s_mean"] for r in rows),
            "examples_per_s_runs": [r["examples_per_s"] for r in rows],
            "peak_rss_bytes": max(r.get(rss_key, 0) for r in rows),
            "peer": "pytorch cpu, best of 1 and 2 threads x nchw and channels_last in each repetition",
            "peer_data": peer_data,
            "peer_examples_per_s": median(rate for rate, _ in best),
            "peer_examples_per_s_runs": [rate for rate, _ in best],
            "peer_best_settings": [key for _, key in best]}
    line["ratio"] = round(line["examples_per_s"] / line["peer_examples_per_s"], 3) if line["peer_examples_per_s"] else None
    line["ratio_runs"] = [round(r["examples_per_s"] / rate, 3) for r, (rate, _) in zip(rows, best) if rate]
    line["ratio_runs_median"] = round(statistics.median(line["ratio_runs"]), 3) if line["ratio_runs"] else None
    print(json.dumps(line))

for key, rows in peers.items():
    if not rows:
        continue
    threads, fmt = key.split(".")
    print(json.dumps({"name": f"pytorch cpu cnn threads={threads} {fmt}", **common, "threads": int(threads),
                      "memory_format": fmt, "torch": rows[0]["torch"], "data": rows[0]["data"],
                      "steps": rows[0]["steps"], "repetitions": len(rows),
                      "examples_per_s": median(r["examples_per_s"] for r in rows),
                      "examples_per_s_mean": median(r["examples_per_s_mean"] for r in rows),
                      "examples_per_s_runs": [r["examples_per_s"] for r in rows],
                      "peak_rss_bytes": max(r["peak_rss_bytes"] for r in rows)}))

one, two = runs("sp"), runs("mpi")
if one and two:
    line = {"name": "mnist_cnn_sp mesh {batch: 4, spatial: 2} 2 processes x 4 devices vs 1 process x 8 devices",
            **common, "examples_per_s": median(r["examples_per_s"] for r in two),
            "peer": "dtrain 1 process x 8 devices", "peer_examples_per_s": median(r["examples_per_s"] for r in one)}
    line["ratio"] = round(line["examples_per_s"] / line["peer_examples_per_s"], 3)
    line["ratio_runs"] = [round(b["examples_per_s"] / a["examples_per_s"], 3) for a, b in zip(one, two)]
    line["ratio_runs_median"] = round(statistics.median(line["ratio_runs"]), 3)
    print(json.dumps(line))
PY
