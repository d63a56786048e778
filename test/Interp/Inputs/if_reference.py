"""PyTorch f64 references for if-branches.grad: run with /usr/bin/python3
to print the values and gradients that its EXPECT lines hold. Not run by
lit."""

import torch
torch.set_default_dtype(torch.float64)


def piecewise(x, a):
    x = torch.tensor(x, requires_grad=True)
    s = x.sum()
    y = (x * x).sum() * a if s > 0 else torch.exp(x).sum()
    y.backward()
    return [y.item(), x.grad.tolist()]


def clipped(x, lo):
    x = torch.tensor(x, requires_grad=True)
    s = x.sum()
    # A constant branch: s * 0 + c keeps the graph, with zero gradient.
    v = s * 0 + lo if s < lo else (s * 0 + 10.0 if s > 10 else s)
    y = v * v
    y.backward()
    return [y.item(), x.grad.tolist()]


def looped(h0, xs):
    h0 = torch.tensor(h0, requires_grad=True)
    h = h0
    for x in torch.tensor(xs):
        h = h * x if h.sum() > 0 else h + x
    y = (h * h).sum()
    y.backward()
    return [y.item(), h0.grad.tolist()]


for r in [piecewise([0.5, -0.2, 1.0], 1.5), piecewise([-0.5, -0.2, 0.1], 1.5),
          clipped([1.0, 2.0], 0.5), clipped([-1.0, 0.2], 0.5), clipped([6.0, 7.0], 0.5),
          looped([0.5, 0.3], [[1.1, 0.9], [-2, 0.5], [0.3, 0.2]])]:
    for v in r:
        print("# EXPECT:", v)
