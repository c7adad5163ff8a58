#!/usr/bin/python3
"""Backlog episodes in a GPUBATCH_TRACE file: where batches begin to wait (a batch whose formation,
from its oldest arrival to its submit, passed --ms), the batches submitted just before it, in
submit order, stage by stage (formation, submit, device, completion; with
GPUBATCH_GPU_TIMESTAMPS=on the GPU's own time too), and the gaps between their submits: what
stopped first, the strand (a long submit, or a gap with no submit), the device or the completion;
and what the strand did in the episode's batch's formation (its runs: how many, on which
threads, the longest, the longest gap between two, how many ended waiting for a free slot).
Usage: bench/trace_episodes.py TRACE.json[.gz] [--ms 2] [--before 6] [--episodes 4]"""
import sys

import bisect

from trace_stages import STAGES as stages, complete, load_batches, load_events, load_runs


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


path = sys.argv[1]
threshold_us = arg("--ms", 2.0) * 1000
before = arg("--before", 6)
episodes = arg("--episodes", 4)
events = load_events(path)
batches = load_batches(path, events)
runs = load_runs(path, events)
run_starts = [r[0] for r in runs]


def strand_runs(begin, end):
    """The strand's runs that overlap [begin, end), summed up."""
    first = bisect.bisect_left(run_starts, begin)
    while first > 0 and runs[first - 1][1] > begin:  # began before, still running at `begin`
        first -= 1
    inside = runs[first:bisect.bisect_left(run_starts, end)]
    if not inside:
        return "no strand run"
    gaps = [b[0] - a[1] for a, b in zip(inside, inside[1:])]
    gaps += [inside[0][0] - begin, end - inside[-1][1]]
    longest = max(inside, key=lambda r: r[1] - r[0])
    io = sum(1 for r in inside if r[2]["thread"] == "io")
    blocked = sum(1 for r in inside if r[2]["blocked_on_slot"])
    return (f"{len(inside)} strand runs ({io} on the io thread), longest {longest[1] - longest[0]:.0f} us "
            f"(pulled {longest[2]['pulled']}, {longest[2]['batches']} batches), longest gap {max(gaps):.0f} us, "
            f"{blocked} ended waiting for a slot, pulled {sum(r[2]['pulled'] for r in inside)}")
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
    if runs:
        print("  meanwhile: " + strand_runs(b["formation"][0], b["formation"][1]))
    prev_start = None
    for s, k, c in done[max(0, i - before):i + 2]:
        t = {st: c[st][1] - c[st][0] for st in stages}
        gap = "" if prev_start is None else f" +{s - prev_start:.0f}"
        prev_start = s
        print(f"  batch {k:6d} {c['reason']:5s} {c['requests']:5d} req, submit at{gap:>8s} us: "
              + ", ".join(f"{st} {t[st]:.0f}" for st in stages) + (f", gpu {c['gpu']:.0f}" if c.get("gpu") else ""))
if shown == 0:
    print(f"no batch waited {threshold_us / 1000:.1f} ms to form")
