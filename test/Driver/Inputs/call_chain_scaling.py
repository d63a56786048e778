"""Compiles a chain of N functions, each calling the previous one, and
fails if gradc takes more than a generous time or memory bound.

Inlining one call at a time (copy, insert into the op vector, replace
uses, erase), chains of callee names copied onto every inlined op, a
linear Module::lookup per call and the C++ emitter reserving every
symbol in every function made this quadratic: at N = 10,000,
`--emit=grad-ir` took 30 s and 3.2 GB and `--emit=cpp` 108 s. Linear
code takes a few seconds and ~150 MB, so the bounds (20 s of CPU, 1 GB)
leave room for a slow machine and still catch the quadratic versions.

usage: call_chain_scaling.py GRADC WORKDIR N
"""
import os
import resource
import subprocess
import sys
import time

gradc, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(work, exist_ok=True)


def write(path, grad):
    lines = ["fn f0(x: f32[4]) -> f32[4] {\n    return exp(x)\n}"]
    for i in range(1, n):
        lines.append(f"fn f{i}(x: f32[4]) -> f32[4] {{\n"
                     f"    return sin(f{i - 1}(x))\n}}")
    if grad:
        lines.append(f"@grad\nfn loss(x: f32[4]) -> f32 {{\n"
                     f"    return sum(f{n - 1}(x))\n}}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


seconds_bound, rss_bound_kb = 20.0, 1 << 20
failed = False
for grad, emit in ((True, "grad-ir"), (False, "cpp")):
    path = os.path.join(work, f"chain-{n}-{emit}.grad")
    write(path, grad)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    start = time.monotonic()
    proc = subprocess.run([gradc, path, f"--emit={emit}", "-o", os.devnull],
                          timeout=10 * seconds_bound)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = usage.ru_maxrss
    # CPU time, not wall time: on a shared machine at a load of 30 a
    # 1 s compile takes 20 s of wall time.
    seconds = usage.ru_utime + usage.ru_stime - cpu_before
    print(f"--emit={emit}: {n} chained functions in {seconds:.2f} s of CPU "
          f"({wall:.2f} s wall), max RSS {max(rss, before) // 1024} MB")
    if proc.returncode != 0:
        print(f"FAIL: gradc exited with {proc.returncode}")
        failed = True
    if seconds > seconds_bound or rss > rss_bound_kb:
        print(f"FAIL: above the bound of {seconds_bound} s of CPU and "
              f"{rss_bound_kb // 1024} MB")
        failed = True
sys.exit(1 if failed else 0)
