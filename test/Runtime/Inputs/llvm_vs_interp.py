#!/usr/bin/env python3
"""Runs calls through `gradc run --backend=llvm` (the LLVM JIT) and
`gradc run --backend=interp` (the reference interpreter) and compares the
printed results.

Usage: llvm_vs_interp.py GRADC FILE.grad [--calls-from F ...] [--call C ...]

The calls are every `# CALL: f(...)` line of the --calls-from files (and
each --call). A `# CALL-ERROR: f(...)` line expects both backends to fail
(exit 1, an error message) on the call.

Tolerance: both backends compute with the same arithmetic (docs/
LLVMBackend.md: f32 transcendental functions and sums in double, the same
libm), so results are expected to be identical; the check still allows
|a - b| <= 1e-5 * max(|a|, |b|) + 1e-6 (the f32 tolerance of
test/Runtime/Inputs/compare.py; the printed text does not say the element
type), NaN must meet NaN, infinities and integers must match exactly, and
the bracket structure and the number of results must be identical.

Prints one line per call ("ok f(...)") and exits 1 on the first mismatch,
saying what differs.
"""
import argparse
import math
import re
import subprocess
import sys

NUMBER = re.compile(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:e[-+]?\d+)?)|true|false")


def run(gradc, path, call, backend):
    p = subprocess.run([gradc, "run", path, "--call", call,
                        "--backend=" + backend],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    return p.returncode, p.stdout, p.stderr


def tokens(text):
    """Splits printed results into numbers and structure characters."""
    out, pos = [], 0
    while pos < len(text):
        c = text[pos]
        if c in " \t":
            pos += 1
            continue
        if c in "[],\n":
            out.append(c)
            pos += 1
            continue
        m = NUMBER.match(text, pos)
        if not m:
            raise ValueError("unexpected output at %r" % text[pos:pos + 20])
        out.append(m.group(0))
        pos = m.end()
    return out


def value(tok):
    if tok == "true":
        return 1.0
    if tok == "false":
        return 0.0
    return float(tok)


def close(a, b):
    x, y = value(a), value(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    if re.fullmatch(r"-?\d+", a) and re.fullmatch(r"-?\d+", b) and \
            abs(x) > 2**24:
        return x == y  # large integers: i32 results, exact
    return abs(x - y) <= 1e-5 * max(abs(x), abs(y)) + 1e-6


def compare(gradc, path, call, expect_error):
    rc_i, out_i, err_i = run(gradc, path, call, "interp")
    rc_l, out_l, err_l = run(gradc, path, call, "llvm")
    if expect_error:
        if rc_i == 0 or rc_l == 0 or "error:" not in err_l:
            return "expected both backends to fail:\n interp (%d): %s%s\n" \
                   " llvm (%d): %s%s" % (rc_i, out_i, err_i, rc_l, out_l,
                                         err_l)
        return None
    if rc_i != 0 or rc_l != 0:
        return "a backend failed:\n interp (%d): %s%s\n llvm (%d): %s%s" % (
            rc_i, out_i, err_i, rc_l, out_l, err_l)
    ti, tl = tokens(out_i), tokens(out_l)
    if len(ti) != len(tl):
        return "different shapes:\n interp: %s llvm:   %s" % (out_i, out_l)
    for a, b in zip(ti, tl):
        structural = a in "[],\n" or b in "[],\n"
        if (structural and a != b) or (not structural and not close(a, b)):
            return "%s differs from %s:\n interp: %s llvm:   %s" % (
                b, a, out_i, out_l)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("file")
    ap.add_argument("--calls-from", action="append", default=[])
    ap.add_argument("--call", action="append", default=[])
    args = ap.parse_args()
    calls = [(c, False) for c in args.call]
    for f in args.calls_from:
        for line in open(f):
            m = re.match(r"\s*#\s*CALL(-ERROR)?:\s*(.*\S)\s*$", line)
            if m:
                calls.append((m.group(2), m.group(1) is not None))
    if not calls:
        print("no calls given")
        return 1
    for call, expect_error in calls:
        problem = compare(args.gradc, args.file, call, expect_error)
        if problem:
            print("MISMATCH %s: %s" % (call, problem))
            return 1
        print("ok %s%s" % ("error " if expect_error else "", call))
    print("%d calls agree" % len(calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
