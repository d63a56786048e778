"""The memory of a loop's gradient with and without @checkpoint.

    memory_table.py GRADC [T ...]
    memory_table.py GRADC --backend=cpp|llvm [--cxx CXX] [T ...]

Runs the three gradients of dsl_examples/loops/rk4_checkpoint.grad (a tape of
every step, @checkpoint every ceil(sqrt(T)) steps, and the binomial
schedule with 8 snapshots), with its 1000 steps made T for each T given
(default 100 1000 10000), and prints a Markdown table.

In the interpreter (the default) with --memory-stats: the peak tensor
bytes, the carries kept and the steps rerun. Exits 1 unless the three
gradients print the same digits (they are bitwise equal) and the every-K
schedule keeps at most 3 sqrt(T) carries plus a constant.

With --backend=cpp or llvm: the compiled backend's code (gradc
--emit=cpp, compiled with -DGRADC_NO_SCRATCH_CACHE so that every
temporary on the heap is a malloc and a free of the call; or
--emit=obj --no-scratch-cache, the same), one module per T, linked with a host that counts the bytes
malloc'd and not yet freed during each call (it replaces malloc, calloc,
realloc and free) and prints their peak. Temporaries of at most 1 KiB of
a known size live on the stack (docs/Loops.md, PlanBuffers) and are not
counted: a constant per function. Exits 1 unless the three gradients
print the same digits as each other, and each checkpointed one's peak is
at most 3 sqrt(T) carries (16 bytes each) plus 1 KiB.
"""

import argparse
import math
import os
import shutil
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "rk4_checkpoint.grad")
STATS = re.compile(r"memory: peak (\d+) bytes, checkpointed carries (\d+), "
                   r"recomputed steps (\d+)")


def run(gradc, program, fn, call):
    out = subprocess.run([gradc, "run", program, "--backend=interp",
                          "--memory-stats", "--call", fn + call],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr)
    stats = STATS.search(out.stderr)
    return out.stdout, [int(g) for g in stats.groups()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("trips", type=int, nargs="*")
    ap.add_argument("--backend", choices=["interp", "cpp", "llvm"],
                    default="interp")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    args = ap.parse_intermixed_args()
    trips = args.trips or [100, 1000, 10000]
    if args.backend != "interp":
        sys.exit(compiled_table(args.gradc, args.backend, args.cxx, trips))
    gradc = args.gradc
    print("| T | tape: peak bytes | every: peak bytes | every: carries kept "
          "| every: steps rerun | binomial(8): peak bytes "
          "| binomial(8): carries kept | binomial(8): steps rerun |")
    print("| ---: " * 8 + "|")
    ok = True
    source = open(PROGRAM).read()
    call = "([1, 0], [2, 0.3], 0.01)"
    for trip in trips:
        with tempfile.NamedTemporaryFile("w", suffix=".grad",
                                         delete=False) as f:
            f.write(source.replace("0..1000", "0..%d" % trip))
        try:
            tape, (tape_bytes, _, _) = run(gradc, f.name, "pendulum_grad",
                                           call)
            every, (every_bytes, every_kept, every_rerun) = run(
                gradc, f.name, "pendulum_every_grad", call)
            binom, (binom_bytes, binom_kept, binom_rerun) = run(
                gradc, f.name, "pendulum_binomial_grad", call)
        finally:
            os.unlink(f.name)
        print(f"| {trip} | {tape_bytes} | {every_bytes} | {every_kept} "
              f"| {every_rerun} | {binom_bytes} | {binom_kept} "
              f"| {binom_rerun} |")
        if not tape == every == binom:
            print(f"T = {trip}: the gradients differ:\n{tape}{every}{binom}")
            ok = False
        if every_kept > 3 * math.sqrt(trip) + 2:
            print(f"T = {trip}: every-K keeps {every_kept} carries, more than "
                  f"3 sqrt(T) + 2")
            ok = False
        if binom_kept > 8 + 2:
            print(f"T = {trip}: binomial keeps {binom_kept} carries, more "
                  f"than its 8 snapshots + 2")
            ok = False
    sys.exit(0 if ok else 1)


FUNCTIONS = ["pendulum_grad", "pendulum_every_grad", "pendulum_binomial_grad"]

# The host: malloc, calloc, realloc and free replaced by glibc's own, with
# the blocks allocated while `counting` recorded (pointer and size, in a
# fixed table: no allocation) so that their live bytes and peak are exact.
HOST = r"""
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

extern "C" void *__libc_malloc(size_t);
extern "C" void *__libc_calloc(size_t, size_t);
extern "C" void *__libc_realloc(void *, size_t);
extern "C" void __libc_free(void *);

namespace {
constexpr int kSlots = 1 << 16;
void *ptrs[kSlots];
size_t sizes[kSlots];
bool counting = false, overflow = false;
int64_t live = 0, peak = 0;

void note(void *p, size_t n) {
  if (!counting || !p)
    return;
  for (int i = 0; i < kSlots; ++i)
    if (!ptrs[i]) {
      ptrs[i] = p;
      sizes[i] = n;
      live += int64_t(n);
      peak = live > peak ? live : peak;
      return;
    }
  overflow = true;
}

void forget(void *p) {
  if (!p)
    return;
  for (int i = 0; i < kSlots; ++i)
    if (ptrs[i] == p) {
      ptrs[i] = nullptr;
      live -= int64_t(sizes[i]);
      return;
    }
}
} // namespace

extern "C" void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  note(p, n);
  return p;
}
extern "C" void *calloc(size_t k, size_t n) {
  void *p = __libc_calloc(k, n);
  note(p, k * n);
  return p;
}
extern "C" void *realloc(void *q, size_t n) {
  forget(q);
  void *p = __libc_realloc(q, n);
  note(p, n);
  return p;
}
extern "C" void free(void *p) {
  forget(p);
  __libc_free(p);
}

using Grad = int (*)(const double *, const double *, double, double *,
                     double *);
%DECLS%

int main() {
  struct {
    const char *name;
    Grad fn;
  } calls[] = {%CALLS%};
  const double x0[2] = {1, 0}, p[2] = {2, 0.3};
  for (const auto &c : calls) {
    double dx[2], dp[2];
    live = peak = 0;
    int status = 0;
    // Each call on a thread of its own: the LLVM backend's scratch cache
    // keeps large blocks for the next call of the thread and frees them
    // when it exits (docs/ABI.md, "Temporaries"), so after the join every
    // block of the call is free again.
    std::thread call([&] {
      counting = true;
      status = c.fn(x0, p, 0.01, dx, dp);
    });
    call.join();
    counting = false;
    if (status || overflow || live) {
      std::printf("%s: status %d, %lld bytes left\n", c.name, status,
                  (long long)live);
      return 1;
    }
    std::printf("%s %lld %.17g %.17g %.17g %.17g\n", c.name, (long long)peak,
                dx[0], dx[1], dp[0], dp[1]);
  }
  return 0;
}
"""


def compiled_table(gradc, backend, cxx, trips):
    """The table of a compiled backend (the module docstring); 0 when
    fine."""
    source = open(PROGRAM).read()
    runtime = os.path.join(HERE, "..", "..", "runtime", "include")
    tmp = tempfile.mkdtemp(prefix="memory_table")
    try:
        units, decls, calls = [], [], []
        for trip in trips:
            module = "rk4_T%d" % trip
            grad = os.path.join(tmp, module + ".grad")
            with open(grad, "w") as f:
                f.write(source.replace("0..1000", "0..%d" % trip))
            unit = os.path.join(tmp, module + (".cpp" if backend == "cpp"
                                               else ".o"))
            # Without the scratch cache (and its arena of small blocks,
            # which a host cannot see) on either backend: every temporary
            # is a malloc and a free of the call.
            emit = (["--emit=cpp"] if backend == "cpp"
                    else ["--emit=obj", "--no-scratch-cache"])
            out = subprocess.run([gradc, grad] + emit + ["-o", unit],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(out.stderr)
            units.append(unit)
            for fn in FUNCTIONS:
                symbol = module + "_" + fn
                decls.append('extern "C" int %s(const double *, const double '
                             '*, double, double *, double *);' % symbol)
                calls.append('{"%d %s", %s}' % (trip, fn, symbol))
        host = os.path.join(tmp, "host.cpp")
        with open(host, "w") as f:
            f.write(HOST.replace("%DECLS%", "\n".join(decls))
                    .replace("%CALLS%", ", ".join(calls)))
        exe = os.path.join(tmp, "host")
        out = subprocess.run([cxx, "-std=c++20", "-O2",
                              "-DGRADC_NO_SCRATCH_CACHE", "-I", runtime,
                              host] + units + ["-pthread", "-o", exe],
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr)
        out = subprocess.run([exe], capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stdout + out.stderr)
    finally:
        shutil.rmtree(tmp)
    rows = {}
    for line in out.stdout.splitlines():
        trip, fn, peak, *digits = line.split()
        rows[(int(trip), fn)] = (int(peak), digits)
    print("| T | tape: peak heap bytes | every: peak heap bytes "
          "| binomial(8): peak heap bytes | 3 sqrt(T) carries: bytes |")
    print("| ---: " * 5 + "|")
    ok = True
    carry = 16
    for trip in trips:
        (tape, g0), (every, g1), (binom, g2) = (
            rows[(trip, fn)] for fn in FUNCTIONS)
        bound = 3 * math.sqrt(trip) * carry
        print(f"| {trip} | {tape} | {every} | {binom} | {bound:.0f} |")
        if not g0 == g1 == g2:
            print(f"T = {trip}: the gradients differ: {g0} {g1} {g2}")
            ok = False
        for name, peak in (("every", every), ("binomial", binom)):
            if peak > bound + 1024:
                print(f"T = {trip}: {name} holds {peak} bytes, more than "
                      f"3 sqrt(T) carries + 1 KiB")
                ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    main()
