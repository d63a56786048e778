#!/usr/bin/env python3
"""Runs calls through `gradc run --backend=llvm` (the LLVM JIT) and
`gradc run --backend=interp` (the reference interpreter) and compares the
printed results.

Usage: llvm_vs_interp.py GRADC FILE.grad [--calls-from F ...] [--call C ...]

Each backend runs all the calls in one process (`gradc run FILE --call A
--call B ...`), so each compiles the file once.

The calls are every `# CALL: f(...)` line of the --calls-from files (and
each --call). A `# CALL-ERROR: f(...)` line expects both backends to fail
(no results, an "evaluating 'f' failed" error) on the call.

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


def run(gradc, path, calls, backend):
    """Runs every call in one process; returns the exit status, the output
    of each call (a list, in order) and standard error."""
    cmd = [gradc, "run", path, "--backend=" + backend]
    for call in calls:
        cmd += ["--call", call]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if len(calls) == 1:
        return p.returncode, [p.stdout], p.stderr
    # Several calls: each one's results follow a line "# CALL".
    sections = []
    for line in p.stdout.splitlines(keepends=True):
        if line.startswith("# "):
            sections.append("")
        elif sections:
            sections[-1] += line
    return p.returncode, sections, p.stderr


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


def compare(call, expect_error, interp, llvm):
    """Compares the printed results of one call; returns what differs."""
    if expect_error:
        if interp.strip() or llvm.strip():
            return "expected both backends to fail:\n interp: %s\n llvm: %s" \
                % (interp, llvm)
        return None
    if not interp.strip() or not llvm.strip():
        return "a backend failed:\n interp: %s\n llvm: %s" % (interp, llvm)
    try:
        ti, tl = tokens(interp), tokens(llvm)
    except ValueError as e:
        return "unreadable output (%s):\n interp: %s llvm:   %s" % (
            e, interp, llvm)
    if len(ti) != len(tl):
        return "different shapes:\n interp: %s llvm:   %s" % (interp, llvm)
    for a, b in zip(ti, tl):
        structural = a in "[],\n" or b in "[],\n"
        if (structural and a != b) or (not structural and not close(a, b)):
            return "%s differs from %s:\n interp: %s llvm:   %s" % (
                b, a, interp, llvm)
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
    texts = [c for c, _ in calls]
    errors = sum(1 for _, e in calls if e)
    runs = {}
    for backend in ("interp", "llvm"):
        rc, sections, err = run(args.gradc, args.file, texts, backend)
        failures = err.count(": error: evaluating ")
        if len(sections) != len(calls) or failures != errors or \
                (rc != 0) != (errors != 0) or \
                err.count("error:") != failures:
            print("MISMATCH: %s gave %d results and %d failures for %d calls "
                  "(%d expected to fail), exit %d:\n%s" %
                  (backend, len(sections), failures, len(calls), errors, rc,
                   err))
            return 1
        runs[backend] = sections
    for (call, expect_error), a, b in zip(calls, runs["interp"],
                                          runs["llvm"]):
        problem = compare(call, expect_error, a, b)
        if problem:
            print("MISMATCH %s: %s" % (call, problem))
            return 1
        print("ok %s%s" % ("error " if expect_error else "", call))
    print("%d calls agree" % len(calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
