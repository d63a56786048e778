#!/usr/bin/env bash
# The README's second command: build, then run every suite (unit tests and
# lit), and end with one line "N passed, N failed" over all of them.
set -uo pipefail
cd "$(dirname "$0")/.."
utils/deps.sh || exit 1
utils/build.sh || { echo "0 passed, 1 failed"; exit 1; }
build=${GRADC_BUILD_DIR:-build}
lit=/usr/lib/llvm-19/build/utils/lit/lit.py
passed=0
failed=0

echo "== unit tests"
unit_out=$("$build/unittests/gradc-unittests" --gtest_brief=1 2>&1)
unit_rc=$?
echo "$unit_out" | tail -n 20
unit_pass=$(echo "$unit_out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p')
unit_fail=$(echo "$unit_out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p')
passed=$((passed + ${unit_pass:-0}))
failed=$((failed + ${unit_fail:-0}))
if [ "$unit_rc" != 0 ] && [ -z "$unit_fail" ]; then failed=$((failed + 1)); fi

echo "== lit tests"
jobs=$(nproc)
lit_out=$(python3 "$lit" -sv -j "$jobs" "$build/test" 2>&1)
lit_rc=$?
echo "$lit_out" | grep -v '^PASS: ' | tail -n 400
# lit's summary has a line "  Passed : N" per outcome that occurred.
count() {
  local n
  n=$(echo "$lit_out" | sed -n "s/^ *$1 *: *\([0-9]*\).*/\1/p" | tail -n 1)
  echo "${n:-0}"
}
lit_pass=$(count Passed)
lit_xfail=$(count "Expectedly Failed")
lit_fail=$(( $(count Failed) + $(count Unresolved) + $(count "Unexpectedly Passed") + $(count "Timed Out") ))
passed=$((passed + lit_pass + lit_xfail))
failed=$((failed + lit_fail))
if [ "$lit_rc" != 0 ] && [ "$lit_fail" = 0 ]; then failed=$((failed + 1)); fi

# The fuzz targets: a second build (clang++-19, ASan, UBSan) of the
# libraries they need, a replay of the committed corpora and FUZZ_SECONDS
# (default 60) of fuzzing per target. GRADC_SKIP_FUZZ=1 leaves them out.
if [ "${GRADC_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzzing"
  fuzz_out=$(utils/fuzz.sh 2>&1)
  fuzz_rc=$?
  echo "$fuzz_out" | tail -n 60
  fuzz_pass=$(echo "$fuzz_out" | sed -n 's/^fuzz: \([0-9]*\) passed.*/\1/p')
  fuzz_fail=$(echo "$fuzz_out" | sed -n 's/^fuzz: .* \([0-9]*\) failed$/\1/p')
  passed=$((passed + ${fuzz_pass:-0}))
  failed=$((failed + ${fuzz_fail:-0}))
  if [ "$fuzz_rc" != 0 ] && [ "${fuzz_fail:-0}" = 0 ]; then
    failed=$((failed + 1))
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
