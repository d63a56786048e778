"""Checks inequalities between numbers that a program printed.

FileCheck matches text; training curves need comparisons. Each series is
named by a word that the output puts before its numbers (`loss 0.7667`
gives the series `loss`), and each assertion compares two terms:

    check-numbers.py OUTPUT 'loss.last < 0.05' 'loss.last < loss.first'

A term is a number or SERIES.first, .last, .min, .max or .count, where
SERIES matches `SERIES <number>` (several words, 'target acc.last', are
matched with any spacing between them). `PREFIX | SERIES.PICK` looks only
at the lines that start with PREFIX. Prints one line per assertion and
exits 1 if any fails or a series is missing.
"""

import operator
import re
import sys

NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)"
OPERATORS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt,
             ">": operator.gt}
PICKS = {"first": lambda v: v[0], "last": lambda v: v[-1], "min": min,
         "max": max, "count": len}


def series(text, name):
    prefix, bar, name = name.rpartition("|")
    if bar:
        prefix = prefix.strip()
        text = "\n".join(line for line in text.splitlines()
                         if line.startswith(prefix))
    words = r" +".join(re.escape(word) for word in name.split())
    pattern = r"(?<![\w-])" + words + r" +" + NUMBER
    return [float(m.group(1)) for m in re.finditer(pattern, text)]


def term(text, spelling):
    try:
        return float(spelling), spelling
    except ValueError:
        pass
    name, _, pick = spelling.rpartition(".")
    if pick not in PICKS or not name:
        sys.exit(f"check-numbers: bad term '{spelling}'")
    values = series(text, name)
    if not values:
        return None, f"{spelling} (no '{name} <number>' in the output)"
    value = PICKS[pick](values)
    return value, f"{spelling} = {value:g}"


def check(text, assertion):
    match = re.fullmatch(r"\s*(.+?)\s*(<=|>=|<|>)\s*(.+?)\s*", assertion)
    if not match:
        sys.exit(f"check-numbers: bad assertion '{assertion}'")
    (left, left_text), (right, right_text) = (term(text, match.group(1)),
                                              term(text, match.group(3)))
    holds = (left is not None and right is not None and
             OPERATORS[match.group(2)](left, right))
    print(f"{'ok' if holds else 'FAIL'}: {left_text} {match.group(2)} "
          f"{right_text}")
    return holds


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        text = f.read()
    results = [check(text, a) for a in sys.argv[2:]]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
