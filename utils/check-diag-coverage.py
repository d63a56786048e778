#!/usr/bin/env python3
"""Fails when a diagnostic of Diagnostics*.def has no lit test.

A diagnostic counts as tested when the longest fixed piece of its message
(the text between %0-style placeholders) appears in some file under test/,
or its identifier appears in a unit test under unittests/ (for internal
errors that no input text can reach, such as a verifier check of IR that
the IR parser already rejects).
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEF_DIR = ROOT / "compiler" / "include" / "gradc" / "Basic"
DIAG = re.compile(r'^DIAG\((\w+),\s*(\w+),\s*"((?:[^"\\]|\\.)*)"\)')


def main():
    corpus = "\n".join(p.read_text(errors="replace")
                       for p in (ROOT / "test").rglob("*") if p.is_file())
    units = "\n".join(p.read_text(errors="replace")
                      for p in (ROOT / "unittests").rglob("*.cpp"))
    missing = []
    for path in sorted(DEF_DIR.glob("Diagnostics*.def")):
        for line in path.read_text().splitlines():
            m = DIAG.match(line.strip())
            if not m:
                continue
            ident, _, text = m.groups()
            pieces = [p.strip() for p in re.split(r"%\d|\\n", text)]
            # Tests may split a long message over two string literals, so
            # the first 30 characters of its longest fixed piece suffice.
            key = max(pieces, key=len)[:30]
            if len(key) < 4:  # a bare "%0" message: nothing to look for
                continue
            if key not in corpus and key not in units and ident not in units:
                missing.append(f"{path.name}: {ident}: {text}")
    for m in missing:
        print("untested diagnostic:", m)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
