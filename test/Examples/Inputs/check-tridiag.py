"""Compares gradc run on dsl_examples/extern_tridiag.grad, with each run
backend, against NumPy: the solution of the dense system, and the
gradient of loss = |A^-1 d - target|^2 by the dense formulas.

    check-tridiag.py GRADC EXTERN_TRIDIAG_GRAD
"""
import subprocess
import sys

import numpy as np

gradc, grad_file = sys.argv[1:3]
a = np.array([0.0, 0.3, -0.5, 0.8, -0.2], dtype=np.float32)
b = np.array([0.5, -0.4, 0.9, 0.1, -0.7], dtype=np.float32)
c = np.array([-0.6, 0.2, 0.7, -0.3, 0.0], dtype=np.float32)
d = np.array([1.0, -2.0, 0.5, 3.0, -1.5], dtype=np.float32)
t = np.array([0.2, 0.1, -0.4, 0.6, 0.3], dtype=np.float32)
n = len(d)


def dense(a, b, c):
    m = np.diag(b.astype(np.float64))
    for i in range(1, n):
        m[i, i - 1] = a[i]
    for i in range(n - 1):
        m[i, i + 1] = c[i]
    return m


def lit(v):
    return "[" + ", ".join(repr(float(x)) for x in v) + "]"


def run(backend, call):
    out = subprocess.run([gradc, "run", grad_file, "--backend=" + backend,
                          "--call", call], check=True, capture_output=True,
                         text=True).stdout
    return [np.array(eval(line), dtype=np.float64)
            for line in out.splitlines()]


# The loss solves with diagonal b + 4.
A = dense(a, b + 4, c)
x = np.linalg.solve(A, d.astype(np.float64))
g = 2 * (x - t)
dd = np.linalg.solve(A.T, g)
dA = -np.outer(dd, x)
want = [np.array([0.0] + [dA[i, i - 1] for i in range(1, n)]),
        np.diag(dA).copy(),
        np.array([dA[i, i + 1] for i in range(n - 1)] + [0.0]),
        dd]

for backend in ("interp", "llvm", "cpp"):
    got_x = run(backend, "tridiag_solve(%s, %s, %s, %s)" %
                (lit(a), lit(b + 4), lit(c), lit(d)))[0]
    got_g = run(backend, "loss_grad(%s, %s, %s, %s, %s)" %
                (lit(a), lit(b), lit(c), lit(d), lit(t)))
    solve_ok = np.allclose(got_x, x, rtol=1e-5, atol=1e-6)
    grad_ok = all(np.allclose(gg, w, rtol=1e-4, atol=1e-5)
                  for gg, w in zip(got_g, want)) and len(got_g) == 4
    print("%s: solve %s, gradient %s" % (backend, "ok" if solve_ok else
                                         "FAIL %s vs %s" % (got_x, x),
                                         "ok" if grad_ok else
                                         "FAIL %s vs %s" % (got_g, want)))
