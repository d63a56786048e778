#!/usr/bin/env python3
"""Sums of 10^6 f32 on every implementation of the loop IR's summation
order (docs/IR.md, "Summation order"): the interpreter, the loop IR's
evaluator before and after the loop passes, and its C++ printer compiled
by Clang must print the same digits, and each result must be within 1e-6
relative of the exact sum of the same f32 inputs (math.fsum, an
independent oracle), or of the f64 value of issue 13's K2 expression.

Usage: reduce-million.py GRADC WORKDIR [--n N] [--backends a,b,...]
                         [--data uniform,positive,decades]
The arguments go through a response file (@FILE): 10^6 numbers do not
fit on a command line.
"""
import argparse
import math
import os
import random
import struct
import subprocess
import sys
import time

PROGRAM = """\
fn total(x: f32[N]) -> f32 { return sum(x) }
fn k2(x: f32[N]) -> f32 { return sum(sigmoid(x) * tanh(x) + exp(-x * x) * sin(x)) }
"""


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def k2_f64(x):
    return (1 / (1 + math.exp(-x))) * math.tanh(x) + math.exp(-x * x) * math.sin(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("workdir")
    ap.add_argument("--n", type=int, default=1000000)
    ap.add_argument("--backends", default="interp,loops,loops-opt,cpp")
    ap.add_argument("--data", default="uniform,decades",
                    help="of uniform, positive, decades (K2 runs on uniform)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    src = os.path.join(args.workdir, "million.grad")
    with open(src, "w") as f:
        f.write(PROGRAM)
    rng = random.Random(20261201)
    n = args.n
    data = {
        # uniform in [-1, 1]: issue 13's K2 data
        "uniform": [f32(rng.uniform(-1, 1)) for _ in range(n)],
        # all positive: the sum grows to 5e5, where f32 steps are 1/32
        "positive": [f32(rng.uniform(0, 1)) for _ in range(n)],
        # 13 decades, both signs: cancellation
        "decades": [f32(rng.choice([-1, 1]) * rng.uniform(0.5, 1) *
                        10 ** rng.randint(-6, 7)) for _ in range(n)],
    }
    calls = []
    for name in args.data.split(","):
        xs = data[name]
        lit = "[" + ",".join(repr(v) for v in xs) + "]"
        calls.append(("total " + name, "total(" + lit + ")",
                      math.fsum(xs)))
        if name == "uniform":
            calls.append(("k2 " + name, "k2(" + lit + ")",
                          math.fsum(k2_f64(v) for v in xs)))
    rsp = os.path.join(args.workdir, "calls.rsp")
    with open(rsp, "w") as f:
        for _, call, _ in calls:
            f.write("--call=" + call + "\n")
    outputs = {}
    for b in args.backends.split(","):
        start = time.time()
        p = subprocess.run([args.gradc, "run", src, "@" + rsp,
                            "--backend=" + b], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        print("# %s: %.1f s" % (b, time.time() - start), file=sys.stderr)
        if p.returncode != 0:
            print("FAIL %s: %s" % (b, p.stderr.strip()))
            return 1
        outputs[b] = [l for l in p.stdout.split("\n")
                      if l and not l.startswith("#")]
    first = args.backends.split(",")[0]
    ok = True
    for b, out in outputs.items():
        if out != outputs[first]:
            print("FAIL %s prints %s, %s prints %s" % (b, out, first,
                                                      outputs[first]))
            ok = False
    for (label, _, exact), got in zip(calls, outputs[first]):
        rel = abs(float(got) - exact) / abs(exact)
        verdict = "ok" if rel <= 1e-6 else "FAIL"
        ok = ok and rel <= 1e-6
        print("%s %s: %s, exact %.10g, relative error %.1e" %
              (verdict, label, got, exact, rel))
    print("%d calls of %d elements agree on %s" %
          (len(calls), n, ", ".join(outputs)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
