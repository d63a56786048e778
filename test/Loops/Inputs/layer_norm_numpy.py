"""Issue 14's K5 (layer norm projected on c) and its gradient on gradc's
backends against a NumPy f64 reference derived by hand.

    layer_norm_numpy.py GRADC K5.grad --backends interp,loops-opt,cpp,llvm
                        --rows R --cols C [--same loops-opt,cpp,llvm]

Draws seeded random inputs x, c (R x C), gamma, beta (C), runs `gradc run`
on `k5` and `k5_grad` with each backend, and checks every number against
the reference (relative 1e-4, issue 14's bar for f32); the --same backends
must also print the same text as the first one (bit for bit). The
reference, per row: mu = mean(x), d = x - mu, var = mean(d^2),
r = 1 / sqrt(var + 1e-5), xh = d r, f = sum((xh gamma + beta) c); with
g = c gamma: dx = r (g - mean(g) - xh mean(g xh)), dgamma = sum over rows
of c xh, dbeta = sum over rows of c. Prints one line per backend and exits
1 on the first mismatch.
"""

import argparse
import json
import sys

import numpy as np

import check_backends



def reference(x, gamma, beta, c):
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(var + 1e-5)
    xh = d * r
    f = ((xh * gamma + beta) * c).sum()
    g = c * gamma
    dx = r * (g - g.mean(axis=1, keepdims=True) -
              xh * (g * xh).mean(axis=1, keepdims=True))
    dgamma = (c * xh).sum(axis=0)
    dbeta = c.sum(axis=0)
    return [f] + dx.ravel().tolist() + dgamma.tolist() + dbeta.tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("program")
    ap.add_argument("--backends", required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--cols", type=int, required=True)
    ap.add_argument("--same", default="")
    opts = ap.parse_args()
    rng = np.random.default_rng(14)
    R, C = opts.rows, opts.cols
    # f32 inputs, so that the reference sees the numbers gradc sees.
    f32 = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)
    x, gamma, beta, c = f32(R, C), f32(C), f32(C), f32(R, C)
    want = reference(*(a.astype(np.float64) for a in (x, gamma, beta, c)))
    args = ", ".join(json.dumps(a.tolist()) for a in (x, gamma, beta, c))
    return check_backends.check(
        opts.gradc, opts.program,
        ["k5(%s)" % args, "k5_grad(%s)" % args], opts.backends, opts.same,
        want, 1e-4, 1e-2, "NumPy")


if __name__ == "__main__":
    sys.exit(main())
