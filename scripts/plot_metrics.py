#!/usr/bin/env python3
"""Draws the loss and accuracy curves of a run (RUN_DIR/metrics.jsonl) to RUN_DIR/metrics.png.

Per step (the "train_steps" rows, every train.log_every steps), with each finished epoch's train mean and
each test and eval result as points, the epochs as integer ticks along the top, and a dashed line where
the run started or was resumed, labelled with its mesh: train DP -> resume MP -> resume SP is one curve.
When several `dtrain train` runs appended to the file, the last one (with the resumes after it) is drawn.
Any Python with matplotlib runs it (pip install matplotlib).

  scripts/plot_metrics.py RUN_DIR [--out FILE]
"""
import argparse
import json
import os
import sys


def number(value):
    return float("nan") if value is None else float(value)


def last_run(rows):
    """The rows of the last run: from its "run" start row on; for files written before those rows, from
    where a train row's epoch does not follow the one before."""
    starts = [i for i, r in enumerate(rows) if r.get("split") == "run" and r.get("event") == "start"]
    if starts:
        return rows[starts[-1]:]
    start, last_epoch = 0, None
    for i, row in enumerate(rows):
        if row.get("split") != "train":
            continue
        if last_epoch is not None and row["epoch"] <= last_epoch:
            start = i
        last_epoch = row["epoch"]
    return rows[start:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(f"plot_metrics: {sys.executable} has no matplotlib: pip install matplotlib")

    path = os.path.join(args.run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        sys.exit(f"plot_metrics: no {path} (run dtrain train with --run-dir {args.run_dir} first)")
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    sys.exit(f"plot_metrics: {path}:{n} is not JSON: {e}")
    if not rows:
        sys.exit(f"plot_metrics: {path} is empty")
    rows = last_run(rows)
    runs = [r for r in rows if r.get("split") == "run"]
    # Files written before the "run" rows count epochs from 0.
    epoch_base = 0 if runs else 1

    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = (("train_steps", "-", "train (per steps)"), ("train", "o", "train (epoch)"),
              ("test", "s", "test"), ("eval", "D", "eval"))
    drawn = 0
    for split, style, label in series:
        points = [r for r in rows if r.get("split") == split and "step" in r]
        if not points:
            continue
        if split == "eval":
            label = "eval (" + ", ".join(sorted({r.get("eval_split", "?") for r in points})) + ")"
        steps = [r["step"] for r in points]
        loss_axis.plot(steps, [number(r.get("loss")) for r in points], style, label=label, markersize=5)
        accuracy_axis.plot(steps, [number(r.get("accuracy")) for r in points], style, label=label, markersize=5)
        drawn += len(points)
    if not drawn:
        sys.exit(f"plot_metrics: {path} holds no loss or accuracy to draw")

    # Integer epochs along the top: each finished epoch at the step it ended.
    epoch_ends = {}
    for r in rows:
        if r.get("split") == "train" and r.get("epoch") is not None:
            epoch_ends[int(r["epoch"]) + epoch_base] = r["step"]
    for axis, title in ((loss_axis, "loss per example"), (accuracy_axis, "accuracy")):
        axis.set_xlabel("step")
        axis.set_title(title)
        axis.grid(alpha=0.3)
        for i, run in enumerate(runs):
            axis.axvline(run.get("step", 0), color="gray", linestyle="--", linewidth=1)
            axis.annotate(("" if run.get("event") == "start" else "resumed on ") + str(run.get("mesh", "?")),
                          xy=(run.get("step", 0), 1), xycoords=("data", "axes fraction"), xytext=(3, -4 - 11 * (i % 3)),
                          textcoords="offset points", fontsize=7, color="dimgray", va="top")
        axis.legend(loc="center right", fontsize=8)
        if epoch_ends:
            top = axis.twiny()
            top.set_xlim(axis.get_xlim())
            top.set_xticks(list(epoch_ends.values()))
            top.set_xticklabels([str(e) for e in epoch_ends])
            top.set_xlabel("epoch (at its end)", fontsize=8)
            top.tick_params(labelsize=8)
    name = os.path.basename(os.path.abspath(args.run_dir))
    run_id = next((r.get("run_id") for r in runs if r.get("run_id")), None)
    figure.suptitle(f"{name}" + (f" (run {run_id})" if run_id else ""))
    figure.tight_layout()
    out = args.out or os.path.join(args.run_dir, "metrics.png")
    figure.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
