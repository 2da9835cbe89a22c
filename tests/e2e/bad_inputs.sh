#!/usr/bin/env bash
# End-to-end (issue 14): bad data, bad paths, bad sizes and options a command does not use. Each is exit 2
# (bad usage, config or data) with one line naming what and where; no HDF5-DIAG stack is ever printed.
# Usage: bad_inputs.sh DTRAIN SOURCE_DIR
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
source "$lib/tally.sh"

dtrain=$(realpath "$1")
source_dir=$(realpath "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}")
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

source "$lib/cli.sh"            # expect, check
source "$lib/mnist_fixture.sh"  # data/, config() and dp/mp/sp.yaml

# one_line: the last command's output is one line (the error) and holds no HDF5 diagnostics.
one_line() { [[ $(grep -c . out) == 1 ]] && ! grep -q "HDF5-DIAG" out; }

# 1. A label outside [0, 10) is refused at load, naming the labels file and the example, even where no
#    batch would ever reach it (max_steps 1).
mkdir -p badlabels
cp data/*-images-idx3-ubyte badlabels/
python3 - <<'PY'
import shutil
data = bytearray(open("data/train-labels-idx1-ubyte", "rb").read())
data[8 + 300] = 12  # example 300
open("badlabels/train-labels-idx1-ubyte", "wb").write(data)
shutil.copy("data/t10k-labels-idx1-ubyte", "badlabels/")
PY
expect 2 "^dtrain: error: .*badlabels/train-labels-idx1-ubyte.*label 12 of example 300 is outside \[0, 10\)" -- \
  train --config dp.yaml --set data.path=badlabels --set train.max_steps=1 --set checkpoint.every=never
check "label error is one line" one_line

# A checkpoint to predict from.
expect 0 "test accuracy" -- train --config dp.yaml --set train.max_steps=1
# 2. predict --idx: a folder, a missing file, a truncated file, a wrong magic, another image shape.
expect 2 "^dtrain: error: .*'data' is a directory" -- predict --checkpoint ckpt --idx data
check "predict --idx DIR is one line" one_line
expect 2 "^dtrain: error: .*cannot open 'nothing-here': No such file" -- predict --checkpoint ckpt --idx nothing-here
head -c 1000 data/t10k-images-idx3-ubyte >truncated
expect 2 "^dtrain: error: .*'truncated' holds 984 data bytes" -- predict --checkpoint ckpt --idx truncated
expect 2 "^dtrain: error: .*'data/t10k-labels-idx1-ubyte' has magic number" -- predict --checkpoint ckpt --idx data/t10k-labels-idx1-ubyte
python3 -c "
import struct; open('wide', 'wb').write(struct.pack('>IIII', 0x803, 1, 56, 14) + bytes(784))"
expect 2 "^dtrain: error: .*wide holds 56x14 images but the model takes 28x28 images" -- predict --checkpoint ckpt --idx wide

# 3. No training examples, no test examples: refused at the split.
expect 2 "^dtrain: error: --set data.train_split=train\[:0\]: .*split 'train\[:0\]' of data holds no examples" -- \
  train --config dp.yaml --set "data.train_split=train[:0]" --set checkpoint.every=never
expect 2 "^dtrain: error: .*split 'test\[128:\]' of data holds no examples" -- \
  eval --config dp.yaml --checkpoint ckpt --set "data.test_split=test[128:]"

# 4. plan checks the last layer against the class count, and needs no data folder.
expect 2 "^dtrain: error: .*the model ends in 7 units but mnist has 10 classes" -- plan --config dp.yaml --set model.1.dense=7
expect 0 "10 classes \(mnist\)" -- plan --config dp.yaml --set data.path=no/such/folder

# 5. Image rows cut into bands that a pool would split unevenly: FILE:LINE:COL of data.layout, naming the
# layer and its place. (Sharding an image's rows or columns is otherwise fine: conv2d and the pools exchange
# halos, a flatten gathers them.)
cnn=$source_dir/configs/mnist_cnn_sp.yaml
layout_line=$(grep -n "^  layout:" "$cnn" | cut -d: -f1)
for command in train plan; do
  expect 2 "^dtrain: error: $cnn:$layout_line:[0-9]+: data.layout: layer 'max_pool2d1' \($cnn:[0-9]+:[0-9]+\): .*4 bands" -- \
    $command --config "$cnn" --set "mesh.dims={batch: 2, spatial: 4}" --set data.path=data
done
sed -e 's/image_shape: flat, layout: \[batch, unsharded\]/image_shape: [28, 28], layout: [batch, model, unsharded]/' \
  -e 's/^model:/model:\n  - {flatten: {}}/' mp.yaml >image_sharded.yaml
expect 0 "" -- plan --config image_sharded.yaml

# 6. Options a command would ignore are refused.
expect 2 "^dtrain: error: inspect takes no --config" -- inspect ckpt --config dp.yaml
expect 2 "^dtrain: error: inspect takes no --run-dir" -- inspect ckpt --run-dir elsewhere
expect 2 "^dtrain: error: inspect takes no --set" -- inspect ckpt --set train.epochs=3
expect 2 "^dtrain: error: predict takes no --run-dir" -- predict --checkpoint ckpt --idx data/t10k-images-idx3-ubyte --run-dir r
expect 2 "^dtrain: error: predict takes no --config" -- predict --checkpoint ckpt --idx data/t10k-images-idx3-ubyte --config dp.yaml

# 7. Sizes that cannot be allocated: named, with the bytes they need, at the config's line.
expect 2 "^dtrain: error: --set model.0.dense=1000000000: .*dense1/kernel.*3136000000000 bytes" -- \
  plan --config dp.yaml --set model.0.dense=1000000000
sed -e 's/{dense: 32,/{dense: 1000000000,/' dp.yaml >huge.yaml
expect 2 "^dtrain: error: huge.yaml:4:[0-9]+: variable dense1/kernel of shape \(784,1000000000\) is too large: it needs 3136000000000 bytes" -- \
  train --config huge.yaml --set checkpoint.every=never
check "huge dense is one line" one_line

# 7b. A run that does not fit in memory, though each variable does: refused within seconds, before anything
# is allocated, naming the bytes per process (variables, gradients, slots) and the memory there is (issue 28).
available=$(( $(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024 ))
# dense1/kernel [784, units] in halves over `model`, on 8 devices: the variables are 0.6 of the memory.
units=$(( available * 6 / 10 / 12544 / 2 * 2 ))
start=$SECONDS
expect 2 "^dtrain: error: --set model.0.dense=$units: the run needs [0-9.]+ GiB per process \(8 devices x [0-9.]+ GiB: variables [0-9.]+ GiB, gradients [0-9.]+ GiB, adam slots [0-9.]+ [MG]iB, input batch .*\); this machine has [0-9.]+ GiB available" -- \
  train --config mp.yaml --set model.0.dense=$units --set checkpoint.every=never --run-dir big_run
check "the memory refusal came within seconds" test $((SECONDS - start)) -le 10
check "the memory refusal is one line" one_line
check "the memory refusal created no run dir" test ! -e big_run
expect 2 "^dtrain: error: --set model.0.dense=$units: the run needs" -- plan --config mp.yaml --set model.0.dense=$units
# The same for imdb_mp with a huge vocabulary, where the machine is small enough for it not to fit.
imdb_needs=$(( 16777216 * 48 / 2 * 4 * 8 * 2 ))  # dense1/kernel's halves and their gradients on 8 devices
if (( imdb_needs > available )); then
  mkdir -p empty_imdb
  expect 2 "^dtrain: error: .*imdb_mp.yaml:[0-9]+:[0-9]+: the run needs [0-9.]+ GiB per process.*gradients [0-9.]+ GiB, sgd slots" -- \
    train --config "$source_dir/configs/imdb_mp.yaml" --set data.path=empty_imdb --set data.vectorizer.max_tokens=16777216 \
    --run-dir imdb_run
else
  skip_part "imdb_mp with max_tokens 16777216 fits this machine's $((available >> 30)) GiB"
fi

# plan's variable table: every column as wide as its longest entry, so a long variable path keeps the rows
# aligned (issue 28): each row's global shape starts where the header's column does.
expect 0 "per process \(8 devices\)" -- plan --config dp.yaml --set model.0.name=a_rather_long_layer_name.for_the_table
check "plan's variable table is aligned for long names" awk '
  /^variable / { column = index($0, "global shape"); rows = 0; next }
  column && /^$/ { done = 1; exit }
  column { rows++; if (index($0, "(") != column) aligned_not = 1 }
  END { exit !(done && rows == 4 && !aligned_not) }' out

# 7c. Folders a run writes that cannot be made: refused at the key, the path shortened, nothing created
# (issue 28).
long=$(printf 'r%.0s' {1..300})
expect 2 "^dtrain: error: --set run_dir=r{32}\.\.\.r{20} \(308 characters\): run_dir: cannot create or write 'r{40}\.\.\.r{20} \(300 characters\)': a name in it is 300 characters long" -- \
  train --config dp.yaml --set train.max_steps=1 --set run_dir=$long --set checkpoint.dir=fresh_ckpt
check "a too long run_dir is one line" one_line
check "a too long run_dir echoes no whole path" bash -c "! grep -q 'r\{100\}' out"
check "a too long run_dir created nothing" test ! -e fresh_ckpt
expect 2 "^dtrain: error: --run-dir r{40}\.\.\.r{20} \(300 characters\): run_dir: cannot create" -- \
  train --config dp.yaml --set train.max_steps=1 --set checkpoint.every=never --run-dir $long
expect 2 "^dtrain: error: --set checkpoint.dir=x/r+\\.\\.\\.r{20} \\(317 characters\\): checkpoint.dir: cannot create or write 'x/r{38}\.\.\." -- \
  train --config dp.yaml --set train.max_steps=1 --set checkpoint.dir=x/$long --run-dir fresh_run
check "a too long checkpoint.dir created no run dir" test ! -e fresh_run
touch a_file
sed -e 's|^run_dir: run|run_dir: a_file/run|' dp.yaml >under_file.yaml
run_dir_line=$(grep -n "^run_dir:" under_file.yaml | cut -d: -f1)
expect 2 "^dtrain: error: under_file.yaml:$run_dir_line:10: run_dir: cannot create or write 'a_file/run': '.*a_file' is a file, not a folder" -- \
  train --config under_file.yaml --set train.max_steps=1 --set checkpoint.dir=fresh_ckpt
check "a run_dir under a file created nothing" test ! -e fresh_ckpt
expect 2 "^dtrain: error: --set checkpoint.dir=a_file/ckpt: checkpoint.dir: cannot create or write 'a_file/ckpt': .*is a file, not a folder" -- \
  resume --config dp.yaml --set checkpoint.dir=a_file/ckpt
expect 2 "^dtrain: error: --run-dir a_file/eval: run_dir: cannot create or write 'a_file/eval': .*is a file, not a folder" -- \
  eval --config dp.yaml --checkpoint ckpt --run-dir a_file/eval
# Not writable: as root permissions stop nothing, so a read-only bind mount in a private mount namespace.
mkdir -p read_only
if [[ $(id -u) != 0 ]]; then
  chmod a-w read_only
  expect 2 "^dtrain: error: --set run_dir=read_only/run: run_dir: cannot create or write 'read_only/run': '.*read_only' is not writable" -- \
    train --config dp.yaml --set train.max_steps=1 --set checkpoint.every=never --set run_dir=read_only/run
  chmod u+w read_only
elif unshare -m true 2>/dev/null; then
  rc=0
  unshare -m bash -c 'mount --bind -o ro read_only read_only && exec "$0" "$@"' "$dtrain" \
    train --config dp.yaml --set train.max_steps=1 --set checkpoint.every=never --set run_dir=read_only/run >out 2>&1 || rc=$?
  if [[ $rc == 2 ]] && grep -Eq "^dtrain: error: --set run_dir=read_only/run: run_dir: cannot create or write 'read_only/run': '.*read_only' is not writable \(Read-only file system\)" out; then
    ok
  else
    bad "a run_dir on a read-only mount: exit $rc: $(cat out)"
  fi
else
  skip_part "a read-only run_dir (root, and no unshare -m here)"
fi
check "the read-only run_dir created nothing" test -z "$(ls -A read_only)"

# 8. fetch_data.sh: what the missing data.path hint says is what the script does.
bash "$source_dir/scripts/fetch_data.sh" >out 2>&1 || true
check "fetch_data.sh usage names DIR/aclImdb and a DIR named aclImdb" grep -q "DIR/aclImdb.*named aclImdb" out

# 9. Bad HDF5 files: one line naming the file, no HDF5-DIAG stack (a damaged checkpoint is exit 1).
mkdir -p garbage
head -c 4096 /dev/urandom >garbage/index.h5
expect 1 "^dtrain: error: .*garbage" -- predict --checkpoint garbage --idx data/t10k-images-idx3-ubyte
check "garbage index.h5 for predict: one line, no HDF5-DIAG" one_line
expect 1 "^dtrain: error: .*garbage" -- inspect garbage
check "garbage index.h5 for inspect: one line, no HDF5-DIAG" one_line
expect 2 "^dtrain: error: .*data/t10k-images-idx3-ubyte is not a directory" -- eval --config dp.yaml --checkpoint data/t10k-images-idx3-ubyte
check "eval --checkpoint FILE: one line, no HDF5-DIAG" one_line
source "$lib/reseal.sh"  # reseal, can_reseal
if [[ -n $can_reseal ]]; then
  folder=ckpt/$(cat ckpt/latest)
  cp -r "$folder" bad_index && head -c 5000 /dev/urandom >bad_index/index.h5 && reseal bad_index
  cp -r "$folder" bad_shard && head -c 3000 /dev/urandom >bad_shard/shard-0-of-8.h5 && reseal bad_shard
  for args in "predict --checkpoint bad_index --idx data/t10k-images-idx3-ubyte" "inspect bad_index" \
              "inspect --verify bad_index" "eval --config dp.yaml --checkpoint bad_index" \
              "predict --checkpoint bad_shard --idx data/t10k-images-idx3-ubyte" \
              "eval --config dp.yaml --checkpoint bad_shard"; do
    file=bad_index/index.h5
    [[ $args == *bad_shard* ]] && file=bad_shard/shard-0-of-8.h5
    # shellcheck disable=SC2086
    expect 1 "^dtrain: error: .*cannot read $file" -- $args
    check "dtrain $args: no HDF5-DIAG" bash -c '! grep -q HDF5-DIAG out'
  done
else
  skip_part "resealed corrupt checkpoints (no libxxhash.so.0 for python3)"
fi

report
