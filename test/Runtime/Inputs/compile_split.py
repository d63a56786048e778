#!/usr/bin/env python3
"""Compiles the split form of every example with every compiler, warnings
as errors.

Usage: compile_split.py GRADC RUNTIME_INCLUDE OUT_DIR FILE_OR_DIR...
                        --cxx COMPILER [--cxx COMPILER ...]

For each .grad file (a directory stands for its *.grad files, sorted),
emits `--emit=cpp --split-grad` and `--emit=header --split-grad`, then
compiles the code and a translation unit that includes the header with
each compiler, -std=c++17 -O2 -Wall -Wextra -Wpedantic -Werror (at -O2,
so that GCC's flow-sensitive warnings such as -Wmaybe-uninitialized run).
The NAME_fwd and NAME_bwd functions are new code paths of the emitter:
parameters that a backward half never reads, buffers that a forward half
fills for a caller. Prints one line per compiler; exits 1 with the
compiler's output on the first failure.
"""
import argparse
import os
import subprocess
import sys

FLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        print("FAIL: %s\n%s" % (" ".join(cmd), p.stdout))
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("runtime")
    ap.add_argument("out")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--cxx", action="append", required=True)
    args = ap.parse_args()
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith(".grad"))
        else:
            files.append(p)
    os.makedirs(args.out, exist_ok=True)
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        base = os.path.join(args.out, stem)
        run([args.gradc, path, "--split-grad", "--emit=cpp", "-o",
             base + ".cpp"])
        run([args.gradc, path, "--split-grad", "--emit=header", "-o",
             base + ".h"])
        with open(base + "_user.cpp", "w") as f:
            f.write('#include "%s.h"\n' % stem)
    for cxx in args.cxx:
        for path in files:
            stem = os.path.splitext(os.path.basename(path))[0]
            base = os.path.join(args.out, stem)
            # The headers of extern functions are found relative to the
            # .grad file (docs/Extern.md).
            grad_dir = os.path.dirname(os.path.abspath(path))
            for source in (base + ".cpp", base + "_user.cpp"):
                run([cxx] + FLAGS + ["-I" + args.runtime, "-I" + args.out,
                                     "-I" + grad_dir, "-c", source, "-o",
                                     os.devnull])
        print("ok %d programs' split form compiles with %s" %
              (len(files), os.path.basename(cxx)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
