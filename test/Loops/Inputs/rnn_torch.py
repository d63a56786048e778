"""The RNN of issue 15 and its gradient on gradc's backends against PyTorch.

    rnn_torch.py GRADC RNN.grad --backends interp,loops,... [--dtype f64]
                 [--same loops,...]

Draws seeded random inputs (T = 5, B = 3, D = 4, H = 6), computes
sum(h_T * h_T) and its gradient with respect to w and u with PyTorch in
f64 (h_{t+1} = tanh(xs[t] @ w + h_t @ u)), runs `gradc run` on the function
`rnn` and `rnn_grad` of RNN.grad with each backend, and checks every number
against PyTorch (relative 1e-6 for f64, 1e-4 for f32, issue 15's bars);
the --same backends must also print the same text as the first one (the
C++ printer's f32 matmul accumulates in float, docs/Testing.md). Prints one
line per backend and exits 1 on the first mismatch.
"""

import argparse
import json
import re
import subprocess
import sys

import torch

torch.set_default_dtype(torch.float64)
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf")


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
    first = None
    for backend in opts.backends.split(","):
        out = subprocess.run(
            [opts.gradc, "run", opts.program, "--backend=" + backend,
             "--call", "rnn(%s)" % args, "--call", "rnn_grad(%s)" % args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if out.returncode != 0:
            print("FAIL %s: %s" % (backend, out.stderr.strip()))
            return 1
        lines = [l for l in out.stdout.splitlines() if not l.startswith("#")]
        got = [float(m) for l in lines for m in NUMBER.findall(l)]
        if len(got) != len(want):
            print("FAIL %s: %d numbers, want %d" % (backend, len(got),
                                                    len(want)))
            return 1
        worst = 0.0
        for a, b in zip(got, want):
            err = abs(a - b) / max(abs(b), 1e-3)
            worst = max(worst, err)
            if err > rtol:
                print("FAIL %s: %r against PyTorch's %r" % (backend, a, b))
                return 1
        if backend in opts.same.split(",") and lines != first:
            print("FAIL %s: prints other numbers than %s" % (backend,
                                                             opts.backends.split(",")[0]))
            return 1
        first = first or lines
        print("ok %s: %d numbers agree with PyTorch f64 (rtol %g)" %
              (backend, len(got), rtol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
