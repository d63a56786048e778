#!/usr/bin/env python3
"""Generates docs/Diagnostics.md from compiler/include/gradc/Basic/Diagnostics*.def.

With --check, exits 1 when the checked-in file differs (a lit test runs that),
so the list of diagnostics in the docs can never drift from the code.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEF_DIR = ROOT / "compiler" / "include" / "gradc" / "Basic"
OUT = ROOT / "docs" / "Diagnostics.md"
DIAG = re.compile(r'^DIAG\((\w+),\s*(\w+),\s*"((?:[^"\\]|\\.)*)"\)')

PHASES = [
    ("Diagnostics.def", "Driver and files"),
    ("DiagnosticsParse.def", "Lexer and parser"),
    ("DiagnosticsSema.def", "Names, types, shapes and annotations"),
    ("DiagnosticsIR.def", "IR parser and verifier"),
    ("DiagnosticsTransforms.def", "Passes"),
    ("DiagnosticsAD.def", "Differentiation"),
    ("DiagnosticsDriver.def", "gradc run and the driver"),
    ("DiagnosticsExtern.def", "Extern functions and their headers"),
]


def render():
    lines = [
        "# Diagnostics",
        "",
        "Every message gradc can print, by phase. Generated from",
        "`compiler/include/gradc/Basic/Diagnostics*.def` by",
        "`utils/gen-diag-docs.py`; do not edit by hand. `%0`, `%1`, ... stand",
        "for names, types and shapes filled in at the point of the error.",
        "",
    ]
    known = {name for name, _ in PHASES}
    extra = sorted(p.name for p in DEF_DIR.glob("Diagnostics*.def")
                   if p.name not in known)
    for name, title in PHASES + [(n, n) for n in extra]:
        path = DEF_DIR / name
        if not path.exists():
            continue
        rows = []
        for line in path.read_text().splitlines():
            m = DIAG.match(line.strip())
            if m:
                ident, severity, text = m.groups()
                rows.append((ident, severity.lower(), text.replace("|", "\\|")))
        if not rows:
            continue
        lines += [f"## {title}", "", "| id | severity | message |",
                  "| --- | --- | --- |"]
        lines += [f"| `{i}` | {s} | {t} |" for i, s, t in rows]
        lines.append("")
    return "\n".join(lines)


def main():
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/Diagnostics.md is out of date: run utils/gen-diag-docs.py")
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
