#!/usr/bin/python3
"""Request size sweep (issue 12, item 6): input GB/s of relu requests from 256 to 4,194,304 floats,
batched with each preset, --unbatched, and the raw copy-engine rate (gpubatch-copy-rate) measured
on the same machine in the same run. Every gpubatch-load result is verified against the CPU
reference (a run whose "verified" is false or that lost a future stops the sweep).

Writes JSON lines to --out: each gpubatch-load object with "sweep": "request_size", "mode" (the
preset or "unbatched") and "input_gbps" (input bytes per second / 1e9) added, then the copy-rate
probe's lines ("probe": "copy_rate").

    bench/size_sweep.py --bin build/release/bench --out bench/results/size-sweep-lavapipe.jsonl \
        --threads 2 --sizes 4096,65536,1048576 --presets throughput,adaptive --bytes-per-run 64e6
    bench/plot_size_sweep.py bench/results/size-sweep-lavapipe.jsonl --title "lavapipe (2 cores)" \
        --out docs/img/lavapipe
"""
import argparse
import json
import os
import subprocess
import sys

SIZES = [256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]


def run_json_lines(command):
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        raise SystemExit(f"{' '.join(command)} failed ({out.returncode})")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def sweep_modes(presets, depths):
    """(mode name, preset, depth) for every batched run, then unbatched (one outstanding a caller)."""
    named = [(p if len(depths) == 1 else f"{p}@{d}", p, d) for p in presets for d in depths]
    return named + [("unbatched", None, 1)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="folder holding gpubatch-load and gpubatch-copy-rate")
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--inflight", default="8",
                   help="requests each thread keeps outstanding (batched); a list (1,8) runs each preset at each "
                        "depth, its mode then named preset@depth, so that \"best batched\" takes the best depth too")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="floats per request")
    p.add_argument("--presets", default="latency,balanced,throughput,adaptive")
    p.add_argument("--op", default="relu")
    p.add_argument("--bytes-per-run", type=float, default=4e9, help="input bytes each run moves")
    p.add_argument("--min-requests", type=int, default=64)
    p.add_argument("--max-requests", type=int, default=2000000)
    p.add_argument("--extra", default="", help="more gpubatch-load flags for every run")
    a = p.parse_args()
    load = [os.path.join(a.bin, "gpubatch-load")]
    probe = [os.path.join(a.bin, "gpubatch-copy-rate")]
    sizes = [int(s) for s in a.sizes.split(",")]
    modes = sweep_modes(a.presets.split(","), [int(d) for d in a.inflight.split(",")])

    with open(a.out, "w") as f:
        # The yardstick first, at the sizes of the sweep (64 MiB too: the bus's own rate).
        copy_bytes = sorted({max(4 * s, 4096) for s in sizes} | {64 << 20})
        for line in run_json_lines(probe + ["--bytes", ",".join(map(str, copy_bytes))]):
            f.write(json.dumps(line) + "\n")
            t = line["transfer_queue"]
            print(f"copy rate {line['bytes']:>10d} B   h2d {t['h2d_gbps']:7.2f} GB/s   d2h {t['d2h_gbps']:7.2f} GB/s",
                  flush=True)
        for size in sizes:
            requests = int(min(a.max_requests, max(a.min_requests, a.bytes_per_run / (4 * size))))
            for mode, preset, depth in modes:
                flags = ["--op", a.op, "--size", str(size), "--threads", str(a.threads), "--requests", str(requests)]
                flags += ["--unbatched"] if preset is None else ["--preset", preset, "--inflight", str(depth)]
                flags += a.extra.split()
                r = run_json_lines(load + flags + ["--json"])[-1]
                if not r.get("verified") or r.get("lost") or r.get("errors"):
                    raise SystemExit(f"size {size} {mode}: verified={r.get('verified')} lost={r.get('lost')} "
                                     f"errors={r.get('errors')}")
                r.update(sweep="request_size", mode=mode, inflight=depth, input_gbps=r["throughput_rps"] * 4 * size / 1e9,
                         command=" ".join(load + flags + ["--json"]))
                f.write(json.dumps(r) + "\n")
                f.flush()
                print(f"{size:>8d} floats  {mode:14s} {r['input_gbps']:8.3f} GB/s  {r['throughput_rps']:12.0f} req/s  "
                      f"batch {r.get('mean_batch_size', 0):7.1f}", flush=True)


if __name__ == "__main__":
    main()
