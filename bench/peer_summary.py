#!/usr/bin/env python3
"""The summary of a side-by-side training benchmark (bench/train_cnn.sh, bench/train_transformer.sh).

Reads TMP/<case> (bench_train_step's JSON lines, one per repetition) and TMP/torch.<setting> (the PyTorch
peer's, one per repetition, every setting run back to back with dtrain's in each repetition) and prints:
one line per dtrain case against the best peer setting of each repetition ("ratio" from the medians,
"ratio_runs" per repetition and their median), one line per peer setting, and, with --pair ONE,MANY, the
processes case against the one-process case on the same mesh. Every figure is the median over repetitions.

  peer_summary.py TMP --config C --model NAME --batch B --load-start L --case 'name|mesh|processes'...
                  [--pair one,many] [--peer-settings 'what the settings are']
"""
import argparse
import json
import os
import statistics


def main():
    p = argparse.ArgumentParser()
    p.add_argument("tmp")
    p.add_argument("--config", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--load-start", type=float, default=-1.0)
    p.add_argument("--case", action="append", default=[], help="name|mesh|processes")
    p.add_argument("--optional", action="append", default=[], help="a case that may be missing (mpirun)")
    p.add_argument("--pair", default="", help="one,many: the multi-process case against the one-process one")
    p.add_argument("--peer-settings", default="pytorch cpu, best setting in each repetition")
    args = p.parse_args()
    try:
        load_end = float(open("/proc/loadavg").read().split()[0])
    except OSError:
        load_end = -1.0

    def runs(name):
        path = os.path.join(args.tmp, name)
        return [json.loads(line) for line in open(path) if line.startswith("{")] if os.path.exists(path) else []

    def median(values):
        values = [v for v in values if v is not None]
        return round(statistics.median(values), 1) if values else None

    settings = sorted(f[len("torch."):] for f in os.listdir(args.tmp) if f.startswith("torch."))
    peers = {s: runs(f"torch.{s}") for s in settings}
    repetitions = max([len(r) for r in peers.values()] + [0])
    best = []
    for rep in range(repetitions):
        rates = [(r[rep]["examples_per_s"], key) for key, r in peers.items() if rep < len(r)]
        best.append(max(rates) if rates else (None, None))
    peer_data = next((r[0]["data"] for r in peers.values() if r), None)
    common = {"config": args.config, "batch": args.batch, "load_average_1m_start": args.load_start,
              "load_average_1m_end": load_end}

    for case in args.case:
        name, mesh, processes = case.split("|")
        processes = int(processes)
        rows = runs(name)
        if not rows:
            if name not in args.optional:
                print(json.dumps({"name": f"{args.model} mesh {mesh}", "failed": "no dtrain figures (see stderr)"}))
            continue
        rss_key = "peak_rss_bytes" if processes == 1 else "peak_rss_bytes_max_process"
        line = {"name": f"{args.model} mesh {mesh}" + (f" {processes} processes" if processes > 1 else "") +
                " vs pytorch cpu", **common, "mesh": mesh, "processes": processes, "steps": rows[0]["steps"],
                "repetitions": len(rows), "data": "real" if rows[0].get("data") == "real" else "generated",
                "examples_per_s": median(r["examples_per_s"] for r in rows),
                "examples_per_s_mean": median(r["examples_per_s_mean"] for r in rows),
                "examples_per_s_runs": [r["examples_per_s"] for r in rows],
                "peak_rss_bytes": max(r.get(rss_key, 0) for r in rows),
                "peer": args.peer_settings, "peer_data": peer_data,
                "peer_examples_per_s": median(rate for rate, _ in best),
                "peer_examples_per_s_runs": [rate for rate, _ in best],
                "peer_best_settings": [key for _, key in best]}
        line["ratio"] = (round(line["examples_per_s"] / line["peer_examples_per_s"], 3)
                         if line["peer_examples_per_s"] else None)
        line["ratio_runs"] = [round(r["examples_per_s"] / rate, 3) for r, (rate, _) in zip(rows, best) if rate]
        line["ratio_runs_median"] = round(statistics.median(line["ratio_runs"]), 3) if line["ratio_runs"] else None
        print(json.dumps(line))

    for key, rows in peers.items():
        if not rows:
            continue
        described = {k: rows[0][k] for k in ("threads", "memory_format", "attention") if k in rows[0]}
        print(json.dumps({"name": f"pytorch cpu {args.model} {key}", **common, **described,
                          "torch": rows[0]["torch"], "data": rows[0]["data"], "steps": rows[0]["steps"],
                          "repetitions": len(rows), "examples_per_s": median(r["examples_per_s"] for r in rows),
                          "examples_per_s_mean": median(r["examples_per_s_mean"] for r in rows),
                          "examples_per_s_runs": [r["examples_per_s"] for r in rows],
                          "peak_rss_bytes": max(r["peak_rss_bytes"] for r in rows)}))

    if args.pair:
        one_name, many_name = args.pair.split(",")
        one, many = runs(one_name), runs(many_name)
        if one and many:
            mesh = next(c.split("|")[1] for c in args.case if c.startswith(one_name + "|"))
            processes = next(c.split("|")[2] for c in args.case if c.startswith(many_name + "|"))
            line = {"name": f"{args.model} mesh {mesh} {processes} processes vs 1 process", **common,
                    "examples_per_s": median(r["examples_per_s"] for r in many),
                    "peer": "dtrain 1 process, same mesh", "peer_examples_per_s": median(r["examples_per_s"] for r in one)}
            line["ratio"] = round(line["examples_per_s"] / line["peer_examples_per_s"], 3)
            line["ratio_runs"] = [round(b["examples_per_s"] / a["examples_per_s"], 3) for a, b in zip(one, many)]
            line["ratio_runs_median"] = round(statistics.median(line["ratio_runs"]), 3)
            print(json.dumps(line))


if __name__ == "__main__":
    main()
