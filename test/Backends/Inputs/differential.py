#!/usr/bin/env python3
"""Three-way differential testing: the same calls through every backend of
`gradc run` (the reference interpreter, the LLVM JIT, and the C++ backend
compiled in-process by Clang), compared number by number.

Usage:
  differential.py GRADC FILE_OR_DIR... [--random N] [--calls-from F ...]
                  [--calls-for PATTERN ...] [--backends interp,llvm,cpp]
                  [--exact llvm] [--seed S]

For each .grad file (a directory stands for its *.grad files, sorted):

  1. the calls are every `# CALL: f(...)` line of the file, of the
     --calls-from files and of the files that the --calls-for patterns name
     for it ('{}' stands for the file's stem; a missing file is no error)
     (`# CALL-ERROR: f(...)` expects every backend to fail), plus, with --random N, N calls per callable function (every
     function, generated `_grad` functions included, not rule instances)
     on seeded random arguments: floats uniform in [-1, 1] for the first
     call and [0.2, 1.2] (inside the domain of log and sqrt) for the next,
     integers 0 or 1 (labels and indices), fair-coin bools, size names
     bound to 2, 3, 4, 2, ... in order of first appearance. Results that
     are NaN or infinite are compared like any other (docs/IR.md fixes
     where NaN propagates: max(NaN, x) is NaN on every backend);
  2. each backend evaluates all calls in ONE process (`gradc run FILE
     --call A --call B ...`), so each backend compiles the file once; the
     backends' processes run concurrently;
  3. every backend's results are compared with the first backend's: the
     bracket structure and the number of results must be identical, and
     each number must agree within the tolerance of its result's element
     type (from the function's signature):

       f32:       |a - b| <= 1e-5 * max(|a|, |b|) + 1e-6
       f64:       |a - b| <= 1e-10 * max(|a|, |b|) + 1e-12
       i32, bool: exactly

     NaN must meet NaN and infinities must match exactly. The --exact
     backends (default: llvm, which computes what the interpreter computes,
     docs/LLVMBackend.md) must print the same numbers as the first backend,
     digit for digit (the printer's shortest round-trip form, so equal text
     is equal bits). A call fails on one backend exactly when it fails on
     all (a run-time error such as an index out of range).

Prints "ok FILE: N calls agree on interp, llvm, cpp" per file and exits 1
on the first mismatch, naming the call, the backends and the numbers.
docs/Testing.md explains the tolerances.
"""
import argparse
import math
import os
import random
import re
import subprocess
import sys
import tempfile

TOLERANCE = {"f32": (1e-5, 1e-6), "f64": (1e-10, 1e-12), "i32": (0, 0),
             "bool": (0, 0)}
NUMBER = re.compile(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:e[-+]?\d+)?)|true|false")


class Mismatch(Exception):
    pass


def gradc_output(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------------------
# Signatures and calls
# ---------------------------------------------------------------------------

def split_top(text):
    """Splits on commas outside brackets and parentheses."""
    parts, depth, cur = [], 0, ""
    for c in text:
        depth += c in "[("
        depth -= c in "])"
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur)
    return parts


def parse_type(text):
    """'f32[B, 4]' -> ('f32', ['B', 4]); 'f32' -> ('f32', [])."""
    m = re.fullmatch(r"\s*(\w+)\s*(?:\[(.*)\])?\s*", text)
    dims = []
    for d in (m.group(2) or "").split(","):
        d = d.strip()
        if d:
            dims.append(int(d) if re.fullmatch(r"-?\d+", d) else d)
    return m.group(1), dims


def signatures(gradc, path, flags=()):
    """Callable function name -> (param types, result types); the flags
    may add functions (--value-and-grad, --split-grad)."""
    rc, out, err = gradc_output([gradc, path, "--emit=grad-ir"] + list(flags))
    if rc != 0:
        raise Mismatch("gradc --emit=grad-ir failed:\n" + err)
    sigs = {}
    for line in out.splitlines():
        m = re.match(r"func @([\w.]+)\((.*?)\) -> (.*?)( attributes (.*))? \{$",
                     line)
        if not m or "rule_instance" in (m.group(5) or ""):
            continue
        params = [parse_type(p.split(":", 1)[1]) for p in split_top(m.group(2))]
        res = m.group(3).strip()
        if res.startswith("("):
            res = res[1:-1]
        sigs[m.group(1)] = (params, [parse_type(r) for r in split_top(res)])
    return sigs


def literal(dtype, shape, rng, lo, hi):
    if shape:
        return "[" + ", ".join(literal(dtype, shape[1:], rng, lo, hi)
                               for _ in range(shape[0])) + "]"
    if dtype == "bool":
        return rng.choice(["true", "false"])
    if dtype == "i32":
        return str(rng.randint(0, 1))
    return "%.4g" % rng.uniform(lo, hi)


def random_calls(sigs, count, rng):
    calls = []
    domains = [(-1.0, 1.0), (0.2, 1.2)]
    for name in sorted(sigs):
        params, _ = sigs[name]
        sizes = {}
        for dtype, dims in params:
            for d in dims:
                if isinstance(d, str) and d not in sizes:
                    sizes[d] = 2 + len(sizes) % 3
        for k in range(count):
            lo, hi = domains[k % len(domains)]
            args = [literal(dtype, [sizes.get(d, d) for d in dims], rng, lo, hi)
                    for dtype, dims in params]
            calls.append("%s(%s)" % (name, ", ".join(args)))
    return calls


def listed_calls(paths):
    """(call, expect_error) for every `# CALL:` / `# CALL-ERROR:` line."""
    calls = []
    for path in paths:
        for line in open(path):
            m = re.match(r"\s*#\s*CALL(-ERROR)?:\s*(.*\S)\s*$", line)
            if m:
                calls.append((m.group(2), m.group(1) is not None))
    return calls


# ---------------------------------------------------------------------------
# Running and comparing
# ---------------------------------------------------------------------------

def start_backend(gradc, path, backend, calls, flags=()):
    """Starts one process for all calls (the backends run concurrently);
    `flags` are more gradc options (--accumulate=f32)."""
    cmd = [gradc, "run", path, "--backend=" + backend] + list(flags)
    rsp = None
    if sum(len(c) for c in calls) > 100000:
        # Too long for one command line (difftest.py --sizes with large
        # sizes): a response file, which LLVM's option parser expands;
        # finish_backend removes it.
        fd, rsp = tempfile.mkstemp(suffix=".rsp", prefix="differential-")
        with os.fdopen(fd, "w") as f:
            for call in calls:
                f.write('--call "%s"\n' % call)
        cmd.append("@" + rsp)
    else:
        for call in calls:
            cmd += ["--call", call]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.rsp = rsp
    return process


def finish_backend(process, backend, calls):
    """Returns (exit status, blocks, stderr) where blocks[i] lists the
    result lines of call i (empty: it failed)."""
    out, err = process.communicate()
    if getattr(process, "rsp", None):
        os.unlink(process.rsp)
    rc = process.returncode
    lines = out.splitlines()
    if len(calls) == 1:
        return rc, [lines], err
    blocks = []
    for line in lines:
        if line.startswith("# "):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
        else:
            raise Mismatch("%s: output before the first call header:\n%s"
                           % (backend, out))
    if len(blocks) != len(calls):
        raise Mismatch("%s printed %d call headers for %d calls:\n%s%s" %
                       (backend, len(blocks), len(calls), out, err))
    return rc, blocks, err


def tokens(line):
    out, pos = [], 0
    while pos < len(line):
        c = line[pos]
        if c == " ":
            pos += 1
        elif c in "[],":
            out.append(c)
            pos += 1
        else:
            m = NUMBER.match(line, pos)
            if not m:
                raise Mismatch("unexpected output %r" % line)
            out.append(m.group(0))
            pos = m.end()
    return out


def value(tok):
    if tok in ("true", "false"):
        return 1.0 if tok == "true" else 0.0
    return float(tok)


def close(a, b, dtype):
    x, y = value(a), value(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    rel, abs_ = TOLERANCE[dtype]
    return abs(x - y) <= rel * max(abs(x), abs(y)) + abs_


def compare(call, result_types, ref_name, ref, name, got, exact):
    if len(ref) != len(got):
        raise Mismatch("%s: %s prints %d results, %s %d:\n %s: %s\n %s: %s" %
                       (call, ref_name, len(ref), name, len(got), ref_name,
                        ref, name, got))
    for i, (r, g) in enumerate(zip(ref, got)):
        dtype = result_types[i][0] if i < len(result_types) else "f32"
        tr, tg = tokens(r), tokens(g)
        if len(tr) != len(tg):
            raise Mismatch("%s: result %d has another shape:\n %s: %s\n %s: %s"
                           % (call, i, ref_name, r, name, g))
        for a, b in zip(tr, tg):
            structural = a in "[]," or b in "[],"
            if structural or exact:
                agree = a == b
            else:
                agree = close(a, b, dtype)
            if not agree:
                raise Mismatch("%s: result %d: %s %s, %s %s (%s)"
                               "\n %s: %s\n %s: %s" %
                               (call, i, ref_name, a, name, b,
                                "exactly" if exact else dtype + " tolerance",
                                ref_name, r, name, g))


def head(text, lines=12):
    """The first lines of a backend's stderr (every failing call of a
    module that does not compile repeats the same message)."""
    kept = text.splitlines()[:lines]
    return "\n".join(kept) + ("\n..." if len(text.splitlines()) > lines
                               else "")


def check_file(gradc, path, backends, exact, extra_calls, random_count,
               rng, flags=()):
    sigs = signatures(gradc, path, flags)
    listed = listed_calls([path] + [f for f in extra_calls
                                    if os.path.exists(f)])
    randoms = random_calls(sigs, random_count, rng) if random_count else []
    calls = [c for c, _ in listed] + randoms
    expect_error = [e for _, e in listed] + [False] * len(randoms)
    if not calls:
        raise Mismatch("no calls for %s" % path)

    results = {}
    processes = {b: start_backend(gradc, path, b, calls, flags)
                 for b in backends}
    for backend in backends:
        rc, blocks, err = finish_backend(processes[backend], backend, calls)
        failed = [not b for b in blocks]
        if (rc != 0) != any(failed):
            raise Mismatch("%s exits %d with %d failed calls:\n%s" %
                           (backend, rc, sum(failed), err))
        results[backend] = (blocks, err)

    ref_name = backends[0]
    ref_blocks, ref_err = results[ref_name]
    compared = 0
    for i, call in enumerate(calls):
        name = re.match(r"\s*([\w.]+)", call).group(1)
        result_types = sigs.get(name, ([], []))[1]
        ref = ref_blocks[i]
        if expect_error[i] and ref:
            raise Mismatch("%s: expected an error, %s printed %s" %
                           (call, ref_name, ref))
        for backend in backends[1:]:
            got, err = results[backend][0][i], results[backend][1]
            if bool(ref) != bool(got):
                raise Mismatch("%s: fails on %s only:\n %s: %s\n%s\n %s: %s\n%s"
                               % (call, ref_name if not ref else backend,
                                  ref_name, ref, head(ref_err), backend, got,
                                  head(err)))
            if ref:
                compare(call, result_types, ref_name, ref, backend, got,
                        backend in exact)
        compared += 1
    return compared


def grad_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith(".grad"))
        else:
            files.append(p)
    return files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--calls-from", action="append", default=[])
    ap.add_argument("--calls-for", action="append", default=[])
    ap.add_argument("--random", type=int, default=0)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--backends", default="interp,llvm,cpp")
    ap.add_argument("--exact", default="llvm")
    ap.add_argument("--gradc-flags", default="",
                    help="more options of every gradc run "
                    "(--gradc-flags=--accumulate=f32)")
    args = ap.parse_args()
    backends = args.backends.split(",")
    exact = args.exact.split(",")
    files = grad_files(args.paths)
    for path in files:
        rng = random.Random("%d:%s" % (args.seed, os.path.basename(path)))
        stem = os.path.splitext(os.path.basename(path))[0]
        extra = args.calls_from + [p.replace("{}", stem)
                                   for p in args.calls_for]
        try:
            compared = check_file(args.gradc, path, backends, exact,
                                  extra, args.random, rng,
                                  args.gradc_flags.split())
        except Mismatch as e:
            print("MISMATCH in %s: %s" % (os.path.basename(path), e))
            return 1
        print("ok %s: %d calls agree on %s" %
              (os.path.basename(path), compared, ", ".join(backends)))
    print("%d programs agree on %s" % (len(files), ", ".join(backends)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
