#!/usr/bin/env python3
"""Random differential testing of gradc (docs/Testing.md, "The random
differential tester").

  difftest.py [--gradc PATH] [--count N] [--seed S] [--per-module K]
              [--calls C] [--special-rate R] [--jobs J]
              [--backends interp,llvm,cpp,loops,loops-opt,llvm-loops]
              [--exact llvm,loops,loops-opt,llvm-loops]
              [--sizes N,...] [--gradc-flags FLAGS] [--no-torch]
              [--exclude F,...]
              [--include F,...] [--only I,...] [--start I] [--out DIR]
              [--max-failures M] [--minimize] [--progress N]
              [--print-programs]

Generates `--count` seeded, well-typed programs (utils/difftest/gen.py;
program I depends only on S and I), writes them `--per-module` to a .grad
file, and makes `--calls` calls of each program's function and of its
generated `_grad` (random sizes, including 0; random values, and in a
fraction `--special-rate` of the calls NaN, +-inf, -0 and ties). Each
backend evaluates all calls of a module in one `gradc run` process
(test/Backends/Inputs/differential.py, whose comparison this reuses):

  - llvm, loops and loops-opt (the loop IR's evaluator, lib/Loops, before
    and after the loop passes) and llvm-loops (the loop IR built as LLVM
    IR, lib/Emit/PrintLLVM) must print what interp prints, digit for
    digit;
  - cpp (the loop IR printed as C++, lib/Emit/PrintCpp) must agree with
    interp within docs/Testing.md's tolerances;
  - NaN must meet NaN and an infinity the same infinity, everywhere;
  - every result, forward and gradient, must agree with PyTorch float64
    autograd on the same program (utils/difftest/oracle.py), within
    TORCH_TOLERANCE.

`--gradc-flags=--accumulate=f32` runs every backend in the second
summation order (docs/IR.md): they must still agree digit for digit.

Each disagreement prints the program, the call, each backend's value and
torch's, and writes a reproducer DIR/difftest-S-I.grad (the program with
its `# CALL:` lines, which differential.py replays); `--only I` reruns
program I alone; `--minimize` also writes the shortest failing prefix of
the program. Exits 1 if any disagreement was found.
"""
import argparse
import concurrent.futures
import copy
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "Backends", "Inputs"))

import differential  # noqa: E402  (the comparison of the backends)
import gen  # noqa: E402


def find_torch():
    """Imports torch, or re-executes under a Python that has it (the
    python3 on PATH may be a virtualenv or pyenv without the Debian
    python3-torch). Returns the module or None."""
    try:
        import torch  # noqa: F401
        return torch
    except ImportError:
        pass
    if os.environ.get("DIFFTEST_REEXEC") or "--no-torch" in sys.argv:
        return None
    for py in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(py) and os.path.realpath(py) != \
                os.path.realpath(sys.executable):
            ok = subprocess.run([py, "-c", "import torch, numpy"],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL).returncode == 0
            if ok:
                os.environ["DIFFTEST_REEXEC"] = "1"
                sys.stdout.flush()
                os.execv(py, [py] + sys.argv)
    return None


# Features a run leaves out, each for a known bug (named by its issue and
# item), so that a fixed set is green until the fix lands; --include
# re-enables one. When the bug is fixed, delete its line here. None is
# open: issue 12's items 2, 4, 5 and 13, once excluded here as
# "one-element", "keepdims-noaxis", "nan-cpp-max" and "pow-literal-base",
# are fixed, and their programs are generated again.
KNOWN_BUGS = {
}
NAN_MAX_OPS = {"maximum", "minimum", "relu", "max", "clip", "logsumexp",
               "softmax", "log_softmax", "softmax_cross_entropy"}

# |a - b| <= rel * max(|a|, |b|) + abs * scale against PyTorch, where
# scale is max(1, the largest finite |value| of that result). The oracle
# rounds every f32 op as gradc does, so forward values differ only by the
# libm and summation-order roundings of each op, amplified along the
# program; gradients are computed by other formulas in another order.
TORCH_TOLERANCE = {"f32": (2e-4, 2e-5), "f64": (1e-9, 1e-11)}


# The documented cpp tolerance (docs/Testing.md) has an absolute term of
# 1e-6 (f32) for "results near zero that come out of cancelling terms of
# size about 1". Random programs cancel terms of the size of their
# arguments and cotangents (the softmax gradient y * (dy - sum(dy * y))
# with dy = 10 is 0 up to 10 * 2^-24 * ...), so a cpp result outside the
# documented tolerance is accepted if it is within CANCEL_TOLERANCE * S of
# interp, S = max(1, the largest finite |value| among the call's
# arguments and interp's results); such calls are counted ("within the
# cancellation allowance") in the summary.
CANCEL_TOLERANCE = {"f32": 1e-5, "f64": 1e-11}


def call_scale(call, lines):
    vals = []
    for v in call.values + (call.cotangents or []):
        if isinstance(v, (list, float, int)) and not isinstance(v, bool):
            vals += flatten(v)
    for line in lines:
        vals += flatten(parse_line(line))
    return max([1.0] + [abs(x) for x in vals if math.isfinite(x)])


def within_cancellation(call, types, ref_lines, got_lines):
    scale = call_scale(call, ref_lines)
    for i, (r, g) in enumerate(zip(ref_lines, got_lines)):
        dt = types[i][0]
        a, b = flatten(parse_line(r)), flatten(parse_line(g))
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not math.isfinite(x) or not math.isfinite(y):
                if not (x == y or (math.isnan(x) and math.isnan(y))):
                    return False
                continue
            if dt not in CANCEL_TOLERANCE:
                if x != y:
                    return False
                continue
            rel = differential.TOLERANCE[dt][0]
            if abs(x - y) > rel * max(abs(x), abs(y)) + \
                    CANCEL_TOLERANCE[dt] * scale:
                return False
    return True


# A result element that disagrees beyond the tolerances is accepted when
# the program itself cannot decide it more closely: when rounding every op
# of the program one unit in the last place, up or down at random, moves
# that element by `move` (oracle.conditioning, largest of 4 runs) and the
# two values are within CONDITION_FACTOR * move of each other on top of
# the tolerance. Two correct implementations of an ill-conditioned program
# (sin(exp(10^exp(x))) at x = 2: sin of an argument of 10^7 whose last bit
# each libm rounds its own way) differ by such amounts; a well-conditioned
# element has move ~ 1 ulp and keeps its tolerance. A NaN or infinity
# where the other has a finite value is accepted only where a perturbed
# run already leaves the finite numbers (move = inf). Such calls are
# counted ("within the conditioning allowance") in the summary.
CONDITION_FACTOR = 4.0


def within_conditioning(types, ref_lines, got, move, tolerance):
    """Whether `got` (printed lines, or numpy arrays) is within the
    conditioning allowance of `ref_lines`; tolerance: dtype -> (rel, abs)
    of the comparison that failed."""
    if move is None or len(ref_lines) != len(got) or len(move) != len(got):
        return False
    for i, (r, g) in enumerate(zip(ref_lines, got)):
        dt = types[i][0] if i < len(types) else "f32"
        a = flatten(parse_line(r))
        b = flatten(parse_line(g)) if isinstance(g, str) else \
            [float(x) for x in g.reshape(-1)]
        m = [float(x) for x in move[i].reshape(-1)]
        if len(a) != len(b) or len(a) != len(m) or dt not in tolerance:
            return False
        rel, abs_ = tolerance[dt]
        for x, y, mv in zip(a, b, m):
            if x == y or (math.isnan(x) and math.isnan(y)):
                continue
            if not math.isfinite(x) or not math.isfinite(y):
                if mv != math.inf:
                    return False
                continue
            if abs(x - y) > rel * max(abs(x), abs(y)) + abs_ + \
                    CONDITION_FACTOR * mv:
                return False
    return True


def live(stmts, results):
    """The statements that `results` need."""
    need = {v.name for v in results}
    kept = []
    for st in reversed(stmts):
        if not any(t.name in need for t in st.targets):
            continue
        kept.append(st)
        for a in st.args:
            for v in (a if isinstance(a, list) else [a]):
                if isinstance(v, gen.Val):
                    need.add(v.name)
    return list(reversed(kept))


def recall(prog, call):
    """The call's arguments for a changed result (new cotangents)."""
    f = prog.main
    cots = None
    if call.grad and not f.scalar_loss():
        rng = random.Random(0)

        def fill(shape):
            if shape:
                return [fill(shape[1:]) for _ in range(shape[0])]
            return float("%.4g" % rng.uniform(-2, 2))
        cots = [fill([call.sizes[d] if isinstance(d, str) else d
                      for d in v.shape]) for v in f.results]
    return gen.Call(prog, call.grad, call.sizes, call.values, cots,
                    call.special)


def may_nan(prog, call, ref_lines):
    """Whether a NaN may flow through the call: special arguments, an
    unguarded log/sqrt/pow/div, an empty axis (a mean over nothing), or a
    non-finite value among interp's results."""
    if call.special or "unguarded" in prog.features:
        return True
    if any(v == 0 for v in call.sizes.values()):
        return True
    return any(not math.isfinite(x) for line in ref_lines
               for x in flatten(parse_line(line)))


class Failure:
    def __init__(self, kind, prog, call, message):
        self.kind, self.prog, self.call, self.message = \
            kind, prog, call, message


def parse_line(line):
    text = line.replace("-inf", "-Infinity").replace("inf", "Infinity")
    text = text.replace("nan", "NaN")
    return json.loads(text)


def flatten(v):
    if isinstance(v, list):
        out = []
        for e in v:
            out.extend(flatten(e))
        return out
    return [float(v)]


def shape_of(v):
    shape = []
    while isinstance(v, list):
        shape.append(len(v))
        if not v:
            break
        v = v[0]
    return tuple(shape)


def torch_close(a, b, dt, scale):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    if dt not in gen.FLOATS:
        return a == b
    rel, abs_ = TORCH_TOLERANCE[dt]
    return abs(a - b) <= rel * max(abs(a), abs(b)) + abs_ * scale


def compare_torch(call, lines, expected):
    """None, or a message saying where gradc's lines differ from torch."""
    types = call.result_types()
    if len(lines) != len(expected):
        return "gradc prints %d results, torch has %d" % (len(lines),
                                                          len(expected))
    for i, (line, want) in enumerate(zip(lines, expected)):
        dt = types[i][0] if i < len(types) else "f32"
        got = parse_line(line)
        # A tensor prints only down to its first empty axis ([0, 4] as []).
        printed = []
        for d in want.shape:
            printed.append(d)
            if d == 0:
                break
        if shape_of(got) != tuple(printed):
            return "result %d: shape %s, torch %s" % (
                i, list(shape_of(got)), list(want.shape))
        flat = flatten(got)
        ref = [float(x) for x in want.reshape(-1)]
        finite = [abs(x) for x in ref if math.isfinite(x)]
        scale = max([1.0] + finite)
        for j, (a, b) in enumerate(zip(flat, ref)):
            if not torch_close(a, b, dt, scale):
                return ("result %d element %d: gradc %r, torch %r (%s)"
                        % (i, j, a, b, dt))
    return None


def torch_lines(values):
    out = []
    for v in values:
        out.append(gen.nested_text(v.tolist()) if v.shape else
                   gen.num_text(float(v)))
    return out


class Runner:
    def __init__(self, args, torch_ok):
        self.args = args
        self.torch_ok = torch_ok
        self.backends = args.backends.split(",")
        self.opts = gen.Options(exclude=args.excluded)
        self.stats = {"programs": 0, "calls": 0, "special": 0,
                      "torch": 0, "modules": 0, "skipped": 0, "cancel": 0,
                      "torch-skipped": 0, "conditioning": 0}

    def program(self, i):
        g = gen.Generator("%d:%d" % (self.args.seed, i), self.opts)
        p = g.program(i)
        rng = random.Random("calls:%d:%d" % (self.args.seed, i))
        calls = gen.make_calls(p, rng, self.args.calls,
                               self.args.special_rate,
                               [int(n) for n in self.args.sizes.split(",")])
        return p, calls

    def run_backends(self, path, calls):
        texts = [c.text() for c in calls]
        flags = self.args.gradc_flags.split()
        procs = {b: differential.start_backend(self.args.gradc, path, b,
                                               texts, flags)
                 for b in self.backends}
        results = {}
        for b in self.backends:
            try:
                rc, blocks, err = differential.finish_backend(procs[b], b,
                                                              texts)
            except differential.Mismatch as e:
                results[b] = (None, str(e))
                continue
            results[b] = (blocks, err)
        return results

    def check_module(self, indices):
        progs = []
        for i in indices:
            try:
                progs.append(self.program(i))
            except Exception as e:  # a generator bug: report, go on
                print("difftest: generator error in program %d: %s: %s"
                      % (i, type(e).__name__, e))
                self.stats["generator-errors"] = \
                    self.stats.get("generator-errors", 0) + 1
        if not progs:
            return []
        return self.run_programs(progs)

    def run_programs(self, progs, count=True):
        """Runs [(program, calls)] as one module; returns the failures."""
        source = "\n".join(p.source() for p, _ in progs)
        calls = [(p, c) for p, cs in progs for c in cs]
        fd, path = tempfile.mkstemp(suffix=".grad", prefix="difftest-")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        try:
            results = self.run_backends(path, [c for _, c in calls])
        finally:
            os.unlink(path)
        failures = []
        whole = [b for b, (blocks, err) in results.items()
                 if blocks is None or (calls and not any(blocks))]
        if whole and len(progs) > 1:
            # A module that one backend cannot compile at all: find the
            # program(s) responsible by running each one alone.
            for pc in progs:
                failures += self.run_programs([pc], count)
            return failures
        if whole:
            p, _ = progs[0]
            b = whole[0]
            failures.append(Failure(
                "compile-" + b, p, None, "%s fails on every call:\n%s" %
                (b, differential.head(results[b][1] or ""))))
            return failures
        ref = self.backends[0]
        if not count:
            saved = dict(self.stats)
        for k, (p, call) in enumerate(calls):
            failures += self.check_call(p, call, k, results, ref)
        if not count:
            self.stats = saved
            return failures
        self.stats["programs"] += len(progs)
        self.stats["calls"] += len(calls)
        self.stats["special"] += sum(c.special for _, c in calls)
        self.stats["modules"] += 1
        return failures

    def check_call(self, p, call, k, results, ref):
        text = call.text()
        types = [(dt, list(shape)) for dt, shape in call.result_types()]
        ref_blocks, ref_err = results[ref]
        ref_lines = ref_blocks[k]
        out = []
        values = {b: results[b][0][k] for b in self.backends}
        moves = []

        def move():
            """oracle.conditioning of the call, computed once and only
            for a call that disagrees (None without torch)."""
            if not moves:
                moves.append(None)
                if self.torch_ok:
                    import oracle
                    try:
                        moves[0] = oracle.conditioning(p, call)
                    except Exception:
                        pass
            return moves[0]
        for b in self.backends[1:]:
            got = results[b][0][k]
            if (b == "cpp" and p.ops & NAN_MAX_OPS and
                    "nan-cpp-max" in self.args.excluded and
                    may_nan(p, call, ref_lines)):
                self.stats["skipped"] += 1
                continue
            if bool(ref_lines) != bool(got):
                out.append(Failure("fails-" + (b if got == [] else ref), p,
                                   call, "fails on %s only:\n%s" % (
                                       ref if not ref_lines else b,
                                       differential.head(
                                           results[ref if not ref_lines
                                                   else b][1]))))
                continue
            if not ref_lines:
                continue
            try:
                differential.compare(text, types, ref, ref_lines, b, got,
                                     b in self.args.exact)
            except differential.Mismatch as e:
                if (b not in self.args.exact and
                        within_cancellation(call, types, ref_lines, got)):
                    self.stats["cancel"] += 1
                    continue
                if (b not in self.args.exact and within_conditioning(
                        types, ref_lines, got, move(),
                        differential.TOLERANCE)):
                    self.stats["conditioning"] += 1
                    continue
                out.append(Failure("%s-vs-%s" % (b, ref), p, call,
                                   str(e).split("\n")[0]))
        if not ref_lines:
            out.append(Failure("fails", p, call, "every backend fails:\n%s"
                               % differential.head(ref_err)))
            return out
        if self.torch_ok and call.special and p.inner is not None:
            # Second order at NaN and infinities: torch's double backward
            # multiplies zeros by infinities where gradc's gradient of the
            # simplified gradient has no term at all; the backends are
            # still compared.
            self.stats["torch-skipped"] += 1
        elif self.torch_ok:
            import oracle
            try:
                expected = oracle.run_call(p, call)
            except Exception as e:  # an oracle bug is a failure too
                out.append(Failure("torch-error", p, call,
                                   "torch: %s: %s" % (type(e).__name__, e)))
                return out
            self.stats["torch"] += 1
            msg = compare_torch(call, ref_lines, expected)
            if msg and within_conditioning(types, ref_lines, expected,
                                           move(), TORCH_TOLERANCE):
                self.stats["conditioning"] += 1
                msg = None
            if msg:
                f = Failure("torch-vs-" + ref, p, call, msg)
                f.torch = torch_lines(expected)
                out.append(f)
        for f in out:
            f.values = values
        return out

    # -- minimizing ---------------------------------------------------------

    def minimize(self, failure):
        """The shortest prefix of the failing function's body, returning
        one value, that still fails the same way on the same arguments
        (new cotangents where the result changed). Returns (program, call)
        or None."""
        p, call = failure.prog, failure.call
        if call is None or p.inner is not None:
            return None
        p = copy.deepcopy(p)
        f = p.main
        stmts = list(f.stmts)
        kind = failure.kind
        for k, st in enumerate(stmts):
            for v in st.targets:
                if v.dt != f.dt:
                    continue
                if k == len(stmts) - 1 and f.results == [v]:
                    continue
                f.stmts = live(stmts[:k + 1], [v])
                f.results, f.tuple_result = [v], False
                c = recall(p, call)
                if any(x.kind == kind for x in
                       self.run_programs([(p, [c])], count=False)):
                    return p, c
        return None

    def report(self, failure):
        a = self.args
        p, call = failure.prog, failure.call
        lines = ["=" * 72,
                 "DISAGREEMENT [%s] seed %d program %d%s" % (
                     failure.kind, a.seed, p.index,
                     " (special values)" if call and call.special else ""),
                 failure.message]
        if call:
            lines.append("call: " + call.text())
            for b, v in getattr(failure, "values", {}).items():
                lines.append("  %-6s %s" % (b + ":", " | ".join(v or
                                                                ["<error>"])))
            if getattr(failure, "torch", None):
                lines.append("  %-6s %s" % ("torch:",
                                            " | ".join(failure.torch)))
        lines.append("program:")
        lines.append(p.source().rstrip())
        if a.minimize:
            m = self.minimize(failure)
            if m:
                lines.append("minimized (same failure): " + m[1].text())
                lines.append(m[0].source().rstrip())
                failure.minimized = m
        print("\n".join(lines))
        os.makedirs(a.out, exist_ok=True)
        path = os.path.join(a.out, "difftest-%d-%d.grad" % (a.seed, p.index))
        with open(path, "w") as f:
            f.write("# difftest reproducer: seed %d, program %d (%s)\n"
                    % (a.seed, p.index, failure.kind))
            f.write("# rerun: utils/difftest/difftest.py --seed %d --only %d"
                    "\n" % (a.seed, p.index))
            f.write("# or: test/Backends/Inputs/differential.py GRADC %s\n"
                    % os.path.basename(path))
            for m in failure.message.splitlines():
                f.write("# %s\n" % m)
            if call:
                for b, v in getattr(failure, "values", {}).items():
                    f.write("# %s: %s\n" % (b, " | ".join(v or ["<error>"])))
                if getattr(failure, "torch", None):
                    f.write("# torch: %s\n" % " | ".join(failure.torch))
                f.write("# CALL: %s\n" % call.text())
            f.write("\n" + p.source())
        m = getattr(failure, "minimized", None)
        if m:
            mpath = path[:-len(".grad")] + "-min.grad"
            with open(mpath, "w") as f:
                f.write("# difftest reproducer, minimized: seed %d, program "
                        "%d (%s)\n# CALL: %s\n\n%s" % (
                            a.seed, p.index, failure.kind, m[1].text(),
                            m[0].source()))
            print("minimized reproducer: " + mpath)
        print("reproducer: " + path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gradc", default=os.path.join(
        ROOT, "build", "compiler", "tools", "gradc", "gradc"))
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0,
                    help="index of the first program")
    ap.add_argument("--per-module", type=int, default=12)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--special-rate", type=float, default=0.25)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--backends",
                    default="interp,llvm,cpp,loops,loops-opt,llvm-loops")
    ap.add_argument("--exact", default="llvm,loops,loops-opt,llvm-loops")
    ap.add_argument("--sizes", default="1,2,3,4", metavar="N,...",
                    help="what each size name of a call is drawn from "
                    "(besides 0); e.g. 1,5,17,37 runs whole chunks of the "
                    "summation lanes")
    ap.add_argument("--gradc-flags", default="", metavar="FLAGS",
                    help="more options of every gradc run, e.g. "
                    "--gradc-flags=--accumulate=f32")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--exclude", default="")
    ap.add_argument("--include", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="difftest-failures")
    ap.add_argument("--max-failures", type=int, default=20)
    ap.add_argument("--print-programs", action="store_true")
    ap.add_argument("--minimize", action="store_true",
                    help="shrink each failing program to the shortest "
                    "prefix of its body that fails the same way")
    ap.add_argument("--progress", type=int, default=0, metavar="N",
                    help="print a progress line every N modules")
    args = ap.parse_args()
    torch = None if args.no_torch else find_torch()
    args.exact = args.exact.split(",")
    included = set(filter(None, args.include.split(",")))
    args.excluded = (set(KNOWN_BUGS) - included) | \
        set(filter(None, args.exclude.split(",")))
    if args.no_torch:
        print("note: --no-torch: results are compared between the backends "
              "only")
    elif torch is None:
        print("note: torch is not importable (install python3-torch and "
              "python3-numpy, utils/deps.sh): results are compared between "
              "the backends only")
    for f in sorted(args.excluded):
        print("excluded: %s (%s)" % (f, KNOWN_BUGS.get(f, "--exclude")))
    runner = Runner(args, torch is not None)
    if args.only:
        indices = [int(x) for x in args.only.split(",")]
    else:
        indices = list(range(args.start, args.start + args.count))
    if args.print_programs:
        for i in indices:
            p, calls = runner.program(i)
            print(p.source())
            for c in calls:
                print("# CALL: " + c.text())
        return 0
    modules = [indices[k:k + args.per_module]
               for k in range(0, len(indices), args.per_module)]
    start = time.time()
    failures = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for n, fs in enumerate(pool.map(runner.check_module, modules)):
            if args.progress and (n + 1) % args.progress == 0:
                print("difftest: %d of %d modules, %d disagreements, %.0f s"
                      % (n + 1, len(modules), len(failures),
                         time.time() - start), flush=True)
            for f in fs:
                if len(failures) < args.max_failures:
                    runner.report(f)
                failures.append(f)
    s = runner.stats
    kinds = {}
    for f in failures:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    print("difftest: seed %d, programs %d..%d: %d programs, %d calls (%d with "
          "special values), %d compared with torch, on %s, in %.0f s" %
          (args.seed, indices[0], indices[-1], s["programs"], s["calls"],
           s["special"], s["torch"], args.backends, time.time() - start))
    if s["skipped"]:
        print("difftest: %d cpp comparisons skipped (nan-cpp-max)"
              % s["skipped"])
    if s["torch-skipped"]:
        print("difftest: %d second-order calls with special values not "
              "compared with torch" % s["torch-skipped"])
    if s["cancel"]:
        print("difftest: %d cpp results within the cancellation allowance"
              % s["cancel"])
    if s["conditioning"]:
        print("difftest: %d results within the conditioning allowance"
              % s["conditioning"])
    if s.get("generator-errors"):
        print("difftest: %d generator errors" % s["generator-errors"])
        return 1
    if failures:
        print("difftest: %d disagreements: %s" % (len(failures), ", ".join(
            "%s %d" % kv for kv in sorted(kinds.items()))))
        return 1
    print("difftest: no disagreements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
