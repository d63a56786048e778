"""Checks that every code block of a Markdown page comes from somewhere real.

docs/Embedding.md promises that each of its code blocks is taken from a
file that the test suite builds, or from what gradc prints. Each block is
preceded by an HTML comment that says which:

    <!-- file: test/Package/Inputs/consumer/CMakeLists.txt -->
    <!-- gradc: test/Package/Inputs/consumer/model.grad --emit=header -->

and its lines must occur in that file (or in that gradc command's output,
paths relative to the repository) in order: contiguous, except that a
line `...` (or `// ...`, `# ...`) in the block skips any number of lines.
Trailing white space is ignored. A block without such a comment, a
missing file and a line that does not match are errors.

    check-doc-blocks.py PAGE --root REPO --gradc GRADC
"""

import argparse
import re
import shlex
import subprocess
import sys

FENCE = re.compile(r"^```")
MARKER = re.compile(r"^<!--\s*(file|gradc):\s*(.+?)\s*-->\s*$")
ELISION = {"...", "// ...", "# ...", "/* ... */"}


def blocks(page_lines):
    """Yields (line number, marker or None, block lines)."""
    i = 0
    while i < len(page_lines):
        if not FENCE.match(page_lines[i]):
            i += 1
            continue
        start = i
        j = i - 1
        while j >= 0 and not page_lines[j].strip():
            j -= 1
        marker = MARKER.match(page_lines[j]) if j >= 0 else None
        i += 1
        body = []
        while i < len(page_lines) and not FENCE.match(page_lines[i]):
            body.append(page_lines[i])
            i += 1
        i += 1
        yield start + 1, marker, body


def source_lines(marker, root, gradc):
    kind, what = marker.group(1), marker.group(2)
    if kind == "file":
        with open(f"{root}/{what}") as f:
            return f.read().splitlines()
    args = [a if a.startswith("-") else f"{root}/{a}" for a in shlex.split(what)]
    result = subprocess.run([gradc] + args, capture_output=True, text=True)
    if result.returncode != 0:
        raise OSError(f"gradc {what} failed: {result.stderr.strip()}")
    return result.stdout.splitlines()


def find_excerpts(block, source):
    """Returns None if block matches source in order, else the first line
    of the block that does not."""
    pieces, piece = [], []
    for line in block:
        if line.strip() in ELISION:
            pieces.append(piece)
            piece = []
        else:
            piece.append(line.rstrip())
    pieces.append(piece)
    source = [line.rstrip() for line in source]
    at = 0
    for n, piece in enumerate(pieces):
        if not piece:
            continue
        # The first piece of a block without a leading `...` may still
        # start anywhere: a block is an excerpt.
        found = next((k for k in range(at, len(source) - len(piece) + 1)
                      if source[k:k + len(piece)] == piece), None)
        if found is None:
            return piece[0]
        at = found + len(piece)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("--root", required=True)
    parser.add_argument("--gradc", required=True)
    args = parser.parse_args()
    with open(args.page) as f:
        page_lines = f.read().splitlines()

    failures, count = 0, 0
    for line, marker, body in blocks(page_lines):
        count += 1
        if marker is None:
            print(f"{args.page}:{line}: block without a "
                  "'<!-- file: ... -->' or '<!-- gradc: ... -->' comment")
            failures += 1
            continue
        try:
            source = source_lines(marker, args.root, args.gradc)
        except OSError as e:
            print(f"{args.page}:{line}: {e}")
            failures += 1
            continue
        bad = find_excerpts(body, source)
        if bad is not None:
            print(f"{args.page}:{line}: not in {marker.group(2)}: {bad!r}")
            failures += 1
    print(f"{count} blocks, {failures} not from their sources")
    sys.exit(1 if failures or count == 0 else 0)


if __name__ == "__main__":
    main()
