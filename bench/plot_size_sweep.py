#!/usr/bin/python3
"""Plots bench/size_sweep.py's JSON lines (input GB/s against floats per request, one line per
preset, unbatched, and the raw copy-engine rate) and prints the markdown table for
docs/BENCHMARKS.md "Request size sweep".

    bench/plot_size_sweep.py bench/results/size-sweep-lavapipe.jsonl --title "lavapipe (2 cores)" \
        --out docs/img/lavapipe        # writes docs/img/lavapipe-request-size-sweep.png
"""
import argparse
import collections
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jsonl")
    p.add_argument("--title", required=True)
    p.add_argument("--out", required=True, help="path prefix; -request-size-sweep.png is appended")
    a = p.parse_args()
    runs, copies = collections.defaultdict(dict), {}
    with open(a.jsonl) as f:
        for line in f:
            r = json.loads(line)
            if r.get("probe") == "copy_rate":
                copies[r["bytes"]] = r["transfer_queue"]
            elif r.get("sweep") == "request_size":
                runs[r["mode"]][r["size"]] = r
    modes = [m for m in runs if m != "unbatched"] + (["unbatched"] if "unbatched" in runs else [])
    sizes = sorted({s for m in runs.values() for s in m})

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for mode in modes:
        pts = sorted((s, r["input_gbps"]) for s, r in runs[mode].items())
        ax.plot([s for s, _ in pts], [g for _, g in pts], marker="o",
                linestyle="--" if mode == "unbatched" else "-", label=mode)
    if copies:
        bus = copies[max(copies)]
        ax.axhline(bus["h2d_gbps"], color="grey", linestyle=":",
                   label=f"copy engine, pinned, host to device ({bus['h2d_gbps']:.1f} GB/s)")
    ax.set_xscale("log", basex=2) if matplotlib.__version__ < "3.3" else ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # the bus and the slowest preset differ by orders of magnitude
    ax.set_xlabel("floats per request")
    ax.set_ylabel("input GB/s (every result verified)")
    ax.set_title(f"relu, request size sweep: {a.title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = f"{a.out}-request-size-sweep.png"
    fig.savefig(path, dpi=110)
    print("wrote", path)

    # The table for docs/BENCHMARKS.md.
    print("\n| floats per request | " + " | ".join(modes) + " | best batched / unbatched | copy rate h2d (same size) |")
    print("| ---: | " + " | ".join("---:" for _ in modes) + " | ---: | ---: |")
    for s in sizes:
        cells = [f"{runs[m][s]['input_gbps']:.3f}" if s in runs[m] else "" for m in modes]
        batched = [runs[m][s]["input_gbps"] for m in modes if m != "unbatched" and s in runs[m]]
        ratio = f"{max(batched) / runs['unbatched'][s]['input_gbps']:.2f}" if batched and s in runs["unbatched"] else ""
        copy = copies.get(max(4 * s, 4096))
        print(f"| {s:,} | " + " | ".join(cells) + f" | {ratio} | " + (f"{copy['h2d_gbps']:.2f}" if copy else "") + " |")


if __name__ == "__main__":
    main()
