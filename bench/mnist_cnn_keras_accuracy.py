#!/usr/bin/env python3
# The peer for configs/mnist_cnn_sp.yaml's accuracy: the same model in real Keras (Conv 3x3 32 same relu ->
# MaxPool 2 -> Conv 3x3 64 same relu -> MaxPool 2 -> Dense 10, Adam 1e-3, batch 64, 3 epochs) on the same
# MNIST IDX files, one line per seed. Needs TensorFlow (python3 -m venv V && V/bin/pip install tensorflow-cpu).
# Usage: mnist_cnn_keras_accuracy.py [SEEDS] [MNIST_DIR]   (default 2 seeds, ../shared/data/mnist)
import gzip
import os
import sys
import numpy as np
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras
def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)
d = (sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "mnist")) + "/"
xtr = idx(d + "train-images-idx3-ubyte.gz").astype("float32")[..., None] / 255
ytr = idx(d + "train-labels-idx1-ubyte.gz").astype("int32")
xte = idx(d + "t10k-images-idx3-ubyte.gz").astype("float32")[..., None] / 255
yte = idx(d + "t10k-labels-idx1-ubyte.gz").astype("int32")
for seed in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(), keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    model.fit(xtr, ytr, batch_size=64, epochs=3, shuffle=True, verbose=0)
    print(f"keras seed {seed}: test accuracy {model.evaluate(xte, yte, verbose=0)[1]:.4f}", flush=True)
