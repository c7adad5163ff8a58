#!/usr/bin/env bash
# Level 0's queue in shards on the GPU host (the thirty-eighth session could not get a machine to
# measure it; docs/BENCHMARKS.md, thirty-eighth session): GPUBATCH_QUEUE_SHARDS=16 against 1,
# interleaved: the null device's crowd (gpubatch-executor-cost, 16 x 1,024, two rounds), the GPU
# crowd (16 x 2,048, three rounds), the open loop at 3 M/s (one round) and the lone caller. On one
# H100, 16 producers paid 0.39-0.61 us of CPU a push on one tail and 0.20-0.35 with a tail each
# (gpubatch-queue-cost); does the crowd turn that into requests/s?
# Every gpubatch-load run is verified against the CPU reference. Bundle gpubatch-load and
# gpubatch-executor-cost into .gpu/ (scripts/gpu_session.sh says how); on the GPU machine:
# bash scripts/gpu_shards_ab.sh OUTDIR. Writes shards.txt (every run's output) and a table on stdout.
set -uo pipefail
out=${1:-${OUT:-/tmp/gpu-shards-ab}}
mkdir -p "$out"
export GPUBATCH_VALIDATION=0
run=${RUN:-.gpu/run.sh}
[ -n "$(ls .gpu/bin/*.gz 2>/dev/null)" ] && gunzip -f .gpu/bin/*.gz
{
echo "# $(date -u +%FT%TZ) $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo)"
for r in 1 2; do
  for s in 1 16; do
    echo "\$ GPUBATCH_QUEUE_SHARDS=$s gpubatch-executor-cost --threads 16 --inflight 1024 --requests 6400000 --reps 1   # round $r"
    GPUBATCH_QUEUE_SHARDS=$s "$run" gpubatch-executor-cost --threads 16 --inflight 1024 --requests 6400000 --reps 1
  done
done
for r in 1 2 3; do
  for s in 1 16; do
    echo "\$ GPUBATCH_QUEUE_SHARDS=$s gpubatch-load --threads 16 --inflight 2048 --requests 8000000 --op relu --size 256 --json   # round $r"
    GPUBATCH_QUEUE_SHARDS=$s "$run" gpubatch-load --threads 16 --inflight 2048 --requests 8000000 --op relu --size 256 --json | tail -1
  done
done
for r in 1; do
  for s in 1 16; do
    echo "\$ GPUBATCH_QUEUE_SHARDS=$s gpubatch-load --host-probe --threads 16 --rate 3000000 --requests 9000000 --op relu --size 256 --json   # round $r"
    GPUBATCH_QUEUE_SHARDS=$s "$run" gpubatch-load --host-probe --threads 16 --rate 3000000 --requests 9000000 --op relu --size 256 --json | tail -1
  done
done
for s in 1 16; do
  echo "\$ GPUBATCH_QUEUE_SHARDS=$s gpubatch-load --threads 1 --inflight 1 --requests 20000 --op relu --size 256 --json"
  GPUBATCH_QUEUE_SHARDS=$s "$run" gpubatch-load --threads 1 --inflight 1 --requests 20000 --op relu --size 256 --json | tail -1
done
} > "$out/shards.txt" 2>&1
python3 - "$out/shards.txt" <<'PY'
import json,sys
cmd=None
for line in open(sys.argv[1]):
    if line.startswith("$"): cmd=line.strip()[2:]; continue
    if line.startswith("rps"): print(cmd.split(" gpubatch")[0], "|", line.strip())
    elif line.startswith("{"):
        j=json.loads(line); c=j["cpu_s_by_thread"]; n=j["requests"]
        print(cmd.split(" gpubatch")[0], "| threads", j["threads"], "rate", j["rate"], "rps %.0f p50 %.2f p99 %.2f cpu/req %.3f callers %.3f done %.3f strand %.3f packer %.3f batch %.0f verified %s" % (
            j["throughput_rps"], j["latency_us"]["p50"], j["latency_us"]["p99"], j["cpu_us_per_request"], c["callers"]/n*1e6, c["completion"]/n*1e6, c["strand"]/n*1e6, c["packer"]/n*1e6, j["mean_batch_size"], j["verified"]))
PY
