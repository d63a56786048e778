#!/usr/bin/env python3
"""Runs compare.py under AddressSanitizer and UndefinedBehaviorSanitizer
(clang++-19, C++20, -O1, any report aborts) for a list of programs on
both backends: the C++ backend's code and the LLVM backend's object code,
each linked with compare.py's driver, which calls every function through
the C ABI on the program's calls and compares the results with `gradc
run`.

Usage: sanitize_all.py GRADC RUNTIME OUT [--jobs N] PROGRAM[:CALLS]...

A PROGRAM's calls are its own `# CALL:` lines, or those of CALLS. Prints
"ok BACKEND PROGRAM: N calls" per run and a last line "N runs clean", or
the first failure's output (exit 1).
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

FLAGS = ("-std=c++20 -O1 -g -fsanitize=address,undefined "
         "-fno-sanitize-recover=all -Wall -Wextra -Werror")


def one(args, program, calls, backend):
    here = os.path.dirname(os.path.abspath(__file__))
    stem = os.path.splitext(os.path.basename(program))[0]
    cmd = [sys.executable, os.path.join(here, "compare.py"), program,
           "--gradc", args.gradc, "--runtime", args.runtime,
           "--out", os.path.join(args.out, backend + "-" + stem),
           "--cxx", "clang++-19", "--flags", FLAGS, "--backend", backend,
           "--calls-from", calls]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1",
               UBSAN_OPTIONS="print_stacktrace=1")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env)
    return backend, stem, p.returncode, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("runtime")
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("programs", nargs="+")
    args = ap.parse_args()
    work = []
    for spec in args.programs:
        program, _, calls = spec.partition(":")
        for backend in ("cpp", "llvm"):
            work.append((program, calls or program, backend))
    clean = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for backend, stem, rc, out in pool.map(lambda w: one(args, *w), work):
            if rc != 0 or "calls agree" not in out:
                print("FAILED %s %s:\n%s" % (backend, stem, out))
                return 1
            print("ok %s %s: %s" % (backend, stem, out.strip().split(" agree")[0]))
            clean += 1
    print("%d runs clean" % clean)
    return 0


if __name__ == "__main__":
    sys.exit(main())
