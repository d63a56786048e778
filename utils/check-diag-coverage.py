#!/usr/bin/env python3
"""Fails when a diagnostic of Diagnostics*.def has no lit test.

A diagnostic counts as tested when the longest fixed piece of its message
(the text between %0-style placeholders) appears in some file under test/.
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
    missing = []
    for path in sorted(DEF_DIR.glob("Diagnostics*.def")):
        for line in path.read_text().splitlines():
            m = DIAG.match(line.strip())
            if not m:
                continue
            ident, _, text = m.groups()
            pieces = [p.strip() for p in re.split(r"%\d", text)]
            key = max(pieces, key=len)
            if len(key) < 4:  # a bare "%0" message: nothing to look for
                continue
            if key not in corpus:
                missing.append(f"{path.name}: {ident}: {text}")
    for m in missing:
        print("untested diagnostic:", m)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
