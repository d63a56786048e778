#!/usr/bin/env python3
"""The gradc benchmark: hand-written C++, gradc's two backends and PyTorch.

For each kernel of bench/kernels (NAME.grad beside NAME.cpp, the harness
that holds the hand-written reference):

1. compiles NAME.grad with gradc twice, timed: the C++ backend
   (--emit=cpp --module-name=NAME_cpp, then g++ -O3 -march=native
   -DGRADC_USE_BLAS) and the LLVM backend (--emit=obj --blas
   --module-name=NAME_llvm); both print the loop IR, both with
   --value-and-grad (--no-blas: without BLAS), both with FMA contraction
   as g++ -march=native gives the hand-written reference (--fp-contract=
   fast for the LLVM backend; --contract=off: none of the three, each
   multiply and add rounded, as the interpreter), and links them with the
   harness into one program (--threads=N: the C++ compiled and everything
   linked with -fopenmp; --baseline-cpp=GRADC: the LLVM column is instead
   the C++ backend of another gradc binary, say an older build, so that
   two C++ backends are timed in one process, and --baseline-include=DIR
   compiles that code with another checkout's runtime headers;
   --baseline-llvm=GRADC: the C++ column is instead the LLVM backend of
   another gradc binary, so that two LLVM backends are timed in one
   process);
2. makes the inputs (NumPy, fixed seed) and writes them for the harness;
3. computes the reference value and gradients with PyTorch in f64, and
   times PyTorch's f32 forward and forward+backward with 2 threads and
   with 1 (in this process: PyTorch is a separate process from the C++
   harness);
4. runs the harness, which times hand C++, gradc C++ and gradc LLVM
   interleaved in one process and writes every result; with --threads=N
   runs it again with GRADC_NUM_THREADS=N for two more rows, gradc's code
   on N threads (its parallel loops, and OpenBLAS on N threads), against
   the single-threaded hand-written value+grad of the first run;
5. checks every result against the f64 reference: the largest absolute
   error of each array over its largest absolute reference value must be
   at most 1e-4 (the value, and each gradient);
6. prints one table per kernel.

Exit status 0 when every result is right, 1 otherwise. --quick runs tiny
sizes and 3 rounds: a check that everything builds and agrees, not a
measurement. docs/Performance.md says how to read the tables.
"""

import argparse
import ctypes
import math
import os
import shutil
import statistics
import subprocess
import sys
import time


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def newer_openblas_core():
    """The OpenBLAS kernels to ask for when OpenBLAS chose its SSE3
    "Prescott" ones on a CPU with AVX-512 or AVX2: Debian's OpenBLAS
    0.3.21 does that on CPUs newer than it knows (session 17's Emerald
    Rapids), and its BLAS products, gradc's and the references', then
    run 2-4x slower (docs/Performance.md, "Running it"). None when it
    chose well, when OPENBLAS_CORETYPE is set, or when it cannot tell."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return None
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return None
    if core.lower() != "prescott":
        return None
    flags = cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


# OpenBLAS reads OPENBLAS_CORETYPE when it is loaded, and NumPy loads it on
# import: so choose before that, and run this script again with it set
# (the harness and PyTorch inherit it).
if __name__ == "__main__" and "GRADC_BENCH_CORE_CHOSEN" not in os.environ:
    _core = newer_openblas_core()
    if _core:
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, OPENBLAS_CORETYPE=_core,
                       GRADC_BENCH_CORE_CHOSEN="1"))

import numpy as np  # noqa: E402 (after the choice of OpenBLAS's kernels)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOLERANCE = 1e-4

# Issue 14's bar (docs/Performance.md "The bar"): on K1-K5, each backend's
# gradient takes at most 1.1x the hand-written value+grad, at most 2.5x
# its own forward, and K4 at most 25 ns per call.
BAR_KERNELS = ("k1", "k2", "k3", "k4", "k5")
BAR_RATIO, BAR_GRAD_FWD, BAR_K4_NS = 1.1, 2.5, 25.0


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


# The loop workloads of issue 15 (dsl_examples/loops/): ADBench's GMM and
# LSTM objectives. Both columns always use the loop IR's printers (the
# default emitters have no `take` and no loops), and the LLVM column shows
# '-' while its printer cannot compile them (`llvm_optional`).

def gmm_inputs(rng, sizes):
    """ADBench's GMM inputs in its icf layout, and dsl_examples/loops/
    adbench_gmm.grad's index tables (reference.py builds the same)."""
    n, d, k = sizes
    p = d + d * (d - 1) // 2
    tri = np.zeros((d, d), np.int32)
    pos = d
    for c in range(d):
        for r in range(c + 1, d):
            tri[r, c] = pos
            pos += 1
    gamma, m = 1.0, float(d)
    # The constant terms: -nd/2 log 2pi and the Wishart normaliser (its
    # log multivariate gamma summed by hand: no scipy).
    wn = d + m + 1
    a = 0.5 * wn
    lmg = d * (d - 1) / 4 * math.log(math.pi) + sum(
        math.lgamma(a + (1 - j) / 2) for j in range(1, d + 1))
    consts = -n * d * 0.5 * math.log(2 * math.pi) - k * (
        wn * d * math.log(gamma / math.sqrt(2)) - lmg)
    f32 = lambda v: np.asarray(v, np.float32)
    return {
        "x": normal(rng, (n, d)),
        "alphas": normal(rng, k),
        "means": rng.uniform(0, 1, (k, d)).astype(np.float32),
        "icf": normal(rng, (k, p), 0.5),
        "diag": np.arange(d, dtype=np.int32),
        "tri": tri,
        "mask": f32(np.tril(np.ones((d, d)), -1)),
        "eye": f32(np.eye(d)),
        "gamma": f32(gamma), "m": f32(m), "consts": f32(consts),
    }, ["alphas", "means", "icf"]


def gmm_torch(t, F):
    """ADBench's objective as a PyTorch user writes it: one batched
    expression over points and components."""
    import torch
    x, alphas, means, icf = t["x"], t["alphas"], t["means"], t["icf"]
    n, d = x.shape
    qs = icf[:, :d]
    ls = icf[:, t["tri"].long()] * t["mask"]
    centered = x[:, None, :] - means[None]
    qx = torch.exp(qs)[None] * centered + torch.einsum("kij,nkj->nki", ls,
                                                       centered)
    inner = alphas + qs.sum(1) - 0.5 * (qx * qx).sum(2)
    slse = torch.logsumexp(inner, 1).sum() - n * torch.logsumexp(alphas, 0)
    g, m = t["gamma"], t["m"]
    prior = (0.5 * g * g * ((torch.exp(qs) ** 2).sum(1) +
                            (ls ** 2).sum((1, 2))) - m * qs.sum(1)).sum()
    return t["consts"] + slse + prior


def lstm_inputs(rng, sizes):
    """ADBench's LSTM: l layers of b units over a sequence of c elements
    (c - 1 predictions)."""
    l, c, b = sizes
    seq = normal(rng, (c, b))
    return {
        "main": normal(rng, (l, 2, 4, b), 0.5),
        "extra": normal(rng, (3, b), 0.5),
        "state": normal(rng, (l, 2, b), 0.5),
        "xs": np.ascontiguousarray(seq[:-1]),
        "golds": np.ascontiguousarray(seq[1:]),
    }, ["main", "extra"]


def lstm_torch(t, F):
    """ADBench's PyTorch LSTM objective: a Python loop over the steps and
    the layers, the four gates as one elementwise product."""
    import torch
    main, extra, state = t["main"], t["extra"], t["state"]
    xs, golds = t["xs"], t["golds"]
    l, b = main.shape[0], main.shape[3]
    hs = [state[i, 0] for i in range(l)]
    cs = [state[i, 1] for i in range(l)]
    total = 0
    for s in range(xs.shape[0]):
        x = xs[s] * extra[0]
        for i in range(l):
            gates = torch.cat((x, hs[i], x, hs[i])) * main[i, 0].reshape(-1) \
                + main[i, 1].reshape(-1)
            forget = torch.sigmoid(gates[:b])
            ingate = torch.sigmoid(gates[b:2 * b])
            outgate = torch.sigmoid(gates[2 * b:3 * b])
            change = torch.tanh(gates[3 * b:])
            cs[i] = cs[i] * forget + ingate * change
            hs[i] = outgate * torch.tanh(cs[i])
            x = hs[i]
        ypred = x * extra[1] + extra[2]
        ynorm = ypred - torch.log(2 + torch.exp(ypred).sum())
        total = total + (golds[s] * ynorm).sum()
    return -total / golds.numel()


LOOP_KERNELS = {
    # ADBench's GMM 1k set has d in 2..64 and K in 5..200 over n = 1000.
    "gmm": dict(
        sizes=[1000, 10, 25], quick=[10, 3, 5], names="N, D, K",
        inputs=gmm_inputs, torch=gmm_torch,
        llvm_optional=True, hand_label="hand C++"),
    # ADBench's lstm_l2_c1024 (b = 14, its alphabet).
    "lstm": dict(
        sizes=[2, 1024, 14], quick=[2, 5, 3], names="l, c, b",
        inputs=lstm_inputs, torch=lstm_torch,
        llvm_optional=True, hand_label="hand C++",
        torch_rounds=5),
}


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
    **LOOP_KERNELS,
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


# Kernel -> why the LLVM backend did not compile it (`llvm_optional`).
LLVM_SKIPPED = {}


def build(name, args, work, spec=None):
    """Compiles the kernel both ways and links the harness; returns the
    compile times in ms (without an LLVM entry when a kernel marked
    `llvm_optional` does not compile with the LLVM backend)."""
    spec = spec or {}
    grad = os.path.join(HERE, "kernels", name + ".grad")
    gradc = args.gradc
    cxx = [args.cxx, "-std=c++17", "-O3", "-march=native",
           "-I", os.path.join(ROOT, "runtime", "include"), "-I", work]
    cxx += args.cxxflags.split()
    if args.contract == "off":
        cxx.append("-ffp-contract=off")
    if args.threads > 1:
        # PrintCpp's parallel loops are OpenMP pragmas; PrintLLVM's call
        # libgomp's GOMP_parallel, a weak reference that -fopenmp links.
        cxx.append("-fopenmp")
    times = {}
    o = lambda f: os.path.join(work, f)
    vg = ["--value-and-grad"] + args.gradc_flags.split()
    # BLAS as gradc_add_module uses it where OpenBLAS is found.
    blas_cpp = [] if args.no_blas else ["-DGRADC_USE_BLAS"]
    blas_llvm = [] if args.no_blas else ["--blas"]
    blas_llvm.append("--fp-contract=" + args.contract)
    if args.baseline_llvm:
        # The C++ column is another gradc's LLVM backend.
        times["baseline --emit=obj"], _ = run(
            [args.baseline_llvm, grad, "--emit=obj",
             "--module-name=%s_cpp" % name, "-o", o(name + "_cpp.o"),
             "--value-and-grad"] + args.baseline_flags.split() + blas_llvm)
    else:
        times["gradc --emit=cpp"], _ = run(
            [gradc, grad, "--emit=cpp", "--module-name=%s_cpp" % name,
             "-o", o(name + "_cpp.cpp")] + vg)
        times["g++ -O3 of it"], _ = run(
            cxx + blas_cpp +
            ["-c", o(name + "_cpp.cpp"), "-o", o(name + "_cpp.o")])
    run([gradc, grad, "--emit=header", "--module-name=%s_cpp" % name,
         "-o", o(name + "_cpp.h")] + vg)
    objects = [o(name + "_cpp.o"), o(name + "_llvm.o")]
    if args.baseline_cpp:
        times["baseline --emit=cpp"], _ = run(
            [args.baseline_cpp, grad, "--emit=cpp",
             "--module-name=%s_llvm" % name, "-o", o(name + "_llvm.cpp"),
             "--value-and-grad"] + args.baseline_flags.split())
        # The baseline's runtime headers, when given, come first.
        base_inc = (["-I", args.baseline_include]
                    if args.baseline_include else [])
        run(cxx[:1] + base_inc + cxx[1:] + blas_cpp +
            ["-c", o(name + "_llvm.cpp"), "-o", o(name + "_llvm.o")])
        run([gradc, grad, "--emit=header", "--module-name=%s_llvm" % name,
             "-o", o(name + "_llvm.h")] + vg)
    else:
        llvm_cmd = [gradc, grad, "--emit=obj", "--module-name=%s_llvm" % name,
                    "-o", o(name + "_llvm.o")] + vg + blas_llvm
        if spec.get("llvm_optional"):
            start = time.perf_counter()
            llvm = subprocess.run(llvm_cmd, capture_output=True, text=True)
            llvm_ms = (time.perf_counter() - start) * 1e3
        if spec.get("llvm_optional") and llvm.returncode != 0:
            # The harness leaves the LLVM column out (BENCH_NO_LLVM): '-'.
            objects.pop()
            cxx.append("-DBENCH_NO_LLVM")
            LLVM_SKIPPED[name] = (llvm.stderr.strip().splitlines() or
                                  ["exit status %d" % llvm.returncode])[0]
        else:
            times["gradc --emit=obj"] = (llvm_ms if spec.get("llvm_optional")
                                         else run(llvm_cmd)[0])
            run([gradc, grad, "--emit=header", "--module-name=%s_llvm" % name,
                 "-o", o(name + "_llvm.h")] + vg)
    run(cxx + ["-I", os.path.join(HERE, "harness"),
               os.path.join(HERE, "kernels", name + ".cpp")] + objects +
        ["-o", o(name + "_bench")] + args.libs.split())
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


def bar_row(name, label, grad, base, fwd):
    """One backend's figures against issue 14's bar, and whether it meets
    it."""
    ratio, grad_fwd = grad / base, grad / fwd
    met = ratio <= BAR_RATIO and grad_fwd <= BAR_GRAD_FWD
    if name == "k4":
        met &= grad <= BAR_K4_NS
    return (name, label, ratio, grad_fwd, grad, met)


def print_bar(bar, args):
    """The bar's summary: a benchmark, never a test (the exit status only
    says whether the results are right)."""
    if not bar or args.quick or args.baseline_cpp or args.baseline_llvm:
        return
    print("\nIssue 14's bar (gradient <= %.1fx hand value+grad, grad/fwd <= "
          "%.1f, K4 <= %.0f ns), gradc flags: %s" %
          (BAR_RATIO, BAR_GRAD_FWD, BAR_K4_NS, args.gradc_flags or "(none)"))
    print("| kernel | backend | grad / hand v+g | grad / fwd | gradient | met |")
    print("|---|---|---:|---:|---:|---|")
    for name, label, ratio, grad_fwd, grad, met in bar:
        print("| %s | %s | %.2fx | %.2fx | %s | %s |" % (
            name.upper(), label.replace("gradc ", ""), ratio, grad_fwd,
            fmt_time(grad), "yes" if met else "no"))
    print("met on %d of %d" % (sum(r[-1] for r in bar), len(bar)))


def openblas_core():
    """The kernels OpenBLAS chose for this CPU: its BLAS figures (gradc's
    and the references') depend on them. OpenBLAS 0.3.21 runs its SSE3
    "Prescott" kernels on CPUs newer than it knows (an Emerald Rapids,
    session 17); OPENBLAS_CORETYPE=SkylakeX then selects the AVX-512 ones
    (docs/Performance.md, "Running it")."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "unknown (libopenblas.so.0 not loadable)"
    chosen = os.environ.get("OPENBLAS_CORETYPE")
    if not chosen:
        return core
    how = ("set by bench/run.py: OpenBLAS chose Prescott on this CPU"
           if "GRADC_BENCH_CORE_CHOSEN" in os.environ else "from the caller")
    return core + " (OPENBLAS_CORETYPE=%s, %s)" % (chosen, how)


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
    p.add_argument("--baseline-cpp", default="", metavar="GRADC",
                   help="the LLVM column becomes the C++ backend of this "
                        "gradc binary (compare two C++ backends in one run)")
    p.add_argument("--baseline-llvm", default="", metavar="GRADC",
                   help="the C++ column becomes the LLVM backend of this "
                        "gradc binary (compare two LLVM backends in one run)")
    p.add_argument("--baseline-include", default="", metavar="DIR",
                   help="with --baseline-cpp: compile the baseline's code "
                        "with the runtime headers in DIR (a checkout's "
                        "runtime/include: compare two runtimes)")
    p.add_argument("--gradc-flags", default="", metavar="FLAGS",
                   help="extra gradc options for both backends' code, e.g. "
                   "--gradc-flags=--accumulate=f32 (docs/CLI.md)")
    p.add_argument("--baseline-flags", default="", metavar="FLAGS",
                   help="gradc options of --baseline-cpp's (or "
                   "--baseline-llvm's) code (default: "
                   "none), e.g. --baseline-cpp=build/.../gradc with "
                   "--gradc-flags=--accumulate=f32 compares the two orders")
    p.add_argument("--no-blas", action="store_true",
                   help="gradc's code without BLAS (the hand-written "
                   "references always use it)")
    p.add_argument("--threads", type=int, default=1,
                   help="N > 1: also time gradc's code with "
                   "GRADC_NUM_THREADS=N (built with -fopenmp; docs/ABI.md)")
    p.add_argument("--contract", choices=["fast", "off"], default="fast",
                   help="FMA contraction in all three: fast (g++'s default "
                   "under -march=native, gradc --fp-contract=fast) or off "
                   "(-ffp-contract=off; gradc's results then equal the "
                   "interpreter's bit for bit)")
    p.add_argument("--no-torch", action="store_true",
                   help="no PyTorch timings (the f64 reference still runs)")
    args = p.parse_args()
    if args.baseline_cpp and args.baseline_llvm:
        # Each replaces one of this gradc's columns: together they leave
        # nothing of it to compare.
        p.error("--baseline-cpp and --baseline-llvm replace this gradc's "
                "LLVM and C++ columns: pass one of them")
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
          "rounds; ratios to hand-written value+grad; FMA contraction %s" %
          (" (--quick: sizes too small to mean anything)" if args.quick
           else "", args.stat, rounds,
           "on (g++ -march=native, gradc --fp-contract=fast)"
           if args.contract == "fast" else "off (-ffp-contract=off)"))
    print("OpenBLAS core: %s" % openblas_core())
    if args.gradc_flags or args.baseline_flags:
        print("gradc flags: %s%s" % (
            args.gradc_flags or "(none)",
            "; baseline's: " + (args.baseline_flags or "(none)")
            if args.baseline_cpp or args.baseline_llvm else ""))
    bar = []
    for name in args.kernels.split(","):
        spec = KERNELS[name]
        sizes = spec["quick"] if args.quick else spec["sizes"]
        work = os.path.join(work_root, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        compile_ms = build(name, args, work, spec)
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
        env.pop("GRADC_NUM_THREADS", None)
        runs = [("", env)]
        if args.threads > 1:
            # gradc's runtime sets OpenBLAS's threads from
            # GRADC_NUM_THREADS; only gradc's rows of this run are shown.
            # libgomp's threads wait actively (spin) between teams by
            # default; on a shared machine a spinning thread holds the
            # core that OpenBLAS's or another process's thread needs, and
            # calls take milliseconds (docs/Performance.md, "Threads").
            runs.append(("_thr", dict(
                env, GRADC_NUM_THREADS=str(args.threads),
                OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY",
                                               "passive"))))
        times, files = {}, {}
        for suffix, run_env in runs:
            _, out = run(cmd, env=run_env)
            for line in out.splitlines():
                impl, median, least = line.split()
                ns = least if args.stat == "min" else median
                # The harness names gradc's code after its module
                # (k1_cpp_fwd).
                key = (impl[len(name) + 1:] if impl.startswith(name + "_")
                       else impl)
                if suffix and key.startswith("hand_"):
                    continue
                key = key.replace("_", suffix + "_", 1) if suffix else key
                path = os.path.join(work, "out_%s.bin" % impl)
                if suffix:
                    # The next run overwrites the harness's files.
                    shutil.copy(path, path + suffix)
                    path += suffix
                files[key] = path
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
                # A PyTorch LSTM call takes seconds: fewer rounds.
                f, fb = torch_times(spec, arrays, wrt,
                                    min(rounds, spec.get("torch_rounds",
                                                         rounds)), threads,
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
        rows = [(spec.get("hand_label", "hand C++ (OpenBLAS)"), "hand"),
                ("baseline LLVM (--baseline-llvm)" if args.baseline_llvm
                 else "gradc C++ backend", "cpp"),
                ("baseline C++ (--baseline-cpp)" if args.baseline_cpp
                 else "gradc LLVM backend", "llvm")]
        if args.threads > 1:
            rows += [("gradc C++ backend, %d thr" % args.threads, "cpp_thr"),
                     ("gradc LLVM backend, %d thr" % args.threads,
                      "llvm_thr")]
        for label, key in rows:
            fwd, grad, vg = (times.get("%s_%s" % (key, k))
                             for k in ("fwd", "grad", "vg"))
            err = max((v for k, v in errors.items()
                       if k.rsplit("_", 1)[0] == key), default=None)
            if err is None:  # not built (llvm_optional)
                print("| %s | - | - | - | - | - | - | - |" % label)
                continue
            print("| %s | %s | %s | %s | %s | %s | %s | %.1e%s |" % (
                label, fmt_time(fwd), fmt_time(grad), fmt_time(vg),
                fmt_ratio(grad, base), fmt_ratio(vg, base),
                fmt_ratio(grad if grad else vg, fwd), err,
                "" if err <= TOLERANCE else " FAIL"))
            ok &= err <= TOLERANCE
            if name in BAR_KERNELS and key in ("cpp", "llvm") and grad:
                bar.append(bar_row(name, label, grad, base, fwd))
        for label, f, fb in torch_rows:
            print("| %s | %s | - | %s | - | %s | %s | - |" % (
                label, fmt_time(f), fmt_time(fb), fmt_ratio(fb, base),
                fmt_ratio(fb, f)))
        print("compile: " + ", ".join("%s %.0f ms" % kv
                                      for kv in compile_ms.items()))
        if name in LLVM_SKIPPED:
            print("LLVM column: gradc --emit=obj fails: " +
                  LLVM_SKIPPED[name])
    print("\n%s" % ("all results agree with PyTorch f64 within %g" % TOLERANCE
                    if ok else "FAIL: some result differs from PyTorch f64"))
    print_bar(bar, args)
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
