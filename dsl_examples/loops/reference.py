"""Runs the loop examples of dsl_examples/loops/ with gradc and compares their
values and gradients with PyTorch in f64.

    reference.py GRADC EXAMPLE [--backend NAME] [--dtype f64|f32] [SIZE=N ...]

EXAMPLE is one of rnn, echo (rnn_echo.grad), gmm, lstm, rk4. The inputs
are seeded random numbers of the given sizes (defaults: small, as the
tests use); the program is run as written (--dtype f64) or with every f64
made f32 (--dtype f32), or the other way for rnn.grad and rnn_echo.grad,
which are f32 as written. Values and gradients must agree to a relative
1e-6 in f64 and 1e-4 in f32. Another backend is one more --backend.
Prints one line per compared number group and exits 1 on the first
mismatch.
"""

import math
import os
import re
import subprocess
import sys
import tempfile

import torch

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))


def literal(t):
    """A tensor as a call literal: nested brackets, full precision."""
    if isinstance(t, (int, float)):
        return repr(t)
    if t.dim() == 0:
        return repr(t.item())
    return "[" + ", ".join(literal(row) for row in t) + "]"


def rnn(sizes, gen):
    T, B, D, H = (sizes.get(k, v) for k, v in
                  (("T", 5), ("B", 2), ("D", 3), ("H", 4)))
    xs = torch.randn(T, B, D, generator=gen)
    h0 = torch.randn(B, H, generator=gen) * 0.5
    w = (torch.randn(D, H, generator=gen) * 0.5).requires_grad_()
    u = (torch.randn(H, H, generator=gen) * 0.5).requires_grad_()
    h = h0
    for t in range(T):
        h = torch.tanh(xs[t] @ w + h @ u)
    loss = (h * h).sum()
    loss.backward()
    args = [xs, h0, w.detach(), u.detach()]
    return "rnn", args, [loss, w.grad, u.grad], ["rnn_checkpointed"]


def echo(sizes, gen):
    """rnn_echo.grad's loss: the trained RNN of dsl_examples/rnn_train."""
    T, B, D, O, H = (sizes.get(k, v) for k, v in
                     (("T", 6), ("B", 2), ("D", 2), ("O", 2), ("H", 3)))
    xs = torch.randn(T, B, D, generator=gen)
    ys = torch.randn(T, B, O, generator=gen)
    h0 = torch.randn(B, H, generator=gen) * 0.5
    params = [(torch.randn(*s, generator=gen) * 0.5).requires_grad_()
              for s in ((D, H), (H, H), (H,), (H, O), (O,))]
    w, u, b, v, c = params
    h, errors = h0, []
    for t in range(T):
        h = torch.tanh(xs[t] @ w + h @ u + b)
        e = h @ v + c - ys[t]
        errors.append(e * e)
    loss = torch.stack(errors).mean()
    loss.backward()
    args = [xs, ys, h0] + [p.detach() for p in params]
    return "loss", args, [loss] + [p.grad for p in params], []


def gmm(sizes, gen):
    d, k, n = (sizes.get(s, v) for s, v in (("d", 2), ("K", 5), ("N", 10)))
    p = d + d * (d - 1) // 2
    x = torch.randn(n, d, generator=gen)
    alphas = torch.randn(k, generator=gen).requires_grad_()
    means = torch.rand(k, d, generator=gen).requires_grad_()
    icf = (torch.randn(k, p, generator=gen) * 0.5).requires_grad_()
    gamma, m = 1.0, 0.0 + d  # ADBench's wishart gamma and m
    # ADBench's objective, written after its PyTorch module.
    qs = icf[:, :d]
    ls = torch.zeros(k, d, d)
    pos, tri = d, torch.zeros(d, d, dtype=torch.int64)
    for c in range(d):
        for r in range(c + 1, d):
            tri[r, c] = pos
            pos += 1
    mask = (torch.arange(d)[:, None] > torch.arange(d)[None, :]).double()
    ls = icf[:, tri] * mask
    centered = x[:, None, :] - means[None]
    qx = torch.exp(qs)[None] * centered + torch.einsum("kij,nkj->nki", ls,
                                                       centered)
    inner = alphas + qs.sum(1) - 0.5 * (qx ** 2).sum(2)
    slse = torch.logsumexp(inner, 1).sum() - n * torch.logsumexp(alphas, 0)
    wn = d + m + 1
    const = -n * d * 0.5 * math.log(2 * math.pi) - k * (
        wn * d * math.log(gamma / math.sqrt(2)) -
        torch.special.multigammaln(torch.tensor(0.5 * wn), d).item())
    prior = (0.5 * gamma * gamma * ((torch.exp(qs) ** 2).sum(1) +
                                    (icf[:, d:] ** 2).sum(1)) -
             m * qs.sum(1)).sum()
    loss = const + slse + prior
    loss.backward()
    args = [x, alphas.detach(), means.detach(), icf.detach(),
            torch.arange(d), tri, mask, torch.eye(d), gamma, m, const]
    return "gmm", args, [loss, alphas.grad, means.grad, icf.grad], []


def lstm(sizes, gen):
    L, b, c = (sizes.get(s, v) for s, v in (("l", 2), ("b", 3), ("c", 5)))
    main = (torch.randn(L, 2, 4, b, generator=gen) * 0.5).requires_grad_()
    extra = (torch.randn(3, b, generator=gen) * 0.5).requires_grad_()
    state = torch.randn(L, 2, b, generator=gen) * 0.5
    seq = torch.randn(c, b, generator=gen)
    # ADBench's loss, written after its PyTorch module.
    s = [state[i, j] for i in range(L) for j in range(2)]
    total, count = 0.0, 0
    for t in range(c - 1):
        x = seq[t] * extra[0]
        new = []
        for i in range(L):
            w, bias, h, cl = main[i, 0], main[i, 1], s[2 * i], s[2 * i + 1]
            gates = torch.cat((x, h, x, h)) * w.reshape(-1) + bias.reshape(-1)
            forget = torch.sigmoid(gates[0:b])
            ingate = torch.sigmoid(gates[b:2 * b])
            outgate = torch.sigmoid(gates[2 * b:3 * b])
            change = torch.tanh(gates[3 * b:])
            cl = cl * forget + ingate * change
            h = outgate * torch.tanh(cl)
            new += [h, cl]
            x = h
        s = new
        ypred = x * extra[1] + extra[2]
        ynorm = ypred - torch.log(2 + torch.exp(ypred).sum())
        total = total + (seq[t + 1] * ynorm).sum()
        count += b
    loss = -total / count
    loss.backward()
    args = [main.detach(), extra.detach(), state, seq[:-1], seq[1:]]
    return "lstm", args, [loss, main.grad, extra.grad], []


def rk4(sizes, gen):
    x0 = torch.tensor([1.0, 0.0], requires_grad=True)
    p = torch.tensor([2.0, 0.3], requires_grad=True)
    dt = 0.01

    def field(x):
        return torch.stack([x[1], -p[0] * torch.sin(x[0]) - p[1] * x[1]])

    x = x0
    for t in range(1000):  # the program's trip
        k1 = field(x)
        k2 = field(x + 0.5 * dt * k1)
        k3 = field(x + 0.5 * dt * k2)
        k4 = field(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    loss = (x * x).sum()
    loss.backward()
    return ("pendulum", [x0.detach(), p.detach(), dt],
            [loss, x0.grad, p.grad], ["pendulum_every", "pendulum_binomial"])


FILES = {"rnn": "rnn.grad", "echo": "rnn_echo.grad", "gmm": "adbench_gmm.grad",
         "lstm": "adbench_lstm.grad", "rk4": "rk4_checkpoint.grad"}
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf")


def flat(t):
    if isinstance(t, float):
        return [t]
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def main():
    args = sys.argv[1:]
    gradc, example = args[0], args[1]
    backends, dtype, sizes = [], None, {}
    i = 2
    while i < len(args):
        if args[i] == "--backend":
            backends.append(args[i + 1])
            i += 2
        elif args[i] == "--dtype":
            dtype = args[i + 1]
            i += 2
        else:
            key, value = args[i].split("=")
            sizes[key] = int(value)
            i += 1
    backends = backends or ["interp"]
    gen = torch.Generator().manual_seed(15)
    fn, inputs, want, others = globals()[example](sizes, gen)
    source = open(os.path.join(HERE, FILES[example])).read()
    # rnn.grad and rnn_echo.grad are f32 as written; the others f64.
    native = "f32" if example in ("rnn", "echo") else "f64"
    dtype = dtype or native
    if dtype != native:
        source = source.replace(native, dtype)
    rtol = 1e-6 if dtype == "f64" else 1e-4
    call = "(" + ", ".join(literal(a) for a in inputs) + ")"
    with tempfile.NamedTemporaryFile("w", suffix=".grad", delete=False) as f:
        f.write(source)
        path = f.name
    try:
        for backend in backends:
            # The calls go in a response file (LLVM's @FILE): ADBench's
            # sizes make arguments longer than a command line may be.
            with open(path + ".rsp", "w") as rsp:
                for name in [fn] + others:
                    for callee in (name, name + "_grad"):
                        rsp.write("--call '" + callee + call + "'\n")
            cmd = [gradc, "run", path, "--backend=" + backend, "@" + path +
                   ".rsp"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr)
            # Each call's results follow a line "# CALL".
            blocks = re.split(r"^# .*$", out.stdout, flags=re.M)[1:]
            if len(blocks) != 2 * (1 + len(others)):
                sys.exit("unexpected output:\n" + out.stdout)
            expected = [v for w in want for v in flat(w)]
            for name, (value, grad) in zip([fn] + others,
                                           zip(blocks[0::2], blocks[1::2])):
                got = [float(v) for v in NUMBER.findall(value + grad)]
                if len(got) != len(expected):
                    sys.exit(f"{name}: printed {len(got)} numbers, expected "
                             f"{len(expected)}")
                worst = 0.0
                for j, (g, w) in enumerate(zip(got, expected)):
                    err = abs(g - w) / max(abs(w), 1e-3)
                    worst = max(worst, err)
                    if err > rtol:
                        sys.exit(f"{name} ({backend}, {dtype}): number {j}: "
                                 f"got {g!r}, PyTorch f64 {w!r}")
                print(f"{name} {backend} {dtype}: {len(got)} numbers agree "
                      f"with PyTorch f64 (worst relative {worst:.1e}, "
                      f"tolerance {rtol:g})")
    finally:
        os.unlink(path)
        if os.path.exists(path + ".rsp"):
            os.unlink(path + ".rsp")


if __name__ == "__main__":
    main()
