#!/usr/bin/env bash
# End-to-end: `dtrain diff` of checkpoints written by the real binary on meshes {batch: 1} and {batch: 2}
# (train.bitwise: identical), of
# a run with another learning rate, of a damaged checkpoint and a missing dir; `diff --metrics` of their logs.
# Usage: diff_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $lib, $dtrain, $work (the cwd), expect, check, latest
source "$lib/mnist_fixture.sh"  # data/, h5python and config()
source "$lib/reseal.sh"         # reseal, can_reseal
config one "{batch: 1}" "[batch, unsharded]" "{}"
config two "{batch: 2}" "[batch, unsharded]" "{}"
# One epoch of 8 steps, every step's loss logged.
short=(--set train.epochs=1 --set train.log_every=1 --set train.bitwise=true)

expect 0 "test accuracy" -- train --config one.yaml "${short[@]}" --set checkpoint.dir=a --run-dir run_a
expect 0 "test accuracy" -- train --config two.yaml "${short[@]}" --set checkpoint.dir=b --run-dir run_b
expect 0 "test accuracy" -- train --config one.yaml "${short[@]}" --set checkpoint.dir=c --run-dir run_c \
  --set train.optimizer.adam.learning_rate=0.02
check "each run saved ckpt-8" test "$(latest a)$(latest b)$(latest c)" = ckpt-8ckpt-8ckpt-8

# A checkpoint against itself, as a dir and as its ckpt-N folder: identical, exit 0.
expect 0 "^verdict: identical" -- diff a a/ckpt-8
check "every variable and slot is named identical" grep -Eq "^identical +optimizer/dense2/kernel/v \(32,10\)$" out
check "no tensor differs" bash -c "! grep -Eq '^(differs|only in|shapes differ)' out"

# The same training on {batch: 1} and {batch: 2} under train.bitwise: the same bits (exit 0); the mesh is a
# note, never a difference by itself. (bitwise_cli.sh shows the rounding difference without it.)
expect 0 "^verdict: identical" -- diff a b
check "the meshes are a note" grep -q "^note: mesh: {batch: 1} on 1 CPU device vs {batch: 2} on 2 CPU devices$" out
check "the step and position of the two meshes' runs agree" bash -c "! grep -q '^state differs' out"

# Another learning rate: every variable differs and is named; the data position does not.
expect 1 "^verdict: different" -- diff a c
check "diff names dense1/kernel with its largest differences" \
  grep -Eq "^differs +variables/dense1/kernel \(784,32\): [0-9]+ of 25088 values, max abs diff [0-9.e+-]+, max rel diff [0-9.e+-]+, max ULP [0-9]+" out
check "diff names the Adam slots" grep -Eq "^differs +optimizer/dense2/bias/m \(10\)" out
check "the step and position are the same" bash -c "! grep -q '^state differs' out"

# A damaged checkpoint: exit 1 with the checksum error naming the file.
mkdir broken
cp -r a/ckpt-8 broken/
file=broken/ckpt-8/shard-0-of-1.h5
size=$(stat -c %s "$file")
printf '\x5a' | dd of="$file" bs=1 seek=$((size / 2)) conv=notrunc status=none
expect 1 "dtrain: error: .*broken/ckpt-8/shard-0-of-1.h5 does not match its checksum" -- diff a broken/ckpt-8
# A data byte flipped under a forged manifest: the chunk's Fletcher-32 checksum, met while streaming.
if [[ -n $h5python && -n $can_reseal ]]; then
  rm -rf broken/ckpt-8
  cp -r a/ckpt-8 broken/
  offset=$("$h5python" -c "import h5py; print(h5py.File('$file')['variables/dense1/kernel'].id.get_chunk_info(0).byte_offset)" 2>/dev/null) || offset=
  check "shard-0-of-1.h5's variables/dense1/kernel is chunked" test -n "$offset"
  printf '\x5a' | dd of="$file" bs=1 seek=$((${offset:-0} + 101)) conv=notrunc status=none
  reseal broken/ckpt-8
  expect 1 "dtrain: error: .*broken/ckpt-8/shard-0-of-1.h5 is damaged: 'variables/dense1/kernel' fails its Fletcher-32 checksum" -- \
    diff broken/ckpt-8 a
else
  skip_part "the Fletcher-32 check (no python3 with h5py, or no libxxhash)"
fi
# A missing dir: exit 2 naming it, before anything is read.
expect 2 "dtrain: error: diff: nowhere does not exist" -- diff a nowhere
expect 2 "dtrain: error: diff: nowhere does not exist" -- diff --metrics run_a nowhere
expect 2 "dtrain: error: .*2 required" -- diff a
expect 2 "diff takes no --config" -- diff --config one.yaml a b

# --metrics: the same losses over 8 steps; another learning rate first shows at step 2 (step 1's loss is
# the initial weights', before any update).
expect 0 "^losses identical over the 8 steps both logged" -- diff --metrics run_a run_a/metrics.jsonl
expect 1 "^first differing step: 2: loss [0-9.]+ in A, [0-9.]+ in B" -- diff --metrics run_a run_c
# The two meshes' runs under train.bitwise: every logged loss the same.
expect 0 "^losses identical over the 8 steps both logged" -- diff --metrics run_a run_b

report
