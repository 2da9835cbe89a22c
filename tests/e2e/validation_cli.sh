#!/usr/bin/env bash
# End-to-end: validation during training (issue 17). `dtrain train` with data.validation_split,
# train.validation_every, train.early_stopping and checkpoint.keep_best validates every 2 steps (progress lines
# and "validation" rows in metrics.jsonl), stops early with exit code 0 and a notice, keeps the best
# checkpoint past max_to_keep under DIR/best, which `dtrain eval --checkpoint DIR/best` reads back with the
# loss it was validated with; a run stopped mid-patience and resumed stops at the same step; plan prints the
# settings; under mpirun -np 2 the processes stop together; a leaking validation slice and
# restore_best_weights are config errors (exit 2).
# Usage: validation_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
source "$lib/mnist_fixture.sh"  # data/ (512 training images), mp.yaml (batch 64)

# The last quarter of train (128 images, train[75%:]) validated every 2 steps; min_delta 10 makes no
# validation after the first an improvement, so patience 1 stops the run after the second (step 4).
validated=(--set data.validation_split=0.25 --set train.validation_every=2 --set train.epochs=3
           --set "train.early_stopping={patience: 1, min_delta: 10}" --set checkpoint.keep_best=val_loss
           --set checkpoint.max_to_keep=1 --set checkpoint.every=3)

expect 0 "validation: the last 0.25 of train \(Keras' validation_split\), evaluated every 2 steps" -- plan --config mp.yaml "${validated[@]}"
check "plan prints early stopping" grep -q "early stopping: val_loss (min), patience 1 validation(s), min_delta 10" out
check "plan prints keep best" grep -q "keep best: val_loss (a checkpoint at every validation; ckpt/best names the best" out

expect 0 "early stopping after step 4: val_loss has not improved \(min_delta 10\) for 1 validation\(s\), patience 1" -- \
  train --config mp.yaml "${validated[@]}"
check "384 training and 128 validation examples" grep -q "128 validation examples" out
check "validation lines" grep -Eq "validation at step 2: val_loss [0-9.]+ val_accuracy [0-9.]+ \(128 examples" out
check "the best checkpoint is named in the summary" grep -Eq "best checkpoint \(val_loss\): ckpt/ckpt-[24] \(named by ckpt/best\)" out
check "stopped at step 4" test "$(latest ckpt)" = ckpt-4
# The validation rows, and the step whose val_loss is the lower: DIR/best names it.
python3 - <<'PY' >best_row
import json
rows = [json.loads(line) for line in open("run/metrics.jsonl")]
validation = [r for r in rows if r["split"] == "validation"]
assert [r["step"] for r in validation] == [2, 4], validation
assert all(r["examples"] == 128 and 0 < r["loss"] and 0 <= r["accuracy"] <= 1 for r in validation), validation
best = min(validation, key=lambda r: r["loss"])
print(best["step"], repr(best["loss"]))
PY
read -r best_step best_loss <best_row
check "DIR/best names the lower val_loss (step $best_step)" test "$(cat ckpt/best)" = "ckpt-$best_step"
check "the best checkpoint and the latest are kept (max_to_keep 1)" \
  test "$(ls -d ckpt/ckpt-* | sort | tr '\n' ' ')" = "$(printf 'ckpt/ckpt-%s\n' $best_step 4 | sort -u | tr '\n' ' ')"

# eval of DIR/best on the validation slice gives the loss it was validated with.
expect 0 "eval ckpt/ckpt-$best_step \(step $best_step\)" -- eval --config mp.yaml --checkpoint ckpt/best --split "train[75%:]"
eval_loss=$(sed -nE 's/.*loss ([0-9.]+) accuracy.*/\1/p' out)
check "eval of DIR/best: loss $eval_loss vs validated $best_loss" \
  python3 -c "import sys; sys.exit(abs($eval_loss - $best_loss) > 1e-6)"

# Interrupted at step 3 (after the first validation, mid-patience) and resumed: it stops at step 4 all the same.
rm -rf ckpt run
expect 0 "stopped at train.max_steps = 3" -- train --config mp.yaml "${validated[@]}" --set train.max_steps=3
check "saved at step 3" test "$(latest ckpt)" = ckpt-3
expect 0 "early stopping after step 4" -- resume --config mp.yaml "${validated[@]}"
check "resumed run stopped at step 4" test "$(latest ckpt)" = ckpt-4

# Under `mpirun -np 2` (4 devices a process) both processes validate alike and stop at the same step.
if mpi_runnable "$dtrain"; then
  rm -rf ckpt run
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rc=0
  timeout 120 mpirun --oversubscribe -np 2 "$dtrain" train --config mp.yaml "${validated[@]}" </dev/null >out 2>&1 || rc=$?
  check "mpirun -np 2 exits 0 (rc $rc): $(tail -3 out)" test "$rc" = 0
  check "mpirun -np 2 stops early after step 4" grep -q "early stopping after step 4" out
  check "mpirun -np 2: latest ckpt-4 and best ckpt-$best_step" test "$(latest ckpt) $(cat ckpt/best)" = "ckpt-4 ckpt-$best_step"
else
  echo "note: no mpirun or no MPI build: the mpirun check is skipped"
fi

# Config errors at the key (exit 2).
expect 2 "data.validation_split: 'train\[50%:\]' shares examples \[256, 512\) of split 'train'" -- \
  train --config mp.yaml --set "data.validation_split=train[50%:]" --overwrite
expect 2 "restore_best_weights: restores the weights of the best validation from the checkpoint DIR/best names: set checkpoint.keep_best: val_loss" -- \
  train --config mp.yaml --set data.validation_split=0.1 --set "train.early_stopping={restore_best_weights: true}"
expect 2 "error: --set train.early_stopping=\{patience: 2\}: train.early_stopping: needs a validation set: add data.validation_split" -- \
  train --config mp.yaml --set "train.early_stopping={patience: 2}"
report
