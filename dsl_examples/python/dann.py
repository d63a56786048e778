#!/usr/bin/env python3
"""Domain-adversarial training in PyTorch with gradc's gradient reversal.

The model is PyTorch (a tanh feature extractor, a label head and a domain
head, as in dsl_examples/dann.grad); between the features and the domain
head sits `reverse_gradient` of dsl_examples/gradient_reversal.grad: the
identity forward, -lambda(p) times the cotangent backward, with lambda(p)
= 2 / (1 + exp(-10 p)) - 1 and p the fraction of training done, computed
by gradc. The domain head learns to tell the labelled source domain from
the unlabelled target domain while the features learn to hide it. Prints
the losses and, at the end, the accuracy of the label head on both
domains and of the domain head (near 0.5 when the features hide the
domain).

    python3 dsl_examples/python/dann.py [--steps N]
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


def domains(n, generator):
    """Two classes of Gaussian blobs; the target domain is the source
    rotated by 30 degrees and shifted."""
    labels = torch.randint(0, 2, (n,), generator=generator)
    centre = torch.stack([2.0 * labels - 1, torch.zeros(n)], 1)
    source = centre + 0.4 * torch.randn(n, 2, generator=generator)
    t = math.radians(30)
    rotation = torch.tensor([[math.cos(t), math.sin(t)],
                             [-math.sin(t), math.cos(t)]])
    target = source @ rotation + torch.tensor([0.5, 1.0])
    return source, labels, target


class DANN(torch.nn.Module):
    def __init__(self, reverse, hidden=16, domain_hidden=16):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Linear(2, hidden),
                                            torch.nn.Tanh())
        self.label_head = torch.nn.Linear(hidden, 2)
        self.domain_head = torch.nn.Sequential(
            torch.nn.Linear(hidden, domain_hidden), torch.nn.Tanh(),
            torch.nn.Linear(domain_hidden, 1))
        self.reverse = reverse  # gradc: f32[N] -> f32[N]

    def domain_logit(self, h, p):
        flat = self.reverse(h.reshape(-1), p)  # forward: h itself
        return self.domain_head(flat.view_as(h)).squeeze(1)

    def forward(self, xs, ys, xt, p):
        hs, ht = self.features(xs), self.features(xt)
        label_loss = torch.nn.functional.cross_entropy(self.label_head(hs), ys)
        softplus = torch.nn.functional.softplus
        domain_loss = softplus(self.domain_logit(hs, p)).mean() + \
            softplus(-self.domain_logit(ht, p)).mean()
        return label_loss, domain_loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    module = gradc_build.load(os.path.join(HERE, "..",
                                           "gradient_reversal.grad"))
    reverse = gradc_torch.Function(module, "reverse_gradient")
    model = DANN(reverse)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(args.steps):
        xs, ys, xt = domains(args.batch, g)
        p = step / args.steps
        label_loss, domain_loss = model(xs, ys, xt, p)
        optimizer.zero_grad()
        (label_loss + domain_loss).backward()
        optimizer.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  label loss {label_loss.item():.4f}  "
                  f"domain loss {domain_loss.item():.4f}", flush=True)
    with torch.no_grad():
        xs, ys, xt = domains(2000, g)
        hs, ht = model.features(xs), model.features(xt)
        source = (model.label_head(hs).argmax(1) == ys).float().mean()
        target = (model.label_head(ht).argmax(1) == ys).float().mean()
        guess = torch.cat([model.domain_head(hs) > 0,
                           model.domain_head(ht) <= 0]).float().mean()
    print(f"source accuracy {source:.3f}")
    print(f"target accuracy {target:.3f}")
    print(f"domain accuracy {1 - guess:.3f}")


if __name__ == "__main__":
    main()
