"""Checks every fenced code block of Markdown pages against the real gradc.

Each code block of a page is preceded by an HTML comment, its marker, that
says how the block is checked. The kinds, as `<!-- KIND: ARGUMENTS -->`:

  program: NAME      the block is a whole program: it is written to NAME in
                     a scratch directory and must compile without a
                     diagnostic (`gradc NAME` for .grad, `gradc-opt NAME`
                     for .ir). Later blocks of the page may use NAME.
  program-error: NAME
                     a whole program that gradc (gradc-opt) must reject
                     with status 1; a later block shows the messages.
  source: NAME       the block is a file that a later `commands` block of
                     the page uses (a host program, say): it is written to
                     NAME, and it is an error if no later `commands` block
                     names it.
  transcript         each `$ gradc ...` / `$ gradc-opt ...` line is run and
                     the lines after it must be what it prints (standard
                     output and error, merged).
  gradc: ARGS        the block is an excerpt of what `gradc ARGS` prints
  gradc-opt: ARGS    (or gradc-opt) on standard output; it must succeed.
  gradc-error: ARGS  the block is an excerpt of what `gradc ARGS` (or
  gradc-opt-error:   gradc-opt) prints on standard error; it must fail
                     with status 1.
  file: PATH         the block is an excerpt of the repository file PATH.
  commands           each line (with `\\` continuations) is a shell command
                     that must succeed, run in the scratch directory with
                     gradc and gradc-opt on the PATH (and as `python3`,
                     $GRADC_DOCS_PYTHON if set).
  synopsis           a usage summary: every option it names (`--emit=ir`,
                     `[-O0]`) must be one the command's `--help` lists,
                     with that value.
  not-code: REASON   not checked (an EBNF, a schema, an external recipe);
                     counted, so that a reviewer sees how many there are.

Besides its marker a block may be preceded by `<!-- input: NAME = PATH -->`
comments, each of which copies the repository file PATH to NAME in the
scratch directory first (a program the page does not show, such as one
that provokes the error a block quotes).

Commands run in a scratch directory per page that links every top-level
entry of the repository, so `dsl_examples/mlp.grad` means the repository's
file and `model.grad` a program of the page, and file names print as the
page writes them. "Excerpt" means the block's lines occur in the source in
order and contiguously, except that a line `...` (or `// ...`, `# ...`,
`; ...`) skips any number of lines; trailing white space is ignored. In a
transcript the output must match whole, `...` lines aside.

Every mismatch is reported as `PAGE:LINE: message`; the exit status is 1
if there was any, or if the pages have no block at all.

    check-doc-blocks.py PAGE... --root REPO --gradc GRADC --gradc-opt OPT
"""

import argparse
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)```")
MARKER = re.compile(r"^\s*<!--\s*([a-z-]+)\s*(?::\s*(.*?))?\s*-->\s*$")
ELISION = {"...", "// ...", "# ...", "; ...", "/* ... */"}
TOOLS = ("gradc", "gradc-opt")
KINDS = ("program", "program-error", "source", "transcript", "gradc",
         "gradc-opt", "gradc-error", "gradc-opt-error", "file", "commands",
         "synopsis", "not-code")
TIMEOUT = 120
# A `commands` block may start PyTorch in several processes (README's DDP
# line). On a clean CI machine that is the first import of torch, read cold
# from disk while the other lit worker runs: the first CI run of it took
# longer than 120 s. The limit is a guard against a hang, not a budget.
COMMAND_TIMEOUT = 600


def tail(output, lines=20):
    """The last lines a timed-out command printed, on one line."""
    if isinstance(output, bytes):
        output = output.decode(errors="replace")
    return " | ".join((output or "").strip().splitlines()[-lines:])


class Mismatch(Exception):
    """A block that is not what it claims; `line` is the page line."""

    def __init__(self, line, message):
        super().__init__(message)
        self.line = line
        self.message = message


class Block:
    def __init__(self, fence_line, markers, body):
        self.fence_line = fence_line  # 1-based line of the opening fence
        self.markers = markers  # [(line, kind, argument)]
        self.body = body  # lines, the fence's indentation removed

    def page_line(self, index):
        """The page line of body line `index`."""
        return self.fence_line + 1 + index


def parse_page(page_lines):
    """Yields the Blocks of a page, with the marker comments above each."""
    i = 0
    while i < len(page_lines):
        fence = FENCE.match(page_lines[i])
        if not fence:
            i += 1
            continue
        indent = len(fence.group(1))
        start = i
        markers = []
        j = i - 1
        while j >= 0:
            if not page_lines[j].strip():
                j -= 1
                continue
            marker = MARKER.match(page_lines[j])
            if not marker:
                break
            markers.insert(0, (j + 1, marker.group(1), marker.group(2) or ""))
            j -= 1
        i += 1
        body = []
        while i < len(page_lines) and not FENCE.match(page_lines[i]):
            body.append(page_lines[i][indent:] if
                        page_lines[i][:indent].strip() == "" else
                        page_lines[i].lstrip())
            i += 1
        i += 1
        yield Block(start + 1, markers, body)


def split_pieces(lines, first):
    """Splits block lines at elision lines: [(index of first line, lines)].
    Also says whether the block starts or ends with an elision."""
    pieces, piece, at = [], [], first
    for n, line in enumerate(lines):
        if line.strip() in ELISION:
            pieces.append((at, piece))
            piece, at = [], first + n + 1
        else:
            piece.append(line.rstrip())
    pieces.append((at, piece))
    starts_open = bool(lines) and lines[0].strip() in ELISION
    ends_open = bool(lines) and lines[-1].strip() in ELISION
    return pieces, starts_open, ends_open


def describe_miss(block, index, piece, source, at):
    """The first line of `piece` that cannot be matched: the longest
    prefix of the piece that occurs in `source` from `at` decides which."""
    best, best_k = 0, None
    for k in range(at, len(source)):
        n = 0
        while n < len(piece) and k + n < len(source) and \
                source[k + n] == piece[n]:
            n += 1
        if n > best:
            best, best_k = n, k
    line = block.page_line(index + best)
    want = piece[best] if best < len(piece) else ""
    if best_k is None:
        best_k = at
    got = source[best_k + best] if best_k + best < len(source) else \
        "(the end)"
    return line, f"{want!r}, where it has {got!r}"


def match_excerpt(block, lines, first, source, what, whole=False):
    """Raises Mismatch unless `lines` (block lines from index `first`)
    occur in `source` in order; `whole` anchors both ends, except where
    the block starts or ends with an elision."""
    source = [line.rstrip() for line in source]
    pieces, starts_open, ends_open = split_pieces(lines, first)
    pieces = [(index, piece) for index, piece in pieces if piece]
    if whole and not pieces and not starts_open and source:
        raise Mismatch(block.page_line(first - 1),
                       f"{what} is not empty: {source[0]!r}")
    at = 0
    for n, (index, piece) in enumerate(pieces):
        anchor_start = whole and n == 0 and not starts_open
        anchor_end = whole and n == len(pieces) - 1 and not ends_open
        candidates = [at] if anchor_start else \
            range(at, len(source) - len(piece) + 1)
        matches = [k for k in candidates
                   if source[k:k + len(piece)] == piece]
        found = next((k for k in matches
                      if not anchor_end or k + len(piece) == len(source)),
                     None)
        if found is None:
            if matches:
                rest = source[matches[0] + len(piece)]
                raise Mismatch(block.page_line(index + len(piece) - 1),
                               f"{what} goes on after this line: "
                               f"{rest!r}")
            line, detail = describe_miss(block, index, piece, source, at)
            raise Mismatch(line, f"not in {what}: {detail}")
        at = found + len(piece)


class PageChecker:
    def __init__(self, page, name, args):
        self.page = page
        self.name = name
        self.args = args
        self.tools = {"gradc": args.gradc, "gradc-opt": args.gradc_opt}
        self.scratch = None

    def setup_scratch(self):
        self.scratch = tempfile.mkdtemp(prefix="doc-blocks-")
        for entry in sorted(os.listdir(self.args.root)):
            os.symlink(os.path.join(self.args.root, entry),
                       os.path.join(self.scratch, entry))

    def env(self):
        env = dict(os.environ)
        dirs = [os.path.dirname(os.path.abspath(t))
                for t in self.tools.values()]
        # Blocks that run Python (docs/Python.md) need NumPy and PyTorch:
        # $GRADC_DOCS_PYTHON names an interpreter that has them, which
        # `python3` then is.
        python = os.environ.get("GRADC_DOCS_PYTHON")
        if python and self.scratch:
            bin_dir = os.path.join(self.scratch, ".python-bin")
            if not os.path.isdir(bin_dir):
                os.mkdir(bin_dir)
                os.symlink(python, os.path.join(bin_dir, "python3"))
            dirs.append(bin_dir)
        env["PATH"] = os.pathsep.join(dirs + [env.get("PATH", "")])
        return env

    def run_tool(self, tool, arg_text, line, merge=False):
        """Runs gradc or gradc-opt with shell-quoted arguments."""
        try:
            argv = shlex.split(arg_text, comments=True)
        except ValueError as e:
            raise Mismatch(line, f"cannot split the command: {e}")
        try:
            return subprocess.run(
                [self.tools[tool]] + argv, cwd=self.scratch, text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                timeout=TIMEOUT, env=self.env())
        except subprocess.TimeoutExpired:
            raise Mismatch(line, f"{tool} {arg_text} timed out")

    # One method per kind; each raises Mismatch or returns.

    def check_program(self, block, name, line, must_fail=False):
        if not name or "/" in name:
            raise Mismatch(line, "a program needs a file name without a "
                           "directory")
        with open(os.path.join(self.scratch, name), "w") as f:
            f.write("\n".join(block.body) + "\n")
        tool = "gradc-opt" if name.endswith(".ir") else "gradc"
        result = self.run_tool(tool, shlex.quote(name), line)
        message = result.stderr.strip().splitlines()
        first = message[0] if message else f"exit status {result.returncode}"
        if must_fail:
            if result.returncode != 1 or not message:
                raise Mismatch(line, f"program {name} is not rejected with "
                               f"status 1: {first}")
        elif result.returncode != 0 or result.stderr:
            raise Mismatch(line, f"program {name} does not compile cleanly: "
                           + first)

    def check_source(self, block, name, line, later):
        if not name or "/" in name:
            raise Mismatch(line, "'source:' needs a file name without a "
                           "directory")
        if not any(name in "\n".join(b.body) for b in later
                   if any(m[1] == "commands" for m in b.markers)):
            raise Mismatch(line, f"no later 'commands' block uses {name}")
        with open(os.path.join(self.scratch, name), "w") as f:
            f.write("\n".join(block.body) + "\n")

    def check_output(self, block, kind, arg_text, line):
        tool = kind[:-len("-error")] if kind.endswith("-error") else kind
        result = self.run_tool(tool, arg_text, line)
        if kind.endswith("-error"):
            if result.returncode != 1:
                raise Mismatch(line, f"{tool} {arg_text} exits with "
                               f"{result.returncode}, not 1")
            text = result.stderr
        else:
            if result.returncode != 0:
                raise Mismatch(line, f"{tool} {arg_text} fails: "
                               f"{result.stderr.strip()}")
            text = result.stdout
        match_excerpt(block, block.body, 0, text.splitlines(),
                      f"{tool} {arg_text}")

    def check_file(self, block, path, line):
        try:
            with open(os.path.join(self.args.root, path)) as f:
                source = f.read().splitlines()
        except OSError as e:
            raise Mismatch(line, f"cannot read {path}: {e.strerror}")
        match_excerpt(block, block.body, 0, source, path)

    def check_transcript(self, block, line):
        commands = [n for n, text in enumerate(block.body)
                    if text.startswith("$ ")]
        if not commands or commands[0] != 0:
            raise Mismatch(line, "a transcript starts with a '$ ' line")
        for k, n in enumerate(commands):
            end = commands[k + 1] if k + 1 < len(commands) else \
                len(block.body)
            command = block.body[n][2:]
            tool, _, arg_text = command.partition(" ")
            if tool not in TOOLS:
                raise Mismatch(block.page_line(n), "a transcript runs "
                               f"gradc or gradc-opt, not {tool!r}")
            result = self.run_tool(tool, arg_text, block.page_line(n),
                                   merge=True)
            match_excerpt(block, block.body[n + 1:end], n + 1,
                          result.stdout.splitlines(), "the output",
                          whole=True)

    def check_commands(self, block, line):
        n = 0
        while n < len(block.body):
            first, command = n, block.body[n]
            while command.endswith("\\") and n + 1 < len(block.body):
                n += 1
                command = command[:-1] + " " + block.body[n].strip()
            n += 1
            if not command.strip() or command.lstrip().startswith("#"):
                continue
            try:
                result = subprocess.run(
                    command, shell=True, cwd=self.scratch, text=True,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    timeout=COMMAND_TIMEOUT, env=self.env())
            except subprocess.TimeoutExpired as e:
                raise Mismatch(block.page_line(first),
                               f"timed out after {COMMAND_TIMEOUT} s; its "
                               "output so far: " + tail(e.output))
            if result.returncode != 0:
                output = result.stdout.strip().splitlines()
                raise Mismatch(block.page_line(first),
                               f"fails with status {result.returncode}: "
                               + (output[0] if output else ""))

    def help_options(self, command):
        """The options `command --help` lists: {name: set of values}."""
        tool, *sub = command
        result = subprocess.run([self.tools[tool]] + sub + ["--help"],
                                capture_output=True, text=True,
                                timeout=TIMEOUT)
        options, last = {}, None
        for text in result.stdout.splitlines():
            option = re.match(r"^  (-{1,2})([A-Za-z0-9][\w-]*)", text)
            value = re.match(r"^    =([\w-]+)", text)
            if option:
                last = option.group(2)
                options[last] = set()
            elif value and last:
                options[last].add(value.group(1))
        return options

    def check_synopsis(self, block, line):
        current, cache = None, {}
        for n, text in enumerate(block.body):
            words = text.split()
            if words and words[0] in TOOLS:
                current = tuple(words[:2]) if len(words) > 1 and \
                    words[1] in ("run", "check") else (words[0],)
            if current is None:
                raise Mismatch(block.page_line(n), "a synopsis line starts "
                               "with gradc or gradc-opt")
            if current not in cache:
                cache[current] = self.help_options(current)
            known = cache[current]
            code = text.split("#", 1)[0]
            for match in re.finditer(
                    r"(?<![\w'])-{1,2}([A-Za-z][\w-]*)(?:=([\w|-]+))?", code):
                name, values = match.group(1), match.group(2)
                if name not in known:
                    raise Mismatch(block.page_line(n),
                                   f"'{' '.join(current)} --help' lists no "
                                   f"option '{match.group(0)}'")
                if values and known[name] and not values.isupper():
                    for value in values.split("|"):
                        if value not in known[name]:
                            raise Mismatch(
                                block.page_line(n),
                                f"'{' '.join(current)} --help' lists no "
                                f"value '{value}' of '--{name}'")

    def check_block(self, block, later):
        """Returns the kind of the block; raises Mismatch."""
        main = [m for m in block.markers if m[1] != "input"]
        if len(main) != 1:
            raise Mismatch(block.fence_line,
                           "block without a marker comment "
                           "('<!-- program: NAME -->', '<!-- transcript -->', "
                           "'<!-- not-code: REASON -->', ...)" if not main
                           else "block with several markers")
        line, kind, argument = main[0]
        for input_line, _, spec in [m for m in block.markers
                                    if m[1] == "input"]:
            name, _, path = (s.strip() for s in spec.partition("="))
            if not name or not path or "/" in name:
                raise Mismatch(input_line, "expected 'input: NAME = PATH'")
            try:
                shutil.copyfile(os.path.join(self.args.root, path),
                                os.path.join(self.scratch, name))
            except OSError as e:
                raise Mismatch(input_line, f"cannot read {path}: {e.strerror}")
        if kind not in KINDS:
            raise Mismatch(line, f"unknown marker '{kind}'; expected one of "
                           + ", ".join(KINDS))
        takes_argument = kind not in ("transcript", "commands", "synopsis")
        if takes_argument != bool(argument):
            raise Mismatch(line, f"'{kind}' takes "
                           + ("an argument" if takes_argument else
                              "no argument"))
        if kind in ("program", "program-error"):
            self.check_program(block, argument, line,
                               must_fail=kind == "program-error")
        elif kind == "source":
            self.check_source(block, argument, line, later)
        elif kind == "transcript":
            self.check_transcript(block, line)
        elif kind in ("gradc", "gradc-opt", "gradc-error",
                      "gradc-opt-error"):
            self.check_output(block, kind, argument, line)
        elif kind == "file":
            self.check_file(block, argument, line)
        elif kind == "commands":
            self.check_commands(block, line)
        elif kind == "synopsis":
            self.check_synopsis(block, line)
        return kind

    def run(self):
        """Returns (report lines, {kind: count}, failures)."""
        with open(self.page) as f:
            page_lines = f.read().splitlines()
        report, counts, failures = [], {}, 0
        self.setup_scratch()
        try:
            blocks = list(parse_page(page_lines))
            for n, block in enumerate(blocks):
                try:
                    kind = self.check_block(block, blocks[n + 1:])
                    counts[kind] = counts.get(kind, 0) + 1
                except Mismatch as e:
                    report.append(f"{self.name}:{e.line}: {e.message}")
                    counts["failed"] = counts.get("failed", 0) + 1
                    failures += 1
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return report, counts, failures


def summary(name, counts):
    total = sum(counts.values())
    parts = [f"{counts[k]} {k}" for k in KINDS + ("failed",) if k in counts]
    return f"{name}: {total} blocks" + (": " + ", ".join(parts)
                                        if parts else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--root", required=True)
    parser.add_argument("--gradc", required=True)
    parser.add_argument("--gradc-opt", required=True)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    args.root = os.path.abspath(args.root)

    def display(page):
        path = os.path.abspath(page)
        if path.startswith(args.root + os.sep):
            return os.path.relpath(path, args.root)
        return page

    checkers = [PageChecker(page, display(page), args) for page in args.pages]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: c.run(), checkers))

    totals, failures = {}, 0
    for checker, (report, counts, page_failures) in zip(checkers, results):
        for text in report:
            print(text)
        failures += page_failures
        for kind, count in counts.items():
            totals[kind] = totals.get(kind, 0) + count
    for checker, (_, counts, _) in zip(checkers, results):
        print(summary(checker.name, counts))
    blocks = sum(totals.values())
    print(f"total: {blocks} blocks, {totals.get('not-code', 0)} not code, "
          f"{failures} failed")
    sys.exit(1 if failures or blocks == 0 else 0)


if __name__ == "__main__":
    main()
