#!/usr/bin/env python3
"""Train the RNN of dsl_examples/loops/rnn_echo.grad from Python
(docs/Python.md): the Python side of dsl_examples/rnn_train/main.cpp.

The model is the gradc function `loss`, whose `for` loop carries the RNN's
hidden state. The module's code is the loop IR's C++ printer's
(--lower=loops: the per-op emitters have no loops); gradc_torch runs
`loss_fwd` forward and `loss_bwd` backward (the split form, docs/ABI.md).
The weights are torch nn.Parameters that torch.optim.Adam steps; each step
draws a fresh batch of random sequences, and the task is to echo the
input three steps late. Prints the loss on a fixed held-out batch every
--report steps.

    python3 dsl_examples/python/rnn_train.py [--steps N]
"""

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "runtime", "python"))

import torch  # noqa: E402

import gradc_build  # noqa: E402
import gradc_torch  # noqa: E402

T, B, H, DELAY = 20, 32, 16, 3


def batch(generator):
    """Sequences uniform in [-1, 1], shaped [T, B, 1], and their echo."""
    xs = 2 * torch.rand(T, B, 1, generator=generator) - 1
    ys = torch.zeros_like(xs)
    ys[DELAY:] = xs[:-DELAY]
    return xs, ys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--report", type=int, default=50)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(2026)
    module = gradc_build.load(
        os.path.join(HERE, "..", "loops", "rnn_echo.grad"), backend="cpp",
        options=["--lower=loops"])
    fns = gradc_torch.wrap(module)
    # Uniform in +-1/sqrt(fan-in), as torch.nn.RNN initialises.
    def init(*shape, fan):
        return (2 * torch.rand(*shape, generator=g) - 1) / math.sqrt(fan)

    model = gradc_torch.Layer(fns.loss, w=init(1, H, fan=1),
                              u=init(H, H, fan=H), b=init(H, fan=H),
                              v=init(H, 1, fan=H), c=init(1, fan=H))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    h0 = torch.zeros(B, H)
    held_xs, held_ys = batch(g)
    for step in range(args.steps + 1):
        if step % args.report == 0 or step == args.steps:
            with torch.no_grad():
                held = model(held_xs, ys=held_ys, h0=h0)
            print(f"step {step:4d}  held-out loss {held.item():.5f}",
                  flush=True)
        if step == args.steps:
            break
        xs, ys = batch(g)
        optimizer.zero_grad()
        model(xs, ys=ys, h0=h0).backward()
        optimizer.step()


if __name__ == "__main__":
    main()
