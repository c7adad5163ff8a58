#!/usr/bin/python3
"""One line per run of a gpu_session.sh results.jsonl (gpubatch-load and gpubatch-mix rows alike):
name, requests/s, p50/p99 us (for a mix: high and low priority p99), submit p50, verified.
Usage: bench/session_rows.py OUT/results.jsonl"""
import json
import sys

for line in open(sys.argv[1]):
    if not line.strip():
        continue
    r = json.loads(line)
    name = r.get("name", "?")
    ok = r.get("verified")
    if r.get("tool") == "gpubatch-mix":
        L = r["latency_us"]
        print(f"{name:22s} offered {r['offered_rate']:>9.0f} ok/s {r['completed_per_s']:>9.0f} "
              f"hi p50/p99 {L['high']['p50']:8.1f} {L['high']['p99']:9.1f}  lo p50/p99 {L['low']['p50']:8.1f} "
              f"{L['low']['p99']:9.1f}  exec p99 {r['executor_e2e_p99_us']}  "
              f"deadline errors {r['deadline_exceeded']} late p50/p99 {r['deadline_late_us']['p50']}/{r['deadline_late_us']['p99']}  "
              f"queue_full {r['queue_full']} late p99 {r['queue_full_late_us']['p99']}  verified {ok}")
    elif "throughput_rps" in r:
        L, s = r["latency_us"], r.get("submit_us") or {}
        print(f"{name:22s} {r['throughput_rps']:>11.0f}/s  p50 {L['p50']:8.2f}  p99 {L['p99']:9.2f}  "
              f"submit p50 {s.get('p50', 0):7.2f}  cpu/req {r.get('cpu_us_per_request', 0):6.2f}  verified {ok}")
