#!/usr/bin/env bash
# Runs the test suite: unit and short stress tests on the release build with the Vulkan
# validation layer on (any message fails), then the same under AddressSanitizer +
# UndefinedBehaviorSanitizer and ThreadSanitizer. Set GPUBATCH_SKIP_SANITIZERS=1 to skip those.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
export GPUBATCH_CACHE_DIR=${GPUBATCH_CACHE_DIR:-$PWD/build/pipeline-cache}

# ctest with one retry of a failed test: a few tests time what the executor does (a deadline's
# error within its bound, a watchdog's margin), and on a loaded 2-core machine under a sanitizer a
# thread can lose its core for longer than any margin. A sanitizer's report, a Vulkan validation
# message or a test failing twice is never retried away: any of them fails the run, and every
# test that needed its retry is listed at the end. The longest test took 35 s under a sanitizer
# on this 2-core machine; a hung one is stopped at 300 s (it was 900: one hang cost CI 15 minutes).
run_ctest() {
  local log rc=0
  log=$(mktemp)
  ctest "$@" --output-on-failure --repeat until-pass:2 2>&1 | tee "$log" || rc=$?  # pipefail: ctest's status
  if grep -qE "(ERROR|WARNING): (Address|Thread|Leak)Sanitizer|runtime error:|vulkan validation:" "$log"; then
    echo "== a sanitizer or the validation layer reported in a failed attempt: that is never retried =="
    rc=1
  fi
  local retried
  retried=$(grep -E '\*\*\*(Failed|Timeout|Exception)' "$log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/' | sort -u || true)
  if [ -n "$retried" ]; then
    echo "== failed once (see their output above); passed on the retry unless the run failed =="
    echo "$retried"
  fi
  rm -f "$log"
  return "$rc"
}

echo "== release: unit + stress (short) =="
run_ctest --preset release -L 'unit|stress' -j"$jobs" --timeout 300

if [ "${GPUBATCH_SKIP_SANITIZERS:-0}" != 1 ]; then
  for preset in asan tsan; do
    echo "== $preset =="
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j"$jobs"
    # LeakSanitizer is on; tests/lsan.supp names what the Vulkan loader, lavapipe and the
    # validation layer keep for the life of the process (nothing of ours).
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
      run_ctest --preset "$preset" -L 'unit|stress' -j"$jobs" --timeout 300
  done
fi

# Bounded libFuzzer runs of the config parser and request validation (clang); the corpus lives in
# fuzz/corpus/. A fixed number of inputs from a fixed seed, so CI explores the same inputs on
# every run and a red result is reproducible. Longer, open-ended: FUZZ_SECONDS=3600 bash fuzz/run.sh
if [ "${GPUBATCH_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz: ${FUZZ_RUNS:-1000000} inputs per target =="
  FUZZ_RUNS=${FUZZ_RUNS:-1000000} bash fuzz/run.sh
fi
