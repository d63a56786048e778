#!/usr/bin/env python3
"""Runs `gradc check FILE --backend=B` for every backend and every file, and
requires each run to pass (exit 0) with the same verdicts.

Usage: check_backends.py GRADC FILE_OR_DIR... [--backends interp,llvm,cpp]
                         [--xfail NAME.grad ...] [--gradc-arg=ARG ...]

A directory stands for its *.grad files, sorted. `gradc check` promotes
the module to f64 and compares every @grad function's gradient with
central finite differences (docs/CLI.md); each backend evaluates both, so
a backend that computes a wrong derivative or a wrong forward function
fails here even where the differential tests' points miss the bug.

For each file, prints "ok FILE: N gradients, verdicts agree on ..." and
then the verdict lines of the first backend without their error figures
("ok loss_grad w1", "surrogate synth_grad x"), which differ in the last
digits between backends; the verdict, function and parameter of each line
must be the same on every backend. Exits 1 on the first difference or
failure, printing the outputs.

Each --gradc-arg is added to every `gradc check` command (--split-grad
also checks NAME_fwd and NAME_bwd against NAME and NAME_grad, one more
verdict line per function).

A file named by --xfail is expected to fail `gradc check` (exit 1) on
every backend, for a known reason the test states; its verdicts must still
agree. It is reported "xfail"; if it passes, that is an error ("unexpected
pass"), so that the exemption is removed once the reason is gone.
"""
import argparse
import os
import re
import subprocess
import sys

VERDICT = re.compile(r"^(ok|surrogate|FAIL|error)\s+(\S+?):?\s+(\S+)?")


def verdicts(output):
    """(verdict, gradient, parameter) per result line of gradc check."""
    found = []
    for line in output.splitlines():
        m = VERDICT.match(line)
        if m:
            found.append((m.group(1), m.group(2), m.group(3) or ""))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--backends", default="interp,llvm,cpp")
    ap.add_argument("--xfail", action="append", default=[])
    ap.add_argument("--gradc-arg", action="append", default=[])
    args = ap.parse_args()
    backends = args.backends.split(",")
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith(".grad"))
        else:
            files.append(p)

    for path in files:
        name = os.path.basename(path)
        xfail = name in args.xfail
        runs = {}
        for backend in backends:
            p = subprocess.run([args.gradc, "check", path,
                                "--backend=" + backend] + args.gradc_arg,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            runs[backend] = p
            if p.returncode != (1 if xfail else 0):
                what = "unexpected pass of" if xfail else "FAIL"
                print("%s %s: gradc check --backend=%s exits %d:\n%s%s" %
                      (what, name, backend, p.returncode, p.stdout, p.stderr))
                return 1
        first = verdicts(runs[backends[0]].stdout)
        if not first:
            print("FAIL %s: no gradients checked:\n%s" %
                  (name, runs[backends[0]].stdout))
            return 1
        for backend in backends[1:]:
            if verdicts(runs[backend].stdout) != first:
                print("FAIL %s: the verdicts of --backend=%s differ from "
                      "--backend=%s:\n%s\n%s" %
                      (name, backend, backends[0], runs[backend].stdout,
                       runs[backends[0]].stdout))
                return 1
        print("%s %s: %d gradients, verdicts agree on %s" %
              ("xfail" if xfail else "ok", name, len(first),
               ", ".join(backends)))
        for verdict, grad, param in first:
            print("  %s %s %s" % (verdict, grad, param))
    print("%d programs checked on %s" % (len(files), ", ".join(backends)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
