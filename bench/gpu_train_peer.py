#!/usr/bin/env python3
"""The peer of bench/gpu_train.sh: the same training steps in PyTorch eager (or, with --compile, the model
through torch.compile; the warm-up steps compile it) on one CUDA GPU.

  mnist : configs/mnist_core_dp.yaml, 784-700-500-10 ReLU MLP, Xavier-uniform weights, Adam(1e-3, betas
          0.9/0.999, eps 1e-7), mean cross-entropy, batch 128
  imdb  : configs/imdb_dp.yaml, 1200-48 ReLU, BatchNorm over the batch without parameters (eps 1e-5), 48-2,
          SGD(1e-2), summed cross-entropy, batch 64, on TF-IDF-like rows (8% non-zero, as the real IMDB
          vectors and bench_train_step's generated ones) as dense float tensors

FP32 with TF32 off (as dtrain's cuBLAS calls); with --bf16, Keras' mixed_bfloat16 as PyTorch spells it: the
forward and the loss under torch.autocast(bfloat16), float32 weights and optimizer (dtrain's train.precision: bf16). The data set stays in pinned host memory and each step's
batch is uploaded with a non-blocking copy (dtrain uploads from pinned host memory too); the loss is read
back once, after the timed steps; the timer stops after torch.cuda.synchronize(). With --mnist-dir the
MNIST steps train on the first 5,000 images of the IDX files (the config's train[:5000]), else on random
pixels (the step time does not depend on the values).

Prints one JSON line: {"peer": "pytorch eager cuda" (or "pytorch compile cuda"), "model", "device", "batch", "steps", "seconds",
"examples_per_s", "last_loss", "torch"}; examples_per_s is over all timed steps (a mean).
Without a CUDA device it prints {"skipped": "no GPU"} and exits 0.

  python3 bench/gpu_train_peer.py --model mnist --steps 300 [--mnist-dir ../shared/data/mnist] [--compile] [--bf16]
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time


def mnist_images(directory, examples):
    import numpy as np

    with gzip.open(os.path.join(directory, "train-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    count = min(struct.unpack(">I", raw[4:8])[0], examples)
    pixels = np.frombuffer(raw, np.uint8, count=count * 784, offset=16).reshape(count, 784)
    with gzip.open(os.path.join(directory, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, count=count, offset=8)
    return pixels.astype(np.float32) / 255.0, labels.astype(np.int64)


def build(torch, model):
    nn = torch.nn

    class BatchNormNoParams(nn.Module):  # the config's {batch_norm: {}}: statistics of the global batch
        def forward(self, x):
            mean = x.mean(0)
            var = x.var(0, unbiased=False)
            return (x - mean) / torch.sqrt(var + 1e-5)

    if model == "mnist":
        net = nn.Sequential(nn.Linear(784, 700), nn.ReLU(), nn.Linear(700, 500), nn.ReLU(), nn.Linear(500, 10))
        for layer in net:
            if isinstance(layer, nn.Linear):
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)
        optimizer = lambda params: torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
        return net, optimizer, 128, 784, 10, "mean"
    net = nn.Sequential(nn.Linear(1200, 48), nn.ReLU(), BatchNormNoParams(), nn.Linear(48, 2))
    for layer in net:
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight)
            nn.init.zeros_(layer.bias)
    return net, (lambda params: torch.optim.SGD(params, lr=1e-2)), 64, 1200, 2, "sum"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mnist", "imdb"], default="mnist")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--mnist-dir", default="")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (its warm-up compiles)")
    parser.add_argument("--bf16", action="store_true",
                        help="mixed precision: the forward and loss under torch.autocast(bfloat16), float32 weights")
    args = parser.parse_args()
    peer = ("pytorch compile cuda" if args.compile else "pytorch eager cuda") + (" bf16 autocast" if args.bf16 else "")

    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print(json.dumps({"peer": peer, "model": args.model, "skipped": "no GPU"}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda:0")
    torch.manual_seed(22)
    net, make_optimizer, batch, features, classes, reduction = build(torch, args.model)
    net = net.to(device)
    optimizer = make_optimizer(net.parameters())
    forward = torch.compile(net) if args.compile else net

    examples = batch * 20  # bench_train_step's generated set: 20 batches
    data = "generated"
    if args.model == "mnist" and args.mnist_dir:
        pixels, labels = mnist_images(args.mnist_dir, 5000)
        x_all, y_all = torch.from_numpy(pixels), torch.from_numpy(labels)
        data = "real"
    elif args.model == "mnist":
        x_all, y_all = torch.rand(examples, features), torch.randint(0, classes, (examples,))
    else:
        x_all = torch.rand(examples, features) * 4.0 * (torch.rand(examples, features) < 0.08)
        y_all = torch.randint(0, classes, (examples,))
    x_all, y_all = x_all.pin_memory(), y_all.pin_memory()
    batches = x_all.shape[0] // batch

    def step(i):
        j = i % batches
        xb = x_all[j * batch:(j + 1) * batch].to(device, non_blocking=True)
        yb = y_all[j * batch:(j + 1) * batch].to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):
            loss = F.cross_entropy(forward(xb), yb, reduction=reduction)
        loss.backward()
        optimizer.step()
        return loss

    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(args.steps):
        loss = step(i)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"peer": peer, "model": args.model, "device": torch.cuda.get_device_name(device),
                      "torch": torch.__version__, "data": data, "batch": batch, "steps": args.steps,
                      "precision": "bf16" if args.bf16 else "float32",
                      "seconds": round(seconds, 6), "examples_per_s": round(args.steps * batch / seconds, 1),
                      "last_loss": float(loss)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
