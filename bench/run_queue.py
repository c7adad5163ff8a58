#!/usr/bin/env python3
"""Runs a command and samples, about every millisecond, which of its threads are runnable (state
R in /proc/PID/task/*/stat), by thread name: where a process's threads want more cores than the
machine has, that is the moment a p99 is made.

    bench/run_queue.py [--json-out FILE] -- COMMAND ...

Report (stderr, or JSON with --json-out): how many samples saw N threads runnable, and per thread
name the mean and the largest number runnable at once, over all samples and over the samples in
which at least as many threads as cores were runnable.
"""
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict


def runnable(pid):
    names = Counter()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if state == "R":
            names[name] += 1
    return names


def main():
    args = sys.argv[1:]
    json_out = None
    if args[:1] == ["--json-out"]:
        json_out, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    cores = os.cpu_count()
    proc = subprocess.Popen(args)
    totals = Counter()
    mean = defaultdict(float)
    peak = Counter()
    busy_mean = defaultdict(float)
    busy_samples = 0
    samples = 0
    while proc.poll() is None:
        names = runnable(proc.pid)
        if names is None:
            break
        n = sum(names.values())
        totals[n] += 1
        samples += 1
        for k, v in names.items():
            mean[k] += v
            peak[k] = max(peak[k], v)
            if n >= cores:
                busy_mean[k] += v
        busy_samples += n >= cores
        time.sleep(0.001)
    proc.wait()
    report = {
        "cores": cores,
        "samples": samples,
        "runnable_histogram": {str(k): totals[k] for k in sorted(totals)},
        "samples_with_all_cores_wanted": busy_samples,
        "mean_runnable_by_name": {k: round(v / max(samples, 1), 3) for k, v in sorted(mean.items())},
        "peak_runnable_by_name": dict(sorted(peak.items())),
        "mean_runnable_by_name_when_all_cores_wanted": {k: round(v / max(busy_samples, 1), 3)
                                                         for k, v in sorted(busy_mean.items())},
    }
    text = json.dumps(report)
    if json_out:
        with open(json_out, "w") as f:
            f.write(text + "\n")
    else:
        print(text, file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
