#!/usr/bin/env python3
"""Draws the loss and accuracy curves of a run (RUN_DIR/metrics.jsonl) to RUN_DIR/metrics.png, per epoch,
train and test, as the DTensor Core tutorial plots them. Needs Debian's python3-matplotlib.
When several `dtrain train` runs appended to the file, the last one (with the resumes after it) is drawn.

  scripts/plot_metrics.py RUN_DIR [--out FILE]
"""
import argparse
import json
import os
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    path = os.path.join(args.run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        sys.exit(f"plot_metrics: no {path} (run dtrain train with --run-dir {args.run_dir} first)")
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        sys.exit(f"plot_metrics: {path} is empty")
    # A run starts again where a train row's epoch does not follow the one before (resumes continue it).
    start, last_epoch = 0, None
    for i, row in enumerate(rows):
        if row["split"] != "train":
            continue
        if last_epoch is not None and row["epoch"] <= last_epoch:
            start = i
        last_epoch = row["epoch"]
    rows = rows[start:]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_metrics: needs matplotlib (apt-get install python3-matplotlib)")

    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for split, style in (("train", "-o"), ("test", "--s")):
        points = [r for r in rows if r["split"] == split]
        if not points:
            continue
        epochs = [r["epoch"] + 1 for r in points]
        loss_axis.plot(epochs, [r["loss"] for r in points], style, label=split)
        accuracy_axis.plot(epochs, [r["accuracy"] for r in points], style, label=split)
    for axis, title in ((loss_axis, "loss per example"), (accuracy_axis, "accuracy")):
        axis.set_xlabel("epoch")
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    out = args.out or os.path.join(args.run_dir, "metrics.png")
    figure.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
