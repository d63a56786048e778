#!/usr/bin/env python3
"""Train a PyTorch model with a gradc layer under DistributedDataParallel.

The model is a gradc block (dsl_examples/split_layer.grad: tanh(x @ w1 +
b1) @ w2, differentiated by gradc through block_fwd/block_bwd) followed by
PyTorch's cross-entropy, on two interleaved spirals. It trains it twice
with the same initial weights and the same global batches:

  1. in one process, on batches of 2 B rows;
  2. under torch.nn.parallel.DistributedDataParallel with the gloo backend,
     in --world-size processes (torch.multiprocessing.spawn) that talk over
     127.0.0.1 only, each on its B rows of every batch.

DDP averages the gradients of the processes, which is the gradient of the
mean loss over the whole batch, so both runs follow the same loss curve up
to rounding. It prints both curves and exits 1 if they differ by more than
--tolerance. The same script scales past one machine: start it with a
MASTER_ADDR every machine reaches (docs/Python.md, "Distributed training").

    python3 dsl_examples/python/ddp_train.py [--steps N] [--world-size 2]
"""

import argparse
import datetime
import json
import math
import os
import socket
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "runtime", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import gradc_build  # noqa: E402
import gradc_torch  # noqa: E402

GRAD_FILE = os.path.join(HERE, "..", "split_layer.grad")


class Classifier(torch.nn.Module):
    """A gradc block (2 -> H tanh -> 2 logits) and a PyTorch loss."""

    def __init__(self, module, hidden, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.block = gradc_torch.Layer(
            gradc_torch.Function(module, "block"),
            w1=3 * torch.randn(2, hidden, generator=g),
            b1=torch.zeros(hidden),
            w2=torch.randn(hidden, 2, generator=g) / math.sqrt(hidden))

    def forward(self, x, labels):
        return torch.nn.functional.cross_entropy(self.block(x), labels)


def data(steps, global_batch):
    """`steps` batches of two-spiral points, the same in every process."""
    g = torch.Generator().manual_seed(7)
    n = steps * global_batch
    c = torch.randint(0, 2, (n,), generator=g)
    r = 0.1 + 0.9 * torch.rand(n, generator=g)
    angle = 3 * math.pi * r + c * math.pi
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], 1)
    x = x + 0.02 * torch.randn(x.shape, generator=g)
    return x.view(steps, global_batch, 2), c.view(steps, global_batch)


def train(model, xs, ys, lr, reduce_loss=None):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for x, y in zip(xs, ys):
        optimizer.zero_grad()
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        losses.append(reduce_loss(loss.detach()) if reduce_loss
                      else loss.item())
    return losses


def worker(rank, world, port, args, out_path):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # A process that cannot reach the others fails within a minute instead
    # of waiting for gloo's default of half an hour.
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    module = gradc_build.load(GRAD_FILE)  # built by the parent: imports only
    model = DistributedDataParallel(Classifier(module, args.hidden, seed=3))
    xs, ys = data(args.steps, world * args.batch)
    mine = slice(rank * args.batch, (rank + 1) * args.batch)

    def mean_over_ranks(loss):
        dist.all_reduce(loss)
        return loss.item() / world

    losses = train(model, xs[:, mine], ys[:, mine], args.lr, mean_over_ranks)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(losses, f)
    dist.barrier()
    # Leave without tearing the process group down. In PyTorch 1.13 (Debian
    # 12's) ProcessGroupGloo's destructor joins gloo's worker thread while
    # holding the GIL, and that thread, freeing the last tensor of an
    # all-reduce, waits for the GIL: a deadlock that a loaded machine hits
    # now and then (seen under gdb in the doc test). The losses are written
    # and every rank has passed the barrier, so nothing is lost.
    sys.stdout.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32,
                        help="rows per process and step (B)")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    world = args.world_size

    module = gradc_build.load(GRAD_FILE)
    torch.set_num_threads(1)
    xs, ys = data(args.steps, world * args.batch)
    single = train(Classifier(module, args.hidden, seed=3), xs, ys, args.lr)

    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "losses.json")
        mp.spawn(worker, args=(world, free_port(), args, out_path),
                 nprocs=world, join=True)
        with open(out_path) as f:
            distributed = json.load(f)

    worst = 0.0
    print(f"step  1 process, batch {world * args.batch}   "
          f"{world} processes (DDP, gloo), batch {args.batch} each")
    for step, (a, b) in enumerate(zip(single, distributed)):
        worst = max(worst, abs(a - b))
        if step % 10 == 0 or step == len(single) - 1:
            print(f"{step:4d}  loss {a:.6f}              loss {b:.6f}")
    print(f"max difference {worst:.2e} over {len(single)} steps")
    if len(distributed) != len(single) or worst > args.tolerance:
        print("FAIL: the loss curves differ")
        return 1
    print("ok: the same loss curve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
