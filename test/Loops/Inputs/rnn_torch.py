"""The RNN of issue 15 and its gradient on gradc's backends against PyTorch.

    rnn_torch.py GRADC RNN.grad --backends interp,loops,... [--dtype f64]
                 [--same loops,...]

Draws seeded random inputs (T = 5, B = 3, D = 4, H = 6), computes
sum(h_T * h_T) and its gradient with respect to w and u with PyTorch in
f64 (h_{t+1} = tanh(xs[t] @ w + h_t @ u)), runs `gradc run` on the function
`rnn` and `rnn_grad` of RNN.grad with each backend, and checks every number
against PyTorch (relative 1e-6 for f64, 1e-4 for f32, issue 15's bars);
the --same backends must also print the same text as the first one
(check_backends.py). Prints one line per backend and exits 1 on the first
mismatch.
"""

import argparse
import json
import sys

import torch

import check_backends

torch.set_default_dtype(torch.float64)


def reference(xs, h0, w, u):
    w = torch.tensor(w, requires_grad=True)
    u = torch.tensor(u, requires_grad=True)
    h = torch.tensor(h0)
    for x in torch.tensor(xs):
        h = torch.tanh(x @ w + h @ u)
    loss = (h * h).sum()
    loss.backward()
    return [loss.item()] + w.grad.flatten().tolist() + u.grad.flatten().tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("program")
    ap.add_argument("--backends", required=True)
    ap.add_argument("--dtype", default="f64")
    ap.add_argument("--same", default="")
    opts = ap.parse_args()
    g = torch.Generator().manual_seed(15)
    rand = lambda *s: (torch.rand(*s, generator=g) - 0.5).tolist()
    T, B, D, H = 5, 3, 4, 6
    xs, h0, w, u = rand(T, B, D), rand(B, H), rand(D, H), rand(H, H)
    want = reference(xs, h0, w, u)
    args = ", ".join(json.dumps(a) for a in (xs, h0, w, u))
    rtol = 1e-6 if opts.dtype == "f64" else 1e-4
    return check_backends.check(
        opts.gradc, opts.program,
        ["rnn(%s)" % args, "rnn_grad(%s)" % args], opts.backends, opts.same,
        want, rtol, 1e-3, "PyTorch")


if __name__ == "__main__":
    sys.exit(main())
