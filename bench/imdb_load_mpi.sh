#!/usr/bin/env bash
# What the IMDB data pipeline costs when every process of an mpirun job loads it: today each process reads
# the reviews and fits the TF-IDF vocabulary itself (deterministic, identical). Wall time of
#   dtrain train --config configs/imdb_dp.yaml --set train.max_steps=1   (data.path: an extracted aclImdb)
# as 1 process (8 devices) vs `mpirun -np 8` (8 processes x 1 device), interleaved, REPS times (medians).
# Beside it, to split the total: "load_seconds", from the start to dtrain's first line (it is printed once
# every process has read, fitted and vectorized its data: load_data, then a barrier), and the cost of an
# empty `mpirun -np 8 true`. Prints one JSON line; ratio = 8 processes / 1 process wall time.
#   bench/imdb_load_mpi.sh [build_dir] [aclImdb_dir]     env: REPS (default 5)
# Without an aclImdb dir it extracts ../shared/data/aclImdb_v1.tar.gz into a temporary folder.
set -euo pipefail

build_dir="${1:-build}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
dtrain="$(cd "$build_dir" && pwd)/dtrain"
reps="${REPS:-5}"
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
[[ -x "$dtrain" ]] || { echo "imdb_load_mpi.sh: build $dtrain first" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "imdb_load_mpi.sh: needs mpirun (openmpi-bin)" >&2; exit 2; }
mpirun=(mpirun -np 8 --oversubscribe --bind-to none)
if [[ $(id -u) -eq 0 ]]; then
  mpirun+=(--allow-run-as-root)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
data="${2:-}"
if [[ -z "$data" ]]; then
  archive="$root/../shared/data/aclImdb_v1.tar.gz"
  [[ -f "$archive" ]] || { echo "imdb_load_mpi.sh: no aclImdb dir given and no $archive" >&2; exit 2; }
  tar -xzf "$archive" -C "$tmp"
  data="$tmp/aclImdb"
fi
[[ -d "$data/train/pos" ]] || { echo "imdb_load_mpi.sh: $data is no extracted aclImdb" >&2; exit 2; }

"$python" - "$reps" "$tmp" "$data" "$dtrain" "$root/configs/imdb_dp.yaml" "${mpirun[@]}" <<'PY'
import json, statistics, subprocess, sys, time
reps, tmp, data, dtrain, config = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
mpirun = sys.argv[6:]

def train(processes):
    # stdbuf: line-buffered stdout, so the first line's arrival time is when it was printed.
    command = ["stdbuf", "-oL", dtrain, "train", "--config", config, "--set", "train.max_steps=1",
               "--set", f"data.path={data}", "--set", f"checkpoint.dir={tmp}/ckpt{processes}",
               "--run-dir", f"{tmp}/run{processes}", "--overwrite"]
    if processes > 1:
        command = mpirun + command
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = None
    lines = []
    for line in process.stdout:
        if first is None and line.startswith("dtrain:"):
            first = time.perf_counter() - start
        lines.append(line)
    error = process.stderr.read()
    code = process.wait()
    wall = time.perf_counter() - start
    accuracy = next((l.split()[2] for l in lines if l.startswith("test accuracy:")), None)
    if code != 0:
        sys.stderr.write(f"imdb_load_mpi.sh: {' '.join(command)} exited {code}:\n{error}")
    return wall, first, accuracy, code == 0

def empty_mpirun():
    start = time.perf_counter()
    subprocess.run(mpirun + ["true"], check=True)
    return time.perf_counter() - start

one, eight, empty = [], [], []
for _ in range(reps):
    one.append(train(1))
    eight.append(train(8))
    empty.append(empty_mpirun())

def med(runs, index):
    values = [run[index] for run in runs if run[index] is not None]
    return round(statistics.median(values), 3) if values else None

ok = all(run[3] for run in one + eight)
same = len({run[2] for run in one + eight}) == 1  # the same test accuracy either way
print(json.dumps({
    "name": "dtrain train configs/imdb_dp.yaml max_steps=1 (aclImdb, TF-IDF fitted per process) mpirun -np 8 x 1 device",
    "processes": 8, "repetitions": reps,
    "seconds": med(eight, 0), "load_seconds": med(eight, 1), "seconds_runs": [round(r[0], 3) for r in eight],
    "empty_mpirun_seconds": round(statistics.median(empty), 3),
    "peer": "1 process x 8 devices", "peer_seconds": med(one, 0), "peer_load_seconds": med(one, 1),
    "peer_seconds_runs": [round(r[0], 3) for r in one],
    "ratio": round(med(eight, 0) / med(one, 0), 3) if ok else None,
    "correct": ok and same, "test_accuracy": one[0][2]}))
PY
