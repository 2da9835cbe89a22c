#!/usr/bin/env python3
# Writes binary_crossentropy_keras.txt: REAL Keras' BinaryCrossentropy (from_logits=False, the default: the
# mean over the batch of -(z log(q) + (1 - z) log(1 - q)), q the probability clipped to [1e-7, 1 - 1e-7]) and
# its gradient, on probabilities given directly and on probabilities a sigmoid makes of logits (the
# gradient then with respect to the logits). Probabilities outside the clip range are among them. Run with
# TensorFlow installed (python3 -m venv V && V/bin/pip install tensorflow-cpu); dtrain only reads the file
# this writes (tests/test_binary_head.cpp).
#
# Format:
#   # header
#   tensor NAME RANK D0 .. V0 V1 ...   NAME: probabilities, labels (the targets, [N, 1] of 0 and 1), loss (the
#                                      mean, rank 0), per_example ([N]), grad (d loss / d probabilities);
#                                      logits, sigmoid_loss, sigmoid_grad (d loss / d logits)
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def tensor_line(name, values):
    values = np.asarray(values, dtype=np.float32)
    dims = " ".join(str(d) for d in values.shape)
    return f"tensor {name} {values.ndim}{' ' + dims if dims else ''} " + " ".join(repr(float(v)) for v in values.ravel())


def main(out_path):
    rng = np.random.default_rng(7)
    # Inside (0, 1), at its ends, beyond the clip range on both sides, and exactly at 0.5.
    p = np.concatenate([rng.uniform(0.0, 1.0, 10), [0.0, 1.0, 1e-9, 1.0 - 1e-9, 5e-8, 0.5, 0.999, 0.001]])
    p = p.astype(np.float32).reshape(-1, 1)
    z = np.concatenate([rng.integers(0, 2, 10), [1, 0, 0, 1, 1, 0, 1, 0]]).astype(np.float32).reshape(-1, 1)
    loss_fn = keras.losses.BinaryCrossentropy()  # from_logits=False, mean over the batch
    probabilities = tf.Variable(p)
    with tf.GradientTape() as tape:
        loss = loss_fn(z, probabilities)
    grad = tape.gradient(loss, probabilities)
    per_example = keras.losses.binary_crossentropy(z, p)

    x = np.concatenate([rng.normal(0.0, 3.0, 10), [20.0, -20.0, 17.0, -17.0, 0.0, 0.3, -0.3, 5.0]])
    x = x.astype(np.float32).reshape(-1, 1)
    logits = tf.Variable(x)
    with tf.GradientTape() as tape:
        sigmoid_loss = loss_fn(z, tf.math.sigmoid(logits))  # a plain tensor: no cached logits, the clipped form
    sigmoid_grad = tape.gradient(sigmoid_loss, logits)

    lines = [f"# Keras BinaryCrossentropy golden; tensorflow {tf.__version__}, keras {keras.__version__}",
             tensor_line("probabilities", p), tensor_line("labels", z), tensor_line("loss", np.float32(loss)),
             tensor_line("per_example", per_example), tensor_line("grad", grad),
             tensor_line("logits", x), tensor_line("sigmoid_loss", np.float32(sigmoid_loss)),
             tensor_line("sigmoid_grad", sigmoid_grad)]
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "binary_crossentropy_keras.txt"))
