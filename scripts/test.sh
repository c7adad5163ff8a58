#!/usr/bin/env bash
# Runs the test suite: unit and short stress tests on the release build with the Vulkan
# validation layer on (any message fails), then the same under AddressSanitizer +
# UndefinedBehaviorSanitizer and ThreadSanitizer. Set GPUBATCH_SKIP_SANITIZERS=1 to skip those.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
export GPUBATCH_CACHE_DIR=${GPUBATCH_CACHE_DIR:-$PWD/build/pipeline-cache}

echo "== release: unit + stress (short) =="
ctest --preset release -L 'unit|stress' -j"$jobs" --timeout 600

if [ "${GPUBATCH_SKIP_SANITIZERS:-0}" != 1 ]; then
  for preset in asan tsan; do
    echo "== $preset =="
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j"$jobs"
    # LeakSanitizer is on; tests/lsan.supp names what the Vulkan loader, lavapipe and the
    # validation layer keep for the life of the process (nothing of ours).
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
      ctest --preset "$preset" -L 'unit|stress' -j"$jobs" --timeout 900
  done
fi

# Bounded libFuzzer runs of the config parser and request validation (clang); the corpus lives in
# fuzz/corpus/. A fixed number of inputs from a fixed seed, so CI explores the same inputs on
# every run and a red result is reproducible. Longer, open-ended: FUZZ_SECONDS=3600 bash fuzz/run.sh
if [ "${GPUBATCH_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz: ${FUZZ_RUNS:-1000000} inputs per target =="
  FUZZ_RUNS=${FUZZ_RUNS:-1000000} bash fuzz/run.sh
fi
