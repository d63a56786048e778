#!/usr/bin/env python3
"""The cost of calling a gradc function from Python, beside PyTorch.

K4 is the smallest kernel of the benchmarks,

    @grad fn k4(x: f32[4], w: f32[4, 4]) -> f32 { return sum(tanh(w @ x)) }

so a call is almost all overhead: argument checks, result allocation, the
GIL release, and for torch tensors the NumPy view of each tensor. This
script builds it with gradc (runtime/python/gradc_build.py, LLVM backend)
and prints the time per call of

  - the generated module's k4 and k4_grad on NumPy arrays and on tensors;
  - the same through gradc_torch: a forward and backward pass of autograd;
  - the same maths written in PyTorch: torch.tanh(w @ x).sum(), with and
    without a backward pass.

Self-contained (it finds gradc as gradc_build does: $GRADC, build/, or
$PATH). Usage:

    python3 bench/python_overhead.py [--repeat 5] [--calls 20000]
"""

import argparse
import os
import sys
import tempfile
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "runtime", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gradc_build  # noqa: E402
import gradc_torch  # noqa: E402

K4 = """\
@grad
fn k4(x: f32[4], w: f32[4, 4]) -> f32 {
    return sum(tanh(w @ x))
}
"""


def per_call(fn, calls, repeat):
    """The best (smallest) time per call in microseconds."""
    fn()  # warm up
    times = timeit.repeat(fn, number=calls, repeat=repeat)
    return min(times) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k4.grad")
        with open(path, "w") as f:
            f.write(K4)
        k4 = gradc_build.load(path)
    fns = gradc_torch.wrap(k4)

    rng = np.random.default_rng(0)
    x = rng.standard_normal(4).astype(np.float32)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    wg = wt.clone().requires_grad_()
    assert abs(float(k4.k4(x, w)) - torch.tanh(wt @ xt).sum().item()) < 1e-5

    def gradc_autograd():
        wg.grad = None
        fns.k4(xt, wg).backward()

    def torch_autograd():
        wg.grad = None
        torch.tanh(wg @ xt).sum().backward()

    rows = [
        ("gradc k4, NumPy arrays", lambda: k4.k4(x, w)),
        ("gradc k4, torch tensors", lambda: k4.k4(xt, wt)),
        ("gradc k4_grad, NumPy arrays", lambda: k4.k4_grad(x, w)),
        ("gradc k4_fwd + k4_bwd, NumPy arrays",
         lambda: k4.k4_bwd(x, w, *k4.k4_fwd(x, w), 1.0)),
        ("PyTorch tanh(w @ x).sum()", lambda: torch.tanh(wt @ xt).sum()),
        ("gradc_torch k4 forward + backward", gradc_autograd),
        ("PyTorch forward + backward", torch_autograd),
    ]
    print(f"K4 per-call time from Python (best of {args.repeat} x "
          f"{args.calls} calls, 1 torch thread)")
    for name, fn in rows:
        print(f"  {name:40s} {per_call(fn, args.calls, args.repeat):8.2f} us")


if __name__ == "__main__":
    main()
