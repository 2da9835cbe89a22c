#!/usr/bin/env bash
# End-to-end: the real `dtrain` binary on a small generated aclImdb tree with data.vectorizer mode int (token
# ids, Keras TextVectorization output_mode='int') and, beside it, mode tf_idf: train -> inspect (mode, tokens,
# sequence length) -> inspect --verify -> eval on two meshes -> predict raw texts and text files -> resume; a config of the
# other mode and changed training texts are refused (exit 2).
# Usage: text_ids_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $dtrain, $work (the cwd), expect, check, latest

# 32 reviews a folder for training, 16 for testing; "great" leans positive, "bad" negative.
python3 - <<'PY'
import os, random
random.seed(4)
words = "movie film plot acting the a was ending music and it not".split()
for split, count in (("train", 32), ("test", 16)):
    for label in ("pos", "neg"):
        folder = f"data/aclImdb/{split}/{label}"
        os.makedirs(folder)
        for i in range(count):
            text = [random.choice(words) for _ in range(random.randrange(3, 30))]
            text.insert(random.randrange(len(text)), "great" if label == "pos" else "bad")
            if split == "test":
                text.append(f"unseen{i}")
            with open(f"{folder}/{i}_7.txt", "w") as f:
                f.write(" ".join(text).capitalize() + "<br />!")
PY

# config NAME VECTORIZER: flatten + dense 2 on the vectorized texts (the ids train nonsense; the pipeline is
# what is checked).
config() {
  cat >"$1.yaml" <<YAML
mesh: {dims: {batch: 2}}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: $2
  batch_size: 8
  shuffle: {seed: 1}
model:
  - {flatten: {}}
  - {dense: 2}
train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.01}}}
checkpoint: {dir: ckpt_$1, every: epoch}
run_dir: run_$1
YAML
}
config ids "{mode: int, max_tokens: 200, output_sequence_length: 16}"
config tfidf "{mode: tf_idf, max_tokens: 12}"
config tfidf16 "{mode: tf_idf, max_tokens: 16}"

expect 0 "test accuracy" -- train --config ids.yaml
# 200 exceeds the distinct training tokens: the vocabulary ("" , "[UNK]" and every token) is smaller.
tokens=$(wc -l <run_ids/vocabulary.txt)
check "the run dir's vocabulary starts with the empty padding token" test -z "$(head -1 run_ids/vocabulary.txt)"
check "the vocabulary is smaller than max_tokens 200" test "$tokens" -lt 200
check "no idf weights in int mode" test ! -e run_ids/idf_weights.txt
expect 0 "^vectorizer: int, $tokens tokens, sequence length 16$" -- inspect ckpt_ids
expect 0 "verdict: intact" -- inspect --verify ckpt_ids
expect 0 "accuracy" -- eval --config ids.yaml
sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_2
expect 0 "accuracy" -- eval --config ids.yaml --set mesh.dims.batch=4
sed -nE 's/.*loss ([0-9.]+) accuracy ([0-9.]+).*/\1 \2/p' out >eval_4
check "eval on {batch: 2} and {batch: 4} agree within 1e-5" python3 - <<'PY'
a, b = ([float(v) for v in open(n).read().split()] for n in ("eval_2", "eval_4"))
assert all(abs(x - y) <= 1e-5 for x, y in zip(a, b)), (a, b)
PY
expect 0 "^1	class ([01])	(neg|pos) [01]\.[0-9]{4}	probabilities" -- predict --checkpoint ckpt_ids "A great movie!" "Bad, bad film; never-seen words"
check "predict prints one line per text with probabilities summing to 1" python3 - <<'PY'
lines = open("out").read().splitlines()
assert len(lines) == 2, lines
for line in lines:
    p = [float(v) for v in line.split("probabilities ")[1].split()]
    assert len(p) == 2 and abs(sum(p) - 1) < 1e-4, line
PY
# A tf_idf config whose model has the same shapes, against the int checkpoint.
expect 2 "tfidf16.yaml: data.vectorizer.mode is tf_idf but checkpoint .*ckpt-8 does not hold such a vectorizer" -- \
  eval --config tfidf16.yaml --checkpoint ckpt_ids
expect 0 "resuming ckpt_ids/ckpt-8 " -- resume --config ids.yaml --set train.epochs=2
check "resume saved ckpt-16" test "$(latest ckpt_ids)" = ckpt-16
expect 0 "^vectorizer: int, $tokens tokens, sequence length 16$" -- inspect ckpt_ids

# tf_idf as before: the same commands.
expect 0 "test accuracy" -- train --config tfidf.yaml
expect 0 "^vectorizer: tf_idf, 12 tokens$" -- inspect ckpt_tfidf
check "idf weights beside the vocabulary in tf_idf mode" test "$(wc -l <run_tfidf/idf_weights.txt)" = 12
expect 0 "accuracy" -- eval --config tfidf.yaml
expect 0 "^0	class ([01])	(neg|pos) [01]\.[0-9]{4}	probabilities" -- predict --checkpoint ckpt_tfidf "A great movie!"
cp out predict_text
# --file: a .txt file is one review, the same as that text given raw.
printf 'A great movie!' >review.txt
expect 0 "^0	review.txt	class [01]	(neg|pos) [01]\.[0-9]{4}	probabilities" -- predict --checkpoint ckpt_tfidf --file review.txt
check "a text file predicts what its text does" test "$(cut -f2- predict_text)" = "$(cut -f3- out)"
expect 2 "^dtrain: error: \[predict\] --file 'photo.png': checkpoint .* holds a model of data set imdb, which takes text \(.txt\) files" -- \
  predict --checkpoint ckpt_tfidf --file photo.png
expect 0 "resuming" -- resume --config tfidf.yaml --set train.epochs=2

# Changed training texts: the re-fitted vocabulary differs from the checkpoint's.
echo "brand new words in this review, new new new" >data/aclImdb/train/pos/0_7.txt
expect 2 "give another int vocabulary than checkpoint" -- resume --config ids.yaml --set train.epochs=3
expect 2 "give another tf_idf vocabulary than checkpoint" -- resume --config tfidf.yaml --set train.epochs=3

report
