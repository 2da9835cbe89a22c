#!/usr/bin/env bash
# End-to-end: the real `dtrain` binary on bad configs and bad command lines. Each must exit 2 (usage)
# with "dtrain: error: FILE:LINE:COL: ..." on stderr; --help exits 0. Usage: cli_errors.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/tally.sh"

dtrain=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir -p data/aclImdb

# expect CODE PATTERN -- ARGS...: runs dtrain ARGS, checks the exit code and that stderr (or, for
# code 0, stdout) matches the extended regex PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out err rc=0
  out=$("$dtrain" "$@" 2>"$work/stderr") || rc=$?
  err=$(cat "$work/stderr")
  local text=$err
  [[ $code == 0 ]] && text=$out
  if [[ $rc != "$code" ]]; then
    bad "dtrain $* exited $rc, expected $code; stderr: $err"
  elif ! grep -Eq -- "$pattern" <<<"$text"; then
    bad "dtrain $* output does not match /$pattern/: $text"
  else
    ok
  fi
}

# A valid config; each case below breaks one line of it (line numbers in comments).
good() {
  cat <<'YAML'
mesh:
  dims: {batch: 4, model: 2}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: {mode: tf_idf, max_tokens: 1200}
  batch_size: 64
  layout: [batch, unsharded]
model:
  - {dense: 48, activation: relu}
  - {batch_norm: {}}
  - {dense: 2}
layouts:
  dense1/kernel: [unsharded, model]
train:
  epochs: 2
  optimizer: {sgd: {learning_rate: 0.01}}
YAML
}
# broken NAME SED_EXPRESSION: writes NAME.yaml, the good config edited by sed.
broken() { good | sed -e "$2" >"$1.yaml"; }

good >good.yaml

# --help works for the tool and for every command.
expect 0 "train" -- --help
for command in train resume eval predict inspect plan diff; do
  expect 0 "Usage: .*$command" -- "$command" --help
done
expect 0 "dtrain 0" -- --version

# Bad command lines.
expect 2 "dtrain: error: unknown command 'trian'.*did you mean 'train'" -- trian --config good.yaml
# `dtrain` alone prints what --help prints, exit 0 (issue 33).
alone=$("$dtrain") && ok || bad "dtrain alone exited $?"
help=$("$dtrain" --help)
if grep -Eq "^  plan +Dry run" <<<"$alone"; then ok; else bad "dtrain alone lists no commands: $alone"; fi
if [[ $alone == "$help" ]]; then ok; else bad "dtrain alone differs from dtrain --help: $alone"; fi
# `predict --file a.png b.png`: names b.png and says each --file takes one path (issue 28).
expect 2 "dtrain: error: predict: 'b.png' follows --file a.png, but each --file takes one path" -- \
  predict --checkpoint somewhere --file a.png b.png
expect 2 "dtrain: error: .*--config is required" -- train
expect 2 "dtrain: error: .*--bogus" -- train --config good.yaml --bogus
expect 2 "dtrain: error: .*--checkpoint is required" -- predict "some text"
expect 2 "dtrain: error: predict: give texts to classify, --file PATH ..., --idx FILE, --npy FILE or --csv FILE \(one kind of input\)" -- predict --checkpoint somewhere
expect 2 "dtrain: error: missing.yaml: cannot read the config file" -- train --config missing.yaml

# Bad configs: exit 2, FILE:LINE:COL and what was expected.
broken unknown_key 's/batch_size: 64/bacth_size: 64/'
expect 2 "dtrain: error: unknown_key.yaml:7:3: data: unknown key 'bacth_size'; did you mean 'batch_size'\\?" -- train --config unknown_key.yaml
broken wrong_type 's/batch_size: 64/batch_size: many/'
expect 2 "dtrain: error: wrong_type.yaml:7:15: data.batch_size: expected an integer >= 1, got 'many'" -- train --config wrong_type.yaml
broken missing_key '/epochs: 2/d'
expect 2 "dtrain: error: missing_key.yaml:16:3: train: missing required key 'epochs'" -- plan --config missing_key.yaml
broken bad_dim 's/\[unsharded, model\]/[unsharded, modle]/'
# A layout rule that matches no variable (issue 28): refused at the rule, with the closest path.
broken no_match 's#  dense1/kernel: \[unsharded, model\]#  dens1/kernel: [unsharded, model]#'
expect 2 "dtrain: error: no_match.yaml:14:3: layouts: rule 'dens1/kernel' matches no variable of the model; did you mean 'dense1/kernel'\?" -- plan --config no_match.yaml
expect 2 "dtrain: error: bad_dim.yaml:14:30: layouts\\['dense1/kernel'\\]\\[1\\]: 'modle' is not a mesh dim.*did you mean 'model'" -- train --config bad_dim.yaml
broken dim_twice 's/\[unsharded, model\]/[model, model]/'
expect 2 "dtrain: error: dim_twice.yaml:14:26: .*mesh dim 'model' shards two axes" -- eval --config dim_twice.yaml
broken indivisible 's/batch_size: 64/batch_size: 66/'
expect 2 "dtrain: error: indivisible.yaml:7:15: .*global batch 66 must be divisible by 4" -- train --config indivisible.yaml
broken no_data 's#data/aclImdb#data/nowhere#'
expect 2 "dtrain: error: no_data.yaml:5:9: data.path: 'data/nowhere' does not exist" -- train --config no_data.yaml
broken bad_activation 's/activation: relu/activation: rleu/'
expect 2 "dtrain: error: bad_activation.yaml:10:29: .*did you mean 'relu'" -- resume --config bad_activation.yaml
broken bad_yaml 's/layout: \[batch, unsharded\]/layout: [batch, unsharded/'
expect 2 "dtrain: error: bad_yaml.yaml:[0-9]+:[0-9]+: invalid YAML" -- train --config bad_yaml.yaml

# Overrides: bad ones exit 2 naming the --set.
expect 2 "dtrain: error: --set data.batch_size=66: data.batch_size: the global batch 66" -- train --config good.yaml --set data.batch_size=66
expect 2 "dtrain: error: --set mesh.dims.batch: expected KEY.PATH=VALUE" -- train --config good.yaml --set mesh.dims.batch
expect 2 "dtrain: error: good.yaml:7:15: .*divisible by 3, the size of mesh dim 'batch' \\(--set mesh.dims.batch=3\\)" -- plan --config good.yaml --set mesh.dims.batch=3

# Numbers are checked as the float32 the engine computes with, at the key (issue 28): 1e-320 is > 0 as a
# double but 0 as a float, and 1e39 is beyond float's range; each used to pass the config check.
expect 2 "dtrain: error: --set train.optimizer.sgd.learning_rate=1e-320: train.optimizer.sgd.learning_rate: 1e-320 is below the smallest normal float32" -- \
  train --config good.yaml --set train.optimizer.sgd.learning_rate=1e-320
expect 2 "dtrain: error: --set train.optimizer.sgd.learning_rate=1e39: train.optimizer.sgd.learning_rate: 1e39 is beyond the range of the float32" -- \
  train --config good.yaml --set train.optimizer.sgd.learning_rate=1e39
broken tiny_rate 's/learning_rate: 0.01/learning_rate: 1e-320/'
expect 2 "dtrain: error: tiny_rate.yaml:17:36: train.optimizer.sgd.learning_rate: 1e-320 is below" -- train --config tiny_rate.yaml

# A file whose top is not a map is blamed on the file, with or without a --set (issue 28).
printf '[1, 2]\n' >list.yaml
expect 2 "dtrain: error: list.yaml:1:1: config: expected a map with sections .*got a list" -- train --config list.yaml
expect 2 "dtrain: error: list.yaml:1:1: config: expected a map with sections .*got a list" -- \
  train --config list.yaml --set train.max_steps=2

# A valid config gets past the config checks (whatever the command then does with the empty data dir).
"$dtrain" plan --config good.yaml --set train.max_steps=1 >/dev/null 2>"$work/stderr" || true
if grep -Eq "good.yaml:[0-9]+:[0-9]+:|--set" "$work/stderr"; then bad "a valid config was refused: $(cat "$work/stderr")"; else ok; fi

report
