#!/usr/bin/env bash
# The main job: the batching executor on the best device present (lavapipe when there is no GPU),
# every preset side by side with the unbatched synchronous path, relu on 256-float requests.
# Each row is one gpubatch-load run; every result is checked against the CPU reference.
set -euo pipefail
cd "$(dirname "$0")/.."
load=build/release/bench/gpubatch-load
threads=${THREADS:-2}
requests=${REQUESTS:-100000}

runs=()
runs+=("$($load --json --unbatched --threads "$threads" --requests $((requests / 20)))")
for preset in latency balanced throughput adaptive; do
  runs+=("$($load --json --preset $preset --threads "$threads" --inflight 2048 --requests "$requests")")
done
# A lone caller: the latency each preset gives one thread with one request outstanding.
for preset in latency balanced adaptive; do
  runs+=("$($load --json --preset $preset --threads 1 --inflight 1 --requests 300)")
done

printf '%s\n' "${runs[@]}" | /usr/bin/python3 bench/table.py
