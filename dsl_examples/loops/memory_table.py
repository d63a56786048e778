"""The memory of a loop's gradient with and without @checkpoint.

    memory_table.py GRADC [T ...]

Runs the three gradients of dsl_examples/loops/rk4_checkpoint.grad (a tape of
every step, @checkpoint every ceil(sqrt(T)) steps, and the binomial
schedule with 8 snapshots) in the interpreter with --memory-stats, with
its 1000 steps made T for each T given (default 100 1000 10000), and
prints a Markdown table: the peak tensor bytes, the carries kept and the
steps rerun. Exits 1 unless the
three gradients print the same digits (they are bitwise equal) and the
every-K schedule keeps at most 3 sqrt(T) carries plus a constant.
"""

import math
import os
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
    gradc = sys.argv[1]
    trips = [int(a) for a in sys.argv[2:]] or [100, 1000, 10000]
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


if __name__ == "__main__":
    main()
