#!/usr/bin/env bash
# End-to-end: what Keras users reach for (issue 28). early_stopping.restore_best_weights ends a run with the best
# validation's weights (its test result and last checkpoint equal `eval` of DIR/best; also under mpirun -np 2);
# reduce_lr_on_plateau logs its reductions like Keras, writes the rate to metrics.jsonl, and a run interrupted
# after a reduction and resumed gives the uninterrupted losses (1e-6); a binary head (binary_crossentropy on a
# 1-unit sigmoid) learns a two-class text folder, evaluates and predicts; `eval --report`'s precision, recall,
# F1 and confusion matrix equal counts made here from predict's classes.
# Usage: keras_callbacks_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
source "$lib/mnist_fixture.sh"  # data/ (512 training images), mp.yaml (batch 64)

# ---- restore_best_weights ----
# Validated every 2 steps on the last quarter; min_delta 10: only the first validation (step 2) is ever the
# best, so the run stops after step 4 and restores step 2's weights.
restoring=(--set data.validation_split=0.25 --set train.validation_every=2 --set train.epochs=3
           --set "train.early_stopping={patience: 1, min_delta: 10, restore_best_weights: true}"
           --set checkpoint.keep_best=val_loss --set checkpoint.max_to_keep=1 --set checkpoint.every=3)
expect 0 "restored the weights of epoch 1 \(step 2, val_loss [0-9.]+\), the best validation" -- \
  train --config mp.yaml "${restoring[@]}"
check "the summary says the test result is the restored weights'" grep -q "with the best weights, of step 2, restored" out
check "stopped at step 4, DIR/best is step 2" test "$(latest ckpt) $(cat ckpt/best)" = "ckpt-4 ckpt-2"
check "the end row names the restored step" python3 -c "
import json; rows = [json.loads(l) for l in open('run/metrics.jsonl')]
end = rows[-1]; assert end['event'] == 'end' and end['restored_step'] == 2 and end['best_step'] == 2, end"
test_loss=$(python3 -c "
import json; print([json.loads(l) for l in open('run/metrics.jsonl') if '\"test\"' in l][-1]['loss'])")
for checkpoint in ckpt/best ckpt; do
  expect 0 "eval ckpt/ckpt-[24]" -- eval --config mp.yaml --checkpoint "$checkpoint"
  eval_loss=$(sed -nE 's/.*loss ([0-9.]+) accuracy.*/\1/p' out)
  check "eval of $checkpoint (loss $eval_loss) equals the run's test loss $test_loss" \
    python3 -c "import sys; sys.exit(abs($eval_loss - $test_loss) > 1e-6)"
done
expect 2 "train.early_stopping.restore_best_weights: restores the weights of the best validation from the checkpoint DIR/best names: set checkpoint.keep_best: val_loss" -- \
  train --config mp.yaml --set data.validation_split=0.1 --set "train.early_stopping={restore_best_weights: true}" --overwrite
expect 0 "early stopping: val_loss \(min\), patience 1 validation\(s\), min_delta 10; the best weights restored at the end" -- \
  plan --config mp.yaml "${restoring[@]}"

if mpi_runnable "$dtrain"; then
  rm -rf ckpt run
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rc=0
  timeout 120 mpirun --oversubscribe -np 2 "$dtrain" train --config mp.yaml "${restoring[@]}" </dev/null >out 2>&1 || rc=$?
  check "mpirun -np 2 exits 0 (rc $rc): $(tail -3 out)" test "$rc" = 0
  check "mpirun -np 2 restores step 2's weights" grep -q "restored the weights of epoch 1 (step 2" out
  mpi_loss=$(python3 -c "
import json; print([json.loads(l) for l in open('run/metrics.jsonl') if '\"test\"' in l][-1]['loss'])")
  check "mpirun -np 2: the test loss $mpi_loss is one process's $test_loss" \
    python3 -c "import sys; sys.exit(abs($mpi_loss - $test_loss) > 1e-5 * $test_loss)"
else
  echo "note: no mpirun or no MPI build: the mpirun check is skipped"
fi

# ---- reduce_lr_on_plateau ----
# min_delta 10: no validation after the first improves; patience 1 and cooldown 2: a reduction every other
# validation (steps 4, 8, 12, ...; Keras counts the cooldown down before it counts the wait), factor 0.5.
rm -rf ckpt run
plateau=(--set data.validation_split=0.25 --set train.validation_every=2 --set train.epochs=3 --set train.log_every=1
         --set "train.reduce_lr_on_plateau={patience: 1, factor: 0.5, min_delta: 10, cooldown: 2}"
         --set checkpoint.every=3 --set run_dir=whole --set checkpoint.dir=whole_ckpt)
expect 0 "Epoch 1: ReduceLROnPlateau reducing learning rate to 0.005 \(step 4" -- train --config mp.yaml "${plateau[@]}"
check "reduced again at step 8 (epoch 2 of 6 steps)" grep -q "Epoch 2: ReduceLROnPlateau reducing learning rate to 0.0025 (step 8" out
expect 0 "reduce lr on plateau: val_loss \(mode auto\), factor 0.5, patience 1" -- plan --config mp.yaml "${plateau[@]}"
# Interrupted at step 5 (after the first reduction, mid-cooldown) and resumed.
expect 0 "stopped at train.max_steps = 5" -- train --config mp.yaml "${plateau[@]}" --set run_dir=parts \
  --set checkpoint.dir=parts_ckpt --set train.max_steps=5
expect 0 "Epoch 2: ReduceLROnPlateau reducing learning rate to 0.0025 \(step 8" -- \
  resume --config mp.yaml "${plateau[@]}" --set run_dir=parts --set checkpoint.dir=parts_ckpt
check "resumed: every step's loss and rate equal the uninterrupted run's (1e-6)" python3 - <<'PY'
import json
def steps(path):
    rows = [json.loads(l) for l in open(path)]
    return {r["step"]: (r["loss"], r["learning_rate"]) for r in rows if r["split"] == "train_steps"}
whole, parts = steps("whole/metrics.jsonl"), steps("parts/metrics.jsonl")
assert sorted(whole) == sorted(parts) == list(range(1, 19)), (sorted(whole), sorted(parts))
for step in whole:
    assert abs(whole[step][0] - parts[step][0]) <= 1e-6 * abs(whole[step][0]), (step, whole[step], parts[step])
    assert whole[step][1] == parts[step][1], (step, whole[step], parts[step])
rates = [whole[s][1] for s in sorted(whole)]
assert rates[:4] == [0.01] * 4 and rates[4:8] == [0.005] * 4 and rates[8] == 0.0025, rates
PY

# ---- a binary head ----
# texts/{train,test}/{neg,pos}: each class leans on its own words.
python3 - <<'PY'
import os, random
random.seed(5)
words = "the a was it and of this movie film story".split()
lean = {"neg": ["awful", "boring", "bad"], "pos": ["great", "fine", "good"]}
for split, count in (("train", 60), ("test", 20)):
    for label, own in lean.items():
        os.makedirs(f"texts/{split}/{label}", exist_ok=True)
        for i in range(count):
            text = [random.choice(words) for _ in range(random.randrange(3, 10))] + random.sample(own, 1)
            # Some test texts carry the other class's word too: not every prediction is right.
            if split == "test" and i % 8 == 0:
                text += random.sample(lean["pos" if label == "neg" else "neg"], 2)
            random.shuffle(text)
            open(f"texts/{split}/{label}/{i}.txt", "w").write(" ".join(text))
PY
cat >binary.yaml <<YAML
mesh: {dims: {batch: 2}}
data:
  dataset: text_folder
  path: texts
  vectorizer: {mode: tf_idf, max_tokens: 20}
  batch_size: 8
  shuffle: {seed: 2}
  validation_split: 0.25
model:
  - {dense: 8, activation: relu}
  - {dense: 1, activation: sigmoid}
train:
  epochs: 6
  loss: binary_crossentropy
  optimizer: {adam: {learning_rate: 0.05}}
  early_stopping: {patience: 3}
checkpoint: {dir: bckpt, every: epoch}
run_dir: brun
YAML
expect 0 "test accuracy" -- train --config binary.yaml
check "the binary head learned (test accuracy above 0.8)" python3 -c "
import json; test = [json.loads(l) for l in open('brun/metrics.jsonl') if '\"test\"' in l][-1]
assert test['accuracy'] > 0.8 and test['examples'] == 40, test"
check "validation rows" grep -q '"split": "validation"' brun/metrics.jsonl
expect 2 "binary_crossentropy takes the probability of class 1: the model must end in a 1-unit sigmoid" -- \
  train --config binary.yaml --set "model=[{dense: 2}]" --overwrite

# Predict every test text: the probability of class 1 and the class; then eval --report against counts made here.
find texts/test -name '*.txt' | sort >files
mapfile -t files <files
args=()
for f in "${files[@]}"; do args+=(--file "$f"); done
expect 0 "^0	texts/test/neg/0.txt	class [01]	(neg|pos) [01]\.[0-9]{4}	probabilities" -- predict --checkpoint bckpt "${args[@]}"
cp out predictions
expect 0 "confusion matrix \(rows: true class, columns: predicted class\)" -- eval --config binary.yaml --report --set "mesh.dims={batch: 4}"
cp out report
check "eval --report's numbers equal counts from predict's classes" python3 - <<'PY'
import json, re
counts = [[0, 0], [0, 0]]
for line in open("predictions").read().splitlines():
    index, path, label, named, probabilities = line.split("\t")
    p0, p1 = (float(v) for v in probabilities.split()[1:])
    predicted = int(label.split()[1])
    assert abs(p0 + p1 - 1) < 1e-4 and predicted == (1 if p1 > 0.5 else 0), line
    counts[0 if "/neg/" in path else 1][predicted] += 1
assert sum(map(sum, counts)) == 40 and counts[0][1] + counts[1][0] > 0, counts  # some errors: a real test
names = ["neg", "pos"]
def scores(k):
    tp = counts[k][k]
    precision = tp / (counts[0][k] + counts[1][k]) if counts[0][k] + counts[1][k] else 0.0
    recall = tp / sum(counts[k])
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, sum(counts[k])
text = open("report").read()
for k, name in enumerate(names):
    row = re.search(rf"^\s+{name}\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)$", text, re.M)
    assert row, (name, text)
    p, r, f, s = scores(k)
    assert [round(p, 4), round(r, 4), round(f, 4), s] == [float(row[1]), float(row[2]), float(row[3]), int(row[4])], (row[0], p, r, f, s)
macro = [sum(scores(k)[i] for k in range(2)) / 2 for i in range(3)]
row = re.search(r"^\s+macro avg\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)$", text, re.M)
assert [float(row[1]), float(row[2]), float(row[3]), int(row[4])] == [round(v, 4) for v in macro] + [40], (row[0], macro)
matrix = re.findall(r"^\s+(neg|pos)\s+(\d+)\s+(\d+)$", text, re.M)
assert [[int(a), int(b)] for _, a, b in matrix] == counts, (matrix, counts)
eval_row = [json.loads(l) for l in open("brun/metrics.jsonl")][-1]
report = eval_row["report"]
assert eval_row["split"] == "eval" and report["confusion"] == counts, eval_row
for k in range(2):
    got = report["classes"][k]
    p, r, f, s = scores(k)
    assert got["name"] == names[k] and got["support"] == s, got
    assert abs(got["precision"] - p) < 1e-9 and abs(got["recall"] - r) < 1e-9 and abs(got["f1"] - f) < 1e-9, (got, p, r, f)
assert all(abs(report["macro_avg"][key] - v) < 1e-9 for key, v in zip(["precision", "recall", "f1"], macro)), report
PY
expect 0 "eval" -- eval --config binary.yaml
check "without --report: no report" bash -c "! grep -q 'confusion matrix' out && ! tail -1 brun/metrics.jsonl | grep -q report"

report
