#!/usr/bin/env python3
# The peer for configs/imdb_transformer.yaml's accuracy: Keras' example "Text classification with Transformer"
# verbatim (model, Adam, batch 32, 2 epochs) in real Keras on the aclImdb folder, with the reviews tokenized as
# dtrain does (--tok dtrain: TextVectorization's standardize, the 20,000-token vocabulary of the training
# split) or like keras.datasets.imdb (--tok keraslike: apostrophes kept, ranks over both splits, a start id 1,
# index_from 3), cut and padded by pad_sequences at either end. Prints the test accuracy after each epoch:
# tells the data's share of a gap from the model's. Needs TensorFlow (python3 -m venv V && V/bin/pip install
# tensorflow-cpu). Usage: imdb_transformer_keras_accuracy.py --imdb DIR/aclImdb [--tok dtrain|keraslike]
#                         [--trunc pre|post] [--pad pre|post] [--seed 0]
import os, glob, collections, argparse
import numpy as np
p = argparse.ArgumentParser()
p.add_argument("--imdb", required=True)
p.add_argument("--tok", default="dtrain")
p.add_argument("--trunc", default="pre")
p.add_argument("--pad", default="pre")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--posinit", default="uniform")
a = p.parse_args()
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras
from keras import layers, ops
keras.utils.set_random_seed(a.seed)
root = a.imdb
def read(split):
    texts, labels = [], []
    for lab, d in ((0, "neg"), (1, "pos")):
        for f in sorted(glob.glob(f"{root}/{split}/{d}/*.txt")):
            texts.append(open(f, encoding="utf-8", errors="replace").read()); labels.append(lab)
    return texts, np.array(labels)
punct = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\''
table = str.maketrans("", "", punct)
def tok_dtrain(t):
    t = "".join(c.lower() if "A" <= c <= "Z" else c for c in t)
    return t.translate(table).split()
kp = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
ktable = str.maketrans(kp, " " * len(kp))
def tok_keraslike(t):  # keras.datasets.imdb: lower, punctuation split (apostrophes kept), <br /> kept as br
    return t.lower().translate(ktable).split()
tok = tok_dtrain if a.tok == "dtrain" else tok_keraslike
xtr, ytr = read("train"); xte, yte = read("test")
ttr = [tok(t) for t in xtr]; tte = [tok(t) for t in xte]
vocab_size, maxlen = 20000, 200
if a.tok == "dtrain":
    c = collections.Counter(w for d in ttr for w in d)
    words = sorted(c.items(), key=lambda kv: (-kv[1], [-b for b in kv[0].encode()] + [1]))[: vocab_size - 2]
    index = {w: i + 2 for i, (w, _) in enumerate(words)}
    enc = lambda d: [index.get(w, 1) for w in d]
else:  # ranks over train+test, index_from 3, start 1, oov 2
    c = collections.Counter(w for d in ttr + tte for w in d)
    words = [w for w, _ in c.most_common()]
    index = {w: i + 1 + 3 for i, w in enumerate(words)}
    enc = lambda d: [1] + [index[w] if index[w] < vocab_size else 2 for w in d]
x_train = keras.utils.pad_sequences([enc(d) for d in ttr], maxlen=maxlen, padding=a.pad, truncating=a.trunc)
x_val = keras.utils.pad_sequences([enc(d) for d in tte], maxlen=maxlen, padding=a.pad, truncating=a.trunc)
y_train, y_val = ytr, yte

class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)
    def call(self, inputs):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)

class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim, embeddings_initializer=a.posinit)
    def call(self, x):
        positions = ops.arange(start=0, stop=ops.shape(x)[-1], step=1)
        return self.token_emb(x) + self.pos_emb(positions)

inputs = layers.Input(shape=(maxlen,))
x = TokenAndPositionEmbedding(maxlen, vocab_size, 32)(inputs)
x = TransformerBlock(32, 2, 32)(x)
x = layers.GlobalAveragePooling1D()(x)
x = layers.Dropout(0.1)(x)
x = layers.Dense(20, activation="relu")(x)
x = layers.Dropout(0.1)(x)
outputs = layers.Dense(2, activation="softmax")(x)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
h = model.fit(x_train, y_train, batch_size=32, epochs=2, validation_data=(x_val, y_val), verbose=2)
print("RESULT", vars(a), [round(v, 4) for v in h.history["val_accuracy"]], flush=True)
