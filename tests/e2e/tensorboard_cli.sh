#!/usr/bin/env bash
# End-to-end: RUN_DIR/tensorboard (issue 33). A run with a validation split stopped at train.max_steps mid-epoch,
# resumed to its end, then `dtrain eval` of the test and validation splits: TensorBoard's own reader
# (EventAccumulator, from the .venv of scripts/python_env.sh) returns every scalar of metrics.jsonl exactly (as
# float32), at its step, under Keras' tags and run folders (train/, validation/, test/, eval/SPLIT/), and nothing
# else; the resumed run continues the curves in a second file of each folder; the text summary of each run row
# holds its mesh and config; every record's CRCs are right by TensorBoard's own CRC32C. train.tensorboard: false
# writes no folder; under mpirun -np 2 process 0 alone writes one.
# Usage: tensorboard_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
source "$lib/venv.sh"
source "$lib/mnist_fixture.sh"  # data/ (512 training images), dp.yaml (batch 64, run dir run/)

# 384 training images (6 steps an epoch) and 128 validated after each epoch; a train_steps row every 2 steps.
settings=(--set data.validation_split=0.25 --set train.log_every=2 --set train.eval_every_epoch=true
          --set train.epochs=3)
expect 0 "stopped at train.max_steps = 8" -- train --config dp.yaml "${settings[@]}" --set train.max_steps=8
expect 0 "Epoch 3/3" -- resume --config dp.yaml "${settings[@]}"
expect 0 "eval ckpt/ckpt-18 \(step 18\)" -- eval --config dp.yaml "${settings[@]}"
expect 0 "eval ckpt/ckpt-18 \(step 18\)" -- eval --config dp.yaml "${settings[@]}" --split validation
check "TensorBoard's run folders" \
  test "$(cd run/tensorboard && find . -type f | sed -E 's|^\./||; s|/[^/]*$||' | sort | uniq -c | xargs)" = \
       "1 eval/test 1 eval/validation 2 test 2 train 2 validation"
check "file names: events.out.tfevents.<unix time>.<host>.<pid>.<n>" \
  test -z "$(find run/tensorboard -type f ! -regex '.*/events\.out\.tfevents\.[0-9]+\.[^/]+\.[0-9]+\.[0-9]+$')"

if python=$(venv_python tensorboard.backend.event_processing.event_accumulator numpy); then
  if "$python" - <<'PY'; then ok; else bad "TensorBoard's reader does not return metrics.jsonl's scalars (above)"; fi
import json, math, os, struct, sys
import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

problems = []
def expect(condition, what):
    if not condition:
        problems.append(what)

rows = [json.loads(line) for line in open("run/metrics.jsonl")]

# What metrics.jsonl says each folder's tag holds: (step, float32), in the order written. A validation at an
# epoch's end (the step of a "train" row of the same run) and a test after it are also that epoch's point.
expected = {}
def add(folder, tag, step, value):
    expected.setdefault((folder, tag), []).append((step, np.float32(math.nan if value is None else value)))
segments, segment = [], -1
for row in rows:
    if row["split"] == "run" and row["event"] in ("start", "resume"):
        segment += 1
    segments.append(segment)
train_steps = {(segments[i], r["step"]) for i, r in enumerate(rows) if r["split"] == "train"}
for i, row in enumerate(rows):
    split = row["split"]
    if split == "train":
        add("train", "epoch_loss", row["epoch"], row["loss"])
        add("train", "epoch_accuracy", row["epoch"], row["accuracy"])
        add("train", "epoch_learning_rate", row["epoch"], row["learning_rate"])
    elif split == "train_steps":
        add("train", "batch_loss", row["step"], row["loss"])
        add("train", "batch_accuracy", row["step"], row["accuracy"])
        add("train", "batch_learning_rate", row["step"], row["learning_rate"])
        add("train", "examples_per_second", row["step"], row["examples_per_s"])
    elif split in ("validation", "test", "eval"):
        folder = "eval/" + row["eval_split"] if split == "eval" else split
        add(folder, "evaluation_loss_vs_iterations", row["step"], row["loss"])
        add(folder, "evaluation_accuracy_vs_iterations", row["step"], row["accuracy"])
        if split != "eval" and (segments[i], row["step"]) in train_steps:
            add(folder, "epoch_loss", row["epoch"], row["loss"])
            add(folder, "epoch_accuracy", row["epoch"], row["accuracy"])
# The validation curve is there, per step and per epoch (epochs 1, 2, 3 at steps 6, 12, 18).
expect([s for s, _ in expected.get(("validation", "epoch_loss"), [])] == [1, 2, 3], f"validation epochs {expected.get(('validation', 'epoch_loss'))}")
expect([s for s, _ in expected.get(("test", "evaluation_loss_vs_iterations"), [])] == [6, 8, 12, 18], "test steps")

# What TensorBoard reads: every folder with event files, all of each kept (size guidance 0).
guidance = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}
found, texts = {}, {}
for folder, _, files in os.walk("run/tensorboard"):
    if not any("tfevents" in name for name in files):
        continue
    run = os.path.relpath(folder, "run/tensorboard")
    accumulator = event_accumulator.EventAccumulator(folder, size_guidance=guidance)
    accumulator.Reload()
    for tag in accumulator.Tags()["scalars"]:
        found[(run, tag)] = [(e.step, np.float32(e.value)) for e in accumulator.Scalars(tag)]
    for tag in accumulator.Tags()["tensors"]:
        texts[(run, tag)] = [(e.step, e.tensor_proto.string_val[0].decode()) for e in accumulator.Tensors(tag)]

def same(a, b):  # exact, NaN matching only NaN
    return len(a) == len(b) and all(s == t and (v == w or (np.isnan(v) and np.isnan(w))) for (s, v), (t, w) in zip(a, b))
expect(sorted(found) == sorted(expected), f"tags: TensorBoard has {sorted(set(found) - set(expected))} more, "
                                          f"lacks {sorted(set(expected) - set(found))}")
for key in sorted(set(found) & set(expected)):
    expect(same(found[key], expected[key]), f"{key}: TensorBoard {found[key]} != metrics.jsonl {expected[key]}")
expect(all(not np.isnan(v) for points in found.values() for _, v in points), "a NaN in the curves")
print(f"{sum(map(len, found.values()))} scalars in {len(found)} curves equal metrics.jsonl's")

# The resumed run continues the curves: a file of its own in train/, its steps after the stop's (8).
resume_step = [r["step"] for r in rows if r["split"] == "run" and r["event"] == "resume"]
expect(resume_step == [8], f"resume rows {resume_step}")
per_file = []
for name in sorted(os.listdir("run/tensorboard/train")):
    accumulator = event_accumulator.EventAccumulator(os.path.join("run/tensorboard/train", name), size_guidance=guidance)
    accumulator.Reload()
    per_file.append([e.step for e in accumulator.Scalars("batch_loss")] if "batch_loss" in accumulator.Tags()["scalars"] else [])
per_file.sort()
expect(len(per_file) == 2 and per_file[0] == [2, 4, 6, 8] and per_file[1] == [10, 12, 14, 16, 18],
       f"batch_loss steps per file {per_file}")

# The text of each run row: its mesh and the config as run (the --set overrides in it).
runs = [r for r in rows if r["split"] == "run" and r["event"] in ("start", "resume")]
text = texts.get(("train", "run"), [])
expect([s for s, _ in text] == [r["step"] for r in runs], f"run texts at steps {[s for s, _ in text]}")
for (step, markdown), row in zip(text, runs):
    expect(f"`{row['mesh']}`" in markdown and f"`{row['mesh_string']}`" in markdown, f"no mesh in {markdown!r}")
    expect(f"**{row['event']}**" in markdown and "validation_split: 0.25" in markdown, f"no config in {markdown!r}")
eval_text = texts.get(("eval/test", "eval"), [])
expect(len(eval_text) == 1 and "ckpt/ckpt-18" in eval_text[0][1], f"eval text {eval_text}")

# Every record of every file framed right, by TensorBoard's own CRC32C, the first one the format's version.
records = 0
for folder, _, files in os.walk("run/tensorboard"):
    for name in files:
        data = open(os.path.join(folder, name), "rb").read()
        at = 0
        while at < len(data):
            length, = struct.unpack("<Q", data[at:at + 8])
            expect(struct.unpack("<I", data[at + 8:at + 12])[0] == masked_crc32c(data[at:at + 8]), f"{name}: length CRC")
            payload = data[at + 12:at + 12 + length]
            expect(len(payload) == length and struct.unpack("<I", data[at + 12 + length:at + 16 + length])[0] == masked_crc32c(payload),
                   f"{name}: data CRC at {at}")
            if at == 0:
                expect(b"brain.Event:2" in payload, f"{name}: first event {payload!r}")
            at += 16 + length
            records += 1
        expect(at == len(data), f"{name}: {len(data) - at} bytes past the last record")
print(f"{records} records framed right")

for problem in problems:
    print("FAIL:", problem, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
else
  skip_part "no .venv with tensorboard (scripts/python_env.sh): TensorBoard's reader not run"
fi

expect 0 "stopped at train.max_steps = 1" -- train --config dp.yaml --set train.max_steps=1 --set train.tensorboard=false \
  --run-dir off --set checkpoint.dir=off/ckpt
check "train.tensorboard: false: metrics.jsonl, no tensorboard folder" test -s off/metrics.jsonl -a ! -e off/tensorboard

# Under `mpirun -np 2` process 0 alone writes the folder, as it alone writes metrics.jsonl: one file a folder.
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rc=0
  timeout 120 mpirun --oversubscribe -np 2 "$dtrain" train --config dp.yaml --set train.max_steps=2 --set train.log_every=1 \
    --run-dir two --set checkpoint.dir=two/ckpt </dev/null >out 2>&1 || rc=$?
  check "mpirun -np 2 exits 0 (rc $rc): $(tail -3 out)" test "$rc" = 0
  check "mpirun -np 2: one event file a folder, all by one process" \
    test "$(cd two/tensorboard && find . -type f | sed -E 's|^\./||; s|/events\.out\.tfevents\.[0-9]+\.[^/]+\.([0-9]+)\.0$| \1|' | sort \
            | awk '{ folders = folders " " $1; pids[$2] = 1 } END { print folders, length(pids) }')" = " test train 1"
  check "mpirun -np 2: one run row, two train_steps rows" test "$(grep -c '"split": "run", "event": "start"' two/metrics.jsonl),$(grep -c train_steps two/metrics.jsonl)" = 1,2
else
  skip_part "no mpirun or no MPI build: the multi-process part not run"
fi
report
