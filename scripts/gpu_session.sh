#!/usr/bin/env bash
# The measurements docs/BENCHMARKS.md reports, on a GPU machine, in one go (one device call):
# the bare hardware floor (shared probe), the previous build beside this one, a lone caller in
# every mode, 16 threads of 256-float relu, idle CPU, large requests, the request-size sweep,
# and the test binaries. Every gpubatch-load result is verified against the CPU reference.
#
# Build and bundle here (binaries by basename into .gpu/bin; see DESIGN.md "Running on the GPU
# machine"): gpubatch-load, gpubatch-copy-rate, gpubatch_tests, gpubatch_integration_tests, and
# optionally gpubatch-load-prev (the previous build) and latency (shared/probes/vk-latency).
# There:  bash scripts/gpu_session.sh OUTDIR [sections]
#   sections: trace41 rate40 part39 sweep39 big39 final39 slice34b thr34 slice34 line33 open33 row33 crowd33 early33 l1lone32 cpuspeed32 pin32 cpu32 lonepc32 lonepc31 parts31c pause31 parts31b parts31 lone31 lone30 ab30 host30 targets29 irq29 final29 open27 adm26b adm26 steps26 open26b open26 dl26 pause26 step26 crowdtrace26 lonesys26 loneprof26b loneprof26 final26 sat26c sat26b sat26 depth26 gen25 batch25 open25b final25b final25 open25 openprof25 prio25 dlalloc25 handl25 pool25 jem25 dlprof25c dlprof25b dlprof25 dlwake24 dlbud24b dlbud24 dlmemo24 dlall24 adm24 dw24 cpu24 dl24 split24 exdue23 x2open23 x2lbs23 confirm23 sweeps23 sus23 final23 hold23 prio23 lbs23b lbs23 cap23 ct22 sweeps22 tail22 gate22 perfstart22 rtcrowd22 sysp22 shard22 malloc22 trace22 pace22 x2set21b x2set21 final21 ewk21 inplace21 strided21 wide21 duplex21c duplex21b duplex21 final20c nearbig20 nearall20 nearlone20 nearline20c nearline20b nearline20 final20b crowdhold20 final20 ptrace20 split20 near20 bar20 sat13 hold13c hold13b hold13 expr13 prioq13 final13 dlstall13 dlwatch13b dlwatch13 x2crowd12 dllarge12 m64ab12 m64x12 crowd12 tool12 take12 final12b final12 upper12 rt12 fence12 crowdann12 sat11 packmin11 packall11 packone11 packab11 crowdprof11 final11 prioab11 priotrace11 slowmode11b slowmode11 slice11 nr10 final10b adm10e adm10d adm10c final10 watch10 admit10b admit10 dlpath10 crowd16set9 resset9 dlprof9 lonedev9 final9 shard9 snap9 twoproc9 poll9 runs9 tp9 cores9 spread8 final8 setbus2 setbus multibus strandab strandprof hostbw lanesab sweep6 lanedepth lanewait lanes6 bigeven xinline r1 final5b expressq prio h200t final4 helpers churn poollock bulktrace bulk leave dlcollapse sweeps thinkers handlergap handlerload handlerinline sparse slowmode mixed64 targets14 crowdhist growab why warmab regress mmcheck prepmem episodes tplift tailab tp99 crowdshape nofence ops28 ops28hb final27 steady sweep27 chunks2 chunks bigout lonebig crowdsplit directline directcheck directfinal direct streamcopy ntcopy copythreads vectrace vecdepth vecbus doneword pollpause lonewait handlers firstb s2final s2b s2 dlab final5 final4 targets dlperf sweep14 reserve spans2 storm storm2 spans openx runq stalls2 engine vec4 bus bus2 bus3 bus4 bus5 bus6 final3 stalls assign rule recheck import pcie small probe own final openab express mixprobe express2 nice crowdnice final2 deadlines graph lone crowd large bytes depth open trace multi slice sweep tests
# `load` runs take an environment prefix: load NAME env VAR=VALUE ... -- BINARY ARGS (A/B switches).
set -uo pipefail
out=${1:-${OUT:-/tmp/gpu-session}}
sections=${2:-"probe lone crowd large sweep tests"}
mkdir -p "$out"
run=.gpu/run.sh
have() { [ -x ".gpu/bin/$1" ]; }
# load NAME BINARY ARGS...: one gpubatch-load run; its JSON object, with "name" and "wall_s" added,
# goes to OUT/results.jsonl and its stderr to OUT/log.txt (few files: the device tool returns few).
load() {
  local name=$1; shift
  local envs=()
  if [ "$1" = env ]; then
    shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
  fi
  local bin=$1; shift
  have "$bin" || return 0
  echo "== $name: ${pin:-} ${envs[*]} $bin $*" >> "$out/log.txt"
  local t0=$SECONDS line
  line=$(${pin:-} env "${envs[@]}" timeout 90 "$run" "$bin" "$@" --json 2>> "$out/log.txt" | tail -1)
  local rc=$? wall=$((SECONDS - t0))
  echo "   $name: exit $rc, ${wall} s" | tee -a "$out/log.txt" >&2
  [[ $line == "{"* ]] && echo "{\"name\": \"$name\", \"wall_s\": $wall, ${line:1}" >> "$out/results.jsonl"
}
on() { [[ " $sections " == *" $1 "* ]]; }
# make_wrappers: /tmp/gpubatch-wrap/{gpubatch-load,gpubatch-copy-rate} run the bundled binaries
# through $run, so that bench/size_sweep.py (--bin /tmp/gpubatch-wrap) finds them by name.
make_wrappers() {
  mkdir -p /tmp/gpubatch-wrap
  for b in gpubatch-load gpubatch-copy-rate; do
    printf '#!/usr/bin/env bash\nexec %s/%s %s "$@"\n' "$PWD" "$run" "$b" > /tmp/gpubatch-wrap/$b
    chmod +x /tmp/gpubatch-wrap/$b
  done
}
# alternate REP A B: "A B" in odd rounds, "B A" in even ones (interleaved A/B runs, order swapped).
alternate() { if [ $(( $1 % 2 )) = 1 ]; then echo "$2 $3"; else echo "$3 $2"; fi; }
# off_irq: sets $slow to the CPU that takes the GPU's first interrupt vector and $others to every
# other CPU (a taskset list): the lone rows run there (DESIGN.md "The GPU's interrupt CPU").
off_irq() {
  local first
  first=$(grep -i nvidia /proc/interrupts | head -1 | cut -d: -f1 | tr -d ' ')
  slow=$(cat /proc/irq/$first/effective_affinity_list 2>/dev/null || echo none)
  others=$(seq 0 $(( $(nproc) - 1 )) | grep -vx "$slow" | paste -sd, -)
}
# traced NAME TRACE [env V=X ... --] BINARY ARGS...: one load with GPUBATCH_TRACE=OUT/TRACE.json, its batches broken
# into stages in OUT/batches-TRACE.txt (bench/trace_batches.py), the trace kept gzipped.
traced() {
  local name=$1 t=$2; shift 2
  local envs=()
  if [ "$1" = env ]; then
    shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
  fi
  load "$name" env "${envs[@]}" GPUBATCH_TRACE="$out/$t.json" -- "$@"
  if [ -f "$out/$t.json" ]; then
    python3 bench/trace_batches.py "$out/$t.json" --slowest 4 > "$out/batches-$t.txt" 2>&1
    gzip -9 "$out/$t.json"
  fi
}
# mix_sweeps: issue 14's priority and deadline sweeps (bench/mix_sweep.py) into OUT/sweep-*.jsonl.
mix_sweeps() {
  local sc rates
  for sc in priority deadline; do
    rates=10000,500000,1000000,2000000,2500000,3000000; [ $sc = deadline ] && rates=1000,5000,10000,20000,40000
    timeout 250 python3 bench/mix_sweep.py $sc --bin "$run gpubatch-mix" --extra "--device 0 --host-probe" \
      --rates $rates --seconds 2 --out "$out/sweep-$sc.jsonl" >> "$out/log.txt" 2>&1
    echo "   sweep $sc: exit $?" | tee -a "$out/log.txt" >&2
  done
}

nvidia-smi --query-gpu=name,driver_version --format=csv >> "$out/log.txt" 2>&1 || true
if on probe && have latency; then
  echo "== probe" >&2
  timeout 120 "$run" latency > "$out/probe.txt" 2>&1 || true
  echo "   probe: $SECONDS s into the session" >&2
fi

if on lone; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  load lone-prev-adaptive gpubatch-load-prev --preset adaptive $lone
  load lone-default gpubatch-load $lone --idle-ms 1000
  load lone-default-nolinger env GPUBATCH_STRAND_SPIN=off -- gpubatch-load $lone
  load lone-unbatched gpubatch-load --unbatched $lone --idle-ms 1000
  load lone-realtime gpubatch-load --preset realtime $lone --idle-ms 1000
  load lone-default-sync gpubatch-load --sync $lone
  load lone-default-sync-posted env GPUBATCH_INLINE_SUBMIT=off -- gpubatch-load --sync $lone
  load lone-realtime-sync gpubatch-load --preset realtime --sync $lone
  load lone-prev-sync gpubatch-load-prev --sync $lone
  load lone-prev-realtime-sync gpubatch-load-prev --preset realtime --sync $lone
  load lone-prev-unbatched gpubatch-load-prev --unbatched $lone
fi

# A synchronous caller completing its own lone batch (session of 2026-11-25): this build beside
# GPUBATCH_CALLER_AWAITS=off (a completion thread completes it, as before) and the previous build,
# interleaved twice; the other lone-caller modes once each.
if on own; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2; do
    load own-sync-$rep gpubatch-load --sync $lone --idle-ms 1000
    load own-sync-off-$rep env GPUBATCH_CALLER_AWAITS=off -- gpubatch-load --sync $lone
    load own-sync-prev-$rep gpubatch-load-prev --sync $lone
  done
  load own-sync-timestamps env GPUBATCH_GPU_TIMESTAMPS=on -- gpubatch-load --sync $lone
  load own-future gpubatch-load $lone
  load own-future-prev gpubatch-load-prev $lone
  load own-unbatched gpubatch-load --unbatched $lone
  load own-unbatched-prev gpubatch-load-prev --unbatched $lone
  for rep in 1 2; do  # resident mode: results in host memory (default) or in the ring (before)
    load own-realtime-sync-$rep gpubatch-load --preset realtime --sync $lone
    load own-realtime-sync-ring-$rep env GPUBATCH_RESIDENT_RESULTS=ring -- gpubatch-load --preset realtime --sync $lone
    load own-realtime-sync-prev-$rep gpubatch-load-prev --preset realtime --sync $lone
  done
  load own-realtime-future gpubatch-load --preset realtime $lone
  load own-realtime-dot gpubatch-load --preset realtime --sync --threads 1 --inflight 1 --requests 20000 --op dot --size 1024
  load own-realtime-crowd gpubatch-load --preset realtime --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2 3 4; do
    load own-crowd-$rep gpubatch-load $crowd
    load own-crowd-prev-$rep gpubatch-load-prev $crowd
  done
  load own-crowd-sync gpubatch-load --sync --threads 16 --requests 400000 --op relu --size 256
  load own-crowd-sync-prev gpubatch-load-prev --sync --threads 16 --requests 400000 --op relu --size 256
fi

# The final build's crowd beside the build without the queue's prefetch and the previous build,
# three interleaved rounds, and the lone caller once more (session of 2026-11-25, call 4).
if on final; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2 3; do
    load final-crowd-$rep gpubatch-load $crowd
    load final-crowd-noprefetch-$rep gpubatch-load-noprefetch $crowd
    load final-crowd-prev-$rep gpubatch-load-prev $crowd
  done
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2; do
    load final-sync-$rep gpubatch-load --sync $lone --idle-ms 1000
    load final-sync-prev-$rep gpubatch-load-prev --sync $lone
  done
  load final-future gpubatch-load $lone
  load final-future-prev gpubatch-load-prev $lone
  load final-unbatched gpubatch-load --unbatched $lone
  load final-unbatched-prev gpubatch-load-prev --unbatched $lone
  load final-realtime-sync gpubatch-load --preset realtime --sync $lone
fi

# Open loop, 16 threads of 256-float relu at fixed rates, this build beside the previous one
# (issue 14's p99 under load; session of 2026-11-25).
if on openab; then
  for rate in 360000 1080000 1800000 2500000; do
    o="--threads 16 --op relu --size 256 --rate $rate --requests $(( rate * 3 / 2 ))"
    load openab-$rate gpubatch-load $o
    load openab-$rate-prev gpubatch-load-prev $o
  done
fi

# The lone future and the express slot (second session of 2026-11-25): a future's caller that
# submits its lone batch itself beside GPUBATCH_FUTURE_INLINE=off (the io thread submits, as
# before) and the previous build; the 16-thread crowd beside the previous build; a 10 % priority
# mix (gpubatch-mix) idle, at 70 % and at 100 % of this build's closed-loop rate, with the express
# slot, GPUBATCH_EXPRESS=off and the previous build. Interleaved, so that drift hits all alike.
if on express; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2; do
    load future-$rep gpubatch-load $lone --idle-ms 1000
    load future-posted-$rep env GPUBATCH_FUTURE_INLINE=off -- gpubatch-load $lone
    load future-prev-$rep gpubatch-load-prev $lone
  done
  load lone-sync gpubatch-load --sync $lone
  load lone-unbatched gpubatch-load --unbatched $lone
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2; do
    load crowd-$rep gpubatch-load $crowd
    load crowd-prev-$rep gpubatch-load-prev $crowd
  done
  sat=$(sed -n 's/.*"name": "crowd-1".*"throughput_rps": \([0-9]*\).*/\1/p' "$out/results.jsonl" | head -1)
  sat=${sat:-3000000}
  mix="--threads 16 --high 0.1 --size 256"
  for p in idle 70 100; do
    if [ $p = idle ]; then r=10000; else r=$(( sat * p / 100 )); fi
    n=$(( r * 3 / 2 ))
    load mix-$p gpubatch-mix $mix --rate $r --requests $n
    load mix-$p-noexpress env GPUBATCH_EXPRESS=off -- gpubatch-mix $mix --rate $r --requests $n
    load mix-$p-prev gpubatch-mix-prev $mix --rate $r --requests $n
  done
fi

# Where a high-priority request's time goes (second session of 2026-11-25): the idle mix three
# times each way (express slot on, GPUBATCH_EXPRESS=off); 1.9 M/s (below the mix's own
# saturation) on, off and the previous build; 3.78 M/s offered with a trace (bench/trace_batches.py
# reads it) and with 4 sender threads instead of 16 (are the senders taking the executor's cores?).
if on mixprobe; then
  mix="--threads 16 --high 0.1 --size 256"
  for rep in 1 2 3; do
    load mixidle-$rep gpubatch-mix $mix --rate 10000 --requests 15000
    load mixidle-noexpress-$rep env GPUBATCH_EXPRESS=off -- gpubatch-mix $mix --rate 10000 --requests 15000
  done
  for v in "" "-noexpress" "-prev"; do
    case $v in -noexpress) e="env GPUBATCH_EXPRESS=off --"; b=gpubatch-mix;; -prev) e=""; b=gpubatch-mix-prev;; *) e=""; b=gpubatch-mix;; esac
    load mix1900k$v $e $b $mix --rate 1900000 --requests 2850000
  done
  load mix3780k-trace env GPUBATCH_TRACE=$out/trace-mix-3780k.json -- gpubatch-mix $mix --rate 3780000 --requests 5670000
  load mix1900k-trace env GPUBATCH_TRACE=$out/trace-mix-1900k.json -- gpubatch-mix $mix --rate 1900000 --requests 2850000
  for t in trace-mix-3780k trace-mix-1900k; do
    [ -f "$out/$t.json" ] && python3 bench/trace_batches.py "$out/$t.json" > "$out/$t.txt" 2>&1 && gzip -f "$out/$t.json"
  done
  load mix3780k-4thr gpubatch-mix --threads 4 --high 0.1 --size 256 --rate 3780000 --requests 5670000
  load mix3780k-4thr-noexpress env GPUBATCH_EXPRESS=off -- gpubatch-mix --threads 4 --high 0.1 --size 256 --rate 3780000 --requests 5670000
fi

# The express slot only where it pays (second session of 2026-11-25), beside GPUBATCH_EXPRESS=off
# and the previous build, interleaved; then one 1.9 M/s mix under `perf sched` (when .gpu/bin/perf
# is bundled): the longest a thread of the process waited runnable for a core.
if on express2; then
  mix="--threads 16 --high 0.1 --size 256"
  for rep in 1 2 3; do
    load mixidle-$rep gpubatch-mix $mix --rate 10000 --requests 15000
    load mixidle-noexpress-$rep env GPUBATCH_EXPRESS=off -- gpubatch-mix $mix --rate 10000 --requests 15000
    load mixidle-prev-$rep gpubatch-mix-prev $mix --rate 10000 --requests 15000
  done
  for rep in 1 2; do
    load mix1900k-$rep gpubatch-mix $mix --rate 1900000 --requests 2850000
    load mix1900k-noexpress-$rep env GPUBATCH_EXPRESS=off -- gpubatch-mix $mix --rate 1900000 --requests 2850000
    load mix1900k-prev-$rep gpubatch-mix-prev $mix --rate 1900000 --requests 2850000
  done
  if have perf; then
    echo "== perf sched" >> "$out/log.txt"
    timeout 120 "$run" perf sched record -o "$out/sched.data" -- "$PWD/$run" gpubatch-mix $mix --rate 1900000 \
      --requests 2850000 > "$out/sched-mix.txt" 2>&1
    timeout 120 "$run" perf sched latency -i "$out/sched.data" --sort max > "$out/sched-latency.txt" 2>&1
    rm -f "$out/sched.data"
  fi
fi

# thread_nice (second session of 2026-11-25): the same loads with the executor's threads at nice
# -10 (GPUBATCH_THREAD_NICE) beside the default 0, interleaved: the 10 % priority mix idle and at
# 1.9 M/s, the deadline mix (2 ms on half the requests, 1 % of 1,000,000 floats) at 1.5 M/s, and
# 16 threads of 256-float relu in open loop at 1.8 M/s.
if on nice; then
  mix="--threads 16 --high 0.1 --size 256"
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 1500000 --requests 750000"
  open="--threads 16 --op relu --size 256 --rate 1800000 --requests 2700000"
  for rep in 1 2; do
    for n in 0 -10; do
      load mixidle-nice$n-$rep env GPUBATCH_THREAD_NICE=$n -- gpubatch-mix $mix --rate 10000 --requests 15000
      load mix1900k-nice$n-$rep env GPUBATCH_THREAD_NICE=$n -- gpubatch-mix $mix --rate 1900000 --requests 2850000
      load deadline-nice$n-$rep env GPUBATCH_THREAD_NICE=$n -- gpubatch-mix $dl
      load open1800k-nice$n-$rep env GPUBATCH_THREAD_NICE=$n -- gpubatch-load $open
    done
  done
fi

# The crowd with the executor's threads at nice -10 and -5 beside 0 (16 callers and the
# executor's 5-6 threads share 16 cores), interleaved; then one perf profile of the crowd at 0
# (when .gpu/bin/perf is bundled): the strand's own breakdown.
if on crowdnice; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2 3; do
    for n in 0 -10 -5; do
      load crowd-nice$n-$rep env GPUBATCH_THREAD_NICE=$n -- gpubatch-load $crowd
    done
  done
  if have perf; then
    timeout 120 "$run" perf record -F 2999 -g -o "$out/crowd.data" -- "$PWD/$run" gpubatch-load $crowd > "$out/perf-crowd.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/crowd.data" --comm gpubatch-strand --no-children --sort dso,sym -g none \
      --percent-limit 0.3 > "$out/perf-strand.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/crowd.data" --no-children --sort comm -g none > "$out/perf-comm.txt" 2>&1
    rm -f "$out/crowd.data"
  fi
fi

# The session's final build beside the previous one (second session of 2026-11-25), interleaved:
# the lone future, the crowd, the 10 % priority mix idle and at 1.9 M/s.
if on final2; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  mix="--threads 16 --high 0.1 --size 256"
  for rep in 1 2; do
    load final-future-$rep gpubatch-load $lone
    load final-future-prev-$rep gpubatch-load-prev $lone
    load final-crowd-$rep gpubatch-load $crowd
    load final-crowd-prev-$rep gpubatch-load-prev $crowd
    load final-mixidle-$rep gpubatch-mix $mix --rate 10000 --requests 15000
    load final-mixidle-prev-$rep gpubatch-mix-prev $mix --rate 10000 --requests 15000
    load final-mix1900k-$rep gpubatch-mix $mix --rate 1900000 --requests 2850000
    load final-mix1900k-prev-$rep gpubatch-mix-prev $mix --rate 1900000 --requests 2850000
  done
  load final-sync gpubatch-load --sync $lone
fi

# Deadline lateness below overload (second session of 2026-11-25): 16 threads, a 2 ms deadline on
# half the requests, 1 % of them 1,000,000 floats, at 100 k/s and 300 k/s; and block_for with a
# 300 us block_timeout on a 4,096-request queue at 3 M/s offered; this build beside the previous
# one, interleaved.
if on deadlines; then
  for rep in 1 2; do
    for r in 100000 300000; do
      dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate $r --requests $(( r * 2 ))"
      load deadline-$r-$rep gpubatch-mix $dl
      load deadline-$r-prev-$rep gpubatch-mix-prev $dl
    done
    bf="--threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000"
    load blockfor-$rep gpubatch-mix $bf
    load blockfor-prev-$rep gpubatch-mix-prev $bf
  done
fi

if on crowd; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  load crowd-prev-adaptive gpubatch-load-prev --preset adaptive $crowd
  load crowd-default gpubatch-load $crowd --idle-ms 1000
  load crowd-realtime gpubatch-load --preset realtime $crowd --idle-ms 1000
  load crowd-throughput gpubatch-load --preset throughput $crowd
  load crowd-unbatched gpubatch-load --unbatched --threads 16 --requests 400000 --op relu --size 256
fi

if on large; then
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 262144,4194304,67108864 >> "$out/results.jsonl" 2>> "$out/log.txt"
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    load large-$s-prev-adaptive gpubatch-load-prev --preset adaptive $big
    load large-$s-default gpubatch-load $big
    load large-$s-throughput gpubatch-load --preset throughput $big
    load large-$s-default-host gpubatch-load $big --host-buffers
    load large-$s-unbatched gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
  done
  load chain-1m gpubatch-load --op chain --size 1000000 --threads 1 --inflight 1 --requests 200
fi

# What caps large requests (issue 12): the copy engine's rate beside the default, host buffers,
# deeper pipelines, the transfer queue off and the direct path; a lone 4,194,304-float request;
# a Chrome trace of each size with host buffers (bench/trace_batches.py reads it).
if on bus; then
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 4194304,8388608,67108864 >> "$out/results.jsonl" 2>> "$out/log.txt"
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    load bus-$s-default gpubatch-load $big
    load bus-$s-host gpubatch-load $big --host-buffers
    load bus-$s-prev-host gpubatch-load-prev $big --host-buffers
    load bus-$s-host-inflight8 env GPUBATCH_MAX_INFLIGHT_BATCHES=8 -- gpubatch-load $big --host-buffers
    load bus-$s-host-bytes32m-inflight8 env GPUBATCH_MAX_BATCH_BYTES=33554432 GPUBATCH_MAX_INFLIGHT_BATCHES=8 -- gpubatch-load $big --host-buffers
    load bus-$s-host-noxfer env GPUBATCH_TRANSFER_QUEUE=off -- gpubatch-load $big --host-buffers
    load bus-$s-host-direct env GPUBATCH_COPY_ENGINE_BYTES=never -- gpubatch-load $big --host-buffers
    load bus-$s-host-unbatched gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s --host-buffers
    load bus-$s-host-trace env GPUBATCH_TRACE=$out/trace-bus-$s.json -- gpubatch-load ${big/--requests $n/--requests $((n / 4))} --host-buffers
    gzip -f "$out/trace-bus-$s.json" 2>/dev/null || true
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  load bus-lone4m-default gpubatch-load $lone
  load bus-lone4m-host gpubatch-load $lone --host-buffers
  load bus-lone4m-prev-host gpubatch-load-prev $lone --host-buffers
  load bus-lone4m-host-direct env GPUBATCH_COPY_ENGINE_BYTES=never -- gpubatch-load $lone --host-buffers
  load bus-lone4m-unbatched gpubatch-load --unbatched $lone --host-buffers
fi

# Results of copy-engine batches copied back by the engine (the default) or written by the
# kernels straight into host memory (GPUBATCH_COPY_RESULTS=kernel), beside the direct path and
# the previous build, from vectors and from host buffers; a lone 4,194,304-float request.
if on bus2; then
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for hb in "" --host-buffers; do
      tag=${hb:+-host}
      load bus2-$s-prev$tag gpubatch-load-prev $big $hb
      load bus2-$s-default$tag gpubatch-load $big $hb
      load bus2-$s-kernel$tag env GPUBATCH_COPY_RESULTS=kernel -- gpubatch-load $big $hb
      load bus2-$s-direct$tag env GPUBATCH_COPY_ENGINE_BYTES=never -- gpubatch-load $big $hb
    done
    load bus2-$s-unbatched-host gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s --host-buffers
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  for hb in "" --host-buffers; do
    tag=${hb:+-host}
    load bus2-lone4m-prev$tag gpubatch-load-prev $lone $hb
    load bus2-lone4m-default$tag gpubatch-load $lone $hb
    load bus2-lone4m-kernel$tag env GPUBATCH_COPY_RESULTS=kernel -- gpubatch-load $lone $hb
    load bus2-lone4m-direct$tag env GPUBATCH_COPY_ENGINE_BYTES=never -- gpubatch-load $lone $hb
  done
  load bus2-lone4m-unbatched-host gpubatch-load --unbatched $lone --host-buffers
fi

# The default after the copy-engine rule changed (streaming ops read host memory directly at any
# size) beside the old line for every op (GPUBATCH_COPY_ENGINE_BYTES=262144) and the previous
# build; matmul (rereads its inputs: copy engine by default) against the direct path; the small
# end against the previous build.
if on bus3; then
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for hb in "" --host-buffers; do
      tag=${hb:+-host}
      load bus3-$s-prev$tag gpubatch-load-prev $big $hb
      load bus3-$s-default$tag gpubatch-load $big $hb
      load bus3-$s-line256k$tag env GPUBATCH_COPY_ENGINE_BYTES=262144 -- gpubatch-load $big $hb
    done
    load bus3-$s-unbatched-host gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s --host-buffers
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  for hb in "" --host-buffers; do
    tag=${hb:+-host}
    load bus3-lone4m-prev$tag gpubatch-load-prev $lone $hb
    load bus3-lone4m-default$tag gpubatch-load $lone $hb
    load bus3-lone4m-line256k$tag env GPUBATCH_COPY_ENGINE_BYTES=262144 -- gpubatch-load $lone $hb
  done
  load bus3-lone4m-unbatched-host gpubatch-load --unbatched $lone --host-buffers
  for m in 256 512; do
    mm="--threads 16 --inflight 8 --requests 4000 --op matmul --size $m"
    load bus3-matmul$m-default gpubatch-load $mm
    load bus3-matmul$m-direct env GPUBATCH_COPY_ENGINE_BYTES=never -- gpubatch-load $mm
    load bus3-matmul$m-prev gpubatch-load-prev $mm
  done
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  load bus3-crowd-prev gpubatch-load-prev $crowd
  load bus3-crowd-default gpubatch-load $crowd
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  load bus3-lone256-prev gpubatch-load-prev $lone
  load bus3-lone256-default gpubatch-load $lone
fi

# Large vector requests packed into host-cached memory (the default from 256 KiB) beside
# write-combined memory (GPUBATCH_CACHED_UPLOAD_BYTES=never), the previous build and the
# unbatched path; then the size sweep (SWEEP_EXTRA="--host-buffers" for caller memory).
if on bus4; then
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for rep in 1 2; do
      load bus4-$s-prev-$rep gpubatch-load-prev $big
      load bus4-$s-default-$rep gpubatch-load $big
      load bus4-$s-wc-$rep env GPUBATCH_CACHED_UPLOAD_BYTES=never -- gpubatch-load $big
      load bus4-$s-unbatched-$rep gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
    done
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  load bus4-lone4m-prev gpubatch-load-prev $lone
  load bus4-lone4m-default gpubatch-load $lone
  load bus4-lone4m-wc env GPUBATCH_CACHED_UPLOAD_BYTES=never -- gpubatch-load $lone
  load bus4-lone4m-unbatched gpubatch-load --unbatched $lone
fi

# What caps large vector requests: more completion threads (they copy results out and help
# the strand pack inputs) and glibc keeping freed 4 MiB blocks (no page faults for fresh vectors:
# GLIBC_TUNABLES), beside the default and the unbatched path.
if on bus5; then
  tun="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=4294967296"
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for rep in 1 2; do
      load bus5-$s-default-$rep gpubatch-load $big
      load bus5-$s-threads8-$rep env GPUBATCH_COMPLETION_THREADS=8 -- gpubatch-load $big
      load bus5-$s-threads16-$rep env GPUBATCH_COMPLETION_THREADS=16 -- gpubatch-load $big
      load bus5-$s-tunables-$rep env $tun -- gpubatch-load $big
      load bus5-$s-unbatched-$rep gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
      load bus5-$s-unbatched-tunables-$rep env $tun -- gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
    done
  done
fi

# Large vector inputs staged on the callers' threads (the default from 256 KiB in 7af2f58, since
# reverted) beside no staging (GPUBATCH_STAGE_BYTES=never), the previous build and the unbatched path.
if on bus6; then
  for s in 65536 262144 1048576; do
    n=$(( s == 65536 ? 40000 : s == 262144 ? 10000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for rep in 1 2; do
      load bus6-$s-prev-$rep gpubatch-load-prev $big
      load bus6-$s-default-$rep gpubatch-load $big
      load bus6-$s-nostage-$rep env GPUBATCH_STAGE_BYTES=never -- gpubatch-load $big
      load bus6-$s-unbatched-$rep gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
    done
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  load bus6-lone4m-prev gpubatch-load-prev $lone
  load bus6-lone4m-default gpubatch-load $lone
  load bus6-lone4m-nostage env GPUBATCH_STAGE_BYTES=never -- gpubatch-load $lone
  load bus6-lone4m-unbatched gpubatch-load --unbatched $lone
fi

# The final code of 2026-11-25's third session beside the previous build: large requests from
# vectors and from host buffers, a lone 4,194,304-float request, matmul, the lone 256-float
# caller and the crowd, interleaved.
# Where the p99 under load comes from (first session of 2026-11-26): gpubatch-stall-probe (4
# threads sleeping 100 us at a time, nothing of gpubatch in that process) alone on the idle
# machine, then beside an open-loop load and a mix in another process, and each load alone. A
# stall every probe thread sees at once on an idle machine is the machine's.
probe_beside() {  # probe_beside NAME SECONDS [load args...]: the probe while a load runs (or idle)
  local name=$1 secs=$2; shift 2
  if [ $# -gt 0 ]; then load "$name-load" "$@" & fi
  sleep 0.5
  timeout 60 "$run" gpubatch-stall-probe --threads 4 --seconds "$secs" | sed "s/^{/{\"name\": \"$name-probe\", /" >> "$out/results.jsonl"
  wait
}
if on stalls2 && have gpubatch-stall-probe; then
  for rep in 1 2; do
    probe_beside stall-idle-$rep 5
    probe_beside stall-open1080k-$rep 4 gpubatch-load --threads 16 --op relu --size 256 --rate 1080000 --requests 5400000
    probe_beside stall-mix1900k-$rep 4 gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 1900000 --requests 9500000
    probe_beside stall-crowd-$rep 4 gpubatch-load --threads 16 --inflight 1024 --requests 16000000 --op relu --size 256
  done
  cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.stat >> "$out/log.txt" 2>&1
fi

# Which threads want the cores when the probe above stalls beside a load: bench/run_queue.py
# samples the load's runnable threads by name every millisecond (first session of 2026-11-26).
if on runq && command -v python3 >/dev/null; then
  for spec in "open1080k gpubatch-load --threads 16 --op relu --size 256 --rate 1080000 --requests 3240000" \
              "mix1900k gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 1900000 --requests 5700000" \
              "crowd gpubatch-load --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"; do
    set -- $spec; name=$1; shift
    echo "== runq-$name: $*" >> "$out/log.txt"
    timeout 90 python3 bench/run_queue.py --json-out "$out/runq-$name.json" -- "$run" "$@" --json \
      2>> "$out/log.txt" | tail -1 | sed "s/^{/{\"name\": \"runq-$name\", /" >> "$out/results.jsonl"
    cat "$out/runq-$name.json" >&2
  done
fi

# The open loop's p99 at 1.08 M/s (first session of 2026-11-26): 16 senders beside 4 at the same
# total rate (do the callers' own bursts make it?), the executor's threads at nice -10, and a
# trace of the default broken into stages (bench/trace_batches.py).
if on openx; then
  for rep in 1 2; do
    for t in 16 4; do
      o="--threads $t --op relu --size 256 --rate 1080000 --requests 3240000"
      load openx-t$t-default-$rep gpubatch-load $o
      load openx-t$t-nice10-$rep env GPUBATCH_THREAD_NICE=-10 -- gpubatch-load $o
    done
  done
  load openx-t16-trace env GPUBATCH_TRACE=$out/trace-openx.json -- gpubatch-load --threads 16 --op relu --size 256 --rate 1080000 --requests 1620000
  [ -f "$out/trace-openx.json" ] && python3 bench/trace_batches.py "$out/trace-openx.json" > "$out/trace-openx.txt" 2>&1 && gzip -f "$out/trace-openx.json"
fi

# Deadlines with large requests in the mix near the vector path's capacity (1 % of 1,000,000-float
# requests at 300,000/s: about 12 GB/s of vectors), this build beside the previous one, interleaved
# three times (first session of 2026-11-26): is a collapse one build's or the load's?
if on dlab; then
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  for rep in 1 2 3; do
    load dlab-$rep gpubatch-mix $dl
    load dlab-prev-$rep gpubatch-mix-prev $dl
  done
  dl2="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 150000 --requests 450000"
  for rep in 1 2; do
    load dlab150k-$rep gpubatch-mix $dl2
    load dlab150k-prev-$rep gpubatch-mix-prev $dl2
  done
fi

# The final code of the first session of 2026-11-26: the crowd beside the previous build
# (gpubatch-load-prev: 100f68b), interleaved, and in resident mode; the lone caller; the latency
# target at rising rates; the open loop near saturation; priorities at saturation. Section final4
# ran it with the crowd branch merged (call 18); final5 after that merge was reverted (call 19),
# with the previous build also beside the lone caller, the saturated mix and deadlines with large
# requests (final_runs NAME [more]).
final_runs() {
  local p=$1 more=${2:-}
  local lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  local crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2 3; do
    load $p-crowd-$rep gpubatch-load $crowd
    load $p-crowd-prev-$rep gpubatch-load-prev $crowd
  done
  load $p-crowd-resident gpubatch-load --resident $crowd
  load $p-crowd-realtime gpubatch-load --preset realtime $crowd
  load $p-lone gpubatch-load $lone --idle-ms 1000
  [ -n "$more" ] && load $p-lone-prev gpubatch-load-prev $lone
  load $p-lone-sync gpubatch-load --sync $lone
  load $p-lone-realtime gpubatch-load --preset realtime --sync $lone --idle-ms 1000
  load $p-lone-unbatched gpubatch-load --unbatched $lone
  for r in 500000 1000000 1500000 2000000 2500000; do
    load $p-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3))
    load $p-p99t500-$r-prev gpubatch-mix-prev --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3))
  done
  for r in 1800000 2500000; do
    load $p-open$r gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3))
  done
  load $p-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
  local sat="--threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000"
  load $p-mixsat gpubatch-mix $sat
  [ -z "$more" ] && return 0
  load $p-mixsat-prev gpubatch-mix-prev $sat
  local dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  load $p-deadline-large gpubatch-mix $dl
  load $p-deadline-large-prev gpubatch-mix-prev $dl
}
if on final5; then final_runs final5 more; fi
if on final4; then final_runs final4; fi



# Second session of 2026-11-26, final call: the issues' targets with this session's final code
# beside the previous build (gpubatch-load-prev / gpubatch-mix-prev: the session's start on a
# GPU), interleaved; the lone caller in every mode with the bare floor (probe) first.
if on s2final; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2; do
    load fin-lone-$rep gpubatch-load $lone --idle-ms 1000
    load fin-lone-prev-$rep gpubatch-load-prev $lone
    load fin-lone-sync-$rep gpubatch-load --sync $lone
    load fin-lone-unbatched-$rep gpubatch-load --unbatched $lone
    load fin-lone-realtime-sync-$rep gpubatch-load --preset realtime --sync $lone --idle-ms 1000
    load fin-lone-realtime-$rep gpubatch-load --preset realtime $lone
  done
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2 3; do
    load fin-crowd-$rep gpubatch-load $crowd
    load fin-crowd-prev-$rep gpubatch-load-prev $crowd
  done
  for rep in 1 2; do
    load fin-crowd-realtime-$rep gpubatch-load --preset realtime $crowd
    load fin-crowd-realtime-prev-$rep gpubatch-load-prev --preset realtime $crowd
  done
  for r in 1080000 1800000 2500000; do
    load fin-open-$r gpubatch-mix --threads 16 --size 256 --rate $r --requests $((r * 3))
    load fin-open-prev-$r gpubatch-mix-prev --threads 16 --size 256 --rate $r --requests $((r * 3))
  done
  for r in 1000000 2000000; do
    load fin-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3))
  done
  sat="--threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000"
  load fin-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
  load fin-mixidle-prev gpubatch-mix-prev --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
  bf="--threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000"
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  for rep in 1 2; do
    load fin-mixsat-$rep gpubatch-mix $sat
    load fin-mixsat-prev-$rep gpubatch-mix-prev $sat
    load fin-dl-large-$rep gpubatch-mix $dl
    load fin-dl-large-prev-$rep gpubatch-mix-prev $dl
    load fin-blockfor-$rep gpubatch-mix $bf
    load fin-blockfor-prev-$rep gpubatch-mix-prev $bf
  done
  load fin-mixed64 gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
fi

# Second session of 2026-11-26, second call: the priority mix at saturation with high requests
# kept for the express slots beside a crowd and two express batches at once (this build, the
# same with GPUBATCH_EXPRESS_DEPTH=1, the previous build; interleaved, then one traced); the lone
# caller (this build with and without its threads' 1 ns timer slack, the previous); the crowd in
# adaptive and in resident mode (try_resident's reads reordered); block_for and deadlines again.
if on s2b; then
  sat="--threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000"
  idle="--threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000"
  for rep in 1 2 3; do
    load s2b-mixsat-$rep gpubatch-mix $sat
    load s2b-mixsat-depth1-$rep env GPUBATCH_EXPRESS_DEPTH=1 -- gpubatch-mix $sat
    load s2b-mixsat-prev-$rep gpubatch-mix-prev $sat
  done
  load s2b-mixidle gpubatch-mix $idle
  load s2b-mixidle-prev gpubatch-mix-prev $idle
  load s2b-mixsat-traced env GPUBATCH_TRACE="$out/trace-mixsat2.json" -- gpubatch-mix $sat
  if [ -f "$out/trace-mixsat2.json" ]; then
    python3 bench/trace_batches.py "$out/trace-mixsat2.json" --slowest 4 > "$out/trace-mixsat2.txt" 2>&1 || true
    gzip -f "$out/trace-mixsat2.json"
  fi
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3; do
    load s2b-lone-$rep gpubatch-load $lone
    load s2b-lone-slack-$rep env GPUBATCH_TIMER_SLACK=default -- gpubatch-load $lone
    load s2b-lone-prev-$rep gpubatch-load-prev $lone
  done
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load s2b-crowd-$rep gpubatch-load $crowd
    load s2b-crowd-prev-$rep gpubatch-load-prev $crowd
    load s2b-crowd-realtime-$rep gpubatch-load --preset realtime $crowd
    load s2b-crowd-realtime-prev-$rep gpubatch-load-prev --preset realtime $crowd
  done
  bf="--threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000"
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  for rep in 1 2; do
    load s2b-blockfor-$rep gpubatch-mix $bf
    load s2b-blockfor-prev-$rep gpubatch-mix-prev $bf
    load s2b-dl-large-$rep gpubatch-mix $dl
    load s2b-dl-large-prev-$rep gpubatch-mix-prev $dl
  done
fi

# Second session of 2026-11-26: waiting for room on a futex (block_for) and the executor's
# threads' 1 ns timer slack (deadlines), beside the previous build (gpubatch-mix-prev,
# gpubatch-load-prev: the same as the session's start on a GPU), interleaved; the priority mix
# at saturation traced (express batches stage by stage); the lone caller and the crowd.
if on s2; then
  bf="--threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000"
  bf8="--threads 8 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 2000000 --requests 3000000"
  for rep in 1 2 3; do
    load s2-blockfor-$rep gpubatch-mix $bf
    load s2-blockfor-prev-$rep gpubatch-mix-prev $bf
  done
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  dls="--threads 8 --size 256 --deadline-us 300 --deadline-fraction 1 --large 0.05 --large-size 250000 --rate 50000 --requests 150000"
  for rep in 1 2; do
    load s2-blockfor8-$rep gpubatch-mix $bf8
    load s2-blockfor8-prev-$rep gpubatch-mix-prev $bf8
    load s2-dl-large-$rep gpubatch-mix $dl
    load s2-dl-large-prev-$rep gpubatch-mix-prev $dl
    load s2-dl-light-$rep gpubatch-mix $dls
    load s2-dl-light-slack-$rep env GPUBATCH_TIMER_SLACK=default -- gpubatch-mix $dls
    load s2-dl-light-prev-$rep gpubatch-mix-prev $dls
  done
  sat="--threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000"
  load s2-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
  load s2-mixsat gpubatch-mix $sat
  load s2-mixsat-prev gpubatch-mix-prev $sat
  load s2-mixsat-traced env GPUBATCH_TRACE="$out/trace-mixsat.json" GPUBATCH_GPU_TIMESTAMPS=on -- gpubatch-mix $sat
  if [ -f "$out/trace-mixsat.json" ]; then
    python3 bench/trace_batches.py "$out/trace-mixsat.json" --slowest 8 > "$out/trace-mixsat.txt" 2>&1 || true
    gzip -f "$out/trace-mixsat.json"
  fi
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load s2-lone-$rep gpubatch-load $lone --idle-ms 1000
    load s2-lone-prev-$rep gpubatch-load-prev $lone
    load s2-lone-sync-$rep gpubatch-load --sync $lone
    load s2-crowd-$rep gpubatch-load $crowd
    load s2-crowd-prev-$rep gpubatch-load-prev $crowd
  done
fi

# Issue 11's and 14's targets with this session's final code (first session of 2026-11-26):
# the crowd and the lone caller beside the previous build (gpubatch-load-prev: the session's
# start, 100f68b), interleaved; a latency target of 500 us at rising rates; priorities idle and
# at saturation; deadlines with large requests; block_for; mixed sizes from 64 threads.
if on targets; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2 3; do
    load targets-crowd-$rep gpubatch-load $crowd
    load targets-crowd-prev-$rep gpubatch-load-prev $crowd
  done
  for rep in 1 2; do
    load targets-lone-$rep gpubatch-load $lone --idle-ms 1000
    load targets-lone-prev-$rep gpubatch-load-prev $lone
    load targets-lone-sync-$rep gpubatch-load --sync $lone
    load targets-lone-realtime-$rep gpubatch-load --preset realtime --sync $lone --idle-ms 1000
  done
  load targets-lone-unbatched gpubatch-load --unbatched $lone
  for r in 500000 1000000 1500000 2000000; do
    load targets-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3))
  done
  load targets-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
  load targets-mixsat gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000
  load targets-deadline-large gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000
  load targets-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000
  load targets-mixed64 gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
fi

# Why the deadline mix collapses at 1 M/s (first session of 2026-11-26): perf of
# gpubatch-mix with half the requests on a 2 ms deadline, by thread and by symbol per thread.
if on dlperf && have perf; then
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000"
  load dlperf-mixdl1000000 gpubatch-mix $dl
  load dlperf-mix1000000 gpubatch-mix --threads 16 --size 256 --rate 1000000 --requests 3000000
  timeout 120 "$run" perf record -F 999 -g -o "$out/dl.data" -- "$PWD/$run" gpubatch-mix $dl --json > "$out/perf-dl-run.txt" 2>&1
  timeout 120 "$run" perf report -i "$out/dl.data" --no-children --sort comm -g none > "$out/perf-dl-comm.txt" 2>&1
  for c in gpubatch-strand gpubatch-done gpubatch-expiry gpubatch-mix; do
    timeout 120 "$run" perf report -i "$out/dl.data" --comm $c --no-children --sort sym -g none --percent-limit 0.5 \
      > "$out/perf-dl-$c.txt" 2>&1
  done
  rm -f "$out/dl.data"
fi

# The open loop from light load to past saturation with the reserved generators (first session
# of 2026-11-26): p99 and p99/p50 per offered rate, the crowd's closed-loop rate as saturation,
# the mix at two rates, and deadline lateness (half the requests with a 2 ms deadline).
if on sweep14; then
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  load sweep14-crowd-1 gpubatch-load $crowd
  for rate in 500000 1080000 1800000 2500000 3200000 4000000; do
    for rep in 1 2; do
      load sweep14-open$rate-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $rate --requests $((rate * 3))
    done
  done
  load sweep14-crowd-2 gpubatch-load $crowd
  for rate in 1000000 1900000; do
    load sweep14-mix$rate gpubatch-mix --threads 16 --high 0.1 --size 256 --rate $rate --requests $((rate * 3))
    load sweep14-mixdl$rate gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate $rate --requests $((rate * 3))
  done
  load sweep14-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
fi

# The load generators' sample vectors reserved up front (first session of 2026-11-26): the open
# loop at 1.08 M/s and the mix at 1.9 M/s, this build beside the previous one (gpubatch-load-prev,
# gpubatch-mix-prev: vectors that double while the clock runs), interleaved three times; then a
# trace of this build (its events kept in 1 MiB chunks) with the GPU's own time per batch.
if on reserve; then
  o="--threads 16 --op relu --size 256 --rate 1080000 --requests 3240000"
  m="--threads 16 --high 0.1 --size 256 --rate 1900000 --requests 5700000"
  for rep in 1 2 3; do
    load reserve-open1080k-$rep gpubatch-load $o
    load reserve-open1080k-prev-$rep gpubatch-load-prev $o
    load reserve-mix1900k-$rep gpubatch-mix $m
    load reserve-mix1900k-prev-$rep gpubatch-mix-prev $m
  done
  load reserve-open1080k-trace env GPUBATCH_GPU_TIMESTAMPS=on GPUBATCH_TRACE=$out/trace-reserve.json -- gpubatch-load $o
  [ -f "$out/trace-reserve.json" ] && python3 bench/trace_batches.py "$out/trace-reserve.json" --slowest 6 > "$out/trace-reserve.txt" 2>&1 && gzip -f "$out/trace-reserve.json"
fi

# Do the long spans need kernels that read host memory? The open loop at 1.08 M/s on the direct
# path (the default) beside the copy engine for every batch (kernels read device memory), traced
# (first session of 2026-11-26).
if on spans2; then
  o="--threads 16 --op relu --size 256 --rate 1080000 --requests 3240000"
  for rep in 1 2; do
    for v in direct engine; do
      e=(GPUBATCH_GPU_TIMESTAMPS=on GPUBATCH_TRACE=$out/trace-spans2-$v-$rep.json)
      [ $v = engine ] && e+=(GPUBATCH_COPY_ENGINE_BYTES=0)
      load spans2-$v-$rep env "${e[@]}" -- gpubatch-load $o
      if [ -f "$out/trace-spans2-$v-$rep.json" ]; then
        echo "## spans2-$v-$rep" >> "$out/trace-spans2.txt"
        python3 bench/trace_batches.py "$out/trace-spans2-$v-$rep.json" --slowest 4 >> "$out/trace-spans2.txt" 2>&1
        rm -f "$out/trace-spans2-$v-$rep.json"
      fi
    done
  done
fi

# Bare submissions (gpubatch-submit-storm: no executor, one submitting thread, one waiter) at the
# executor's batch rate under the 1.08 M/s open loop (~14,000/s) and twice it, idle and with 16
# threads burning CPU, waiting in the driver and polling (first session of 2026-11-26).
if on storm && have gpubatch-submit-storm; then
  for burn in 0 16; do
    for r in 14000 28000; do
      for w in "" --poll; do
        timeout 60 "$run" gpubatch-submit-storm --rate $r --seconds 3 --burn $burn $w \
          | sed "s/^{/{\"name\": \"storm-$r-burn$burn${w:+-poll}\", /" >> "$out/results.jsonl" 2>> "$out/log.txt"
      done
    done
  done
  load storm-open1080k gpubatch-load --threads 16 --op relu --size 256 --rate 1080000 --requests 3240000
fi
# The same into host memory (--host, as direct-path kernels write), and a polled storm running
# beside the executor's open loop in another process: is a long span the whole device's?
if on storm2 && have gpubatch-submit-storm; then
  for rep in 1 2; do
    for w in "" --poll; do
      timeout 60 "$run" gpubatch-submit-storm --rate 14000 --seconds 3 --host $w \
        | sed "s/^{/{\"name\": \"storm2-host${w:+-poll}-$rep\", /" >> "$out/results.jsonl" 2>> "$out/log.txt"
    done
    timeout 60 "$run" gpubatch-submit-storm --rate 14000 --seconds 3 --host --poll --rerecord \
      | sed "s/^{/{\"name\": \"storm2-host-poll-rerecord-$rep\", /" >> "$out/results.jsonl" 2>> "$out/log.txt"
    timeout 60 "$run" gpubatch-submit-storm --rate 14000 --seconds 3 --host --poll --rerecord --burn 8 \
      | sed "s/^{/{\"name\": \"storm2-host-poll-rerecord-burn8-$rep\", /" >> "$out/results.jsonl" 2>> "$out/log.txt"
    load storm2-open1080k-$rep gpubatch-load --threads 16 --op relu --size 256 --rate 1080000 --requests 4320000 &
    sleep 0.5
    timeout 60 "$run" gpubatch-submit-storm --rate 5000 --seconds 3 --poll --host \
      | sed "s/^{/{\"name\": \"storm2-beside-open1080k-$rep\", /" >> "$out/results.jsonl" 2>> "$out/log.txt"
    wait
  done
fi

# The open loop's long "device" spans (first session of 2026-11-26): traced with the GPU's own
# time per batch (GPUBATCH_GPU_TIMESTAMPS=on), with the completion threads blocking in the driver
# (the default) and polling the timeline counter for every batch (GPUBATCH_POLL_ALL=on).
if on spans; then
  o="--threads 16 --op relu --size 256 --rate 1080000 --requests 2160000"
  for rep in 1 2; do
    for v in block poll; do
      e=(GPUBATCH_GPU_TIMESTAMPS=on GPUBATCH_TRACE=$out/trace-spans-$v-$rep.json)
      [ $v = poll ] && e+=(GPUBATCH_POLL_ALL=on GPUBATCH_COMPLETION_SPIN_US=10000)
      load spans-$v-$rep env "${e[@]}" -- gpubatch-load $o
      [ -f "$out/trace-spans-$v-$rep.json" ] && python3 bench/trace_batches.py "$out/trace-spans-$v-$rep.json" --slowest 8 > "$out/trace-spans-$v-$rep.txt" 2>&1 && gzip -f "$out/trace-spans-$v-$rep.json"
    done
  done
fi

# The copy engine for HostBuffers (first session of 2026-11-26): does an upload on the transfer
# queue overlap the previous batch's download? The raw rate each way and both ways at once, then
# the default (direct) beside the copy engine for every batch, with results copied back or
# written by the kernels, at the default depth and at twice it; a trace of each engine variant.
if on engine; then
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 4194304,16777216,67108864 >> "$out/results.jsonl" 2>> "$out/log.txt"
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s --host-buffers"
    load engine-$s-direct gpubatch-load $big
    load engine-$s-ce env GPUBATCH_COPY_ENGINE_BYTES=0 -- gpubatch-load $big
    load engine-$s-ce-kernel env GPUBATCH_COPY_ENGINE_BYTES=0 GPUBATCH_COPY_RESULTS=kernel -- gpubatch-load $big
    load engine-$s-ce-depth4 env GPUBATCH_COPY_ENGINE_BYTES=0 GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $big
    load engine-$s-ce-kernel-depth4 env GPUBATCH_COPY_ENGINE_BYTES=0 GPUBATCH_COPY_RESULTS=kernel GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $big
    load engine-$s-direct-depth4 env GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $big
    for v in ce ce-kernel; do
      extra=(GPUBATCH_COPY_ENGINE_BYTES=0); [ $v = ce-kernel ] && extra+=(GPUBATCH_COPY_RESULTS=kernel)
      load engine-$s-$v-trace env "${extra[@]}" GPUBATCH_TRACE=$out/trace-engine-$s-$v.json -- gpubatch-load ${big/--requests $n/--requests $((n / 8))}
      gzip -f "$out/trace-engine-$s-$v.json" 2>/dev/null || true
    done
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304 --host-buffers"
  load engine-lone4m-direct gpubatch-load $lone
  load engine-lone4m-ce env GPUBATCH_COPY_ENGINE_BYTES=0 -- gpubatch-load $lone
  load engine-lone4m-ce-kernel env GPUBATCH_COPY_ENGINE_BYTES=0 GPUBATCH_COPY_RESULTS=kernel -- gpubatch-load $lone
fi

# Four elements per invocation in the built-in element-wise kernels (first session of
# 2026-11-26, commit 626e345, reverted after this section's call: slower from HostBuffers):
# GPUBATCH_EW_VECTOR=on beside off (one element per invocation, the kernels before),
# interleaved twice, with the copy engine's raw rate and the unbatched path. Only that commit's
# build knows GPUBATCH_EW_VECTOR.
if on vec4; then
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 4194304,67108864 >> "$out/results.jsonl" 2>> "$out/log.txt"
  for rep in 1 2; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 40000 : 4000 ))
      big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
      for hb in --host-buffers ""; do
        tag=${hb:+-host}
        load vec4-$s-on$tag-$rep gpubatch-load $big $hb
        load vec4-$s-off$tag-$rep env GPUBATCH_EW_VECTOR=off -- gpubatch-load $big $hb
      done
      [ $rep = 1 ] && load vec4-$s-unbatched-host gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s --host-buffers
    done
    lone4m="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304 --host-buffers"
    load vec4-lone4m-on-$rep gpubatch-load $lone4m
    load vec4-lone4m-off-$rep env GPUBATCH_EW_VECTOR=off -- gpubatch-load $lone4m
    lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
    load vec4-lone256-on-$rep gpubatch-load $lone
    load vec4-lone256-off-$rep env GPUBATCH_EW_VECTOR=off -- gpubatch-load $lone
    crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
    load vec4-crowd-on-$rep gpubatch-load $crowd
    load vec4-crowd-off-$rep env GPUBATCH_EW_VECTOR=off -- gpubatch-load $crowd
  done
fi

if on final3; then
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for hb in "" --host-buffers; do
      tag=${hb:+-host}
      load final3-$s-prev$tag gpubatch-load-prev $big $hb
      load final3-$s-default$tag gpubatch-load $big $hb
      load final3-$s-unbatched$tag gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s $hb
    done
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  for hb in "" --host-buffers; do
    tag=${hb:+-host}
    load final3-lone4m-prev$tag gpubatch-load-prev $lone $hb
    load final3-lone4m-default$tag gpubatch-load $lone $hb
    load final3-lone4m-unbatched$tag gpubatch-load --unbatched $lone $hb
  done
  mm="--threads 16 --inflight 8 --requests 4000 --op matmul --size 512"
  load final3-matmul512-prev gpubatch-load-prev $mm
  load final3-matmul512-default gpubatch-load $mm
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2; do
    load final3-crowd-prev-$rep gpubatch-load-prev $crowd
    load final3-crowd-default-$rep gpubatch-load $crowd
    load final3-lone256-prev-$rep gpubatch-load-prev $lone
    load final3-lone256-default-$rep gpubatch-load $lone
  done
fi

# Where the p99 under load goes (issue 14): the open loop and the priority mix near saturation
# with glibc never giving memory back (no trims, no munmaps: no TLB shootdowns across the
# process's threads) beside the default, interleaved; the host's THP settings logged.
if on stalls; then
  for f in /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; do
    echo "== $f: $(cat $f 2>&1)" >> "$out/log.txt"
  done
  tun="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=4294967296"
  open="--threads 16 --op relu --size 256 --rate 1800000 --requests 2700000"
  mix="--threads 16 --high 0.1 --size 256 --rate 1900000 --requests 2850000"
  for rep in 1 2 3; do
    load stalls-open-default-$rep gpubatch-load $open
    load stalls-open-tunables-$rep env $tun -- gpubatch-load $open
    load stalls-mix-default-$rep gpubatch-mix $mix
    load stalls-mix-tunables-$rep env $tun -- gpubatch-mix $mix
  done
fi

# Results taken in one pass (assign, not resize and memcpy) with vectors: this build beside
# the previous one and the unbatched path, interleaved.
if on assign; then
  for rep in 1 2; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 40000 : 4000 ))
      big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
      load assign-$s-prev-$rep gpubatch-load-prev $big
      load assign-$s-default-$rep gpubatch-load $big
      load assign-$s-unbatched-$rep gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
    done
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  load assign-lone4m-prev gpubatch-load-prev $lone
  load assign-lone4m-default gpubatch-load $lone
fi

# The streaming rule on another device (run it on nvidia-h200): the default (direct for relu)
# beside the old 256 KiB line for every op and the previous build, from vectors and HostBuffers;
# matmul through the copy engine (default) against the direct path.
if on rule; then
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for hb in "" --host-buffers; do
      tag=${hb:+-host}
      load rule-$s-prev$tag gpubatch-load-prev $big $hb
      load rule-$s-default$tag gpubatch-load $big $hb
      load rule-$s-line256k$tag env GPUBATCH_COPY_ENGINE_BYTES=262144 -- gpubatch-load $big $hb
    done
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304 --host-buffers"
  load rule-lone4m-prev-host gpubatch-load-prev $lone
  load rule-lone4m-default-host gpubatch-load $lone
  load rule-lone4m-line256k-host env GPUBATCH_COPY_ENGINE_BYTES=262144 -- gpubatch-load $lone
  mm="--threads 16 --inflight 8 --requests 4000 --op matmul --size 512"
  load rule-matmul512-default gpubatch-load $mm
  load rule-matmul512-direct env GPUBATCH_COPY_ENGINE_BYTES=never -- gpubatch-load $mm
fi

# 1,048,576-float requests three times over, interleaved: vectors this build against the
# previous one, HostBuffers direct (default) against the copy engine for every op.
if on recheck; then
  big="--threads 16 --inflight 8 --requests 4000 --op relu --size 1048576"
  for rep in 1 2 3; do
    load recheck-prev-$rep gpubatch-load-prev $big
    load recheck-default-$rep gpubatch-load $big
    load recheck-default-host-$rep gpubatch-load $big --host-buffers
    load recheck-line256k-host-$rep env GPUBATCH_COPY_ENGINE_BYTES=262144 -- gpubatch-load $big --host-buffers
  done
fi

# Imported caller memory (Device::import_host) on NVIDIA: its tests, then its rate beside
# allocate_host's buffers, interleaved.
if on import; then
  if have gpubatch_tests; then
    GPUBATCH_LOG_LEVEL=debug timeout 120 "$run" gpubatch_tests --gtest_filter='*HostImport*' --gtest_brief=1 > "$out/import-tests.txt" 2>&1
    echo "import tests exit $?" | tee -a "$out/log.txt"
  fi
  for rep in 1 2; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 40000 : 4000 ))
      big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
      load import-$s-host-$rep gpubatch-load $big --host-buffers
      load import-$s-import-$rep gpubatch-load $big --import
    done
  done
  lone="--threads 1 --inflight 1 --requests 200 --op relu --size 4194304"
  load import-lone4m-host gpubatch-load $lone --host-buffers
  load import-lone4m-import gpubatch-load $lone --import
fi

# What the direct path's kernels get across the bus, a lone request of 4,194,304 floats from a
# HostBuffer: relu (16 MiB read, 16 MiB written), add (32 MiB read: b is packed into host memory
# too, 16 MiB written), dot (32 MiB read, one float written).
if on pcie; then
  for op in relu add dot; do
    load pcie-$op gpubatch-load --threads 1 --inflight 1 --requests 200 --op $op --size 4194304 --host-buffers
  done
fi

# The small end, this build beside the previous one, four rounds interleaved: does the crowd
# differ (calls 4 and 8 of the third session of 2026-11-25 read 2-7 % lower)?
if on small; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4; do
    load small-crowd-prev-$rep gpubatch-load-prev $crowd
    load small-crowd-default-$rep gpubatch-load $crowd
    load small-lone-prev-$rep gpubatch-load-prev $lone
    load small-lone-default-$rep gpubatch-load $lone
  done
fi

# Large requests against the batch's byte cap and in-flight depth (issue 12: choose by bytes).
if on bytes; then
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    for cap in 8388608 33554432 134217728; do
      for depth in 2 4; do
        load bytes-$s-cap$cap-depth$depth env GPUBATCH_MAX_BATCH_BYTES=$cap GPUBATCH_MAX_INFLIGHT_BATCHES=$depth -- gpubatch-load $big
      done
    done
    load bytes-$s-default gpubatch-load $big
    load bytes-$s-unbatched gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
  done
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  load bytes-crowd-cap33554432-depth4 env GPUBATCH_MAX_BATCH_BYTES=33554432 GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $crowd
  load bytes-crowd-default gpubatch-load $crowd
fi

# Large requests with the default (8 MiB batches, half a slot each) beside deeper pipelines and
# more completion threads.
if on depth; then
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    load depth-$s-default gpubatch-load $big
    load depth-$s-inflight4 env GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $big
    load depth-$s-threads8 env GPUBATCH_COMPLETION_THREADS=8 -- gpubatch-load $big
    load depth-$s-inflight4-threads8 env GPUBATCH_MAX_INFLIGHT_BATCHES=4 GPUBATCH_COMPLETION_THREADS=8 -- gpubatch-load $big
    load depth-$s-unbatched gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
  done
fi

# Open loop, 16 threads of 256-float relu at fixed rates: the default beside fewer polling
# threads, with the cgroup's CPU limit and throttling counters before and after.
if on open; then
  for f in /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.stat; do echo "== $f" >> "$out/log.txt"; cat $f >> "$out/log.txt" 2>&1; done
  nproc >> "$out/log.txt"
  for rate in 360000 1080000 1800000; do
    n=$(( rate * 3 / 2 ))
    o="--threads 16 --op relu --size 256 --rate $rate --requests $n"
    load open-$rate-default gpubatch-load $o
    load open-$rate-spin0 env GPUBATCH_COMPLETION_SPIN_US=0 -- gpubatch-load $o
    load open-$rate-nolinger env GPUBATCH_STRAND_SPIN=off -- gpubatch-load $o
  done
  echo "== /sys/fs/cgroup/cpu.stat after" >> "$out/log.txt"; cat /sys/fs/cgroup/cpu.stat >> "$out/log.txt" 2>&1
fi

# Two GPUs (nvidia-h200-x2): each alone beside both behind one executor, for small and large
# requests and a lone caller; then both with one device lost 1 s into the run (issue 15).
if on multi; then
  small="--threads 32 --inflight 1024 --requests 8000000 --op relu --size 256"
  big="--threads 16 --inflight 8 --op relu --size 1048576"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for d in "device 0" "device 1" "devices 0,1"; do
    tag=${d// /}; tag=${tag//,/-}
    load multi-256-$tag gpubatch-load --$d $small
    load multi-1m-$tag gpubatch-load --$d $big --requests $([ "$tag" = devices0-1 ] && echo 8000 || echo 4000)
    load multi-lone-$tag gpubatch-load --$d $lone
  done
  load multi-loss gpubatch-load --devices 0,1 --threads 32 --inflight 1024 --requests 12000000 --op relu --size 256 --lose-device-ms 1000
fi

# Open loop near where p99 jumps, three times each: the completion thread's blocking wait in
# slices of 100 ms (the default) against 1 ms and 200 us (a late wake-up is caught by the look).
if on slice; then
  for rate in 1600000 1800000; do
    o="--threads 16 --op relu --size 256 --rate $rate --requests $((rate * 3 / 2))"
    for rep in 1 2 3; do
      load slice-$rate-100ms-$rep gpubatch-load $o
      load slice-$rate-1ms-$rep env GPUBATCH_WAIT_SLICE_US=1000 -- gpubatch-load $o
      load slice-$rate-200us-$rep env GPUBATCH_WAIT_SLICE_US=200 -- gpubatch-load $o
    done
  done
fi

# A Chrome trace (GPUBATCH_TRACE) of the open loop at 1,600,000/s, where p99 jumps, gzipped; and
# the priority mix at 70 % and 100 % of a 3.2 M/s saturation.
if on trace; then
  o="--threads 16 --op relu --size 256 --rate 1600000 --requests 2400000"
  load trace-1600000 env GPUBATCH_TRACE=$out/trace-1600000.json -- gpubatch-load $o
  gzip -f "$out/trace-1600000.json" 2>/dev/null || true
  load open-2200000-default gpubatch-load --threads 16 --op relu --size 256 --rate 2200000 --requests 3300000
  for r in 2236400 3194860; do
    if have gpubatch-mix; then
      echo "== mix-$r" >> "$out/log.txt"
      timeout 60 "$run" gpubatch-mix --threads 16 --high 0.1 --size 256 --rate $r --requests $((r * 3 / 2)) --json 2>> "$out/log.txt" | tail -1 | sed "s/^{/{\"name\": \"mix-$r\", /" >> "$out/mix.jsonl"
    fi
  done
fi

if on sweep && have gpubatch-copy-rate && command -v python3 >/dev/null; then
  make_wrappers
  echo "== sweep" >&2
  timeout 300 python3 bench/size_sweep.py --bin /tmp/gpubatch-wrap --out "$out/size-sweep.jsonl" --threads 16 \
    --inflight 8 --presets ${SWEEP_PRESETS:-adaptive,throughput} --bytes-per-run ${SWEEP_BYTES:-2.5e8} --max-requests 200000 \
    ${SWEEP_EXTRA:+--extra=$SWEEP_EXTRA} > "$out/sweep.txt" 2>&1 || true
fi

# The request size sweep with the build of the third session of 2026-11-27: 16 callers keeping 8
# each in flight (three presets and unbatched), and one caller with one in flight (adaptive and
# unbatched), every size, beside gpubatch-copy-rate.
if on sweep27 && have gpubatch-copy-rate && command -v python3 >/dev/null; then
  make_wrappers
  echo "== sweep27" >&2
  timeout 400 python3 bench/size_sweep.py --bin /tmp/gpubatch-wrap --out "$out/size-sweep-16.jsonl" --threads 16 \
    --inflight 8 --presets latency,throughput,adaptive --bytes-per-run ${SWEEP_BYTES:-1e9} --max-requests 200000 > "$out/sweep-16.txt" 2>&1 || true
  timeout 200 python3 bench/size_sweep.py --bin /tmp/gpubatch-wrap --out "$out/size-sweep-1.jsonl" --threads 1 \
    --inflight 1 --presets adaptive --bytes-per-run 2e8 --max-requests 20000 > "$out/sweep-1.txt" 2>&1 || true
fi

# The graph API's fused 3-op chain on 1,000,000 floats: from and into std::vectors (CPU copies)
# beside from and into HostBuffers (no CPU copy), in one process (issue 12's 0.4 ms target).
if on graph && have graph_bench; then
  echo "== graph" >&2
  timeout 120 "$run" graph_bench --benchmark_filter='Chain' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_format=json > "$out/graph.json" 2>> "$out/log.txt" || true
fi

# Futures against completion handlers (gpubatch-load --handlers): what std::promise costs the
# crowd (one futex system call per set_value; DESIGN.md "What a std::future costs") and the lone caller.
if on handlers; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for round in 1 2 3; do
    load handlers-crowd-futures-$round gpubatch-load $crowd
    load handlers-crowd-handlers-$round gpubatch-load --handlers $crowd
    [ "${HANDLERS_SPIN:-}" ] && load handlers-crowd-handlers-spin-$round gpubatch-load --handlers --handler-spin-us 20 $crowd
    # gpubatch-load-prev: the previous build, whose handler calls copied the handle's shared_ptr
    load handlers-crowd-handlers-prev-$round gpubatch-load-prev --handlers $crowd
  done
  for round in 1 2; do
    load handlers-lone-futures-$round gpubatch-load $lone
    load handlers-lone-handlers-$round gpubatch-load --handlers $lone
    load handlers-lone-handlers-spin-$round gpubatch-load --handlers --handler-spin-us 20 $lone
    load handlers-lone-sync-$round gpubatch-load --sync $lone
  done
fi

# The copy-engine hang (RELIABILITY.md "A copy-engine batch that never completes"): fresh devices'
# first concurrent batches, arms interleaved in chunks under `timeout` (a hang ends its process
# with status 3 after the 5 s watchdog; 124 means even that did not come). FIRSTB_ROUNDS (4),
# FIRSTB_SECONDS (25) per chunk, FIRSTB_ARMS (each arm's words, ';'-separated: flags, VAR=VALUE
# for its environment, "prev" for gpubatch-first-batches-prev, the previous build).
if on firstb && have gpubatch-first-batches; then
  IFS=';' read -ra arms <<< "${FIRSTB_ARMS:-fresh;fresh --prebuild;fresh --warm;fresh --direct}"
  for round in $(seq 1 "${FIRSTB_ROUNDS:-4}"); do
    for arm in "${arms[@]}"; do
      # Words of an arm: "prev" runs the previous build's binary, VAR=VALUE goes to the
      # environment, "fresh" is a label, the rest are flags.
      bin=gpubatch-first-batches; envs=(); flags=()
      for w in $arm; do
        case $w in
          prev) bin=gpubatch-first-batches-prev ;;
          fresh) ;;
          [A-Z]*=*) envs+=("$w") ;;
          *) flags+=("$w") ;;
        esac
      done
      line=$(env "${envs[@]}" timeout $(( ${FIRSTB_SECONDS:-25} + 30 )) "$run" $bin "${flags[@]}" --seconds "${FIRSTB_SECONDS:-25}" 2>> "$out/log.txt" | tail -1)
      rc=$?
      echo "{\"name\": \"firstb\", \"round\": $round, \"arm\": \"$arm\", \"rc\": $rc, \"out\": ${line:-null}}" >> "$out/firstb.jsonl"
      echo "   firstb round $round [$arm]: rc $rc ${line:0:160}" >&2
    done
  done
fi

# A lone future completed by its own call (lone_future_waits, fourth session of 2026-11-26):
# this build beside GPUBATCH_LONE_FUTURE_WAITS=off and the previous build, with the synchronous
# paths and resident mode, interleaved; patterns that are not lone (one thread with 64 in flight,
# four lone callers) on and off; the crowd beside the previous build (it must not drop).
if on lonewait; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2 3; do
    load lw-future-$rep gpubatch-load $lone
    load lw-future-off-$rep env GPUBATCH_LONE_FUTURE_WAITS=off -- gpubatch-load $lone
    load lw-future-prev-$rep gpubatch-load-prev $lone
    load lw-sync-$rep gpubatch-load --sync $lone
    load lw-unbatched-$rep gpubatch-load --unbatched $lone
    load lw-rt-future-$rep gpubatch-load --preset realtime $lone
    load lw-rt-future-off-$rep env GPUBATCH_LONE_FUTURE_WAITS=off -- gpubatch-load --preset realtime $lone
    load lw-rt-sync-$rep gpubatch-load --preset realtime --sync $lone
  done
  for rep in 1 2; do
    load lw-t1x64-$rep gpubatch-load --threads 1 --inflight 64 --requests 400000 --op relu --size 256
    load lw-t1x64-off-$rep env GPUBATCH_LONE_FUTURE_WAITS=off -- gpubatch-load --threads 1 --inflight 64 --requests 400000 --op relu --size 256
    load lw-t4x1-$rep gpubatch-load --threads 4 --inflight 1 --requests 80000 --op relu --size 256
    load lw-t4x1-off-$rep env GPUBATCH_LONE_FUTURE_WAITS=off -- gpubatch-load --threads 4 --inflight 1 --requests 80000 --op relu --size 256
    load lw-crowd-$rep gpubatch-load $crowd
    load lw-crowd-prev-$rep gpubatch-load-prev $crowd
    load lw-rt-crowd-$rep gpubatch-load --preset realtime $crowd
  done
  load lw-idle gpubatch-load --threads 1 --inflight 1 --requests 2000 --op relu --size 256 --idle-ms 1000
  load lw-rt-idle gpubatch-load --preset realtime --threads 1 --inflight 1 --requests 2000 --op relu --size 256 --idle-ms 1000
fi

# How long a poll spins with the pause hint before it yields between looks (GPUBATCH_POLL_PAUSE_US,
# default 5): the lone caller's modes and the crowd at 5 and 50, interleaved.
if on pollpause; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2 3; do
    for p in 5 50; do
      load pp$p-future-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load $lone
      load pp$p-sync-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load --sync $lone
      load pp$p-unbatched-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load --unbatched $lone
    done
  done
  for rep in 1 2; do
    for p in 5 50; do load pp$p-crowd-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load $crowd; done
  done
fi

# Whether a done word written by the batch itself is seen before the timeline counter
# (bench/probes/done-word, fifth session of 2026-11-26), beside the lone caller's modes.
if on doneword; then
  for rep in 1 2; do
    have done && timeout 120 "$run" done >> "$out/done-word.txt" 2>&1
    load dw-future-$rep gpubatch-load --threads 1 --inflight 1 --requests 20000 --op relu --size 256
    load dw-sync-$rep gpubatch-load --sync --threads 1 --inflight 1 --requests 20000 --op relu --size 256
    load dw-unbatched-$rep gpubatch-load --unbatched --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  done
fi

# Where a large vector request's CPU goes (fifth session of 2026-11-26): vectors against
# HostBuffers and the unbatched path at 1,048,576 and 65,536 floats, each beside the same run with
# glibc keeping freed large blocks in its heap (no mmap and page faults per result vector); then a
# perf profile of the vector run (when .gpu/bin/perf is bundled).
if on vecbus; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  mid="--threads 16 --inflight 8 --op relu --size 65536 --requests 60000"
  keep="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"
  for rep in 1 2; do
    load vb-big-vec-$rep gpubatch-load $big
    load vb-big-vec-keep-$rep env $keep -- gpubatch-load $big
    load vb-big-host-$rep gpubatch-load $big --host-buffers
    load vb-big-unb-$rep gpubatch-load $big --unbatched
    load vb-big-unb-keep-$rep env $keep -- gpubatch-load $big --unbatched
    load vb-mid-vec-$rep gpubatch-load $mid
    load vb-mid-vec-keep-$rep env $keep -- gpubatch-load $mid
    load vb-mid-host-$rep gpubatch-load $mid --host-buffers
  done
  if have perf; then
    timeout 120 "$run" perf record -F 999 -g -o "$out/vb.data" -- "$PWD/$run" gpubatch-load $big > "$out/perf-vb-run.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/vb.data" --no-children --sort comm,dso,sym -g none \
      --percent-limit 0.4 > "$out/perf-vb.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/vb.data" --no-children --sort comm -g none > "$out/perf-vb-comm.txt" 2>&1
    rm -f "$out/vb.data"
  fi
fi

# What carries large vector requests (fifth session of 2026-11-26): in-flight depth, completion
# threads and batch bytes beside the default and the unbatched path, interleaved.
if on vecdepth; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  mid="--threads 16 --inflight 8 --op relu --size 65536 --requests 60000"
  for rep in 1 2; do
    load vd-big-default-$rep gpubatch-load $big
    load vd-big-inflight4-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $big
    load vd-big-inflight8-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=8 -- gpubatch-load $big
    load vd-big-threads8-$rep env GPUBATCH_COMPLETION_THREADS=8 -- gpubatch-load $big
    load vd-big-both-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=8 GPUBATCH_COMPLETION_THREADS=12 -- gpubatch-load $big
    load vd-big-bytes32-$rep env GPUBATCH_MAX_BATCH_BYTES=33554432 -- gpubatch-load $big
    load vd-big-unb-$rep gpubatch-load $big --unbatched
    load vd-mid-default-$rep gpubatch-load $mid
    load vd-mid-inflight8-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=8 -- gpubatch-load $mid
    load vd-mid-both-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=8 GPUBATCH_COMPLETION_THREADS=12 -- gpubatch-load $mid
    load vd-mid-unb-$rep gpubatch-load $mid --unbatched
  done
fi

# A trace of large vector batches (fifth session of 2026-11-26): where a batch's time goes, and
# how much of the wall the strand spends in submit (its copies of the inputs).
if on vectrace; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 3000"
  load vt-big-trace env GPUBATCH_TRACE=$out/trace-vec-big.json GPUBATCH_GPU_TIMESTAMPS=on -- gpubatch-load $big
  if [ -f "$out/trace-vec-big.json" ]; then
    python3 bench/trace_batches.py "$out/trace-vec-big.json" > "$out/trace-vec-big.txt" 2>&1
    python3 - "$out/trace-vec-big.json" >> "$out/trace-vec-big.txt" <<'PY2'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
subs = [e for e in ev if e.get("ph") == "X" and e.get("name") == "submit"]
t0 = min(e["ts"] for e in subs); t1 = max(e["ts"] + e["dur"] for e in subs)
busy = sum(e["dur"] for e in subs)
print(f"strand in submit: {busy/1e3:.1f} ms of {(t1-t0)/1e3:.1f} ms ({100*busy/(t1-t0):.0f} %), {len(subs)} batches, mean {busy/len(subs):.0f} us")
PY2
    gzip -f "$out/trace-vec-big.json"
  fi
fi

# The strand's own copy threads (fifth session of 2026-11-26) beside the previous build
# (gpubatch-load-prev, e3ca970) and the unbatched path, interleaved: large vector requests, large
# HostBuffer requests, and the small end (lone caller, crowd) that must not move.
if on copythreads; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  mid="--threads 16 --inflight 8 --op relu --size 65536 --requests 60000"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2 3; do
    load ct-big-$rep gpubatch-load $big
    load ct-big-prev-$rep gpubatch-load-prev $big
    load ct-big-unb-$rep gpubatch-load $big --unbatched
    load ct-mid-$rep gpubatch-load $mid
    load ct-mid-prev-$rep gpubatch-load-prev $mid
    load ct-mid-unb-$rep gpubatch-load $mid --unbatched
  done
  for rep in 1 2; do
    load ct-big-host-$rep gpubatch-load $big --host-buffers
    load ct-big-host-prev-$rep gpubatch-load-prev $big --host-buffers
    load ct-lone-$rep gpubatch-load $lone
    load ct-lone-prev-$rep gpubatch-load-prev $lone
    load ct-crowd-$rep gpubatch-load $crowd
    load ct-crowd-prev-$rep gpubatch-load-prev $crowd
  done
fi

# Non-temporal stores for large copies (fifth session of 2026-11-26): glibc's memcpy switches
# to streaming stores above x86_non_temporal_threshold (several MiB by default); at 256 KiB every
# large copy into staging and out of readback skips the read-for-ownership of its destination.
if on ntcopy; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  mid="--threads 16 --inflight 8 --op relu --size 65536 --requests 60000"
  nt="GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x40000"
  for rep in 1 2; do
    load nt-big-off-$rep gpubatch-load $big
    load nt-big-on-$rep env $nt -- gpubatch-load $big
    load nt-big-unb-off-$rep gpubatch-load $big --unbatched
    load nt-big-unb-on-$rep env $nt -- gpubatch-load $big --unbatched
    load nt-mid-off-$rep gpubatch-load $mid
    load nt-mid-on-$rep env $nt -- gpubatch-load $mid
    load nt-mid-unb-off-$rep gpubatch-load $mid --unbatched
    load nt-mid-unb-on-$rep env $nt -- gpubatch-load $mid --unbatched
  done
  env $nt .gpu/run.sh gpubatch-load --threads 1 --inflight 1 --op relu --size 1048576 --requests 10 --json 2>&1 | tail -1 | cut -c1-80 >> "$out/log.txt"
fi

# Streaming stores for a batch's inputs into staging (fifth session of 2026-11-26), on and off
# (GPUBATCH_STREAM_COPY) beside the previous build (gpubatch-load-prev, e3ca970), interleaved.
if on streamcopy; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  mid="--threads 16 --inflight 8 --op relu --size 65536 --requests 60000"
  small="--threads 16 --inflight 8 --op relu --size 16384 --requests 200000"
  lonebig="--threads 1 --inflight 1 --op relu --size 4194304 --requests 300"
  for rep in 1 2 3; do
    for size in big mid small lonebig; do
      load sc-$size-on-$rep gpubatch-load ${!size}
      load sc-$size-off-$rep env GPUBATCH_STREAM_COPY=off -- gpubatch-load ${!size}
      load sc-$size-prev-$rep gpubatch-load-prev ${!size}
    done
    load sc-big-unb-on-$rep gpubatch-load $big --unbatched
    load sc-big-unb-off-$rep env GPUBATCH_STREAM_COPY=off -- gpubatch-load $big --unbatched
  done
fi

# The direct lane (BatchConfig::direct_bytes, fifth session of 2026-11-26): large requests of a
# busy executor run on their callers' threads. This build, the lane off (GPUBATCH_DIRECT_BYTES=0),
# the previous build (gpubatch-load-prev, e3ca970) and the unbatched path, interleaved; sizes at
# and below the lane's line, one caller keeping 8 large requests in flight, the small end.
if on direct; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  half="--threads 16 --inflight 8 --op relu --size 524288 --requests 12000"
  mid="--threads 16 --inflight 8 --op relu --size 65536 --requests 60000"
  one="--threads 1 --inflight 8 --op relu --size 1048576 --requests 1500"
  lonebig="--threads 1 --inflight 1 --op relu --size 4194304 --requests 300"
  for rep in 1 2 3; do
    for size in big half one; do
      load di-$size-$rep gpubatch-load ${!size}
      load di-$size-off-$rep env GPUBATCH_DIRECT_BYTES=0 -- gpubatch-load ${!size}
      load di-$size-prev-$rep gpubatch-load-prev ${!size}
      load di-$size-unb-$rep gpubatch-load ${!size} --unbatched
    done
    load di-mid-$rep gpubatch-load $mid
    load di-mid-prev-$rep gpubatch-load-prev $mid
    load di-lonebig-$rep gpubatch-load $lonebig
    load di-lonebig-prev-$rep gpubatch-load-prev $lonebig
    load di-bighost-$rep gpubatch-load $big --host-buffers
    load di-bighost-off-$rep env GPUBATCH_DIRECT_BYTES=0 -- gpubatch-load $big --host-buffers
  done
fi

# The direct lane's final build (fifth session of 2026-11-26) beside the lane off and the previous
# build (gpubatch-load-prev, e3ca970), interleaved: the large sizes, one caller with 8 in flight,
# the sizes below the line, and the small end that must not move.
if on directfinal; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  half="--threads 16 --inflight 8 --op relu --size 524288 --requests 12000"
  mid="--threads 16 --inflight 8 --op relu --size 65536 --requests 60000"
  one="--threads 1 --inflight 8 --op relu --size 1048576 --requests 1500"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2; do
    for size in big half; do
      load df-$size-$rep gpubatch-load ${!size}
      load df-$size-off-$rep env GPUBATCH_DIRECT_BYTES=0 -- gpubatch-load ${!size}
      load df-$size-prev-$rep gpubatch-load-prev ${!size}
      load df-$size-unb-$rep gpubatch-load ${!size} --unbatched
    done
    for size in one mid lone crowd; do
      load df-$size-$rep gpubatch-load ${!size}
      load df-$size-prev-$rep gpubatch-load-prev ${!size}
    done
  done
fi

# The final direct lane (its waits nap again; fifth session of 2026-11-26): the large sizes
# beside the lane off and the unbatched path, and one caller with 8 in flight, interleaved.
if on directcheck; then
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 6000"
  half="--threads 16 --inflight 8 --op relu --size 524288 --requests 12000"
  one="--threads 1 --inflight 8 --op relu --size 1048576 --requests 1500"
  for rep in 1 2; do
    for size in big half; do
      load dc-$size-$rep gpubatch-load ${!size}
      load dc-$size-off-$rep env GPUBATCH_DIRECT_BYTES=0 -- gpubatch-load ${!size}
      load dc-$size-unb-$rep gpubatch-load ${!size} --unbatched
    done
    load dc-one-$rep gpubatch-load $one
    load dc-one-off-$rep env GPUBATCH_DIRECT_BYTES=0 -- gpubatch-load $one
  done
fi

# Where the direct lane's line should fall (fifth session of 2026-11-26): 262,144 and 131,072
# floats (2 MiB and 1 MiB of input and output, below the default 4 MiB) with the line lowered
# to 1 MiB, beside the default and the unbatched path, interleaved.
if on directline; then
  q="--threads 16 --inflight 8 --op relu --size 262144 --requests 24000"
  e="--threads 16 --inflight 8 --op relu --size 131072 --requests 48000"
  for rep in 1 2; do
    for size in q e; do
      load dl-$size-$rep gpubatch-load ${!size}
      load dl-$size-line1m-$rep env GPUBATCH_DIRECT_BYTES=1048576 -- gpubatch-load ${!size}
      load dl-$size-unb-$rep gpubatch-load ${!size} --unbatched
    done
  done
fi

# Is one strand the crowd's cap (third session of 2026-11-27)? The crowd with its threads' CPU
# weighed (bench/thread_cpu.py), beside two processes of 8 callers each on the same GPU at once
# (two executors, two strands: their summed rate is what a second strand could reach), and one
# perf profile by thread name (when .gpu/bin/perf is bundled).
if on crowdsplit; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  half="--threads 8 --inflight 1024 --requests 2000000 --op relu --size 256"
  for rep in 1 2 3; do
    python3 bench/thread_cpu.py --json-out "$out/threads-crowd-$rep.json" -- "$run" gpubatch-load $crowd --json \
      2>> "$out/log.txt" | tail -1 | sed "s/^{/{\"name\": \"crowd-$rep\", /" >> "$out/results.jsonl"
    for k in a b; do
      timeout 90 "$run" gpubatch-load $half --json 2>> "$out/log.txt" | tail -1 \
        | sed "s/^{/{\"name\": \"pair$k-$rep\", /" > "$out/pair$k.json" &
    done
    wait
    cat "$out/paira.json" "$out/pairb.json" >> "$out/results.jsonl"
  done
  if have perf; then
    timeout 120 "$run" perf record -F 2999 -g -o "$out/crowd.data" -- "$PWD/$run" gpubatch-load $crowd > "$out/perf-crowd-run.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/crowd.data" --no-children --sort comm -g none > "$out/perf-comm.txt" 2>&1
    for c in gpubatch-strand gpubatch-done gpubatch-load; do
      timeout 120 "$run" perf report -i "$out/crowd.data" --comm $c --no-children --sort dso,sym -g none \
        --percent-limit 0.2 > "$out/perf-$c.txt" 2>&1
    done
    rm -f "$out/crowd.data"
  fi
fi

# Where a lone large request from vectors spends its time (third session of 2026-11-27): a
# traced run (GPU timestamps on) beside untraced runs from vectors, from HostBuffers and
# unbatched, at 4,194,304 and 1,048,576 floats.
if on lonebig; then
  for n in 4194304 1048576; do
    lone="--threads 1 --inflight 1 --op relu --size $n --requests 300"
    load lb-$n-trace env GPUBATCH_TRACE=$out/trace-lone-$n.json GPUBATCH_GPU_TIMESTAMPS=on -- gpubatch-load $lone
    [ -f "$out/trace-lone-$n.json" ] && python3 bench/trace_batches.py "$out/trace-lone-$n.json" > "$out/trace-lone-$n.txt" 2>&1
    rm -f "$out/trace-lone-$n.json"
    for rep in 1 2; do
      load lb-$n-vec-$rep gpubatch-load $lone
      load lb-$n-sync-$rep gpubatch-load --sync $lone
      load lb-$n-host-$rep gpubatch-load --host-buffers $lone
      load lb-$n-unb-$rep gpubatch-load --unbatched $lone
    done
  done
fi

# Large results copied out by several threads (third session of 2026-11-27): this build beside
# the previous one, interleaved, for a lone large request (future and --sync), 16 callers of
# 1,048,576 floats, and the 256-float crowd; one traced lone run of this build.
if on bigout; then
  for n in 4194304 1048576; do
    lone="--threads 1 --inflight 1 --op relu --size $n --requests 300"
    for rep in 1 2 3; do
      load bo-$n-vec-$rep gpubatch-load $lone
      load bo-$n-vec-prev-$rep gpubatch-load-prev $lone
      load bo-$n-sync-$rep gpubatch-load --sync $lone
      load bo-$n-sync-prev-$rep gpubatch-load-prev --sync $lone
    done
    load bo-$n-unb gpubatch-load --unbatched $lone
    load bo-$n-trace env GPUBATCH_TRACE=$out/trace-bo-$n.json GPUBATCH_GPU_TIMESTAMPS=on -- gpubatch-load $lone
    [ -f "$out/trace-bo-$n.json" ] && python3 bench/trace_batches.py "$out/trace-bo-$n.json" > "$out/trace-bo-$n.txt" 2>&1
    rm -f "$out/trace-bo-$n.json"
  done
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 3000"
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2; do
    load bo-big-$rep gpubatch-load $big
    load bo-big-prev-$rep gpubatch-load-prev $big
    load bo-crowd-$rep gpubatch-load $crowd
    load bo-crowd-prev-$rep gpubatch-load-prev $crowd
  done
fi

# Chunked requests (third session of 2026-11-27): this build (chunks by default from 8 MiB) beside
# the same binary with chunks off (GPUBATCH_SPLIT_BYTES=never) and the session's first build,
# interleaved; chunk sizes; 16 callers of 1,048,576 floats; the 256-float crowd.
if on chunks; then
  for n in 4194304 1048576 16777216; do
    reqs=300; [ $n = 16777216 ] && reqs=60
    lone="--threads 1 --inflight 1 --op relu --size $n --requests $reqs"
    for rep in 1 2 3; do
      load ch-$n-on-$rep gpubatch-load $lone
      load ch-$n-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $lone
      [ $rep = 1 ] && load ch-$n-prev gpubatch-load-prev $lone
    done
    load ch-$n-sync-on gpubatch-load --sync $lone
    load ch-$n-sync-off env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load --sync $lone
  done
  lone="--threads 1 --inflight 1 --op relu --size 4194304 --requests 300"
  for c in 1048576 4194304 8388608; do
    load ch-4194304-chunk$c env GPUBATCH_SPLIT_CHUNK_BYTES=$c -- gpubatch-load $lone
  done
  load ch-4194304-gelu-on gpubatch-load --threads 1 --inflight 1 --op gelu --size 4194304 --requests 300
  load ch-4194304-gelu-off env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load --threads 1 --inflight 1 --op gelu --size 4194304 --requests 300
  four="--threads 4 --inflight 1 --op relu --size 4194304 --requests 600"
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 3000"
  for rep in 1 2; do
    load ch-four-on-$rep gpubatch-load $four
    load ch-four-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $four
    load ch-big-on-$rep gpubatch-load $big
    load ch-big-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $big
  done
  load ch-crowd gpubatch-load --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
  load ch-crowd-prev gpubatch-load-prev --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
fi

# Chunks of half the request (third session of 2026-11-27): the default beside chunks off and the
# session's first build, interleaved; larger chunk bounds; callers together; the crowd.
if on chunks2; then
  for rep in 1 2; do
    for n in 1048576 4194304 16777216; do
      reqs=300; [ $n = 16777216 ] && reqs=60
      lone="--threads 1 --inflight 1 --op relu --size $n --requests $reqs"
      load c2-$n-on-$rep gpubatch-load $lone
      load c2-$n-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $lone
      load c2-$n-prev-$rep gpubatch-load-prev $lone
    done
  done
  for n in 4194304 16777216; do
    reqs=300; [ $n = 16777216 ] && reqs=60
    for c in 8388608 16777216; do
      load c2-$n-max$c env GPUBATCH_SPLIT_CHUNK_BYTES=$c -- gpubatch-load --threads 1 --inflight 1 --op relu --size $n --requests $reqs
    done
  done
  four="--threads 4 --inflight 1 --op relu --size 4194304 --requests 600"
  big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 3000"
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2; do
    load c2-four-on-$rep gpubatch-load $four
    load c2-four-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $four
    load c2-big-on-$rep gpubatch-load $big
    load c2-big-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $big
  done
  for rep in 1 2 3; do
    load c2-crowd-$rep gpubatch-load $crowd
    load c2-crowd-prev-$rep gpubatch-load-prev $crowd
  done
fi

# The sweep's large sizes in steady state (third session of 2026-11-27): 16 callers keeping 8 each
# in flight, long runs, the default beside chunks off, the session's first build and unbatched,
# interleaved; one caller at the sizes where the short sweep had it below unbatched.
if on steady; then
  for rep in 1 2; do
    for spec in 262144:8000 4194304:480 1048576:2000; do
      n=${spec%:*}; r=${spec#*:}
      big="--threads 16 --inflight 8 --op relu --size $n --requests $r"
      load st-$n-on-$rep gpubatch-load $big
      load st-$n-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $big
      load st-$n-prev-$rep gpubatch-load-prev $big
      load st-$n-unb-$rep gpubatch-load --unbatched --threads 16 --op relu --size $n --requests $r
    done
    for spec in 16384:20000 262144:2000 256:40000; do
      n=${spec%:*}; r=${spec#*:}
      load st1-$n-on-$rep gpubatch-load --threads 1 --inflight 1 --op relu --size $n --requests $r
      load st1-$n-unb-$rep gpubatch-load --unbatched --threads 1 --op relu --size $n --requests $r
    done
  done
fi

# The session's final build (third session of 2026-11-27) beside its first build and unbatched,
# interleaved: a lone caller at every size from 256 to 4,194,304 floats, 16 callers of 1,048,576
# floats (and chunks off), four callers of 4,194,304, the 256-float crowd.
if on final27; then
  for rep in 1 2; do
    for spec in 256:20000 16384:20000 65536:10000 262144:2000 1048576:400 4194304:200; do
      n=${spec%:*}; r=${spec#*:}
      lone="--threads 1 --inflight 1 --op relu --size $n --requests $r"
      load f-$n-this-$rep gpubatch-load $lone
      load f-$n-prev-$rep gpubatch-load-prev $lone
      load f-$n-unb-$rep gpubatch-load --unbatched $lone
    done
    load f-256sync-this-$rep gpubatch-load --sync --threads 1 --inflight 1 --op relu --size 256 --requests 20000
    load f-256sync-prev-$rep gpubatch-load-prev --sync --threads 1 --inflight 1 --op relu --size 256 --requests 20000
    big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 3000"
    load f-big-this-$rep gpubatch-load $big
    load f-big-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $big
    load f-big-prev-$rep gpubatch-load-prev $big
    four="--threads 4 --inflight 1 --op relu --size 4194304 --requests 400"
    load f-four-this-$rep gpubatch-load $four
    load f-four-prev-$rep gpubatch-load-prev $four
    crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
    load f-crowd-this-$rep gpubatch-load $crowd
    load f-crowd-prev-$rep gpubatch-load-prev $crowd
  done
fi

# Chunks of more ops (second session of 2026-11-27): a lone add, lerp, dot (partial sums) and
# matmul (blocks of rows; ops28: 100 requests, whose CPU reference checks take 80 s a run) in
# chunks, against chunks off, the session's first build and the unbatched path; then (ops28hb)
# both inputs of an add from HostBuffers (host_b) against the first build, which copied b.
if on ops28; then
  for rep in 1 2; do
    for spec in "add 1048576 300" "add 4194304 150" "lerp 4194304 150" "dot 4194304 150" "matmul 1024 100"; do
      read -r op n reqs <<< "$spec"
      lone="--threads 1 --inflight 1 --op $op --size $n --requests $reqs"
      load o-$op-$n-on-$rep gpubatch-load $lone
      load o-$op-$n-off-$rep env GPUBATCH_SPLIT_BYTES=never -- gpubatch-load $lone
      load o-$op-$n-prev-$rep gpubatch-load-prev $lone
      load o-$op-$n-unb-$rep gpubatch-load --unbatched $lone
    done
  done
fi
if on ops28hb; then
  for rep in 1 2; do
    for spec in "65536 200000" "1048576 12000"; do
      read -r n reqs <<< "$spec"
      hb="--threads 16 --inflight 8 --host-buffers --op add --size $n --requests $reqs"
      load o-hb-add-$n-$rep gpubatch-load $hb
      load o-hb-add-$n-prev-$rep gpubatch-load-prev $hb
    done
  done
fi

# The callers' push without a fence after it (second session of 2026-11-27; tried and reverted,
# BENCHMARKS.md): the executor's CPU over a null device (gpubatch-executor-cost, 16 callers) and
# the 256-float crowd and lone caller on the GPU, a build against the session's first,
# interleaved; then where the callers' enqueue spends its time (perf annotate), when perf is
# bundled.
if on nofence; then
  for rep in 1 2 3; do
    for b in gpubatch-executor-cost gpubatch-executor-cost-prev; do
      have $b || continue
      echo "$b-$rep $(timeout 60 "$run" $b --threads 16 --inflight 1024 --requests 4000000 --size 256 --reps 1 2>&1 | tail -1)" \
        | tee -a "$out/executor-cost.txt"
    done
    load nf-crowd-$rep gpubatch-load --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
    load nf-crowd-prev-$rep gpubatch-load-prev --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
    load nf-lone-$rep gpubatch-load --threads 1 --inflight 1 --requests 20000 --op relu --size 256
    load nf-lone-prev-$rep gpubatch-load-prev --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  done
  if have perf; then
    timeout 120 "$run" perf record -F 2999 -o "$out/ec.data" -- "$PWD/$run" gpubatch-executor-cost --threads 16 \
      --inflight 1024 --requests 4000000 --size 256 --reps 1 > "$out/ec-run.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/ec.data" --no-children --sort comm,sym -g none --percent-limit 0.5 \
      > "$out/ec-report.txt" 2>&1
    timeout 120 "$run" perf annotate -i "$out/ec.data" --stdio -s gpubatch::detail::ExecutorCore::enqueue \
      > "$out/ec-annotate.txt" 2>&1
    rm -f "$out/ec.data"
  fi
fi

# The 256-float crowd against batch size and depth (second session of 2026-11-27): its batches
# are full (4,096 requests, 8 MiB: both limits) with two in flight; larger batches and more of
# them in flight, two rounds interleaved.
if on crowdshape; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2; do
    load cs-default-$rep gpubatch-load $crowd
    load cs-b8k-$rep env GPUBATCH_MAX_BATCH_SIZE=8192 GPUBATCH_MAX_BATCH_BYTES=16777216 -- gpubatch-load $crowd
    load cs-f4-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $crowd
    load cs-b8k-f4-$rep env GPUBATCH_MAX_BATCH_SIZE=8192 GPUBATCH_MAX_BATCH_BYTES=16777216 GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $crowd
    load cs-b2k-f4-$rep env GPUBATCH_MAX_BATCH_SIZE=2048 GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $crowd
    load cs-c8-$rep env GPUBATCH_COMPLETION_THREADS=8 -- gpubatch-load $crowd
  done
fi

# Issue 14's latency target at the rates where it can hold (second session of 2026-11-27): the
# open loop of 256-float relu from 16 threads with target_p99 500 us, and without a target,
# from 100,000 to 1,500,000 requests/s, two rounds interleaved.
if on tp99; then
  for rep in 1 2; do
    for rate in 100000 250000 500000 1000000 1500000; do
      load tp-$rate-target-$rep gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $rate --requests $((rate * 3))
      load tp-$rate-none-$rep gpubatch-mix --threads 16 --size 256 --rate $rate --requests $((rate * 3))
    done
  done
fi

# The open loop's tail, this build against the session's first (gpubatch-mix-prev), interleaved,
# and an idle mix (second session of 2026-11-27).
if on tailab; then
  for rep in 1 2; do
    for rate in 250000 1000000; do
      load ta-$rate-$rep gpubatch-mix --threads 16 --size 256 --rate $rate --requests $((rate * 3))
      load ta-$rate-prev-$rep gpubatch-mix-prev --threads 16 --size 256 --rate $rate --requests $((rate * 3))
    done
    load ta-idle-$rep gpubatch-mix --threads 16 --size 256 --rate 10000 --requests 30000
    load ta-1000000-trace-$rep env GPUBATCH_TRACE=$out/trace-$rep.json -- gpubatch-mix --threads 16 --size 256 --rate 1000000 --requests 3000000
  done
  for rep in 1 2; do
    [ -f "$out/trace-$rep.json" ] && python3 bench/trace_batches.py "$out/trace-$rep.json" > "$out/trace-$rep.txt" 2>&1
    rm -f "$out/trace-$rep.json"
  done
fi

# The latency target's cap lifted while a grown backlog drains (second session of 2026-11-27):
# target_p99 500 us, this build against the session's first (gpubatch-mix-prev), and no target,
# interleaved, two rounds.
if on tplift; then
  for rep in 1 2; do
    for rate in 250000 500000 1000000; do
      load tl-$rate-target-$rep gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $rate --requests $((rate * 3))
      load tl-$rate-target-prev-$rep gpubatch-mix-prev --threads 16 --size 256 --target-p99-us 500 --rate $rate --requests $((rate * 3))
      load tl-$rate-none-$rep gpubatch-mix --threads 16 --size 256 --rate $rate --requests $((rate * 3))
    done
  done
fi

# Where the open loop's backlog episodes begin (second session of 2026-11-27): traced runs at
# 1,000,000/s with the GPU's own time per batch, summarized there by bench/trace_episodes.py.
if on episodes; then
  for rep in 1 2; do
    load ep-1000000-$rep env GPUBATCH_TRACE=$out/trace-ep-$rep.json GPUBATCH_GPU_TIMESTAMPS=on -- \
      gpubatch-mix --threads 16 --size 256 --rate 1000000 --requests 3000000
    if [ -f "$out/trace-ep-$rep.json" ]; then
      python3 bench/trace_episodes.py "$out/trace-ep-$rep.json" --episodes 5 > "$out/episodes-$rep.txt" 2>&1
      python3 bench/trace_batches.py "$out/trace-ep-$rep.json" > "$out/trace-ep-$rep.txt" 2>&1
      rm -f "$out/trace-ep-$rep.json"
    fi
  done
fi

# Memory blocks made when a GPU opens (second session of 2026-11-27; tried and reverted,
# BENCHMARKS.md: GPUBATCH_PREPARE_MEMORY is a no-op without it): the traced open loop at
# 1,000,000/s (bench/trace_episodes.py), untraced at 250,000 and 1,000,000/s, this build against
# GPUBATCH_PREPARE_MEMORY=off, interleaved; and what opening costs (a 10-request mix's wall time).
if on prepmem; then
  for rep in 1 2; do
    for mode in on off; do
      load pm-trace-$mode-$rep env GPUBATCH_PREPARE_MEMORY=$mode GPUBATCH_TRACE=$out/trace-pm-$mode-$rep.json -- \
        gpubatch-mix --threads 16 --size 256 --rate 1000000 --requests 3000000
      if [ -f "$out/trace-pm-$mode-$rep.json" ]; then
        python3 bench/trace_episodes.py "$out/trace-pm-$mode-$rep.json" --episodes 2 > "$out/episodes-$mode-$rep.txt" 2>&1
        python3 bench/trace_batches.py "$out/trace-pm-$mode-$rep.json" > "$out/stages-$mode-$rep.txt" 2>&1
        rm -f "$out/trace-pm-$mode-$rep.json"
      fi
    done
    for rate in 250000 1000000; do
      for mode in on off; do
        load pm-$rate-$mode-$rep env GPUBATCH_PREPARE_MEMORY=$mode -- gpubatch-mix --threads 16 --size 256 --rate $rate --requests $((rate * 3))
      done
    done
  done
  for rep in 1 2 3; do
    for mode in on off; do
      s0=$(date +%s%N)
      GPUBATCH_PREPARE_MEMORY=$mode "$run" gpubatch-mix --threads 1 --size 256 --rate 1000 --requests 10 > /dev/null 2>&1
      echo "open-$mode-$rep $(( ($(date +%s%N) - s0) / 1000000 )) ms" >> "$out/open-time.txt"
    done
  done
fi

# The CPU reference's faster matmul (second session of 2026-11-27): gpubatch-load's matmul runs,
# whose checks dominated their wall time, this build against the session's first.
if on mmcheck; then
  for b in gpubatch-load gpubatch-load-prev; do
    load mm-$b $b --threads 1 --inflight 1 --op matmul --size 1024 --requests 100
  done
fi

if on tests; then
  for t in gpubatch_tests gpubatch_integration_tests gpubatch_executor_tests; do
    have $t || continue
    echo "== $t" >&2
    timeout 240 "$run" $t --gtest_brief=1 >> "$out/tests.txt" 2>&1
    echo "$t exit $?" | tee -a "$out/log.txt"
  done
fi

# Is the open loop's episodic tail a regression? (session of 2026-11-27, third)
# This build against gpubatch-load-old / gpubatch-mix-old, built from b1d037b (the end of the
# first session of 2026-11-26, whose open loop had p99 293-317 us at 500,000/s), three rounds
# interleaved; the kernel's counters around each run (THP, compaction, faults, steal) in sys.txt.
sysnote() {
  { echo "== $1"; grep -E '^(compact_stall|compact_fail|thp_fault_alloc|thp_collapse_alloc|pgmajfault|pgfault|numa_hint_faults|pgmigrate_success) ' /proc/vmstat | tr '\n' ' '; echo;
    head -1 /proc/stat; } >> "$out/sys.txt"
}
if on regress; then
  { cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; nproc; uname -r; } >> "$out/sys.txt" 2>&1
  have gpubatch-stall-probe && timeout 30 "$run" gpubatch-stall-probe --threads 4 --seconds 3 | sed 's/^{/{"name": "rg-probe", /' >> "$out/results.jsonl"
  for rep in 1 2 3; do
    for rate in 500000 1080000; do
      for b in gpubatch-load gpubatch-load-old; do
        sysnote "rg-$b-$rate-$rep before"
        load rg-$b-$rate-$rep $b --threads 16 --op relu --size 256 --rate $rate --requests $((rate * 3))
        sysnote "rg-$b-$rate-$rep after"
      done
    done
    for b in gpubatch-mix gpubatch-mix-old; do
      load rg-$b-250000-$rep $b --threads 16 --size 256 --rate 250000 --requests 750000
    done
  done
fi

# The mix's warm-up (third session of 2026-11-27): a full batch per in-flight slot (the default
# now, as gpubatch-load) against the 256 requests it sent before (--warm 256), interleaved; then
# the open loop towards saturation.
if on warmab; then
  for rep in 1 2 3; do
    for rate in 250000 500000 1000000 1500000; do
      load wa-$rate-$rep gpubatch-mix --threads 16 --size 256 --rate $rate --requests $((rate * 3))
      load wa-$rate-light-$rep gpubatch-mix --warm 256 --threads 16 --size 256 --rate $rate --requests $((rate * 3))
    done
  done
  for rep in 1 2; do
    for rate in 2000000 2500000; do
      load wa-$rate-$rep gpubatch-mix --threads 16 --size 256 --rate $rate --requests $((rate * 3))
      load wa-open$rate-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $rate --requests $((rate * 3))
    done
  done
  load wa-crowd gpubatch-load --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
fi

# Why one machine's open loop stalls and another's does not (third session of 2026-11-27): the
# cgroup's CPU quota and throttling, CPU pressure (PSI) and steal around each run, the stall
# probe beside it, and a trace of the episodes.
cgnote() {
  { echo "== $1"; cat /sys/fs/cgroup/cpu.stat 2>/dev/null | tr '\n' ' '; echo; cat /sys/fs/cgroup/cpu.pressure 2>/dev/null;
    cat /proc/pressure/cpu 2>/dev/null; head -1 /proc/stat; } >> "$out/sys.txt"
}
if on why; then
  { echo "cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>&1)"; echo "cpuset: $(cat /sys/fs/cgroup/cpuset.cpus.effective 2>&1)";
    nproc; cat /proc/cpuinfo | grep -m1 "model name"; uptime; ps -eo pid,pcpu,comm --sort=-pcpu | head -8; } >> "$out/sys.txt" 2>&1
  for rep in 1 2; do
    cgnote "why-idle-$rep before"; probe_beside why-idle-$rep 3; cgnote "why-idle-$rep after"
    cgnote "why-500k-$rep before"
    probe_beside why-500k-$rep 3 gpubatch-mix --threads 16 --size 256 --rate 500000 --requests 1500000
    cgnote "why-500k-$rep after"
    load why-500k-trace-$rep env GPUBATCH_TRACE=$out/trace-why-$rep.json -- \
      gpubatch-mix --threads 16 --size 256 --rate 500000 --requests 1500000
    cgnote "why-500k-trace-$rep after"
    if [ -f "$out/trace-why-$rep.json" ]; then
      python3 bench/trace_episodes.py "$out/trace-why-$rep.json" --episodes 4 > "$out/episodes-$rep.txt" 2>&1
      rm -f "$out/trace-why-$rep.json"
    fi
  done
fi

# The memory pool's small first blocks and grow-ahead (third session of 2026-11-27): what making
# a block costs (GPUBATCH_LOG_LEVEL=debug prints each), a process's first seconds (the mix with
# the light warm-up, --warm 256) this build against the previous (gpubatch-mix-prev) and against
# GPUBATCH_GROW_AHEAD=off, a trace of the first, and the warmed loads for harm.
if on growab; then
  load gb-debug env GPUBATCH_LOG_LEVEL=debug -- gpubatch-mix --warm 256 --threads 16 --size 256 --rate 500000 --requests 1500000
  grep -h "block of memory kind" "$out/log.txt" | head -40 > "$out/blocks.txt"
  for rep in 1 2 3; do
    for rate in 250000 500000; do
      load gb-$rate-light-$rep gpubatch-mix --warm 256 --threads 16 --size 256 --rate $rate --requests $((rate * 3))
      load gb-$rate-light-prev-$rep gpubatch-mix-prev --warm 256 --threads 16 --size 256 --rate $rate --requests $((rate * 3))
      load gb-$rate-light-off-$rep env GPUBATCH_GROW_AHEAD=off -- gpubatch-mix --warm 256 --threads 16 --size 256 --rate $rate --requests $((rate * 3))
    done
    load gb-500000-$rep gpubatch-mix --threads 16 --size 256 --rate 500000 --requests 1500000
    load gb-500000-prev-$rep gpubatch-mix-prev --threads 16 --size 256 --rate 500000 --requests 1500000
  done
  for b in gpubatch-mix gpubatch-mix-prev; do
    load gb-trace-$b env GPUBATCH_TRACE=$out/trace-$b.json -- $b --warm 256 --threads 16 --size 256 --rate 500000 --requests 1500000
    if [ -f "$out/trace-$b.json" ]; then
      python3 bench/trace_episodes.py "$out/trace-$b.json" --episodes 3 > "$out/episodes-$b.txt" 2>&1
      python3 bench/trace_batches.py "$out/trace-$b.json" > "$out/batches-$b.txt" 2>&1
      rm -f "$out/trace-$b.json"
    fi
  done
  for rep in 1 2; do
    load gb-crowd-$rep gpubatch-load --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    load gb-crowd-prev-$rep gpubatch-load-prev --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
  done
fi

# Has the crowd slowed since the first session of 2026-11-26? (third session of 2026-11-27.) This
# build against gpubatch-load-old (b1d037b) and whatever other builds are bundled as
# gpubatch-load-at-REV (bin/*.xz are unpacked first), three rounds interleaved.
if on crowdhist; then
  for x in .gpu/bin/*.xz; do [ -f "$x" ] && xz -d -f "$x"; done
  chmod +x .gpu/bin/* 2>/dev/null
  for rep in 1 2 3; do
    for b in gpubatch-load gpubatch-load-old $(cd .gpu/bin && ls gpubatch-load-at-* 2>/dev/null); do
      load ch-$b-$rep $b --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
fi

# Issues 11 and 14's targets with the code of the third session of 2026-11-27, every tail-latency
# load with --host-probe ("host" in its JSON: steal and how late a thread of the process woke).
if on targets14; then
  P=--host-probe
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do load t14-crowd-$rep gpubatch-load $crowd; done
  for rep in 1 2; do
    load t14-lone-$rep gpubatch-load $lone --idle-ms 1000
    load t14-lone-sync-$rep gpubatch-load --sync $lone
    load t14-lone-unbatched-$rep gpubatch-load --unbatched $lone
    load t14-lone-realtime-$rep gpubatch-load --preset realtime --sync $lone --idle-ms 1000
  done
  for rep in 1 2; do
    for r in 500000 1080000 1500000 2000000 2500000; do
      load t14-open$r-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
    done
  done
  for r in 250000 500000 1000000; do
    load t14-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3)) $P
  done
  load t14-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  load t14-mixsat gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000 $P
  load t14-deadline-large gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000 $P
  load t14-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  load t14-mixed64 gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 $P
fi

# Small requests behind large ones (third session of 2026-11-27): 64 threads, 10 % of 1,000,000
# floats at 20,000/s, this build against gpubatch-mix-old (b1d037b, 1.92 ms p99 for the small
# ones on 2026-11-26), three rounds interleaved; then futures (gpubatch-load) of both sizes.
if on mixed64; then
  for rep in 1 2 3; do
    load m64-$rep gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
    load m64-old-$rep gpubatch-mix-old --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
  done
  for b in gpubatch-mix gpubatch-mix-old; do
    load m64-trace-$b env GPUBATCH_TRACE=$out/trace-$b.json -- $b --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
    if [ -f "$out/trace-$b.json" ]; then
      python3 bench/trace_batches.py "$out/trace-$b.json" > "$out/batches-$b.txt" 2>&1
      rm -f "$out/trace-$b.json"
    fi
  done
fi

# The lone caller's two speeds (third session of 2026-11-27): some processes answer a lone
# request in ~18 us, others in ~50. Lone runs of each path, alternating, with the GPU's clocks and
# performance state sampled every 50 ms meanwhile (nvidia-smi, read only) into clocks.txt.
if on slowmode; then
  L="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  nvidia-smi -q -d PERFORMANCE,CLOCK > "$out/perf-before.txt" 2>&1
  nvidia-smi topo -m > "$out/topo.txt" 2>&1; ls /sys/devices/system/node/ >> "$out/topo.txt" 2>&1
  for rep in 1 2 3 4; do
    for m in future sync unbatched; do
      case $m in future) f="";; sync) f="--sync";; unbatched) f="--unbatched";; esac
      nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 50 > "$out/clk-$m-$rep.txt" 2>&1 &
      smi=$!
      load sm-$m-$rep gpubatch-load $L $f
      kill $smi 2>/dev/null; wait $smi 2>/dev/null
      echo "== sm-$m-$rep" >> "$out/clocks.txt"; sort "$out/clk-$m-$rep.txt" | awk -F', ' '{print $2, $3, $4, $5, $7}' | sort | uniq -c | sort -rn | head -6 >> "$out/clocks.txt"
      rm -f "$out/clk-$m-$rep.txt"
    done
  done
  nvidia-smi -q -d PERFORMANCE,CLOCK > "$out/perf-after.txt" 2>&1
fi

# A lone caller that is not back to back (third session of 2026-11-27): one thread, open loop at
# 500 to 50,000 requests/s, with the GPU's clocks sampled meanwhile (read only) into clocks.txt.
if on sparse; then
  for rep in 1 2; do
    for r in 500 2000 10000 50000; do
      n=$((r * 3)); [ $n -gt 60000 ] && n=60000
      nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,utilization.gpu --format=csv,noheader -lms 50 > "$out/clk.txt" 2>&1 &
      smi=$!
      load sp-$r-$rep gpubatch-load --threads 1 --rate $r --requests $n --op relu --size 256
      load sp-$r-sync-$rep gpubatch-load --threads 1 --rate $r --requests $n --op relu --size 256 --unbatched
      kill $smi 2>/dev/null; wait $smi 2>/dev/null
      echo "== sp-$r-$rep" >> "$out/clocks.txt"; awk -F', ' '{print $3}' "$out/clk.txt" | sort | uniq -c | sort -rn | head -4 >> "$out/clocks.txt"
    done
  done
fi

# A handler's call on an idle executor submits on its caller's thread (third session of
# 2026-11-27): a lone caller through handlers at sparse rates (the open loop, one thread), this
# build against GPUBATCH_HANDLER_INLINE=off and --unbatched, interleaved; then loads that must not
# lose: the open loop at 500,000 and 1,080,000/s, and the crowd through handlers.
if on handlerinline; then
  for rep in 1 2; do
    for r in 500 2000 10000 50000; do
      n=$((r * 3)); [ $n -gt 60000 ] && n=60000
      load hi-$r-$rep gpubatch-load --threads 1 --rate $r --requests $n --op relu --size 256
      load hi-$r-off-$rep env GPUBATCH_HANDLER_INLINE=off -- gpubatch-load --threads 1 --rate $r --requests $n --op relu --size 256
      load hi-$r-unbatched-$rep gpubatch-load --threads 1 --rate $r --requests $n --op relu --size 256 --unbatched
    done
  done
  for rep in 1 2; do
    for r in 500000 1080000; do
      load hi-open$r-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) --host-probe
      load hi-open$r-off-$rep env GPUBATCH_HANDLER_INLINE=off -- gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) --host-probe
    done
    load hi-crowdh-$rep gpubatch-load --handlers --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
    load hi-crowdh-off-$rep env GPUBATCH_HANDLER_INLINE=off -- gpubatch-load --handlers --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
  done
fi

# The same change under load, more rounds (third session of 2026-11-27): the open loop at
# 250,000 and 500,000/s with the host probe, this build against GPUBATCH_HANDLER_INLINE=off.
if on handlerload; then
  for rep in 1 2 3 4; do
    for r in 250000 500000; do
      load hl-open$r-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) --host-probe
      load hl-open$r-off-$rep env GPUBATCH_HANDLER_INLINE=off -- gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) --host-probe
    done
  done
fi

# The handler's pass with its 200 us gap (third session of 2026-11-27): sparse lone handlers and
# the open loop at 250,000/s, this build against GPUBATCH_HANDLER_INLINE=off, interleaved.
if on handlergap; then
  for rep in 1 2 3; do
    for r in 500 2000; do
      load hg-$r-$rep gpubatch-load --threads 1 --rate $r --requests $((r * 3)) --op relu --size 256
      load hg-$r-off-$rep env GPUBATCH_HANDLER_INLINE=off -- gpubatch-load --threads 1 --rate $r --requests $((r * 3)) --op relu --size 256
    done
    load hg-open250000-$rep gpubatch-load --threads 16 --op relu --size 256 --rate 250000 --requests 750000 --host-probe
    load hg-open250000-off-$rep env GPUBATCH_HANDLER_INLINE=off -- gpubatch-load --threads 16 --op relu --size 256 --rate 250000 --requests 750000 --host-probe
  done
fi

# A sparse caller of every kind (third session of 2026-11-27): one thread, one request at a time,
# sleeping 500 or 2,000 us after each result (--think-us): future, handle.run(), Device::run and a
# handler, interleaved; then issue 14's block_for and deadline loads with the fixed warm-up.
if on thinkers; then
  L="--threads 1 --inflight 1 --requests 5000 --op relu --size 256"
  for rep in 1 2; do
    for t in 500 2000; do
      load th-$t-future-$rep gpubatch-load $L --think-us $t
      load th-$t-sync-$rep gpubatch-load $L --think-us $t --sync
      load th-$t-unbatched-$rep gpubatch-load $L --think-us $t --unbatched
      load th-$t-handler-$rep gpubatch-load $L --think-us $t --handlers
    done
  done
  load th-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 --host-probe
  load th-deadline-large gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 150000 --requests 450000 --host-probe
  load th-deadline gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000 --host-probe
fi

# The strand without deadline sweeps beside the watch (third session of 2026-11-27; tried and
# reverted, GPUBATCH_STRAND_SWEEPS existed only in that build): half the requests on a 2 ms
# deadline at 1,000,000/s (the load that collapsed in call 15), and the same with 1 % large
# requests at 150,000/s, that build against GPUBATCH_STRAND_SWEEPS=always, interleaved; then the
# open loop without deadlines for harm.
if on sweeps; then
  for rep in 1 2 3; do
    load sw-dl1m-$rep gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000 --host-probe
    load sw-dl1m-always-$rep env GPUBATCH_STRAND_SWEEPS=always -- gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000 --host-probe
  done
  for rep in 1 2; do
    load sw-dllarge-$rep gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 150000 --requests 450000 --host-probe
    load sw-dllarge-always-$rep env GPUBATCH_STRAND_SWEEPS=always -- gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 150000 --requests 450000 --host-probe
    load sw-open500k-$rep gpubatch-load --threads 16 --op relu --size 256 --rate 500000 --requests 1500000 --host-probe
  done
fi

# The final code of the fifth session of 2026-11-27 against gpubatch-load-prev (built from 4cc7496,
# the session's start), interleaved (named final5 in commit c6a1e0a, beside the older section of
# that name, which call 6 ran too): the lone caller, the crowd, and 16 callers from HostBuffers
# with the copy engine forced for every batch (its uploads now through a SubmitQueue) and by
# default.
# The lanes' busy rule against the rule before (sixth session of 2026-11-27, GPUBATCH_LANES_BUSY=
# batches), one binary: 16 callers of 1,048,576-float relu from HostBuffers and from vectors (8
# and 1 in flight), 262,144 floats from vectors, beside --unbatched; three interleaved rounds.
if on lanesab; then
  old="env GPUBATCH_LANES_BUSY=batches --"
  for rep in 1 2 3; do
    for v in "hb --size 1048576 --host-buffers --inflight 8" "v8 --size 1048576 --inflight 8" \
             "v1 --size 1048576 --inflight 1" "v262 --size 262144 --inflight 8"; do
      set -- $v; tag=$1; shift
      n=$(( $2 == 262144 ? 5000 : 2000 ))
      big="--threads 16 --requests $n --op relu $*"
      load ab-$tag-new-$rep gpubatch-load $big
      load ab-$tag-old-$rep $old gpubatch-load $big
      load ab-$tag-unb-$rep gpubatch-load --unbatched $big
    done
  done
fi

# The host's memory bandwidth against what vector and HostBuffer requests move (seventh session of
# 2026-11-27): gpubatch-copy-rate --host-threads (memcpy between ordinary buffers, 1-16 threads),
# then 16 callers x 8 in flight of relu at 65,536 and 1,048,576 floats from vectors and from
# HostBuffers and 65,536 unbatched, two interleaved rounds, then the memcpy rate once more.
if on hostbw; then
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 67108864 --host-threads 1,4,8,16 > "$out/host-bw.txt" 2>&1
  for rep in 1 2; do
    for v in "v64 --size 65536 --requests 24000" "hb64 --size 65536 --requests 24000 --host-buffers" \
             "v1m --size 1048576 --requests 2000" "hb1m --size 1048576 --requests 2000 --host-buffers"; do
      set -- $v; tag=$1; shift
      load bw-$tag-$rep gpubatch-load --threads 16 --inflight 8 --op relu "$@"
    done
    load bw-v64-unb-$rep gpubatch-load --unbatched --threads 16 --op relu --size 65536 --requests 24000
  done
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 1048576 --host-threads 16,8 >> "$out/host-bw.txt" 2>&1
fi

# Where the crowd's strand spends its time (seventh session of 2026-11-27): the crowd once, once
# under bench/thread_cpu.py (CPU seconds per thread name), once under perf (needs .gpu/bin/perf
# and a gpubatch-load with its symbols: strip --strip-debug); the strand's own breakdown.
if on strandprof; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  load sp-crowd gpubatch-load $crowd
  timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-crowd.json" -- "$run" gpubatch-load $crowd --json \
    > "$out/threads-crowd.txt" 2>&1
  if have perf; then
    timeout 120 "$run" perf record -F 2999 -g -o "$out/crowd.data" -- "$PWD/$run" gpubatch-load $crowd > "$out/perf-crowd.txt" 2>&1
    for c in gpubatch-strand gpubatch-done; do
      timeout 120 "$run" perf report -i "$out/crowd.data" --comm $c --percentage relative --no-children --sort sym -g none \
        --percent-limit 0.7 > "$out/perf-$c.txt" 2>&1
    done
    timeout 120 "$run" perf report -i "$out/crowd.data" --comm gpubatch-strand --percentage relative --children --sort sym \
      -g none --percent-limit 3 > "$out/perf-strand-children.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/crowd.data" --no-children --sort comm -g none > "$out/perf-comm.txt" 2>&1
    rm -f "$out/crowd.data"
  fi
fi

# The strand's per-request work trimmed (seventh session of 2026-11-27) against the build before
# (gpubatch-load-prev): the crowd, four interleaved rounds; the lone caller once each; CPU
# seconds per thread name for both (thread_cpu.py, summed into threads.txt); a perf profile of
# this build's strand when .gpu/bin/perf is bundled.
if on strandab; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4; do
    load sab-new-$rep gpubatch-load $crowd
    load sab-mid-$rep gpubatch-load-mid $crowd  # a build between the two, when bundled
    load sab-prev-$rep gpubatch-load-prev $crowd
  done
  for rep in 1 2 3; do
    load sab-lone-new-$rep gpubatch-load $lone
    load sab-lone-prev-$rep gpubatch-load-prev $lone
  done
  for b in gpubatch-load gpubatch-load-prev; do
    have $b || continue
    echo "== $b" >> "$out/threads.txt"
    timeout 120 python3 bench/thread_cpu.py --json-out "$out/t.json" -- "$run" $b $crowd --json 2>/dev/null | tail -1 \
      | cut -c1-200 >> "$out/threads.txt"
    cat "$out/t.json" >> "$out/threads.txt"; echo >> "$out/threads.txt"; rm -f "$out/t.json"
  done
  if have perf; then
    timeout 120 "$run" perf record -F 2999 -g -o "$out/crowd.data" -- "$PWD/$run" gpubatch-load $crowd > /dev/null 2>&1
    timeout 120 "$run" perf report -i "$out/crowd.data" --comm gpubatch-strand --percentage relative --no-children --sort sym \
      -g none --percent-limit 0.7 > "$out/perf-strand.txt" 2>&1
    rm -f "$out/crowd.data"
  fi
fi

# The crowd's shape once the strand is no longer its cap (seventh session of 2026-11-27): in-flight
# batches and completion threads beside the defaults, three interleaved rounds.
if on crowdshape7; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  for rep in 1 2 3; do
    load cs-default-$rep gpubatch-load $crowd
    load cs-inflight3-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=3 -- gpubatch-load $crowd
    load cs-inflight4-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $crowd
    load cs-done6-$rep env GPUBATCH_COMPLETION_THREADS=6 -- gpubatch-load $crowd
    load cs-if4-done6-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=4 GPUBATCH_COMPLETION_THREADS=6 -- gpubatch-load $crowd
  done
  timeout 120 python3 bench/thread_cpu.py --json-out "$out/t.json" -- "$run" gpubatch-load $crowd --json > /dev/null 2>&1
  cat "$out/t.json" > "$out/threads.txt" 2>/dev/null; rm -f "$out/t.json"
fi

# CLDEMOTE on the queue's slots (seventh session of 2026-11-27), one binary with and without
# GPUBATCH_CLDEMOTE=off: the crowd, four interleaved rounds, and the lone caller twice each; the
# host's CPU model first (whether it has the instruction: cldemote in the flags).
if on demote; then
  { grep -m1 "model name" /proc/cpuinfo; grep -m1 -o -w cldemote /proc/cpuinfo || echo "no cldemote"; } > "$out/cpu.txt" 2>&1
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4; do
    load dm-on-$rep gpubatch-load $crowd
    load dm-off-$rep env GPUBATCH_CLDEMOTE=off -- gpubatch-load $crowd
  done
  for rep in 1 2; do
    load dm-lone-on-$rep gpubatch-load $lone
    load dm-lone-off-$rep env GPUBATCH_CLDEMOTE=off -- gpubatch-load $lone
  done
fi

# The lone caller, this build against gpubatch-load-prev (seventh session of 2026-11-27: does the
# strand's trim cost a lone request anything?): futures and --sync, six interleaved rounds.
if on loneab7; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4 5 6; do
    load la-new-$rep gpubatch-load $lone
    load la-prev-$rep gpubatch-load-prev $lone
    load la-sync-new-$rep gpubatch-load --sync $lone
    load la-sync-prev-$rep gpubatch-load-prev --sync $lone
  done
fi

# The 64-thread mix of sizes, this build against gpubatch-mix-old, more rounds (seventh session of
# 2026-11-27): six interleaved rounds, no trace.
if on mixed64b; then
  m="--threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe"
  for rep in 1 2 3 4 5 6; do
    load m64b-$rep gpubatch-mix $m
    load m64b-old-$rep gpubatch-mix-old $m
  done
fi

# Where the crowd's CPU goes once the strand is not its cap (seventh session of 2026-11-27): one
# perf profile of the whole process (needs .gpu/bin/perf and a gpubatch-load with its symbols),
# by thread name, and each name's own breakdown.
if on crowdprof7 && have perf; then
  crowd="--threads 16 --inflight 1024 --requests 4000000 --op relu --size 256"
  timeout 120 "$run" perf record -F 2999 -g -o "$out/crowd.data" -- "$PWD/$run" gpubatch-load $crowd > "$out/perf-run.txt" 2>&1
  timeout 120 "$run" perf report -i "$out/crowd.data" --no-children --sort comm -g none > "$out/perf-comm.txt" 2>&1
  for c in gpubatch-load gpubatch-done gpubatch-strand; do
    timeout 120 "$run" perf report -i "$out/crowd.data" --comm $c --percentage relative --no-children --sort dso,sym -g none \
      --percent-limit 1 > "$out/perf-$c.txt" 2>&1
  done
  rm -f "$out/crowd.data"
fi

# Two GPUs behind one executor after the strand's trims (seventh session of 2026-11-27): the
# 256-float crowd of 32 callers on device 0 alone and on the set of both, this build against
# gpubatch-load-prev (a198a11), two interleaved rounds.
if on multi7; then
  small="--threads 32 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    for d in "device 0" "devices 0,1"; do
      tag=${d// /}; tag=${tag//,/-}
      load m7-$tag-new-$rep gpubatch-load --$d $small
      load m7-$tag-prev-$rep gpubatch-load-prev --$d $small
    done
  done
fi

# Do two GPUs' buses add up? (eighth session of 2026-11-27, nvidia-h100-x2): the copy engines
# (gpubatch-copy-rate, both ways at once) and 16 callers of 1,048,576-float relu from HostBuffers
# and from vectors, on device 0 alone, device 1 alone, then both at once (two processes, one per
# device, started together). If both at once carry twice one, HostBuffers shared by the members
# of a set are worth building.
if on multibus; then
  cr="--bytes 268435456 --repeat 16"
  for d in 0 1; do
    have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate $cr --device $d > "$out/mb-copy-d$d.txt" 2>&1
  done
  if have gpubatch-copy-rate; then
    timeout 60 "$run" gpubatch-copy-rate $cr --device 0 > "$out/mb-copy-both-d0.txt" 2>&1 &
    timeout 60 "$run" gpubatch-copy-rate $cr --device 1 > "$out/mb-copy-both-d1.txt" 2>&1 &
    wait
  fi
  for rep in 1 2; do
    for v in "hb --host-buffers" "v"; do
      set -- $v; tag=$1; shift
      big="--threads 16 --inflight 8 --op relu --size 1048576 --requests 3000 $*"
      load mb-$tag-d0-$rep gpubatch-load --device 0 $big
      load mb-$tag-d1-$rep gpubatch-load --device 1 $big
      load mb-$tag-both0-$rep gpubatch-load --device 0 $big &
      load mb-$tag-both1-$rep gpubatch-load --device 1 $big &
      wait
      load mb-$tag-set-$rep gpubatch-load --devices 0,1 $big
    done
  done
fi

# A device set after the lanes and shared HostBuffers (eighth session of 2026-11-27,
# nvidia-h100-x2): 16 callers of 1,048,576- and 65,536-float relu, one device against the set of
# both, from HostBuffers (now shared by both devices) and from vectors (now on the lanes; with
# GPUBATCH_SET_LANES=off as before), interleaved; the tests that open devices twice.
if on setbus; then
  have gpubatch_tests && GPUBATCH_VALIDATION=0 timeout 120 "$run" gpubatch_tests --gtest_filter='HostImport*:*HostImport*' \
    > "$out/tests-hostimport.txt" 2>&1
  have gpubatch_integration_tests && GPUBATCH_VALIDATION=0 timeout 120 "$run" gpubatch_integration_tests \
    --gtest_filter='DeviceSetVulkan.*' > "$out/tests-deviceset.txt" 2>&1
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 67108864 --device 0 > "$out/sb-copy.txt" 2>&1
  for rep in 1 2; do
    for s in 1048576 65536; do
      n=$(( 12000000000 / (s * 4) ))
      big="--threads 16 --inflight 8 --op relu --size $s --requests $n"
      load sb-hb-$s-one-$rep gpubatch-load --device 0 $big --host-buffers
      load sb-hb-$s-set-$rep gpubatch-load --devices 0,1 $big --host-buffers
      load sb-v-$s-one-$rep gpubatch-load --device 0 $big
      load sb-v-$s-set-$rep gpubatch-load --devices 0,1 $big
      load sb-v-$s-setoff-$rep env GPUBATCH_SET_LANES=off -- gpubatch-load --devices 0,1 $big
    done
  done
fi

# The same against the previous build (gpubatch-load-prev: 3f0cc6d, before the set's lanes and
# shared HostBuffers), three interleaved rounds, and one perf profile of the set from HostBuffers
# (needs .gpu/bin/perf and a gpubatch-load with its symbols).
if on setbus2; then
  for rep in 1 2 3; do
    for v in "hb-1m --size 1048576 --requests 2861 --host-buffers" "hb-64k --size 65536 --requests 45776 --host-buffers" \
             "v-1m --size 1048576 --requests 2861"; do
      set -- $v; tag=$1; shift
      big="--threads 16 --inflight 8 --op relu $*"
      load s2-$tag-one-$rep gpubatch-load --device 0 $big
      load s2-$tag-set-$rep gpubatch-load --devices 0,1 $big
      load s2-$tag-setprev-$rep gpubatch-load-prev --devices 0,1 $big
    done
  done
  if have perf; then
    timeout 120 "$run" perf record -F 999 -g -o "$out/setbus.data" -- "$PWD/$run" gpubatch-load --devices 0,1 \
      --threads 16 --inflight 8 --op relu --size 1048576 --requests 2861 --host-buffers > "$out/perf-setbus-run.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/setbus.data" --no-children --sort comm,sym -g none --percent-limit 0.8 \
      > "$out/perf-setbus.txt" 2>&1
    rm -f "$out/setbus.data"
  fi
fi

# The eighth session's final build against 3f0cc6d on two H100s: the set and one device from
# HostBuffers (65,536 and 1,048,576 floats) and from vectors, three interleaved rounds; the
# 256-float crowd on one device and on the set, two rounds; where the set's CPU goes (threads);
# the host's memcpy with 16 and 32 threads.
if on final8; then
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 67108864 --device 0 --host-threads 16,32 \
    > "$out/f8-copy.txt" 2>&1
  for rep in 1 2 3; do
    for v in "hb-1m --size 1048576 --requests 2861 --host-buffers" "hb-64k --size 65536 --requests 45776 --host-buffers" \
             "v-1m --size 1048576 --requests 2861"; do
      set -- $v; tag=$1; shift
      big="--threads 16 --inflight 8 --op relu $*"
      load f8-$tag-one-$rep gpubatch-load --device 0 $big
      load f8-$tag-set-$rep gpubatch-load --devices 0,1 $big
      load f8-$tag-setprev-$rep gpubatch-load-prev --devices 0,1 $big
    done
  done
  crowd="--threads 32 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load f8-crowd-one-$rep gpubatch-load --device 0 $crowd
    load f8-crowd-set-$rep gpubatch-load --devices 0,1 $crowd
    load f8-crowd-setprev-$rep gpubatch-load-prev --devices 0,1 $crowd
  done
  timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-hb1m-set.json" -- "$run" gpubatch-load --devices 0,1 \
    --threads 16 --inflight 8 --op relu --size 1048576 --requests 2861 --host-buffers --json > "$out/threads-hb1m-set.txt" 2>&1
fi

# Issue 14's loads on a host with more cores than the loads have threads (2026-11-28): every load
# twice per round, pinned to 16 cores (taskset -c 0-15, the one-GPU machines' size) and on all of
# them, interleaved, one device (--device 0). Sets `pin` (a command prefix `load` runs under).
cores9_round() {
  local tag=$1 P=--host-probe
  load c9-$tag-crowd gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
  for r in 1080000 1500000 2000000 2500000; do
    load c9-$tag-open$r gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
  done
  for r in 500000 1000000 1500000; do
    load c9-$tag-p99t500-$r gpubatch-mix --device 0 --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3)) $P
  done
  load c9-$tag-mixidle gpubatch-mix --device 0 --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  load c9-$tag-mixsat gpubatch-mix --device 0 --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000 $P
  load c9-$tag-dlsat gpubatch-mix --device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 3000000 --requests 6000000 $P
  load c9-$tag-dllarge gpubatch-mix --device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000 $P
  load c9-$tag-blockfor gpubatch-mix --device 0 --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  load c9-$tag-mixed64 gpubatch-mix --device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 $P
}
# The latency target beside no target on the same mix (2026-11-28): gpubatch-mix at 500,000,
# 1,000,000 and 1,500,000/s with --target-p99-us 500 and without, interleaved, one device; then
# one traced run of each at 1,000,000/s (bench/trace_batches.py, bench/trace_episodes.py).
# A core per member of a device set (2026-11-28, shard_per_device, on by default) against one
# core for the set (GPUBATCH_SHARD_PER_DEVICE=off) and one device, interleaved: the crowd of
# 256-float relu from 32 callers (16 on one device), a lone caller, large requests (65,536-float
# relu from shared HostBuffers and 1,048,576-float relu from vectors, 16 callers x 8).
if on shard9; then
  crowd="--inflight 1024 --op relu --size 256"
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in ${SHARD9_ROUNDS:-1 2 3}; do
    load sh-crowd-set-$rep gpubatch-load --devices 0,1 --threads 32 --requests 16000000 $crowd
    load sh-crowd-off-$rep env GPUBATCH_SHARD_PER_DEVICE=off -- gpubatch-load --devices 0,1 --threads 32 --requests 16000000 $crowd
    load sh-crowd-one-$rep gpubatch-load --device 0 --threads 16 --requests 8000000 $crowd
    load sh-lone-set-$rep gpubatch-load --devices 0,1 $lone
    load sh-lone-off-$rep env GPUBATCH_SHARD_PER_DEVICE=off -- gpubatch-load --devices 0,1 $lone
  done
  for rep in 1 2; do
    for m in set off; do
      e=""; [ $m = off ] && e="env GPUBATCH_SHARD_PER_DEVICE=off --"
      load sh-hb64k-$m-$rep $e gpubatch-load --devices 0,1 --threads 16 --inflight 8 --op relu --size 65536 --requests 40000 --host-buffers
      load sh-vec1m-$m-$rep $e gpubatch-load --devices 0,1 --threads 16 --inflight 8 --op relu --size 1048576 --requests 3000
    done
  done
fi

# What two H100s carry of a crowd (2026-11-28): one process per device at once (two
# gpubatch-load, 16 callers each, --device 0 and --device 1) against one process on one device and
# one executor on the set (32 callers), interleaved; each run's JSON in results.jsonl.
if on twoproc9; then
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  # run.sh runs ldconfig, which two processes started at once race on: after one run, a runner
  # without it.
  "$run" gpubatch-load --device 0 --threads 1 --requests 100 --op relu --size 256 > /dev/null 2>&1
  cat > /tmp/gpubatch-run-direct.sh <<EOS
#!/usr/bin/env bash
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
  [ -f "\$icd" ] && { export VK_DRIVER_FILES=\${VK_DRIVER_FILES:-\$icd}; break; }
done
bin=\$1; shift
LD_LIBRARY_PATH="$PWD/.gpu/lib" exec "$PWD/.gpu/bin/\$(basename "\$bin")" "\$@"
EOS
  chmod +x /tmp/gpubatch-run-direct.sh
  run_saved=$run; run=/tmp/gpubatch-run-direct.sh
  for rep in ${TWOPROC9_ROUNDS:-1 2}; do
    load tp-one-$rep gpubatch-load --device 0 $crowd
    load tp-set-$rep gpubatch-load --devices 0,1 --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256
    load tp-proc0-$rep gpubatch-load --device 0 $crowd &
    load tp-proc1-$rep gpubatch-load --device 1 $crowd
    wait
  done
  run=$run_saved
fi

# Polling every batch (GPUBATCH_POLL_ALL=on) against the default (only lone and full batches),
# 2026-11-28: the traces of the first calls had small batches whose blocking wait woke about 1 ms
# late (device spans of 812-996 us for 28-138 requests). The mix at 1,000,000/s and the open loop
# at 2,000,000/s, on all cores and pinned to 16 (taskset -c 0-15), interleaved.
if on poll9; then
  for rep in ${POLL9_ROUNDS:-1 2 3}; do
    for p in all c16; do
      [ $p = c16 ] && pin="taskset -c 0-15" || pin=""
      for mode in default on; do
        e="env GPUBATCH_POLL_ALL=$([ $mode = on ] && echo on || echo off) --"
        load pl-$p-$mode-mix1m-$rep $e gpubatch-mix --device 0 --threads 16 --size 256 --rate 1000000 --requests 3000000 --host-probe
        load pl-$p-$mode-open2m-$rep $e gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 --host-probe
      done
    done
    pin=""
  done
fi

# A crowd of 16 callers on the set (2026-11-28): a core per device against one core and one
# device, the same 16 threads x 1024 in flight, two interleaved rounds.
if on crowd16set9; then
  c="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load c16-set-$rep gpubatch-load --devices 0,1 $c
    load c16-off-$rep env GPUBATCH_SHARD_PER_DEVICE=off -- gpubatch-load --devices 0,1 $c
    load c16-one-$rep gpubatch-load --device 0 $c
  done
fi

# Resident mode on a device set keeps one core (2026-11-28): the realtime lone caller (--sync and
# future) on the set against one device, and the realtime crowd on the set.
if on resset9; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256 --preset realtime"
  for rep in 1 2; do
    load rs-set-sync-$rep gpubatch-load --devices 0,1 $lone --sync
    load rs-one-sync-$rep gpubatch-load --device 0 $lone --sync
    load rs-set-future-$rep gpubatch-load --devices 0,1 $lone
  done
  load rs-set-crowd gpubatch-load --devices 0,1 --preset realtime --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256
fi

# The deadline collapse past saturation with the host quiet (2026-11-28): half the requests on a
# 2 ms deadline at 3,000,000/s offered, one device; CPU by thread name, then perf by thread and by
# symbol per thread (when .gpu/bin/perf is bundled).
if on dlprof9; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 3000000 --requests 6000000"
  load dp-dlsat gpubatch-mix $dl --host-probe
  timeout 120 python3 bench/thread_cpu.py -- "$run" gpubatch-mix $dl --json > "$out/threads-dlsat.txt" 2>&1
  if have perf; then
    timeout 120 "$run" perf record -F 999 -g -o "$out/dl.data" -- "$PWD/$run" gpubatch-mix $dl --json > "$out/perf-dl-run.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/dl.data" --no-children --sort comm -g none > "$out/perf-dl-comm.txt" 2>&1
    for c in gpubatch-strand gpubatch-done gpubatch-expiry gpubatch-mix gpubatch-io; do
      timeout 120 "$run" perf report -i "$out/dl.data" --comm $c --no-children --sort sym -g none --percent-limit 1 \
        > "$out/perf-dl-$c.txt" 2>&1
    done
    rm -f "$out/dl.data"
  fi
fi

# Is the shards' lone-caller p99 the second device's? (2026-11-28): a lone caller on device 0
# and on device 1 alone, and on the set with each mode, interleaved; the host's topology.
if on lonedev9; then
  nvidia-smi topo -m > "$out/topo.txt" 2>&1
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3; do
    load ld-dev0-$rep gpubatch-load --device 0 $lone
    load ld-dev1-$rep gpubatch-load --device 1 $lone
    load ld-set-$rep gpubatch-load --devices 0,1 $lone
    load ld-off-$rep env GPUBATCH_SHARD_PER_DEVICE=off -- gpubatch-load --devices 0,1 $lone
  done
fi

# The final build of the ninth session (2026-11-28): the GPU tests with two real devices, then
# the set's crowd and lone caller with a core per member against one core, interleaved.
if on final9; then
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_integration_tests > "$out/tests-integration.txt" 2>&1
  echo "   integration tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-integration.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_tests > "$out/tests-core.txt" 2>&1
  echo "   core tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-core.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3; do
    load f9-lone-set-$rep gpubatch-load --devices 0,1 $lone
    load f9-lone-off-$rep env GPUBATCH_SHARD_PER_DEVICE=off -- gpubatch-load --devices 0,1 $lone
    load f9-lone-one-$rep gpubatch-load --device 0 $lone
  done
  for rep in 1 2; do
    load f9-crowd-set-$rep gpubatch-load --devices 0,1 --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256
    load f9-crowd-off-$rep env GPUBATCH_SHARD_PER_DEVICE=off -- gpubatch-load --devices 0,1 --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256
  done
fi

# A pull bounded by what was pushed when it began (2026-11-28, call 4 of BENCHMARKS.md's ninth
# session): GPUBATCH_PULL_SNAPSHOT was a switch of that build only (reverted); with today's code
# both arms run the same. The mix (handlers) and the open loop (futures) at 1,000,000 and
# 2,000,000/s and the crowd, interleaved; then the traced mix.
if on snap9; then
  for rep in ${SNAP9_ROUNDS:-1 2 3}; do
    for mode in on off; do
      e="env GPUBATCH_PULL_SNAPSHOT=$mode --"
      load sn-$mode-mix1m-$rep $e gpubatch-mix --device 0 --threads 16 --size 256 --rate 1000000 --requests 3000000 --host-probe
      load sn-$mode-open1m-$rep $e gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000 --host-probe
      load sn-$mode-open2m-$rep $e gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 --host-probe
      load sn-$mode-crowd-$rep $e gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
  for mode in on off; do
    load sn-trace-$mode env GPUBATCH_PULL_SNAPSHOT=$mode GPUBATCH_TRACE=$out/trace-sn-$mode.json -- \
      gpubatch-mix --device 0 --threads 16 --size 256 --rate 1000000 --requests 3000000 --host-probe
    if [ -f "$out/trace-sn-$mode.json" ]; then
      python3 bench/trace_episodes.py "$out/trace-sn-$mode.json" --episodes 4 > "$out/episodes-sn-$mode.txt" 2>&1
      python3 bench/trace_batches.py "$out/trace-sn-$mode.json" > "$out/batches-sn-$mode.txt" 2>&1
      rm -f "$out/trace-sn-$mode.json"
    fi
  done
fi

# What the strand did in the episodes (2026-11-28): the mix at 1,000,000/s traced, with the
# strand's runs now in the trace (bench/trace_episodes.py prints them per episode), three rounds.
if on runs9; then
  for rep in 1 2 3; do
    load r9-trace-$rep env GPUBATCH_TRACE=$out/trace-r9-$rep.json -- \
      gpubatch-mix --device 0 --threads 16 --size 256 --rate 1000000 --requests 3000000 --host-probe
    if [ -f "$out/trace-r9-$rep.json" ]; then
      python3 bench/trace_episodes.py "$out/trace-r9-$rep.json" --episodes 6 > "$out/episodes-r9-$rep.txt" 2>&1
      python3 bench/trace_batches.py "$out/trace-r9-$rep.json" > "$out/batches-r9-$rep.txt" 2>&1
      gzip -1 "$out/trace-r9-$rep.json"
      [ "$rep" = 1 ] || rm -f "$out/trace-r9-$rep.json.gz"
    fi
  done
fi

if on tp9; then
  for rep in ${TP9_ROUNDS:-1 2}; do
    for r in 500000 1000000 1500000; do
      load tp9-t500-$r-$rep gpubatch-mix --device 0 --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3)) --host-probe
      load tp9-none-$r-$rep gpubatch-mix --device 0 --threads 16 --size 256 --rate $r --requests $((r * 3)) --host-probe
    done
  done
  for t in 500 0; do
    load tp9-trace-$t env GPUBATCH_TRACE=$out/trace-tp9-$t.json -- \
      gpubatch-mix --device 0 --threads 16 --size 256 --target-p99-us $t --rate 1000000 --requests 3000000
    if [ -f "$out/trace-tp9-$t.json" ]; then
      python3 bench/trace_episodes.py "$out/trace-tp9-$t.json" --episodes 3 > "$out/episodes-tp9-$t.txt" 2>&1
      python3 bench/trace_batches.py "$out/trace-tp9-$t.json" > "$out/batches-tp9-$t.txt" 2>&1
      rm -f "$out/trace-tp9-$t.json"
    fi
  done
fi

if on cores9; then
  nproc > "$out/cores.txt"; lscpu >> "$out/cores.txt" 2>&1
  for rep in ${CORES9_ROUNDS:-1}; do
    pin="taskset -c 0-15" cores9_round c16-$rep
    pin="" cores9_round all-$rep
  done
fi

# A lone caller's large request from HostBuffers on two H100s (eighth session of 2026-11-27):
# one device, the set (spread in ranges over both), the set with GPUBATCH_SET_SPREAD_BYTES=never,
# and the previous build's set (gpubatch-load-prev), interleaved; 4,194,304 and 16,777,216 floats.
if on spread8; then
  for rep in 1 2 3; do
    for s in 4194304 16777216; do
      lone="--threads 1 --inflight 1 --op relu --size $s --requests $(( 600 * 4194304 / s )) --host-buffers"
      load sp-$s-one-$rep gpubatch-load --device 0 $lone
      load sp-$s-set-$rep gpubatch-load --devices 0,1 $lone
      load sp-$s-setnever-$rep env GPUBATCH_SET_SPREAD_BYTES=never -- gpubatch-load --devices 0,1 $lone
      load sp-$s-setprev-$rep gpubatch-load-prev --devices 0,1 $lone
    done
  done
  load sp-add-set gpubatch-load --devices 0,1 --threads 1 --inflight 1 --op add --size 16777216 --requests 150 --host-buffers
  load sp-add-one gpubatch-load --device 0 --threads 1 --inflight 1 --op add --size 16777216 --requests 150 --host-buffers
fi

# The request size sweep at two depths (sixth session of 2026-11-27): 16 callers, `adaptive`
# (every default) and --unbatched, with 8 requests in flight per caller (the sweep's depth so
# far) and with 1 (the unbatched path's own depth), 3 GB of input a run; the copy rate first.
if on sweep6 && have gpubatch-copy-rate && command -v python3 >/dev/null; then
  make_wrappers
  for d in 8 1; do
    echo "== sweep6 depth $d" >&2
    timeout 280 python3 bench/size_sweep.py --bin /tmp/gpubatch-wrap --out "$out/size-sweep-d$d.jsonl" --threads 16 \
      --inflight $d --presets adaptive --bytes-per-run 3e9 --max-requests 200000 > "$out/sweep-d$d.txt" 2>&1 || true
  done
fi

# Is the lane's extra CPU the load's depth? (sixth session of 2026-11-27): 16 callers of
# 262,144- and 1,048,576-float relu from vectors, 8 in flight (the sweep's depth) against 1 in
# flight (the unbatched path's: --unbatched forces 1) and --unbatched, three rounds.
if on lanedepth; then
  for rep in 1 2 3; do
    for s in 262144 1048576; do
      n=$(( 6000000000 / (s * 4) ))
      big="--threads 16 --requests $n --op relu --size $s"
      load ld-$s-8-$rep gpubatch-load $big --inflight 8
      load ld-$s-1-$rep gpubatch-load $big --inflight 1
      load ld-$s-unb-$rep gpubatch-load --unbatched $big
    done
  done
fi

# Where the direct lane's CPU goes (sixth session of 2026-11-27): 16 callers x 8 in flight of
# 1,048,576-float relu, from vectors and from HostBuffers; this build (every large request on the
# lane), with the lane waiting as Device::run does (GPUBATCH_LANE_WAIT=run: poll for
# completion_spin, then block), taking results without the completion threads' help
# (GPUBATCH_LANE_HELPERS=off), both, the previous build (d693276) and --unbatched; three rounds.
if on lanewait; then
  for rep in 1 2 3; do
    for src in vec hb; do
      big="--threads 16 --inflight 8 --requests 1500 --op relu --size 1048576"
      [ $src = hb ] && big="$big --host-buffers"
      load lw-$src-this-$rep gpubatch-load $big
      load lw-$src-run-$rep env GPUBATCH_LANE_WAIT=run -- gpubatch-load $big
      load lw-$src-nohelp-$rep env GPUBATCH_LANE_HELPERS=off -- gpubatch-load $big
      load lw-$src-both-$rep env GPUBATCH_LANE_WAIT=run GPUBATCH_LANE_HELPERS=off -- gpubatch-load $big
      load lw-$src-prev-$rep gpubatch-load-prev $big
      load lw-$src-unb-$rep gpubatch-load --unbatched $big
    done
  done
fi

# The lanes' busy rule and the 2 MiB line (sixth session of 2026-11-27): 16 callers x 8 in flight
# from vectors at 131,072-4,194,304 floats, this build (a large request running on a lane or in
# chunks makes the executor busy for the lanes, and none goes in chunks beside it; the direct
# line at 2 MiB), the same with the old line (GPUBATCH_DIRECT_BYTES=4194304), the previous build
# (gpubatch-load-prev, d693276) and --unbatched, three interleaved rounds of 6 GB of input; then
# 1,048,576 floats from HostBuffers, a lone 4,194,304-float caller (chunks), and issue 14's
# 64-thread mix (handlers: the bulk lane) against gpubatch-mix-prev.
if on lanes6; then
  for rep in 1 2 3; do
    for s in 131072 262144 1048576 4194304; do
      n=$(( 6000000000 / (s * 4) ))
      big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
      load l6-$s-this-$rep gpubatch-load $big
      load l6-$s-line4m-$rep env GPUBATCH_DIRECT_BYTES=4194304 -- gpubatch-load $big
      load l6-$s-prev-$rep gpubatch-load-prev $big
      load l6-$s-unb-$rep gpubatch-load --unbatched $big
    done
    hb="--threads 16 --inflight 8 --requests 1500 --op relu --size 1048576 --host-buffers"
    load l6-hb-this-$rep gpubatch-load $hb
    load l6-hb-prev-$rep gpubatch-load-prev $hb
    load l6-hb-unb-$rep gpubatch-load --unbatched $hb
  done
  for rep in 1 2; do
    lone="--threads 1 --inflight 1 --requests 300 --op relu --size 4194304"
    load l6-lone-this-$rep gpubatch-load $lone
    load l6-lone-prev-$rep gpubatch-load-prev $lone
    mix="--threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe"
    load l6-mix-this-$rep gpubatch-mix $mix
    load l6-mix-prev-$rep gpubatch-mix-prev $mix
  done
fi

# Batched against unbatched for large requests from vectors, in long interleaved runs (sixth
# session of 2026-11-27): issue 12 asks the best batched preset >= the unbatched path at every
# size of the sweep, whose short runs at 262,144 floats and up came out 0.74-0.81x. 16 callers x
# 8 in flight, 8 GB of input a run, three rounds; at 262,144 floats also with the direct lane's
# line at 1 MiB (GPUBATCH_DIRECT_BYTES=1048576: those requests then go alone on their callers'
# threads, as unbatched ones do).
if on bigeven; then
  for rep in 1 2 3; do
    for s in 65536 262144 1048576 4194304; do
      n=$(( 8000000000 / (s * 4) ))
      big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
      load be-$s-$rep gpubatch-load $big
      load be-$s-unb-$rep gpubatch-load --unbatched $big
      [ $s = 262144 ] && load be-$s-line1m-$rep env GPUBATCH_DIRECT_BYTES=1048576 -- gpubatch-load $big
    done
  done
fi

# Callers' express batches (sixth session of 2026-11-27; the switch exists in commit 23b6cc9 only,
# taken out after): the priority mix idle, towards and past
# saturation, this build against GPUBATCH_EXPRESS_INLINE=off (every express batch formed by the
# strand, as before), rounds interleaved; traced once each at 2 M/s (the express batches' stages).
if on xinline; then
  pm="gpubatch-mix --threads 16 --high 0.1 --size 256 --host-probe"
  off="env GPUBATCH_EXPRESS_INLINE=off --"
  load xi-idle $pm --rate 10000 --requests 30000
  load xi-idle-off $off $pm --rate 10000 --requests 30000
  for rep in 1 2; do
    for r in 1500000 2000000 3000000; do
      load xi-$r-$rep $pm --rate $r --requests $((r * 3))
      load xi-$r-off-$rep $off $pm --rate $r --requests $((r * 3))
    done
  done
  for v in on off; do
    load xi-2m-trace-$v env GPUBATCH_EXPRESS_INLINE=$v GPUBATCH_TRACE=$out/trace-xi-$v.json -- $pm --rate 2000000 --requests 6000000
    if [ -f "$out/trace-xi-$v.json" ]; then
      python3 bench/trace_batches.py "$out/trace-xi-$v.json" --slowest 4 > "$out/batches-xi-$v.txt" 2>&1
      rm -f "$out/trace-xi-$v.json"
    fi
  done
fi

# The crowd against the build that ran it at 6.2-6.8 M requests/s on the H200 of 2026-11-23
# (sixth session of 2026-11-27): gpubatch-load-r1 built from f5afc07 (the end of 2026-11-23),
# three interleaved rounds, each run's threads weighed (bench/thread_cpu.py); the lone caller once
# each. Both named `adaptive` (f5afc07's default was `balanced`).
if on r1; then
  crowd="--preset adaptive --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  lone="--preset adaptive --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3; do
    for b in gpubatch-load gpubatch-load-r1; do
      have $b || continue
      echo "== r1-crowd-$b-$rep" >> "$out/log.txt"
      line=$(python3 bench/thread_cpu.py --json-out "$out/threads-r1-$b-$rep.json" -- \
        timeout 90 "$run" $b $crowd --json 2>> "$out/log.txt" | tail -1)
      [[ $line == "{"* ]] && echo "{\"name\": \"r1-crowd-$b-$rep\", ${line:1}" >> "$out/results.jsonl"
    done
  done
  for b in gpubatch-load gpubatch-load-r1; do load r1-lone-$b $b $lone; done
fi

if on final5b; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    for b in gpubatch-load gpubatch-load-prev; do
      have $b || continue
      load f5-lone-$b-$rep $b $lone
      load f5-crowd-$b-$rep $b $crowd
      for s in 65536 1048576; do
        n=$(( s == 65536 ? 20000 : 2000 ))
        big="--threads 16 --inflight 8 --requests $n --op relu --size $s --host-buffers"
        load f5-$s-ce-$b-$rep env GPUBATCH_COPY_ENGINE_BYTES=0 -- $b $big
        load f5-$s-$b-$rep $b $big
      done
    done
  done
fi

# Express batches on a queue of their own (fifth session of 2026-11-27): the priority mix idle,
# at 1.5 and 2 M/s and past saturation (3 M/s offered), this build against
# GPUBATCH_EXPRESS_QUEUE=off (express batches on the batches' queue, as before), interleaved;
# past saturation traced once each (bench/trace_batches.py: the express batches' stages).
if on expressq; then
  pm="gpubatch-mix --threads 16 --high 0.1 --size 256 --host-probe"
  off="env GPUBATCH_EXPRESS_QUEUE=off --"
  load eq-idle $pm --rate 10000 --requests 30000
  load eq-idle-off $off $pm --rate 10000 --requests 30000
  for rep in 1 2 3; do
    load eq-3m-$rep $pm --rate 3000000 --requests 9000000
    load eq-3m-off-$rep $off $pm --rate 3000000 --requests 9000000
  done
  for rep in 1 2; do
    for r in 1500000 2000000; do
      load eq-$r-$rep $pm --rate $r --requests $((r * 3))
      load eq-$r-off-$rep $off $pm --rate $r --requests $((r * 3))
    done
  done
  for v in on off; do
    load eq-3m-trace-$v env GPUBATCH_EXPRESS_QUEUE=$v GPUBATCH_TRACE=$out/trace-eq-$v.json -- $pm --rate 3000000 --requests 9000000
    if [ -f "$out/trace-eq-$v.json" ]; then
      python3 bench/trace_batches.py "$out/trace-eq-$v.json" --slowest 4 > "$out/batches-eq-$v.txt" 2>&1
      rm -f "$out/trace-eq-$v.json"
    fi
  done
fi

# The priority mix towards and past saturation (fifth session of 2026-11-27): high-priority p99
# at 1.5-3 M/s offered, past saturation traced once, and with the executor's threads at a higher
# CPU priority (thread_nice -10: are the senders' threads what the express batches wait for?);
# block_for beside it with the same setting.
if on prio; then
  pm="gpubatch-mix --threads 16 --high 0.1 --size 256 --host-probe"
  load pr-idle $pm --rate 10000 --requests 30000
  for r in 1500000 2000000 2500000; do load pr-$r $pm --rate $r --requests $((r * 3)); done
  for rep in 1 2; do
    load pr-3m-$rep $pm --rate 3000000 --requests 9000000
    load pr-3m-nice-$rep env GPUBATCH_THREAD_NICE=-10 -- $pm --rate 3000000 --requests 9000000
  done
  load pr-2500000-nice env GPUBATCH_THREAD_NICE=-10 -- $pm --rate 2500000 --requests 7500000
  load pr-3m-trace env GPUBATCH_TRACE=$out/trace-pr.json -- $pm --rate 3000000 --requests 9000000
  if [ -f "$out/trace-pr.json" ]; then
    python3 bench/trace_batches.py "$out/trace-pr.json" --slowest 6 > "$out/batches-pr.txt" 2>&1
    rm -f "$out/trace-pr.json"
  fi
  bf="gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 --host-probe"
  load pr-blockfor $bf
  load pr-blockfor-nice env GPUBATCH_THREAD_NICE=-10 -- $bf
fi

# Issues 11, 12 and 14's targets on the H200 (fifth session of 2026-11-27), every default unless
# named, with the yardsticks in the same call: the unbatched path, the copy engines' rate (each
# way, and both ways at once), the probe (section probe).
if on h200t; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load ht-lone-$rep gpubatch-load $lone --idle-ms 1000
    load ht-lone-sync-$rep gpubatch-load --sync $lone
    load ht-lone-unbatched-$rep gpubatch-load --unbatched $lone
    load ht-lone-realtime-$rep gpubatch-load --preset realtime $lone --idle-ms 1000
  done
  for rep in 1 2; do
    load ht-crowd-$rep gpubatch-load $crowd
    load ht-crowd-realtime-$rep gpubatch-load --preset realtime $crowd
  done
  load ht-crowd-unbatched gpubatch-load --unbatched --threads 16 --requests 400000 --op relu --size 256
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 262144,4194304,16777216,67108864 >> "$out/results.jsonl" 2>> "$out/log.txt"
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 40000 : 4000 ))
    big="--threads 16 --inflight 8 --requests $n --op relu --size $s"
    load ht-$s-host gpubatch-load $big --host-buffers
    load ht-$s-vec gpubatch-load $big
    load ht-$s-unbatched gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s
    load ht-$s-unbatched-host gpubatch-load --unbatched --threads 16 --requests $n --op relu --size $s --host-buffers
  done
  have graph_bench && timeout 120 "$run" graph_bench --benchmark_filter=Chain --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true > "$out/graph.txt" 2>> "$out/log.txt"
  for r in 500000 1080000 1500000 2000000; do
    load ht-open$r gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) --host-probe
  done
  for r in 250000 500000 1000000; do
    load ht-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3)) --host-probe
  done
  for rep in 1 2; do
    load ht-dl1m-$rep gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000 --host-probe
  done
  load ht-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 --host-probe
  load ht-mixsat gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 9000000 --host-probe
  load ht-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 --host-probe
fi

# The bulk lane (fourth session of 2026-11-27): a handler's large request goes to the lane's
# threads instead of the strand. 64 threads with 10 % of the requests 1,000,000 floats at 20,000/s
# (issue 14's mix: the small requests' p99), and 16 threads of 1,048,576-float relu through
# handlers (GB/s); this build against GPUBATCH_BULK_LANE=off, interleaved; then the open loop.
if on bulk; then
  m64="gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe"
  for rep in 1 2 3; do
    load bk-m64-$rep $m64
    load bk-m64-off-$rep env GPUBATCH_BULK_LANE=off -- $m64
  done
  for rep in 1 2; do
    load bk-vec-$rep gpubatch-load --threads 16 --inflight 8 --handlers --op relu --size 1048576 --requests 3000
    load bk-vec-off-$rep env GPUBATCH_BULK_LANE=off -- gpubatch-load --threads 16 --inflight 8 --handlers --op relu --size 1048576 --requests 3000
  done
  load bk-vec-unbatched gpubatch-load --threads 16 --inflight 1 --unbatched --op relu --size 1048576 --requests 3000
  load bk-open500k gpubatch-load --threads 16 --op relu --size 256 --rate 500000 --requests 1500000 --host-probe
fi

# No harm to the loads without deadlines or large requests (fourth session of 2026-11-27): the
# crowd and the open loop, this build against gpubatch-load-prev (built from 18994c0, the
# session's start), interleaved.
if on final4; then
  for rep in 1 2; do
    for b in gpubatch-load gpubatch-load-prev; do
      have $b || continue
      load f4-crowd-$b-$rep $b --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
      load f4-open500k-$b-$rep $b --threads 16 --op relu --size 256 --rate 500000 --requests 1500000 --host-probe
      load f4-open1080k-$b-$rep $b --threads 16 --op relu --size 256 --rate 1080000 --requests 3240000 --host-probe
    done
  done
fi

# The watch's own helpers (fourth session of 2026-11-27): half the requests on a 2 ms deadline at
# 1,000,000/s and at 1,300,000/s (past what most of these machines carry: expiring is then most
# of the work), this build against gpubatch-mix-prev (6093b8f: the round spread over the busy
# completion threads) and against both switches off (the session's start), interleaved.
if on helpers; then
  dl="gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --host-probe"
  for rep in 1 2 3; do
    load hp-dl1m-$rep $dl --rate 1000000 --requests 3000000
    have gpubatch-mix-prev && load hp-dl1m-prev-$rep gpubatch-mix-prev ${dl#gpubatch-mix } --rate 1000000 --requests 3000000
    load hp-dl1m-old-$rep env GPUBATCH_EXPIRY_SPREAD=off GPUBATCH_STRAND_EXPIRES=on -- $dl --rate 1000000 --requests 3000000
  done
  for rep in 1 2; do
    load hp-dl13-$rep $dl --rate 1300000 --requests 3900000
    load hp-dl13-old-$rep env GPUBATCH_EXPIRY_SPREAD=off GPUBATCH_STRAND_EXPIRES=on -- $dl --rate 1300000 --requests 3900000
  done
fi

# Is the 64-thread mix's remaining tail the process's own memory churn (fourth session of
# 2026-11-27)? Each large request's 4 MB vector is allocated and freed by the process: with glibc's
# defaults that is mmap, page faults and munmap (TLB shootdowns that stop every thread of the
# process). The mix with glibc keeping freed memory (no mmap for these sizes, no trims) against
# the defaults, interleaved; the stall probe says how long the process's threads waited.
if on churn; then
  m64="--threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe"
  keep="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"
  for rep in 1 2 3; do
    load ch-m64-$rep gpubatch-mix $m64
    load ch-m64-keep-$rep env $keep -- gpubatch-mix $m64
  done
  load ch-m64-keep-off env $keep GPUBATCH_BULK_LANE=off -- gpubatch-mix $m64
fi

# Memory blocks made outside the pool's lock (fourth session of 2026-11-27): the 64-thread mix with
# 10 % large requests, this build against gpubatch-mix-prev (built from 6093b8f, the lock held
# while a block is made), interleaved; then this build traced once.
if on poollock; then
  m64="--threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe"
  for rep in 1 2 3; do
    load pl-m64-$rep gpubatch-mix $m64
    have gpubatch-mix-prev && load pl-m64-prev-$rep gpubatch-mix-prev $m64
  done
  load pl-m64-trace env GPUBATCH_TRACE=$out/trace-pl.json -- gpubatch-mix $m64
  if [ -f "$out/trace-pl.json" ]; then
    python3 bench/trace_batches.py "$out/trace-pl.json" --slowest 8 > "$out/batches-pl.txt" 2>&1
    rm -f "$out/trace-pl.json"
  fi
  for rep in 1 2; do
    load pl-dl1m-$rep gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000 --host-probe
    load pl-open1m-$rep gpubatch-load --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000 --host-probe
  done
fi

# Where the mix's small requests still wait beside the bulk lane (fourth session of 2026-11-27):
# the 64-thread mix traced, twice, with its batches' stages (bench/trace_batches.py) and the
# process's threads' CPU (bench/thread_cpu.py).
if on bulktrace; then
  for rep in 1 2; do
    load bt-m64-$rep env GPUBATCH_TRACE=$out/trace-bt-$rep.json -- gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe
    if [ -f "$out/trace-bt-$rep.json" ]; then
      python3 bench/trace_batches.py "$out/trace-bt-$rep.json" --slowest 8 > "$out/batches-bt-$rep.txt" 2>&1
      rm -f "$out/trace-bt-$rep.json"
    fi
  done
  python3 bench/thread_cpu.py --json-out "$out/threads-bt.json" -- "$run" gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 > "$out/threads-bt.txt" 2>&1 || true
fi

# Expired requests off the strand (fourth session of 2026-11-27): the strand leaves a request whose
# deadline passed to the watch that holds it, and the watch spreads a round of due requests over
# the completion threads. Half the requests on a 2 ms deadline at 1,000,000/s (the load that
# collapsed to 340,000/s served) and with 1 % large requests at 150,000/s: this build, the same
# with GPUBATCH_EXPIRY_SPREAD=off (leaving only), and with both off (the previous behaviour),
# interleaved; then the open loop without deadlines for harm.
if on leave; then
  dl1m="gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000 --host-probe"
  dllarge="gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 150000 --requests 450000 --host-probe"
  for rep in 1 2 3; do
    load lv-dl1m-$rep $dl1m
    load lv-dl1m-nospread-$rep env GPUBATCH_EXPIRY_SPREAD=off -- $dl1m
    load lv-dl1m-old-$rep env GPUBATCH_EXPIRY_SPREAD=off GPUBATCH_STRAND_EXPIRES=on -- $dl1m
  done
  for rep in 1 2; do
    load lv-dllarge-$rep $dllarge
    load lv-dllarge-old-$rep env GPUBATCH_EXPIRY_SPREAD=off GPUBATCH_STRAND_EXPIRES=on -- $dllarge
    load lv-open500k-$rep gpubatch-load --threads 16 --op relu --size 256 --rate 500000 --requests 1500000 --host-probe
  done
fi

# Where a collapsed deadline load spends its time (third session of 2026-11-27): half the
# requests on a 2 ms deadline at 1,000,000/s under perf (no call graphs), three runs; per run the
# result and perf's split by thread and by thread and symbol.
if on dlcollapse && have perf; then
  for rep in 1 2 3; do
    timeout 120 "$run" perf record -F 999 -o "$out/dl-$rep.data" -- "$PWD/$run" gpubatch-mix --threads 16 --size 256 \
      --deadline-us 2000 --deadline-fraction 0.5 --rate 1000000 --requests 3000000 --json > "$out/dl-$rep.json" 2> "$out/dl-$rep.err"
    tail -1 "$out/dl-$rep.json" | sed "s/^{/{\"name\": \"dc-$rep\", /" >> "$out/results.jsonl"
    timeout 120 "$run" perf report -i "$out/dl-$rep.data" --sort comm --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -12 > "$out/dl-$rep-comm.txt"
    timeout 120 "$run" perf report -i "$out/dl-$rep.data" --sort comm,sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -45 > "$out/dl-$rep-sym.txt"
    rm -f "$out/dl-$rep.data"
  done
fi

# A short table last.
if command -v python3 >/dev/null; then
  python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
print(f"{'run':44s} {'req/s':>12s} {'GB/s in':>8s} {'p50 us':>8s} {'p99 us':>8s} {'lag p99':>8s} {'batch':>7s} {'cpu us/rq':>9s} {'idle cores':>10s} ok")
for line in open(os.path.join(out, "results.jsonl")):
    r = json.loads(line)
    if "name" not in r: continue
    if r.get("probe") == "submit_storm":
        a, b = r["submit_us"], r["span_us"]
        print(f"{r['name']:44s} {r['achieved_rate']:8.0f}/s submit p99 {a['p99']:.0f} max {a['max']:.0f}; span p50 {b['p50']:.0f} "
              f"p99 {b['p99']:.0f} p999 {b['p999']:.0f} max {b['max']:.0f} us; >1ms {r['spans_over_1ms']} >5ms {r['spans_over_5ms']}")
        continue
    if r.get("probe") == "stall":
        l = r["late_us"]
        print(f"{r['name']:44s} late p50 {l['p50']:.0f} p99 {l['p99']:.0f} p999 {l['p999']:.0f} max {l['max']:.0f} us, "
              f"stalls {r['stalls']} (together {r['stalls_together']}), steal {r['steal_ticks']}, invol {r['involuntary_switches']}")
        continue
    if r.get("tool") == "gpubatch-mix":
        a = r["latency_us"]["all"]
        late = r.get("deadline_late_us", {})
        print(f"{r['name']:44s} {r['completed_per_s']:12.0f} {'':8s} {a['p50']:8.1f} {a['p99']:8.1f} {late.get('p99', 0):8.1f} "
              f"{r.get('mean_batch_size', 0):7.1f} exp {r.get('deadline_exceeded', 0)} late {r.get('finished_after_deadline', 0)} {r['verified']}")
        continue
    gbps = r["throughput_rps"] * 4 * r["size"] / 1e9
    print(f"{r['name']:44s} {r['throughput_rps']:12.0f} {gbps:8.2f} {r['latency_us']['p50']:8.1f} "
          f"{r['latency_us']['p99']:8.1f} {r.get('send_lag_us', {}).get('p99', 0):8.1f} {r.get('mean_batch_size', 0):7.1f} {r.get('cpu_us_per_request', float('nan')):9.2f} "
          f"{r.get('idle_cores_busy', float('nan')):10.4f} {r['verified']}")
PY
fi
grep -h "p50" "$out/probe.txt" 2>/dev/null | head -12
grep -E "tests? (ran|passed)|FAILED|exit" "$out/tests.txt" "$out/log.txt" 2>/dev/null | tail -8

# Where do deadline errors past saturation come late from? (2026-11-28, tenth session):
# gpubatch-mix now splits the lateness by where a request failed (in the call, the watch, the
# strand); the same loads with every default, reject overflow, block_for, the priority mix; a
# perf profile with symbols (gpubatch-mix-sym: the unstripped binary).
if on dlpath10; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  load dl3m-1 gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
  load dl15m gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
  load dl3m-reject env GPUBATCH_OVERFLOW=reject -- gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
  load bf3m gpubatch-mix --device 0 --threads 16 --size 256 --block-for-us 300 --rate 3000000 --requests 6000000 --host-probe
  load prio3m gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 3000000 --requests 6000000 --host-probe
  load dl3m-2 gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
  timeout 120 python3 bench/thread_cpu.py -- "$run" gpubatch-mix $dl --rate 3000000 --requests 6000000 --json > "$out/threads-dl3m.txt" 2>&1
  if have perf && have gpubatch-mix-sym; then
    timeout 120 "$run" perf record -F 999 -g -o "$out/dl.data" -- "$PWD/$run" gpubatch-mix-sym $dl --rate 3000000 --requests 6000000 --json > "$out/perf-run.txt" 2>&1
    {
      timeout 120 "$run" perf report -i "$out/dl.data" --no-children --sort comm -g none
      timeout 120 "$run" perf report -i "$out/dl.data" --no-children --sort comm,sym -g none --percent-limit 0.4
      timeout 120 "$run" perf report -i "$out/dl.data" --no-children --sort sym -g caller,0.5,callee --percent-limit 3
    } > "$out/perf-dl.txt" 2>&1
    rm -f "$out/dl.data"
  fi
fi

# Deadline admission (2026-11-28, tenth session): a request with a deadline that the backlog
# ahead would outlast is refused at the call; on (the default) against off, interleaved.
if on admit10; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  for r in 1 2; do
    load adm-3m-on-$r gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load adm-3m-off-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
  done
  load adm-15m-on gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
  load adm-15m-off env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
  load adm-1m-on gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
  load adm-1m-off env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
  lg="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --large-size 1000000"
  load adm-large-on gpubatch-mix $lg --rate 150000 --requests 450000 --host-probe
  load adm-large-off env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $lg --rate 150000 --requests 450000 --host-probe
  load adm-open-on gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000
  thr="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 3000000 --requests 6000000 --json"
  timeout 120 python3 bench/thread_cpu.py -- "$run" gpubatch-mix $thr > "$out/threads-adm.txt" 2>&1
  GPUBATCH_DEADLINE_ADMISSION=off timeout 120 python3 bench/thread_cpu.py -- "$run" gpubatch-mix $thr >> "$out/threads-adm.txt" 2>&1
fi

# Deadline admission, second form (rate of requests taken into batches, the forming batch ahead):
# on against off, and on with the executor's threads at nice -10 (is the watch's lateness past
# saturation its wait for a core?), interleaved; under capacity (1 M/s) on against off.
if on admit10b; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  for r in 1 2; do
    load b-3m-on-$r gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load b-3m-off-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load b-3m-nice-$r env GPUBATCH_THREAD_NICE=-10 -- gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load b-15m-on-$r gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
    load b-15m-off-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
    load b-1m-on-$r gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
    load b-1m-off-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
  done
fi

# What holds the deadline watch's errors 8-30 ms late past saturation? (tenth session): the
# handler reading its error later (no rethrow on the watch's threads), the watch without its
# helpers, and a profile of the expiry threads with call graphs (gpubatch-mix-sym).
if on watch10; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 3000000 --requests 6000000"
  for r in 1 2; do
    load w-on-$r gpubatch-mix $dl --host-probe
    load w-later-$r gpubatch-mix $dl --host-probe --read-errors-later
    load w-nospread-$r env GPUBATCH_EXPIRY_SPREAD=off -- gpubatch-mix $dl --host-probe
  done
  load w-15m-later gpubatch-mix --device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1500000 --requests 3000000 --host-probe --read-errors-later
  if have perf && have gpubatch-mix-sym; then
    timeout 120 "$run" perf record -F 1999 -g -o "$out/w.data" -- "$PWD/$run" gpubatch-mix-sym $dl --json > "$out/perf-run.txt" 2>&1
    {
      timeout 120 "$run" perf report -i "$out/w.data" --no-children --sort comm -g none
      timeout 120 "$run" perf report -i "$out/w.data" --comm gpubatch-expiry --no-children --sort dso,sym -g none --percent-limit 0.3
      timeout 120 "$run" perf report -i "$out/w.data" --comm gpubatch-expiry --children --sort sym -g none --percent-limit 2
    } > "$out/perf-watch.txt" 2>&1
    rm -f "$out/w.data"
  fi
fi

# The final build of the tenth session: deadline admission and gpubatch::error_code_of (the mix's
# handler reads the code with it) against admission off, the handler rethrowing, and both (the
# previous behaviour end to end), interleaved; under capacity; with large requests; block_for and
# the priority mix past saturation.
if on final10; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  for r in 1 2; do
    load f-3m-$r gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load f-3m-off-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load f-3m-rethrow-$r gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe --rethrow-in-handler
    load f-3m-prev-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe --rethrow-in-handler
  done
  for r in 1 2; do
    load f-15m-$r gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
    load f-15m-prev-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe --rethrow-in-handler
    load f-1m-$r gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
    load f-1m-prev-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe --rethrow-in-handler
  done
  lg="$dl --large 0.01 --large-size 1000000 --rate 150000 --requests 450000 --host-probe"
  load f-large gpubatch-mix $lg
  load f-large-prev env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $lg --rethrow-in-handler
  load f-bf3m gpubatch-mix --device 0 --threads 16 --size 256 --block-for-us 300 --rate 3000000 --requests 6000000 --host-probe
  load f-prio3m gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 3000000 --requests 6000000 --host-probe
  load f-prio-idle gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 10000 --requests 30000 --host-probe
fi

# Deadline admission's third form (a formed batch waiting for a slot counts as a backlog): this
# build against call 5's (gpubatch-mix-c5), and this build with the executor's threads at nice
# -10, interleaved.
if on adm10c; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  for r in 1 2; do
    load c-3m-$r gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load c-3m-c5-$r gpubatch-mix-c5 $dl --rate 3000000 --requests 6000000 --host-probe
    load c-3m-nice-$r env GPUBATCH_THREAD_NICE=-10 -- gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load c-15m-$r gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
    load c-15m-c5-$r gpubatch-mix-c5 $dl --rate 1500000 --requests 3000000 --host-probe
    load c-15m-nice-$r env GPUBATCH_THREAD_NICE=-10 -- gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
  done
  load c-1m gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
  load c-1m-c5 gpubatch-mix-c5 $dl --rate 1000000 --requests 3000000 --host-probe
fi

# Deadline admission's fourth form (also the wait of the newest request of the last batches):
# this build against call 6's (gpubatch-mix-c6) and call 5's (gpubatch-mix-c5), interleaved;
# under capacity; the large mix; the open loop without deadlines.
if on adm10d; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  for r in 1 2; do
    load d-3m-$r gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load d-3m-c6-$r gpubatch-mix-c6 $dl --rate 3000000 --requests 6000000 --host-probe
    load d-3m-c5-$r gpubatch-mix-c5 $dl --rate 3000000 --requests 6000000 --host-probe
    load d-15m-$r gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
    load d-15m-c6-$r gpubatch-mix-c6 $dl --rate 1500000 --requests 3000000 --host-probe
    load d-1m-$r gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
    load d-1m-c6-$r gpubatch-mix-c6 $dl --rate 1000000 --requests 3000000 --host-probe
  done
  lg="$dl --large 0.01 --large-size 1000000 --rate 150000 --requests 450000 --host-probe"
  load d-large gpubatch-mix $lg
  load d-large-c6 gpubatch-mix-c6 $lg
  load d-open2m gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000
  load d-crowd gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
fi

# Deadline admission's fifth form (behind any request waiting, both signals): this build against
# call 6's (gpubatch-mix-c6) and call 7's (gpubatch-mix-c7), interleaved.
if on adm10e; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  for r in 1 2; do
    load e-3m-$r gpubatch-mix $dl --rate 3000000 --requests 6000000 --host-probe
    load e-3m-c6-$r gpubatch-mix-c6 $dl --rate 3000000 --requests 6000000 --host-probe
    load e-3m-c7-$r gpubatch-mix-c7 $dl --rate 3000000 --requests 6000000 --host-probe
    load e-15m-$r gpubatch-mix $dl --rate 1500000 --requests 3000000 --host-probe
    load e-15m-c6-$r gpubatch-mix-c6 $dl --rate 1500000 --requests 3000000 --host-probe
    load e-1m-$r gpubatch-mix $dl --rate 1000000 --requests 3000000 --host-probe
    load e-1m-c6-$r gpubatch-mix-c6 $dl --rate 1000000 --requests 3000000 --host-probe
  done
  lg="$dl --large 0.01 --large-size 1000000 --rate 150000 --requests 450000 --host-probe"
  load e-large gpubatch-mix $lg
  load e-large-c6 gpubatch-mix-c6 $lg
fi

# The session's final build (tenth session of 2026-11-28) against the previous behaviour by its
# switches (GPUBATCH_DEADLINE_ADMISSION=off, the mix's handler rethrowing), interleaved; the
# priority mix and block_for past saturation; the GPU test binaries.
if on final10b; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5"
  for r in 1 2; do
    for R in 3000000 1500000 1000000; do
      load g-$R-$r gpubatch-mix $dl --rate $R --requests $((2 * R)) --host-probe
      load g-$R-prev-$r env GPUBATCH_DEADLINE_ADMISSION=off -- gpubatch-mix $dl --rate $R --requests $((2 * R)) --host-probe --rethrow-in-handler
    done
  done
  load g-bf3m gpubatch-mix --device 0 --threads 16 --size 256 --block-for-us 300 --rate 3000000 --requests 6000000 --host-probe
  load g-prio3m gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 3000000 --requests 6000000 --host-probe
  load g-prio-idle gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 10000 --requests 30000 --host-probe
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_integration_tests > "$out/tests-integration.txt" 2>&1
  echo "   integration tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-integration.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_tests > "$out/tests-core.txt" 2>&1
  echo "   core tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-core.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
fi

# No regression from the tenth session's changes where no deadline is involved: this build
# against the session's starting point (fbaf14a: gpubatch-load-prev, gpubatch-mix-prev),
# interleaved: the crowd, the lone caller, the open loop; and the deadline mix at 1.5 M/s.
if on nr10; then
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  open="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000"
  for r in 1 2 3; do
    load nr-crowd-$r gpubatch-load $crowd
    load nr-crowd-prev-$r gpubatch-load-prev $crowd
  done
  for r in 1 2; do
    load nr-lone-$r gpubatch-load $lone
    load nr-lone-prev-$r gpubatch-load-prev $lone
    load nr-open-$r gpubatch-load $open
    load nr-open-prev-$r gpubatch-load-prev $open
  done
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1500000 --requests 3000000 --host-probe"
  load nr-dl15m gpubatch-mix $dl
  load nr-dl15m-prev gpubatch-mix-prev $dl
fi

# thread_slice_us (eleventh session): the executor's threads ask EEVDF for a short slice, so that
# on waking they run before callers' threads that have used their turn. Every load where the
# callers take every core, with the slice (100 us, 300 us) against the system's, interleaved;
# then where they do not (the crowd, the lone caller) for no regression.
if on slice11; then
  { uname -r; grep -H . /proc/sys/kernel/sched_* 2>/dev/null; grep slice /proc/self/sched; nproc; } >> "$out/log.txt" 2>&1
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --host-probe"
  for r in 1 2; do
    for s in 0 100 300; do
      [ "$r" = 2 ] && [ "$s" = 300 ] && continue
      e="env GPUBATCH_THREAD_SLICE_US=$s --"
      load sl-dl3m-$s-$r $e gpubatch-mix $dl --rate 3000000 --requests 6000000
      load sl-dl15m-$s-$r $e gpubatch-mix $dl --rate 1500000 --requests 3000000
      load sl-prio3m-$s-$r $e gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 3000000 --requests 6000000 --host-probe
      load sl-bf3m-$s-$r $e gpubatch-mix --device 0 --threads 16 --size 256 --block-for-us 300 --rate 3000000 --requests 6000000 --host-probe
      load sl-open15m-$s-$r $e gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 1500000 --requests 4500000
      load sl-m64-$s-$r $e gpubatch-mix --device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
    done
  done
  for s in 0 100; do
    e="env GPUBATCH_THREAD_SLICE_US=$s --"
    load sl-prioidle-$s $e gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 10000 --requests 30000 --host-probe
    for r in 1 2; do
      load sl-crowd-$s-$r $e gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
      load sl-lone-$s-$r $e gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
    done
  done
fi

# The lone round trip's slow mode (eleventh session): whole processes answer a lone caller in
# about 50 us instead of 17-19, in every path, since the third session of 2026-11-27, where the
# probe never has. Many short lone runs, each path, pinned to a CPU of either half, with the
# GPU's clocks sampled every 20 ms and each run's start and end written down; the probe between.
if on slowmode11; then
  { lscpu; nvidia-smi topo -m; } > "$out/topo.txt" 2>&1
  nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv,noheader -lms 20 > "$out/smi.csv" 2>&1 &
  smi=$!
  lone="--device 0 --threads 1 --inflight 1 --requests 5000 --op relu --size 256"
  for i in 1 2 3 4 5 6; do
    for cpu in 3 13; do
      pin="taskset -c $cpu"
      for m in unbatched sync future; do
        flag="--$m"; [ $m = future ] && flag=""
        echo "@ $(date +%s.%N) start sm-$m-c$cpu-$i" >> "$out/log.txt"
        load sm-$m-c$cpu-$i gpubatch-load $flag $lone
        echo "@ $(date +%s.%N) end sm-$m-c$cpu-$i" >> "$out/log.txt"
      done
      pin=""
    done
    if have latency && [ $i -le 3 ]; then
      echo "@ $(date +%s.%N) start probe-$i" >> "$out/log.txt"
      timeout 60 "$run" latency 2>&1 | grep -E "^  [CE] " >> "$out/log.txt"
      echo "@ $(date +%s.%N) end probe-$i" >> "$out/log.txt"
    fi
  done
  kill $smi 2>/dev/null
fi

# The same, unpinned, and each round after a crowd (call 2's 36 pinned runs were all fast).
if on slowmode11b; then
  nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv,noheader -lms 20 > "$out/smi.csv" 2>&1 &
  smi=$!
  lone="--device 0 --threads 1 --inflight 1 --requests 5000 --op relu --size 256"
  for i in 1 2 3 4 5 6; do
    load smb-crowd-$i gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 2000000
    for m in future sync unbatched future-c3; do
      flag="--$m"; [ ${m%-c3} = future ] && flag=""
      [ $m = future-c3 ] && pin="taskset -c 3"
      echo "@ $(date +%s.%N) start smb-$m-$i" >> "$out/log.txt"
      load smb-$m-$i gpubatch-load $flag $lone
      echo "@ $(date +%s.%N) end smb-$m-$i" >> "$out/log.txt"
      pin=""
    done
  done
  kill $smi 2>/dev/null
fi

# Where an express batch's time goes at saturation (eleventh session): the priority mix traced,
# at 3 M/s and idle, stage by stage (bench/trace_batches.py), with the GPU's own time.
if on priotrace11; then
  for R in 3000000 10000; do
    n=$((2 * R)); [ $R = 10000 ] && n=30000
    load pt-$R env GPUBATCH_TRACE=$out/trace-$R.json GPUBATCH_GPU_TIMESTAMPS=on -- gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate $R --requests $n --host-probe
    if [ -f "$out/trace-$R.json" ]; then
      python3 bench/trace_batches.py "$out/trace-$R.json" --slowest 4 > "$out/batches-$R.txt" 2>&1
      rm -f "$out/trace-$R.json"
    fi
  done
fi

# Express batches awaited beside the regular waiter (eleventh session), against
# GPUBATCH_EXPRESS_BESIDE=off (the previous behaviour) and with four express batches in flight;
# the priority mix at saturation and idle, interleaved; one traced run of each way.
if on prioab11; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  for r in 1 2 3; do
    load pa-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load pa-3m-off-$r env GPUBATCH_EXPRESS_BESIDE=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    load pa-3m-d4-$r env GPUBATCH_EXPRESS_DEPTH=4 -- gpubatch-mix $mix --rate 3000000 --requests 6000000
  done
  for r in 1 2; do
    load pa-2m-$r gpubatch-mix $mix --rate 2000000 --requests 4000000
    load pa-2m-off-$r env GPUBATCH_EXPRESS_BESIDE=off -- gpubatch-mix $mix --rate 2000000 --requests 4000000
    load pa-idle-$r gpubatch-mix $mix --rate 10000 --requests 30000
    load pa-idle-off-$r env GPUBATCH_EXPRESS_BESIDE=off -- gpubatch-mix $mix --rate 10000 --requests 30000
  done
  for w in on off; do
    load pa-trace-$w env GPUBATCH_EXPRESS_BESIDE=$w GPUBATCH_TRACE=$out/trace-$w.json -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    if [ -f "$out/trace-$w.json" ]; then
      python3 bench/trace_batches.py "$out/trace-$w.json" --slowest 2 > "$out/batches-$w.txt" 2>&1
      rm -f "$out/trace-$w.json"
    fi
  done
  for r in 1 2; do
    load pa-crowd-$r gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
  done
fi

# The session's final code (eleventh session): the priority mix with the express batch awaited
# beside or not (send lag split out), four express batches with it off (was call 5's collapse
# the new await's?); no regression against abbeea1 (gpubatch-load-prev, gpubatch-mix-prev,
# interleaved); the GPU test binaries.
if on final11; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  for r in 1 2; do
    load f-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load f-3m-off-$r env GPUBATCH_EXPRESS_BESIDE=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    load f-3m-prev-$r gpubatch-mix-prev $mix --rate 3000000 --requests 6000000
  done
  load f-3m-d4-off env GPUBATCH_EXPRESS_DEPTH=4 GPUBATCH_EXPRESS_BESIDE=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
  load f-3m-d4-prev env GPUBATCH_EXPRESS_DEPTH=4 -- gpubatch-mix-prev $mix --rate 3000000 --requests 6000000
  load f-idle gpubatch-mix $mix --rate 10000 --requests 30000
  load f-idle-prev gpubatch-mix-prev $mix --rate 10000 --requests 30000
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  open="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000"
  for r in 1 2; do
    load f-crowd-$r gpubatch-load $crowd
    load f-crowd-prev-$r gpubatch-load-prev $crowd
    load f-lone-$r gpubatch-load $lone
    load f-lone-prev-$r gpubatch-load-prev $lone
    load f-open-$r gpubatch-load $open
    load f-open-prev-$r gpubatch-load-prev $open
  done
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_integration_tests > "$out/tests-integration.txt" 2>&1
  echo "   integration tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-integration.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_tests > "$out/tests-core.txt" 2>&1
  echo "   core tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-core.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
fi

# Two H200s (nvidia-h200-x2, twelfth session, call 13): the set's crowd with 32 callers (issue
# 12's 8 M/s) and 16 (issue 11), this gpubatch-load against the float comparison's
# (gpubatch-load-oldcheck, the same library), interleaved.
if on x2crowd12; then
  c32="--devices 0,1 --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256 --host-probe"
  for r in 1 2 3; do
    load x2-c32-$r gpubatch-load $c32
    [ "$r" != 3 ] && load x2-c32-oldcheck-$r gpubatch-load-oldcheck $c32
  done
  load x2-c16 gpubatch-load --devices 0,1 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256 --host-probe
fi

# Two H200s again with HostBuffer bytes in full on a set (twenty-first session, call 11): the
# set's HostBuffer loads against GPUBATCH_IN_PLACE_LIGHT=off (now the same weighing), and the
# crowd with 32 threads.
if on x2set21b; then
  for r in 1 2; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 100000 : 8000 ))
      big="--threads 16 --inflight 8 --requests $n --op relu --size $s --host-buffers"
      load x2b-$s-set-$r gpubatch-load --devices 0,1 $big
      load x2b-$s-set-off-$r env GPUBATCH_IN_PLACE_LIGHT=off -- gpubatch-load --devices 0,1 $big
    done
    load x2b-c32-$r gpubatch-load --devices 0,1 --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256
  done
fi

# Two H200s as one device set (nvidia-h200-x2; twenty-first session, call 10): HostBuffers at
# issue 12's sizes on the set, against one member and against GPUBATCH_IN_PLACE_LIGHT=off; the
# crowd on the set with 16 and 32 threads, against one member; the device-set tests.
if on x2set21; then
  have gpubatch_integration_tests && timeout 300 "$run" gpubatch_integration_tests --gtest_filter='DeviceSet*' > "$out/tests-set.txt" 2>&1
  for r in 1 2; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 100000 : 8000 ))
      big="--threads 16 --inflight 8 --requests $n --op relu --size $s --host-buffers"
      load x2-$s-set-$r gpubatch-load --devices 0,1 $big
      [ $r = 1 ] && load x2-$s-set-off env GPUBATCH_IN_PLACE_LIGHT=off -- gpubatch-load --devices 0,1 $big
      [ $r = 1 ] && load x2-$s-one gpubatch-load --device 0 $big
    done
    load x2-c16-$r gpubatch-load --devices 0,1 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    load x2-c32-$r gpubatch-load --devices 0,1 --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256
  done
  load x2-c16-one gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
fi

# lone30: issue 11's lone rows as a user who keeps latency-critical threads off the GPU's
# interrupt CPU would run them (taskset to every other CPU, docs/DESIGN.md "The GPU's interrupt
# CPU"): the future, --unbatched, --sync and --resident, five rounds interleaved.
# lonepc31: the branch lone-push-address (a lone request's input addresses in the push
# constants, so the kernel reads its data beside its segment record) as gpubatch-load against
# main's build as gpubatch-load-prev: Device::run and the lone future, six rounds interleaved,
# pinned off the interrupt CPU; the crowd once each.
if on lonepc31; then
  off_irq
  pin="taskset -c $others"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4 5 6; do
    for v in "" -prev; do
      tag=${v:-new}; tag=${tag#-}
      load pc31-unb-$tag-$rep gpubatch-load$v --unbatched $lone
      load pc31-lone-$tag-$rep gpubatch-load$v $lone
    done
  done
  pin=""
  for v in "" -prev; do
    load pc31-crowd-${v:-new} gpubatch-load$v --device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256
  done
fi

# l1lone32: gpubatch-load's caller_l1_copy_ns beside a lone caller's p50: twelve rounds of the
# lone future and Device::run, off the interrupt CPU (is the field a useful reading of the state?).
if on l1lone32; then
  off_irq
  pin="taskset -c $others"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4 5 6 7 8 9 10 11 12; do
    load l1-unb-$rep gpubatch-load --unbatched $lone
    load l1-lone-$rep gpubatch-load $lone
  done
  pin=""
fi

# cpuspeed32: is the core itself slower when the driver's submit call is (cpu32)? The plain
# compute-family probe with PROBE_CPU=1 (a dependent multiply-add chain and L1 copies timed beside
# the parts), eight processes off the interrupt CPU, lines to OUT/cpuspeed32.txt.
if on cpuspeed32; then
  off_irq
  for rep in 1 2 3 4 5 6 7 8; do
    have submit-parts && PROBE_FAMILY=compute PROBE_CPU=1 timeout 60 taskset -c $others "$run" submit-parts 2>&1 | grep -E "round|cpu:" | sed "s/^/process $rep: /" >> "$out/cpuspeed32.txt"
  done
fi

# pin32: a lone caller pinned to one CPU against the same caller on every CPU but the interrupt
# CPU (cpu32's single-CPU Device::run sat lower than lonepc32's): Device::run and the lone future,
# six rounds interleaved, the single CPU a different one each round.
if on pin32; then
  off_irq
  set -- $(echo $others | tr , ' ')
  lone="--device 0 --threads 1 --inflight 1 --requests 40000 --op relu --size 256"
  for rep in 1 2 3 4 5 6; do
    c=$(eval echo \${$(( (rep * 7) % $# + 1 ))})
    for where in one all; do
      if [ $where = one ]; then pin="taskset -c $c"; else pin="taskset -c $others"; fi
      load pin32-unb-$where-$rep gpubatch-load --unbatched $lone
      load pin32-lone-$where-$rep gpubatch-load $lone
    done
  done
  pin=""
fi

# cpu32: is the driver's submit-call mode (2.4 or 4.0 us at p50, thirty-first session) a property
# of the CPU the caller runs on, or of the process? Every CPU but the interrupt CPU, twice (the
# second pass in the reverse order): the plain compute-family probe pinned there (its bar rounds'
# submit call and round trip into OUT/cpu32.txt), then a lone Device::run pinned there.
if on cpu32; then
  off_irq
  cpus=$(echo $others | tr , ' ')
  for pass in 1 2; do
    [ $pass = 2 ] && cpus=$(echo $cpus | tr ' ' '\n' | tac | tr '\n' ' ')
    for c in $cpus; do
      have submit-parts && PROBE_FAMILY=compute timeout 60 taskset -c $c "$run" submit-parts 2>&1 | grep -E "round" | sed "s/^/cpu $c pass $pass: /" >> "$out/cpu32.txt"
      pin="taskset -c $c"
      load cpu32-unb-c$c-p$pass gpubatch-load --unbatched --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
      pin=""
    done
  done
fi

# lonepc32: main with the lone push addresses landed (gpubatch-load) against the build before
# them (gpubatch-load-prev): Device::run and the lone future, ten rounds interleaved (the order
# swapped every round), pinned off the interrupt CPU; then the crowd twice each; then the
# element-wise and batch-device tests on this GPU.
# slice34: block_slice_us (the slice a caller's thread asks for while it waits for room until an
# instant) at its default 100 against 0 (the thread's own, the behaviour before), four rounds in
# alternating order: block_for 300 us past saturation; then every request on a 2 ms deadline at
# 3 M/s offered (overflow = block: the same timed wait), two rounds.
if on slice34; then
  P="--device 0 --host-probe"
  for rep in $(seq 1 ${SLICE34_ROUNDS:-4}); do
    for v in $(alternate $rep 100 0); do
      load s34-blockfor-$v-$rep env GPUBATCH_BLOCK_SLICE_US=$v -- gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
    done
  done
  for rep in 1 2; do
    for v in $(alternate $rep 100 0); do
      load s34-dlall-$v-$rep env GPUBATCH_BLOCK_SLICE_US=$v -- gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 1 --queue-capacity 4096 --rate 3000000 --requests 6000000 $P
    done
  done
fi

# slice34b: block_for 300 us past saturation with block_slice_us 100 (the default) against 0,
# three rounds in alternating order, then twice with the executor's threads at 100 us too
# (thread_slice_us); the open loop at 3 M/s with thread_slice_us 100 against 0, four rounds; the
# priority mix at 3 M/s offered the same way, two rounds, and idle once.
if on slice34b; then
  P="--device 0 --host-probe"
  bf="--threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P"
  for rep in 1 2 3; do
    for v in $(alternate $rep 100 0); do
      load b34-blockfor-$v-$rep env GPUBATCH_BLOCK_SLICE_US=$v -- gpubatch-mix $bf
    done
  done
  for rep in 1 2; do load b34-blockfor-both-$rep env GPUBATCH_THREAD_SLICE_US=100 -- gpubatch-mix $bf; done
  for rep in 1 2 3 4; do
    for v in $(alternate $rep 100 0); do
      load b34-open3000k-$v-$rep env GPUBATCH_THREAD_SLICE_US=$v -- gpubatch-load $P --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000
    done
  done
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  load b34-prioidle gpubatch-mix $mix --rate 10000 --requests 30000
  for rep in 1 2; do
    for v in $(alternate $rep 100 0); do
      load b34-prio3000k-$v-$rep env GPUBATCH_THREAD_SLICE_US=$v -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    done
  done
  # What else thread_slice_us 100 touches: the deadline load at 1.5 M/s (worse with short slices
  # on the steal-heavy machine of the eleventh session), the crowd, a lone future.
  for rep in 1 2; do
    for v in $(alternate $rep 100 0); do
      load b34-dl1500k-$v-$rep env GPUBATCH_THREAD_SLICE_US=$v -- gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --rate 1500000 --requests 3000000 $P
      load b34-crowd-$v-$rep env GPUBATCH_THREAD_SLICE_US=$v -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 4000000 --op relu --size 256
      load b34-lone-$v-$rep env GPUBATCH_THREAD_SLICE_US=$v -- gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
    done
  done
fi

# thr34: thread_slice_us (the executor's own threads' slice) 100 against 0 on a quiet machine,
# two rounds in alternating order: the open loop at 3 M/s and the priority mix at 3 M/s offered
# (its high level's p99), with the idle priority mix once for reference.
if on thr34; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  load t34-prioidle gpubatch-mix $mix --rate 10000 --requests 30000
  for rep in 1 2; do
    for v in $(alternate $rep 100 0); do
      load t34-open3000k-$v-$rep env GPUBATCH_THREAD_SLICE_US=$v -- gpubatch-load --device 0 --host-probe --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000
      load t34-prio3000k-$v-$rep env GPUBATCH_THREAD_SLICE_US=$v -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    done
  done
fi

# line33: the early look at its line's edge: lone futures and Device::run of 1,024 floats (4 KiB,
# watched) and 4,096 floats (16 KiB, past the line: the same path both ways), on and off, four
# rounds in alternating order, off the interrupt CPU.
if on line33; then
  off_irq
  pin="taskset -c $others"
  for rep in 1 2 3 4; do
    for v in $(alternate $rep on off); do
      for n in 1024 4096; do
        load l33-lone$n-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size $n
        load l33-unb$n-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --unbatched --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size $n
      done
    done
  done
  pin=""
fi

# open33: loads where batches are mostly not lone, and sparse callers, with early results on and
# off (GPUBATCH_EARLY_RESULTS), two rounds in alternating order: the open loop at 2.5 M/s from 16
# senders, one sender at 20,000/s (handlers), a lone future with 100 us of think time.
if on open33; then
  for rep in $(seq 1 ${OPEN33_ROUNDS:-2}); do
    for v in $(alternate $rep on off); do
      load o33-open2500k-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --device 0 --host-probe --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000
      load o33-rate20k-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --device 0 --threads 1 --rate 20000 --requests 100000 --op relu --size 256
      load o33-think-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --device 0 --threads 1 --inflight 1 --think-us 100 --requests 20000 --op relu --size 256
    done
  done
fi

# row33: issue 11's lone-caller row with this build's defaults, every mode side by side from one
# run: the future, --sync, handlers, Device::run (--unbatched), resident (realtime: future and
# --sync), four rounds, alternately pinned off the interrupt CPU and unpinned; the idle executor
# (1 s) and the crowd, adaptive and resident.
if on row33; then
  off_irq
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4; do
    if [ $((rep % 2)) = 1 ]; then pin="taskset -c $others"; where=off; else pin=""; where=any; fi
    load r33-future-$where-$rep gpubatch-load $lone
    load r33-sync-$where-$rep gpubatch-load --sync $lone
    load r33-handlers-$where-$rep gpubatch-load --handlers $lone
    load r33-unb-$where-$rep gpubatch-load --unbatched $lone
    load r33-res-$where-$rep gpubatch-load --preset realtime $lone
    load r33-ressync-$where-$rep gpubatch-load --preset realtime --sync $lone
  done
  pin=""
  idle="--device 0 --threads 1 --inflight 1 --requests 2000 --op relu --size 256 --idle-ms 1000"
  load r33-idle gpubatch-load $idle
  load r33-idle-res gpubatch-load --preset realtime $idle
  load r33-crowd gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256 --host-probe
  load r33-crowd-res gpubatch-load --preset realtime --device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256 --host-probe
fi

# crowd33: the crowd with early results on and off (GPUBATCH_EARLY_RESULTS), three pairs in
# alternating order, with the host probe (early33 ran "on" first in both of its pairs).
if on crowd33; then
  for rep in $(seq 1 ${CROWD33_ROUNDS:-3}); do
    for v in $(alternate $rep off on); do
      load c33-crowd-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256 --host-probe
    done
  done
fi

# early33: early results (a lone small result taken as it lands, src/gpu/early_results.hpp)
# against GPUBATCH_EARLY_RESULTS=off in the same binary: Device::run, the lone future and --sync,
# ten rounds interleaved (order alternating) off the interrupt CPU; the crowd both ways twice; the
# plain probe's results-against-counter once; the element-wise, batch-device and early tests.
if on early33; then
  off_irq
  pin="taskset -c $others"
  lone="--device 0 --threads 1 --inflight 1 --requests 40000 --op relu --size 256"
  for rep in 1 2 3 4 5 6 7 8 9 10; do
    for v in $(alternate $rep on off); do
      load e33-unb-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --unbatched $lone
      load e33-lone-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load $lone
      [ $rep -le 4 ] && load e33-sync-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --sync $lone
    done
  done
  have submit-parts && PROBE_FAMILY=compute PROBE_BARRIER=1 PROBE_RESULTS=1 $pin timeout 60 "$run" submit-parts >> "$out/parts33.txt" 2>&1
  pin=""
  for rep in 1 2; do
    for v in on off; do
      load e33-crowd-$v-$rep env GPUBATCH_EARLY_RESULTS=$v -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256
    done
  done
  have gpubatch_tests && timeout 240 "$run" gpubatch_tests --gtest_brief=1 --gtest_filter='Early*:*EwVector*:BatchDevice.*:*Lone*' >> "$out/tests.txt" 2>&1
  echo "gpubatch_tests (early, element-wise, batch device, lone) exit $?" | tee -a "$out/log.txt"
fi

if on lonepc32; then
  off_irq
  pin="taskset -c $others"
  lone="--device 0 --threads 1 --inflight 1 --requests 40000 --op relu --size 256"
  for rep in 1 2 3 4 5 6 7 8 9 10; do
    for v in $(alternate $rep new prev); do
      b=gpubatch-load; [ $v = prev ] && b=gpubatch-load-prev
      load pc32-unb-$v-$rep $b --unbatched $lone
      load pc32-lone-$v-$rep $b $lone
    done
  done
  pin=""
  for rep in 1 2; do
    for b in gpubatch-load gpubatch-load-prev; do
      load pc32-crowd-$b-$rep $b --device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256
    done
  done
  have gpubatch_tests && timeout 240 "$run" gpubatch_tests --gtest_brief=1 --gtest_filter='*EwVector*:BatchDevice.*:*Lone*' >> "$out/tests.txt" 2>&1
  echo "gpubatch_tests (element-wise, batch device, lone) exit $?" | tee -a "$out/log.txt"
fi

# parts31c: what makes the library's device stage 1.3 us longer than the plain program's spin on
# the same compute-only family: bench/probes/submit-parts with gpubatch's barrier after the
# dispatch (PROBE_BARRIER=1), with a dependent read before the data (PROBE_DEP=1), both, and
# neither, four rounds interleaved beside a lone Device::run; then each of plain and both once
# with the GPU's own time (PROBE_TIMESTAMPS=1). Lines to OUT/parts31c.txt.
if on parts31c; then
  off_irq
  echo "interrupt cpu $slow, callers on $others" >> "$out/parts31c.txt"
  for rep in 1 2 3 4; do
    for v in "" "PROBE_BARRIER=1" "PROBE_DEP=1" "PROBE_BARRIER=1 PROBE_DEP=1"; do
      have submit-parts && { echo "== round $rep: ${v:-plain}"; env PROBE_FAMILY=compute $v timeout 60 taskset -c $others "$run" submit-parts; } >> "$out/parts31c.txt" 2>&1
    done
    pin="taskset -c $others"
    load parts31c-unb-$rep gpubatch-load --unbatched --device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000
    pin=""
  done
  for v in "PROBE_TIMESTAMPS=1" "PROBE_TIMESTAMPS=1 PROBE_BARRIER=1 PROBE_DEP=1"; do
    have submit-parts && { echo "== $v"; env PROBE_FAMILY=compute $v timeout 60 taskset -c $others "$run" submit-parts; } >> "$out/parts31c.txt" 2>&1
  done
fi

# pause31: polling's tight part again, now that the floor is known on the library's own queue
# family (parts31b: a compute-only family answers 1.1-1.3 us sooner than the graphics one, so
# Device::run sits 1.5-2 us over the plain program there): GPUBATCH_POLL_PAUSE_US 5 (the default)
# against 15 and 30 for Device::run and the lone future, eight rounds interleaved, all pinned off
# the interrupt CPU; the compute-family probe at the start and the end (OUT/pause31.txt); the crowd
# at 5 and 30 once each.
if on pause31; then
  off_irq
  echo "interrupt cpu $slow, callers on $others" >> "$out/pause31.txt"
  have submit-parts && PROBE_FAMILY=compute timeout 60 taskset -c $others "$run" submit-parts >> "$out/pause31.txt" 2>&1
  pin="taskset -c $others"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4 5 6 7 8; do
    for p in 5 15 30; do
      load p31-unb-p$p-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load --unbatched $lone
      load p31-lone-p$p-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load $lone
    done
  done
  pin=""
  have submit-parts && PROBE_FAMILY=compute timeout 60 taskset -c $others "$run" submit-parts >> "$out/pause31.txt" 2>&1
  for p in 5 30; do
    load p31-crowd-p$p env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256
  done
fi

# parts31b: does the queue family change the submit call? bench/probes/submit-parts on the first
# family with compute (graphics + compute on NVIDIA) against PROBE_FAMILY=compute (a compute-only
# family, the one gpubatch prefers), six rounds interleaved, each beside a lone Device::run; all
# pinned off the interrupt CPU. Lines to OUT/parts31b.txt.
if on parts31b; then
  off_irq
  echo "interrupt cpu $slow, callers on $others" >> "$out/parts31b.txt"
  for rep in 1 2 3 4 5 6; do
    for fam in first compute; do
      have submit-parts && { echo "== round $rep, $fam"; PROBE_FAMILY=$fam timeout 60 taskset -c $others "$run" submit-parts; } >> "$out/parts31b.txt" 2>&1
    done
    pin="taskset -c $others"
    load parts31b-unb-$rep gpubatch-load --unbatched --device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000
    pin=""
  done
fi

# parts31: the same question in a plain Vulkan program (bench/probes/submit-parts, built as
# submit-parts): a lone submit + spin split into the input's write, the vkQueueSubmit call and the
# spin, eight processes pinned off the interrupt CPU, each beside a lone Device::run. Lines to
# OUT/parts31.txt.
if on parts31; then
  off_irq
  echo "interrupt cpu $slow, callers on $others" >> "$out/parts31.txt"
  for rep in 1 2 3 4 5 6 7 8; do
    have submit-parts && { echo "== process $rep"; timeout 60 taskset -c $others "$run" submit-parts; } >> "$out/parts31.txt" 2>&1
    pin="taskset -c $others"
    load parts31-unb-$rep gpubatch-load --unbatched --device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000
    pin=""
  done
fi

# lone31: where the lone future's slow mode (submit_us 4.5 against 2.9-3.3 us, whole processes at
# a time: s30 call 5) spends its extra time. Eight processes traced (GPUBATCH_TRACE; the strand's
# stages: formation = the call to the device's submit, submit = the device's submit call itself:
# layout, copies, vkQueueSubmit; device; completion), the last two with the GPU's own time
# (GPUBATCH_GPU_TIMESTAMPS=on), each beside an untraced future and Device::run (--unbatched), all
# pinned off the CPU that takes the GPU's interrupt. Per process: OUT/batches-lone31-N.txt.
if on lone31; then
  off_irq
  echo "interrupt cpu $slow, callers on $others" >> "$out/log.txt"
  pin="taskset -c $others"
  lone="--device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000 --host-probe"
  for rep in 1 2 3 4 5 6 7 8; do
    ts=""; [ $rep -ge 7 ] && ts="GPUBATCH_GPU_TIMESTAMPS=on"
    load lone31-traced-$rep env $ts GPUBATCH_TRACE="$out/lone31-$rep.json" -- gpubatch-load $lone
    if [ -f "$out/lone31-$rep.json" ]; then
      python3 bench/trace_batches.py "$out/lone31-$rep.json" --slowest 2 > "$out/batches-lone31-$rep.txt" 2>&1
      rm -f "$out/lone31-$rep.json"
    fi
    load lone31-future-$rep gpubatch-load $lone
    load lone31-unb-$rep gpubatch-load --unbatched $lone
  done
  pin=""
fi

if on lone30; then
  off_irq
  echo "interrupt cpu $slow, callers on $others" >> "$out/log.txt"
  pin="taskset -c $others"
  lone="--device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000 --host-probe"
  for rep in 1 2 3 4 5; do
    load lone30-future-$rep gpubatch-load $lone
    load lone30-unb-$rep gpubatch-load --unbatched $lone
    load lone30-sync-$rep gpubatch-load --sync $lone
    load lone30-res-$rep gpubatch-load --resident $lone
  done
  pin=""
fi

# ab30: this build against the twenty-ninth session's (gpubatch-load-prev, gpubatch-mix-prev,
# built from ad831d7): the library's log moved to a logger of its own, no request path changed.
# A lone future, the 256-float crowd, 16 callers of 65,536 and 1,048,576 floats at 8 in flight,
# the priority mix at 3 M/s and the open loop at 2.5 M/s, three rounds interleaved, each with the
# host probe (steal); --unbatched once a round for the large sizes.
if on ab30; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for v in "" -prev; do
      tag=${v:-new}; tag=${tag#-}
      load ab30-lone-$tag-$rep gpubatch-load$v $P --threads 1 --inflight 1 --op relu --size 256 --requests 20000
      load ab30-crowd-$tag-$rep gpubatch-load$v $P --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256
      load ab30-65536-$tag-$rep gpubatch-load$v $P --threads 16 --inflight 8 --op relu --size 65536 --requests 60000
      load ab30-1m-$tag-$rep gpubatch-load$v $P --threads 16 --inflight 8 --op relu --size 1048576 --requests 3000
      load ab30-mix3m-$tag-$rep gpubatch-mix$v $P --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000
      load ab30-open2500k-$tag-$rep gpubatch-load$v $P --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000
    done
    load ab30-65536-unb-$rep gpubatch-load --unbatched $P --threads 16 --inflight 1 --op relu --size 65536 --requests 15000
    load ab30-1m-unb-$rep gpubatch-load --unbatched $P --threads 16 --inflight 1 --op relu --size 1048576 --requests 750
  done
  load ab30-mixidle gpubatch-mix $P --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
fi

# host30: what a lone future pays beyond Device::run, split between the executor's own code and
# the machine (issue 11's last microsecond): the machine's futex wake, promise round and clock read
# (bench/probes/syscall-cost, built as syscall-cost), what the executor adds over a null device
# (gpubatch-executor-cost --lone), the null device's crowds, then the lone rows on the GPU (future,
# --unbatched, --sync), every caller pinned to a CPU that does not take the GPU's interrupts, two
# rounds interleaved; last, GPUBATCH_LOG_LEVEL=debug with --json: does stdout stay one JSON object
# now that the library logs to stderr? Lines to OUT/host30.txt.
if on host30; then
  first=$(grep -i nvidia /proc/interrupts | head -1 | cut -d: -f1 | tr -d ' ')
  slow=$(cat /proc/irq/$first/effective_affinity_list 2>/dev/null || echo 0)
  cpu=$(( (slow + 2) % $(nproc) ))
  echo "interrupt cpu $slow, callers on cpu $cpu" >> "$out/host30.txt"
  for rep in 1 2; do
    have syscall-cost && taskset -c $cpu .gpu/bin/syscall-cost >> "$out/host30.txt" 2>&1
    echo "== gpubatch-executor-cost --lone" >> "$out/host30.txt"
    have gpubatch-executor-cost &&
      timeout 120 taskset -c $cpu "$run" gpubatch-executor-cost --lone --requests 200000 --size 256 --delay-us 0 --reps 3 >> "$out/host30.txt" 2>&1
  done
  if have gpubatch-executor-cost; then
    echo "== null crowd 2 x 64" >> "$out/host30.txt"
    timeout 120 "$run" gpubatch-executor-cost --threads 2 --inflight 64 --requests 2000000 --size 256 --delay-us 0 --reps 2 >> "$out/host30.txt" 2>&1
    echo "== null crowd 16 x 1024" >> "$out/host30.txt"
    timeout 120 "$run" gpubatch-executor-cost --threads 16 --inflight 1024 --requests 4000000 --size 256 --delay-us 100 --reps 2 >> "$out/host30.txt" 2>&1
  fi
  pin="taskset -c $cpu"
  lone="--device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000"
  for rep in 1 2; do
    load h30-future-$rep gpubatch-load $lone
    load h30-unb-$rep gpubatch-load --unbatched $lone
    load h30-sync-$rep gpubatch-load --sync $lone
  done
  pin=""
  for b in gpubatch-load; do
    GPUBATCH_LOG_LEVEL=debug timeout 60 "$run" $b --device 0 --threads 1 --op relu --size 256 --requests 2000 --json \
      > "$out/json30-$b.out" 2> "$out/json30-$b.err"
    if python3 -c 'import json,sys; json.loads(open(sys.argv[1]).read())' "$out/json30-$b.out" 2>/dev/null; then
      echo "$b: stdout is one JSON object; $(wc -l < "$out/json30-$b.err") lines on stderr" >> "$out/host30.txt"
    else
      echo "$b: stdout is NOT one JSON object ($(wc -l < "$out/json30-$b.out") lines); $(wc -l < "$out/json30-$b.err") lines on stderr" >> "$out/host30.txt"
    fi
  done
fi

# targets29: issue 14's rows with the build after the strand's fix for requests above level 0
# (a pass that spent its budget runs again): the priority mix idle and at 3 M/s offered, the
# open loop at 2.5 and 3 M/s, two rounds interleaved.
if on targets29; then
  P="--device 0 --host-probe"
  for rep in 1 2; do
    load t29-mixidle-$rep gpubatch-mix $P --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000
    load t29-mix3m-$rep gpubatch-mix $P --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000
    load t29-open2500k-$rep gpubatch-load $P --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000
    load t29-open3m-$rep gpubatch-load $P --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000
  done
fi

# irq29: the lone caller's slow mode and the CPU that takes the GPU's first MSI-X vector: the
# topology and interrupts, a lone future and --unbatched pinned to each CPU in turn, unpinned
# rounds, the slow CPU against its neighbour, every CPU but it, then the vector moved to CPU 3
# (IRQ affinity is the OS's, not the accelerator's; restored after). Lines to OUT/irq29.txt.
if on irq29; then
  { lscpu; grep -iE "nvidia|CPU0" /proc/interrupts; } > "$out/irq29-topo.txt" 2>&1
  first=$(grep -i nvidia /proc/interrupts | head -1 | cut -d: -f1 | tr -d ' ')
  slow=$(cat /proc/irq/$first/effective_affinity_list 2>/dev/null)
  irqcount() { grep -E "^ *$first:" /proc/interrupts | awk '{s=0; for (i=2;i<=NF;i++) if ($i ~ /^[0-9]+$/) s+=$i; print s}'; }
  lone29() {  # LABEL CPUSET [ARGS]: one lone run's p50 / p99 and the vector's interrupts
    local label=$1 set=$2; shift 2; local before; before=$(irqcount)
    r=$(timeout 30 taskset -c "$set" "$run" gpubatch-load "$@" --device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 5000 --json 2>/dev/null |
      python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["latency_us"]["p50"], d["latency_us"]["p99"], d["verified"])')
    echo "$label cpu=$set $* $r irqs=$(( $(irqcount) - before ))" >> "$out/irq29.txt"
  }
  for cpu in $(seq 0 $(( $(nproc) - 1 ))); do lone29 pinned $cpu; lone29 pinned $cpu --unbatched; done
  for i in 1 2 3 4 5 6 7 8; do lone29 unpinned 0-$(( $(nproc) - 1 )); lone29 unpinned 0-$(( $(nproc) - 1 )) --unbatched; done
  other=$(( (slow + 1) % $(nproc) )); [ "$other" = 3 ] && other=4
  for i in 1 2 3 4; do lone29 alt "$slow"; lone29 alt "$other"; lone29 alt "$slow" --unbatched; lone29 alt "$other" --unbatched; done
  orig=$(cat /proc/irq/$first/smp_affinity_list)
  echo 3 > /proc/irq/$first/smp_affinity_list && sleep 0.2
  for i in 1 2; do lone29 moved "$slow"; lone29 moved 3; lone29 moved "$slow" --unbatched; lone29 moved 3 --unbatched; done
  echo "$orig" > /proc/irq/$first/smp_affinity_list
fi

# final29: the build after the fixes of 2026-12-01 (lane watchdog from submission, strand pass
# budget with priority levels): a lone caller (future, --unbatched, --sync, --resident), the
# 256-float crowd (default, resident), 16 callers of 65,536 and 1,048,576 floats against
# --unbatched and the raw copy rate, two rounds interleaved.
if on final29; then
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 262144,4194304,67108864 >> "$out/results.jsonl" 2>> "$out/log.txt"
  for rep in 1 2; do
    lone="--device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000"
    load l29-future-$rep gpubatch-load $lone
    load l29-unb-$rep gpubatch-load --unbatched $lone
    load l29-sync-$rep gpubatch-load --sync $lone
    load l29-res-$rep gpubatch-load --resident $lone
    c="--device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256"
    load c29-def-$rep gpubatch-load $c
    load c29-res-$rep gpubatch-load --resident $c
    for spec in 65536:60000 1048576:3000; do
      n=${spec%:*}; r=${spec#*:}
      big="--device 0 --threads 16 --inflight 8 --op relu --size $n --requests $r"
      load b29-$n-def-$rep gpubatch-load $big
      load b29-$n-unb-$rep gpubatch-load --unbatched --device 0 --threads 16 --inflight 1 --op relu --size $n --requests $((r / 4))
    done
  done
fi

# open27: the open loop at 3.25 M/s: the default against the count cap never raised
# (GPUBATCH_SATURATED_AFTER_US=100000000), two rounds interleaved; each traced once (the count
# limit's changes, the slowest batches, the episodes where batches began to wait); the crowd
# either way.
if on open27; then
  P="--device 0 --host-probe"
  o="--threads 16 --op relu --size 256 --rate 3250000 --requests 9750000"
  never="env GPUBATCH_SATURATED_AFTER_US=100000000 --"
  for rep in 1 2; do
    load o27-def-$rep gpubatch-load $o $P
    load o27-never-$rep $never gpubatch-load $o $P
  done
  traced o27-def-traced open27def gpubatch-load $o $P
  [ -f "$out/open27def.json.gz" ] && python3 bench/trace_episodes.py "$out/open27def.json.gz" --episodes 3 > "$out/episodes-open27def.txt" 2>&1
  traced o27-never-traced open27never $never gpubatch-load $o $P
  c="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  load o27-crowd-def gpubatch-load $c
  load o27-crowd-never $never gpubatch-load $c
fi

# adm26b: deadline admission's drain rate, the median of the last three windows against
# GPUBATCH_DRAIN_RATE=mean (the mean weighted to the newest, as before), interleaved: every request
# on a 2 ms deadline at 2 M/s, half of them at 3 M/s. (Call 18 ran a build with the fastest of
# three, which admitted too much.)
if on adm26b; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000"
  for rep in 1 2; do
    for v in median mean; do
      e=""; [ $v = mean ] && e="env GPUBATCH_DRAIN_RATE=mean --"
      load ae-dlall2m-$v-$rep $e gpubatch-mix $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
      [ $rep = 1 ] && load ae-dlhalf3m-$v $e gpubatch-mix $m --deadline-fraction 0.5 --rate 3000000 --requests 6000000 $P
    done
  done
fi

# adm26: deadline admission with the drain rate as the fastest of the last three windows (a build
# of this session, not kept: it admitted too much): every request on a 2 ms deadline at 2 and
# 3 M/s, half of them at 3 M/s.
if on adm26; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000"
  load ad-dlall2m gpubatch-mix $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
  for rep in 1 2; do
    load ad-dlall3m-$rep gpubatch-mix $m --deadline-fraction 1 --rate 3000000 --requests 6000000 $P
    load ad-dlhalf3m-$rep gpubatch-mix $m --deadline-fraction 0.5 --rate 3000000 --requests 6000000 $P
  done
fi

# steps26: the count cap raised in steps (1,024, then 2,048, then 4,096, each after 10 ms of
# batches full at the limit in force) against GPUBATCH_CAP_STEPS=off (straight to 4,096),
# interleaved: the open loop at 3-3.5 M/s, the crowd, the priority mix at saturation. (A build of
# the twenty-sixth session only: the steps were not kept, and GPUBATCH_CAP_STEPS is gone.)
if on steps26; then
  P="--device 0 --host-probe"
  for rep in 1 2; do
    for m in on off; do
      e=""; [ $m = off ] && e="env GPUBATCH_CAP_STEPS=off --"
      for r in 3000000 3250000 3500000; do
        load st-open$r-$m-$rep $e gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      done
      load st-crowd-$m-$rep $e gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
      [ $rep = 1 ] && load st-mixsat-$m $e gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
    done
  done
fi

# open26b: the open loop past 3 M/s (3.25 and 3.5 M/s, two rounds) on call 15's machine: where
# this build's saturation lies, for issue 14's "up to 90 % of its own saturation rate".
if on open26b; then
  P="--device 0 --host-probe"
  for rep in 1 2; do
    for r in 3250000 3500000; do
      load z-open$r-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
    done
  done
fi

# open26: issue 14's open loop toward saturation with this session's build (2.5, 2.75 and 3 M/s,
# two rounds), every request on a deadline at 2 M/s, the priority mix, the lone caller.
if on open26; then
  P="--device 0 --host-probe"
  load z-lone gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  load z-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2; do
    for r in 2500000 2750000 3000000; do
      load z-open$r-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
    done
    load z-mixsat-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
    load z-dlall-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
  done
fi

# dl26: issue 14's deadline loads with this session's build: the mix with large requests (half on
# a 2 ms deadline, 1 % of 1,000,000 floats) twice, block_for past saturation, the open loop at 3 M/s
# (GPUBATCH_SATURATED_INFLIGHT=off beside it).
if on dl26; then
  P="--device 0 --host-probe"
  for rep in 1 2; do
    load y-deadline-large-$rep gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000 $P
  done
  load y-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  for rep in 1 2; do
    load y-open3000000-$rep gpubatch-load --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000 $P
    load y-open3000000-off-$rep env GPUBATCH_SATURATED_INFLIGHT=off -- gpubatch-load --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000 $P
  done
fi

# pause26: polling's tight part on the H200 (GPUBATCH_POLL_PAUSE_US 5, the default, against 20
# and 50): the lone future and Device::run, four rounds interleaved, and the crowd.
if on pause26; then
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3 4; do
    for p in 5 20 50; do
      load x-lone-p$p-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load $lone
      load x-unb-p$p-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load $lone --unbatched
    done
  done
  for rep in 1 2; do
    for p in 5 50; do
      load x-crowd-p$p-$rep env GPUBATCH_POLL_PAUSE_US=$p -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
fi

# step26: would four in flight at the small count cap carry the open loop at 2.5-3 M/s without
# the 4,096-request batches? "slots" = GPUBATCH_MAX_INFLIGHT_BATCHES=4 with the cap never raised
# (GPUBATCH_SATURATED_AFTER_US=100000000), against this build's default; the crowd too.
if on step26; then
  P="--device 0 --host-probe"
  slots="env GPUBATCH_MAX_INFLIGHT_BATCHES=4 GPUBATCH_SATURATED_AFTER_US=100000000 --"
  for rep in 1 2; do
    for m in default slots; do
      e=""; [ $m = slots ] && e=$slots
      for r in 2500000 3000000; do
        load w-open$r-$m-$rep $e gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      done
      load w-crowd-$m-$rep $e gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
fi

# crowdtrace26: the crowd with four batches in flight once saturated: a trace
# (bench/trace_batches.py) and CPU seconds per thread name (bench/thread_cpu.py), beside a plain run.
if on crowdtrace26; then
  c="--device 0 --threads 16 --inflight 1024 --op relu --size 256"
  load ct-crowd gpubatch-load $c --requests 8000000
  timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-crowd.json" -- "$run" gpubatch-load $c --requests 8000000 --json > "$out/threads-crowd-run.txt" 2>&1
  traced ct-crowd-traced crowd gpubatch-load $c --requests 4000000
fi

# lonesys26: system calls per lone request, future against Device::run (perf stat on the
# syscall tracepoints; needs .gpu/bin/perf).
if on lonesys26; then
  lone="--device 0 --threads 1 --inflight 1 --requests 40000 --op relu --size 256"
  for m in future unbatched sync; do
    a=""; [ $m = unbatched ] && a="--unbatched"; [ $m = sync ] && a="--sync"
    have perf && timeout 120 "$run" perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_ioctl,syscalls:sys_enter_sched_yield,syscalls:sys_enter_epoll_wait,context-switches \
      -o "$out/stat-$m.txt" -- "$PWD/$run" gpubatch-load $lone $a --json > "$out/stat-$m-run.txt" 2>&1
  done
fi

# loneprof26b: who reads the GPU's registers on the lone future's path (osDevReadReg032 took 10 %
# of its caller's samples against 5 % of Device::run's): both under perf with call graphs,
# the callers of the kernel's symbols that differ.
if on loneprof26b; then
  lone="--device 0 --threads 1 --inflight 1 --requests 40000 --op relu --size 256"
  for m in future unbatched; do
    a=""; [ $m = unbatched ] && a="--unbatched"
    if have perf; then
      timeout 120 "$run" perf record -F 19999 -g -o "$out/$m.data" -- "$PWD/$run" gpubatch-load $lone $a > "$out/perf-$m-run.txt" 2>&1
      for sym in osDevReadReg032 kbusFlushSingle_GV100 cpa_flush; do
        timeout 120 "$run" perf report -i "$out/$m.data" --comm gpubatch-load --no-children -S $sym -G \
          --stdio > "$out/perf-$m-$sym.txt" 2>&1
      done
      timeout 120 "$run" perf report -i "$out/$m.data" --comm gpubatch-load --no-children --sort sym -g caller,0.5,callee \
        --percent-limit 2 --stdio > "$out/perf-$m-top.txt" 2>&1
      rm -f "$out/$m.data"
    fi
  done
fi

# loneprof26: where a lone future's extra microsecond over Device::run goes: each under perf
# (flat, by symbol; needs .gpu/bin/perf and a binary with its symbol table), then plain runs.
if on loneprof26; then
  lone="--device 0 --threads 1 --inflight 1 --requests 40000 --op relu --size 256"
  for m in future unbatched; do
    a=""; [ $m = unbatched ] && a="--unbatched"
    load lp-$m-1 gpubatch-load $lone $a
    if have perf; then
      timeout 120 "$run" perf record -F 19999 -o "$out/$m.data" -- "$PWD/$run" gpubatch-load $lone $a > "$out/perf-$m-run.txt" 2>&1
      timeout 120 "$run" perf report -i "$out/$m.data" --comm gpubatch-load --no-children --sort dso,sym -g none \
        --percent-limit 0.25 > "$out/perf-$m.txt" 2>&1
      rm -f "$out/$m.data"
    fi
  done
  for rep in 2 3; do
    load lp-future-$rep gpubatch-load $lone
    load lp-unbatched-$rep gpubatch-load $lone --unbatched
  done
fi

# final26: the issues' targets with this session's build (twice the batches in flight once
# saturated), GPUBATCH_SATURATED_INFLIGHT=off beside where it can differ; run with "probe final26".
if on final26; then
  P="--device 0 --host-probe"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  off="env GPUBATCH_SATURATED_INFLIGHT=off --"
  for rep in 1 2; do
    load v-lone-$rep gpubatch-load $lone --idle-ms 1000
    load v-lone-unbatched-$rep gpubatch-load --unbatched $lone
    load v-lone-realtime-sync-$rep gpubatch-load --preset realtime --sync $lone --idle-ms 1000
  done
  for rep in 1 2; do
    load v-crowd-on-$rep gpubatch-load $crowd
    load v-crowd-off-$rep $off gpubatch-load $crowd
    load v-crowd-realtime-$rep gpubatch-load --preset realtime $crowd
  done
  load v-hcrowd-on gpubatch-load $crowd --handlers
  load v-hcrowd-off $off gpubatch-load $crowd --handlers
  for rep in 1 2; do
    for r in 2000000 2500000; do
      load v-open$r-on-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      load v-open$r-off-$rep $off gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
    done
  done
  load v-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2; do
    load v-mixsat-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
  done
  load v-p99t500-1000000 gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate 1000000 --requests 3000000 $P
  load v-dlall gpubatch-mix --threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
  load v-mixed64 gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 $P
fi

# sat26c: with priority levels (and a latency target) the in-flight limit stays as it was; the
# priority mix at saturation again (its high level should now match off), the crowd at 1,024 and
# 2,048 each with 4 (this build's default) against off, and 3 and 6 batches saturated.
if on sat26c; then
  P="--device 0 --host-probe"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  load u-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2 3; do
    for m in on off 3 6; do
      e=""; [ $m = on ] || e="env GPUBATCH_SATURATED_INFLIGHT=$m --"
      load u-crowd-$m-$rep $e gpubatch-load $crowd
      [ $rep -le 2 ] && load u-crowd2048-$m-$rep $e gpubatch-load --device 0 --threads 16 --inflight 2048 --requests 8000000 --op relu --size 256
      [ $m = on ] || [ $m = off ] && [ $rep -le 2 ] && load u-mixsat-$m-$rep $e gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
    done
  done
fi

# sat26b: sat26 again on another machine (call 2's lost up to 4.3 s of CPU to steal in a run),
# the loads where the count cap is raised: the crowds (four and two rounds), the open loop at
# 3 M/s, and the priority mix at saturation as the check that the high level loses nothing.
if on sat26b; then
  P="--device 0 --host-probe"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  off="env GPUBATCH_SATURATED_INFLIGHT=off --"
  load t-lone gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  load t-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2 3 4; do
    for m in on off; do
      e=""; [ $m = off ] && e=$off
      load t-crowd-$m-$rep $e gpubatch-load $crowd
      [ $rep -le 2 ] && load t-hcrowd-$m-$rep $e gpubatch-load $crowd --handlers
      [ $rep -le 2 ] && load t-crowd2048-$m-$rep $e gpubatch-load --device 0 --threads 16 --inflight 2048 --requests 8000000 --op relu --size 256
      [ $rep -le 3 ] && load t-mixsat-$m-$rep $e gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      [ $rep -le 2 ] && load t-open3000000-$m-$rep $e gpubatch-load --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000 $P
    done
  done
fi

# sat26 (26th session): twice max_inflight_batches in flight once the count cap is raised
# (saturated), against GPUBATCH_SATURATED_INFLIGHT=off (the behaviour before), the same binary,
# interleaved: the crowds, the open loop at 2-3 M/s, the priority mix at saturation, every request
# on a deadline.
if on sat26; then
  P="--device 0 --host-probe"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  off="env GPUBATCH_SATURATED_INFLIGHT=off --"
  load s-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2 3; do
    for m in on off; do
      e=""; [ $m = off ] && e=$off
      load s-crowd-$m-$rep $e gpubatch-load $crowd
      load s-hcrowd-$m-$rep $e gpubatch-load $crowd --handlers
      [ $rep = 3 ] || load s-crowd2048-$m-$rep $e gpubatch-load --device 0 --threads 16 --inflight 2048 --requests 8000000 --op relu --size 256
    done
  done
  for rep in 1 2; do
    for r in 2000000 2500000 3000000; do
      for m in on off; do
        e=""; [ $m = off ] && e=$off
        load s-open$r-$m-$rep $e gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      done
    done
    for m in on off; do
      e=""; [ $m = off ] && e=$off
      load s-mixsat-$m-$rep $e gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load s-dlall-$m-$rep $e gpubatch-mix --threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    done
  done
fi

# depth26 (26th session): what bounds the crowd on one GPU. The issue fixes 16 threads of
# 256-float relu but not their depth: the crowd at --inflight 1024 (issue 11's), 2048 and 4096
# per thread, max_inflight_batches 2 (adaptive's) against 4, interleaved; per-thread CPU
# (bench/thread_cpu.py) and a trace of the default crowd (bench/trace_batches.py).
if on depth26; then
  c="--device 0 --threads 16 --op relu --size 256"
  for rep in 1 2; do
    for d in 1024 2048 4096; do
      load dp-crowd$d-$rep gpubatch-load $c --inflight $d --requests 8000000
      load dp-crowd$d-mib4-$rep env GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-load $c --inflight $d --requests 8000000
    done
  done
  load dp-crowd1024-handlers gpubatch-load $c --inflight 1024 --requests 8000000 --handlers
  load dp-crowd4096-handlers gpubatch-load $c --inflight 4096 --requests 8000000 --handlers
  for d in 1024 4096; do
    timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-crowd$d.json" -- "$run" gpubatch-load $c --inflight $d --requests 8000000 --json > "$out/threads-crowd$d.txt" 2>&1
  done
  traced dp-crowd1024-traced crowd1024 gpubatch-load $c --inflight 1024 --requests 4000000
  traced dp-crowd4096-traced crowd4096 gpubatch-load $c --inflight 4096 --requests 4000000
fi

# gen25 (the generator change it measured was reverted): gpubatch-mix whose handler lets go of its Slot before marking it done (the sender frees
# it on its own thread; gpubatch-mix-gen) against the generator before (gpubatch-mix, the same
# library): the priority mix at saturation, three rounds interleaved, with idle and jemalloc beside;
# every request on a deadline at 2 M/s, two rounds.
if on gen25; then
  P="--device 0 --host-probe"
  J="LD_PRELOAD=$PWD/.gpu/lib/libjemalloc.so.2"
  pm="--threads 16 --high 0.1 --size 256"
  load gn-idle gpubatch-mix-gen $pm --rate 10000 --requests 30000 $P
  for rep in 1 2 3; do
    for b in gpubatch-mix-gen gpubatch-mix; do
      load gn-sat-$b-$rep $b $pm --rate 3000000 --requests 6000000 $P
    done
  done
  load gn-sat-gen-jemalloc env $J -- gpubatch-mix-gen $pm --rate 3000000 --requests 6000000 $P
  for rep in 1 2; do
    for b in gpubatch-mix-gen gpubatch-mix; do
      load gn-dlall-$b-$rep $b $pm --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    done
  done
fi

# batch25: a thread's frees handed to the pool 64 at a time (25th session) against the pool of
# calls 6-16 (one compare-and-swap per free, -cur) and no pool (-prev): the open loop at 2 M/s, the
# handler crowd, every request on a deadline at 2 M/s; interleaved.
if on batch25; then
  P="--device 0 --host-probe"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256 --handlers"
  for rep in 1 2 3; do
    for v in "" -cur -prev; do
      load b-open-load$v-$rep gpubatch-load$v --device 0 --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 --host-probe
      load b-hcrowd-load$v-$rep gpubatch-load$v $crowd
    done
  done
  for rep in 1 2; do
    for v in "" -cur -prev; do
      load b-dlall-mix$v-$rep gpubatch-mix$v --threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    done
  done
fi

# open25b: the open loop at 2 M/s, this build against -prev (no pools), four more rounds interleaved
# (call 15 had this build's p99 120-175 us above in both of its rounds).
if on open25b; then
  for rep in 1 2 3 4; do
    for b in gpubatch-load gpubatch-load-prev; do
      load h-open2000000-$b-$rep $b --device 0 --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 --host-probe
    done
  done
fi

# final25b: final25's comparisons again on another machine (call 14's lost up to 13.6 s of CPU to
# steal in a run): the crowds, the priority mix, every request on a deadline, the open loop and
# the lone caller, this build and -prev interleaved.
if on final25b; then
  P="--device 0 --host-probe"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  load g-lone gpubatch-load $lone
  load g-lone-unbatched gpubatch-load --unbatched $lone
  load g-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2; do
    for b in gpubatch-load gpubatch-load-prev; do
      load g-crowd-$b-$rep $b $crowd
      load g-hcrowd-$b-$rep $b $crowd --handlers
    done
    for b in gpubatch-mix gpubatch-mix-prev; do
      load g-mixsat-$b-$rep $b --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load g-dlall-$b-$rep $b --threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    done
    for b in gpubatch-load gpubatch-load-prev; do
      load g-open2000000-$b-$rep $b --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 $P
    done
  done
fi

# The session's end (25th session): issue 11's, 12's and 14's loads with this build, the build
# before its pools (-prev) beside where it matters, interleaved.
if on final25; then
  P="--device 0 --host-probe"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load f-lone-$rep gpubatch-load $lone --idle-ms 1000
    load f-lone-unbatched-$rep gpubatch-load --unbatched $lone
  done
  load f-lone-realtime gpubatch-load --preset realtime --sync $lone
  for rep in 1 2; do
    load f-crowd-$rep gpubatch-load $crowd
    load f-crowd-prev-$rep gpubatch-load-prev $crowd
  done
  load f-hcrowd gpubatch-load $crowd --handlers
  load f-hcrowd-prev gpubatch-load-prev $crowd --handlers
  for rep in 1 2; do
    for b in gpubatch-load gpubatch-load-prev; do
      load f-open2000000-$b-$rep $b --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 $P
    done
  done
  load f-open2500000 gpubatch-load --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 $P
  load f-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2; do
    for b in gpubatch-mix gpubatch-mix-prev; do
      load f-mixsat-$b-$rep $b --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load f-dlall-$b-$rep $b --threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    done
  done
  load f-p99t500-1000000 gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate 1000000 --requests 3000000 $P
  load f-deadline-large gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000 $P
  load f-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  load f-mixed64 gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 $P
  if have gpubatch_integration_tests; then
    timeout 200 "$run" gpubatch_integration_tests --gtest_brief=1 > "$out/tests-integration.txt" 2>&1
    echo "gpubatch_integration_tests exit $?" | tee -a "$out/log.txt"
  fi
fi

# The open loop (its callers use completion handlers) with handler states pooled (25th session):
# this build, the build before any pool (gpubatch-load-prev) and this build under jemalloc, three
# rounds interleaved at 2.5 M/s, one at 2 M/s.
if on open25; then
  J="LD_PRELOAD=$PWD/.gpu/lib/libjemalloc.so.2"
  o="--device 0 --threads 16 --op relu --size 256 --host-probe"
  for rep in 1 2 3; do
    load op-25-new-$rep gpubatch-load $o --rate 2500000 --requests 7500000
    load op-25-prev-$rep gpubatch-load-prev $o --rate 2500000 --requests 7500000
    load op-25-jemalloc-$rep env $J -- gpubatch-load $o --rate 2500000 --requests 7500000
  done
  load op-20-new gpubatch-load $o --rate 2000000 --requests 6000000
  load op-20-prev gpubatch-load-prev $o --rate 2000000 --requests 6000000
  load op-20-jemalloc env $J -- gpubatch-load $o --rate 2000000 --requests 6000000
fi

# Where the open loop's threads sleep and spend (25th session): gpubatch-load at 2.5 M/s from a
# frame-pointer build (gpubatch-load-fp): every 10th context switch with its DWARF stack, and a
# CPU profile by symbol and comm.
if on openprof25 && have perf && have gpubatch-load-fp; then
  fp="gpubatch-load-fp --device 0 --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 --json"
  timeout 150 "$run" perf record -e cs -c 10 --call-graph dwarf,8192 -o "$out/cs.data" -- "$PWD/$run" $fp > "$out/perf-cs-run.txt" 2>&1
  timeout 200 "$run" perf script -i "$out/cs.data" 2> /dev/null | gzip -1 > "$out/cs-script.txt.gz"
  python3 bench/perf_stacks.py "$out/cs-script.txt.gz" '*' 9 60 > "$out/cs-stacks.txt" 2>&1
  rm -f "$out/cs.data" "$out/cs-script.txt.gz"
  timeout 150 "$run" perf record -F 999 --call-graph fp -o "$out/cpu.data" -- "$PWD/$run" $fp > "$out/perf-cpu-run.txt" 2>&1
  timeout 120 "$run" perf report -i "$out/cpu.data" --no-children --sort comm,sym -g none --percent-limit 0.4 \
    > "$out/perf-sym.txt" 2>&1
  rm -f "$out/cpu.data"
fi

# The priority mix at saturation (issue 14's "high p99 <= 2x idle") with handler states pooled
# (25th session): this build, the build with only the deadline's cells pooled (gpubatch-mix-cells)
# and this build under jemalloc, three rounds interleaved; idle (10,000/s) beside.
if on prio25; then
  P="--device 0 --host-probe"
  J="LD_PRELOAD=$PWD/.gpu/lib/libjemalloc.so.2"
  pm="--threads 16 --high 0.1 --size 256"
  load pr-idle-1 gpubatch-mix $pm --rate 10000 --requests 30000 $P
  for rep in 1 2 3; do
    load pr-sat-new-$rep gpubatch-mix $pm --rate 3000000 --requests 6000000 $P
    load pr-sat-cells-$rep gpubatch-mix-cells $pm --rate 3000000 --requests 6000000 $P
    load pr-sat-jemalloc-$rep env $J -- gpubatch-mix $pm --rate 3000000 --requests 6000000 $P
  done
  load pr-idle-2 gpubatch-mix $pm --rate 10000 --requests 30000 $P
fi

# The deadline mix with large requests and block_for (the targets' runs whose lateness came from
# whole-process stalls) under glibc's malloc and under jemalloc (25th session: does the allocator
# make the stalls?); this build, interleaved, two rounds.
if on dlalloc25; then
  P="--device 0 --host-probe"
  J="LD_PRELOAD=$PWD/.gpu/lib/libjemalloc.so.2"
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  bf="--threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000"
  for rep in 1 2; do
    load da-large-glibc-$rep gpubatch-mix $dl $P
    load da-large-jemalloc-$rep env $J -- gpubatch-mix $dl $P
    load da-blockfor-glibc-$rep gpubatch-mix $bf $P
    load da-blockfor-jemalloc-$rep env $J -- gpubatch-mix $bf $P
  done
fi

# Handler states from the pool too (25th session): this build against the build with only the
# deadline's cells pooled (gpubatch-mix-cells, gpubatch-load-prev), every request on a 2 ms
# deadline at 2 M/s, none at 3 M/s, and the handler crowd (gpubatch-load --handlers); interleaved.
if on handl25; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2 3; do
    for b in gpubatch-mix gpubatch-mix-cells; do
      load hp-all-$b-$rep $b $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    done
  done
  for rep in 1 2; do
    for b in gpubatch-mix gpubatch-mix-cells; do
      load hp-none3m-$b-$rep $b $m --deadline-fraction 0 --rate 3000000 --requests 6000000 $P
    done
    for b in gpubatch-load gpubatch-load-prev; do
      load hp-hcrowd-$b-$rep $b $crowd --handlers
    done
  done
  for b in gpubatch-load gpubatch-load-prev; do
    load hp-crowd-$b $b $crowd
  done
fi

# The deadline's cells from a pool (25th session): this build against the build before it
# (-prev), every request on a 2 ms deadline at 2 M/s (and 3 M/s), three rounds interleaved; one
# round of each with jemalloc preloaded as the reference; the crowd and no deadlines beside.
if on pool25; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000"
  J="LD_PRELOAD=$PWD/.gpu/lib/libjemalloc.so.2"
  for rep in 1 2 3; do
    for b in gpubatch-mix gpubatch-mix-prev; do
      load pl-all-$b-$rep $b $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    done
  done
  for b in gpubatch-mix gpubatch-mix-prev; do
    load pl-all-$b-jemalloc env $J -- $b $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    load pl-all3m-$b $b $m --deadline-fraction 1 --rate 3000000 --requests 6000000 $P
    load pl-none-$b $b $m --deadline-fraction 0 --rate 2000000 --requests 4000000 $P
  done
  for b in gpubatch-load gpubatch-load-prev; do
    load pl-crowd-$b $b --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
  done
fi

# The allocator (25th session, after dlprof25c found the strand, the watch and the completion
# threads waiting for glibc's arena locks in free()): the same binaries with jemalloc preloaded
# (.gpu/lib/libjemalloc.so.2, Debian's libjemalloc2) against glibc's malloc, every request on a
# 2 ms deadline at 2 M/s and none, and the crowd; interleaved.
if on jem25; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000"
  J="LD_PRELOAD=$PWD/.gpu/lib/libjemalloc.so.2"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load jm-all-glibc-$rep gpubatch-mix $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    load jm-all-jemalloc-$rep env $J -- gpubatch-mix $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    load jm-crowd-glibc-$rep gpubatch-load $crowd
    load jm-crowd-jemalloc-$rep env $J -- gpubatch-load $crowd
  done
  load jm-none-glibc gpubatch-mix $m --deadline-fraction 0 --rate 2000000 --requests 4000000 $P
  load jm-none-jemalloc env $J -- gpubatch-mix $m --deadline-fraction 0 --rate 2000000 --requests 4000000 $P
  load jm-open-glibc gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 --host-probe
  load jm-open-jemalloc env $J -- gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 --host-probe
fi

# dlprof25c: where the senders sleep, every request on a deadline at 2 M/s: every 10th context
# switch with a DWARF stack (glibc has no frame pointers), its commonest stacks (bench/perf_stacks.py).
if on dlprof25c && have perf && have gpubatch-mix-fp; then
  fp="gpubatch-mix-fp --threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1 --rate 2000000 --requests 4000000 --json"
  timeout 150 "$run" perf record -e cs -c 10 --call-graph dwarf,8192 -o "$out/cs.data" -- "$PWD/$run" $fp > "$out/perf-cs-run.txt" 2>&1
  timeout 200 "$run" perf script -i "$out/cs.data" 2> /dev/null | gzip -1 > "$out/cs-script.txt.gz"
  python3 bench/perf_stacks.py "$out/cs-script.txt.gz" gpubatch-mix-fp 9 40 > "$out/cs-stacks.txt" 2>&1
  for c in gpubatch-strand gpubatch-expiry gpubatch-done; do
    python3 bench/perf_stacks.py "$out/cs-script.txt.gz" $c 9 8 >> "$out/cs-stacks.txt" 2>&1
  done
  rm -f "$out/cs.data" "$out/cs-script.txt.gz"
fi

# Every request on a deadline at 2 M/s (25th session): where the senders' time goes. The mix with
# its new call_us (time inside the library's call) against the same load without deadlines; thread
# CPU by name; a perf profile with call stacks from a frame-pointer build (gpubatch-mix-fp), by
# symbol, and by caller for the senders' heaviest symbols.
# dlprof25b: the profiles alone (call 2; call 1's --comm named the wrong command).
if on dlprof25 || on dlprof25b; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000"
  for rep in 1 2; do
    on dlprof25 || break
    load dp-2m-all-$rep gpubatch-mix $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
    load dp-2m-none-$rep gpubatch-mix $m --deadline-fraction 0 --rate 2000000 --requests 4000000 $P
  done
  on dlprof25 && timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-all.json" -- "$run" gpubatch-mix $m \
    --deadline-fraction 1 --rate 2000000 --requests 4000000 --json > /dev/null 2>> "$out/log.txt"
  on dlprof25 && timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-none.json" -- "$run" gpubatch-mix $m \
    --deadline-fraction 0 --rate 2000000 --requests 4000000 --json > /dev/null 2>> "$out/log.txt"
  if have perf && have gpubatch-mix-fp; then
    fp="gpubatch-mix-fp $m --deadline-fraction 1 --rate 2000000 --requests 4000000 --json"
    timeout 150 "$run" perf record -F 999 --call-graph fp -o "$out/dp.data" -- "$PWD/$run" $fp > "$out/perf-dp.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/dp.data" --no-children --sort comm,sym -g none --percent-limit 0.3 \
      > "$out/perf-sym.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/dp.data" --children --comm gpubatch-mix-fp --sort sym -g none \
      --percent-limit 1 > "$out/perf-children.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/dp.data" --no-children --comm gpubatch-mix-fp --sort sym \
      -g caller,0.5,callee,function,percent --percent-limit 1.5 > "$out/perf-callers.txt" 2>&1
    rm -f "$out/dp.data"
    # Where the senders sleep: every context switch with its stack.
    timeout 150 "$run" perf record -e cs -c 1 --call-graph fp -o "$out/cs.data" -- "$PWD/$run" $fp > "$out/perf-cs-run.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/cs.data" --no-children --comm gpubatch-mix-fp --sort sym \
      -g caller,0.5,callee,function,percent --percent-limit 2 > "$out/perf-cs.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/cs.data" --no-children --sort comm -g none > "$out/perf-cs-comm.txt" 2>&1
    rm -f "$out/cs.data"
  fi
fi

# The watch's every-4,096 wake only while it sleeps (24th session): this build against the pass
# budget's build (-budget), every request on a 2 ms deadline at 2 and 1 M/s, two rounds
# interleaved; the open loop at 2.5 M/s of both (call 10's open-loop lines named --device twice).
if on dlwake24; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1"
  for rep in 1 2; do
    for r in 2000000 1000000; do
      for b in gpubatch-mix gpubatch-mix-budget; do
        load dw-$r-$b-$rep $b $m --rate $r --requests $((r * 2)) $P
      done
    done
    for b in gpubatch-load gpubatch-load-budget; do
      load dw-open-$b-$rep $b --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 $P
    done
  done
fi

# The pass's budget (24th session, after call 9 showed a budget per pull was not enough): this
# build against the same build without it (-nobudget), every request on a 2 ms deadline at 2, 3
# and 1 M/s, two rounds interleaved; the crowd and the open loop at 2.5 M/s beside (no regression);
# one traced run of this build at 2 M/s.
if on dlbud24b; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    for r in 2000000 3000000 1000000; do
      for b in gpubatch-mix gpubatch-mix-nobudget; do
        load dc-$r-$b-$rep $b $m --rate $r --requests $((r * 2)) $P
      done
    done
    for b in gpubatch-load gpubatch-load-nobudget; do
      load dc-crowd-$b-$rep $b $crowd
      load dc-open-$b-$rep $b --device 0 --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 $P
    done
  done
  traced dc-2m-tr dctr gpubatch-mix $m --rate 2000000 --requests 4000000 $P
fi

# The pull's budget (24th session): this build against the same build without the budget
# (gpubatch-mix-nobudget), every request on a 2 ms deadline at 2, 3 and 1 M/s, two rounds
# interleaved; one traced run of this build at 2 M/s.
if on dlbud24; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1"
  for rep in 1 2; do
    for r in 2000000 3000000 1000000; do
      for b in gpubatch-mix gpubatch-mix-nobudget; do
        load db-$r-$b-$rep $b $m --rate $r --requests $((r * 2)) $P
      done
    done
  done
  traced db-2m-tr dbtr gpubatch-mix $m --rate 2000000 --requests 4000000 $P
fi

# The load generator's own rethrows (24th session): gpubatch-mix reading each error's message by a
# rethrow (gpubatch-mix-rethrow, the build before) against once per shared exception, the same
# library; every request on a 2 ms deadline at 1, 2 and 3 M/s, two rounds interleaved.
if on dlmemo24; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1"
  for rep in 1 2; do
    for r in 2000000 1000000 3000000; do
      for b in gpubatch-mix gpubatch-mix-rethrow; do
        load dm-$r-$b-$rep $b $m --rate $r --requests $((r * 2)) $P
      done
    done
  done
fi

# Every request on a 2 ms deadline collapsed the 10 % mix at 2-3 M/s (adm24: 85,000-330,000
# requests/s served, the senders seconds behind, nearly every request expired in the queue). Where
# the knee is and which part does it: the mix at 1 and 2 M/s with every request on a deadline,
# beside the deadline watch off, admission off and no deadlines; a perf profile at 2 M/s.
if on dlall24; then
  P="--device 0 --host-probe"
  m="gpubatch-mix --threads 16 --high 0.1 --size 256 --deadline-us 2000"
  load da-1m $m --deadline-fraction 1 --rate 1000000 --requests 2000000 $P
  load da-2m $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
  load da-2m-none $m --deadline-fraction 0 --rate 2000000 --requests 4000000 $P
  load da-2m-nowatch env GPUBATCH_DEADLINE_WATCH=off -- $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
  load da-2m-noadm env GPUBATCH_DEADLINE_ADMISSION=off -- $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
  load da-2m-half $m --deadline-fraction 0.5 --rate 2000000 --requests 4000000 $P
  traced da-2m-tr datr $m --deadline-fraction 1 --rate 2000000 --requests 4000000 $P
  if have perf; then
    timeout 150 "$run" perf record -F 1999 -g -o "$out/dl.data" -- "$PWD/$run" $m --deadline-fraction 1 \
      --rate 2000000 --requests 4000000 --json > "$out/perf-dl.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/dl.data" --no-children --sort comm -g none > "$out/perf-comm.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/dl.data" --no-children --sort comm,sym -g none --percent-limit 0.4 \
      > "$out/perf-sym.txt" 2>&1
    rm -f "$out/dl.data"
  fi
fi

# Deadline admission with priorities (24th session): the build that counts only the forming
# batch's requests at the request's level and above, against the same build counting the whole
# forming batch (gpubatch-mix-prevadm), the 10 % mix with every request on a 2 ms deadline at 3 and
# 2 M/s, three rounds interleaved; refused_high in the JSON.
if on adm24; then
  P="--device 0 --host-probe"
  m="--threads 16 --high 0.1 --size 256 --deadline-us 2000 --deadline-fraction 1"
  for rep in 1 2 3; do
    for b in gpubatch-mix gpubatch-mix-prevadm; do
      load adm-3m-$b-$rep $b $m --rate 3000000 --requests 6000000 $P
      load adm-2m-$b-$rep $b $m --rate 2000000 --requests 4000000 $P
    done
  done
fi

# A done word written by the kernel against the timeline counter on today's H200 (24th session):
# bench/probes/done-word (bundled as `done`) twice, beside the library's lone future, --sync and
# Device::run, and the shared probe (`latency`), interleaved.
if on dw24; then
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  have latency && timeout 120 "$run" latency > "$out/probe.txt" 2>&1
  for rep in 1 2; do
    have done && timeout 120 "$run" done >> "$out/done-word.txt" 2>&1
    load dw-future-$rep gpubatch-load $lone
    load dw-sync-$rep gpubatch-load --sync $lone
    load dw-unbatched-$rep gpubatch-load --unbatched $lone
  done
fi

# Where the open loop's CPU goes (24th session): 3.4-4.4 us of process CPU a request at 2-3 M/s
# against 2.2-2.3 in the closed-loop crowd (s23). CPU seconds per thread name (thread_cpu.py) for
# the open loop at 2 and 3 M/s and the crowd; a perf profile of the open loop at 2.5 M/s by thread
# name and, for the busiest names, by symbol (needs .gpu/bin/perf and symbols: strip --strip-debug).
if on cpu24; then
  open="--device 0 --threads 16 --op relu --size 256 --host-probe"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for r in 2000000 3000000; do
    timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-open$r.json" -- "$run" gpubatch-load $open \
      --rate $r --requests $((r * 3)) --json > "$out/threads-open$r.txt" 2>&1
  done
  timeout 120 python3 bench/thread_cpu.py --json-out "$out/threads-crowd.json" -- "$run" gpubatch-load $crowd --json \
    > "$out/threads-crowd.txt" 2>&1
  if have perf; then
    timeout 150 "$run" perf record -F 1999 -g -o "$out/open.data" -- "$PWD/$run" gpubatch-load $open --rate 2500000 \
      --requests 7500000 --json > "$out/perf-open.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/open.data" --no-children --sort comm -g none > "$out/perf-comm.txt" 2>&1
    timeout 120 "$run" perf report -i "$out/open.data" --no-children --sort comm,sym -g none --percent-limit 0.4 \
      > "$out/perf-sym.txt" 2>&1
    rm -f "$out/open.data"
  fi
fi

# Deadline errors with large requests in the mix (24th session, call 3): where a late error's time
# goes, with the deadline watch's rounds now in the trace (late_us: how late each round began);
# two traced and two untraced runs of issue 14's load, block_for beside; then the GPU tests.
if on dl24; then
  P="--device 0 --host-probe"
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  for rep in 1 2; do
    load dl-large-$rep gpubatch-mix $dl $P
    traced dl-large-tr-$rep dltr$rep gpubatch-mix $dl $P
  done
  load dl-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  for t in gpubatch_tests gpubatch_integration_tests gpubatch_executor_tests; do
    have $t || continue
    echo "== $t" >&2
    timeout 200 "$run" $t --gtest_brief=1 > "$out/tests-$t.txt" 2>&1
    echo "$t exit $?" | tee -a "$out/log.txt"
  done
fi

# Express split threshold at saturation (24th session, call 2): with latency_batch_size regular
# batches hold ~620 requests at 3 M/s, under the 1,024 level-0 requests beside which a regular batch
# sends the levels above 0 ahead; 256 and 512 against the default, and the hold at 25 us,
# interleaved, four rounds; 1 M/s and idle beside.
if on split24; then
  P="--device 0 --host-probe"
  m="gpubatch-mix --threads 16 --high 0.1 --size 256"
  for rep in 1 2 3 4; do
    load sp-sat-def-$rep $m --rate 3000000 --requests 6000000 $P
    load sp-sat-256-$rep env GPUBATCH_EXPRESS_SPLIT=256 -- $m --rate 3000000 --requests 6000000 $P
    load sp-sat-512-$rep env GPUBATCH_EXPRESS_SPLIT=512 -- $m --rate 3000000 --requests 6000000 $P
    load sp-sat-h25-$rep env GPUBATCH_EXPRESS_HOLD_US=25 -- $m --rate 3000000 --requests 6000000 $P
  done
  for rep in 1 2; do
    load sp-1m-def-$rep $m --rate 1000000 --requests 2000000 $P
    load sp-1m-256-$rep env GPUBATCH_EXPRESS_SPLIT=256 -- $m --rate 1000000 --requests 2000000 $P
    load sp-idle-$rep $m --rate 10000 --requests 30000 $P
  done
  traced sp-tr-256 spsat-256 env GPUBATCH_EXPRESS_SPLIT=256 -- $m --rate 3000000 --requests 6000000 $P
fi

# An express batch's hold judged by the clock at each look of a long pull, not the pass's start
# (ExecutorCore::express_due; call 12): the priority mix at 3 M/s and 1 M/s, this build against
# gpubatch-mix-prev (the build before it), three interleaved rounds, idle beside.
if on exdue23; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for b in gpubatch-mix gpubatch-mix-prev; do
      load ed-sat-$b-$rep $b --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load ed-1m-$b-$rep $b --threads 16 --high 0.1 --size 256 --rate 1000000 --requests 2000000 $P
    done
    load ed-idle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
  traced ed-tr-new edsat-new gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
  traced ed-tr-prev edsat-prev gpubatch-mix-prev --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
fi

# The open loop at 4 M/s over two H200s from 32 senders (16 could not send 4 M/s; call 11),
# latency_batch_size 1024 against 0, interleaved.
if on x2open23; then
  for rep in 1 2; do
    for v in 1024 0; do
      load x2o-t32-$v-$rep env GPUBATCH_LATENCY_BATCH_SIZE=$v -- gpubatch-load --devices 0,1 --threads 32 --op relu --size 256 --rate 4000000 --requests 12000000 --host-probe
    done
  done
fi

# Two H200s as one device set (nvidia-h200-x2; call 10): latency_batch_size 1024 against 0 for the
# 32-thread crowd (issue 12's 8 M/s) and the open loop at 4 M/s over both, interleaved.
if on x2lbs23; then
  for rep in 1 2; do
    for v in 1024 0; do
      e=GPUBATCH_LATENCY_BATCH_SIZE=$v
      load x2-c32-$v-$rep env $e -- gpubatch-load --devices 0,1 --threads 32 --inflight 1024 --requests 16000000 --op relu --size 256
      load x2-open4m-$v-$rep env $e -- gpubatch-load --devices 0,1 --threads 16 --op relu --size 256 --rate 4000000 --requests 12000000 --host-probe
    done
  done
fi

# This session's build on another machine (call 9): the lone caller beside Device::run and the
# probe's floor (run the "probe" section with it), the crowd, the open loop at 2, 2.5 and 3 M/s
# against GPUBATCH_LATENCY_BATCH_SIZE=0, the priority mix at 3 M/s beside idle; two rounds.
if on confirm23; then
  P="--device 0 --host-probe"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2; do
    load c-lone-$rep gpubatch-load $lone
    load c-lone-unbatched-$rep gpubatch-load --unbatched $lone
    load c-crowd-$rep gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    for r in 2000000 2500000 3000000; do
      for v in 1024 0; do
        load c$v-open$r-$rep env GPUBATCH_LATENCY_BATCH_SIZE=$v -- gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      done
    done
    load c-mixsat-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
    load c-mixidle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
fi

# Issue 14's sweeps with this session's build (call 8; plotted with bench/mix_sweep.py --replot),
# then a traced priority mix at 3 M/s with every default beside two idle ones.
if on sweeps23; then
  mix_sweeps
  P="--device 0 --host-probe"
  load sw-mixidle-1 gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  traced sw-mixsat-trace trace-mixsat gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
  load sw-mixidle-2 gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
fi

# How long batches must stay full before latency_batch_size's cap rises (call 7):
# GPUBATCH_SATURATED_AFTER_US 3000 and 30000 against the default 10000, three interleaved rounds,
# the open loop at 2, 2.5 and 3 M/s.
if on sus23; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for r in 2000000 2500000 3000000; do
      for v in 10000 3000 30000; do
        load su$v-open$r-$rep env GPUBATCH_SATURATED_AFTER_US=$v -- gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      done
    done
  done
fi

# This session's final build (latency_batch_size 1024, express hold 50 us) beside the previous
# build (gpubatch-load-prev / gpubatch-mix-prev: 88b9222), interleaved: every target of issues 11
# and 14 that one H200 measures (twenty-third session, call 6).
if on final23; then
  P="--device 0 --host-probe"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load f-lone-$rep gpubatch-load $lone --idle-ms 1000
    load f-lone-prev-$rep gpubatch-load-prev $lone
    load f-lone-unbatched-$rep gpubatch-load --unbatched $lone
    load f-lone-realtime-$rep gpubatch-load --preset realtime --sync $lone
  done
  for rep in 1 2 3; do
    load f-crowd-$rep gpubatch-load $crowd
    load f-crowd-prev-$rep gpubatch-load-prev $crowd
  done
  load f-rtcrowd gpubatch-load --preset realtime $crowd
  for rep in 1 2; do
    for r in 1500000 2000000 2500000 3000000; do
      for b in gpubatch-load gpubatch-load-prev; do
        load f-open$r-$b-$rep $b --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      done
    done
  done
  for rep in 1 2 3; do
    for b in gpubatch-mix gpubatch-mix-prev; do
      load f-mixsat-$b-$rep $b --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
    done
    load f-mixidle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
  for r in 500000 1000000 1500000; do
    load f-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3)) $P
  done
  for rep in 1 2; do
    for b in gpubatch-mix gpubatch-mix-prev; do
      load f-deadline-large-$b-$rep $b --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000 $P
    done
  done
  load f-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  load f-mixed64 gpubatch-mix --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 $P
fi

# The express hold at 50 us against the default 100 (call 5), three interleaved rounds, at 3 M/s,
# 1 M/s and 500,000/s offered with 10 % at level 1 (the hold keeps express batches few at
# moderate load: DESIGN.md "Priorities"), idle beside.
if on hold23; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for r in 3000000 1000000 500000; do
      mix="--threads 16 --high 0.1 --size 256 --rate $r --requests $((r * 2)) $P"
      load ho100-$r-$rep gpubatch-mix $mix
      load ho50-$r-$rep env GPUBATCH_EXPRESS_HOLD_US=50 -- gpubatch-mix $mix
    done
    load ho-idle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
fi

# With latency_batch_size (call 4): the priority mix at saturation with the express split at 256
# and the hold at 50 us against the defaults (1024, 100 us), three interleaved rounds, idle
# beside; latency_batch_size 512 and 2048 against 1024 on the open loop at 2.5 and 3 M/s and the
# crowd; one traced mix at 3 M/s.
if on prio23; then
  P="--device 0 --host-probe"
  mix="--threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P"
  for rep in 1 2 3; do
    load pr-def-$rep gpubatch-mix $mix
    load pr-split256-$rep env GPUBATCH_EXPRESS_SPLIT=256 -- gpubatch-mix $mix
    load pr-hold50-$rep env GPUBATCH_EXPRESS_HOLD_US=50 -- gpubatch-mix $mix
    load pr-both-$rep env GPUBATCH_EXPRESS_SPLIT=256 GPUBATCH_EXPRESS_HOLD_US=50 -- gpubatch-mix $mix
    load pr-idle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
  for rep in 1 2; do
    for v in 512 1024 2048; do
      e=GPUBATCH_LATENCY_BATCH_SIZE=$v
      load lb$v-open2500k-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 $P
      load lb$v-open3m-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000 $P
      load lb$v-crowd-$rep env $e -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
  traced pr-trace trace-mixsat gpubatch-mix $mix
fi

# The same with the cap lowered only after 10 ms of batches under it (count_cap.hpp; call 3):
# latency_batch_size 1024 against 0, three interleaved rounds; the lone caller beside Device::run.
if on lbs23b; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for v in 1024 0; do
      e=GPUBATCH_LATENCY_BATCH_SIZE=$v
      load lbb$v-open2m-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 $P
      load lbb$v-open2500k-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 $P
      load lbb$v-open3m-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000 $P
      load lbb$v-mixsat-$rep env $e -- gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load lbb$v-crowd-$rep env $e -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
    load lbb-mixidle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
  for v in 1024 0; do
    load lbb$v-rtcrowd env GPUBATCH_LATENCY_BATCH_SIZE=$v -- gpubatch-load --device 0 --preset realtime --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
  done
  load lbb-lone gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  load lbb-lone-unbatched gpubatch-load --device 0 --unbatched --threads 1 --inflight 1 --requests 20000 --op relu --size 256
fi

# latency_batch_size 1024 (the new default: batches capped at 1,024 until the executor has been
# saturated for 10 ms) against GPUBATCH_LATENCY_BATCH_SIZE=0 (the previous behaviour), three
# interleaved rounds (twenty-third session, call 2): the open loop at 2, 2.5 and 3 M/s, the
# priority mix at saturation, the crowd in adaptive and realtime; then idle mix and lone caller.
if on lbs23; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for v in 1024 0; do
      e=GPUBATCH_LATENCY_BATCH_SIZE=$v
      load lbs$v-open2m-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 $P
      load lbs$v-open2500k-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 $P
      load lbs$v-open3m-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 3000000 --requests 9000000 $P
      load lbs$v-mixsat-$rep env $e -- gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load lbs$v-crowd-$rep env $e -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
      load lbs$v-rtcrowd-$rep env $e -- gpubatch-load --device 0 --preset realtime --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
  for rep in 1 2; do
    load lbs-mixidle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
  load lbs-lone gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  load lbs-lone-unbatched gpubatch-load --device 0 --unbatched --threads 1 --inflight 1 --requests 20000 --op relu --size 256
fi

# The batch cap under the open loop and the priority mix (twenty-third session, call 1): the
# episodes at 2-3 M/s are batches of 3,000-4,096 requests whose pack and completion take 2-3 ms;
# max_batch_size 4096 (the default) against 2048 and 1024, interleaved; the express hold 100 us
# (the default) against 0 and 30 at saturation; the priority mix idle; one traced mix at 3 M/s.
if on cap23; then
  P="--device 0 --host-probe"
  for rep in 1 2; do
    for cap in 4096 2048 1024; do
      e=GPUBATCH_MAX_BATCH_SIZE=$cap
      load cap$cap-open2m-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2000000 --requests 6000000 $P
      load cap$cap-open2500k-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2500000 --requests 7500000 $P
      load cap$cap-mixsat-$rep env $e -- gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load cap$cap-crowd-$rep env $e -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
    for h in 0 30; do
      load hold$h-mixsat-$rep env GPUBATCH_EXPRESS_HOLD_US=$h -- gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
    done
    load mixidle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
  traced mixsat-trace trace-mixsat gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
fi

# Eight completion threads against the default four (twenty-second session, call 14): a batch of
# 4,000 handlers took 1.4-1.7 ms to resolve on four in call 12's episodes. Interleaved: the open
# loop at 2.5 M/s, the priority mix at 3 M/s, the crowd.
if on ct22; then
  P="--device 0 --host-probe"
  for rep in 1 2; do
    for e in GPUBATCH_COMPLETION_THREADS=4 GPUBATCH_COMPLETION_THREADS=8; do
      n=${e##*=}
      load ct$n-open2500k-$rep env $e -- gpubatch-load --threads 16 --op relu --size 256 --rate 2500000 --requests 5000000 $P
      load ct$n-mixsat-$rep env $e -- gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
      load ct$n-crowd-$rep env $e -- gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
fi

# Issue 14's sweeps again with this session's generator (twenty-second session, call 13; plotted
# here with bench/mix_sweep.py --replot).
if on sweeps22; then
  mix_sweeps
fi

# Issue 14's loads with this session's generator (twenty-second session, call 12; --pace-us 50 and
# the start gate by default): the open loop in 3 s runs, target_p99 500, the priority mix at
# saturation beside idle, deadlines with large requests, block_for; a trace at 2 M/s kept.
if on tail22; then
  P="--device 0 --host-probe"
  for rep in 1 2; do
    for r in 1500000 2000000 2500000 3000000; do
      load tl-open$r-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
    done
  done
  for r in 1000000 1500000 2000000; do
    load tl-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3)) $P
  done
  for rep in 1 2 3; do
    load tl-mixsat-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
    load tl-mixidle-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  done
  load tl-deadline-large gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000 $P
  load tl-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  load tl-open2m-trace env GPUBATCH_TRACE=$out/trace-2m.json -- gpubatch-load --threads 16 --op relu --size 256 --rate 2000000 --requests 4000000 $P
  if [ -f "$out/trace-2m.json" ]; then
    python3 bench/trace_batches.py "$out/trace-2m.json" --slowest 8 > "$out/batches-2m.txt" 2>&1
    gzip -9 "$out/trace-2m.json"
  fi
fi

# The senders made and their heaps warmed before the clock (twenty-second session, call 11;
# bench/start_gate.hpp) against gpubatch-load-prev / gpubatch-mix-prev (the same without),
# interleaved: the open loop at 2 and 2.5 M/s, the priority mix at 3 M/s, the crowd, the lone caller.
if on gate22; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for b in gpubatch-load gpubatch-load-prev; do
      load gt-open2m-$b-$rep $b --threads 16 --op relu --size 256 --rate 2000000 --requests 2000000 $P
    done
  done
  for rep in 1 2; do
    for b in gpubatch-load gpubatch-load-prev; do
      load gt-open2500k-$b-$rep $b --threads 16 --op relu --size 256 --rate 2500000 --requests 2500000 $P
      load gt-crowd-$b-$rep $b --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
    done
  done
  for b in gpubatch-mix gpubatch-mix-prev; do
    load gt-mixsat-$b $b --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
  done
  for b in gpubatch-load gpubatch-load-prev; do
    load gt-lone-$b $b --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  done
fi

# What the process does in the first tens of milliseconds of an open loop at 2 M/s (twenty-second
# session, call 8; .gpu/bin/perf and an unstripped gpubatch-load bundled): perf over the whole run,
# each sample's time, thread and symbol written out (cut into windows here).
if on perfstart22; then
  ol="--device 0 --threads 16 --op relu --size 256 --rate 2000000 --requests 2000000 --host-probe"
  load ps-open-1 gpubatch-load $ol
  if have perf; then
    timeout 120 "$run" perf record -F 4999 -g -o "$out/ol.data" -- "$PWD/$run" gpubatch-load $ol --json > "$out/perf-ol-run.json" 2> "$out/perf-ol-record.txt"
    # Every sample with its time, thread and symbol (and a call chain's first frames), for windows cut here.
    timeout 200 "$run" perf script -i "$out/ol.data" -F comm,tid,time,ip,sym,dso -G > "$out/perf-script.txt" 2> "$out/perf-script-err.txt"
    gzip -9 "$out/perf-script.txt"
    rm -f "$out/ol.data"
  fi
  load ps-open-2 gpubatch-load $ol
fi

# Issue 11's crowd in resident mode beside adaptive (twenty-second session, call 7): `realtime` is
# `adaptive` with the resident kernel; three interleaved rounds; the lone caller in each mode.
if on rtcrowd22; then
  have latency && timeout 120 "$run" latency > "$out/probe.txt" 2>&1
  crowd="--device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for rep in 1 2 3; do
    load rc-adaptive-$rep gpubatch-load $crowd
    load rc-realtime-$rep gpubatch-load --preset realtime $crowd
  done
  for rep in 1 2; do
    load rc-lone-$rep gpubatch-load $lone --idle-ms 1000
    load rc-lone-unbatched-$rep gpubatch-load --unbatched $lone
    load rc-lone-realtime-$rep gpubatch-load --preset realtime --sync $lone --idle-ms 1000
  done
fi

# Errors posted at the call (twenty-second session, call 6): how long Asio's system executor takes
# to run its first function (its pool of two threads a core made then; bench/probes/asio-first-post)
# and later ones; issue 14's deadline mix with large requests and its block_for load with that
# pool made before the clock (--early-system-pool) against without, interleaved.
if on sysp22; then
  for rep in 1 2 3; do have asio-first-post && "$run" asio-first-post >> "$out/asio-first-post.txt" 2>&1; done
  P="--device 0 --host-probe"
  dl="--threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000"
  bf="--threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000"
  for rep in 1 2 3; do
    load sp-dl-$rep gpubatch-mix $dl $P
    load sp-dl-early-$rep gpubatch-mix $dl $P --early-system-pool
  done
  for rep in 1 2; do
    load sp-bf-$rep gpubatch-mix $bf $P
    load sp-bf-early-$rep gpubatch-mix $bf $P --early-system-pool
  done
fi

# What caps the crowd on one H200 now (twenty-second session, call 5): its threads' CPU
# (bench/thread_cpu.py), and the same GPU as a set of two members (--devices 0,0: a strand, a
# packer and completion threads each) beside one, interleaved, with 16 and 32 callers.
if on shard22; then
  c16="--threads 16 --inflight 1024 --requests 8000000 --op relu --size 256"
  c32="--threads 32 --inflight 512 --requests 8000000 --op relu --size 256"
  for rep in 1 2; do
    load sh-one-$rep gpubatch-load --device 0 $c16
    load sh-two-$rep gpubatch-load --devices 0,0 $c16
  done
  load sh-one-32 gpubatch-load --device 0 $c32
  load sh-two-32 gpubatch-load --devices 0,0 $c32
  for d in "--device 0" "--devices 0,0"; do
    tag=$(echo $d | tr -dc '0-9,' | tr , _)
    python3 bench/thread_cpu.py --json-out "$out/threads-$tag.json" -- "$run" gpubatch-load $d $c16 --json \
      > "$out/threads-load-$tag.json" 2> "$out/threads-$tag.txt"
  done
fi

# The open loop's start (twenty-second session, call 4): is the backlog of its first 35 ms the heap
# growing under every thread at once? glibc's top_pad and trim_threshold at 64 MiB (heaps grown in
# large steps and never given back) against the defaults, interleaved; then 5 s runs.
if on malloc22; then
  command -v perf >> "$out/log.txt" 2>&1
  P="--device 0 --host-probe --pace-us 50"
  T=GLIBC_TUNABLES=glibc.malloc.top_pad=67108864:glibc.malloc.trim_threshold=67108864
  for rep in 1 2; do
    for r in 2000000 2500000; do
      load ma-open$r-$rep gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 2)) $P
      load ma-open$r-pad-$rep env $T -- gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 2)) $P
    done
  done
  load ma-open2000000-pad-trace env $T GPUBATCH_TRACE=$out/trace-pad.json -- gpubatch-load --threads 16 --op relu --size 256 --rate 2000000 --requests 4000000 $P
  [ -f "$out/trace-pad.json" ] && gzip -9 "$out/trace-pad.json"
  for r in 2000000 2500000 3000000; do
    load ma-open$r-5s gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 5)) $P
  done
fi

# Where the open loop's tail at 2-3 M/s comes from (twenty-second session, call 3): traced runs
# with --pace-us 50 (the trace kept, gzipped, for a timeline here), untraced beside them.
if on trace22; then
  P="--device 0 --host-probe --pace-us 50"
  for r in 2000000 3000000; do
    load tr-open$r gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 2)) $P
    load tr-open$r-trace env GPUBATCH_TRACE=$out/trace-$r.json -- gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 2)) $P
    if [ -f "$out/trace-$r.json" ]; then
      python3 bench/trace_batches.py "$out/trace-$r.json" --slowest 8 > "$out/batches-$r.txt" 2>&1
      gzip -9 "$out/trace-$r.json"
    fi
    load tr-mix$r gpubatch-mix --threads 16 --size 256 --rate $r --requests $((r * 2)) $P
  done
fi

# The open loop's own senders (twenty-second session, call 2): --pace-us 0 (a sender sleeps until
# each next send, the behaviour so far) against 50 (it sleeps at least 50 us, then sends all come
# due), interleaved, at issue 14's rates; the priority mix at saturation and idle; target_p99 500.
if on pace22; then
  P="--device 0 --host-probe"
  for r in 1500000 2000000 2500000 3000000 3500000; do
    for pace in 0 50; do
      load pc-open$r-p$pace gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 2)) --pace-us $pace $P
    done
  done
  for pace in 0 50; do
    load pc-mixidle-p$pace gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 --pace-us $pace $P
    load pc-mixsat-p$pace gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 --pace-us $pace $P
  done
  for r in 1000000 2000000; do
    for pace in 0 50; do
      load pc-p99t500-$r-p$pace gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 2)) --pace-us $pace $P
    done
  done
fi

# The session's final build (twenty-first session, call 8): the GPU test binaries; the lone caller
# (futures, Device::run, resident) and the crowd against gpubatch-load-prev (2e2b1e6, the build
# before the lone future's trims), interleaved; HostBuffers at issue 12's sizes; the probe's floor.
if on final21; then
  for t in gpubatch_tests gpubatch_integration_tests gpubatch_executor_tests; do
    have $t && timeout 400 "$run" $t > "$out/tests-$t.txt" 2>&1; echo "   $t: $(tail -1 "$out/tests-$t.txt")" >&2
  done
  have latency && timeout 120 "$run" latency > "$out/probe.txt" 2>&1
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  for r in 1 2 3; do
    load f-lone-$r gpubatch-load $lone
    load f-lone-prev-$r gpubatch-load-prev $lone
    load f-unb-$r gpubatch-load $lone --unbatched
    load f-crowd-$r gpubatch-load $crowd
    load f-crowd-prev-$r gpubatch-load-prev $crowd
  done
  load f-resident gpubatch-load --preset realtime --sync $lone
  load f-idle gpubatch-load $lone --idle-ms 1000
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 50000 : 4000 ))
    load f-$s-host gpubatch-load --device 0 --threads 16 --inflight 8 --requests $n --op relu --size $s --host-buffers
  done
fi

# The library's relu kernel against plain ones, host memory to host memory (bench/probes/ew-kernel;
# twenty-first session, call 7), at 4 and 16 MiB a region.
if on ewk21; then
  have ewk && timeout 300 "$run" ewk > "$out/ewk.txt" 2>&1
  have ewk && timeout 300 "$run" ewk > "$out/ewk-2.txt" 2>&1
fi

# HostBuffer bytes weighing an eighth against max_batch_bytes against GPUBATCH_IN_PLACE_LIGHT=off
# (in full, as before), interleaved (twenty-first session, call 6):
# HostBuffers and vectors at issue 12's sizes, the crowd, the lone caller; GPU tests.
if on inplace21; then
  have gpubatch_integration_tests && timeout 300 "$run" gpubatch_integration_tests --gtest_filter='HostBufferExecutor.*:CopyEngineExecutor.*' > "$out/tests-inplace.txt" 2>&1
  for r in 1 2 3; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 50000 : 4000 ))
      big="--device 0 --threads 16 --inflight 8 --requests $n --op relu --size $s"
      load ip-$s-host-$r gpubatch-load $big --host-buffers
      load ip-$s-host-off-$r env GPUBATCH_IN_PLACE_LIGHT=off -- gpubatch-load $big --host-buffers
    done
    crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
    load ip-crowd-$r gpubatch-load $crowd
    load ip-crowd-off-$r env GPUBATCH_IN_PLACE_LIGHT=off -- gpubatch-load $crowd
  done
  big="--device 0 --threads 16 --inflight 8 --requests 50000 --op relu --size 65536"
  load ip-65536-vec gpubatch-load $big
  load ip-65536-vec-off env GPUBATCH_IN_PLACE_LIGHT=off -- gpubatch-load $big
  have gpubatch-copy-rate && timeout 120 "$run" gpubatch-copy-rate --bytes 4194304,67108864 > "$out/copy-rate.jsonl" 2>&1
  have duplex && timeout 300 "$run" duplex > "$out/duplex.txt" 2>&1
fi

# The strided form of the element-wise kernels (GPUBATCH_EW_STRIDED=on: four blocks a
# workgroup, every load before any store) against the one-wide default (twenty-first session,
# call 5): HostBuffers at issue 12's sizes with 8 and 64 MiB batches, vectors, the crowd, the lone
# caller; three rounds interleaved; the forms' tests on the GPU.
if on strided21; then
  have gpubatch_tests && timeout 300 "$run" gpubatch_tests --gtest_filter='*EwVector*' > "$out/tests-ew.txt" 2>&1
  for r in 1 2 3; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 50000 : 4000 ))
      big="--device 0 --threads 16 --inflight 8 --requests $n --op relu --size $s"
      load st-$s-host-$r gpubatch-load $big --host-buffers
      load st-$s-host-s4-$r env GPUBATCH_EW_STRIDED=on -- gpubatch-load $big --host-buffers
      load st-$s-host64m-$r env GPUBATCH_MAX_BATCH_BYTES=67108864 -- gpubatch-load $big --host-buffers
      load st-$s-host64m-s4-$r env GPUBATCH_MAX_BATCH_BYTES=67108864 GPUBATCH_EW_STRIDED=on -- gpubatch-load $big --host-buffers
      load st-$s-vec-$r gpubatch-load $big
      load st-$s-vec-s4-$r env GPUBATCH_EW_STRIDED=on -- gpubatch-load $big
    done
    crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
    load st-crowd-$r gpubatch-load $crowd
    load st-crowd-s4-$r env GPUBATCH_EW_STRIDED=on -- gpubatch-load $crowd
    lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
    load st-lone-$r gpubatch-load $lone
    load st-lone-s4-$r env GPUBATCH_EW_STRIDED=on -- gpubatch-load $lone
  done
fi

# The element-wise kernels' wide form (GPUBATCH_EW_VECTOR=on: sixteen elements an invocation,
# one segment lookup for them) against the one-wide default on GPUs, now that a HostBuffer
# batch's tables sit in device memory (twenty-first session, call 4): HostBuffers at issue 12's
# sizes, 8 MiB and 64 MiB batches, vectors, the crowd, the lone caller; two rounds interleaved.
if on wide21; then
  for r in 1 2; do
    for s in 65536 1048576; do
      n=$(( s == 65536 ? 50000 : 4000 ))
      big="--device 0 --threads 16 --inflight 8 --requests $n --op relu --size $s"
      load w-$s-host-$r gpubatch-load $big --host-buffers
      load w-$s-host-wide-$r env GPUBATCH_EW_VECTOR=on -- gpubatch-load $big --host-buffers
      load w-$s-host64m-$r env GPUBATCH_MAX_BATCH_BYTES=67108864 -- gpubatch-load $big --host-buffers
      load w-$s-host64m-wide-$r env GPUBATCH_MAX_BATCH_BYTES=67108864 GPUBATCH_EW_VECTOR=on -- gpubatch-load $big --host-buffers
      load w-$s-vec-$r gpubatch-load $big
      load w-$s-vec-wide-$r env GPUBATCH_EW_VECTOR=on -- gpubatch-load $big
    done
    crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
    load w-crowd-$r gpubatch-load $crowd
    load w-crowd-wide-$r env GPUBATCH_EW_VECTOR=on -- gpubatch-load $crowd
    lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
    load w-lone-$r gpubatch-load $lone
    load w-lone-wide-$r env GPUBATCH_EW_VECTOR=on -- gpubatch-load $lone
  done
fi

# Bytes per submission against the GPU's cost of one (the probe's fresh regions, four ways of
# submitting eight dispatches), and the GPU's time of HostBuffer batches past the 8 MiB cap
# (twenty-first session, call 3).
if on duplex21c; then
  have duplex && timeout 300 "$run" duplex > "$out/duplex.txt" 2>&1
  s=1048576
  big="--device 0 --threads 16 --inflight 8 --requests 1000 --op relu --size $s --host-buffers"
  load dc-$s-64m-trace env GPUBATCH_MAX_BATCH_BYTES=67108864 GPUBATCH_GPU_TIMESTAMPS=on GPUBATCH_TRACE=$out/trace-$s-64m.json -- gpubatch-load $big
  load dc-$s-256m-trace env GPUBATCH_MAX_BATCH_BYTES=268435456 GPUBATCH_GPU_TIMESTAMPS=on GPUBATCH_TRACE=$out/trace-$s-256m.json -- gpubatch-load $big
  big="--device 0 --threads 16 --inflight 32 --requests 4000 --op relu --size $s --host-buffers"
  load dc-$s-256m-d32 env GPUBATCH_MAX_BATCH_BYTES=268435456 -- gpubatch-load $big
  load dc-$s-d32 gpubatch-load $big
fi

# The bus both ways by dispatch size (the probe at 64, 4 and 1 MiB a copy) and HostBuffer batches
# past the 8 MiB cap (twenty-first session, call 2): do larger batches of HostBuffer requests
# come nearer the probe's kernel? A trace with GPU timestamps for where the time goes.
if on duplex21b; then
  for m in 64 4 1; do
    have duplex && DUPLEX_MIB=$m timeout 300 "$run" duplex > "$out/duplex-$m.txt" 2>&1
  done
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 50000 : 4000 ))
    big="--device 0 --threads 16 --inflight 8 --requests $n --op relu --size $s --host-buffers"
    load db-$s gpubatch-load $big
    load db-$s-32m env GPUBATCH_MAX_BATCH_BYTES=33554432 -- gpubatch-load $big
    load db-$s-64m env GPUBATCH_MAX_BATCH_BYTES=67108864 -- gpubatch-load $big
    load db-$s-32m-if8 env GPUBATCH_MAX_BATCH_BYTES=33554432 GPUBATCH_MAX_INFLIGHT_BATCHES=8 -- gpubatch-load $big
    load db-$s-if8 env GPUBATCH_MAX_INFLIGHT_BATCHES=8 -- gpubatch-load $big
    load db-$s-trace env GPUBATCH_GPU_TIMESTAMPS=on GPUBATCH_TRACE=$out/trace-$s.json -- gpubatch-load ${big/--requests $n/--requests $((n / 4))}
  done
fi

# The bus both ways at once (twenty-first session, call 1): bench/probes/duplex (copies on every
# queue arrangement, kernels reading and writing host memory) beside gpubatch-copy-rate and the
# library's HostBuffer and vector loads at issue 12's sizes; the lone caller and the crowd as the
# session's starting point.
if on duplex21; then
  have duplex && timeout 300 "$run" duplex > "$out/duplex.txt" 2>&1
  have gpubatch-copy-rate && timeout 120 "$run" gpubatch-copy-rate --bytes 4194304,67108864 > "$out/copy-rate.jsonl" 2>&1
  have latency && timeout 120 "$run" latency > "$out/probe.txt" 2>&1
  for s in 65536 1048576; do
    n=$(( s == 65536 ? 50000 : 4000 ))
    big="--device 0 --threads 16 --inflight 8 --requests $n --op relu --size $s"
    load dx-$s-host gpubatch-load $big --host-buffers
    load dx-$s-host-unbatched gpubatch-load --unbatched --device 0 --threads 16 --requests $n --op relu --size $s --host-buffers
    load dx-$s-vec gpubatch-load $big
  done
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  for r in 1 2; do
    load dx-lone-$r gpubatch-load $lone
    load dx-unb-$r gpubatch-load $lone --unbatched
    load dx-crowd-$r gpubatch-load $crowd
  done
fi

# The session's last build against 0118f06, the shared probe first, then the GPU test binaries
# (twentieth session, call 12).
if on final20c; then
  have latency && timeout 120 "$run" latency > "$out/probe.txt" 2>&1
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  for r in 1 2; do
    load h-lone-$r gpubatch-load $lone
    load h-lone-prev-$r gpubatch-load-prev $lone
    load h-unb-$r gpubatch-load $lone --unbatched
    load h-unb-prev-$r gpubatch-load-prev $lone --unbatched
    load h-crowd-$r gpubatch-load $crowd
    load h-crowd-prev-$r gpubatch-load-prev $crowd
  done
fi

# Batches from the cached line on in device memory the host maps (GPUBATCH_NEAR_BIG, on in this
# build) against host-cached memory (off, the previous behaviour), interleaved (twentieth session,
# call 11): the crowd, 16 callers of 16,384, 65,536 and 262,144 floats, the open loop at 1 M/s.
if on nearbig20; then
  for r in 1 2 3; do
    crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
    load nb-crowd-$r gpubatch-load $crowd
    load nb-crowd-off-$r env GPUBATCH_NEAR_BIG=off -- gpubatch-load $crowd
    mid="--device 0 --threads 16 --inflight 8 --requests 200000 --op relu --size 16384"
    load nb-mid-$r gpubatch-load $mid
    load nb-mid-off-$r env GPUBATCH_NEAR_BIG=off -- gpubatch-load $mid
    big="--device 0 --threads 16 --inflight 8 --requests 50000 --op relu --size 65536"
    load nb-big-$r gpubatch-load $big
    load nb-big-off-$r env GPUBATCH_NEAR_BIG=off -- gpubatch-load $big
    mb="--device 0 --threads 16 --inflight 4 --requests 12000 --op relu --size 262144"
    load nb-1m-$r gpubatch-load $mb
    load nb-1m-off-$r env GPUBATCH_NEAR_BIG=off -- gpubatch-load $mb
  done
  for r in 1 2; do
    open="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000"
    load nb-open-$r gpubatch-load $open
    load nb-open-off-$r env GPUBATCH_NEAR_BIG=off -- gpubatch-load $open
  done
fi

# Every direct-path batch in device memory the host maps (an experiment: GPUBATCH_NEAR_UPLOAD_BYTES
# huge, GPUBATCH_CACHED_UPLOAD_BYTES=never) against the defaults, interleaved (twentieth session,
# call 10): the crowd, 16 callers of 16,384 and 65,536 floats.
if on nearall20; then
  all="GPUBATCH_NEAR_UPLOAD_BYTES=4000000000 GPUBATCH_CACHED_UPLOAD_BYTES=never"
  for r in 1 2 3; do
    crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
    load na-crowd-$r gpubatch-load $crowd
    load na-crowd-all-$r env $all -- gpubatch-load $crowd
    mid="--device 0 --threads 16 --inflight 8 --requests 200000 --op relu --size 16384"
    load na-mid-$r gpubatch-load $mid
    load na-mid-all-$r env $all -- gpubatch-load $mid
    big="--device 0 --threads 16 --inflight 8 --requests 50000 --op relu --size 65536"
    load na-big-$r gpubatch-load $big
    load na-big-all-$r env $all -- gpubatch-load $big
  done
fi

# A lone batch's own near line (every one below the cached line, default) against
# GPUBATCH_NEAR_LONE_BYTES=off (the 64 KiB line for all), interleaved (twentieth session, call 9):
# lone callers of 1, 64 and 240 KiB, and the open loop at 1 M/s (batches of many: unchanged).
if on nearlone20; then
  for r in 1 2 3; do
    for n in 256 16384 60000; do
      lone="--device 0 --threads 1 --inflight 1 --requests 10000 --op relu --size $n"
      load nn-lone-$n-$r gpubatch-load $lone
      load nn-lone-$n-off-$r env GPUBATCH_NEAR_LONE_BYTES=off -- gpubatch-load $lone
    done
    open="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000"
    load nn-open-$r gpubatch-load $open
    load nn-open-off-$r env GPUBATCH_NEAR_LONE_BYTES=off -- gpubatch-load $open
  done
  load nn-unb-60000 gpubatch-load --device 0 --threads 1 --inflight 1 --requests 10000 --op relu --size 60000 --unbatched
  load nn-unb-60000-off env GPUBATCH_NEAR_LONE_BYTES=off -- gpubatch-load --device 0 --threads 1 --inflight 1 --requests 10000 --op relu --size 60000 --unbatched
fi

# The open loop's p99 at 1 M/s with the near line at 256 KiB against 64 KiB, more rounds
# (twentieth session, call 8), interleaved, alternating which goes first.
if on nearline20c; then
  open="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000"
  mix="--device 0 --threads 16 --size 256 --host-probe --rate 1000000 --requests 3000000"
  for r in 1 2 3 4; do
    if [ $((r % 2)) = 1 ]; then
      load nc-open-$r gpubatch-load $open
      load nc-open-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-load $open
      load nc-mix-$r gpubatch-mix $mix
      load nc-mix-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-mix $mix
    else
      load nc-open-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-load $open
      load nc-open-$r gpubatch-load $open
      load nc-mix-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-mix $mix
      load nc-mix-$r gpubatch-mix $mix
    fi
  done
fi

# The near line at 256 KiB against the default 64 KiB, more rounds (twentieth session, call 7):
# lone callers of 64 and 240 KiB and the open loop at 1 M/s, interleaved, with the quarters' p99.
if on nearline20b; then
  for r in 1 2 3; do
    for n in 16384 60000; do
      lone="--device 0 --threads 1 --inflight 1 --requests 10000 --op relu --size $n"
      load nb-lone-$n-$r gpubatch-load $lone
      load nb-lone-$n-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-load $lone
    done
    open="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000"
    load nb-open-$r gpubatch-load $open
    load nb-open-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-load $open
    mix="--device 0 --threads 16 --size 256 --host-probe --rate 1000000 --requests 3000000"
    load nb-mix-$r gpubatch-mix $mix
    load nb-mix-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-mix $mix
  done
fi

# Where the near line should fall (twentieth session, call 6): the default 64 KiB against
# 256 KiB (GPUBATCH_NEAR_UPLOAD_BYTES=262143, just under the cached line) and off, interleaved:
# lone callers of 32-240 KiB, 16 callers of 64 KiB requests, the open loop at 1 and 2 M/s.
if on nearline20; then
  for r in 1 2; do
    for n in 8192 16384 32768 60000; do
      lone="--device 0 --threads 1 --inflight 1 --requests 10000 --op relu --size $n"
      load nl-lone-$n-$r gpubatch-load $lone
      load nl-lone-$n-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-load $lone
      load nl-lone-$n-off-$r env GPUBATCH_NEAR_UPLOAD_BYTES=off -- gpubatch-load $lone
    done
    mid="--device 0 --threads 16 --inflight 8 --requests 200000 --op relu --size 16384"
    load nl-mid-$r gpubatch-load $mid
    load nl-mid-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-load $mid
    load nl-mid-off-$r env GPUBATCH_NEAR_UPLOAD_BYTES=off -- gpubatch-load $mid
    for R in 1000000 2000000; do
      open="--device 0 --threads 16 --op relu --size 256 --rate $R --requests $((2 * R))"
      load nl-open-$R-$r gpubatch-load $open
      load nl-open-$R-256k-$r env GPUBATCH_NEAR_UPLOAD_BYTES=262143 -- gpubatch-load $open
      load nl-open-$R-off-$r env GPUBATCH_NEAR_UPLOAD_BYTES=off -- gpubatch-load $open
    done
  done
fi

# The session's final build against 0118f06 (gpubatch-load-prev), interleaved, with the shared
# probe first: the lone caller in every mode, the crowd in adaptive and resident mode, idle CPU
# (twentieth session, call 5).
if on final20b; then
  have latency && timeout 120 "$run" latency > "$out/probe.txt" 2>&1
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for r in 1 2 3 4; do
    load g-lone-$r gpubatch-load $lone
    load g-lone-prev-$r gpubatch-load-prev $lone
    load g-unb-$r gpubatch-load $lone --unbatched
    load g-unb-prev-$r gpubatch-load-prev $lone --unbatched
  done
  load g-sync gpubatch-load $lone --sync
  load g-sync-prev gpubatch-load-prev $lone --sync
  load g-rt gpubatch-load $lone --preset realtime --sync
  load g-rt-prev gpubatch-load-prev $lone --preset realtime --sync
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  for r in 1 2; do
    load g-crowd-$r gpubatch-load $crowd
    load g-crowd-prev-$r gpubatch-load-prev $crowd
  done
  load g-crowd-rt gpubatch-load $crowd --preset realtime
  load g-crowd-rt-prev gpubatch-load-prev $crowd --preset realtime
fi

# No express hold beside a crowd (this build) against the hold kept there
# (GPUBATCH_EXPRESS_CROWD_HOLD=on, call 3's build) and against no split at all
# (GPUBATCH_EXPRESS_SPLIT=off, the session's start), interleaved; one traced run (call 4).
if on crowdhold20; then
  mix="--device 0 --threads 16 --size 256 --host-probe --high 0.1"
  for r in 1 2 3; do
    load ch-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load ch-3m-hold-$r env GPUBATCH_EXPRESS_CROWD_HOLD=on -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    load ch-3m-off-$r env GPUBATCH_EXPRESS_SPLIT=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
  done
  for r in 1 2; do
    for R in 1000000 500000; do
      load ch-$R-$r gpubatch-mix $mix --rate $R --requests $((2 * R))
      load ch-$R-off-$r env GPUBATCH_EXPRESS_SPLIT=off -- gpubatch-mix $mix --rate $R --requests $((2 * R))
    done
    load ch-idle-$r gpubatch-mix $mix --rate 10000 --requests 30000
  done
  load ch-3m-trace env GPUBATCH_TRACE=$out/trace.json -- gpubatch-mix $mix --rate 3000000 --requests 6000000
  if [ -f "$out/trace.json" ]; then
    python3 bench/trace_batches.py "$out/trace.json" --slowest 2 > "$out/batches.txt" 2>&1
    rm -f "$out/trace.json"
  fi
fi

# Where a high-priority request's time goes at 3 M/s offered (twentieth session, call 3): traced
# with the express split and without, batches that carried levels above 0 apart.
if on ptrace20; then
  for w in on off; do
    sw=""; [ $w = off ] && sw=GPUBATCH_EXPRESS_SPLIT=off
    load pt-3m-$w env GPUBATCH_TRACE=$out/trace-$w.json $sw -- gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 3000000 --requests 6000000 --host-probe
    if [ -f "$out/trace-$w.json" ]; then
      python3 bench/trace_batches.py "$out/trace-$w.json" --slowest 2 > "$out/batches-$w.txt" 2>&1
      rm -f "$out/trace-$w.json"
    fi
  done
fi

# This session's build against 0118f06 (gpubatch-load-prev, gpubatch-mix-prev), interleaved:
# the lone caller (future, --sync, --unbatched), the crowd, the priority mix at 3 M/s and idle
# (twentieth session, call 3).
if on final20; then
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for r in 1 2 3; do
    load f-lone-$r gpubatch-load $lone
    load f-lone-prev-$r gpubatch-load-prev $lone
    load f-sync-$r gpubatch-load $lone --sync
    load f-sync-prev-$r gpubatch-load-prev $lone --sync
    load f-unb-$r gpubatch-load $lone --unbatched
    load f-unb-prev-$r gpubatch-load-prev $lone --unbatched
  done
  mix="--device 0 --threads 16 --size 256 --host-probe --high 0.1"
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  for r in 1 2; do
    load f-crowd-$r gpubatch-load $crowd
    load f-crowd-prev-$r gpubatch-load-prev $crowd
    load f-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load f-3m-prev-$r gpubatch-mix-prev $mix --rate 3000000 --requests 6000000
    load f-idle-$r gpubatch-mix $mix --rate 10000 --requests 30000
    load f-idle-prev-$r gpubatch-mix-prev $mix --rate 10000 --requests 30000
  done
fi

# Small batches' input in device-local host-visible memory (near upload, default) against
# GPUBATCH_NEAR_UPLOAD_BYTES=off in the same binary, interleaved: the lone caller at 1, 16 and
# 64 KiB, Device::run, the crowd and the open loop at 1 M/s (twentieth session, call 2).
if on near20; then
  for r in 1 2 3; do
    for n in 256 4096 16384; do
      lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size $n"
      load nr-lone-$n-$r gpubatch-load $lone
      load nr-lone-$n-off-$r env GPUBATCH_NEAR_UPLOAD_BYTES=off -- gpubatch-load $lone
    done
    lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
    load nr-unb-$r gpubatch-load $lone --unbatched
    load nr-unb-off-$r env GPUBATCH_NEAR_UPLOAD_BYTES=off -- gpubatch-load $lone --unbatched
  done
  for r in 1 2; do
    crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
    load nr-crowd-$r gpubatch-load $crowd
    load nr-crowd-off-$r env GPUBATCH_NEAR_UPLOAD_BYTES=off -- gpubatch-load $crowd
    open="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 3000000"
    load nr-open-$r gpubatch-load $open
    load nr-open-off-$r env GPUBATCH_NEAR_UPLOAD_BYTES=off -- gpubatch-load $open
  done
fi

# The levels above 0 sent ahead of a regular batch beside a large crowd (express split, default)
# against GPUBATCH_EXPRESS_SPLIT=off in the same binary, interleaved: the priority mix at 3 M/s,
# 1 M/s and 500,000/s, and idle (twentieth session, call 2).
if on split20; then
  mix="--device 0 --threads 16 --size 256 --host-probe --high 0.1"
  for r in 1 2 3; do
    load sp-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load sp-3m-off-$r env GPUBATCH_EXPRESS_SPLIT=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
  done
  for r in 1 2; do
    for R in 1000000 500000; do
      load sp-$R-$r gpubatch-mix $mix --rate $R --requests $((2 * R))
      load sp-$R-off-$r env GPUBATCH_EXPRESS_SPLIT=off -- gpubatch-mix $mix --rate $R --requests $((2 * R))
    done
    load sp-idle-$r gpubatch-mix $mix --rate 10000 --requests 30000
  done
fi

# A lone request's input in BAR memory against system memory, with and without the kernel's done
# word (bench/probes/bar-input, twentieth session, call 1), two rounds beside the shared probe.
if on bar20; then
  for r in 1 2; do
    have bar && timeout 120 "$run" bar >> "$out/bar-input.txt" 2>&1
  done
  have latency && timeout 120 "$run" latency > "$out/probe.txt" 2>&1
fi

# Deadlines with large requests, gpubatch-mix's bit-for-bit check against the float comparison
# (gpubatch-mix-prev, 51dabb4), interleaved, two rounds at each rate (twelfth session, call 12).
# The watch holding a deadline before the push (this build), after it (same binary with
# GPUBATCH_WATCH_BEFORE_PUSH=off) and the previous build (gpubatch-mix-prev, 9ce3e3a), interleaved,
# three rounds at 100k/s and two at 300k/s (2026-11-29, call 1).
# The priority mix at saturation (call 10): the high level's wait behind the regular batches
# in flight on the one compute queue, with fewer of them in flight, and the same depths with one
# level for the throughput they cost.
if on sat13; then
  m3="--device 0 --threads 16 --size 256 --host-probe --rate 3000000 --requests 6000000"
  for r in 1 2; do
    load sa-$r gpubatch-mix $m3 --high 0.1
    load sa-d4-$r env GPUBATCH_MAX_INFLIGHT_BATCHES=4 -- gpubatch-mix $m3 --high 0.1
    load sa-d1-$r env GPUBATCH_MAX_INFLIGHT_BATCHES=1 -- gpubatch-mix $m3 --high 0.1
  done
  load sa-one gpubatch-mix $m3
  load sa-one-d1 env GPUBATCH_MAX_INFLIGHT_BATCHES=1 -- gpubatch-mix $m3
fi

# The express hold's final form (also beside a crowd) against GPUBATCH_EXPRESS_HOLD_US=0 (the
# previous behaviour), interleaved (call 9).
if on hold13c; then
  mix="--device 0 --threads 16 --size 256 --host-probe --high 0.1"
  for r in 1 2 3; do
    for R in 500000 1000000; do
      load hc-$R-$r gpubatch-mix $mix --rate $R --requests $((2 * R))
      load hc-$R-h0-$r env GPUBATCH_EXPRESS_HOLD_US=0 -- gpubatch-mix $mix --rate $R --requests $((2 * R))
    done
  done
  for r in 1 2; do
    load hc-3000000-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load hc-3000000-h0-$r env GPUBATCH_EXPRESS_HOLD_US=0 -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    load hc-idle-$r gpubatch-mix $mix --rate 10000 --requests 30000
    load hc-idle-h0-$r env GPUBATCH_EXPRESS_HOLD_US=0 -- gpubatch-mix $mix --rate 10000 --requests 30000
  done
  load hc-1000000-one gpubatch-mix --device 0 --threads 16 --size 256 --host-probe --rate 1000000 --requests 2000000
fi

# What else holds level 0 back at 1,000,000/s with two levels (call 8): the hold also beside a
# crowd (an experiment), the express slot off, no upper look, no packer, and one level.
if on hold13b; then
  mix="--device 0 --threads 16 --size 256 --host-probe --rate 1000000 --requests 2000000"
  for r in 1 2; do
    load hb-$r gpubatch-mix $mix --high 0.1
    load hb-crowd-$r env GPUBATCH_EXPRESS_HOLD_CROWD=1 -- gpubatch-mix $mix --high 0.1
    load hb-noexpr-$r env GPUBATCH_EXPRESS=off -- gpubatch-mix $mix --high 0.1
    load hb-nolook-$r env GPUBATCH_UPPER_LOOK=off -- gpubatch-mix $mix --high 0.1
    load hb-nopack-$r env GPUBATCH_PACKER=off -- gpubatch-mix $mix --high 0.1
    load hb-one-$r gpubatch-mix $mix
  done
  m3="--device 0 --threads 16 --size 256 --host-probe --high 0.1 --rate 3000000 --requests 6000000"
  load hb-crowd-3m env GPUBATCH_EXPRESS_HOLD_CROWD=1 -- gpubatch-mix $m3
  load hb-3m gpubatch-mix $m3
fi

# The express hold (GPUBATCH_EXPRESS_HOLD_US, 100 us by default) against 0 (the previous
# behaviour: an express batch at once whenever every slot is taken), interleaved (call 7).
if on hold13; then
  mix="--device 0 --threads 16 --size 256 --host-probe --high 0.1"
  for r in 1 2 3; do
    for R in 500000 1000000; do
      load ho-$R-$r gpubatch-mix $mix --rate $R --requests $((2 * R))
      load ho-$R-h0-$r env GPUBATCH_EXPRESS_HOLD_US=0 -- gpubatch-mix $mix --rate $R --requests $((2 * R))
    done
  done
  for r in 1 2; do
    for R in 2000000 3000000; do
      load ho-$R-$r gpubatch-mix $mix --rate $R --requests $((2 * R))
      load ho-$R-h0-$r env GPUBATCH_EXPRESS_HOLD_US=0 -- gpubatch-mix $mix --rate $R --requests $((2 * R))
    done
    load ho-idle-$r gpubatch-mix $mix --rate 10000 --requests 30000
    load ho-idle-h0-$r env GPUBATCH_EXPRESS_HOLD_US=0 -- gpubatch-mix $mix --rate 10000 --requests 30000
    for h in 50 200; do
      load ho-1000000-h$h-$r env GPUBATCH_EXPRESS_HOLD_US=$h -- gpubatch-mix $mix --rate 1000000 --requests 2000000
    done
  done
fi

# Which part of the express path holds level 0 back at 500,000-1,000,000/s (call 6): the
# default against the express slot off, express batches awaited behind the regular ones, and
# one express slot.
if on expr13; then
  mix="--device 0 --threads 16 --size 256 --host-probe --high 0.1"
  for R in 500000 1000000; do
    load ex-$R gpubatch-mix $mix --rate $R --requests $((2 * R))
    load ex-$R-off env GPUBATCH_EXPRESS=off -- gpubatch-mix $mix --rate $R --requests $((2 * R))
    load ex-$R-behind env GPUBATCH_EXPRESS_BESIDE=off -- gpubatch-mix $mix --rate $R --requests $((2 * R))
    load ex-$R-depth1 env GPUBATCH_EXPRESS_DEPTH=1 -- gpubatch-mix $mix --rate $R --requests $((2 * R))
  done
  load ex-idle gpubatch-mix $mix --rate 10000 --requests 30000
  load ex-idle-off env GPUBATCH_EXPRESS=off -- gpubatch-mix $mix --rate 10000 --requests 30000
fi

# Where the low level's p99 at 500,000/s of the priority mix came from (call 5): each quarter of
# the run apart (latency_by_quarter_us), two levels against one, 2 s against 6 s.
if on prioq13; then
  mix="--device 0 --threads 16 --size 256 --host-probe"
  for r in 1 2; do
    load pq-500k-$r gpubatch-mix $mix --high 0.1 --rate 500000 --requests 1000000
    load pq-500k-one-$r gpubatch-mix $mix --rate 500000 --requests 1000000
  done
  load pq-500k-long gpubatch-mix $mix --high 0.1 --rate 500000 --requests 3000000
  load pq-500k-one-long gpubatch-mix $mix --rate 500000 --requests 3000000
  for R in 1000000 2000000; do
    load pq-$R gpubatch-mix $mix --high 0.1 --rate $R --requests $((2 * R))
    load pq-$R-one gpubatch-mix $mix --rate $R --requests $((2 * R))
  done
fi

# 2026-11-29's final code (call 4): issue 14's sweeps with their plots (bench/mix_sweep.py: a
# priority mix, 10 % at level 1, and a deadline mix, 10 % of 1,000,000 floats, every request on a
# 2 ms deadline), then the lone caller in every mode, the crowd and the deadline load with large
# requests beside the previous build (gpubatch-load-prev / gpubatch-mix-prev, 9ce3e3a), then the
# GPU test binaries.
if on final13; then
  for sc in priority deadline; do
    rates=10000,500000,1000000,2000000,3000000; [ $sc = deadline ] && rates=1000,5000,10000,20000,40000
    timeout 200 python3 bench/mix_sweep.py $sc --bin "$run gpubatch-mix" --extra "--device 0 --host-probe" \
      --rates $rates --seconds 2 --out "$out/sweeps.jsonl" >> "$out/log.txt" 2>&1
    echo "   sweep $sc: exit $?" | tee -a "$out/log.txt" >&2
  done
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --host-probe --rate 100000 --requests 300000"
  for r in 1 2; do
    load f13-lone-$r gpubatch-load $lone --idle-ms 1000
    load f13-lone-prev-$r gpubatch-load-prev $lone
    load f13-crowd-$r gpubatch-load $crowd
    load f13-crowd-prev-$r gpubatch-load-prev $crowd
    load f13-dl-$r gpubatch-mix $dl
    load f13-dl-prev-$r gpubatch-mix-prev $dl
  done
  load f13-lone-unbatched gpubatch-load --unbatched $lone
  load f13-lone-sync gpubatch-load --sync $lone
  load f13-lone-realtime gpubatch-load --preset realtime $lone --idle-ms 1000
  load f13-crowd-realtime gpubatch-load --preset realtime $crowd
  GPUBATCH_VALIDATION=0 timeout 240 "$run" gpubatch_integration_tests > "$out/tests-integration.txt" 2>&1
  echo "   integration tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-integration.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
  GPUBATCH_VALIDATION=0 timeout 240 "$run" gpubatch_tests > "$out/tests-core.txt" 2>&1
  echo "   core tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-core.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
fi

# Where the process-wide stalls of the deadline load come from (call 3): the default, glibc's
# allocator kept off mmap/munmap for the 4 MB vectors (its tunables), and no large requests at all.
if on dlstall13; then
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --host-probe --rate 100000 --requests 300000"
  tun=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728
  for r in 1 2 3; do
    load ds-$r gpubatch-mix $dl --large 0.01
    load ds-heap-$r env GLIBC_TUNABLES=$tun -- gpubatch-mix $dl --large 0.01
    load ds-nolarge-$r gpubatch-mix $dl
  done
fi

# dlwatch13b: the same with the generator copying a request's input before its clock read (call 2;
# gpubatch-mix-prev built from 9ce3e3a's library with this generator).
if on dlwatch13 || on dlwatch13b; then
  for R in 100000 300000; do
    dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --host-probe --rate $R --requests $((3 * R))"
    rounds=3; [ $R = 300000 ] && rounds=2
    for r in $(seq 1 $rounds); do
      load dw-$R-$r gpubatch-mix $dl
      load dw-$R-after-$r env GPUBATCH_WATCH_BEFORE_PUSH=off -- gpubatch-mix $dl
      load dw-$R-prev-$r gpubatch-mix-prev $dl
    done
  done
fi

if on dllarge12; then
  for R in 100000 300000; do
    dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --host-probe --rate $R --requests $((3 * R))"
    for r in 1 2; do
      load dg-$R-$r gpubatch-mix $dl
      load dg-$R-prev-$r gpubatch-mix-prev $dl
    done
  done
fi

# The same against gpubatch-mix-prev (51dabb4: the float comparison; for one level the library
# differs only in the room a taken level gets back), interleaved, three rounds (call 11).
if on m64ab12; then
  m64="--device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe"
  for r in 1 2 3; do
    load ma-m64-$r gpubatch-mix $m64
    load ma-m64-prev-$r gpubatch-mix-prev $m64
  done
fi

# The 64-thread mix of sizes with this code and gpubatch-mix's bit-for-bit check (twelfth
# session, call 10): four rounds; the priority mix idle and at 3 M/s twice.
if on m64x12; then
  for r in 1 2 3 4; do
    load mx-m64-$r gpubatch-mix --device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe
  done
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  load mx-idle gpubatch-mix $mix --rate 10000 --requests 30000
  for r in 1 2; do load mx-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000; done
fi

# The crowd and the lone caller, adaptive and resident (twelfth session, call 9): this code,
# interleaved, three rounds of the crowd and two of each lone caller; the host probe on.
if on crowd12; then
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000 --host-probe"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for r in 1 2 3; do
    load cw-crowd-$r gpubatch-load $crowd
    load cw-crowd-realtime-$r gpubatch-load --preset realtime $crowd
  done
  for r in 1 2; do
    load cw-lone-$r gpubatch-load $lone
    load cw-lone-realtime-$r gpubatch-load --preset realtime --sync $lone
    load cw-lone-unbatched-$r gpubatch-load --unbatched $lone
  done
fi

# The load's check bit for bit (twelfth session, call 8): the crowd with this gpubatch-load
# against the same library with the float comparison (gpubatch-load-oldcheck), and resident
# mode's crowd (--preset realtime), interleaved, three rounds.
if on tool12; then
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  for r in 1 2 3; do
    load tl-crowd-$r gpubatch-load $crowd
    load tl-crowd-oldcheck-$r gpubatch-load-oldcheck $crowd
    load tl-crowd-realtime-$r gpubatch-load --preset realtime $crowd
  done
  load tl-lone gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  load tl-lone-realtime gpubatch-load --preset realtime --sync --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
fi

# Why the whole-level take cost the high level's p50 (twelfth session, call 7): the priority mix
# at 3 M/s traced, this build against 51dabb4 (gpubatch-mix-prev), interleaved.
if on take12; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe --rate 3000000 --requests 6000000"
  for r in 1 2; do
    for b in gpubatch-mix gpubatch-mix-prev; do
      load tk-$b-$r env GPUBATCH_TRACE=$out/trace.json -- $b $mix
      [ -f "$out/trace.json" ] && python3 bench/trace_batches.py "$out/trace.json" --slowest 2 > "$out/batches-$b-$r.txt" 2>&1
      rm -f "$out/trace.json"
    done
  done
fi

# Again with the level's vector kept roomy (twelfth session, call 6): the priority mix against
# 51dabb4 (gpubatch-mix-prev) and GPUBATCH_UPPER_LOOK=off; the open loop at 1.5 M/s and the crowd
# against 907a332 (gpubatch-load-prev); the 64-thread mix of sizes.
if on final12b; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  for r in 1 2 3; do
    load fb-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load fb-3m-prev-$r gpubatch-mix-prev $mix --rate 3000000 --requests 6000000
    load fb-3m-nolook-$r env GPUBATCH_UPPER_LOOK=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    load fb-open15-$r gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 1500000 --requests 4500000
    load fb-open15-prev-$r gpubatch-load-prev --device 0 --threads 16 --op relu --size 256 --rate 1500000 --requests 4500000
  done
  for r in 1 2; do
    load fb-2m-$r gpubatch-mix $mix --rate 2000000 --requests 4000000
    load fb-2m-prev-$r gpubatch-mix-prev $mix --rate 2000000 --requests 4000000
    load fb-m64-$r gpubatch-mix --device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
    load fb-m64-prev-$r gpubatch-mix-prev --device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
    load fb-crowd-$r gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
    load fb-crowd-prev-$r gpubatch-load-prev --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
  done
fi

# The twelfth session's final code: the priority mix against the build before the whole-level
# take (gpubatch-mix-prev, 51dabb4) and against GPUBATCH_UPPER_LOOK=off; the single-level loads
# against the session's starting point (gpubatch-load-prev, 907a332); the GPU test binaries.
if on final12; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  for r in 1 2 3; do
    load fin-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load fin-3m-prev-$r gpubatch-mix-prev $mix --rate 3000000 --requests 6000000
    load fin-3m-nolook-$r env GPUBATCH_UPPER_LOOK=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
  done
  for r in 1 2; do
    load fin-2m-$r gpubatch-mix $mix --rate 2000000 --requests 4000000
    load fin-2m-prev-$r gpubatch-mix-prev $mix --rate 2000000 --requests 4000000
  done
  load fin-idle gpubatch-mix $mix --rate 10000 --requests 30000
  load fin-idle-prev gpubatch-mix-prev $mix --rate 10000 --requests 30000
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --host-probe --rate 1500000 --requests 3000000"
  load fin-dl15m gpubatch-mix $dl
  load fin-dl15m-prev gpubatch-mix-prev $dl
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  lone="--device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  for r in 1 2; do
    load fin-crowd-$r gpubatch-load $crowd
    load fin-crowd-prev-$r gpubatch-load-prev $crowd
    load fin-lone-$r gpubatch-load $lone
    load fin-lone-prev-$r gpubatch-load-prev $lone
    for R in 1000000 1500000; do
      load fin-open$R-$r gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate $R --requests $((3 * R))
      load fin-open$R-prev-$r gpubatch-load-prev --device 0 --threads 16 --op relu --size 256 --rate $R --requests $((3 * R))
    done
  done
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_integration_tests > "$out/tests-integration.txt" 2>&1
  echo "   integration tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-integration.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_tests > "$out/tests-core.txt" 2>&1
  echo "   core tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-core.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
fi

# A long pull of level 0 looks up (twelfth session): the priority mix at and below saturation,
# this build against GPUBATCH_UPPER_LOOK=off, interleaved; one traced run each at 3 M/s.
if on upper12; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  for r in 1 2 3; do
    for u in on off; do
      load up-3m-$u-$r env GPUBATCH_UPPER_LOOK=$u -- gpubatch-mix $mix --rate 3000000 --requests 6000000
      load up-2m-$u-$r env GPUBATCH_UPPER_LOOK=$u -- gpubatch-mix $mix --rate 2000000 --requests 4000000
    done
  done
  for u in on off; do
    load up-idle-$u env GPUBATCH_UPPER_LOOK=$u -- gpubatch-mix $mix --rate 10000 --requests 30000
    load up-trace-$u env GPUBATCH_UPPER_LOOK=$u GPUBATCH_TRACE=$out/trace-$u.json -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    [ -f "$out/trace-$u.json" ] && python3 bench/trace_batches.py "$out/trace-$u.json" --slowest 3 > "$out/batches-$u.txt" 2>&1
    rm -f "$out/trace-$u.json"
  done
fi

# thread_rt_priority (twelfth session, branch rt-exp; not kept): every load where the callers take every core, the
# executor's threads under SCHED_FIFO 10 against as made, interleaved, two rounds; idle mix,
# crowd and lone caller for what it costs.
if on rt12; then
  { uname -r; cat /proc/sys/kernel/sched_rt_runtime_us; ulimit -r; nproc; } >> "$out/log.txt" 2>&1
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --host-probe"
  for r in 1 2; do
    for p in 0 10; do
      e="env GPUBATCH_THREAD_RT_PRIORITY=$p --"
      load rt-dl3m-$p-$r $e gpubatch-mix $dl --rate 3000000 --requests 6000000
      load rt-dl15m-$p-$r $e gpubatch-mix $dl --rate 1500000 --requests 3000000
      load rt-prio3m-$p-$r $e gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 3000000 --requests 6000000 --host-probe
      load rt-bf3m-$p-$r $e gpubatch-mix --device 0 --threads 16 --size 256 --block-for-us 300 --rate 3000000 --requests 6000000 --host-probe
      load rt-open15m-$p-$r $e gpubatch-load --device 0 --threads 16 --op relu --size 256 --rate 1500000 --requests 4500000
      load rt-m64-$p-$r $e gpubatch-mix --device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000
    done
  done
  for p in 0 10; do
    e="env GPUBATCH_THREAD_RT_PRIORITY=$p --"
    load rt-prioidle-$p $e gpubatch-mix --device 0 --threads 16 --size 256 --high 0.1 --rate 10000 --requests 30000 --host-probe
    for r in 1 2; do
      load rt-crowd-$p-$r $e gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
      load rt-lone-$p-$r $e gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
    done
  done
  grep -h "refused" "$out/log.txt" | sort | uniq -c | head -3 >&2
fi

# The producers' fence and the slot's first touch (twelfth session, branch exp12): the crowd and
# the executor's cost with GPUBATCH_EXP_NOFENCE (no fence on a push without flags: a measurement
# only, it can lose a wake-up) and GPUBATCH_EXP_PREFETCHW, interleaved.
if on fence12; then
  crowd="--device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256"
  for r in 1 2 3; do
    for v in base nofence pw both; do
      case $v in base) e="X=0";; nofence) e="GPUBATCH_EXP_NOFENCE=1";; pw) e="GPUBATCH_EXP_PREFETCHW=1";;
        both) e="GPUBATCH_EXP_NOFENCE=1 GPUBATCH_EXP_PREFETCHW=1";; esac
      load fc-$v-$r env $e -- gpubatch-load $crowd
      echo "$v $r $(env $e timeout 60 "$run" gpubatch-executor-cost --threads 16 --inflight 1024 --requests 4000000 --reps 1 2>&1 | tail -1)" >> "$out/cost.txt"
    done
  done
fi

# Where enqueue's time goes in the crowd (twelfth session): perf without call graphs at a higher
# rate, annotated per instruction for the producers' functions; the crowd alone before and after.
if on crowdann12 && have perf; then
  crowd="--device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256"
  load ann-crowd-1 gpubatch-load $crowd
  timeout 120 "$run" perf record -F 4999 -o "$out/crowd.data" -- "$PWD/$run" gpubatch-load $crowd > "$out/perf-run.txt" 2>&1
  timeout 120 "$run" perf report -i "$out/crowd.data" --no-children --sort comm,sym --percent-limit 0.4 > "$out/perf-sym.txt" 2>&1
  for f in enqueue queue_request push_by_policy note_pushed take_by_lane post_if_idle Pending::Pending Workload::check run_closed_loop; do
    sym=$(grep -o "[^ ]*::$f\b" "$out/perf-sym.txt" | head -1)
    [ -n "$sym" ] || continue
    timeout 120 "$run" perf annotate -i "$out/crowd.data" --stdio --no-source -s "$sym" 2>/dev/null | grep -v "^\s*0.00 " | head -400 > "$out/ann-$f.txt"
  done
  rm -f "$out/crowd.data"
  load ann-crowd-2 gpubatch-load $crowd
  have gpubatch-executor-cost && for t in 16 8; do
    timeout 120 "$run" gpubatch-executor-cost --threads $t --inflight 1024 --requests 4000000 --reps 3 > "$out/cost-$t.txt" 2>&1
  done
fi

# Where the crowd's CPU goes with this session's code (eleventh session; as crowdprof7).
if on crowdprof11 && have perf; then
  crowd="--device 0 --threads 16 --inflight 1024 --requests 6000000 --op relu --size 256"
  timeout 120 "$run" perf record -F 1999 -g -o "$out/crowd.data" -- "$PWD/$run" gpubatch-load $crowd > "$out/perf-run.txt" 2>&1
  timeout 120 "$run" perf report -i "$out/crowd.data" --no-children --sort comm -g none > "$out/perf-comm.txt" 2>&1
  timeout 120 "$run" perf report -i "$out/crowd.data" --no-children --sort sym -g none --percent-limit 0.3 > "$out/perf-sym.txt" 2>&1
  for c in gpubatch-load gpubatch-done gpubatch-strand; do
    timeout 120 "$run" perf report -i "$out/crowd.data" --comm $c --percentage relative --no-children --sort dso,sym -g caller \
      --percent-limit 1.5 > "$out/perf-$c.txt" 2>&1
  done
  rm -f "$out/crowd.data"
fi

# The packer for an executor with priority levels (eleventh session, branch packer11): the
# priority mix at saturation and idle, the packer (default there) against GPUBATCH_PACKER=off,
# interleaved, one traced run each; the crowd with one level (no packer) for no regression.
if on packab11; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  for r in 1 2 3; do
    load pk-3m-$r gpubatch-mix $mix --rate 3000000 --requests 6000000
    load pk-3m-off-$r env GPUBATCH_PACKER=off -- gpubatch-mix $mix --rate 3000000 --requests 6000000
  done
  for r in 1 2; do
    load pk-2m-$r gpubatch-mix $mix --rate 2000000 --requests 4000000
    load pk-2m-off-$r env GPUBATCH_PACKER=off -- gpubatch-mix $mix --rate 2000000 --requests 4000000
    load pk-1m-$r gpubatch-mix $mix --rate 1000000 --requests 3000000
    load pk-1m-off-$r env GPUBATCH_PACKER=off -- gpubatch-mix $mix --rate 1000000 --requests 3000000
    load pk-idle-$r gpubatch-mix $mix --rate 10000 --requests 30000
    load pk-idle-off-$r env GPUBATCH_PACKER=off -- gpubatch-mix $mix --rate 10000 --requests 30000
  done
  for w in on off; do
    load pk-trace-$w env GPUBATCH_PACKER=$w GPUBATCH_TRACE=$out/trace-$w.json -- gpubatch-mix $mix --rate 3000000 --requests 6000000
    if [ -f "$out/trace-$w.json" ]; then
      python3 bench/trace_batches.py "$out/trace-$w.json" --slowest 2 > "$out/batches-$w.txt" 2>&1
      rm -f "$out/trace-$w.json"
    fi
  done
  load pk-crowd-1 gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
  load pk-crowd-2 gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
fi

# The packer for one level too? (eleventh session): the open loop and the crowd, single level,
# GPUBATCH_PACKER=on against the default (off for one level), interleaved.
if on packone11; then
  for r in 1 2; do
    for R in 1000000 2000000 2500000 3000000; do
      o="--device 0 --threads 16 --op relu --size 256 --rate $R --requests $((2 * R))"
      load po-open$R-$r gpubatch-load $o
      load po-open$R-on-$r env GPUBATCH_PACKER=on -- gpubatch-load $o
    done
    load po-crowd-$r gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
    load po-crowd-on-$r env GPUBATCH_PACKER=on -- gpubatch-load --device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000
    load po-lone-$r gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
    load po-lone-on-$r env GPUBATCH_PACKER=on -- gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  done
fi

# The packer on for every executor (eleventh session's final default) against GPUBATCH_PACKER=off,
# interleaved; then the GPU test binaries with it.
if on packall11; then
  crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
  for r in 1 2 3; do
    load pl-crowd-$r gpubatch-load $crowd
    load pl-crowd-off-$r env GPUBATCH_PACKER=off -- gpubatch-load $crowd
  done
  for r in 1 2; do
    for R in 1000000 1500000; do
      o="--device 0 --threads 16 --op relu --size 256 --rate $R --requests $((2 * R))"
      load pl-open$R-$r gpubatch-load $o
      load pl-open$R-off-$r env GPUBATCH_PACKER=off -- gpubatch-load $o
    done
  done
  o="--device 0 --threads 16 --op relu --size 256 --rate 3000000 --requests 6000000"
  load pl-open3000000 gpubatch-load $o
  load pl-open3000000-off env GPUBATCH_PACKER=off -- gpubatch-load $o
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe --rate 3000000 --requests 6000000"
  load pl-prio3m gpubatch-mix $mix
  load pl-prio3m-off env GPUBATCH_PACKER=off -- gpubatch-mix $mix
  dl="--device 0 --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --host-probe --rate 1500000 --requests 3000000"
  load pl-dl15m gpubatch-mix $dl
  load pl-dl15m-off env GPUBATCH_PACKER=off -- gpubatch-mix $dl
  load pl-lone gpubatch-load --device 0 --threads 1 --inflight 1 --requests 20000 --op relu --size 256
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_integration_tests > "$out/tests-integration.txt" 2>&1
  echo "   integration tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-integration.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
  GPUBATCH_VALIDATION=0 timeout 300 "$run" gpubatch_tests > "$out/tests-core.txt" 2>&1
  echo "   core tests: exit $?, $(grep -E 'PASSED|FAILED' "$out/tests-core.txt" | tr '\n' ' ')" | tee -a "$out/log.txt" >&2
fi

# The packer's line (eleventh session): batches of 1,024 requests and up (the new default) against
# 256 (call 10's) and off, interleaved: the open loop below saturation, at 3 M/s, the crowd and
# the priority mix.
if on packmin11; then
  for r in 1 2; do
    o="--device 0 --threads 16 --op relu --size 256 --rate 1500000 --requests 3000000"
    load pm-open15-$r gpubatch-load $o
    load pm-open15-256-$r env GPUBATCH_PACKER_MIN=256 -- gpubatch-load $o
    load pm-open15-off-$r env GPUBATCH_PACKER=off -- gpubatch-load $o
    crowd="--device 0 --threads 16 --inflight 1024 --op relu --size 256 --requests 8000000"
    load pm-crowd-$r gpubatch-load $crowd
    load pm-crowd-off-$r env GPUBATCH_PACKER=off -- gpubatch-load $crowd
  done
  o="--device 0 --threads 16 --op relu --size 256 --rate 3000000 --requests 6000000"
  load pm-open3m gpubatch-load $o
  load pm-open3m-off env GPUBATCH_PACKER=off -- gpubatch-load $o
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe --rate 3000000 --requests 6000000"
  load pm-prio3m gpubatch-mix $mix
  load pm-prio3m-off env GPUBATCH_PACKER=off -- gpubatch-mix $mix
  o="--device 0 --threads 16 --op relu --size 256 --rate 1000000 --requests 2000000"
  load pm-open1m gpubatch-load $o
  load pm-open1m-off env GPUBATCH_PACKER=off -- gpubatch-load $o
fi

# Saturation with the packer (eleventh session): the priority mix and the open loop past 3 M/s,
# this build against GPUBATCH_PACKER=off, and the idle mix.
if on sat11; then
  mix="--device 0 --threads 16 --size 256 --high 0.1 --host-probe"
  for R in 4000000 3500000; do
    load st-prio-$R gpubatch-mix $mix --rate $R --requests $((2 * R))
    load st-prio-$R-off env GPUBATCH_PACKER=off -- gpubatch-mix $mix --rate $R --requests $((2 * R))
  done
  load st-prio-idle gpubatch-mix $mix --rate 10000 --requests 30000
  o="--device 0 --threads 16 --op relu --size 256 --rate 4000000 --requests 8000000"
  load st-open4m gpubatch-load $o
  load st-open4m-off env GPUBATCH_PACKER=off -- gpubatch-load $o
fi

# Every issue's rows with the build that lands in the thirty-ninth session (shards taken out), on
# one machine in one call: the lone caller beside the synchronous path, the crowd, large requests
# from vectors and HostBuffers beside --unbatched and the copy rate, and issue 14's loads (the
# latency target, the priority mix idle and at 3 M/s, deadlines with large requests, block_for,
# 64 threads with 10 % of 1,000,000 floats).
if on final39; then
  P="--device 0 --host-probe"
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 262144,4194304,67108864 >> "$out/results.jsonl" 2>> "$out/log.txt"
  lone="--device 0 --threads 1 --inflight 1 --op relu --size 256 --requests 20000"
  for rep in 1 2; do
    load f39-lone-$rep gpubatch-load $lone
    load f39-lone-unb-$rep gpubatch-load --unbatched $lone
  done
  load f39-lone-res gpubatch-load --resident $lone
  load f39-crowd1024 gpubatch-load --device 0 --threads 16 --inflight 1024 --requests 8000000 --op relu --size 256
  for spec in 65536:60000 1048576:3000; do
    n=${spec%:*}; r=${spec#*:}
    big="--device 0 --threads 16 --inflight 8 --op relu --size $n --requests $r"
    load f39-$n-hb gpubatch-load --host-buffers $big
    load f39-$n-vec gpubatch-load $big
    load f39-$n-unb gpubatch-load --unbatched --device 0 --threads 16 --inflight 1 --op relu --size $n --requests $((r / 4))
  done
  for r in 1000000 2000000; do
    load f39-p99t500-$r gpubatch-mix --threads 16 --size 256 --target-p99-us 500 --rate $r --requests $((r * 3)) $P
  done
  load f39-mixidle gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 10000 --requests 30000 $P
  for rep in 1 2; do
    load f39-mixsat-$rep gpubatch-mix --threads 16 --high 0.1 --size 256 --rate 3000000 --requests 6000000 $P
  done
  load f39-deadline-large gpubatch-mix --threads 16 --size 256 --deadline-us 2000 --deadline-fraction 0.5 --large 0.01 --rate 300000 --requests 900000 $P
  load f39-blockfor gpubatch-mix --threads 16 --size 256 --block-for-us 300 --queue-capacity 4096 --rate 3000000 --requests 4500000 $P
  load f39-m64 gpubatch-mix --device 0 --threads 64 --size 256 --large 0.1 --large-size 1000000 --rate 20000 --requests 60000 --host-probe
fi

# Vector requests of 1,048,576 floats, batched, by requests outstanding per caller, beside
# --unbatched, interleaved (thirty-ninth session: the final39 call had batched at 8 outstanding
# 0.92x unbatched, the thirty-fifth session 0.88x): is the gap the depth (results read back cold)
# or the batched path?
if on big39; then
  for rep in 1 2; do
    load b39-unb-$rep gpubatch-load --unbatched --device 0 --threads 16 --inflight 1 --op relu --size 1048576 --requests 3000
    for inf in 1 2 4 8; do
      load b39-inf$inf-$rep gpubatch-load --device 0 --threads 16 --inflight $inf --op relu --size 1048576 --requests 6000
    done
  done
fi

# The request size sweep with the thirty-ninth session's build: 16 callers, latency and adaptive at 1 and 8
# requests outstanding a caller (bench/size_sweep.py --inflight 1,8: "best batched" takes the best
# depth as well as the best preset), --unbatched, and gpubatch-copy-rate, every size.
if on sweep39 && have gpubatch-copy-rate && command -v python3 >/dev/null; then
  make_wrappers
  echo "== sweep39" >&2
  timeout 500 python3 bench/size_sweep.py --bin /tmp/gpubatch-wrap --out "$out/size-sweep-39.jsonl" --threads 16 \
    --inflight 1,8 --presets latency,adaptive --bytes-per-run ${SWEEP_BYTES:-1e9} --max-requests 100000 > "$out/sweep-39.txt" 2>&1 || true
fi

# Issue 14's "p99 <= 500 us up to the highest rate that allows it, and that rate reported": the
# rate found by bench/target_rate.py (rising offered rates, then bisection), each rate run with
# target_p99_us 500 and beside it without a target; every default otherwise.
if on rate40 && have gpubatch-mix && command -v python3 >/dev/null; then
  echo "== rate40" >&2
  timeout 400 python3 bench/target_rate.py --bin "$run gpubatch-mix" --extra "--device 0 --host-probe" \
    --target-p99-us 500 --start 500000 --factor 1.5 --refine 3 --beside --majority-of ${RATE_MAJORITY:-1} \
    --out "$out/target-rate-40.jsonl" > "$out/target-rate-40.txt" 2>> "$out/log.txt" || true
  tail -3 "$out/target-rate-40.txt" >&2
fi

# The forty-first session found target_p99_us 500 worse than no target on an H100 at 1-2 M/s
# (episodes of 8-12 ms at 1 M/s with it, p99 0.32-0.42 ms without). Traced runs at 1 M/s, four with
# the target and one without, each trace's batch stages (bench/trace_batches.py) kept, the trace not.
if on trace41 && have gpubatch-mix; then
  echo "== trace41" >&2
  for k in 1 2 3 4 5; do
    t=500; [ $k = 3 ] && t=0
    GPUBATCH_TRACE=$out/t41-$k.json timeout 60 $run gpubatch-mix --device 0 --host-probe --threads 16 --size 256 \
      --target-p99-us $t --rate 1000000 --requests 2000000 --json 2>> "$out/log.txt" | tail -1 > "$out/t41-run-$k.json"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], round(j['latency_us']['all']['p99']), [round(q['p99']) for q in j['latency_by_quarter_us']])" \
      "$out/t41-run-$k.json" "target $t:" >&2 || true
    [ -f "$out/t41-$k.json" ] && python3 bench/trace_batches.py "$out/t41-$k.json" --slowest 6 > "$out/t41-batches-$k.txt" 2>&1
    rm -f "$out/t41-$k.json"
  done
fi

# The strand copies a batch's inputs alone below 2 x 256 KiB; at the open loop's knee (2.5 M/s on
# the H200 of the thirty-ninth session, batches of ~376 requests of 1 KiB) it used 0.35 us of CPU a
# request, 88 % of its core. GPUBATCH_COPY_PART_BYTES=65536 (parts of 64 KiB shared with idle
# completion threads) against the default, interleaved: the open loop at 2 and 2.5 M/s, the crowd.
if on part39; then
  P="--device 0 --host-probe"
  for rep in 1 2 3; do
    for part in 262144 65536; do
      for r in 2000000 2500000; do
        load p39-open$r-$part-$rep env GPUBATCH_COPY_PART_BYTES=$part -- gpubatch-load --threads 16 --op relu --size 256 --rate $r --requests $((r * 3)) $P
      done
    done
  done
  for rep in 1 2; do
    for part in 262144 65536; do
      load p39-crowd-$part-$rep env GPUBATCH_COPY_PART_BYTES=$part -- gpubatch-load --device 0 --threads 16 --inflight 2048 --requests 8000000 --op relu --size 256
    done
  done
fi
