#!/usr/bin/env bash
# End-to-end on configs/imdb_transformer.yaml (a graph with attention: heads on `model`, the sequence on `seq`)
# over a small generated aclImdb tree: the first 30 step losses on meshes {batch: 1}, {batch: 8},
# {batch: 2, model: 2, seq: 2} and under `mpirun -np 2` agree within 1e-4; its checkpoint resumes on
# {batch: 8} and under mpirun -np 2 and 4 (seq on 4) with the uninterrupted run's third-epoch loss (1e-4).
# Usage: transformer_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
config=$(realpath "${2:-.}")/configs/imdb_transformer.yaml  # before start.sh moves into $work
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest

# 128 reviews a class for training, 32 for testing, 10 to 60 words (some longer than the 32 ids kept);
# "great" and "superb" lean positive, "bad" and "dull" negative.
python3 - <<'PY'
import os, random
random.seed(7)
words = "movie film plot acting the a was ending music and it not story scene actor long".split()
for split, count in (("train", 128), ("test", 32)):
    for label in ("pos", "neg"):
        folder = f"data/aclImdb/{split}/{label}"
        os.makedirs(folder)
        for i in range(count):
            text = [random.choice(words) for _ in range(random.randrange(10, 60))]
            for _ in range(3):
                text.insert(random.randrange(len(text)), random.choice(["great", "superb"] if label == "pos" else ["bad", "dull"]))
            with open(f"{folder}/{i}_7.txt", "w") as f:
                f.write(" ".join(text).capitalize() + ".<br /><br />The end!")
PY

# The shipped model and layouts, shrunk in its data: 32 ids a review from a 2,000-token vocabulary.
small=(--set data.path=data/aclImdb --set data.vectorizer.max_tokens=2000 --set data.vectorizer.output_sequence_length=32
  --set train.log_every=1 --set train.eval_every_epoch=false)
one_device=(--set "mesh.dims={batch: 1}" --set "layouts={}" --set "data.layout=[batch, unsharded]")
data_parallel=(--set "mesh.dims={batch: 8}" --set "layouts={}" --set "data.layout=[batch, unsharded]")

# same_losses A B: two runs' first 30 step losses agree within 1e-4 relative, and the run learns.
same_losses() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def losses(run):
    return [r["loss"] for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r.get("split") == "train_steps" and r.get("steps") == 1]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == 30 and len(b) == 30, (len(a), len(b))
for step, (x, y) in enumerate(zip(a, b), 1):
    assert abs(x - y) <= 1e-4 * max(1.0, abs(x)), f"step {step}: {x} vs {y}"
assert sum(a[-5:]) < sum(a[:5]), f"no learning: {a[:5]} ... {a[-5:]}"
PY
}

# ---- the first 30 step losses on three meshes and two processes ----
steps=(--set train.max_steps=30 --set train.epochs=10 --set checkpoint.every=never)
expect 0 "parameters on mesh" -- train --config "$config" "${small[@]}" "${steps[@]}" "${one_device[@]}" --run-dir run_1
expect 0 "parameters on mesh" -- train --config "$config" "${small[@]}" "${steps[@]}" "${data_parallel[@]}" --run-dir run_8
expect 0 "parameters on mesh" -- train --config "$config" "${small[@]}" "${steps[@]}" --run-dir run_222
check "{batch: 8}: the 30 step losses of {batch: 1} within 1e-4" same_losses run_1 run_8
check "{batch: 2, model: 2, seq: 2}: the 30 step losses of {batch: 1} within 1e-4" same_losses run_1 run_222
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rc=0
  timeout 300 mpirun -np 2 --oversubscribe "$dtrain" train --config "$config" "${small[@]}" "${steps[@]}" \
    --run-dir run_222_np2 </dev/null >np2_steps.log 2>&1 || rc=$?
  check "mpirun -np 2 train exits 0: $(tail -2 np2_steps.log)" test "$rc" = 0
  check "mpirun -np 2 ran over 2 processes" grep -aq "over 2 processes" np2_steps.log
  check "{2,2,2} under mpirun -np 2: the 30 step losses of {batch: 1} within 1e-4" same_losses run_1 run_222_np2
else
  skip_part "no mpirun or no MPI build: the 30 steps under mpirun -np 2"
fi

# ---- checkpoints resume on other meshes and process counts ----
# 256 reviews at batch 32: 8 steps an epoch. Two epochs saved, then a third resumed, against three at once.
epochs=(--set checkpoint.every=epoch --set checkpoint.max_to_keep=3)
expect 0 "test accuracy" -- train --config "$config" "${small[@]}" "${epochs[@]}" --set train.epochs=2 \
  --set checkpoint.dir=ckpt --run-dir run_two
check "the run saved ckpt-16" test "$(latest ckpt)" = ckpt-16
cp -r ckpt ckpt_np2 && cp -r ckpt ckpt_np4
expect 0 "test accuracy" -- train --config "$config" "${small[@]}" "${epochs[@]}" --set train.epochs=3 \
  --set checkpoint.dir=ckpt_full --run-dir run_full
third_epoch_loss() { python3 -c "import json; print([r for r in map(json.loads, open('$1/metrics.jsonl')) if r.get('split') == 'train'][-1]['loss'])"; }
same_loss() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not abs(a - b) <= 1e-4 * max(1, abs(a)))" "$1" "$2"; }
full=$(third_epoch_loss run_full)
expect 0 "resuming ckpt/ckpt-16 " -- resume --config "$config" "${small[@]}" "${epochs[@]}" "${data_parallel[@]}" \
  --set train.epochs=3 --set checkpoint.dir=ckpt --run-dir run_resumed_8
check "resumed on {batch: 8}: the uninterrupted run's third-epoch loss $full, got $(third_epoch_loss run_resumed_8)" \
  same_loss "$full" "$(third_epoch_loss run_resumed_8)"
if mpi_runnable "$dtrain"; then
  # np 2 on the config's mesh; np 4 with the sequence in 4 shards and the heads on model.
  for np in 2 4; do
    mesh=()
    [[ $np == 4 ]] && mesh=(--set "mesh.dims={batch: 1, model: 2, seq: 4}")
    rc=0
    timeout 300 mpirun -np $np --oversubscribe "$dtrain" resume --config "$config" "${small[@]}" "${epochs[@]}" "${mesh[@]}" \
      --set train.epochs=3 --set checkpoint.dir=ckpt_np$np --run-dir run_resumed_np$np </dev/null >np$np.log 2>&1 || rc=$?
    check "mpirun -np $np resume exits 0: $(tail -2 np$np.log)" test "$rc" = 0
    check "resumed under mpirun -np $np: the uninterrupted run's third-epoch loss $full, got $(third_epoch_loss run_resumed_np$np 2>&1 | tail -1)" \
      same_loss "$full" "$(third_epoch_loss run_resumed_np$np)"
  done
else
  skip_part "no mpirun or no MPI build: the resumes under mpirun -np 2 and 4"
fi
report
