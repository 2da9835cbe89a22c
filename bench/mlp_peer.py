#!/usr/bin/env python3
"""The MLP peers of bench/train_vs_pytorch.sh: configs/mnist_core_dp.yaml's and configs/imdb_dp.yaml's models
trained in PyTorch on the CPU (the models of ../shared/bench/torch_mlp.py, timed step by step as the other peers).

  mnist  Dense(700, ReLU) -> Dense(500, ReLU) -> Dense(10) on 784 pixels; Adam(1e-3, betas 0.9/0.999, eps 1e-7,
         the config's), mean sparse cross-entropy, batch 128
  imdb   Dense(48, ReLU) -> BatchNorm over the batch without parameters (eps 1e-5) -> Dense(2) on 1200 TF-IDF
         values; SGD(1e-2), summed sparse cross-entropy, batch 64

PyTorch's own initialization (the step time does not depend on it). mnist trains on the MNIST IDX files of
--mnist-dir (pixels / 255, batches in file order) or, without it, random pixels; imdb on random rows with 8% of
the values non-zero, as TF-IDF rows have (PyTorch's dense layers take the same time whatever the values).
--warmup steps first, then --steps timed one by one. Needs Debian's python3-torch and python3-numpy (run with
/usr/bin/python3) and an OpenBLAS (libopenblas0-pthread); scripts/setup.sh --bench installs them.

Prints one JSON line: {"peer", "torch", "threads", "model", "batch", "steps", "data", "seconds" (median step),
"examples_per_s" (at the median step), "mean_seconds", "examples_per_s_mean", "last_loss", "peak_rss_bytes"}.

  /usr/bin/python3 bench/mlp_peer.py --model mnist --threads 2 --steps 300 [--mnist-dir ../shared/data/mnist]
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
    pixels = np.frombuffer(raw, np.uint8, count=count * 784, offset=16).reshape(count, 784)
    with gzip.open(os.path.join(directory, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, count=count, offset=8)
    return torch.from_numpy(pixels.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


class BatchNormNoParams(nn.Module):
    def forward(self, x):
        mean = x.mean(0)
        var = x.var(0, unbiased=False)
        return (x - mean) / torch.sqrt(var + 1e-5)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("mnist", "imdb"), required=True)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--steps", type=int, default=300, help="timed steps")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--mnist-dir", default="", help="folder of MNIST IDX .gz files; random pixels without it")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    if args.model == "mnist":
        batch, data = 128, "mnist" if args.mnist_dir else "random"
        net = nn.Sequential(nn.Linear(784, 700), nn.ReLU(), nn.Linear(700, 500), nn.ReLU(), nn.Linear(500, 10))
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
        reduction = "mean"
        if args.mnist_dir:
            x_all, y_all = mnist(args.mnist_dir)
        else:
            x_all, y_all = torch.rand(batch * 50, 784), torch.randint(0, 10, (batch * 50,))
    else:
        batch, data = 64, "random"
        net = nn.Sequential(nn.Linear(1200, 48), nn.ReLU(), BatchNormNoParams(), nn.Linear(48, 2))
        optimizer = torch.optim.SGD(net.parameters(), lr=1e-2)
        reduction = "sum"
        x_all = torch.rand(batch * 50, 1200) * (torch.rand(batch * 50, 1200) < 0.08)
        y_all = torch.randint(0, 2, (batch * 50,))
    figures = train_timed(net, x_all, y_all, batch, args.warmup, args.steps, optimizer, reduction)
    print(json.dumps({"peer": "pytorch cpu", "torch": torch.__version__, "threads": args.threads,
                      "model": args.model, "batch": batch, "steps": args.steps, "data": data, **figures}))


if __name__ == "__main__":
    main()
