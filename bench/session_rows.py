#!/usr/bin/python3
"""One line per run of a gpu_session.sh results.jsonl (gpubatch-load and gpubatch-mix rows alike):
name, requests/s, p50/p99/max us, mean batch; for a mix the high and low priority p99, the
executor's p99, deadline and queue_full lateness; for a load submit p50, CPU per request and idle
cores, and for a lone caller its CPU (marked when it takes the GPU's interrupts); for both what
the host did (`host`: steal, and with --host-probe how late the probe woke);
stall-probe rows too.
Usage: bench/session_rows.py OUT/results.jsonl"""
import json
import sys


def host(r):
    h = r.get("host")
    if not h:
        return ""
    s = f"  steal {h.get('steal_ms', 0):.0f} ms"
    if "probe_late_max_us" in h:
        s += f", probe p99 {h['probe_late_p99_us']:.0f} max {h['probe_late_max_us']:.0f} us"
    return s


def irq_cpu(r):
    """For a lone caller (one sender): its CPU, marked when it is one that takes the GPU's
    interrupts (about three times slower there: DESIGN.md "The GPU's interrupt CPU")."""
    callers = r.get("caller_cpus") or []
    if r.get("threads") != 1 or len(callers) != 1:
        return ""
    taken = {c for d in r.get("devices", []) for c in d.get("interrupt_cpus", [])}
    return f"  caller cpu {callers[0]}" + (" (the GPU's interrupt CPU)" if callers[0] in taken else "")


for line in open(sys.argv[1]):
    if not line.strip():
        continue
    r = json.loads(line)
    name = r.get("name", "?")
    ok = r.get("verified")
    if r.get("probe") == "stall":
        print(f"{name:22s} stall probe late {r['late_us']}")
    elif r.get("tool") == "gpubatch-mix":
        L = r["latency_us"]
        print(f"{name:22s} offered {r['offered_rate']:>9.0f} ok/s {r['completed_per_s']:>9.0f} "
              f"all p50/p99/max {L['all']['p50']:8.1f} {L['all']['p99']:9.1f} {L['all']['max']:9.1f}  "
              f"hi p99 {L['high']['p99']:9.1f}  lo p99 {L['low']['p99']:9.1f}  small p99 {L.get('small', {}).get('p99', 0):9.1f}  "
              f"batch {r.get('mean_batch_size', 0):6.1f}  exec p99 {r['executor_e2e_p99_us']}  "
              f"deadline errors {r['deadline_exceeded']} late p50/p99 {r['deadline_late_us']['p50']}/{r['deadline_late_us']['p99']}  "
              f"queue_full {r['queue_full']} late p99 {r['queue_full_late_us']['p99']}{host(r)}  verified {ok}")
    elif "throughput_rps" in r:
        L, s = r["latency_us"], r.get("submit_us") or {}
        idle = f"  idle cores {r['idle_cores_busy']:.4f}" if r.get("idle_cores_busy") else ""
        print(f"{name:22s} {r['throughput_rps']:>11.0f}/s  p50 {L['p50']:8.2f}  p99 {L['p99']:9.2f}  max {L.get('max', 0):9.1f}  "
              f"batch {r.get('mean_batch_size', 0):6.1f}  submit p50 {s.get('p50', 0):7.2f}  "
              f"cpu/req {r.get('cpu_us_per_request', 0):6.2f}{idle}{host(r)}{irq_cpu(r)}  verified {ok}")
