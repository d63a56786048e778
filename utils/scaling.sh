#!/usr/bin/env bash
# Compile time and peak memory of gradc on chain programs of growing size
# (utils/gen-chain.py): a chain of N elementwise lets, its gradient, and N
# functions each calling the previous one; for --emit=cpp and --emit=llvm
# (optimised, as --emit=obj and the JIT compile it), both printers of the
# loop IR after its passes. Prints one line per program and backend:
#
#   kind   N      emit  seconds(user+sys)  peak-MB  status
#
# Usage: utils/scaling.sh [GRADC]        (default: build/compiler/tools/gradc/gradc)
#   SIZES="1000 10000 100000"  the values of N (the default)
#   KINDS="lets grad calls"    the chains (the default)
#   EMITS="cpp llvm"           the backends (the default)
#   LIMIT=600                  seconds before a run is stopped (status: timeout)
# The CI check at N = 10,000 is test/Emit/compile-time-10k.test; this
# script is for measuring by hand (100k programs take minutes).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gradc=${1:-$root/build/compiler/tools/gradc/gradc}
sizes=${SIZES:-1000 10000 100000}
kinds=${KINDS:-lets grad calls}
emits=${EMITS:-cpp llvm}
limit=${LIMIT:-600}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-6s %7s %-10s %10s %8s  %s\n' kind N emit seconds peak-MB status
for kind in $kinds; do
  for n in $sizes; do
    src=$tmp/$kind-$n.grad
    python3 "$root/utils/gen-chain.py" "$kind" "$n" -o "$src"
    for emit in $emits; do
      flags=(--emit="$emit")
      timeout "$limit" /usr/bin/time -v -o "$tmp/time" \
        "$gradc" "$src" "${flags[@]}" -o "$tmp/out" >/dev/null 2>"$tmp/err"
      rc=$?
      status=ok
      [ "$rc" = 124 ] && status=timeout
      [ "$rc" != 0 ] && [ "$rc" != 124 ] && status="exit $rc"
      user=$(sed -n 's/^\s*User time (seconds): //p' "$tmp/time")
      sys=$(sed -n 's/^\s*System time (seconds): //p' "$tmp/time")
      kb=$(sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$tmp/time")
      secs=$(awk -v u="${user:-0}" -v s="${sys:-0}" 'BEGIN { printf "%.2f", u + s }')
      mb=$(awk -v k="${kb:-0}" 'BEGIN { printf "%.0f", k / 1024 }')
      printf '%-6s %7s %-10s %10s %8s  %s\n' "$kind" "$n" "$emit" "$secs" "$mb" "$status"
    done
  done
done
