#!/usr/bin/env python3
# Writes text_ids_small.txt: what REAL Keras TextVectorization(output_mode='int', max_tokens=N,
# output_sequence_length=L) gives on the corpora of make_tfidf_golden.py. Run with TensorFlow installed
# (python3 -m venv V && V/bin/pip install tensorflow-cpu); dtrain only reads the file this writes.
#
# Format (docs and tokens are hex so any byte, whitespace included, survives):
#   case NAME max_tokens N sequence_length L docs D vocab V
#   doc HEX                     x D
#   token HEX                   x V   (index 0 is "", 1 is "[UNK]")
#   ids I_0 ... I_{L-1}         x D
import importlib.util
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "make_tfidf_golden", os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_tfidf_golden.py"))
tfidf_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tfidf_golden)


def vocabulary_bytes(layer):
    # get_vocabulary() decodes UTF-8 and fails on other bytes: read the lookup table itself.
    lookup = layer._lookup_layer
    keys, values = lookup.lookup_table.export()
    by_index = {int(i): k for k, i in zip(keys.numpy(), values.numpy())}
    special = {0: b"", 1: lookup.oov_token.encode()}
    return [by_index.get(i, special.get(i)) for i in range(lookup.vocabulary_size())]


def write_case(out, name, corpus_bytes, max_tokens, sequence_length):
    layer = keras.layers.TextVectorization(max_tokens=max_tokens, output_mode="int",
                                           output_sequence_length=sequence_length)
    data = tf.constant(corpus_bytes, dtype=tf.string)
    layer.adapt(data)
    vocabulary = vocabulary_bytes(layer)
    assert vocabulary[0] == b"" and vocabulary[1] == b"[UNK]", vocabulary[:2]
    ids = layer(data).numpy()
    assert ids.shape == (len(corpus_bytes), sequence_length), ids.shape
    out.write(f"case {name} max_tokens {max_tokens} sequence_length {sequence_length} docs {len(corpus_bytes)} "
              f"vocab {len(vocabulary)}\n")
    for doc in corpus_bytes:
        out.write(f"doc {doc.hex()}\n")
    for token in vocabulary:
        out.write(f"token {token.hex()}\n")
    for row in ids:
        out.write("ids " + " ".join(str(int(v)) for v in row) + "\n")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "text_ids_small.txt")
    tricky = [text.encode("utf-8") for text in tfidf_golden.TRICKY]
    tricky.append(b"bad\xffbyte BAD\xfeBYTE nul\x00inside")
    synthetic = [text.encode("utf-8") for text in tfidf_golden.synthetic_corpus()]
    with open(path, "w") as out:
        out.write(f"# Keras TextVectorization int golden; tensorflow {tf.__version__}, keras {keras.__version__}\n")
        write_case(out, "tricky_oov", tricky, 12, 8)
        write_case(out, "tricky_all", tricky, 1000, 20)
        write_case(out, "tricky_one_token", tricky, 3, 5)
        write_case(out, "tricky_long", tricky, 40, 64)  # longer than every document: padding
        write_case(out, "synthetic", synthetic, 25, 16)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
