#!/usr/bin/env bash
# Issue 14's open loop near its knee, two questions the thirty-sixth session could not put to an
# H200 (no machine came; docs/BENCHMARKS.md, thirty-sixth session):
#  1. How much of the open loop's CPU is the load generator's pacing? Each of 16 senders wakes
#     every --pace-us (50) and sends what has come due; on the 2-core machine at 150,000/s,
#     --pace-us 200 took 5.2-5.4 against 8.2-9.3 us of process CPU a request. Each run's JSON
#     splits its CPU by thread (cpu_s_by_thread, printed per request below); the paces run
#     interleaved at 3.5 and 4 M/s.
#  2. Does the crowd gain from 8 batches in flight once saturated (GPUBATCH_SATURATED_INFLIGHT=8,
#     the default is twice max_inflight_batches)? One H100 run said 6.40 against 6.08 M/s; the
#     twenty-sixth session's H200 found 6 no better than 4.
# Every run is verified against the CPU reference. Bundle gpubatch-load into .gpu/ (scripts/
# gpu_session.sh says how); on the GPU machine: bash scripts/gpu_open_ab.sh OUTDIR (ROUNDS=1 for
# one round of the A/B pairs instead of two).
# Writes results.jsonl (one JSON object a run, with "name") and a table on stdout.
set -uo pipefail
out=${1:-${OUT:-/tmp/gpu-open-ab}}
mkdir -p "$out"
run=${RUN:-.gpu/run.sh}
export GPUBATCH_VALIDATION=0
load=(gpubatch-load --device 0 --host-probe --threads 16 --op relu --size 256)

# r NAME ENV... -- ARGS...: one --json run of gpubatch-load; a line of the table.
r() {
  local name=$1; shift
  local envs=()
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$run" "${load[@]}" "$@" --json 2>> "$out/err.log" | tail -1 | python3 -c '
import json, sys
d = json.loads(sys.stdin.read()); d["name"] = sys.argv[1]
open(sys.argv[2], "a").write(json.dumps(d) + "\n")
lat = d["latency_us"]
us = {k: round(v * 1e6 / d["requests"], 2) for k, v in d["cpu_s_by_thread"].items()}
print("%-24s served %8.0f p50 %6.0f p99 %7.0f lag99 %5.0f probe99 %s cpu/req %.2f %s ok %s" % (
    d["name"], d["throughput_rps"], lat["p50"], lat["p99"], d.get("send_lag_us", {}).get("p99", 0),
    d["host"].get("probe_late_p99_us"), d["cpu_us_per_request"], us, d["verified"]))' "$name" "$out/results.jsonl"
}

r crowd1024 X=1 -- --inflight 1024 --requests 6000000
for rep in $(seq 1 "${ROUNDS:-2}"); do
  for pace in 50 100 200; do
    r "open3500k-pace$pace-$rep" X=1 -- --rate 3500000 --requests 10500000 --pace-us "$pace"
  done
  for pace in 200 50; do
    r "open4000k-pace$pace-$rep" X=1 -- --rate 4000000 --requests 12000000 --pace-us "$pace"
  done
  r "crowd2048-def-$rep" X=1 -- --inflight 2048 --requests 8000000
  r "crowd2048-i8-$rep" GPUBATCH_SATURATED_INFLIGHT=8 -- --inflight 2048 --requests 8000000
done
