#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang++-19, ASan, UBSan) in their
# own build directory, replays each target's committed corpus
# fuzz/corpus/<Target>/, then fuzzes each target for FUZZ_SECONDS seconds
# (default 60) from that corpus. New inputs go to a scratch directory, never
# into the committed corpus; a crash leaves its input in
# $GRADC_FUZZ_BUILD_DIR/artifacts/. Ends with one line
# "fuzz: N passed, N failed" (one replay and one fuzzing run per target),
# which utils/check.sh adds to its own count. docs/Testing.md describes the
# targets.
#
#   utils/fuzz.sh                          all targets, 60 s each
#   FUZZ_SECONDS=1800 utils/fuzz.sh FuzzABI one target for 30 minutes
#   FUZZ_SECONDS=0 utils/fuzz.sh           build and replay only
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$(realpath -m "${GRADC_FUZZ_BUILD_DIR:-build-fuzz}")
mkdir -p "$dir"
seconds=${FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(FuzzFrontEnd FuzzPipeline FuzzABI)

# FuzzABI draws every kind of size, overflowing products included: the
# generated code checks them (GRADC_ERROR_SIZE). GRADC_FUZZ_ABI_SMALL_SIZES=1
# narrows it to negative, zero and small sizes.

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
echo "== fuzz: building ${targets[*]} in $dir"
# Configure once; a configured directory keeps its settings (changing the
# launcher would rebuild everything).
if [ ! -f "$dir/CMakeCache.txt" ] &&
   ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGRADC_BUILD_FUZZER=ON -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_C_COMPILER=clang-19 "${launcher[@]}" >"$dir/configure.log" 2>&1; then
  tail -n 20 "$dir/configure.log"
  echo "fuzz: 0 passed, 1 failed"
  exit 1
fi
if ! cmake --build "$dir" --target "${targets[@]}"; then
  echo "fuzz: 0 passed, 1 failed"
  exit 1
fi

passed=0
failed=0
artifacts="$dir/artifacts"
mkdir -p "$artifacts"
for t in "${targets[@]}"; do
  bin="$dir/fuzz/$t"
  corpus="$root/fuzz/corpus/$t"
  opts=(-timeout=30 -rss_limit_mb=2048 -artifact_prefix="$artifacts/$t-")
  [ "$t" = FuzzABI ] || opts+=(-dict="$root/fuzz/grad.dict")
  # Run from the build directory: libFuzzer writes fuzz-*.log to the cwd.
  echo "== fuzz: $t replays $(ls "$corpus" | wc -l) committed inputs"
  if (cd "$dir" && "$bin" "${opts[@]}" -runs=0 "$corpus" >"$t.replay.log" 2>&1); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    tail -n 40 "$dir/$t.replay.log"
    echo "FAIL: $t replay ($dir/$t.replay.log)"
  fi
  [ "$seconds" -gt 0 ] || continue
  work=$(mktemp -d)
  echo "== fuzz: $t for $seconds s"
  if (cd "$dir" && "$bin" "${opts[@]}" -max_total_time="$seconds" \
        -print_final_stats=1 "$work" "$corpus" >"$t.fuzz.log" 2>&1); then
    passed=$((passed + 1))
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' \
      "$dir/$t.fuzz.log" | tr '\n' ' '
    echo
  else
    failed=$((failed + 1))
    tail -n 40 "$dir/$t.fuzz.log"
    echo "FAIL: $t fuzzing ($dir/$t.fuzz.log; input in $artifacts)"
  fi
  rm -rf "$work"
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
