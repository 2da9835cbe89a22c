#!/usr/bin/env python3
"""Draws the loss and accuracy curves of a run dir (RUN_DIR/metrics.jsonl) to RUN_DIR/metrics.png.

Per step (the "train_steps" rows, every train.log_every steps), with each finished epoch's train mean, each
validation (Keras' val_loss / val_accuracy), test and eval result as points; the epochs as integer ticks
along the top; a dashed line where a run started or was resumed, labelled with its mesh (orange, with its cause
and hosts, where `dtrain elastic` restarted it after losing a host; train DP -> resume
MP -> resume SP is one curve); a star on the validation whose checkpoint checkpoint.keep_best kept, and a
dotted line where early stopping ended the run. Every run that appended to the file (one config run with
several checkpoint dirs, say) is a curve of its own colour, named by its run id; resumes continue their run.
Any Python with matplotlib runs it (pip install matplotlib).

  scripts/plot_metrics.py RUN_DIR [--out FILE]
"""
import argparse
import json
import os
import sys


def number(value):
    return float("nan") if value is None else float(value)


def by_run(rows):
    """The rows grouped by the run they belong to, in order of first appearance: a row belongs to the run of
    the last "run" row before it (files written before those rows are one run, "?")."""
    runs, current = {}, "?"
    for row in rows:
        if row.get("split") == "run" and row.get("run_id"):
            current = row["run_id"]
        runs.setdefault(current, []).append(row)
    return runs


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
    runs = by_run(rows)
    starts = [r for r in rows if r.get("split") == "run" and r.get("event") in ("start", "resume")]
    # Files written before the "run" rows count epochs from 0.
    epoch_base = 0 if starts else 1

    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(13, 5))
    series = (("train_steps", "-", "train"), ("train", "o", "train (epoch)"), ("validation", "^", "validation"),
              ("test", "s", "test"), ("eval", "D", "eval"))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    several = len(runs) > 1
    drawn = 0
    for index, (run_id, run_rows) in enumerate(runs.items()):
        colour = colours[index % len(colours)] if several else None
        prefix = f"run {run_id[:8]}: " if several else ""
        for split, style, label in series:
            points = [r for r in run_rows if r.get("split") == split and "step" in r]
            if not points:
                continue
            if split == "eval":
                label = "eval (" + ", ".join(sorted({r.get("eval_split", "?") for r in points})) + ")"
            # Without several runs each series has its own colour; with several, each run has one.
            kwargs = {"color": colour} if colour else {}
            steps = [r["step"] for r in points]
            for axis, key in ((loss_axis, "loss"), (accuracy_axis, "accuracy")):
                axis.plot(steps, [number(r.get(key)) for r in points], style, label=prefix + label, markersize=5,
                          **kwargs)
            drawn += len(points)
        # The run's end: the best (keep_best) validation starred, an early stop as a dotted line.
        for end in (r for r in run_rows if r.get("split") == "run" and r.get("event") == "end"):
            best_step = end.get("best_step")
            best = [r for r in run_rows if r.get("split") == "validation" and r.get("step") == best_step]
            if best:
                for axis, key in ((loss_axis, "loss"), (accuracy_axis, "accuracy")):
                    axis.plot([best_step], [number(best[-1].get(key))], "*", markersize=14, color="gold",
                              markeredgecolor="black", label=f"{prefix}best ({end.get('monitor')}, keep_best)")
            if end.get("stopped") == "early_stopping":
                for axis in (loss_axis, accuracy_axis):
                    axis.axvline(end.get("step", 0), color="crimson", linestyle=":", linewidth=1.5,
                                 label=f"{prefix}early stop at step {end.get('step')}")
    if not drawn:
        sys.exit(f"plot_metrics: {path} holds no loss or accuracy to draw")

    # Integer epochs along the top (of a single run: several runs' epochs would collide).
    epoch_ends = {}
    if not several:
        for r in rows:
            if r.get("split") == "train" and r.get("epoch") is not None:
                epoch_ends[int(r["epoch"]) + epoch_base] = r["step"]
    for axis, title in ((loss_axis, "loss per example"), (accuracy_axis, "accuracy")):
        axis.set_xlabel("step")
        axis.set_title(title)
        axis.grid(alpha=0.3)
        for i, run in enumerate(starts):
            restarted = run.get("restart") is not None  # dtrain elastic's restart: its cause and hosts
            axis.axvline(run.get("step", 0), color="darkorange" if restarted else "gray", linestyle="--", linewidth=1)
            text = ("" if run.get("event") == "start" else "resumed on ") + str(run.get("mesh", "?"))
            if restarted:
                cause = str(run.get("cause", "?")).split(" (processes")[0]
                text = f"restart {run['restart']} ({cause}) on {len(run.get('hosts', [])) or 1} host(s): {run.get('mesh', '?')}"
            if several:
                text = f"run {str(run.get('run_id', '?'))[:8]}: " + text
            # Clipped to its own panel: a long mesh name must not run into the other one.
            axis.annotate(text, xy=(run.get("step", 0), 1), xycoords=("data", "axes fraction"),
                          xytext=(3, -4 - 11 * (i % 3)), textcoords="offset points", fontsize=7, color="dimgray",
                          va="top", annotation_clip=True, clip_on=True)
        handles, labels = axis.get_legend_handles_labels()
        unique = dict(zip(labels, handles))  # one entry per label (each axvline of a run adds one)
        axis.legend(unique.values(), unique.keys(), loc="best", fontsize=7)
        if epoch_ends:
            top = axis.twiny()
            top.set_xlim(axis.get_xlim())
            top.set_xticks(list(epoch_ends.values()))
            top.set_xticklabels([str(e) for e in epoch_ends])
            top.set_xlabel("epoch (at its end)", fontsize=8)
            top.tick_params(labelsize=8)
    name = os.path.basename(os.path.abspath(args.run_dir))
    ids = [run_id for run_id in runs if run_id != "?"]
    figure.suptitle(name + (f" (run {ids[0]})" if len(ids) == 1 else f" ({len(ids)} runs)" if ids else ""))
    figure.tight_layout()
    out = args.out or os.path.join(args.run_dir, "metrics.png")
    figure.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
