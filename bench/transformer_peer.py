#!/usr/bin/env python3
"""The peer of bench/train_transformer.sh: configs/imdb_transformer.yaml's model trained in PyTorch on the CPU.

  token Embedding(20000, 32) + position Embedding(200, 32) -> self-attention, 2 heads -> Dropout(0.1) -> add ->
  LayerNorm(eps 1e-6) -> Dense(32, ReLU) -> Dense(32) -> Dropout(0.1) -> add -> LayerNorm(eps 1e-6) -> mean over
  the 200 positions -> Dropout(0.1) -> Dense(20, ReLU) -> Dropout(0.1) -> Dense(2);
  Adam(1e-3, eps 1e-7, Keras' defaults), mean sparse cross-entropy, batch 32.

The attention comes in two forms (--attention):
  keras  Keras' MultiHeadAttention sizes, as dtrain's config: query/key/value projections 32 -> 2 heads x 32,
         softmax(q k^T / sqrt(32)), dropout 0.1 on the weights, output projection 2 x 32 -> 32. The same work.
  torch  nn.MultiheadAttention(32, 2, dropout 0.1, batch_first): PyTorch's own fused layer, whose heads are
         32 / 2 = 16 wide (half the projection work of the keras form), the faster peer.
Token ids are generated as bench_train_step generates them (50 to 200 ids in [1, 20000) per review, then
padding zeros; no mask, as the config has none). --warmup steps first, then --steps timed one by one. Needs
Debian's python3-torch and python3-numpy (run with /usr/bin/python3); scripts/setup.sh --bench installs them.

Prints one JSON line: {"peer", "torch", "threads", "attention", "batch", "steps", "seconds" (median step),
"examples_per_s" (at the median step), "mean_seconds", "examples_per_s_mean", "last_loss", "peak_rss_bytes"}.

  /usr/bin/python3 bench/transformer_peer.py --threads 2 --steps 200 --attention keras
"""
import argparse
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from peer_training import train_timed

VOCABULARY, LENGTH, FEATURES, HEADS, KEY_DIM = 20000, 200, 32, 2, 32


class KerasAttention(nn.Module):
    """Keras' MultiHeadAttention(num_heads=2, key_dim=32) on self-attention."""

    def __init__(self):
        super().__init__()
        self.query = nn.Linear(FEATURES, HEADS * KEY_DIM)
        self.key = nn.Linear(FEATURES, HEADS * KEY_DIM)
        self.value = nn.Linear(FEATURES, HEADS * KEY_DIM)
        self.output = nn.Linear(HEADS * KEY_DIM, FEATURES)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        batch = x.shape[0]

        def heads(t):
            return t.view(batch, LENGTH, HEADS, KEY_DIM).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        weights = self.dropout(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(KEY_DIM), dim=-1))
        return self.output((weights @ v).transpose(1, 2).reshape(batch, LENGTH, HEADS * KEY_DIM))


class TorchAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.MultiheadAttention(FEATURES, HEADS, dropout=0.1, batch_first=True)

    def forward(self, x):
        return self.layer(x, x, x, need_weights=False)[0]


class Transformer(nn.Module):
    def __init__(self, attention):
        super().__init__()
        self.token = nn.Embedding(VOCABULARY, FEATURES)
        self.position = nn.Embedding(LENGTH, FEATURES)
        self.attention = KerasAttention() if attention == "keras" else TorchAttention()
        self.norm1 = nn.LayerNorm(FEATURES, eps=1e-6)
        self.ffn = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, FEATURES), nn.Dropout(0.1))
        self.norm2 = nn.LayerNorm(FEATURES, eps=1e-6)
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(FEATURES, 20), nn.ReLU(), nn.Dropout(0.1),
                                  nn.Linear(20, 2))
        self.register_buffer("positions", torch.arange(LENGTH))

    def forward(self, ids):
        x = self.token(ids) + self.position(self.positions)
        x = self.norm1(x + F.dropout(self.attention(x), 0.1, self.training))
        x = self.norm2(x + self.ffn(x))
        return self.head(x.mean(dim=1))


def generated(examples, length=LENGTH, vocabulary=VOCABULARY, seed=88172645463325252):
    """bench_train_step's generated_ids: xorshift64, 50 to `length` ids per review, then zeros."""
    state, mask = seed, (1 << 64) - 1

    def draw():
        nonlocal state
        state ^= (state << 13) & mask
        state ^= state >> 7
        state ^= (state << 17) & mask
        return state >> 11

    ids = torch.zeros(examples, length, dtype=torch.int64)
    for e in range(examples):
        used = min(length, 50 + draw() % length)
        ids[e, :used] = torch.tensor([1 + draw() % (vocabulary - 1) for _ in range(used)])
    return ids, torch.arange(examples) % 2


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--steps", type=int, default=200, help="timed steps")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--attention", choices=("keras", "torch"), default="keras")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    net = Transformer(args.attention)
    x_all, y_all = generated(args.batch * 20)
    figures = train_timed(net, x_all, y_all, args.batch, args.warmup, args.steps)
    print(json.dumps({
        "peer": "pytorch cpu", "torch": torch.__version__, "threads": args.threads, "attention": args.attention,
        "batch": args.batch, "steps": args.steps, "data": "generated", **figures}))


if __name__ == "__main__":
    main()
