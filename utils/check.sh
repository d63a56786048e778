#!/usr/bin/env bash
# The README's second command: build, then run every suite (unit tests, lit
# and the Python tests), and end with one line "N passed, N failed" over all
# of them.
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

echo "== python tests"
# test/Python needs an interpreter with NumPy, PyTorch and pytest: Debian's
# (utils/deps.sh), unless $GRADC_PYTHON names another.
py=""
for cand in ${GRADC_PYTHON:-} python3 /usr/bin/python3; do
  if "$cand" -c 'import numpy, torch, pytest' >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  echo "no python3 that imports numpy, torch and pytest (utils/deps.sh)"
  failed=$((failed + 1))
else
  py_out=$(GRADC_BUILD_DIR="$build" "$py" -m pytest -q -p no:cacheprovider \
    test/Python 2>&1)
  py_rc=$?
  echo "$py_out" | grep -v '^\.*\s*\[ *[0-9]*%\]$' | tail -n 60
  # pytest's last line: "3 failed, 40 passed, 1 error in 9.1s".
  summary=$(echo "$py_out" | tail -n 1)
  pycount() {
    local n
    n=$(echo "$summary" | grep -Eo "[0-9]+ $1" | grep -Eo '^[0-9]+' | head -n 1)
    echo "${n:-0}"
  }
  py_pass=$(pycount passed)
  py_fail=$(( $(pycount failed) + $(pycount 'errors?') ))
  passed=$((passed + py_pass))
  failed=$((failed + py_fail))
  # 5: no tests collected; anything else non-zero without a count (an
  # internal error, an interrupted run) is one failure too.
  if [ "$py_rc" = 5 ]; then
    echo "pytest collected no tests in test/Python"
    failed=$((failed + 1))
  elif [ "$py_rc" != 0 ] && [ "$py_fail" = 0 ]; then
    failed=$((failed + 1))
  fi
fi

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

echo "== benchmark check (utils/bench.sh --quick: tiny sizes, results only)"
bench_out=$(utils/bench.sh --quick --no-torch 2>&1)
bench_rc=$?
echo "$bench_out" | tail -n 3
if [ "$bench_rc" = 0 ]; then
  passed=$((passed + 1))
else
  echo "$bench_out" | tail -n 60
  failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
