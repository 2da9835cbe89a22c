#!/usr/bin/env python3
# Writes graph_keras.txt: what REAL Keras Functional models with skip connections give (float32) on fixed
# inputs and weights, and the gradients of sum(output * cotangent) with respect to the input and every
# variable (tf.GradientTape). Run with TensorFlow installed (/work/tfvenv/bin/python); dtrain only reads
# the file this writes (tests/test_graph_golden.cpp).
#
# Cases:
#   dense_residual: x [4, 6] -> d1 Dense(6, tanh) -> d2 Dense(6) -> skip Add([x, d2]); side Dense(2)(x);
#                   cat Concatenate([skip, side]) -> head Dense(3)
#   conv_residual:  x [2, 6, 6, 3] -> c1 Conv2D(3, 3, same, tanh) -> c2 Conv2D(3, 3, same) -> s Add([x, c2]);
#                   m Multiply([s, c1]); d Subtract([m, x]); out Average([d, s])
# Format:
#   # header
#   case NAME
#   tensor NAME RANK D0 .. D{RANK-1} V0 V1 ...   (x, each variable by its dtrain path LAYER/kernel, cotangent,
#                                                 y, then grad:x and grad:PATH for each)
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def dense_residual():
    x = keras.Input((6,), batch_size=4)
    d1 = keras.layers.Dense(6, activation="tanh", name="d1")(x)
    d2 = keras.layers.Dense(6, name="d2")(d1)
    skip = keras.layers.Add(name="skip")([x, d2])
    side = keras.layers.Dense(2, name="side")(x)
    cat = keras.layers.Concatenate(name="cat")([skip, side])
    head = keras.layers.Dense(3, name="head")(cat)
    return keras.Model(x, head), (4, 6)


def conv_residual():
    x = keras.Input((6, 6, 3), batch_size=2)
    c1 = keras.layers.Conv2D(3, 3, padding="same", activation="tanh", name="c1")(x)
    c2 = keras.layers.Conv2D(3, 3, padding="same", name="c2")(c1)
    s = keras.layers.Add(name="s")([x, c2])
    m = keras.layers.Multiply(name="m")([s, c1])
    d = keras.layers.Subtract(name="d")([m, x])
    out = keras.layers.Average(name="out")([d, s])
    return keras.Model(x, out), (2, 6, 6, 3)


def write_tensor(out, name, value):
    value = np.asarray(value, dtype=np.float32)
    values = " ".join(repr(float(v)) for v in value.reshape(-1))
    out.write(f"tensor {name} {value.ndim} {' '.join(str(d) for d in value.shape)} {values}\n")


def variable_path(variable):
    # Keras 3 paths read "d1/kernel"; the bias and kernel names are dtrain's too.
    return variable.path


def main(path):
    rng = np.random.default_rng(11)
    with open(path, "w") as out:
        out.write(f"# Keras Functional residual golden; tensorflow {tf.__version__}, keras {keras.__version__}\n")
        for name, make in [("dense_residual", dense_residual), ("conv_residual", conv_residual)]:
            model, shape = make()
            for variable in model.trainable_variables:
                variable.assign(rng.uniform(-1, 1, size=variable.shape).astype(np.float32))
            x = tf.constant(rng.uniform(-1, 1, size=shape).astype(np.float32))
            y = model(x)
            cotangent = tf.constant(rng.uniform(-1, 1, size=y.shape).astype(np.float32))
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = model(x)
                loss = tf.reduce_sum(y * cotangent)
            variables = list(model.trainable_variables)
            grads = tape.gradient(loss, [x] + variables)
            out.write(f"case {name}\n")
            write_tensor(out, "x", x)
            for variable in variables:
                write_tensor(out, variable_path(variable), variable.numpy())
            write_tensor(out, "cotangent", cotangent)
            write_tensor(out, "y", y)
            write_tensor(out, "grad:x", grads[0])
            for variable, grad in zip(variables, grads[1:]):
                write_tensor(out, "grad:" + variable_path(variable), grad)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "graph_keras.txt"))
