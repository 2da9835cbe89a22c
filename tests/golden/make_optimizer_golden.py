#!/usr/bin/env python3
# Writes optimizer_keras.txt: what REAL Keras optimizers (SGD with momentum / nesterov / weight_decay, Adam
# with weight_decay, AdamW) and learning-rate schedules (CosineDecay, ExponentialDecay, PolynomialDecay
# power 1, PiecewiseConstantDecay) do to one float32 variable over several steps of fixed gradients. Run
# with TensorFlow installed (python3 -m venv V && V/bin/pip install tensorflow-cpu); dtrain only reads the
# file this writes (tests/test_optimizer_golden.cpp).
#
# Format:
#   # header
#   case NAME OPT LR MOMENTUM NESTEROV WEIGHT_DECAY BETA_1 BETA_2 EPSILON SCHEDULE P1 P2 P3 SIZE STEPS
#     SCHEDULE: constant 0 0 0 | cosine DECAY_STEPS ALPHA 0 | exponential DECAY_STEPS DECAY_RATE STAIRCASE |
#               linear DECAY_STEPS END_LEARNING_RATE 0 | step BOUNDARY VALUE0 VALUE1
#   init V0 V1 ...         the variable before the first step
#   grad V0 V1 ...         STEPS lines: the gradient of each step
#   after V0 V1 ...        STEPS lines: the variable after each step
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

S = keras.optimizers.schedules

CASES = [
    # name, optimizer, lr, momentum, nesterov, weight_decay, beta_1, beta_2, epsilon, schedule
    ("sgd_momentum", "sgd", 0.05, 0.9, False, 0.0, 0, 0, 0, ("constant", 0, 0, 0)),
    ("sgd_nesterov", "sgd", 0.05, 0.9, True, 0.0, 0, 0, 0, ("constant", 0, 0, 0)),
    ("sgd_weight_decay", "sgd", 0.1, 0.0, False, 0.05, 0, 0, 0, ("constant", 0, 0, 0)),
    ("sgd_momentum_decay_exponential", "sgd", 0.1, 0.5, False, 0.01, 0, 0, 0, ("exponential", 2, 0.5, 1)),
    ("adam_weight_decay", "adam", 0.01, 0, False, 0.1, 0.9, 0.999, 1e-7, ("constant", 0, 0, 0)),
    ("adamw", "adamw", 0.01, 0, False, 0.004, 0.9, 0.999, 1e-7, ("constant", 0, 0, 0)),
    ("adamw_cosine", "adamw", 0.02, 0, False, 0.05, 0.8, 0.99, 1e-6, ("cosine", 4, 0.1, 0)),
    ("sgd_linear", "sgd", 0.1, 0.9, True, 0.0, 0, 0, 0, ("linear", 3, 0.01, 0)),
    ("adam_step", "adam", 0.01, 0, False, 0.0, 0.9, 0.999, 1e-7, ("step", 2, 0.01, 0.001)),
]
SIZE, STEPS = 7, 6


def schedule(lr, spec):
    kind, p1, p2, p3 = spec
    if kind == "constant":
        return lr
    if kind == "cosine":
        return S.CosineDecay(lr, decay_steps=p1, alpha=p2)
    if kind == "exponential":
        return S.ExponentialDecay(lr, decay_steps=p1, decay_rate=p2, staircase=bool(p3))
    if kind == "linear":
        return S.PolynomialDecay(lr, decay_steps=p1, end_learning_rate=p2, power=1.0)
    if kind == "step":
        return S.PiecewiseConstantDecay([p1], [p2, p3])
    raise ValueError(kind)


def optimizer(kind, lr, momentum, nesterov, weight_decay, beta_1, beta_2, epsilon):
    if kind == "sgd":
        return keras.optimizers.SGD(lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay or None)
    if kind == "adam":
        return keras.optimizers.Adam(lr, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                                     weight_decay=weight_decay or None)
    return keras.optimizers.AdamW(lr, weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)


def line(name, values):
    return name + " " + " ".join(repr(float(v)) for v in np.asarray(values, dtype=np.float32).reshape(-1)) + "\n"


def main(path):
    rng = np.random.default_rng(17)
    with open(path, "w") as out:
        out.write(f"# Keras optimizers and schedules golden; tensorflow {tf.__version__}, keras {keras.__version__}\n")
        for name, kind, lr, momentum, nesterov, wd, b1, b2, eps, spec in CASES:
            init = rng.normal(size=SIZE).astype(np.float32)
            grads = [rng.normal(scale=0.5, size=SIZE).astype(np.float32) for _ in range(STEPS)]
            var = keras.Variable(init.copy(), dtype="float32")
            opt = optimizer(kind, schedule(lr, spec), momentum, nesterov, wd, b1, b2, eps)
            afters = []
            for g in grads:
                opt.apply_gradients([(tf.constant(g), var)])
                afters.append(np.array(var.numpy()))
            out.write(f"case {name} {kind} {lr!r} {momentum!r} {int(nesterov)} {wd!r} {b1!r} {b2!r} {eps!r} "
                      f"{spec[0]} {spec[1]!r} {spec[2]!r} {spec[3]!r} {SIZE} {STEPS}\n")
            out.write(line("init", init))
            for g in grads:
                out.write(line("grad", g))
            for a in afters:
                out.write(line("after", a))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "optimizer_keras.txt"))
