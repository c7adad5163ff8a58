#!/usr/bin/env bash
# Issue 14's measurements on a GPU machine, in one go: 16 threads of 256-float relu, the default's
# saturation (closed loop), then open loop at 10-90 % of it; the same with target_p99_us = 500;
# a 10 % high-priority mix idle, at 70 % and 100 %; a deadline mix with and without the deadline
# watch. Every run is verified against the CPU reference. Bundle gpubatch-load and gpubatch-mix
# into .gpu/ (scripts/gpu_session.sh says how); there: bash scripts/gpu_sched.sh OUTDIR.
# Writes results.jsonl, log.txt and summary.txt into OUTDIR.
set -uo pipefail
out=${1:-${OUT:-/tmp/gpu-sched}}
mkdir -p "$out"
run=${RUN:-.gpu/run.sh}
export GPUBATCH_VALIDATION=0
budget=${SCHED_BUDGET_S:-200}   # no run starts once the script has run this long
hard=${SCHED_HARD_S:-240}       # and none runs past this (the device call's limit is 480 s)
cap() { local t=$1 left=$((hard - SECONDS)); (( left < t )) && t=$left; (( t < 5 )) && t=5; echo $t; }
log() { echo "$*" | tee -a "$out/log.txt" >&2; }
late() { if (( SECONDS > budget )); then log "!! skipped (budget, ${SECONDS} s): $*"; return 0; fi; return 1; }

# j NAME TIMEOUT BIN ARGS...: one --json run; its last stdout line, with name/wall_s added, to results.jsonl.
j() {
  local name=$1 t=$2 bin=$3; shift 3
  late "$name" && return 0
  t=$(cap "$t")
  echo "== $name: ${ENVPFX:-}$run $bin $* --json   (timeout $t)" >> "$out/log.txt"
  local t0=$SECONDS line
  line=$(timeout -k 5 "$t" "$run" "$bin" "$@" --json 2>> "$out/log.txt" | tail -1)
  local wall=$((SECONDS - t0))
  log "   $name: ${wall} s, at ${SECONDS} s"
  if [[ $line == "{"* ]]; then
    echo "{\"name\": \"$name\", \"wall_s\": $wall, ${line:1}" >> "$out/results.jsonl"
  else
    echo "{\"name\": \"$name\", \"wall_s\": $wall, \"failed\": true, \"tail\": \"$(echo "$line" | tr -d '"\\' | tail -c 200)\"}" >> "$out/results.jsonl"
  fi
  LAST=$line
}
# tc NAME TIMEOUT ARGS...: gpubatch-load under bench/thread_cpu.py; its JSON to results.jsonl, the thread report to threads.jsonl.
tc() {
  local name=$1 t=$2; shift 2
  late "$name" && return 0
  t=$(cap "$t")
  if ! command -v python3 >/dev/null; then log "!! no python3: $name runs without thread_cpu"; j "$name" "$t" gpubatch-load "$@"; return 0; fi
  echo "== $name: python3 bench/thread_cpu.py -- $run gpubatch-load $* --json   (timeout $t)" >> "$out/log.txt"
  local t0=$SECONDS line rep
  line=$(timeout -k 5 "$t" python3 bench/thread_cpu.py -- "$run" gpubatch-load "$@" --json 2> /tmp/tc.err | tail -1)
  local wall=$((SECONDS - t0))
  cat /tmp/tc.err >> "$out/log.txt"
  rep=$(grep '^{"wall_s"' /tmp/tc.err | tail -1)
  log "   $name: ${wall} s, at ${SECONDS} s"
  [[ $line == "{"* ]] && echo "{\"name\": \"$name\", \"wall_s\": $wall, ${line:1}" >> "$out/results.jsonl"
  [[ $rep == "{"* ]] && echo "{\"name\": \"$name\", ${rep:1}" >> "$out/threads.jsonl"
}
rps() { sed -n 's/.*"throughput_rps": \([0-9.]*\).*/\1/p' <<< "$1" | head -1; }

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; command -v python3; } >> "$out/log.txt" 2>&1 || true

# Saturation, then open loop at fractions of it.
base="--threads 16 --op relu --size 256"
j sat-default 40 gpubatch-load $base --inflight 1024 --requests 4000000
sat=$(rps "$LAST"); sat=${sat:-3000000}; sat=${sat%.*}
log "   saturation (default): $sat /s"
for p in 10 30 50 70 80 90; do
  r=$(( sat * p / 100 )); n=$(( r * 3 / 2 ))
  j open-default-$p 30 gpubatch-load $base --rate $r --requests $n
done

# 4. priority mix (10 % high) idle / 70 % / saturation; deadline run at 50 % with and without the watch
mix="--threads 16 --high 0.1 --size 256"
j mix-idle 30 gpubatch-mix $mix --rate 10000 --requests 15000
for p in 70 100; do
  r=$(( sat * p / 100 )); n=$(( r * 3 / 2 ))
  j mix-$p 45 gpubatch-mix $mix --rate $r --requests $n
done
r=$(( sat / 2 )); n=$(( r / 2 ))   # 0.5 s of requests: 1 % of them are 1,000,000 floats
dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate $r --requests $n"
j deadline-50-watch 60 gpubatch-mix $dl
ENVPFX="GPUBATCH_DEADLINE_WATCH=off "; export GPUBATCH_DEADLINE_WATCH=off
j deadline-50-nowatch 60 gpubatch-mix $dl
unset GPUBATCH_DEADLINE_WATCH ENVPFX

# The same with a latency target of 500 us.
printf 'preset = "adaptive"\ntarget_p99_us = 500\n' > .gpu/p99-500.toml
j sat-p99-500 40 gpubatch-load $base --config .gpu/p99-500.toml --inflight 1024 --requests 4000000
log "   saturation (p99-500): $(rps "$LAST") /s"
for p in 10 30 50 70 80 90; do
  r=$(( sat * p / 100 )); n=$(( r * 3 / 2 ))
  j open-p99-500-$p 30 gpubatch-load $base --config .gpu/p99-500.toml --rate $r --requests $n
done


# Summary table last.
{
if command -v python3 >/dev/null; then
  python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]
for r in rows:
    if r.get("failed"): print(f"FAILED (no JSON; timeout or error): {r['name']} after {r['wall_s']} s: {r.get('tail','')}")
print(f"{'run':24s} {'offered':>10s} {'got/s':>11s} {'GB/s in':>8s} {'p50 us':>9s} {'p99 us':>9s} {'lag p99':>8s} {'batch':>7s} ok")
for r in rows:
    if r.get("tool") == "gpubatch-mix" or "throughput_rps" not in r or r.get("failed"): continue
    gbps = r["throughput_rps"] * 4 * r["size"] / 1e9
    print(f"{r['name']:24s} {r.get('rate',0):10.0f} {r['throughput_rps']:11.0f} {gbps:8.2f} {r['latency_us']['p50']:9.1f} "
          f"{r['latency_us']['p99']:9.1f} {r.get('send_lag_us',{}).get('p99',0):8.1f} {r.get('mean_batch_size',0):7.1f} {r['verified']}")
print()
print(f"{'mix run':22s} {'offered':>9s} {'ok/s':>9s} {'hi p50':>8s} {'hi p99':>8s} {'lo p50':>8s} {'lo p99':>8s} {'lg p99':>8s} {'dl_exc':>7s} {'late p50':>8s} {'late p99':>8s} {'late max':>8s} {'fin>dl':>6s} {'qfull':>6s} ok")
for r in rows:
    if r.get("tool") != "gpubatch-mix" or r.get("failed"): continue
    L = r["latency_us"]; d = r["deadline_late_us"]
    print(f"{r['name']:22s} {r['offered_rate']:9.0f} {r['completed_per_s']:9.0f} {L['high']['p50']:8.1f} {L['high']['p99']:8.1f} "
          f"{L['low']['p50']:8.1f} {L['low']['p99']:8.1f} {L['large']['p99']:8.1f} {r['deadline_exceeded']:7d} {d['p50']:8.1f} "
          f"{d['p99']:8.1f} {d['max']:8.1f} {r['finished_after_deadline']:6d} {r['queue_full']:6d} {r['verified']}")
print()
for r in rows:
    if r.get("name") == "copy-rate":
        t, c = r["transfer_queue"], r["compute_queue"]
        print(f"copy-rate {r['bytes']:>9d} B: transfer queue h2d {t['h2d_gbps']} d2h {t['d2h_gbps']} GB/s; compute queue h2d {c['h2d_gbps']} d2h {c['d2h_gbps']} GB/s (dedicated transfer queue: {r['dedicated_transfer_queue']})")
tp = os.path.join(out, "threads.jsonl")
if os.path.exists(tp):
    print()
    for l in open(tp):
        r = json.loads(l)
        parts = [f"{k} x{v['threads']}: {v['user_s']:.2f}u+{v['system_s']:.2f}s" for k, v in
                 sorted(r["threads"].items(), key=lambda kv: -(kv[1]['user_s'] + kv[1]['system_s']))]
        print(f"{r['name']} (wall {r['wall_s']} s): " + "; ".join(parts))
PY
else
  cat "$out/results.jsonl"
fi
grep -h "p50" "$out/probe.txt" 2>/dev/null | head -12
echo "total ${SECONDS} s"
} > "$out/summary.txt" 2>&1
cat "$out/summary.txt"
