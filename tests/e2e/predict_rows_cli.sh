#!/usr/bin/env bash
# End-to-end batch prediction with the real `dtrain` binary: predict --npy / --csv rows (uint8, float32, float64,
# int64; CSV with and without the label column) with --output FILE for arrays, csv, mnist and text models;
# the file's classes give eval's accuracy and per-class counts; every bad input exits 2 naming the file.
# Usage: predict_rows_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest

# 96 training and 32 test examples of 4x4 uint8 "images" (pixel k bright when k % 4 == label) as .npy files
# (NumPy's format 1.0, written without numpy) in four element types, and as CSV files.
PYTHONPATH="$lib" python3 - <<'PY'
import os, random, struct
random.seed(7)
os.makedirs("npy")
from npy_file import npy
header = ",".join(f"p{k}" for k in range(16))
with open("data.csv", "w") as all_rows, open("test_labeled.csv", "w") as labeled, open("test_rows.csv", "w") as rows:
    all_rows.write("label," + header + "\n")
    labeled.write(header + ",label\n")  # the label last: columns are found by name
    rows.write(header + "\n")
    for split, count in (("train", 96), ("test", 32)):
        pixels, labels = [], []
        for e in range(count):
            label = random.randrange(4)
            row = [random.randrange(0, 100) + (150 if k % 4 == label else 0) for k in range(16)]
            pixels += row
            labels.append(label)
            all_rows.write(f"{label}," + ",".join(map(str, row)) + "\n")
            if split == "test":
                labeled.write(",".join(map(str, row)) + f",{label}\n")
                rows.write(",".join(map(str, row)) + "\n")
        npy(f"npy/{split}_x.npy", "|u1", (count, 4, 4), bytes(pixels))
        npy(f"npy/{split}_y.npy", "<i8", (count,), struct.pack(f"<{count}q", *labels))
        if split == "test":
            npy("test_f4.npy", "<f4", (count, 16), struct.pack(f"<{16 * count}f", *pixels))
            npy("test_f8.npy", "<f8", (count, 4, 4), struct.pack(f"<{16 * count}d", *pixels))
            npy("test_i8.npy", "<i8", (count, 16), struct.pack(f"<{16 * count}q", *pixels))
            npy("test_3.npy", "|u1", (count, 3, 4), bytes(pixels[:12 * count]))
            npy("test_1d.npy", "|u1", (16,), bytes(pixels[:16]))
            open("test_labels.txt", "w").write(" ".join(map(str, labels)))
with open("short_row.csv", "w") as f:
    f.write(header + "\n" + ",".join(["1"] * 16) + "\n" + ",".join(["1"] * 15) + "\n")
with open("word.csv", "w") as f:
    f.write(header + "\n" + ",".join(["1"] * 15) + ",seven\n")
with open("narrow.csv", "w") as f:
    f.write(",".join(f"p{k}" for k in range(15)) + "\n" + ",".join(["1"] * 15) + "\n")
PY

config() {
  cat >"$1.yaml" <<YAML
mesh: {dims: {batch: 2}}
data:
$2
  batch_size: 8
  shuffle: {seed: 1}
model:
  - {flatten: {}}
  - {dense: 4}
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.05}}}
checkpoint: {dir: ckpt_$1, every: epoch}
run_dir: run_$1
YAML
}
config npy "  dataset: arrays
  path: npy
  arrays: {train: {features: train_x.npy, labels: train_y.npy}, test: {features: test_x.npy, labels: test_y.npy}, divide_by: 255}"
config csv "  dataset: csv
  path: data.csv
  csv: {label: label}
  train_split: train[:96]
  test_split: train[96:]
  classes: [a, 'b,c', c, d]"
expect 0 "test accuracy" -- train --config npy.yaml
expect 0 "test accuracy" -- train --config csv.yaml

# check_against_eval PREDICTIONS EVAL_OUTPUT NAMES...: the file's header and rows are well formed (class =
# the most probable, its name, probabilities summing to 1) and its classes against the true labels give
# eval's accuracy and per-class counts exactly.
check_against_eval() {
  python3 - "$@" <<'PY'
import csv, re, sys
path, eval_out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = list(csv.reader(open(path)))
assert rows[0] == ["index", "class", "name"] + [f"p{k}" for k in range(len(names))], rows[0]
labels = [int(v) for v in open("test_labels.txt").read().split()]
assert len(rows) == 1 + len(labels), len(rows)
right = [0] * len(names)
for i, row in enumerate(rows[1:]):
    p = [float(v) for v in row[3:]]
    best = int(row[1])
    assert int(row[0]) == i and p[best] == max(p) and abs(sum(p) - 1) < 1e-5 and row[2] == names[best], row
    right[labels[i]] += best == labels[i]
text = open(eval_out).read()
accuracy = float(re.search(r"loss [0-9.]+ accuracy ([0-9.]+) \((\d+) examples\)", text).group(1))
assert abs(accuracy - sum(right) / len(labels)) < 1e-7, (accuracy, right)
counts = re.findall(r"^  class (.+): accuracy [0-9.]+ \((\d+) of (\d+) examples\)$", text, re.M)
assert [name for name, _, _ in counts] == names, counts
assert [int(correct) for _, correct, _ in counts] == right, (counts, right)
PY
}

# arrays: --npy of the test split's own file, then the same numbers in other element types and as CSV.
expect 0 "split test: .*\(32 examples\)" -- eval --config npy.yaml
cp out eval_npy
expect 0 "^predict: 32 predictions of checkpoint ckpt_npy/ckpt-24 \(step 24\) written to npy.csv$" -- \
  predict --checkpoint ckpt_npy --npy npy/test_x.npy --output npy.csv
check "--npy --output: the rows give eval's accuracy and per-class counts" check_against_eval npy.csv eval_npy 0 1 2 3
expect 0 "written to f4.csv" -- predict --checkpoint ckpt_npy --npy test_f4.npy --output f4.csv
check "float32 rows [32, 16] predict as the uint8 [32, 4, 4] ones" cmp npy.csv f4.csv
expect 0 "written to f8.csv" -- predict --checkpoint ckpt_npy --npy test_f8.npy --output f8.csv
check "float64 rows too" cmp npy.csv f8.csv
expect 0 "written to i8.csv" -- predict --checkpoint ckpt_npy --npy test_i8.npy --output i8.csv
check "int64 rows too" cmp npy.csv i8.csv
expect 0 "written to rows.csv" -- predict --checkpoint ckpt_npy --csv test_rows.csv --output rows.csv
check "an arrays model reads CSV rows (every column) too" cmp npy.csv rows.csv
expect 0 "^31	class [0-3]	[0-3] [01]\.[0-9]{4}	probabilities" -- predict --checkpoint ckpt_npy --npy npy/test_x.npy
check "without --output: a line per row, the file's classes" python3 - <<'PY'
import csv
printed = [line.split("\t")[1] for line in open("out") if "\tclass " in line]
assert printed == [f"class {row['class']}" for row in csv.DictReader(open("npy.csv"))], printed
PY

# csv: the test rows with their label column (last here), and without it; a class name with a comma is quoted.
expect 0 "split train\[96:\]: .*\(32 examples\)" -- eval --config csv.yaml
cp out eval_csv
expect 0 "written to labeled.csv" -- predict --checkpoint ckpt_csv --csv test_labeled.csv --output labeled.csv
check "--csv --output: the rows give eval's accuracy and per-class counts" check_against_eval labeled.csv eval_csv a b,c c d
expect 0 "written to unlabeled.csv" -- predict --checkpoint ckpt_csv --csv test_rows.csv --output unlabeled.csv
check "the label column may be left out" cmp labeled.csv unlabeled.csv
check "a name with a comma is quoted" grep -q '^[0-9]*,1,"b,c",' labeled.csv
expect 0 "written to csv_npy.csv" -- predict --checkpoint ckpt_csv --npy test_f4.npy --output csv_npy.csv
check "a csv model reads .npy rows too" cmp labeled.csv csv_npy.csv

# A text model and --file / raw texts with --output: the same header, the class names.
python3 - <<'PY'
import os
for split in ("train", "test"):
    for label, word in (("neg", "bad"), ("pos", "great")):
        os.makedirs(f"texts/{split}/{label}")
        for i in range(8):
            open(f"texts/{split}/{label}/{i}.txt", "w").write(f"the film was {word} " + "and it " * (i % 3))
PY
cat >texts.yaml <<'YAML'
mesh: {dims: {batch: 2}}
data: {dataset: text_folder, path: texts, vectorizer: {mode: tf_idf, max_tokens: 8}, batch_size: 4}
model:
  - {dense: 2}
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.1}}}
checkpoint: {dir: ckpt_texts, every: epoch}
run_dir: run_texts
YAML
expect 0 "test accuracy" -- train --config texts.yaml
expect 0 "written to texts.csv" -- predict --checkpoint ckpt_texts "a great film" "a bad film" --output texts.csv
check "texts --output: header and one row a text, named by the folders" python3 - <<'PY'
import csv
rows = list(csv.reader(open("texts.csv")))
assert rows[0] == ["index", "class", "name", "p0", "p1"] and len(rows) == 3, rows
assert [r[2] for r in rows[1:]] == [["neg", "pos"][int(r[1])] for r in rows[1:]], rows
PY
expect 0 "written to files.csv" -- predict --checkpoint ckpt_texts --file texts/test/pos/0.txt --file texts/test/neg/0.txt \
  --output files.csv
check "--file --output: a row a file" test "$(wc -l <files.csv)" = 3

# mnist: uint8 .npy pixels are read as the IDX reader reads them (divided by 255), floats as they are.
source "$lib/mnist_fixture.sh"
expect 0 "test accuracy" -- train --config dp.yaml --set train.epochs=1
python3 - <<'PY'
import struct
raw = open("data/t10k-images-idx3-ubyte", "rb").read()[16:]
def npy(path, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(map(str, shape)))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
npy("images.npy", "|u1", (128, 28, 28), raw)
npy("images_f4.npy", "<f4", (128, 784), struct.pack("<100352f", *[v / 255.0 for v in raw]))
PY
expect 0 "written to idx.csv" -- predict --checkpoint ckpt --idx data/t10k-images-idx3-ubyte --output idx.csv
expect 0 "written to images.csv" -- predict --checkpoint ckpt --npy images.npy --output images.csv
check "an mnist model: uint8 .npy images predict as the IDX file" cmp idx.csv images.csv
expect 0 "written to images_f4.csv" -- predict --checkpoint ckpt --npy images_f4.npy --output images_f4.csv
check "and float32 pixels / 255 give the same classes" bash -c 'cmp <(cut -d, -f2 idx.csv) <(cut -d, -f2 images_f4.csv)'

# Every bad input: exit 2, naming the file (and the line and column).
expect 2 "^dtrain: error: \[predict\] --npy 'test_3.npy' has shape \(32,3,4\): its rows \(shape \(3,4\)\) are not the model's input \(4,4\) of checkpoint ckpt_npy/ckpt-24 \(16 numbers a row" -- \
  predict --checkpoint ckpt_npy --npy test_3.npy
expect 2 "^dtrain: error: \[predict\] --npy 'test_1d.npy' has shape \(16\)" -- predict --checkpoint ckpt_npy --npy test_1d.npy
expect 2 "^dtrain: error: \[npy\] cannot open 'missing.npy'" -- predict --checkpoint ckpt_npy --npy missing.npy
expect 2 "^dtrain: error: \[npy\] 'test_rows.csv' is not a .npy file" -- predict --checkpoint ckpt_npy --npy test_rows.csv
expect 2 "^dtrain: error: \[predict\] --csv 'narrow.csv': line 1 \(the header\) names 15 feature columns \(p0, p1, .*\) but the model of checkpoint ckpt_npy/ckpt-24 takes 16 numbers a row" -- \
  predict --checkpoint ckpt_npy --csv narrow.csv
expect 2 "^dtrain: error: \[csv\] short_row.csv:3:.*: 15 fields, but the header names 16 columns" -- \
  predict --checkpoint ckpt_npy --csv short_row.csv
expect 2 "^dtrain: error: \[csv\] word.csv:2:.*: 'seven' \(column 'p15'\) is not a finite number" -- \
  predict --checkpoint ckpt_npy --csv word.csv
sed 's/^p0,/q0,/' test_rows.csv >renamed.csv
expect 2 "^dtrain: error: \[csv\] renamed.csv:1:1: no column 'p0' in the header" -- predict --checkpoint ckpt_csv --csv renamed.csv
expect 2 "^dtrain: error: \[csv\] cannot read 'missing.csv'" -- predict --checkpoint ckpt_csv --csv missing.csv
expect 2 "^dtrain: error: \[predict\] --npy test_f4.npy: checkpoint ckpt_texts/ckpt-8 holds a model of data set text_folder, which reads texts" -- \
  predict --checkpoint ckpt_texts --npy test_f4.npy
expect 2 "^dtrain: error: \[predict\] --csv test_rows.csv: checkpoint ckpt_texts/ckpt-8 holds a model of data set text_folder, which reads texts" -- \
  predict --checkpoint ckpt_texts --csv test_rows.csv
expect 2 "^dtrain: error: \[predict\] --file 'texts/test/pos/0.txt': checkpoint ckpt_npy/ckpt-24 holds a model of data set arrays, which reads rows of numbers" -- \
  predict --checkpoint ckpt_npy --file texts/test/pos/0.txt
expect 2 "^dtrain: error: \[predict\] --output 'nowhere/p.csv': cannot write it" -- \
  predict --checkpoint ckpt_npy --npy npy/test_x.npy --output nowhere/p.csv
expect 2 "one kind of input" -- predict --checkpoint ckpt_npy --npy npy/test_x.npy --csv test_rows.csv

report
