#!/usr/bin/env python3
"""Checks that a pass's work grows linearly with the size of its input.

Usage: linear_work.py N1 FILE1 N2 FILE2 [PASS]

FILE1 and FILE2 hold the stderr of `gradc-opt --loop-work` on programs of
N1 and N2 steps (N1 < N2); each has a line `PASS: W ... looked at` (PASS
is merge, the default, or fuse).
Linear work grows N2/N1 times; quadratic work N2/N1 times more. The test
fails when W2/W1 exceeds 1.5 * N2/N1 (halfway, in the exponent, to
quadratic for N2/N1 = 4). Prints "linear" (the counts go to stderr, so
that the output does not change with the lowering).
"""
import re
import sys


def work(path, name):
    with open(path) as f:
        m = re.search(r"%s: (\d+) \w+ looked at" % name, f.read())
    if not m:
        sys.exit("%s: no '%s: N ... looked at' line" % (path, name))
    return int(m.group(1))


def main():
    name = sys.argv[5] if len(sys.argv) > 5 else "merge"
    n1, w1 = int(sys.argv[1]), work(sys.argv[2], name)
    n2, w2 = int(sys.argv[3]), work(sys.argv[4], name)
    grows, steps = w2 / w1, n2 / n1
    sys.stderr.write("work %d -> %d (%.2fx) for %d -> %d steps (%.2fx)\n" %
                     (w1, w2, grows, n1, n2, steps))
    if grows > 1.5 * steps:
        print("superlinear: work grows %.2fx for %.2fx the steps" %
              (grows, steps))
        return 1
    print("linear")
    return 0


if __name__ == "__main__":
    sys.exit(main())
