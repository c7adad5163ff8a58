#!/usr/bin/python3
"""One line per run of a gpu_session.sh results.jsonl: rate, p50/p99/max latency, mean batch, CPU
per request, and what the host did (steal; with --host-probe the probe's p99 and max lateness).
For gpubatch-mix runs also the high level's p99, deadline and queue_full lateness when present.
Usage: bench/summary_rows.py RESULTS.jsonl"""
import json
import sys

for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("probe") == "stall":
        print(f"{r['name']:30s} stall probe late {r['late_us']}")
        continue
    mix = r.get("tool") == "gpubatch-mix"
    a = r["latency_us"]["all"] if mix else r["latency_us"]
    rate = r.get("completed_per_s", r.get("throughput_rps"))
    h = r.get("host", {})
    host = f"steal {h.get('steal_ms', 0):5.0f} ms" + (
        f", probe p99 {h['probe_late_p99_us']:.0f} max {h['probe_late_max_us']:.0f} us" if "probe_late_max_us" in h else "")
    extra = ""
    if mix:
        if r["latency_us"]["high"]["count"]:
            extra += f" high p99 {r['latency_us']['high']['p99']:.0f}"
        if r["deadline_late_us"]["count"]:
            extra += f" dl-late p99 {r['deadline_late_us']['p99']:.0f}"
        if r["queue_full_late_us"]["count"]:
            extra += f" qf-late p99 {r['queue_full_late_us']['p99']:.0f}"
        if r["latency_us"]["large"]["count"]:
            extra += f" small p99 {r['latency_us']['small']['p99']:.0f}"
    cpu = r.get("cpu_us_per_request")
    cpu = f" cpu {cpu:.2f}" if cpu is not None else ""
    idle = r.get("idle_cores_busy")
    idle = f" idle {idle:.4f}" if idle else ""
    print(f"{r['name']:26s} {rate:10.0f} p50 {a['p50']:8.1f} p99 {a['p99']:9.1f} max {a['max']:9.1f} "
          f"b {r.get('mean_batch_size', 0):6.1f}{cpu}{idle} | {host}{extra} {'ok' if r['verified'] else 'NOT VERIFIED'}")
