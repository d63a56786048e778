#!/usr/bin/env python3
"""The gradc benchmark: hand-written C++, gradc's two backends and PyTorch.

For each kernel of bench/kernels (NAME.grad beside NAME.cpp, the harness
that holds the hand-written reference):

1. compiles NAME.grad with gradc twice, timed: the C++ backend
   (--emit=cpp --module-name=NAME_cpp, then g++ -O3 -march=native
   -DGRADC_USE_BLAS; --lower=loops: the loop IR's C++ printer instead) and
   the LLVM backend (--emit=obj --blas --module-name=NAME_llvm, the loop
   IR's LLVM printer), both with --value-and-grad (--no-blas: without
   BLAS), and links them with the harness into one program;
2. makes the inputs (NumPy, fixed seed) and writes them for the harness;
3. computes the reference value and gradients with PyTorch in f64, and
   times PyTorch's f32 forward and forward+backward with 2 threads and
   with 1 (in this process: PyTorch is a separate process from the C++
   harness);
4. runs the harness, which times hand C++, gradc C++ and gradc LLVM
   interleaved in one process and writes every result;
5. checks every result against the f64 reference: the largest absolute
   error of each array over its largest absolute reference value must be
   at most 1e-4 (the value, and each gradient);
6. prints one table per kernel.

Exit status 0 when every result is right, 1 otherwise. --quick runs tiny
sizes and 3 rounds: a check that everything builds and agrees, not a
measurement. docs/Performance.md says how to read the tables.
"""

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOLERANCE = 1e-4


# --------------------------------------------------------------------------
# The kernels: sizes (full and --quick), inputs, the PyTorch function.
# Each `inputs` returns (ordered dict name -> array, names to differentiate);
# each `torch_fn` maps the dict of tensors to the value (a scalar, or for k4
# one value per pool entry).
# --------------------------------------------------------------------------

def mlp_inputs(rng, b, i, h, o, x_scale):
    return {
        "x": rng.uniform(-x_scale, x_scale, (b, i)).astype(np.float32),
        "w1": (rng.standard_normal((i, h)) / math.sqrt(i)).astype(np.float32),
        "b1": (0.1 * rng.standard_normal(h)).astype(np.float32),
        "w2": (rng.standard_normal((h, o)) / math.sqrt(h)).astype(np.float32),
        "b2": (0.1 * rng.standard_normal(o)).astype(np.float32),
        "labels": rng.integers(0, o, b).astype(np.int32),
    }, ["w1", "b1", "w2", "b2"]


def mlp_torch(t, F):
    import torch
    h = torch.tanh(t["x"] @ t["w1"] + t["b1"])
    z = h @ t["w2"] + t["b2"]
    return F.cross_entropy(z, t["labels"].long())


def k2_torch(t, F):
    import torch
    x = t["x"]
    return torch.sum(torch.sigmoid(x) * torch.tanh(x) +
                     torch.exp(-x * x) * torch.sin(x))


def k3_torch(t, F):
    import torch
    return torch.logsumexp(t["x"], dim=1).sum()


def k4_torch(t, F):
    import torch
    x, w = t["x"], t["w"]
    if x.dim() == 1:
        return torch.tanh(w @ x).sum()
    return torch.tanh(torch.einsum("pij,pj->pi", w, x)).sum(dim=1)


def layer_norm(x, g, b):
    import torch
    mu = x.mean(dim=1, keepdim=True)
    d = x - mu
    var = (d * d).mean(dim=1, keepdim=True)
    return d / torch.sqrt(var + 1e-5) * g + b


def k5_torch(t, F):
    import torch
    y = layer_norm(t["x"], t["gamma"], t["beta"])
    return torch.sum(y * t["c"])


def block_inputs(rng, sizes):
    (T,) = sizes
    D, Fw = 64, 256
    n = lambda *s: rng.standard_normal(s).astype(np.float32)
    return {
        "x": n(T, D), "g1": (1 + 0.1 * n(D)), "b1": 0.1 * n(D),
        "wq": n(D, D) / 8, "wk": n(D, D) / 8, "wv": n(D, D) / 8,
        "g2": (1 + 0.1 * n(D)), "b2": 0.1 * n(D),
        "w1": n(D, Fw) / 8, "w2": n(Fw, D) / 16, "c": n(T, D),
    }, ["g1", "b1", "wq", "wk", "wv", "g2", "b2", "w1", "w2"]


def block_torch(t, F):
    import torch
    n1 = layer_norm(t["x"], t["g1"], t["b1"])
    q, k, v = n1 @ t["wq"], n1 @ t["wk"], n1 @ t["wv"]
    a = torch.softmax(q @ k.T * 0.125, dim=1) @ v
    h = t["x"] + a
    n2 = layer_norm(h, t["g2"], t["b2"])
    y = h + torch.tanh(n2 @ t["w1"]) @ t["w2"]
    return torch.sum(y * t["c"])


def normal(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


KERNELS = {
    "k1": dict(
        sizes=[64], quick=[4], names="B",
        inputs=lambda rng, s: mlp_inputs(rng, s[0], 784, 256, 10, 1.0),
        torch=mlp_torch),
    "k2": dict(
        sizes=[1000000], quick=[1003], names="N",
        inputs=lambda rng, s: ({"x": normal(rng, s[0], 2.0)}, ["x"]),
        torch=k2_torch),
    "k3": dict(
        sizes=[1000, 1000], quick=[5, 37], names="R, C",
        inputs=lambda rng, s: ({"x": normal(rng, (s[0], s[1]), 2.0)}, ["x"]),
        torch=k3_torch),
    # K4's harness calls the kernel once per entry of a pool of P inputs;
    # its times are per call.
    "k4": dict(
        sizes=[1024], quick=[16], names="pool P", per_call=True,
        inputs=lambda rng, s: ({"x": normal(rng, (s[0], 4)),
                                "w": normal(rng, (s[0], 4, 4), 0.5)},
                               ["x", "w"]),
        torch=k4_torch),
    "k5": dict(
        sizes=[256, 1024], quick=[3, 40], names="R, C",
        inputs=lambda rng, s: ({"x": normal(rng, (s[0], s[1]), 2.0),
                                "gamma": 1 + normal(rng, s[1], 0.1),
                                "beta": normal(rng, s[1], 0.1),
                                "c": normal(rng, (s[0], s[1]))},
                               ["x", "gamma", "beta"]),
        torch=k5_torch),
    "spiral": dict(
        sizes=[200, 64], quick=[6, 5], names="B, H",
        inputs=lambda rng, s: mlp_inputs(rng, s[0], 2, s[1], 2, 1.0),
        torch=mlp_torch),
    "block": dict(
        sizes=[128], quick=[5], names="T",
        inputs=block_inputs, torch=block_torch),
}


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------

def run(cmd, **kw):
    """Runs cmd; returns its wall time in ms, or exits with its output."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    ms = (time.perf_counter() - start) * 1e3
    if proc.returncode != 0:
        sys.stderr.write("bench: command failed: %s\n%s%s" %
                         (" ".join(cmd), proc.stdout, proc.stderr))
        sys.exit(1)
    return ms, proc.stdout


def build(name, args, work):
    """Compiles the kernel both ways and links the harness; returns the
    compile times in ms."""
    grad = os.path.join(HERE, "kernels", name + ".grad")
    gradc = args.gradc
    cxx = [args.cxx, "-std=c++17", "-O3", "-march=native",
           "-I", os.path.join(ROOT, "runtime", "include"), "-I", work]
    cxx += args.cxxflags.split()
    times = {}
    o = lambda f: os.path.join(work, f)
    vg = ["--value-and-grad"]
    # BLAS as gradc_add_module uses it where OpenBLAS is found.
    blas_cpp = [] if args.no_blas else ["-DGRADC_USE_BLAS"]
    blas_llvm = [] if args.no_blas else ["--blas"]
    times["gradc --emit=cpp"], _ = run(
        [gradc, grad, "--emit=cpp", "--module-name=%s_cpp" % name,
         "-o", o(name + "_cpp.cpp")] + vg +
        (["--lower=" + args.lower] if args.lower else []))
    run([gradc, grad, "--emit=header", "--module-name=%s_cpp" % name,
         "-o", o(name + "_cpp.h")] + vg)
    times["g++ -O3 of it"], _ = run(
        cxx + blas_cpp + ["-c", o(name + "_cpp.cpp"), "-o", o(name + "_cpp.o")])
    times["gradc --emit=obj"], _ = run(
        [gradc, grad, "--emit=obj", "--module-name=%s_llvm" % name,
         "-o", o(name + "_llvm.o")] + vg + blas_llvm)
    run([gradc, grad, "--emit=header", "--module-name=%s_llvm" % name,
         "-o", o(name + "_llvm.h")] + vg)
    run(cxx + ["-I", os.path.join(HERE, "harness"),
               os.path.join(HERE, "kernels", name + ".cpp"),
               o(name + "_cpp.o"), o(name + "_llvm.o"),
               "-o", o(name + "_bench")] + args.libs.split())
    return times


# --------------------------------------------------------------------------
# PyTorch: reference and timings
# --------------------------------------------------------------------------

def torch_reference(spec, arrays, wrt):
    """[value array, gradient arrays...] in f64, or None without torch."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    t = {}
    for k, a in arrays.items():
        v = torch.from_numpy(a.astype(np.float64) if a.dtype == np.float32
                             else a)
        t[k] = v.requires_grad_(k in wrt)
    value = spec["torch"](t, F)
    grads = torch.autograd.grad(value.sum(), [t[k] for k in wrt])
    return [np.atleast_1d(value.detach().numpy()).ravel()] + \
        [g.numpy().ravel() for g in grads]


def torch_times(spec, arrays, wrt, rounds, threads, stat):
    """Median (or least) ns of f32 forward and forward+backward,
    interleaved."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    per_call = spec.get("per_call", False)
    t = {}
    for k, a in arrays.items():
        if per_call:
            a = a[0]
        t[k] = torch.from_numpy(np.ascontiguousarray(a)).requires_grad_(
            k in wrt)
    params = [t[k] for k in wrt]
    fn = spec["torch"]

    def fwd():
        with torch.no_grad():
            fn(t, F)

    def fwd_bwd():
        torch.autograd.grad(fn(t, F), params)

    calls = {}
    for f in (fwd, fwd_bwd):
        f()
        start = time.perf_counter()
        f()
        once = time.perf_counter() - start
        calls[f] = max(1, int(2e-3 / max(once, 1e-9)))
    samples = {fwd: [], fwd_bwd: []}
    for _ in range(rounds):
        for f in (fwd, fwd_bwd):
            start = time.perf_counter()
            for _ in range(calls[f]):
                f()
            samples[f].append((time.perf_counter() - start) * 1e9 / calls[f])
    pick = min if stat == "min" else statistics.median
    return pick(samples[fwd]), pick(samples[fwd_bwd])


# --------------------------------------------------------------------------
# Checking and reporting
# --------------------------------------------------------------------------

def max_rel_error(got, ref):
    """The largest absolute error over the largest absolute reference value,
    per array; the worst of them."""
    worst = 0.0
    for g, r in zip(got, ref):
        if g.shape != r.shape:
            return math.inf
        scale = max(float(np.max(np.abs(r))), 1e-30) if r.size else 1.0
        err = float(np.max(np.abs(g.astype(np.float64) - r))) if r.size else 0
        worst = max(worst, err / scale if np.isfinite(err) else math.inf)
    return worst


def read_outputs(path, ref, kind):
    """The arrays a harness wrote for one implementation, split like the
    reference: `fwd` wrote the value, `grad` the gradients, `vg` both."""
    parts = {"fwd": ref[:1], "grad": ref[1:], "vg": ref}[kind]
    flat = np.fromfile(path, dtype=np.float32)
    out, at = [], 0
    for r in parts:
        out.append(flat[at:at + r.size])
        at += r.size
    if at != flat.size:
        return None, parts
    return out, parts


def fmt_time(ns):
    if ns is None:
        return "-"
    if ns < 1e3:
        return "%.1f ns" % ns
    if ns < 1e6:
        return "%.1f us" % (ns / 1e3)
    return "%.2f ms" % (ns / 1e6)


def fmt_ratio(a, b):
    return "%.2fx" % (a / b) if a is not None and b else "-"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and 3 rounds: check, do not measure")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--gradc", help="the gradc binary (default: in build dir)")
    p.add_argument("--work", help="scratch directory (default: BUILD/bench)")
    p.add_argument("--kernels", default=",".join(KERNELS),
                   help="comma list of kernels (default: all)")
    p.add_argument("--rounds", type=int, default=31)
    p.add_argument("--stat", choices=["median", "min"], default="median",
                   help="which time of the rounds to report (min is steadier "
                   "on a loaded machine)")
    p.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    p.add_argument("--cxxflags", default="",
                   help="extra flags for the C++ backend and the harness")
    p.add_argument("--libs", default="-lopenblas")
    p.add_argument("--lower", default="",
                   help="'loops': the C++ column is the loop IR's printer "
                        "(gradc --emit=cpp --lower=loops) instead of the "
                        "default emitter")
    p.add_argument("--no-blas", action="store_true",
                   help="gradc's code without BLAS (the hand-written "
                   "references always use it)")
    p.add_argument("--no-torch", action="store_true",
                   help="no PyTorch timings (the f64 reference still runs)")
    args = p.parse_args()
    args.gradc = args.gradc or os.path.join(args.build_dir, "compiler",
                                            "tools", "gradc", "gradc")
    work_root = args.work or os.path.join(args.build_dir, "bench")
    rounds = 3 if args.quick else args.rounds
    ok = True
    try:
        import torch
        have_torch = True
        torch_version = torch.__version__
    except ImportError:
        have_torch = False
    print("gradc benchmark%s: %s time per call over %d interleaved "
          "rounds; ratios to hand-written value+grad" %
          (" (--quick: sizes too small to mean anything)" if args.quick
           else "", args.stat, rounds))
    for name in args.kernels.split(","):
        spec = KERNELS[name]
        sizes = spec["quick"] if args.quick else spec["sizes"]
        work = os.path.join(work_root, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        compile_ms = build(name, args, work)
        rng = np.random.default_rng(20261201)
        arrays, wrt = spec["inputs"](rng, sizes)
        for k, a in arrays.items():
            a.tofile(os.path.join(work, k + ".bin"))
        ref = torch_reference(spec, arrays, wrt)
        if ref is None:
            print("bench: PyTorch is needed for the reference", file=sys.stderr)
            return 1
        cmd = [os.path.join(work, name + "_bench"), "--dir=" + work,
               "--rounds=%d" % rounds] + ["--size=%d" % s for s in sizes]
        if args.quick:
            cmd.append("--quick")
        # Single-threaded: OpenBLAS would otherwise start a thread per core
        # (docs/Performance.md).
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        _, out = run(cmd, env=env)
        times, files = {}, {}
        for line in out.splitlines():
            impl, median, least = line.split()
            ns = least if args.stat == "min" else median
            # The harness names gradc's code after its module (k1_cpp_fwd).
            key = impl[len(name) + 1:] if impl.startswith(name + "_") else impl
            files[key] = os.path.join(work, "out_%s.bin" % impl)
            times[key] = float(ns) / (sizes[0] if spec.get("per_call")
                                      else 1)
        errors = {}
        for impl in times:
            path = files[impl]
            kind = impl.rsplit("_", 1)[1]
            got, parts = read_outputs(path, ref, kind)
            errors[impl] = (math.inf if got is None
                            else max_rel_error(got, parts))
        torch_rows = []
        if have_torch and not args.no_torch:
            for threads in (2, 1):
                f, fb = torch_times(spec, arrays, wrt, rounds, threads,
                                    args.stat)
                torch_rows.append(("PyTorch %s, %d thr" %
                                   (torch_version.split("+")[0], threads),
                                   f, fb))
        # The table.
        base = times["hand_vg"]
        size_text = ", ".join("%s=%d" % (n.strip(), s) for n, s in
                              zip(spec["names"].split(","), sizes))
        print("\n%s (%s)%s" % (name.upper(), size_text,
                               ", per call" if spec.get("per_call") else ""))
        print("| implementation | forward | gradient | value+grad | "
              "grad / hand v+g | v+g / hand v+g | grad / fwd | max rel err |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        rows = [("hand C++ (OpenBLAS)", "hand"), ("gradc C++ backend", "cpp"),
                ("gradc LLVM backend", "llvm")]
        for label, key in rows:
            fwd, grad, vg = (times.get("%s_%s" % (key, k))
                             for k in ("fwd", "grad", "vg"))
            err = max(v for k, v in errors.items()
                      if k.startswith(key + "_"))
            print("| %s | %s | %s | %s | %s | %s | %s | %.1e%s |" % (
                label, fmt_time(fwd), fmt_time(grad), fmt_time(vg),
                fmt_ratio(grad, base), fmt_ratio(vg, base),
                fmt_ratio(grad if grad else vg, fwd), err,
                "" if err <= TOLERANCE else " FAIL"))
            ok &= err <= TOLERANCE
        for label, f, fb in torch_rows:
            print("| %s | %s | - | %s | - | %s | %s | - |" % (
                label, fmt_time(f), fmt_time(fb), fmt_ratio(fb, base),
                fmt_ratio(fb, f)))
        print("compile: " + ", ".join("%s %.0f ms" % kv
                                      for kv in compile_ms.items()))
    print("\n%s" % ("all results agree with PyTorch f64 within %g" % TOLERANCE
                    if ok else "FAIL: some result differs from PyTorch f64"))
    if have_torch and not args.no_torch and not args.quick:
        # The cost of a call from Python (docs/Python.md), on K4's sizes.
        print("\nCalls from Python (bench/python_overhead.py)")
        sys.stdout.flush()
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "bench", "python_overhead.py")],
                       check=False, env=dict(os.environ, GRADC=args.gradc))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
