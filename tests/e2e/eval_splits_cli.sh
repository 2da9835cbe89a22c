#!/usr/bin/env bash
# End-to-end: `eval --split validation` evaluates the config's data.validation_split as training took it (a
# fraction of train, or a split string; the last validation row's loss), and is refused naming the key when
# there is none; split, metric and data path typos get a did-you-mean (exit 2, at the key or the option).
# Usage: eval_splits_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest

# 96 training and 32 test 4x4 uint8 examples (pixel k bright when k % 4 == label) as .npy files, also as a
# CSV file; an IMDB-like tree and a text folder.
PYTHONPATH="$lib" python3 - <<'PY'
import os, random, struct
random.seed(3)
os.makedirs("npy")
from npy_file import npy
with open("data.csv", "w") as csv:
    csv.write("label," + ",".join(f"p{k}" for k in range(16)) + "\n")
    for split, count in (("train", 96), ("test", 32)):
        pixels, labels = bytearray(), []
        for _ in range(count):
            label = random.randrange(4)
            row = [random.randrange(0, 100) + (150 if k % 4 == label else 0) for k in range(16)]
            pixels += bytes(row)
            labels.append(label)
            csv.write(f"{label}," + ",".join(map(str, row)) + "\n")
        npy(f"npy/{split}_x.npy", "|u1", (count, 4, 4), bytes(pixels))
        npy(f"npy/{split}_y.npy", "<i8", (count,), struct.pack(f"<{count}q", *labels))
for root in ("data/aclImdb", "texts"):
    for split in ("train", "test"):
        for label in ("neg", "pos"):
            os.makedirs(f"{root}/{split}/{label}")
            for i in range(6):
                open(f"{root}/{split}/{label}/{i}_7.txt", "w").write(("great" if label == "pos" else "bad") + " film" * i)
PY

cat >npy.yaml <<'YAML'
mesh: {dims: {batch: 2}}
data:
  dataset: arrays
  path: npy
  arrays: {train: {features: train_x.npy, labels: train_y.npy}, test: {features: test_x.npy, labels: test_y.npy}, divide_by: 255}
  validation_split: 0.25
  batch_size: 8
  shuffle: {seed: 1}
model:
  - {flatten: {}}
  - {dense: 4}
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.05}}}
checkpoint: {dir: ckpt, every: epoch}
run_dir: run
YAML
expect 0 "72 training and 32 test examples" -- train --config npy.yaml
# last_validation: the loss and accuracy of the run's last validation row (at the last checkpoint's step).
last_validation() {
  python3 -c '
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["split"] == "validation"]
print(rows[-1]["step"], rows[-1]["examples"], repr(rows[-1]["loss"]), repr(rows[-1]["accuracy"]))' "$1"
}
read -r step examples loss accuracy < <(last_validation run/metrics.jsonl)
expect 0 "split validation \(data.validation_split: 0.25 of train\): loss [0-9.]+ accuracy [0-9.]+ \(24 examples\)" -- \
  eval --config npy.yaml --split validation
check "eval --split validation of ckpt-$step gives training's last validation ($loss, $accuracy)" python3 - "$loss" "$accuracy" <<'PY'
import re, sys
loss, accuracy = float(sys.argv[1]), float(sys.argv[2])
got = re.search(r"loss ([0-9.]+) accuracy ([0-9.]+) \((\d+) examples\)", open("out").read())
assert abs(float(got.group(1)) - loss) <= 1e-6 * max(1, loss) and abs(float(got.group(2)) - accuracy) <= 1e-9, (got.groups(), loss, accuracy)
PY
check "its metrics row says eval_split validation" python3 -c '
import json
rows = [r for r in map(json.loads, open("run/metrics.jsonl")) if r["split"] == "eval"]
assert rows[-1]["eval_split"] == "validation" and rows[-1]["examples"] == 24, rows[-1]'
# A split string: the same examples as naming them.
expect 0 "split validation \(data.validation_split: train\[72:\]\): .*\(24 examples\)" -- \
  eval --config npy.yaml --split validation --set data.train_split="train[:72]" --set data.validation_split="train[72:]"
sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >by_validation
expect 0 "split train\[72:\]: .*\(24 examples\)" -- eval --config npy.yaml --split "train[72:]"
sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >by_name
check "validation train[72:] is the split train[72:]" cmp by_validation by_name
check "which is the fraction's too" python3 - "$loss" <<'PY'
import sys
assert abs(float(open("by_name").read().split()[0]) - float(sys.argv[1])) <= 1e-6, open("by_name").read()
PY

# No validation split: refused, naming the key; split typos: the data set's splits and the nearest.
grep -v validation_split npy.yaml >plain.yaml
expect 2 "^dtrain: error: --split validation: plain.yaml has no data.validation_split, the examples training validates on; give it one, or evaluate a split of the data set \(train, test\)$" -- \
  eval --config plain.yaml --checkpoint ckpt --split validation
expect 2 "^dtrain: error: --split tset: unknown split 'tset' \(its splits: train, test, validation\); did you mean 'test'\?$" -- \
  eval --config npy.yaml --split tset
expect 2 "^dtrain: error: --split valdation: unknown split 'valdation' .*; did you mean 'validation'\?$" -- \
  eval --config npy.yaml --split valdation
sed 's/^  validation_split: 0.25/  test_split: tset/' npy.yaml >tset.yaml
expect 2 "^dtrain: error: tset.yaml:6:15: data.test_split: expected a split: train or test, .* got 'tset'; did you mean 'test'\?$" -- \
  train --config tset.yaml
sed -e 's/dataset: arrays/dataset: csv/' -e 's/path: npy/path: data.csv/' -e 's/  arrays: .*/  csv: {label: label}/' \
  -e 's/validation_split: 0.25/train_split: train[:96]\n  test_split: train[96:]/' npy.yaml >csv.yaml
expect 2 "^dtrain: error: --set data.train_split=trian\[:96\]: data.train_split: expected a split: train or test, .*got 'trian\[:96\]'; did you mean 'train'\?$" -- \
  train --config csv.yaml --set "data.train_split=trian[:96]"
cat >texts.yaml <<'YAML'
mesh: {dims: {batch: 2}}
data: {dataset: text_folder, path: texts, vectorizer: {mode: tf_idf, max_tokens: 3}, batch_size: 4, test_split: tets}
model:
  - {dense: 2}
train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}
checkpoint: {dir: ckpt_texts, every: never}
YAML
expect 2 "^dtrain: error: texts.yaml:2:[0-9]+: split 'tets' has no folder 'texts/tets' .*; did you mean 'test'\?$" -- train --config texts.yaml

# Metric names where a monitor is read: Keras' shortened val_acc.
sed 's/^train: {epochs: 2,/train: {early_stopping: {monitor: val_acc, patience: 2}, epochs: 2,/' npy.yaml >monitor.yaml
expect 2 "^dtrain: error: monitor.yaml:12:[0-9]+: train.early_stopping.monitor: expected one of val_loss, val_accuracy, got 'val_acc'; did you mean 'val_accuracy'\?$" -- \
  train --config monitor.yaml
expect 2 "^dtrain: error: --set checkpoint.keep_best=val_acc: checkpoint.keep_best: expected one of val_loss, val_accuracy, got 'val_acc'; did you mean 'val_accuracy'\?$" -- \
  train --config npy.yaml --set checkpoint.keep_best=val_acc

# A data path that differs from one there by case or a typo: named, not fetched.
cat >imdb.yaml <<'YAML'
mesh: {dims: {batch: 2}}
data: {dataset: imdb, path: data/aclimdb, vectorizer: {mode: tf_idf, max_tokens: 3}, batch_size: 4}
model:
  - {dense: 2}
train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}
checkpoint: {dir: ckpt_imdb, every: never}
YAML
expect 2 "^dtrain: error: imdb.yaml:2:[0-9]+: data.path: 'data/aclimdb' does not exist; did you mean 'data/aclImdb'\?$" -- train --config imdb.yaml
expect 2 "'data/aclImbd' does not exist; did you mean 'data/aclImdb'\?$" -- train --config imdb.yaml --set data.path=data/aclImbd
expect 2 "'data/cifar' does not exist \(scripts/fetch_data.sh imdb data/cifar fetches it\)$" -- train --config imdb.yaml --set data.path=data/cifar
expect 2 "'Texts' does not exist; did you mean 'texts'\?$" -- train --config texts.yaml --set data.path=Texts

report
