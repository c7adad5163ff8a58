#!/usr/bin/env python3
"""Latency versus throughput for each preset: gpubatch-load in open loop at offered loads from
light to saturation. Writes one JSON object per run (JSON lines) to --out.

    bench/sweep.py --load build/release/bench/gpubatch-load --out bench/results/sweep-lavapipe.jsonl
"""
import argparse
import json
import subprocess
import sys


def run(command, args):
    out = subprocess.run([*command, *args, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        raise SystemExit(f"gpubatch-load {' '.join(args)} failed ({out.returncode})")
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--load", required=True, help="path to gpubatch-load (or .gpu/run.sh gpubatch-load)")
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--seconds", type=float, default=1.0, help="length of each run at its offered load")
    p.add_argument("--presets", default="latency,balanced,throughput,adaptive")
    p.add_argument("--points", type=int, default=8, help="offered loads per preset")
    a = p.parse_args()
    load = a.load.split()

    def call(extra):
        return run(load, extra)

    common = ["--threads", str(a.threads), "--size", str(a.size), "--op", "relu"]
    with open(a.out, "w") as f:
        for preset in a.presets.split(","):
            # Saturation first: closed loop with deep queues shows what the preset can carry.
            sat = call(common + ["--preset", preset, "--inflight", "4096", "--requests", "200000"])
            sat["mode"] = "saturation"
            f.write(json.dumps(sat) + "\n")
            peak = sat["throughput_rps"]
            for i in range(1, a.points + 1):
                rate = peak * i / (a.points + 1) * 1.1  # the last point offers slightly more than the peak
                requests = max(200, int(rate * a.seconds))
                r = call(common + ["--preset", preset, "--rate", f"{rate:.0f}", "--requests", str(requests)])
                r["mode"] = "open"
                r["offered_rps"] = rate
                f.write(json.dumps(r) + "\n")
                f.flush()
                print(f"{preset:10s} offered {rate:10.0f}/s  got {r['throughput_rps']:10.0f}/s  "
                      f"p50 {r['latency_us']['p50']:9.1f} us  p99 {r['latency_us']['p99']:9.1f} us", flush=True)


if __name__ == "__main__":
    main()
