#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++ straight from the sources (they need only the core
# library, the config parser, and toml++ headers) and runs each for a bounded time.
#   bash fuzz/run.sh              # 60 s per target
#   FUZZ_SECONDS=3600 bash fuzz/run.sh   # longer
#   FUZZ_TARGETS=config bash fuzz/run.sh # one target
#   FUZZ_RUNS=500000 bash fuzz/run.sh    # a fixed number of inputs from a fixed seed: the same
#                                        # exploration on every machine (what CI runs)
# Crashes are written to build/fuzz/artifacts/; new corpus entries go to build/fuzz/corpus/<target>
# (the committed seeds in fuzz/corpus/<target> are read, never written).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"config request"}
CXX=${FUZZ_CXX:-$(command -v clang++-14 || command -v clang++)}
out=build/fuzz
mkdir -p "$out/artifacts"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -DTOML_HEADER_ONLY=1 -Iinclude -Isrc)
core=(src/error.cpp src/ops.cpp src/reference.cpp)
for t in $targets; do
  extra=()
  [ "$t" = config ] && extra=(src/executor/config.cpp)
  echo "== fuzz: building $t =="
  "$CXX" "${flags[@]}" "fuzz/${t}_fuzzer.cpp" "${core[@]}" "${extra[@]}" -o "$out/${t}_fuzzer"
  mkdir -p "$out/corpus/$t"
  if [ -n "${FUZZ_RUNS:-}" ]; then label="$FUZZ_RUNS inputs from seed 1"; else label="${seconds}s"; fi
  echo "== fuzz: $t, $label =="
  if [ -n "${FUZZ_RUNS:-}" ]; then budget=(-runs="$FUZZ_RUNS" -seed=1); else budget=(-max_total_time="$seconds"); fi
  "$out/${t}_fuzzer" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/${t}-" "$out/corpus/$t" "fuzz/corpus/$t"
done
