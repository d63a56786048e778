#!/usr/bin/env bash
# The benchmark (docs/Performance.md): builds gradc's code for every kernel
# of bench/kernels with both backends, links it beside the hand-written
# C++ reference, times them interleaved in one process, times PyTorch, and
# checks every result against PyTorch's f64 gradients. Prints one table
# per kernel; exits 1 if a result is off. Arguments go to bench/run.py:
#   utils/bench.sh             the measurement (a few minutes)
#   utils/bench.sh --quick     tiny sizes: checks that it works (CI)
#   utils/bench.sh --kernels=k1,k4 --rounds=51
# Uses the build in $GRADC_BUILD_DIR (default: build), which it builds
# first, and the Python that has NumPy and PyTorch ($PYTHON, default
# /usr/bin/python3, where Debian's python3-torch installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GRADC_BUILD_DIR:-build}
python=${PYTHON:-/usr/bin/python3}
if [ ! -x "$build/compiler/tools/gradc/gradc" ]; then
  utils/build.sh
fi
cmake --build "$build" --target gradc >/dev/null
exec "$python" bench/run.py --build-dir "$build" "$@"
