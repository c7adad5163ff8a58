#!/usr/bin/env bash
# s39 (docs/BENCHMARKS.md, thirty-ninth session): the build with shards taken out (cur) beside the s38 build (prev, one queue by default), interleaved;
# then the open loop's knee with cur. Every gpubatch-load run verified.
set -uo pipefail
out=$1; export GPUBATCH_VALIDATION=0
gunzip -f .gpu/bin/*.gz 2>/dev/null
echo "# $(date -u +%FT%TZ) $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $out/s39.txt
sum() { python3 -c "
import json,sys
l=[x for x in open(sys.argv[1]) if x.startswith('{')]
if not l: print('no json'); sys.exit()
j=json.loads(l[-1]); c=j['cpu_s_by_thread']; n=j['requests']; h=j.get('host',{})
print('rps %.0f p50 %.2f p99 %.2f cpu/req %.3f callers %.3f done %.3f strand %.3f batch %.0f probe_p99 %s verified %s' % (j['throughput_rps'],j['latency_us']['p50'],j['latency_us']['p99'],j['cpu_us_per_request'],c['callers']/n*1e6,c['completion']/n*1e6,c['strand']/n*1e6,j['mean_batch_size'],h.get('probe_late_p99_us'),j['verified']))" $1; }
one() { local tag=$1; shift; echo "\$ $*" >> $out/s39.txt; .gpu/run.sh "$@" > $out/tmp.txt 2>&1; cat $out/tmp.txt >> $out/s39.txt; echo "$tag | $(sum $out/tmp.txt)"; }
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="gpubatch-load-prev gpubatch-load"; else order="gpubatch-load gpubatch-load-prev"; fi
  for b in $order; do one "crowd r$r $b" $b --threads 16 --inflight 2048 --requests 8000000 --op relu --size 256 --json; done
done
for r in 1 2; do for b in gpubatch-load-prev gpubatch-load; do one "lone r$r $b" $b --threads 1 --inflight 1 --requests 20000 --op relu --size 256 --json; done; done
for r in 1 2; do for b in gpubatch-executor-cost-prev gpubatch-executor-cost; do echo "\$ $b --threads 16 --inflight 1024 --requests 6400000 --reps 1" >> $out/s39.txt; echo "null r$r $b | $(.gpu/run.sh $b --threads 16 --inflight 1024 --requests 6400000 --reps 1 2>&1 | tee -a $out/s39.txt | tail -1)"; done; done
for rate in 1000000 1500000 2000000 2500000 3000000; do one "open $rate" gpubatch-load --host-probe --threads 16 --rate $rate --requests $((rate*3)) --op relu --size 256 --json; done
rm -f $out/tmp.txt
