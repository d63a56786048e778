#!/usr/bin/env bash
# The README's first command: install, build, and run gradc on the seed
# example (the TensorFlow stack-override question, answered).
set -euo pipefail
cd "$(dirname "$0")/.."
utils/deps.sh
utils/build.sh
build=${GRADC_BUILD_DIR:-build}
echo "== gradc run dsl_examples/stack_override.grad"
"$build/compiler/tools/gradc/gradc" run dsl_examples/stack_override.grad \
  --call 'synth([1, 2])'
"$build/compiler/tools/gradc/gradc" run dsl_examples/stack_override.grad \
  --call 'synth_grad([1, 2], [[3, 4], [6, 8]])'
"$build/compiler/tools/gradc/gradc" run dsl_examples/stack_override.grad \
  --call 'plain_grad([1, 2], [[3, 4], [6, 8]])'
