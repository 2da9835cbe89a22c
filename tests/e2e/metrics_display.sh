#!/usr/bin/env bash
# End-to-end (issue 14): what people see and what metrics.jsonl holds. The short mesh form in train,
# resume and eval output; metrics.jsonl's first row names the run id and mesh, "train_steps" rows every
# train.log_every steps, 1-based epochs; a resume appends to the metrics of the run it continues (a "run"
# row with the new mesh) even when its config names another run dir; eval appends an "eval" row to its run
# dir (--run-dir); the progress bar under a pseudo-terminal of 80 columns stays within them;
# scripts/plot_metrics.py draws the chain, or says "pip install matplotlib" in one line.
# Usage: metrics_display.sh DTRAIN SOURCE_DIR
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source "$lib/tally.sh"
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }

dtrain=$(realpath "$1")
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
source "$lib/cli.sh"  # expect, check, latest
source "$lib/mnist_fixture.sh"  # data/, config() and dp/mp/sp.yaml (8 steps an epoch, run dir run)
sed 's/^run_dir: run$/run_dir: run_mp/' mp.yaml >mp_other.yaml

# ---- train: DP, one epoch, a metrics row every 3 steps ----
expect 0 "test accuracy" -- train --config dp.yaml --set train.epochs=1 --set train.log_every=3
check "train names the mesh shortly: $(grep -a 'parameters on mesh' out || true)" \
  grep -Eq "parameters on mesh \{batch: 8\} on 8 CPU devices; 512 training and 128 test examples; (avx512|avx2|generic) kernels$" out
check "train prints no DTensor mesh string" test -z "$(grep -a '|batch=' out || true)"
check "plain lines show the time per step" grep -Eq "^epoch 1 step 3/8 \(global step 3\): .*[0-9]+(us|ms|s)/step" out
check "a plain run still says epoch 1 done" grep -q "^epoch 1 done" out
# A warmup longer than the run is noted at the start (issue 28): 16 steps, 1000 of warmup.
expect 0 "test accuracy" -- train --config dp.yaml --set checkpoint.every=never --run-dir run_warm \
  --set "train.optimizer={adam: {learning_rate: 0.01, schedule: {cosine: {warmup_steps: 1000, decay_steps: 10}}}}"
check "the long warmup is noted: $(grep -a 'warmup' out || true)" \
  grep -q "note: --set train.optimizer=.*: warmup_steps 1000 is longer than the whole run (16 steps)" out
# A log is never cut to a width (issue 28): COLUMNS=40 used to leave "epoch 1 step 3/8 (global step 3):" alone.
COLUMNS=40 "$dtrain" train --config dp.yaml --set train.epochs=1 --set train.log_every=3 --set checkpoint.every=never \
  --run-dir run_cols40 >cols40.log 2>&1
check "with COLUMNS=40 a log file keeps every number of a step line" \
  grep -Eq "^epoch 1 step 3/8 \(global step 3\): loss [0-9.]+ accuracy [0-9.]+ [0-9]+(us|ms|s)/step [0-9]+ examples/s$" cols40.log
check "with COLUMNS=40 the test line is whole" grep -Eq "^test \(epoch 1, step 8\): loss [0-9.]+ accuracy [0-9.]+ \(" cols40.log

# ---- resume: MP, a config whose run dir is another: the metrics go on in run/ ----
expect 0 "saved on mesh \{batch: 8\} on 8 CPU devices\) on mesh \{batch: 4, model: 2\} on 8 CPU devices" -- \
  resume --config mp_other.yaml --set train.epochs=2 --set train.log_every=3
check "the resume wrote no metrics to its config's run dir" test ! -e run_mp/metrics.jsonl
check "the resume names run/metrics.jsonl" grep -q "^metrics: run/metrics.jsonl" out
# One epoch convention (issue 28): the checkpoint of epoch 1's end is "the end of epoch 1", then Epoch 2/2.
check "resume says where it starts with 1-based epochs" grep -q "(step 8, the end of epoch 1, saved on mesh" out
check "and goes on with Epoch 2/2" grep -q "^Epoch 2/2" out
expect 0 "^position: the end of epoch 2 \(2 epochs finished\)$" -- inspect ckpt

# ---- eval: its row goes with the run that wrote the checkpoint (issue 28), or to --run-dir ----
# mp_other.yaml names run_mp as its run dir, but ckpt was written by the run of run/: the row goes there.
expect 0 "^metrics: run/metrics.jsonl \(the run dir of run [0-9a-f]+, which wrote ckpt/ckpt-16\)" -- \
  eval --config mp_other.yaml --checkpoint ckpt
check "eval wrote nothing to its config's run dir" test ! -e run_mp/metrics.jsonl
check "eval's row is the last of run/metrics.jsonl" eval 'tail -1 run/metrics.jsonl | grep -q "\"split\": \"eval\""'

expect 0 "on mesh \{batch: 2, feature: 2, model: 2\} on 8 CPU devices, split test: loss" -- \
  eval --config sp.yaml --checkpoint ckpt --run-dir run_eval
sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_numbers

check "metrics.jsonl: run rows, train_steps rows, 1-based epochs, one curve over DP -> MP" python3 - <<'PY'
import json
rows = [json.loads(line) for line in open("run/metrics.jsonl")]
runs = [r for r in rows if r["split"] == "run" and r["event"] != "end"]
ends = [r for r in rows if r["split"] == "run" and r["event"] == "end"]
assert [(r["stopped"], r["step"], r["epoch"]) for r in ends] == [("finished", 8, 1), ("finished", 16, 2)], ends
assert rows[0]["split"] == "run" and rows[0]["event"] == "start", rows[0]
assert rows[0]["mesh"] == "{batch: 8} on 8 CPU devices" and rows[0]["mesh_string"].startswith("|batch=8|"), rows[0]
assert [r["event"] for r in runs] == ["start", "resume"], runs
assert runs[0]["run_id"] and runs[1]["run_id"] == runs[0]["run_id"], runs
assert runs[1]["mesh"] == "{batch: 4, model: 2} on 8 CPU devices" and runs[1]["step"] == 8, runs[1]
assert runs[1]["checkpoint"] == "ckpt/ckpt-8" and runs[1]["epoch"] == 2, runs[1]
steps = [r for r in rows if r["split"] == "train_steps"]
assert [r["step"] for r in steps] == [3, 6, 8, 9, 12, 15, 16], steps
assert [r["epoch"] for r in steps] == [1, 1, 1, 2, 2, 2, 2], steps
assert all(r["learning_rate"] == 0.01 and r["loss"] > 0 and r["examples"] > 0 for r in steps), steps
train = [r for r in rows if r["split"] == "train"]
assert [(r["epoch"], r["step"]) for r in train] == [(1, 8), (2, 16)], train
test = [r for r in rows if r["split"] == "test"]
assert [r["epoch"] for r in test] == [1, 2], test
# The resume row comes after epoch 1's rows and before epoch 2's.
at = rows.index(runs[1])
assert all(r["step"] <= 8 for r in rows[:at]) and all(r["step"] > 8 for r in rows[at + 1:] if r["split"] not in ("test", "eval")), rows
PY
check "eval appended an eval row to --run-dir's metrics.jsonl: $(cat run_eval/metrics.jsonl 2>/dev/null)" python3 - <<'PY'
import json
rows = [json.loads(line) for line in open("run_eval/metrics.jsonl")]
loss, accuracy = (float(v) for v in open("eval_numbers").read().split())
assert len(rows) == 1 and rows[0]["split"] == "eval" and rows[0]["eval_split"] == "test", rows
r = rows[0]
assert r["step"] == 16 and r["examples"] == 128 and r["checkpoint"] == "ckpt/ckpt-16", r
assert abs(r["loss"] - loss) <= 1e-6 and abs(r["accuracy"] - accuracy) <= 1e-6, (r, loss, accuracy)
assert r["mesh"] == "{batch: 2, feature: 2, model: 2} on 8 CPU devices", r
PY

# ---- the progress bar on a pseudo-terminal of 80 columns ----
if script -qec true /dev/null >/dev/null 2>&1; then
  script -qec "stty cols 80 rows 24; '$dtrain' train --config dp.yaml --set checkpoint.every=never --run-dir run_tty" \
    tty.log >/dev/null 2>&1 || true
  check "on a terminal: a bar, right-aligned step counts, ms/step, no epoch done line, each redraw within 79 columns" \
    python3 - <<'PY'
import re
text = open("tty.log", "rb").read().decode("utf-8", "replace")
assert "test accuracy" in text, text[-2000:]
assert "\x1b[K" in text and re.search(r"\r8/8 \[=+\]", text), text[-2000:]
assert re.search(r"[0-9]+(us|ms|s)/step", text), text[-2000:]
assert "epoch 1 done" not in text, text[-2000:]
bars = [p for p in re.split(r"[\r\n]", text.replace("\x1b[K", "")) if re.match(r"\s*[0-9]+/[0-9]+ ", p)]
# Redrawn at most every 50 ms, the first and the last step of each epoch always.
assert len(bars) >= 4 and any(b.startswith("1/8 [") for b in bars), bars
for piece in bars:
    assert len(piece) < 80, (len(piece), piece)
    assert "loss: " in piece and "accuracy: " in piece, piece
PY
  # 60 and 45 columns (issue 28): the bar shrinks and the ETA goes, the loss and the accuracy stay; the
  # start-up line is broken between words.
  for cols in 60 45; do
    script -qec "stty cols $cols rows 24; '$dtrain' train --config dp.yaml --set checkpoint.every=never --run-dir run_tty$cols" \
      tty$cols.log >/dev/null 2>&1 || true
    check "on a terminal of $cols columns every redraw keeps the loss and the accuracy within $cols columns" \
      python3 - "$cols" <<'PY'
import re, sys
cols = int(sys.argv[1])
text = open(f"tty{cols}.log", "rb").read().decode("utf-8", "replace").replace("\x1b[K", "")
assert "test accuracy" in text, text[-2000:]
bars = [p for p in re.split(r"[\r\n]", text) if re.match(r"\s*[0-9]+/[0-9]+ ", p)]
assert len(bars) >= 4, bars
for piece in bars:
    assert "loss: " in piece and "accuracy: " in piece, piece
    assert len(piece) < cols, (len(piece), piece)
lines = text.split("\n")
start = [i for i, l in enumerate(lines) if l.startswith("dtrain: ") and "parameters" in l]
assert start, lines[:5]
for line in lines[start[0]:start[0] + 3]:
    assert len(line.rstrip("\r")) < cols, (len(line), line)
PY
  done
else
  skip_part "the pseudo-terminal check (no working script(1))"
fi

# ---- scripts/plot_metrics.py ----
plot="$source_dir/scripts/plot_metrics.py"
rc=0
python3 -S "$plot" run >plot.out 2>&1 || rc=$?
check "plot_metrics without matplotlib: one line saying pip install matplotlib, exit non-zero (rc $rc): $(cat plot.out)" \
  test "$rc" != 0 -a "$(wc -l <plot.out)" = 1 -a -n "$(grep 'pip install matplotlib' plot.out)"
mpl_python=
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c "import matplotlib" 2>/dev/null; then mpl_python=$candidate; break; fi
done
if [[ -n $mpl_python ]]; then
  check "plot_metrics draws the DP -> MP chain to run/metrics.png: $("$mpl_python" "$plot" run 2>&1 | tail -3)" \
    test -s run/metrics.png
  check "plot_metrics draws a run dir holding an eval row only" "$mpl_python" "$plot" run_eval --out eval.png >/dev/null
  # Validation, keep_best and early stopping, and a second run appending to the same run dir (issue 28): the
  # "end" rows say why each run stopped and where the best checkpoint is; the plot draws both runs.
  expect 0 "best checkpoint \(val_loss\)" -- train --config dp.yaml --set data.validation_split=0.25 \
    --set "train.early_stopping={monitor: val_loss, patience: 1, min_delta: 0.3}" --set checkpoint.keep_best=val_loss \
    --set train.epochs=12 --set checkpoint.dir=ck_val --run-dir run_val
  expect 0 "test accuracy" -- train --config dp.yaml --set train.epochs=2 --set checkpoint.dir=ck_val2 --run-dir run_val
  check "run_val's end rows: an early stop with its best step, then a finished run" python3 - <<'PY'
import json
ends = [r for r in map(json.loads, open("run_val/metrics.jsonl")) if r.get("event") == "end"]
assert len(ends) == 2, ends
assert ends[0]["stopped"] == "early_stopping" and ends[0]["monitor"] == "val_loss", ends
assert isinstance(ends[0]["best_step"], int) and 0 < ends[0]["best_step"] <= ends[0]["step"], ends
assert ends[1]["stopped"] == "finished" and ends[1]["best_step"] is None and ends[1]["epoch"] == 2, ends
assert ends[0]["run_id"] != ends[1]["run_id"], ends
PY
  check "plot_metrics draws both runs, validation, best and early stop" "$mpl_python" "$plot" run_val --out val.png
else
  skip_part "drawing with plot_metrics (no python3 with matplotlib)"
fi
report
