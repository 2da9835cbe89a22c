#!/usr/bin/env bash
# End-to-end: train.bitwise gives the bits of one device on any mesh and process count, proven with the
# real binary and `dtrain diff`: a BatchNorm MLP with a summed loss (which amplifies rounding) trained on
# {batch: 1}, on {batch: 8} in one process and under `mpirun -np 2` and `-np 4`, on {batch: 4, model: 2}
# and {batch: 2, feature: 2, model: 2}; a run stopped mid-epoch and resumed under -np 4 on the model-parallel
# mesh, then on the spatial one, equals the uninterrupted run; without train.bitwise the meshes differ (so
# the comparison can fail); an MLP's step of 2, 4 or 8 micro-batches equals its unaccumulated step, in one
# process and under -np 2; what it does not cover is refused with exit 2 naming the key.
# Usage: bitwise_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $lib, $dtrain, $work (the cwd), expect, check, latest
source "$lib/mnist_fixture.sh"                              # data/ (512 training, 128 test images)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# net NAME MESH INPUT_LAYOUT LAYOUTS [BITWISE]: 2 epochs of 8 steps, BatchNorm over the global batch, a summed
# loss, every step's loss logged.
net() {
  cat >"$1.yaml" <<YAML
mesh: {dims: $2}
data: {dataset: mnist, path: data, batch_size: 64, shuffle: {seed: 3}, image_shape: flat, layout: $3}
model:
  - {dense: 32, activation: relu, init: {glorot_uniform: {seed: [1, 2]}}}
  - {batch_norm: {}}
  - {dense: 10, init: {glorot_uniform: {seed: [3, 4]}}}
layouts: $4
train: {epochs: 2, loss: {sparse_softmax_cross_entropy: {reduction: sum}}, optimizer: {sgd: {learning_rate: 0.01}},
        log_every: 1, bitwise: ${5:-true}}
checkpoint: {dir: ckpt, every: epoch, max_to_keep: 2}
YAML
}
net one "{batch: 1}" "[batch, unsharded]" "{}"
net dp "{batch: 8}" "[batch, unsharded]" "{}"
net mp "{batch: 4, model: 2}" "[batch, unsharded]" "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}"
net sp "{batch: 2, feature: 2, model: 2}" "[batch, feature]" "{dense1/kernel: [feature, model], dense2/kernel: [model, unsharded]}"

# train NAME NP CONFIG [ARGS...]: dtrain train into checkpoint dir NAME and run dir run_NAME, as one process
# (NP = 1) or under `mpirun -np NP`.
train() {
  local name=$1 np=$2 config=$3
  shift 3
  local args=(train --config "$config.yaml" --set checkpoint.dir="$name" --run-dir "run_$name" "$@")
  if [[ $np == 1 ]]; then
    expect 0 "test accuracy" -- "${args[@]}"
  elif mpi_runnable "$dtrain"; then
    local rc=0
    timeout 300 mpirun --oversubscribe -np "$np" "$dtrain" "${args[@]}" </dev/null >out 2>&1 || rc=$?
    check "mpirun -np $np dtrain ${args[*]} exits 0 (got $rc): $(tail -3 out)" test "$rc" = 0
  else
    skip_part "mpirun -np $np: no mpirun, or dtrain built without MPI"
    return 1
  fi
}
# same NAME: NAME's final checkpoint and logged losses are the {batch: 1} run's, bit for bit.
same() {
  expect 0 "^verdict: identical" -- diff one "$1"
  expect 0 "^verdict: identical" -- diff --metrics run_one "run_$1"
}

train one 1 one
train dp 1 dp && same dp
train dp2 2 dp && same dp2
train dp4 4 dp && same dp4
train mp2 2 mp && same mp2
train sp4 4 sp && same sp4

# Stopped mid-epoch (step 5 of 8) on {batch: 8} in one process, resumed under -np 4 on the model-parallel
# mesh to step 11, then on the spatial mesh to the end: the bits of the uninterrupted run.
train cut 1 dp --set train.max_steps=5
if mpi_runnable "$dtrain"; then
  rc=0
  timeout 300 mpirun --oversubscribe -np 4 "$dtrain" resume --config mp.yaml --set checkpoint.dir=cut \
    --set train.max_steps=11 --run-dir run_cut </dev/null >out 2>&1 || rc=$?
  check "resume on the mp mesh under -np 4 exits 0 (got $rc): $(tail -3 out)" test "$rc" = 0
  rc=0
  timeout 300 mpirun --oversubscribe -np 4 "$dtrain" resume --config sp.yaml --set checkpoint.dir=cut \
    --run-dir run_cut </dev/null >out 2>&1 || rc=$?
  check "resume on the sp mesh under -np 4 exits 0 (got $rc): $(tail -3 out)" test "$rc" = 0
  check "the resumed run ends at ckpt-16" test "$(latest cut)" = ckpt-16
  expect 0 "^verdict: identical" -- diff one cut
else
  skip_part "resume under mpirun: no mpirun, or dtrain built without MPI"
fi

# Without train.bitwise the sums over 8 devices round differently: the same comparison finds it.
net dp_plain "{batch: 8}" "[batch, unsharded]" "{}" false
net one_plain "{batch: 1}" "[batch, unsharded]" "{}" false
train plain8 1 dp_plain
train plain1 1 one_plain
expect 1 "^verdict: different" -- diff plain1 plain8
expect 1 "^first differing step: " -- diff --metrics run_plain1 run_plain8

# Micro-batches: without BatchNorm, a step of 2, 4 or 8 micro-batches is the unaccumulated step bit for bit
# (weights, Adam's slots, the step, the data position, every logged loss), in one process or under mpirun.
mlp() {
  cat >"$1.yaml" <<YAML
mesh: {dims: $2}
data: {dataset: mnist, path: data, batch_size: 64, shuffle: {seed: 5}, image_shape: flat, layout: [batch, unsharded]}
model:
  - {dense: 32, activation: relu, init: {glorot_uniform: {seed: [1, 2]}}}
  - {dense: 10, init: {glorot_uniform: {seed: [3, 4]}}}
train: {epochs: 2, loss: {sparse_softmax_cross_entropy: {reduction: sum}}, optimizer: {adam: {learning_rate: 0.01}},
        log_every: 1, bitwise: true}
checkpoint: {dir: ckpt, every: epoch, max_to_keep: 2}
YAML
}
mlp whole "{batch: 1}"
mlp micro1 "{batch: 1}"
mlp micro2 "{batch: 2}"
mlp micro4 "{batch: 4}"
train whole 1 whole
train acc4 1 micro1 --set train.accumulation_steps=4
train acc8 1 micro1 --set train.accumulation_steps=8
train acc2_on4 1 micro4 --set train.accumulation_steps=2
for name in acc4 acc8 acc2_on4; do
  expect 0 "^verdict: identical" -- diff whole "$name"
  expect 0 "^verdict: identical" -- diff --metrics run_whole "run_$name"
done
if train acc4_np2 2 micro2 --set train.accumulation_steps=4; then
  expect 0 "^verdict: identical" -- diff whole acc4_np2
  expect 0 "^verdict: identical" -- diff --metrics run_whole run_acc4_np2
fi
# Stopped mid-epoch with 2 micro-batches on {batch: 4}, resumed with 8 on {batch: 1}: still the whole batch's bits.
train switch 1 micro4 --set train.accumulation_steps=2 --set train.max_steps=5
expect 0 "test accuracy" -- resume --config micro1.yaml --set checkpoint.dir=switch --set train.accumulation_steps=8 \
  --run-dir run_switch
expect 0 "^verdict: identical" -- diff whole switch
# Without train.bitwise 4 micro-batches add in arrival order: the same comparison finds it.
train acc4_plain 1 micro1 --set train.accumulation_steps=4 --set train.bitwise=false
train whole_plain 1 whole --set train.bitwise=false
expect 1 "^verdict: different" -- diff whole_plain acc4_plain

# What the canonical order does not cover is refused before anything runs.
expect 2 "dp.yaml:[0-9]+:[0-9]+: train.bitwise: mesh dim 'batch' has 3 devices" -- \
  train --config dp.yaml --set "mesh.dims={batch: 3}" --set data.batch_size=48 --run-dir refused
expect 2 "train.accumulation_steps: 2 micro-batches on mesh dim 'batch' of 8 devices" -- \
  train --config dp.yaml --set train.accumulation_steps=2 --run-dir refused
check "a refused run creates no run dir" test ! -e refused

report
