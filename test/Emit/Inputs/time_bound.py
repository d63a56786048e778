#!/usr/bin/env python3
"""Runs a command and fails when it exits non-zero or when its CPU time
(user + system, of the command and its children) exceeds a bound.

Usage: time_bound.py SECONDS COMMAND...

Prints "within SECONDS s" on success (the measured time goes to stderr, so
that tests stay deterministic). CPU time rather than wall time, because
the machines that run the tests are shared; the bounds are generous (ten
times the measured cost or more) and catch the quadratic regressions they
guard, not noise.
"""
import resource
import subprocess
import sys


def main():
    bound = float(sys.argv[1])
    cmd = sys.argv[2:]
    rc = subprocess.call(cmd, stdout=subprocess.DEVNULL)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = usage.ru_utime + usage.ru_stime
    sys.stderr.write("%s: %.2f s CPU, %d MB peak\n" %
                     (" ".join(cmd[:3]), spent, usage.ru_maxrss // 1024))
    if rc != 0:
        print("command failed with exit status %d" % rc)
        return 1
    if spent > bound:
        print("too slow: %.2f s CPU, bound %s s" % (spent, sys.argv[1]))
        return 1
    print("within %s s" % sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
