#!/usr/bin/env bash
# End-to-end on a model graph (a residual block written once and used twice, a side branch concatenated):
# train on {batch: 4, model: 2} with one layout rule for both uses -> inspect (res1/..., res2/...) -> plan
# (the joints and collectives) -> eval on three meshes (equal) -> resume on {batch: 8} and under mpirun -np 2
# and 4 (the uninterrupted run's loss) -> predict -> fine-tune from it onto one device; graph errors in a
# config exit 2 at FILE:LINE:COL.
# Usage: graph_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
source "$lib/mnist_fixture.sh"  # data/ (512 training, 128 test images)

cat >graph.yaml <<'YAML'
mesh: {dims: {batch: 4, model: 2}}
data: {dataset: mnist, path: data, batch_size: 64, shuffle: {seed: 3}, image_shape: flat, layout: [batch, unsharded]}
blocks:
  res:
    - {dense: 32, name: a, activation: relu}
    - {dense: 32, name: b}
    - {add: {}, inputs: [input, b], name: sum}
    - {relu: {}, name: out}
model:
  - {dense: 32, name: stem, activation: relu}
  - {block: res, repeat: 2}
  - {dense: 8, name: side, inputs: stem}
  - {concatenate: {}, inputs: [res2, side], name: cat}
  - {dense: 10, name: head}
layouts:
  'res\d+/a/kernel': [unsharded, model]
  'res\d+/b/kernel': [model, unsharded]
train: {epochs: 2, optimizer: {adam: {learning_rate: 0.01}}, eval_every_epoch: false}
checkpoint: {dir: ckpt, every: epoch, max_to_keep: 2}
run_dir: run
YAML

expect 0 "test accuracy" -- train --config graph.yaml
check "the run saved ckpt-16" test "$(latest ckpt)" = ckpt-16
cp -r ckpt ckpt_np2 && cp -r ckpt ckpt_np4
# The uninterrupted run of three epochs, for the resumed ones to match.
expect 0 "test accuracy" -- train --config graph.yaml --set train.epochs=3 --set checkpoint.dir=ckpt_full --run-dir run_full
expect 0 "variables" -- inspect ckpt
check "inspect lists both uses of the block, sharded by the one rule" grep -Eq "variables/res2/a/kernel  shape \(32,32\)  layout \[unsharded, model\]" out
check "inspect lists res1's kernel" grep -q "variables/res1/b/kernel" out
expect 0 "res2/sum +add +output \(64,32\) <- res1/out, res2/b" -- plan --config graph.yaml
check "plan names the concatenation's inputs" grep -Eq "cat +concatenate +output \(64,40\) <- res2/out, side" out
check "plan lists the variable chosen by the block's rule" grep -Eq "res1/a/kernel .*rule 'res\\\\d\+/a/kernel'" out

# The checkpoint evaluated on three meshes: equal loss and accuracy.
for mesh in "{batch: 4, model: 2}" "{batch: 8, model: 1}" "{batch: 1, model: 1}"; do
  expect 0 "accuracy" -- eval --config graph.yaml --checkpoint ckpt --set "mesh.dims=$mesh"
  sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >>evals
done
check "eval on three meshes agrees within 1e-5 and the model learned" python3 - <<'PY'
rows = [[float(v) for v in line.split()] for line in open("evals")]
assert len(rows) == 3 and rows[0][1] > 0.3, rows
assert all(abs(a - b) <= 1e-5 for row in rows[1:] for a, b in zip(rows[0], row)), rows
PY

# Resume on data parallel {batch: 8} for a third epoch; then predict from it.
expect 0 "resuming ckpt/ckpt-16 " -- resume --config graph.yaml --set "mesh.dims={batch: 8, model: 1}" --set train.epochs=3
check "resume saved ckpt-24" test "$(latest ckpt)" = ckpt-24
# The third epoch's training loss: the resumed runs' (another mesh; other process counts) against the
# uninterrupted one's.
third_epoch_loss() { python3 -c "import json,sys; print([r for r in map(json.loads, open('$1/metrics.jsonl')) if r.get('split') == 'train'][-1]['loss'])"; }
same_loss() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not abs(a - b) <= 1e-4 * max(1, abs(a)))" "$1" "$2"; }
full=$(third_epoch_loss run_full)
check "resumed on {batch: 8}: the uninterrupted run's third-epoch loss" same_loss "$full" "$(third_epoch_loss run)"
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for np in 2 4; do
    rc=0
    timeout 300 mpirun -np $np --oversubscribe "$dtrain" resume --config graph.yaml --set checkpoint.dir=ckpt_np$np \
      --run-dir run_np$np --set train.epochs=3 >np$np.log 2>&1 || rc=$?
    check "mpirun -np $np resume exits 0: $(tail -2 np$np.log)" test "$rc" = 0
    check "resumed under mpirun -np $np: the uninterrupted run's third-epoch loss" same_loss "$full" "$(third_epoch_loss run_np$np)"
  done
else
  skip_part "no mpirun or no MPI build: the resumes under mpirun -np 2 and 4"
fi
expect 0 "^0	class ([0-9])	\1 [01]\.[0-9]{4}	probabilities" -- predict --checkpoint ckpt --idx data/t10k-images-idx3-ubyte
check "predict prints one line per test image" test "$(wc -l <out)" = 128

# Fine-tuning from the graph's checkpoint onto one device, the head left as initialized.
expect 0 "fine-tuning from ckpt/ckpt-24 .*variables read" -- train --config graph.yaml --init-from ckpt --init-skip 'head/.*' \
  --set "mesh.dims={batch: 1, model: 1}" --set checkpoint.dir=ckpt_ft --set run_dir=run_ft --set train.epochs=1
check "the fine-tuned run saved ckpt-8" test "$(latest ckpt_ft)" = ckpt-8

# Graph errors: exit 2 at the layer's FILE:LINE:COL.
sed 's/inputs: \[res2, side\]/inputs: [res2, sied]/' graph.yaml >unknown.yaml
expect 2 "^dtrain: error: unknown.yaml:13:5: .*'sied', which is no layer's name" -- plan --config unknown.yaml
sed 's/{dense: 32, name: stem, activation: relu}/{dense: 32, name: stem, activation: relu, inputs: head}/' graph.yaml >cycle.yaml
expect 2 "^dtrain: error: cycle.yaml:10:5: .*form a cycle: .*stem" -- train --config cycle.yaml
sed 's/{dense: 8, name: side, inputs: stem}/{dense: 8, name: side, inputs: stem}\n  - {add: {}, inputs: [side, stem], name: bad}/; s/inputs: \[res2, side\]/inputs: [res2, bad]/' graph.yaml >shapes.yaml
expect 2 "^dtrain: error: shapes.yaml:13:5: .*\(64,8\) \(input 1\) and \(64,32\) \(input 2\)" -- train --config shapes.yaml
sed 's/{dense: 10, name: head}/{dense: 10, name: head}\n  - {dense: 3, name: extra, inputs: cat}/; s/^train:/outputs: head\ntrain:/' graph.yaml >unused.yaml
expect 2 "^dtrain: error: unused.yaml:15:5: .*layer 'extra' is unused" -- train --config unused.yaml
report
