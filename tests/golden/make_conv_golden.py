#!/usr/bin/env python3
# Writes conv_keras.txt: what REAL Keras Conv2D / MaxPooling2D / AveragePooling2D give (NHWC, float32) on
# fixed inputs, and the gradients of sum(output * cotangent) with respect to the input, the kernel and
# the bias (tf.GradientTape). Run with TensorFlow installed (python3 -m venv V && V/bin/pip install
# tensorflow-cpu); dtrain only reads the file this writes (tests/test_conv_golden.cpp).
#
# Format:
#   # header
#   case NAME op conv2d|max_pool2d|avg_pool2d kh KH kw KW sh SH sw SW padding same|valid
#   tensor NAME RANK D0 .. D{RANK-1} V0 V1 ...    (x, kernel, bias, cotangent, y, dx, dkernel, dbias)
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

CASES = [
    # name, op, input shape NHWC, (kh, kw), (sh, sw), padding, filters
    ("conv_same_3x3", "conv2d", (2, 8, 6, 3), (3, 3), (1, 1), "same", 4),
    ("conv_valid_3x2_stride2", "conv2d", (2, 9, 8, 2), (3, 2), (2, 2), "valid", 3),
    ("conv_same_4x4_stride2", "conv2d", (1, 8, 8, 2), (4, 4), (2, 2), "same", 2),
    ("max_pool_2", "max_pool2d", (2, 8, 6, 3), (2, 2), (2, 2), "valid", 0),
    ("max_pool_3_stride2_same", "max_pool2d", (2, 7, 8, 2), (3, 3), (2, 2), "same", 0),
    ("avg_pool_2", "avg_pool2d", (2, 8, 6, 3), (2, 2), (2, 2), "valid", 0),
    ("avg_pool_3_stride2_same", "avg_pool2d", (2, 7, 8, 2), (3, 3), (2, 2), "same", 0),
]


def write_tensor(out, name, value):
    value = np.asarray(value, dtype=np.float32)
    values = " ".join(repr(float(v)) for v in value.reshape(-1))
    out.write(f"tensor {name} {value.ndim} {' '.join(str(d) for d in value.shape)} {values}\n")


def main(path):
    rng = np.random.default_rng(7)
    with open(path, "w") as out:
        out.write(f"# Keras Conv2D / pooling golden; tensorflow {tf.__version__}, keras {keras.__version__}\n")
        for name, op, shape, kernel, strides, padding, filters in CASES:
            x = tf.constant(rng.uniform(-1, 1, size=shape).astype(np.float32))
            if op == "conv2d":
                layer = keras.layers.Conv2D(filters, kernel, strides=strides, padding=padding)
                layer.build(shape)
                layer.kernel.assign(rng.uniform(-1, 1, size=layer.kernel.shape).astype(np.float32))
                layer.bias.assign(rng.uniform(-1, 1, size=layer.bias.shape).astype(np.float32))
            elif op == "max_pool2d":
                layer = keras.layers.MaxPooling2D(kernel, strides=strides, padding=padding)
            else:
                layer = keras.layers.AveragePooling2D(kernel, strides=strides, padding=padding)
            y = layer(x)
            cotangent = tf.constant(rng.uniform(-1, 1, size=y.shape).astype(np.float32))
            variables = [x] + ([layer.kernel, layer.bias] if op == "conv2d" else [])
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x)
                loss = tf.reduce_sum(y * cotangent)
            grads = tape.gradient(loss, variables)
            out.write(f"case {name} op {op} kh {kernel[0]} kw {kernel[1]} sh {strides[0]} sw {strides[1]} "
                      f"padding {padding}\n")
            write_tensor(out, "x", x)
            if op == "conv2d":
                write_tensor(out, "kernel", layer.kernel.numpy())
                write_tensor(out, "bias", layer.bias.numpy())
            write_tensor(out, "cotangent", cotangent)
            write_tensor(out, "y", y)
            write_tensor(out, "dx", grads[0])
            if op == "conv2d":
                write_tensor(out, "dkernel", grads[1])
                write_tensor(out, "dbias", grads[2])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_keras.txt"))
