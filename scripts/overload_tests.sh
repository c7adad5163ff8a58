#!/usr/bin/env bash
# Runs a built preset's `unit` and `stress` tests on an overloaded machine: more ctest jobs than
# cores, beside busy loops, so that threads lose their cores for long stretches as on CI's loaded
# 2-core machine under a sanitizer. A test whose scenario rests on timing fails here first
# (docs/DESIGN.md "Tests").
#   scripts/overload_tests.sh PRESET [JOBS=6] [ROUNDS=3] [BUSY_LOOPS=2]
# Each round's full output: /tmp/overload-PRESET-ROUND.log; a summary on stdout.
set -uo pipefail
preset=${1:?preset (release, asan, tsan)}
jobs=${2:-6}
rounds=${3:-3}
busy=${4:-2}
cd "$(dirname "$0")/.."
pids=()
for _ in $(seq 1 "$busy"); do (while :; do :; done) & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
# The sanitizers' settings of scripts/test.sh (the layer's and lavapipe's own leaks suppressed).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
status=0
for r in $(seq 1 "$rounds"); do
  log=/tmp/overload-$preset-$r.log
  ctest --preset "$preset" -L 'unit|stress' -j"$jobs" --timeout 300 --output-on-failure > "$log" 2>&1 || status=1
  echo "== round $r ($log)"
  grep -E "tests passed|Total Test" "$log"
  grep -E "\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception" "$log"
done
exit $status
