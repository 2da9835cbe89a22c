#!/usr/bin/env bash
# End-to-end fine-tuning with the real `dtrain` binary: train model-parallel with Adam -> train --init-from on
# a data-parallel mesh with SGD momentum (and from one DIR/ckpt-N folder onto one device) -> inspect, eval;
# a new head with --init-skip; every mismatch and misuse exits 2 naming the checkpoint and the variables; the
# source checkpoint dir is never modified (checksums before and after), a damaged one is exit 1, and it is
# read under the readers' lease; under mpirun the same model results. IMDB: the fine-tuned run keeps the
# checkpoint's vectorizer (no re-fit, even on other texts) and so does its resume; so do imdb -> text_folder,
# text_folder -> text_folder and text_folder -> imdb, and predict reads the fine-tuned checkpoints.
# Usage: init_from_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest
source "$lib/mnist_fixture.sh"  # data/, config() and dp/mp/sp.yaml (Adam, checkpoints in ckpt/)

# Every file of a checkpoint dir with its checksum (the readers' lease file aside: a lock, no content).
checksums() { (cd "$1" && find . -path ./.readers -prune -o -print0 | sort -z | xargs -0 -I{} sh -c 'if [ -f "{}" ]; then sha256sum "{}"; else echo "dir {}"; fi'); }

expect 0 "test accuracy" -- train --config mp.yaml
check "the source run saved ckpt-16" test "$(latest ckpt)" = ckpt-16
checksums ckpt >before

# The fine-tuning config: data parallel on {batch: 8}, SGD with momentum, its own checkpoint and run dirs.
cat >ft.yaml <<'YAML'
mesh: {dims: {batch: 8}}
data: {dataset: mnist, path: data, batch_size: 64, shuffle: {seed: 9}, image_shape: flat, layout: [batch, unsharded]}
model:
  - {dense: 32, activation: relu}
  - {dense: 10}
layouts: {dense1/kernel: [unsharded, batch]}
train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.05, momentum: 0.9}}}
checkpoint: {dir: ckpt_ft, every: epoch}
run_dir: run_ft
YAML

expect 0 "fine-tuning from ckpt/ckpt-16 \(step 16, saved on mesh \{batch: 4, model: 2\} on 8 CPU devices\): 4 variables read; sgd_momentum optimizer from step 0" -- \
  train --config ft.yaml --init-from ckpt
check "the fine-tuned run saved its own ckpt-8 (step 0 + one epoch of 8 steps)" test "$(latest ckpt_ft)" = ckpt-8
check "the saved config records init_from" grep -aq "init_from: ckpt" ckpt_ft/ckpt-8/index.h5
expect 0 "optimizer: sgd_momentum" -- inspect ckpt_ft
check "inspect lists the SGD momentum slots" grep -q "optimizer/dense1/kernel/momentum" out
grep -E "^run" out >ft_run_id
"$dtrain" inspect ckpt | grep -E "^run" >source_run_id
check "a new run id" test "$(cat ft_run_id)" != "$(cat source_run_id)"
# The same config from its initializers, to compare with.
expect 0 "test accuracy" -- train --config ft.yaml --set checkpoint.dir=ckpt_fresh --set run_dir=run_fresh
check "metrics.jsonl: a start row at step 0 naming the checkpoint; a first epoch well below a fresh run's loss" python3 - <<'PY'
import json
rows = [json.loads(line) for line in open("run_ft/metrics.jsonl")]
run = rows[0]
assert run["split"] == "run" and run["event"] == "start" and run["step"] == 0 and run["epoch"] == 1, run
assert run["init_from"] == "ckpt/ckpt-16", run
tuned = [r for r in rows if r["split"] == "train"]
assert len(tuned) == 1 and tuned[0]["step"] == 8, tuned
fresh_rows = [json.loads(line) for line in open("run_fresh/metrics.jsonl")]
assert "init_from" not in fresh_rows[0], fresh_rows[0]
fresh = [r for r in fresh_rows if r["split"] == "train"]
assert tuned[0]["loss"] < 0.7 * fresh[0]["loss"], (tuned, fresh)
PY
expect 0 "accuracy" -- eval --config sp.yaml --checkpoint ckpt_ft

# One checkpoint folder onto one device.
expect 0 "fine-tuning from ckpt/ckpt-8 \(step 8" -- train --config ft.yaml --init-from ckpt/ckpt-8 \
  --set "mesh.dims={batch: 1}" --set "layouts={}" --set checkpoint.dir=ckpt_one --set run_dir=run_one
check "the one-device run saved ckpt-8" test "$(latest ckpt_one)" = ckpt-8

# A new head: refused until --init-skip names the new and the old head.
sed -e 's/- {dense: 10}/- {dense: 10, name: head}/' -e 's/ckpt_ft/ckpt_head/' ft.yaml >head.yaml
expect 2 "--init-from ckpt: the model does not match checkpoint ckpt/ckpt-16: variable 'head/kernel' of the model is not there; variable 'head/bias' of the model is not there; it holds 'dense2/bias', 'dense2/kernel' that the model does not have.*e.g. \['head/\.\*', 'dense2/\.\*'\]" -- \
  train --config head.yaml --init-from ckpt
expect 0 "2 variables read, left as initialized: head/kernel, head/bias, not read: dense2/bias, dense2/kernel;" -- \
  train --config head.yaml --init-from ckpt --init-skip 'head/.*' --init-skip 'dense2/.*'

# Every mismatch and misuse: exit 2, naming what and where.
expect 2 "variable 'dense1/kernel' has shape \(784,32\) there but \(784,16\) in the model; variable 'dense1/bias' has shape \(32\) there but \(16\) in the model" -- \
  train --config ft.yaml --init-from ckpt --set model.0.dense=16 --set checkpoint.dir=ckpt_x
expect 2 "^dtrain: error: --init-skip nothing/\.\*: train.init_skip: 'nothing/\.\*' matches no variable of the model \('dense1/kernel', 'dense1/bias', 'dense2/kernel', 'dense2/bias'\) or of checkpoint ckpt/ckpt-16" -- \
  train --config ft.yaml --init-from ckpt --init-skip 'nothing/.*' --set checkpoint.dir=ckpt_x
expect 2 "--init-skip .\*: train.init_skip: variables to leave as initialized, but no checkpoint" -- \
  train --config ft.yaml --init-skip '.*'
expect 2 "--init-from ckpt_ft: ckpt_ft is in checkpoint.dir ckpt_ft, which this run writes" -- \
  train --config ft.yaml --init-from ckpt_ft --overwrite
expect 2 "--init-from ckpt_ft/ckpt-8: ckpt_ft/ckpt-8 is in checkpoint.dir ckpt_ft" -- \
  train --config ft.yaml --init-from ckpt_ft/ckpt-8 --overwrite
check "the refused run kept its own checkpoint" test "$(latest ckpt_ft)" = ckpt-8
expect 2 "--init-from nowhere: \[checkpoint\] nowhere does not exist" -- train --config ft.yaml --init-from nowhere
expect 2 "--init-from data: \[checkpoint\] data holds no checkpoint" -- train --config ft.yaml --init-from data
sed -e 's/^train: {epochs: 1,/train: {epochs: 1, init_skip: [dense2\/.*],/' ft.yaml >skip_only.yaml
expect 2 "skip_only.yaml:7:32: train.init_skip: variables to leave as initialized, but no checkpoint" -- \
  train --config skip_only.yaml
expect 2 "init-from" -- eval --config mp.yaml --init-from ckpt

# A damaged source is exit 1 naming the file; the variables are read under the readers' lease: a writer
# deleting checkpoints there (holding .readers exclusively) makes the run wait.
cp -r ckpt damaged
printf '\xff\xff\xff\xff' | dd of=damaged/ckpt-16/shard-1-of-8.h5 bs=1 seek=3000 conv=notrunc 2>/dev/null
expect 1 "damaged/ckpt-16/shard-1-of-8.h5" -- train --config ft.yaml --init-from damaged --set checkpoint.dir=ckpt_x
if command -v flock >/dev/null; then
  flock -x ckpt/.readers sleep 3 &
  holder=$!
  sleep 0.5
  began=$(date +%s.%N)
  expect 0 "fine-tuning from ckpt/ckpt-16 " -- train --config ft.yaml --init-from ckpt --set checkpoint.dir=ckpt_lease \
    --set run_dir=run_lease
  ended=$(date +%s.%N)
  wait $holder
  check "the run waited for the writer's hold on ckpt/.readers" python3 -c "assert $ended - $began >= 2, $ended - $began"
fi

# Under mpirun (2 processes of 4 devices): the same fine-tuned model as in one process, up to rounding.
if mpi_runnable "$dtrain"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rc=0
  timeout 120 mpirun --oversubscribe -np 2 "$dtrain" train --config ft.yaml --init-from ckpt --set checkpoint.dir=ckpt_mpi \
    --set run_dir=run_mpi </dev/null >out 2>&1 || rc=$?
  check "mpirun -np 2 train --init-from exits 0 ($(tail -3 out))" test $rc = 0
  check "the 2-process run saved ckpt-8" test "$(latest ckpt_mpi)" = ckpt-8
  expect 0 "accuracy" -- eval --config sp.yaml --checkpoint ckpt_ft
  sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_one
  expect 0 "accuracy" -- eval --config sp.yaml --checkpoint ckpt_mpi
  sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_two
  check "one and two processes fine-tune to the same model (eval within 1e-4)" python3 - <<'PY'
one, two = ([float(v) for v in open(name).read().split()] for name in ("eval_one", "eval_two"))
assert all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(one, two)), (one, two)
PY
else
  echo "note: no mpirun or no MPI build: the mpirun case is not run"
fi

# The source checkpoint dir is as it was: every file, byte for byte.
checksums ckpt >after
check "the source checkpoint dir is unchanged" diff before after

# IMDB: a base run with a 12-token TF-IDF vocabulary fitted on its 64 training reviews, fine-tuned on other
# reviews of 4 words only (whose own vocabulary would differ, and be too small for 12 tokens).
python3 - <<'PY'
import os, random
random.seed(4)
words = "movie film plot acting the a was ending music and it not".split()
for root, vocabulary, count in (("data/aclImdb", words, 32), ("data/small/aclImdb", ["movie", "plot"], 16)):
    for split in ("train", "test"):
        for label in ("pos", "neg"):
            folder = f"{root}/{split}/{label}"
            os.makedirs(folder)
            for i in range(count):
                text = [random.choice(vocabulary if split == "train" else words) for _ in range(random.randrange(3, 30))]
                text.insert(random.randrange(len(text)), "great" if label == "pos" else "bad")
                with open(f"{folder}/{i}_7.txt", "w") as f:
                    f.write(" ".join(text))
PY
imdb() {
  cat >"$1.yaml" <<YAML
mesh: {dims: {batch: $2}}
data: {dataset: imdb, path: $3, vectorizer: $4, batch_size: 8, shuffle: {seed: 1}}
model:
  - {dense: 2}
train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.01}}}
checkpoint: {dir: ckpt_$1, every: epoch}
run_dir: run_$1
YAML
}
imdb base 2 data/aclImdb "{mode: tf_idf, max_tokens: 12}"
imdb few 4 data/small/aclImdb "{mode: tf_idf, max_tokens: 12}"
imdb ids 4 data/small/aclImdb "{mode: int, max_tokens: 12, output_sequence_length: 6}"
expect 0 "test accuracy" -- train --config base.yaml
# max_tokens is a cap (issue 28, as Keras): 4 distinct tokens make a smaller vocabulary, rows padded to 12.
expect 0 "note: the training texts have 4 distinct tokens, fewer than max_tokens 12" -- \
  train --config few.yaml --set checkpoint.dir=ckpt_few_alone --run-dir run_few_alone
check "the capped vocabulary holds [UNK] and the 4 tokens" test "$(wc -l <run_few_alone/vocabulary.txt)" = 5
expect 0 "fine-tuning from ckpt_base/ckpt-8 " -- train --config few.yaml --init-from ckpt_base
check "the fine-tuned run kept the checkpoint's vocabulary" diff run_base/vocabulary.txt run_few/vocabulary.txt
check "and its idf weights" diff run_base/idf_weights.txt run_few/idf_weights.txt
expect 0 "resuming ckpt_few/ckpt-4 " -- resume --config few.yaml --set train.epochs=2 --set train.init_from=ckpt_base
check "the resume noted init_from" grep -q "note: train.init_from (ckpt_base) starts a \`train\` run; resume continues ckpt_few/ckpt-4" out
check "the resume saved ckpt-8" test "$(latest ckpt_few)" = ckpt-8
expect 2 "data.vectorizer.mode is int but checkpoint ckpt_base/ckpt-8 does not hold such a vectorizer" -- \
  train --config ids.yaml --init-from ckpt_base
expect 2 "--init-from ckpt_base: checkpoint ckpt_base/ckpt-8 holds a text vectorizer \(its model reads texts\), but data.dataset is mnist" -- \
  train --config ft.yaml --init-from ckpt_base --set checkpoint.dir=ckpt_x

# Between text data sets (issue 28): a text folder of reviews in other files (with words the IMDB vocabulary
# lacks) fine-tuned from the IMDB checkpoint, from a text_folder checkpoint (the same config, as in a
# second round), and an IMDB run from the text_folder one: each keeps the vocabulary it started from.
python3 - <<'PY'
import os, random
random.seed(5)
words = "movie film plot acting the a was ending music and it not".split() + ["popcorn", "sequel"]
for split, count in (("train", 24), ("test", 8)):
    for label in ("neg", "pos"):
        os.makedirs(f"texts/{split}/{label}")
        for i in range(count):
            text = [random.choice(words) for _ in range(random.randrange(3, 20))]
            text.insert(random.randrange(len(text)), "great" if label == "pos" else "bad")
            with open(f"texts/{split}/{label}/{i}.txt", "w") as f:
                f.write(" ".join(text))
PY
cat >texts.yaml <<'YAML'
mesh: {dims: {batch: 2}}
data: {dataset: text_folder, path: texts, vectorizer: {mode: tf_idf, max_tokens: 12}, batch_size: 8, shuffle: {seed: 1}}
model:
  - {dense: 2}
train: {epochs: 2, optimizer: {sgd: {learning_rate: 0.05}}}
checkpoint: {dir: ckpt_texts, every: epoch}
run_dir: run_texts
YAML
expect 0 "fine-tuning from ckpt_base/ckpt-8 \(step 8" -- train --config texts.yaml --init-from ckpt_base
check "imdb -> text_folder: the fine-tuned run kept the IMDB vocabulary" diff run_base/vocabulary.txt run_texts/vocabulary.txt
check "and its idf weights" diff run_base/idf_weights.txt run_texts/idf_weights.txt
expect 0 "^classes: neg, pos$" -- inspect ckpt_texts
expect 0 "split test: .*\(16 examples\)" -- eval --config texts.yaml
expect 0 "^0	class [01]	(neg|pos) [01]\.[0-9]{4}	probabilities" -- predict --checkpoint ckpt_texts "a great film" "a bad plot"
check "predict on the fine-tuned checkpoint prints a row per text" test "$(grep -c probabilities out)" = 2
# text_folder -> text_folder: the same config, a second round from the first's checkpoint.
expect 0 "fine-tuning from ckpt_texts/ckpt-12 \(step 12" -- train --config texts.yaml --init-from ckpt_texts \
  --set checkpoint.dir=ckpt_texts2 --run-dir run_texts2
check "text_folder -> text_folder: the vocabulary went on unchanged" diff run_texts/vocabulary.txt run_texts2/vocabulary.txt
expect 0 "^1	class [01]	(neg|pos) " -- predict --checkpoint ckpt_texts2 "a great film" "a bad plot"
# A text_folder run of its own (its vocabulary fitted on the folder's texts) -> imdb.
expect 0 "test accuracy" -- train --config texts.yaml --set checkpoint.dir=ckpt_own --run-dir run_own
expect 0 "fine-tuning from ckpt_own/ckpt-12 \(step 12" -- train --config base.yaml --init-from ckpt_own \
  --set checkpoint.dir=ckpt_back --run-dir run_back
check "text_folder -> imdb: the IMDB run kept the text folder's vocabulary" diff run_own/vocabulary.txt run_back/vocabulary.txt
check "which is not the one IMDB's texts give" bash -c '! cmp -s run_own/vocabulary.txt run_base/vocabulary.txt'

report
