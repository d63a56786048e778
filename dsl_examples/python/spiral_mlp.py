#!/usr/bin/env python3
"""Train dsl_examples/spiral_mlp.grad from Python (docs/Python.md).

The model is the gradc function `loss` of spiral_mlp.grad; its weights are
torch nn.Parameters and a torch optimizer steps them with the gradient that
gradc's loss_fwd/loss_bwd compute, through gradc_torch. The data are two
interleaved spirals as in spiral_mlp/main.cpp. Prints the loss on all
points every --report steps and the accuracy at the end.

    python3 dsl_examples/python/spiral_mlp.py [--steps N] [--backend cpp]
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


def spirals(points_per_class, generator):
    """Class c's i-th point at radius r in [0.1, 1], angle 3 pi r + c pi,
    plus Gaussian noise of 0.02."""
    xs, labels = [], []
    for c in range(2):
        r = torch.linspace(0.1, 1.0, points_per_class)
        angle = 3 * math.pi * r + c * math.pi
        xy = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], 1)
        xs.append(xy + 0.02 * torch.randn(xy.shape, generator=generator))
        labels.append(torch.full((points_per_class,), c, dtype=torch.int32))
    return torch.cat(xs), torch.cat(labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--report", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--backend", default="llvm", choices=["llvm", "cpp"])
    args = parser.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x, labels = spirals(100, g)

    module = gradc_build.load(os.path.join(HERE, "..", "spiral_mlp.grad"),
                              backend=args.backend)
    fns = gradc_torch.wrap(module)
    h = args.hidden
    # The loss's weights are the layer's parameters; x and labels its inputs.
    model = gradc_torch.Layer(
        fns.loss, w1=3 * torch.randn(2, h, generator=g), b1=torch.zeros(h),
        w2=torch.randn(h, 2, generator=g) / math.sqrt(h), b2=torch.zeros(2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    for step in range(args.steps + 1):
        optimizer.zero_grad()
        loss = model(x, labels=labels)
        if step % args.report == 0 or step == args.steps:
            print(f"step {step:5d}  loss {loss.item():.4f}", flush=True)
        if step == args.steps:
            break
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        logits = fns.logits(x, model.w1, model.b1, model.w2, model.b2)
    accuracy = (logits.argmax(1) == labels).float().mean().item()
    print(f"accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
