#!/usr/bin/env python3
"""The peer of configs/imdb_embedding.yaml in bench/train_vs_pytorch.sh: Keras' text classification network on
token ids trained in PyTorch on the CPU.

  Embedding(10000, 16) -> mean over the 500 positions, the padding included (Keras with no mask) ->
  Dropout(0.2) -> Dense(2); Adam(2e-3, betas 0.9/0.999, eps 1e-7), mean sparse cross-entropy, batch 64.

Token ids are generated as bench_train_step generates them (50 to 500 ids in [1, 10000) per review, then padding
zeros). PyTorch's own initialization; the table's gradient is dense, as Keras' Adam updates the whole table.
--warmup steps first, then --steps timed one by one. Needs Debian's python3-torch and python3-numpy (run with
/usr/bin/python3); scripts/setup.sh --bench installs them.

Prints one JSON line: {"peer", "torch", "threads", "batch", "steps", "data", "seconds" (median step),
"examples_per_s" (at the median step), "mean_seconds", "examples_per_s_mean", "last_loss", "peak_rss_bytes"}.

  /usr/bin/python3 bench/embedding_peer.py --threads 2 --steps 300
"""
import argparse
import json

import torch
import torch.nn as nn

from peer_training import train_timed
from transformer_peer import generated

VOCABULARY, LENGTH = 10000, 500


class EmbeddingClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, 16)
        self.dropout = nn.Dropout(0.2)
        self.dense = nn.Linear(16, 2)

    def forward(self, ids):
        return self.dense(self.dropout(self.embedding(ids).mean(1)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--steps", type=int, default=300, help="timed steps")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    net = EmbeddingClassifier()
    x_all, y_all = generated(args.batch * 20, LENGTH, VOCABULARY)
    optimizer = torch.optim.Adam(net.parameters(), lr=2e-3, betas=(0.9, 0.999), eps=1e-7)
    figures = train_timed(net, x_all, y_all, args.batch, args.warmup, args.steps, optimizer)
    print(json.dumps({"peer": "pytorch cpu", "torch": torch.__version__, "threads": args.threads,
                      "batch": args.batch, "steps": args.steps, "data": "generated", **figures}))


if __name__ == "__main__":
    main()
