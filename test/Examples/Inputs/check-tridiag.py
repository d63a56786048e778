"""Compares gradc run on dsl_examples/extern_tridiag.grad, with each run
backend, against an independent computation in plain Python: the dense
system solved by Gaussian elimination with partial pivoting (not the
Thomas algorithm of the C++ kernel), and the gradient of
loss = |A^-1 d - target|^2 by the dense formulas
dd = A^-T 2 (x - target), dA = -dd x^T (read on the three diagonals).

    check-tridiag.py GRADC EXTERN_TRIDIAG_GRAD
"""
import subprocess
import sys

gradc, grad_file = sys.argv[1:3]
a = [0.0, 0.25, -0.5, 0.75, -0.125]
b = [0.5, -0.375, 0.875, 0.125, -0.75]
c = [-0.625, 0.25, 0.75, -0.25, 0.0]
d = [1.0, -2.0, 0.5, 3.0, -1.5]
t = [0.25, 0.125, -0.375, 0.625, 0.25]
n = len(d)


def dense(a, b, c):
    m = [[0.0] * n for _ in range(n)]
    for i in range(n):
        m[i][i] = b[i]
        if i > 0:
            m[i][i - 1] = a[i]
        if i + 1 < n:
            m[i][i + 1] = c[i]
    return m


def solve(m, rhs):
    m = [row[:] + [r] for row, r in zip(m, rhs)]
    for k in range(n):
        p = max(range(k, n), key=lambda i: abs(m[i][k]))
        m[k], m[p] = m[p], m[k]
        for i in range(k + 1, n):
            f = m[i][k] / m[k][k]
            for j in range(k, n + 1):
                m[i][j] -= f * m[k][j]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x


def transpose(m):
    return [list(col) for col in zip(*m)]


def lit(v):
    return "[" + ", ".join(repr(float(x)) for x in v) + "]"


def run(backend, call):
    out = subprocess.run([gradc, "run", grad_file, "--backend=" + backend,
                          "--call", call], check=True, capture_output=True,
                         text=True).stdout
    return [eval(line) for line in out.splitlines()]


def close(got, want, rtol, atol):
    return len(got) == len(want) and all(
        abs(g - w) <= atol + rtol * abs(w) for g, w in zip(got, want))


# The loss solves with diagonal b + 4.
b4 = [v + 4 for v in b]
A = dense(a, b4, c)
x = solve(A, d)
g = [2 * (xi - ti) for xi, ti in zip(x, t)]
dd = solve(transpose(A), g)
da = [0.0] + [-dd[i] * x[i - 1] for i in range(1, n)]
db = [-dd[i] * x[i] for i in range(n)]
dc = [-dd[i] * x[i + 1] for i in range(n - 1)] + [0.0]
want = [da, db, dc, dd]

for backend in ("interp", "llvm", "cpp"):
    got_x = run(backend, "tridiag_solve(%s, %s, %s, %s)" %
                (lit(a), lit(b4), lit(c), lit(d)))[0]
    got_g = run(backend, "loss_grad(%s, %s, %s, %s, %s)" %
                (lit(a), lit(b), lit(c), lit(d), lit(t)))
    solve_ok = close(got_x, x, 1e-5, 1e-6)
    grad_ok = len(got_g) == 4 and all(
        close(gg, w, 1e-4, 1e-5) for gg, w in zip(got_g, want))
    print("%s: solve %s, gradient %s" % (
        backend, "ok" if solve_ok else "FAIL %s vs %s" % (got_x, x),
        "ok" if grad_ok else "FAIL %s vs %s" % (got_g, want)))
