"""Rows and the table of bench/plan_memory_vs_measured.sh.

  plan_memory_summary.py row NAME PROCESSES RUN_DIR < prediction.json   -> one JSON line
  plan_memory_summary.py table < rows.jsonl                            -> the side-by-side table
A run dir holds rss.<process> (GNU time's %M, KiB) and out/metrics.jsonl (train_steps rows: examples/s).
"""
import json
import pathlib
import sys

TOLERANCE_MEMORY = 0.15  # issue 29's must-show: within 15% of VmHWM
TOLERANCE_SPEED = 0.25


def row(name, processes, run_dir):
    run = pathlib.Path(run_dir)
    predicted = json.loads(sys.stdin.read() or "{}")
    measured = []
    for p in range(int(processes)):
        f = run / f"rss.{p}"
        measured.append(int(f.read_text().split()[-1]) * 1024 if f.exists() else None)
    speeds = []
    metrics = run / "out" / "metrics.jsonl"
    if metrics.exists():
        for line in metrics.read_text().splitlines():
            r = json.loads(line)
            if r.get("split") == "train_steps":
                speeds.append(r["examples_per_s"])
    out = {"name": name, "processes": int(processes),
           "predicted_peak_bytes_per_process": predicted.get("peak_bytes_per_process"),
           "measured_peak_bytes_per_process": measured,
           # the first logged stretch includes the warm-up steps
           "examples_per_s": (sum(speeds[1:]) / len(speeds[1:])) if len(speeds) > 1 else (speeds[0] if speeds else None),
           "predicted_examples_per_s": predicted.get("examples_per_second"),
           "items": predicted.get("items")}
    print(json.dumps(out))


def mib(x):
    return "-" if x is None else f"{x / 2**20:.1f}"


def table():
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    print(f"{'config':<20} {'np':>2} {'pred MiB':>9} {'VmHWM MiB (per process)':>24} {'ratio':>6} {'ok':>3}"
          f" {'pred ex/s':>10} {'ex/s':>10} {'ratio':>6}")
    for r in rows:
        pred = r["predicted_peak_bytes_per_process"]
        measured = [m for m in r["measured_peak_bytes_per_process"] if m]
        worst = max(measured) if measured else None
        ratio = pred / worst if pred and worst else None
        # every process within the tolerance, not just the largest
        ok = pred and measured and all(abs(pred / m - 1) <= TOLERANCE_MEMORY for m in measured)
        speed, pspeed = r["examples_per_s"], r["predicted_examples_per_s"]
        sratio = f"{pspeed / speed:.2f}" if pspeed and speed else "-"
        print(f"{r['name']:<20} {r['processes']:>2} {mib(pred):>9} {' '.join(mib(m) for m in measured) or '-':>24}"
              f" {'-' if ratio is None else f'{ratio:.3f}':>6} {'yes' if ok else 'NO':>3}"
              f" {'-' if not pspeed else f'{pspeed:.0f}':>10} {'-' if not speed else f'{speed:.0f}':>10} {sratio:>6}")


if __name__ == "__main__":
    if sys.argv[1] == "row":
        row(*sys.argv[2:5])
    else:
        table()
