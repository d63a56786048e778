#!/usr/bin/env bash
# Configures (once) and builds gradc in ./build with Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GRADC_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGRADC_WERROR=ON
fi
cmake --build "$build"
