#!/usr/bin/env bash
# End-to-end: the real `dtrain` binary on dataset arrays (.npy files written here by plain Python, HDF5 made
# by h5import from the same bytes) and dataset csv: train -> eval (two meshes, a --split) -> resume; the
# .npy and HDF5 copies of one data set train to the same losses; bad files and configs exit 2 naming the file,
# dataset, line and column.
# Usage: arrays_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest

# 96 training and 32 test examples of 4x4 uint8 "images": pixel k of an example of label L is bright when
# k % 4 == L. Raw bytes (for h5import), .npy files (NumPy's format 1.0 header, no numpy needed) and a CSV.
PYTHONPATH="$lib" python3 - <<'PY'
import os, random, struct
random.seed(7)
os.makedirs("npy")
from npy_file import npy
with open("data.csv", "w") as csv:
    csv.write("label," + ",".join(f"p{k}" for k in range(16)) + "\n")
    for split, count in (("train", 96), ("test", 32)):
        pixels, labels = bytearray(), bytearray()
        for e in range(count):
            label = random.randrange(4)
            row = [random.randrange(0, 100) + (150 if k % 4 == label else 0) for k in range(16)]
            pixels += bytes(row)
            labels.append(label)
            csv.write(f"{label}," + ",".join(str(v) for v in row) + "\n")
        open(f"{split}_x.bin", "wb").write(pixels)
        open(f"{split}_y.bin", "wb").write(labels)
        npy(f"npy/{split}_x.npy", "|u1", (count, 4, 4), bytes(pixels))
        npy(f"npy/{split}_y.npy", "<i8", (count,), struct.pack(f"<{count}q", *labels))
PY

# config NAME DATA_KEYS: flatten + dense 4 on {batch: 2}.
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
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.05}}, log_every: 1}
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
  classes: [a, b, c, d]"

expect 0 "local \(4,4,4\) per device; unknown classes \(arrays: the training labels tell, and plan reads none\)" -- plan --config npy.yaml
expect 0 "test accuracy" -- train --config npy.yaml
check "the .npy run learns the bright pixels (test accuracy >= 0.9)" python3 - <<'PY'
import json
rows = [json.loads(line) for line in open("run_npy/metrics.jsonl")]
accuracy = [r["accuracy"] for r in rows if r.get("split") == "test"][-1]
assert accuracy >= 0.9, rows[-1]
PY
expect 0 "split test: .*\(32 examples\)" -- eval --config npy.yaml
sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_2
expect 0 "accuracy" -- eval --config npy.yaml --set mesh.dims.batch=4
sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_4
check "eval on {batch: 2} and {batch: 4} agree within 1e-5" python3 - <<'PY'
a, b = ([float(v) for v in open(n).read().split()] for n in ("eval_2", "eval_4"))
assert len(a) == 2 and all(abs(x - y) <= 1e-5 for x, y in zip(a, b)), (a, b)
PY
expect 0 "split train\[:16\]: .*\(16 examples\)" -- eval --config npy.yaml --split "train[:16]"
expect 2 "--split validation: npy.yaml has no data.validation_split" -- eval --config npy.yaml --split validation
expect 2 "checkpoint ckpt_npy/ckpt-24 holds a model of data set arrays: give --npy FILE or --csv FILE, not --idx" -- \
  predict --checkpoint ckpt_npy --idx npy/test_x.npy
expect 0 "resuming ckpt_npy/ckpt-24 " -- resume --config npy.yaml --set train.epochs=3

# Under mpirun -np 2 (one device a process) with a validation split: each process reads its own rows of the
# .npy files, and the run gives the per-step losses and validations of one process.
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  held=(--set data.validation_split=0.25 --set train.validation_every=4)
  expect 0 "validation at step 4: val_loss" -- train --config npy.yaml "${held[@]}" --set checkpoint.dir=ckpt_one --run-dir run_one
  rc=0
  timeout 120 mpirun --oversubscribe -np 2 "$dtrain" train --config npy.yaml "${held[@]}" --set checkpoint.dir=ckpt_two \
    --run-dir run_two </dev/null >out 2>&1 || rc=$?
  check "mpirun -np 2 train on .npy arrays with a validation split exits 0 ($(tail -3 out))" test $rc = 0
  check "one and two processes: the same per-step losses and validations (1e-5)" python3 - <<'PY'
import json
def rows(path, split):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if r.get("split") == split}
for split, count in (("train_steps", 18), ("validation", 4)):
    one, two = rows("run_one/metrics.jsonl", split), rows("run_two/metrics.jsonl", split)
    assert len(one) == count and one.keys() == two.keys(), (split, sorted(one), sorted(two))
    assert all(abs(one[s] - two[s]) <= 1e-5 * max(1.0, abs(one[s])) for s in one), (split, one, two)
PY
else
  echo "note: no mpirun or no MPI build: the mpirun case is not run"
fi

# The same bytes as HDF5 datasets: the same losses as the .npy run, step for step.
if command -v h5import >/dev/null; then
  for name in train_x train_y test_x test_y; do
    split=${name%_*}
    case $name in
      *_x) dims="$([[ $split == train ]] && echo 96 || echo 32) 4 4"; rank=3 ;;
      *) dims="$([[ $split == train ]] && echo 96 || echo 32)"; rank=1 ;;
    esac
    printf 'PATH /%s/%s\nINPUT-CLASS UIN\nINPUT-SIZE 8\nRANK %s\nDIMENSION-SIZES %s\nOUTPUT-CLASS UIN\nOUTPUT-SIZE 8\n' \
      "$split" "${name#*_}" "$rank" "$dims" >"$name.cfg"
  done
  h5import train_x.bin -c train_x.cfg train_y.bin -c train_y.cfg test_x.bin -c test_x.cfg test_y.bin -c test_y.cfg -o data.h5
  config h5 "  dataset: arrays
  path: data.h5
  arrays: {train: {features: /train/x, labels: /train/y}, test: {features: /test/x, labels: /test/y}, divide_by: 255}"
  expect 0 "test accuracy" -- train --config h5.yaml --set train.epochs=3
  check "HDF5 and .npy runs (the latter resumed after epoch 2) give the same 36 per-step losses" python3 - <<'PY'
import json
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if r.get("split") == "train_steps"}
a, b = losses("run_npy/metrics.jsonl"), losses("run_h5/metrics.jsonl")
assert len(a) == 36 and a == b, (sorted(a.items())[:4], sorted(b.items())[:4])
PY
  expect 2 "data.arrays: \[hdf5\] 'data.h5' has no dataset '/train/images'" -- \
    train --config h5.yaml --set "data.arrays.train.features=/train/images"
  expect 2 "'data.h5' dataset '/train/y' has shape \(96\); features need a first axis of examples" -- \
    train --config h5.yaml --set "data.arrays.train.features=/train/y"
else
  echo "note: h5import (hdf5-tools) not found: the HDF5 part is not run"
fi

# Bad arrays: a label outside the classes, a truncated .npy file, a Fortran-order header.
expect 2 "\[arrays\] 'npy/train_y.npy': label 3 of row [0-9]+ is outside \[0, 3\) \(data.classes names 3\)" -- \
  train --config npy.yaml --overwrite --set "data.classes=[a, b, c]"
head -c 164 npy/test_x.npy >npy/cut_x.npy
expect 2 "--set data.arrays.train.features=cut_x.npy: data.arrays: \[npy\] 'npy/cut_x.npy' holds 36 data bytes, but its header's uint8 array of shape \(32,4,4\) needs 512 \(truncated\)" -- \
  train --config npy.yaml --set "data.arrays.train.features=cut_x.npy"
sed 's/False/True/' npy/test_x.npy >npy/fortran_x.npy
expect 2 "'npy/fortran_x.npy' is stored in Fortran order" -- train --config npy.yaml --set "data.arrays.train.features=fortran_x.npy"

# CSV: plan, train, eval, and errors at FILE:LINE:COL.
expect 0 "local \(4,16\) per device; 4 classes \(csv\)" -- plan --config csv.yaml
expect 0 "test accuracy" -- train --config csv.yaml
expect 0 "split train\[96:\]: .*\(32 examples\)" -- eval --config csv.yaml
expect 2 "a CSV file is the one split 'train'" -- eval --config csv.yaml --split test
sed -i '5s/^\([0-9]\),[0-9]*/\1,12x/' data.csv
expect 2 "\[csv\] data.csv:5:3: '12x' \(column 'p0'\) is not a finite number" -- train --config csv.yaml --overwrite
sed -i '5s/12x/12/; 7s/,[0-9]*$//' data.csv
expect 2 "\[csv\] data.csv:7:[0-9]+: 16 fields, but the header names 17 columns" -- train --config csv.yaml --overwrite
expect 2 "--set data.csv.label=labels: data.csv.label: 'data.csv' has no column 'labels'; did you mean 'label'\?" -- \
  train --config csv.yaml --set data.csv.label=labels
: >empty.csv
expect 2 "data.csv: \[csv\] 'empty.csv' is empty: expected a header row" -- train --config csv.yaml --set data.path=empty.csv

report
