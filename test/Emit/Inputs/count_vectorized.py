"""Reads GCC's -fopt-info-vec-optimized notes on stdin and prints how many
loops GCC vectorised in the definition of one function of a generated C++
file, and whether that is at least a given number:

  count_vectorized.py FILE.cpp FUNCTION MINIMUM
"""
import re
import sys


def main():
    path, function, minimum = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path) as f:
        lines = f.read().split("\n")
    head = re.compile(r'extern "C" int \w*%s\(' % re.escape(function))
    start = next(i for i, l in enumerate(lines) if head.match(l)) + 1
    end = next(i for i in range(start, len(lines)) if lines[i] == "}") + 1
    note = re.compile(r".*%s:(\d+):\d+: optimized: loop vectorized" %
                      re.escape(path.split("/")[-1]))
    count = 0
    for line in sys.stdin:
        m = note.match(line)
        if m and start <= int(m.group(1)) <= end:
            count += 1
    verdict = "at least" if count >= minimum else "fewer than"
    print("%s: %s %d loops vectorized (%d)" % (function, verdict, minimum,
                                               count))


if __name__ == "__main__":
    main()
