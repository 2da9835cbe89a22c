#!/usr/bin/env bash
# End-to-end: the real `dtrain` binary on a generated 3-class text folder (dataset text_folder, Keras'
# text_dataset_from_directory layout): plan (classes counted from the folders) -> train -> inspect (classes)
# -> eval (one line per class, adding up to the total; the metrics.jsonl row) -> predict (class names) ->
# eval with other class names and a test split with other classes refused (exit 2).
# Usage: text_folder_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest

# texts/{train,test}/{sports,arts,science}/<i>.txt: each class leans on its own words; files at any depth
# count, other extensions and files beside the class folders do not.
python3 - <<'PY'
import os, random
random.seed(7)
words = "the a was it and of new old big small".split()
lean = {"sports": ["match", "goal"], "arts": ["paint", "song"], "science": ["atom", "cell"]}
for split, count in (("train", 30), ("test", 10)):
    for label, own in lean.items():
        for i in range(count):
            folder = f"texts/{split}/{label}" + ("/more" if i % 5 == 0 else "")
            os.makedirs(folder, exist_ok=True)
            text = [random.choice(words) for _ in range(random.randrange(3, 12))] + random.sample(own, 1)
            random.shuffle(text)
            with open(f"{folder}/{i}.txt", "w") as f:
                f.write(" ".join(text))
        with open(f"texts/{split}/{label}/notes.md", "w") as f:
            f.write("not an example")
open("texts/train/README.txt", "w").write("beside the classes: not an example")
PY

cat >tf.yaml <<YAML
mesh: {dims: {batch: 2}}
data:
  dataset: text_folder
  path: texts
  vectorizer: {mode: tf_idf, max_tokens: 17}
  batch_size: 10
  shuffle: {seed: 1}
model:
  - {dense: 3}
train: {epochs: 4, optimizer: {adam: {learning_rate: 0.1}}}
checkpoint: {dir: ckpt, every: epoch}
run_dir: run
YAML

expect 0 "3 classes \(text_folder, the subfolders of texts/train\)" -- plan --config tf.yaml
expect 0 "unknown classes \(text_folder: elsewhere/train is not there to list, so the model's output is not checked\)" -- \
  plan --config tf.yaml --set data.path=elsewhere
expect 0 "test accuracy" -- train --config tf.yaml
check "train read 90 training examples" grep -q "90 training and 30 test examples" out
expect 0 "^classes: arts, science, sports$" -- inspect ckpt

expect 0 "^  class sports: accuracy" -- eval --config tf.yaml --set "mesh.dims={batch: 5}"
check "eval prints a line per class, in label order, adding up to the overall accuracy" python3 - <<'PY'
import re
text = open("out").read()
overall = re.search(r"accuracy ([0-9.]+) \((\d+) examples\)", text)
rows = re.findall(r"^  class (\w+): accuracy ([0-9.]+) \((\d+) of (\d+) examples\)$", text, re.M)
assert [r[0] for r in rows] == ["arts", "science", "sports"], rows
assert all(int(r[3]) == 10 for r in rows), rows
right = sum(int(r[2]) for r in rows)
assert right == round(float(overall.group(1)) * 30), (right, overall.group(0))
assert all(abs(float(r[1]) - int(r[2]) / int(r[3])) < 1e-7 for r in rows), rows
assert 10 < right, right  # learned something
PY
check "metrics.jsonl's eval row has the classes" python3 - <<'PY'
import json
row = [json.loads(l) for l in open("run/metrics.jsonl")][-1]
assert row["split"] == "eval", row
assert [c["name"] for c in row["classes"]] == ["arts", "science", "sports"], row
assert sum(c["examples"] for c in row["classes"]) == row["examples"] == 30, row
assert abs(sum(c["correct"] for c in row["classes"]) / 30 - row["accuracy"]) < 1e-9, row
PY

expect 0 "^0	class [012]	(arts|science|sports) [01]\.[0-9]{4}	probabilities" -- \
  predict --checkpoint ckpt "the big match and a goal" "an old song to paint" "the atom of a cell"
check "predict names the most probable class of each text" python3 - <<'PY'
lines = open("out").read().splitlines()
assert len(lines) == 3, lines
names = ["arts", "science", "sports"]
for line in lines:
    index, label, named, probabilities = line.split("\t")
    p = [float(v) for v in probabilities.split()[1:]]
    k = int(label.split()[1])
    name, top = named.split()
    assert len(p) == 3 and abs(sum(p) - 1) < 1e-4 and name == names[k] and p[k] == max(p), line
    assert abs(float(top) - p[k]) < 1e-4, line
assert [l.split("\t")[2].split()[0] for l in lines] == ["sports", "arts", "science"], lines
PY

# Other names (a reordering of the same folders): the labels would mean other classes.
expect 2 "tf.yaml: the data's classes are \[sports, arts, science\] but checkpoint .*ckpt-[0-9]+ was trained on \[arts, science, sports\]" -- \
  eval --config tf.yaml --set "data.classes=[sports, arts, science]"
# A test split whose classes are not the training split's: named at test_split, with both lists.
mkdir -p texts/other/arts texts/other/sports
echo "paint" >texts/other/arts/0.txt
echo "goal" >texts/other/sports/0.txt
expect 2 "tf.yaml: the data's classes are \[arts, sports\] but checkpoint .* was trained on \[arts, science, sports\]" -- \
  eval --config tf.yaml --split other
expect 2 "^dtrain: error: --set data.test_split=other: the test split's classes \[arts, sports\] differ from the training split's \[arts, science, sports\]" -- \
  train --config tf.yaml --set data.test_split=other --overwrite
expect 2 "--set data.train_split=nowhere\[:50%\]: split 'nowhere' has no folder 'texts/nowhere'" -- \
  train --config tf.yaml --set "data.train_split=nowhere[:50%]" --overwrite
sed 's/  batch_size: 10/  batch_size: 10\n  train_split: nowhere/' tf.yaml >nowhere.yaml
expect 2 "^dtrain: error: nowhere.yaml:7:16: split 'nowhere' has no folder 'texts/nowhere'" -- \
  train --config nowhere.yaml --overwrite

report
