#!/usr/bin/env python3
"""Summary of a dtrain step timeline (train.profile / --profile: RUN_DIR/trace/process-P.trace.json).

Usage: scripts/plot_trace.py TRACE.json [OUT.png]

Prints, per device track, the time of the traced steps by category: compute ops (kernel calls), collectives,
data wait, checkpoint, other (the rest of the step: host code between the events); a GPU device's kernels track
(CUDA events) is compute ops alone. An event directly inside a
step counts whole for its category: the collectives of a checkpoint save are the save's time, the copies of a
batch read the read's. Draws the same table as stacked horizontal bars (OUT.png, default TRACE.png). Needs matplotlib (Debian's /usr/bin/python3 has it).
"""
import json
import sys

CATEGORIES = [("kernel", "compute ops"), ("collective", "collectives"), ("data", "data wait"),
              ("checkpoint", "checkpoint"), ("step", "other")]
COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#b0b0b0"]


def device_tracks(trace):
    """{(pid, tid): name} of the tracks named 'device ...', and {(pid, tid): [events]} of their complete events."""
    names = {}
    for event in trace["traceEvents"]:
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            name = event["args"]["name"]
            if name.startswith("device"):
                names[(event["pid"], event["tid"])] = name
    events = {key: [] for key in names}
    for event in trace["traceEvents"]:
        key = (event.get("pid"), event.get("tid"))
        if event.get("ph") == "X" and key in events:
            events[key].append(event)
    return names, events


def category_times(events):
    """Microseconds per category on one track. An event directly inside a step counts whole for its own category
    (a checkpoint save's collectives are the save's time, a batch read's copies the read's); the rest of each step
    is "other"."""
    totals = {category: 0.0 for category, _ in CATEGORIES}
    ordered = sorted(events, key=lambda e: (float(e["ts"]), -float(e["dur"])))
    stack = []  # ends of the events that hold the current one
    for event in ordered:
        start, duration = float(event["ts"]), float(event["dur"])
        while stack and stack[-1][0] <= start:
            stack.pop()
        category = event.get("cat", "step")
        outer = [entry for entry in stack if entry[1] != "step"]
        if category == "step":
            totals["step"] += duration
        elif not outer:
            totals[category] = totals.get(category, 0.0) + duration
            if any(entry[1] == "step" for entry in stack):
                totals["step"] -= duration  # taken out of its step's "other"
        stack.append((start + duration, category))
    return totals


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = argv[1]
    out = argv[2] if len(argv) == 3 else (path[:-5] if path.endswith(".json") else path) + ".png"
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as error:
        print(f"plot_trace.py: cannot read {path}: {error}", file=sys.stderr)
        return 1
    names, events = device_tracks(trace)
    if not names:
        print(f"plot_trace.py: {path} has no device tracks", file=sys.stderr)
        return 1
    keys = sorted(names)
    rows = [category_times(events[key]) for key in keys]
    labels = [f"{names[key]}, process {key[0]}" for key in keys]
    width = max(28, *(len(label) + 2 for label in labels))
    header = f"{'track':<{width}}" + "".join(f"{title:>14}" for _, title in CATEGORIES) + f"{'total':>14}"
    print("time per category, ms (each event directly inside a step whole; other: the rest of the steps)")
    print(header)
    for label, row in zip(labels, rows):
        values = [row[category] / 1000.0 for category, _ in CATEGORIES]
        print(f"{label:<{width}}" + "".join(f"{v:>14.3f}" for v in values) + f"{sum(values):>14.3f}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 1.4 + 0.4 * len(keys)))
    lefts = [0.0] * len(keys)
    for (category, title), color in zip(CATEGORIES, COLORS):
        widths = [row[category] / 1000.0 for row in rows]
        ax.barh(range(len(keys)), widths, left=lefts, color=color, label=title)
        lefts = [left + width for left, width in zip(lefts, widths)]
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms in the traced steps")
    other = trace.get("otherData", {})
    first, count = other.get("start_step"), other.get("steps")
    window = f"steps {first}..{first + count - 1}" if first is not None and count is not None else "traced steps"
    ax.set_title(f"{path.split('/')[-1]}: time per category, {window}")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
