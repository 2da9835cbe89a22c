#!/usr/bin/env python3
"""The peer of bench/train_cnn.sh: configs/mnist_cnn_sp.yaml's CNN trained in PyTorch on the CPU.

  Conv2D(32, 3x3, same, ReLU) -> MaxPool 2 -> Conv2D(64, 3x3, same, ReLU) -> MaxPool 2 -> Flatten -> Dense(10),
  Adam(1e-3, betas 0.9/0.999, eps 1e-7, Keras' defaults), mean sparse cross-entropy, batch 64, 28x28x1 images.

PyTorch's own initialization (the step time does not depend on it); NCHW by default, or --channels-last
(NHWC in memory, as dtrain's tensors). Trains on the MNIST IDX files of --mnist-dir (pixels / 255, batches
in file order) or, without it, on random pixels of the same shape. --warmup steps first, then --steps timed
one by one. Needs Debian's python3-torch and python3-numpy (run with /usr/bin/python3) and an OpenBLAS
(libopenblas0-pthread); scripts/setup.sh --bench installs them.

Prints one JSON line: {"peer", "torch", "threads", "memory_format", "batch", "steps", "data", "seconds" (median
step), "examples_per_s" (at the median step), "mean_seconds", "examples_per_s_mean", "last_loss",
"peak_rss_bytes"}.

  /usr/bin/python3 bench/cnn_peer.py --threads 2 --steps 200 [--mnist-dir ../shared/data/mnist]
"""
import argparse
import gzip
import json
import os
import struct

import numpy as np
import torch
import torch.nn as nn

from peer_training import train_timed


def mnist(directory):
    with gzip.open(os.path.join(directory, "train-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    count = struct.unpack(">I", raw[4:8])[0]
    pixels = np.frombuffer(raw, np.uint8, count=count * 784, offset=16).reshape(count, 1, 28, 28)
    with gzip.open(os.path.join(directory, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, count=count, offset=8)
    return torch.from_numpy(pixels.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def build():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(7 * 7 * 64, 10))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--steps", type=int, default=200, help="timed steps")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--mnist-dir", default="", help="folder of MNIST IDX .gz files; random pixels without it")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format for the images and weights")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    net = build().to(memory_format=fmt)
    if args.mnist_dir:
        x_all, y_all = mnist(args.mnist_dir)
    else:
        x_all, y_all = torch.rand(args.batch * 50, 1, 28, 28), torch.randint(0, 10, (args.batch * 50,))
    x_all = x_all.contiguous(memory_format=fmt)
    figures = train_timed(net, x_all, y_all, args.batch, args.warmup, args.steps)
    print(json.dumps({
        "peer": "pytorch cpu", "torch": torch.__version__, "threads": args.threads,
        "memory_format": "channels_last" if args.channels_last else "nchw", "batch": args.batch,
        "steps": args.steps, "data": "mnist" if args.mnist_dir else "random", **figures}))


if __name__ == "__main__":
    main()
