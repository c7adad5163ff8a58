#!/usr/bin/python3
"""Per-stage times of the batches in a GPUBATCH_TRACE file (Chrome trace events, maybe .gz):
formation (oldest arrival -> submit), submit, device (submit returned -> completion seen) and
completion (-> every request resolved), p50 / p99 / max in us, by flush reason ("express" for
express batches); then the slowest batches of each reason, stage by stage (with
GPUBATCH_GPU_TIMESTAMPS=on also the GPU's own time of each, inside its device span); last, where
the trace has the strand's "batch count limit" counter (latency_batch_size until saturated), how
long each limit held and how often it changed; and where the deadline watch failed requests,
its rounds: how late each began after the earliest deadline it failed, how long it ran, the
latest rounds.
Usage: bench/trace_batches.py TRACE.json[.gz] [--slowest N]"""
import sys
from collections import defaultdict

from trace_stages import STAGES as stages, complete, load_batches, load_events

path = sys.argv[1]
slowest = int(sys.argv[sys.argv.index("--slowest") + 1]) if "--slowest" in sys.argv else 5
events = load_events(path)
batches = load_batches(path, events)
rows = defaultdict(list)
upper = defaultdict(int)
for bid, b in batches.items():
    if not complete(b):
        continue
    t = {s: b[s][1] - b[s][0] for s in stages}
    t["total"] = b["completion"][1] - b["formation"][0]
    if b.get("gpu") is not None:
        t["gpu"] = b["gpu"]  # the GPU's own time (GPUBATCH_GPU_TIMESTAMPS=on), inside "device"
    # Regular batches that carried requests above priority level 0 apart ("upper" in the trace
    # since the twentieth session of 2026-11-29): where a high-priority request rode.
    key = b["reason"] if b["reason"] == "express" or not b.get("upper") else b["reason"] + "+upper"
    rows[key].append((bid, b["requests"], t))
    upper[key] += b.get("upper", 0)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))] if v else 0.0


for reason, rs in sorted(rows.items()):
    print(f"{reason}: {len(rs)} batches, mean {sum(r[1] for r in rs) / len(rs):.1f} requests"
          + (f", {upper[reason]} of them above level 0" if upper[reason] else ""))
    for s in stages + ("total",):
        v = [r[2][s] for r in rs]
        print(f"  {s:11s} p50 {pct(v, .5):9.1f}  p99 {pct(v, .99):9.1f}  max {max(v):9.1f} us")
    for bid, n, t in sorted(rs, key=lambda r: -r[2]["total"])[:slowest]:
        print(f"    batch {bid} ({n} requests): " + ", ".join(f"{s} {t[s]:.0f}" for s in stages + ("total",))
              + (f" (gpu {t['gpu']:.0f})" if "gpu" in t else ""))


# The count limit's changes: time at each limit from its first change to the last event.
changes = sorted((e["ts"], e["args"]["value"]) for e in events
                 if e.get("ph") == "C" and e.get("name") == "batch count limit")
if changes:
    end = max(e.get("ts", 0) + e.get("dur", 0) for e in events if "ts" in e)
    held = defaultdict(float)
    for (t, v), nxt in zip(changes, changes[1:] + [(end, None)]):
        held[v] += nxt[0] - t
    span = sum(held.values()) or 1.0
    print(f"batch count limit: {len(changes)} changes; from the first, "
          + ", ".join(f"{v:.0f} for {100 * h / span:.1f} %" for v, h in sorted(held.items())))


# The deadline watch's rounds ("expiry round" events): how late each began after the earliest
# deadline it failed (its thread's wake-up, or the round before still running) and how long it ran.
rounds = [e for e in events if e.get("ph") == "X" and e.get("name") == "expiry round"]
if rounds:
    late = [e["args"]["late_us"] for e in rounds]
    dur = [e["dur"] for e in rounds]
    print(f"deadline watch: {len(rounds)} rounds, {sum(e['args']['expired'] for e in rounds)} requests failed")
    print(f"  late        p50 {pct(late, .5):9.1f}  p99 {pct(late, .99):9.1f}  max {max(late):9.1f} us")
    print(f"  round       p50 {pct(dur, .5):9.1f}  p99 {pct(dur, .99):9.1f}  max {max(dur):9.1f} us")
    for e in sorted(rounds, key=lambda e: -(e["args"]["late_us"] + e["dur"]))[:slowest]:
        print(f"    at {e['ts'] / 1000:.3f} ms: {e['args']['expired']} requests, began {e['args']['late_us']:.0f} us late, "
              f"ran {e['dur']:.0f} us")
