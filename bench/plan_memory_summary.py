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
    # The tiny-data run's VmHWM per process: the runtime, threads and device tensors, with almost no data.
    tiny = []
    for p in range(int(processes)):
        f = run / f"tiny_rss.{p}"
        tiny.append(int(f.read_text().split()[-1]) * 1024 if f.exists() else None)
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
           "tiny_data_peak_bytes_per_process": tiny,
           # the first logged stretch includes the warm-up steps
           "examples_per_s": (sum(speeds[1:]) / len(speeds[1:])) if len(speeds) > 1 else (speeds[0] if speeds else None),
           "predicted_examples_per_s": predicted.get("examples_per_second"),
           "items": predicted.get("items")}
    print(json.dumps(out))


def mib(x):
    return "-" if x is None else f"{x / 2**20:.1f}"


def split(r):
    """(predicted, measured) MiB of the device tensors and of the rest. Measured devices: the tiny-data run's
    VmHWM less the predicted runtime and threads; the measured rest: the real VmHWM less that."""
    items = r.get("items") or {}
    tiny = [t for t in r.get("tiny_data_peak_bytes_per_process", []) if t]
    measured = [m for m in r["measured_peak_bytes_per_process"] if m]
    if not items or not tiny or not measured or "device tensors" not in items:
        return "-", "-", "-", "-"
    fixed = items.get("runtime", 0) + items.get("compute threads and fibers", 0)
    device = max(tiny) - fixed
    return (mib(items["device tensors"]), mib(device), mib(r["predicted_peak_bytes_per_process"] - items["device tensors"]),
            mib(max(measured) - device))


def table():
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    print("devices: the predicted device tensors beside the tiny-data run's VmHWM less the predicted runtime and threads;")
    print("rest: everything else, predicted beside the VmHWM less those measured devices")
    print(f"{'config':<20} {'np':>2} {'pred MiB':>9} {'VmHWM MiB (per process)':>24} {'ratio':>6} {'ok':>3}"
          f" {'dev pred':>8} {'dev meas':>8} {'rest pred':>9} {'rest meas':>9}"
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
        dp, dm, rp, rm = split(r)
        print(f"{r['name']:<20} {r['processes']:>2} {mib(pred):>9} {' '.join(mib(m) for m in measured) or '-':>24}"
              f" {'-' if ratio is None else f'{ratio:.3f}':>6} {'yes' if ok else 'NO':>3}"
              f" {dp:>8} {dm:>8} {rp:>9} {rm:>9}"
              f" {'-' if not pspeed else f'{pspeed:.0f}':>10} {'-' if not speed else f'{speed:.0f}':>10} {sratio:>6}")


if __name__ == "__main__":
    if sys.argv[1] == "row":
        row(*sys.argv[2:5])
    else:
        table()
