"""The comparison shared by rnn_torch.py and layer_norm_numpy.py: runs
`gradc run` with each backend on some calls, and checks every number it
prints against a reference list (relative `rtol`, below `floor` absolute
rtol * floor), and that the `same` backends print the text of the first
backend. Prints one line per backend and returns 1 on the first mismatch.
"""

import re
import subprocess

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf")


def check(gradc, program, calls, backends, same, want, rtol, floor, source):
    first = None
    backends = backends.split(",")
    for backend in backends:
        cmd = [gradc, "run", program, "--backend=" + backend]
        for c in calls:
            cmd += ["--call", c]
        out = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if out.returncode != 0:
            print("FAIL %s: %s" % (backend, out.stderr.strip()))
            return 1
        lines = [l for l in out.stdout.splitlines() if not l.startswith("#")]
        got = [float(m) for l in lines for m in NUMBER.findall(l)]
        if len(got) != len(want):
            print("FAIL %s: %d numbers, want %d" % (backend, len(got),
                                                    len(want)))
            return 1
        for a, b in zip(got, want):
            if abs(a - b) > rtol * max(abs(b), floor):
                print("FAIL %s: %r against %s's %r" % (backend, a, source, b))
                return 1
        if backend in same.split(",") and lines != first:
            print("FAIL %s: prints other numbers than %s" %
                  (backend, backends[0]))
            return 1
        first = first or lines
        print("ok %s: %d numbers agree with %s f64 (rtol %g)" %
              (backend, len(got), source, rtol))
    return 0
