"""Compares the numbers a program printed with expected ones.

    gradc run ... | allclose.py TESTFILE [--rtol R] [--atol A]

The expected numbers are those of the test file's `# EXPECT:` lines, in
order; the printed ones are every number of standard input outside lines
that start with '#' (the headers of `gradc run` with several calls). Each
pair must satisfy |got - want| <= atol + rtol * |want|, and the counts must
agree. Prints the first mismatch and exits 1.
"""

import re
import sys

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf")


def numbers(lines):
    out = []
    for line in lines:
        out.extend(float(m) for m in NUMBER.findall(line))
    return out


def main():
    args = sys.argv[1:]
    rtol, atol = 1e-6, 1e-9
    if "--rtol" in args:
        i = args.index("--rtol")
        rtol = float(args[i + 1])
        del args[i:i + 2]
    if "--atol" in args:
        i = args.index("--atol")
        atol = float(args[i + 1])
        del args[i:i + 2]
    with open(args[0]) as f:
        want = numbers(line.split("# EXPECT:", 1)[1] for line in f
                       if "# EXPECT:" in line)
    got = numbers(line for line in sys.stdin if not line.startswith("#"))
    if len(got) != len(want):
        print(f"printed {len(got)} numbers, expected {len(want)}")
        return 1
    for i, (g, w) in enumerate(zip(got, want)):
        if not abs(g - w) <= atol + rtol * abs(w):
            print(f"number {i}: got {g!r}, expected {w!r}")
            return 1
    print(f"{len(got)} numbers agree (rtol {rtol}, atol {atol})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
