#!/usr/bin/env python3
"""Reads one gpubatch-load or gpubatch-mix --json line from stdin; exits 1 unless every result
was verified and cpu_s_by_thread holds together: the callers, the strand and the completion
threads each used some CPU, and no part, nor the named parts together, exceeds the process's CPU
over the run (LoadSmoke.CpuByThread and LoadSmoke.MixCpuByThread in bench/CMakeLists.txt)."""
import json
import sys

d = json.loads(sys.stdin.read().strip().splitlines()[-1])
split = d["cpu_s_by_thread"]
total = d["cpu_us_per_request"] * d["requests"] / 1e6
named = sum(v for k, v in split.items() if k != "rest")
problems = []
if not d["verified"]:
    problems.append("not verified")
for k in ("callers", "strand", "completion"):
    if split[k] <= 0:
        problems.append(f"{k} used no CPU")
if any(v < 0 for v in split.values()):
    problems.append("a negative part")
# The parts are read from other clocks than the process's getrusage; allow their granularity.
if named > total * 1.05 + 0.005:
    problems.append(f"named parts {named:.4f} s exceed the process's {total:.4f} s")
print(json.dumps({"split": split, "total_s": round(total, 4), "problems": problems}))
sys.exit(1 if problems else 0)
