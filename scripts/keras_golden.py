#!/usr/bin/env python3
# Writes tests/golden/keras_mnist_mlp_losses.txt: the 50 per-step training losses that REAL Keras gives for
# configs/mnist_keras_dp.yaml's model (Dense 128 relu -> Dense 10, Adam(0.01), SparseCategoricalCrossentropy
# from logits, mean over the batch of 128) when it starts from dtrain's exact initial weights and takes
# dtrain's exact batches. tests/test_keras_golden.cpp checks dtrain against the file; dtrain never needs
# TensorFlow to build or test, only this script does:
#
#   python3 -m venv V && V/bin/pip install tensorflow-cpu numpy
#   DTRAIN_KERAS_GOLDEN_EXPORT=/tmp/kg build/dtrain_tests -tc='*mnist_keras_dp model*'   # data, initial weights, orders
#   V/bin/python scripts/keras_golden.py /tmp/kg tests/golden/keras_mnist_mlp_losses.txt
#
# The export (raw little-endian, row-major): x.f32 [512, 784], y.i32 [512], order.i64 [13, 512] (batch k of
# an epoch is entries 128k..128k+127), dense1_kernel.f32 [784, 128], dense1_bias.f32, dense2_kernel.f32
# [128, 10], dense2_bias.f32. Output: one loss per line, "%.9g".
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["CUDA_VISIBLE_DEVICES"] = ""
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

EXAMPLES, FEATURES, HIDDEN, CLASSES, BATCH, STEPS = 512, 784, 128, 10, 128, 50

src, out = sys.argv[1], sys.argv[2]
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)


def load(name, dtype, shape):
    return np.fromfile(os.path.join(src, name), dtype).reshape(shape)  # reshape fails on a wrong size


x = load("x.f32", np.float32, (EXAMPLES, FEATURES))
y = load("y.i32", np.int32, (EXAMPLES,)).astype(np.int64)
orders = load("order.i64", np.int64, (-1, EXAMPLES))
weights = [load("dense1_kernel.f32", np.float32, (FEATURES, HIDDEN)), load("dense1_bias.f32", np.float32, (HIDDEN,)),
           load("dense2_kernel.f32", np.float32, (HIDDEN, CLASSES)), load("dense2_bias.f32", np.float32, (CLASSES,))]

model = tf.keras.Sequential([tf.keras.Input((FEATURES,)), tf.keras.layers.Dense(HIDDEN, activation="relu"),
                             tf.keras.layers.Dense(CLASSES)])
model.set_weights(weights)
optimizer = tf.keras.optimizers.Adam(learning_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-7)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # mean over the batch


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


per_epoch = EXAMPLES // BATCH
losses = []
for step in range(STEPS):
    ids = orders[step // per_epoch, (step % per_epoch) * BATCH:(step % per_epoch + 1) * BATCH]
    losses.append(float(train_step(tf.constant(x[ids]), tf.constant(y[ids]))))
with open(out, "w") as f:
    f.writelines(f"{loss:.9g}\n" for loss in losses)
print(f"{out}: {STEPS} losses, first {losses[0]:.6f}, last {losses[-1]:.6f} (TensorFlow {tf.__version__})")
