#!/usr/bin/env python3
# Writes tfidf_small.txt: what REAL Keras TextVectorization(output_mode='tf_idf', max_tokens=N) gives on small
# tricky corpora. Run with TensorFlow installed (python3 -m venv V && V/bin/pip install tensorflow-cpu); dtrain
# never needs TensorFlow to build or test, it only reads the file this writes.
#
# Format (docs and tokens are hex so any byte, whitespace included, survives):
#   case NAME max_tokens N docs D vocab V
#   doc HEX                     x D
#   token HEX IDF               x V   (IDF printed "%.9g")
#   row F_0 ... F_{V-1}         x D   (the dense output row, "%.9g")
import os
import random
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

TRICKY = [
    "The movie was GREAT, great; great!!! <br /><br />But the ending... the END?",
    "",
    "   \t\n  ",
    "!!! ... --- ''' ```",
    "don't won't can't: it's the DOG's bone (a dog-bone) [really] {maybe} <tag> a|b a~b a^b a@b a#b",
    "caf\u00e9 CAF\u00c9 na\u00efve \u00c9T\u00c9 stra\u00dfe \u00fcber\u00dcBER \u65e5\u672c\u8a9e",
    "tab\tsep\nnew\rline\x0bvt\x0cff nbsp\u00a0joined em\u2003space",
    "zebra apple mango zebra apple mango kiwi",
    "a a a a a a a a b",
    "b c d e f g h i j k l m n o p",
    "numbers 1,000 2.5 3/4 100% $5 #1 x2 2x 10-20",
    "URL http://example.com/path?q=1&r=2 e-mail me@example.org",
    "repeated repeated repeated token token",
    "the the the the",
]


def synthetic_corpus(seed=20240521, docs=300):
    """Zipf-ish random reviews over a small word list with random casing and punctuation."""
    rng = random.Random(seed)
    words = ["good", "bad", "movie", "film", "plot", "actor", "scene", "great", "awful", "the", "a", "and",
             "of", "to", "is", "it", "br", "really", "not", "very", "funny", "boring", "story", "love", "hate",
             "caf\u00e9", "na\u00efve", "ok", "x", "yy", "zzz", "end", "fin", "one", "two", "ten"]
    weights = [1.0 / (i + 1) for i in range(len(words))]
    punctuation = ["", "", "", ",", ".", "!", "?", "...", "'s", "<br />", ")", "(", "-", ":"]
    corpus = []
    for _ in range(docs):
        length = rng.choice([0, 1, 2, 5, 10, 20, 40])
        tokens = []
        for _ in range(length):
            word = rng.choices(words, weights)[0]
            if rng.random() < 0.2:
                word = word.upper() if rng.random() < 0.5 else word.capitalize()
            tokens.append(word + rng.choice(punctuation))
        corpus.append(rng.choice([" ", "  ", "\n", "\t "]).join(tokens))
    return corpus


def vocabulary_bytes(layer):
    # get_vocabulary() decodes UTF-8 and fails on other bytes: read the lookup table itself.
    lookup = layer._lookup_layer
    keys, values = lookup.lookup_table.export()
    by_index = {int(i): k for k, i in zip(keys.numpy(), values.numpy())}
    return [by_index.get(i, lookup.oov_token.encode()) for i in range(lookup.vocabulary_size())]


def write_case(out, name, corpus_bytes, max_tokens):
    layer = keras.layers.TextVectorization(max_tokens=max_tokens, output_mode="tf_idf")
    data = tf.constant(corpus_bytes, dtype=tf.string)
    layer.adapt(data)
    vocabulary = vocabulary_bytes(layer)
    idf = layer._lookup_layer.idf_weights_const.numpy()
    rows = layer(data).numpy()
    assert rows.shape == (len(corpus_bytes), len(vocabulary)), rows.shape
    out.write(f"case {name} max_tokens {max_tokens} docs {len(corpus_bytes)} vocab {len(vocabulary)}\n")
    for doc in corpus_bytes:
        out.write(f"doc {doc.hex()}\n")
    for token, weight in zip(vocabulary, idf):
        out.write(f"token {token.hex()} {float(weight):.9g}\n")
    for row in rows:
        out.write("row " + " ".join(f"{float(v):.9g}" for v in row) + "\n")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "tfidf_small.txt")
    tricky = [text.encode("utf-8") for text in TRICKY]
    # Bytes that are not UTF-8 and a NUL: TensorFlow's string ops treat them as ordinary bytes.
    tricky.append(b"bad\xffbyte BAD\xfeBYTE nul\x00inside")
    synthetic = [text.encode("utf-8") for text in synthetic_corpus()]
    with open(path, "w") as out:
        out.write(f"# Keras TextVectorization tf_idf golden; tensorflow {tf.__version__}, keras {keras.__version__}\n")
        write_case(out, "tricky_oov", tricky, 12)
        write_case(out, "tricky_all", tricky, 1000)
        write_case(out, "tricky_one_token", tricky, 2)  # Keras refuses max_tokens < 2
        write_case(out, "synthetic", synthetic, 25)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
