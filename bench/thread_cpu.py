#!/usr/bin/env python3
"""Runs a command and reports the CPU time each of its threads used, summed by thread name.

    bench/thread_cpu.py -- build/bench/gpubatch-load --preset adaptive --threads 16 --json

Where perf is missing (the GPU machines), this is how the executor's stages are weighed: the
strand ("gpubatch-strand"), the completion threads ("gpubatch-done") and the callers. It polls
/proc/PID/task/*/stat and keeps each thread's last reading, so threads that end early count too.
The command's own output passes through; the report goes to stderr (JSON with --json-out FILE).
"""
import json
import os
import subprocess
import sys
import time

def read_threads(pid, seen):
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        user, system = int(fields[11]) / tick, int(fields[12]) / tick
        seen[tid] = (name, user, system)

def main():
    args = sys.argv[1:]
    out_file = None
    if args[:1] == ["--json-out"]:
        out_file, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    seen = {}
    start = time.monotonic()
    proc = subprocess.Popen(args)
    while proc.poll() is None:
        read_threads(proc.pid, seen)
        time.sleep(0.02)
    wall = time.monotonic() - start
    by_name = {}
    for name, user, system in seen.values():
        entry = by_name.setdefault(name, {"threads": 0, "user_s": 0.0, "system_s": 0.0})
        entry["threads"] += 1
        entry["user_s"] += user
        entry["system_s"] += system
    report = {"wall_s": round(wall, 3), "threads": by_name}
    print(json.dumps(report), file=sys.stderr)
    if out_file:
        with open(out_file, "a") as f:
            f.write(json.dumps(report) + "\n")
    sys.exit(proc.returncode)

if __name__ == "__main__":
    main()
