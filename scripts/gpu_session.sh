#!/usr/bin/env bash
# The measurements docs/BENCHMARKS.md reports, on a GPU machine, in one go (one device call):
# the bare hardware floor (shared probe), the previous build beside this one, a lone caller in
# every mode, 16 threads of 256-float relu, idle CPU, large requests, the request-size sweep,
# and the test binaries. Every gpubatch-load result is verified against the CPU reference.
#
# Build and bundle here (binaries by basename into .gpu/bin; see DESIGN.md "Running on the GPU
# machine"): gpubatch-load, gpubatch-copy-rate, gpubatch_tests, gpubatch_integration_tests, and
# optionally gpubatch-load-prev (the previous build) and latency (shared/probes/vk-latency).
# There:  bash scripts/gpu_session.sh OUTDIR [sections]   (sections: probe lone crowd large sweep tests)
set -uo pipefail
out=${1:-${OUT:-/tmp/gpu-session}}
sections=${2:-"probe lone crowd large sweep tests"}
mkdir -p "$out"
run=.gpu/run.sh
have() { [ -x ".gpu/bin/$1" ]; }
# load NAME BINARY ARGS...: one gpubatch-load run, its JSON in OUT/NAME.json
load() {
  local name=$1 bin=$2; shift 2
  have "$bin" || return 0
  echo "== $name: $bin $*" | tee -a "$out/commands.txt" >&2
  timeout 120 "$run" "$bin" "$@" --json > "$out/$name.json" 2> "$out/$name.err" || echo "   (exit $?)" >&2
}
on() { [[ " $sections " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt" 2>&1 || true
if on probe && have latency; then
  echo "== probe" >&2
  timeout 120 "$run" latency > "$out/probe.txt" 2>&1 || true
fi

if on lone; then
  lone="--threads 1 --inflight 1 --requests 20000 --op relu --size 256"
  load lone-prev-adaptive gpubatch-load-prev --preset adaptive $lone
  load lone-default gpubatch-load $lone --idle-ms 1000
  load lone-unbatched gpubatch-load --unbatched $lone --idle-ms 1000
  load lone-realtime gpubatch-load --preset realtime $lone --idle-ms 1000
  load lone-throughput gpubatch-load --preset throughput $lone --idle-ms 1000
  load lone-prev-unbatched gpubatch-load-prev --unbatched $lone
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
  have gpubatch-copy-rate && timeout 60 "$run" gpubatch-copy-rate --bytes 262144,4194304,67108864 > "$out/copy-rate.txt" 2>&1
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

if on sweep && have gpubatch-copy-rate && command -v python3 >/dev/null; then
  mkdir -p /tmp/gpubatch-wrap
  for b in gpubatch-load gpubatch-copy-rate; do
    printf '#!/usr/bin/env bash\nexec %s/%s %s "$@"\n' "$PWD" "$run" "$b" > /tmp/gpubatch-wrap/$b
    chmod +x /tmp/gpubatch-wrap/$b
  done
  echo "== sweep" >&2
  timeout 300 python3 bench/size_sweep.py --bin /tmp/gpubatch-wrap --out "$out/size-sweep.jsonl" --threads 16 \
    --inflight 8 --presets adaptive,throughput --bytes-per-run 2.5e8 --max-requests 200000 > "$out/sweep.txt" 2>&1 || true
fi

if on tests; then
  for t in gpubatch_tests gpubatch_integration_tests; do
    have $t || continue
    echo "== $t" >&2
    timeout 240 "$run" $t --gtest_brief=1 > "$out/$t.txt" 2>&1
    echo "$t exit $?" >> "$out/tests.txt"
  done
fi

# A short table last.
if command -v python3 >/dev/null; then
  python3 - "$out" <<'PY'
import json, glob, os, sys
out = sys.argv[1]
print(f"{'run':34s} {'req/s':>12s} {'GB/s in':>8s} {'p50 us':>8s} {'p99 us':>8s} {'cpu us/rq':>9s} {'idle cores':>10s} ok")
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    try:
        r = json.loads(open(f).read().strip().splitlines()[-1])
    except Exception:
        print(f"{os.path.basename(f)[:-5]:34s} (no result)"); continue
    gbps = r["throughput_rps"] * 4 * r["size"] / 1e9
    print(f"{os.path.basename(f)[:-5]:34s} {r['throughput_rps']:12.0f} {gbps:8.2f} {r['latency_us']['p50']:8.1f} "
          f"{r['latency_us']['p99']:8.1f} {r.get('cpu_us_per_request', float('nan')):9.2f} "
          f"{r.get('idle_cores_busy', float('nan')):10.4f} {r['verified']}")
PY
fi
grep -h "p50" "$out/probe.txt" 2>/dev/null | head -12
cat "$out/tests.txt" 2>/dev/null
