#!/usr/bin/python3
"""Turns gpubatch_bench JSON (--benchmark_format=json) and sweep.py JSON lines into PNG charts.

    bench/plot.py --bench bench/results/bench-lavapipe.json --sweep bench/results/sweep-lavapipe.jsonl \
                  --title "lavapipe (2 cores)" --out docs/img/lavapipe
"""
import argparse
import collections
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PRESETS = ["latency", "balanced", "throughput", "adaptive"]


def load_bench(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        rows.append(b)
    return data.get("context", {}), rows


def args_of(name):
    # BM_Submitters/preset:1/threads:4/manual_time -> {"preset": 1, "threads": 4}; BM_BatchSize/64/... -> {"0": 64}
    parts = name.split("/")[1:]
    out = {}
    for i, p in enumerate(parts):
        if ":" in p:
            k, v = p.split(":", 1)
            if v.isdigit():
                out[k] = int(v)
        elif p.isdigit():
            out[str(i)] = int(p)
    return out


def save(fig, out, name):
    path = f"{out}-{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote", path)


def plot_bench(rows, title, out):
    by = collections.defaultdict(list)
    for r in rows:
        by[r["name"].split("/")[0]].append(r)

    if by["BM_BatchSize"]:
        pts = sorted((args_of(r["name"])["0"], r["requests_per_s"]) for r in by["BM_BatchSize"])
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("requests per batch (max_batch_size)")
        ax.set_ylabel("requests/s")
        ax.set_title(f"Throughput vs batch size, relu 256 floats\n{title}")
        ax.grid(True, alpha=0.3)
        save(fig, out, "batch-size")

    if by["BM_Submitters"]:
        fig, ax = plt.subplots(figsize=(6, 4))
        series = collections.defaultdict(list)
        for r in by["BM_Submitters"]:
            a = args_of(r["name"])
            series[a["preset"]].append((a["threads"], r["requests_per_s"]))
        for p, pts in sorted(series.items()):
            pts.sort()
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=PRESETS[p])
        unb = sorted((args_of(r["name"])["0"], r["requests_per_s"]) for r in by["BM_Unbatched"])
        if unb:
            ax.plot([x for x, _ in unb], [y for _, y in unb], "k--", marker="x", label="unbatched")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("submitting threads")
        ax.set_ylabel("requests/s")
        ax.set_title(f"Throughput vs submitters per preset, relu 256 floats\n{title}")
        ax.legend()
        ax.grid(True, alpha=0.3, which="both")
        save(fig, out, "submitters")

    if by["BM_RequestSize"]:
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label in (("BM_RequestSize", "batched (adaptive)"), ("BM_RequestSizeUnbatched", "unbatched")):
            pts = sorted((args_of(r["name"])["0"], r["bytes_per_s"] / 1e9) for r in by[key])
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("floats per request")
        ax.set_ylabel("GB/s (input up + output down)")
        ax.set_title(f"Bandwidth vs request size, relu\n{title}")
        ax.legend()
        ax.grid(True, alpha=0.3, which="both")
        save(fig, out, "request-size")


def plot_sweep(path, title, out):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    fig, ax = plt.subplots(figsize=(6, 4))
    for preset in PRESETS:
        # In order of offered load: past saturation, latency climbs while throughput stops.
        pts = sorted((r["offered_rps"], r["latency_us"]["p50"], r["latency_us"]["p99"])
                     for r in runs if r["preset"] == preset and r.get("mode") == "open")
        if not pts:
            continue
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{preset} p50")
        ax.plot([p[0] for p in pts], [p[2] for p in pts], "--", color=line.get_color(), alpha=0.6, label=f"{preset} p99")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered requests/s (open loop)")
    ax.set_ylabel("latency (us)")
    ax.set_title(f"Latency vs throughput per preset, relu 256 floats\n{title}")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, alpha=0.3, which="both")
    save(fig, out, "latency-throughput")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench")
    p.add_argument("--sweep")
    p.add_argument("--title", default="")
    p.add_argument("--out", required=True, help="path prefix of the PNG files")
    a = p.parse_args()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    if a.bench:
        _, rows = load_bench(a.bench)
        plot_bench(rows, a.title, a.out)
    if a.sweep:
        plot_sweep(a.sweep, a.title, a.out)


if __name__ == "__main__":
    main()
