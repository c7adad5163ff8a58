#!/usr/bin/python3
"""Backlog episodes in a GPUBATCH_TRACE file: where batches begin to wait (a batch whose formation,
from its oldest arrival to its submit, passed --ms), the batches submitted just before it, in
submit order, stage by stage (formation, submit, device, completion; with
GPUBATCH_GPU_TIMESTAMPS=on the GPU's own time too), and the gaps between their submits: what
stopped first, the strand (a long submit, or a gap with no submit), the device or the completion.
Usage: bench/trace_episodes.py TRACE.json[.gz] [--ms 2] [--before 6] [--episodes 4]"""
import sys

from trace_stages import STAGES as stages, complete, load_batches


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


path = sys.argv[1]
threshold_us = arg("--ms", 2.0) * 1000
before = arg("--before", 6)
episodes = arg("--episodes", 4)
batches = load_batches(path)
done = [(b["submit"][0], bid, b) for bid, b in batches.items() if complete(b)]
done.sort()
shown, last_shown = 0, -1
for i, (start, bid, b) in enumerate(done):
    if shown >= episodes:
        break
    if b["formation"][1] - b["formation"][0] < threshold_us or i <= last_shown + before:
        continue
    shown += 1
    last_shown = i
    print(f"episode {shown}: batch {bid} waited {(b['formation'][1] - b['formation'][0]) / 1000:.1f} ms to form")
    prev_start = None
    for s, k, c in done[max(0, i - before):i + 2]:
        t = {st: c[st][1] - c[st][0] for st in stages}
        gap = "" if prev_start is None else f" +{s - prev_start:.0f}"
        prev_start = s
        print(f"  batch {k:6d} {c['reason']:5s} {c['requests']:5d} req, submit at{gap:>8s} us: "
              + ", ".join(f"{st} {t[st]:.0f}" for st in stages) + (f", gpu {c['gpu']:.0f}" if c.get("gpu") else ""))
if shown == 0:
    print(f"no batch waited {threshold_us / 1000:.1f} ms to form")
