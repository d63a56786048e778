"""PyTorch f64 references for while-loops.grad: run with /usr/bin/python3
to print the values and gradients that its EXPECT lines hold. Each
function runs the same iterations as a Python while loop with a counter,
and torch.autograd differentiates the iterations it took. Not run by
lit."""

import torch
torch.set_default_dtype(torch.float64)


def bounded(cond, body, carries, bound):
    n = 0
    while n < bound and cond(*carries):
        carries = body(*carries)
        n += 1
    return carries


def newton_sqrt(a):
    a = torch.tensor(a, requires_grad=True)
    s = a * a + 1.0
    (x,) = bounded(lambda x: bool(abs(x * x - s) > 1e-15 * s),
                   lambda x: (0.5 * (x + s / x),), (s,), 50)
    x.backward()
    return [x.item(), a.grad.item()]


def fixed_point(w, b):
    w = torch.tensor(w, requires_grad=True)
    b = torch.tensor(b)
    (x,) = bounded(lambda x: bool((torch.tanh(w * x + b) - x).abs().sum() > 1e-14),
                   lambda x: (torch.tanh(w * x + b),), (0.0 * b,), 200)
    y = x.sum()
    y.backward()
    return [y.item(), w.grad.tolist()]


def doubling(x0, T):
    x0 = torch.tensor(x0, requires_grad=True)
    (x,) = bounded(lambda x: bool(x < 1000.0), lambda x: (2.0 * x,), (x0,), T)
    x.backward()
    return [x.item(), x0.grad.item()]


def steps(x0, h):
    x0 = torch.tensor(x0, requires_grad=True)
    x, n = bounded(lambda x, n: bool(x > 1.0), lambda x, n: (x - h, n + 1.0),
                   (x0, torch.tensor(0.0)), 100)
    y = x * (n + 3.5)
    y.backward()
    return [y.item(), x0.grad.item()]


def nested(x0, r):
    x0 = torch.tensor(x0, requires_grad=True)
    y = x0
    for t in range(2):
        (z,) = bounded(lambda z: bool(z.sum() > 1.0), lambda z: (r * z,), (y,), 10)
        y = z + 0.1 * y

    def outer_body(w):
        (v,) = bounded(lambda v: bool(v.sum() > 0.5), lambda v: (0.5 * v,), (w,), 3)
        return (v,)
    (w,) = bounded(lambda w: bool((w * w).sum() > 4.0), outer_body, (y,), 5)
    out = (w * y).sum() + y.sum()
    out.backward()
    return [out.item(), x0.grad.tolist()]


def checkpointed(a):
    a = torch.tensor(a, requires_grad=True)
    (x,) = bounded(lambda x: bool(x < 0.5), lambda x: (x + 0.1,), (a,), 7)
    x.backward()
    return [x.item(), a.grad.item()]


for r in [newton_sqrt(2.0), newton_sqrt(0.09),
          fixed_point([0.5, -0.3, 0.8], [0.1, 0.2, -0.4]),
          doubling(1.0, 3), doubling(600.0, 3), doubling(2000.0, 3),
          steps(3.0, 0.5), nested([1.5, 0.25], 0.7), checkpointed(0.33)]:
    for v in r:
        print("# EXPECT:", v)
