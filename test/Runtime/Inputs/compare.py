#!/usr/bin/env python3
"""Runs calls through C++ emitted by gradc and through `gradc run`, and
compares the printed numbers.

For a .grad file and a list of calls (`--call 'f([1, 2], 3)'`, or every
`# CALL: f(...)` line of the files given with --calls-from), this script

  1. emits `--emit=cpp` (or with --backend=llvm `--emit=obj`, the LLVM
     backend's object code)
     and `--emit=header` into the output directory;
  2. writes a C++ driver that calls each function through the generated
     header's C ABI on the literal arguments and prints every result in
     `gradc run`'s format (nested brackets, one result per line);
  3. compiles driver + generated code with each --cxx compiler and the
     given flags (default: -std=c++17 -O2 -Wall -Wextra -Wpedantic -Werror),
     plus those in gradc-runtime-flags.txt of the build directory (CMake's
     GRADC_USE_BLAS writes -DGRADC_USE_BLAS and the OpenBLAS library
     there), and runs it;
  4. runs `gradc run FILE --call CALL` (the reference interpreter) and
     compares every number within the documented tolerance: for f32
     |a - b| <= 1e-5 * max(|a|, |b|) + 1e-6, for f64 1e-10 and 1e-12;
     NaN must meet NaN, infinities must match exactly, and the bracket
     structure must be identical.

Exits 1 and says what differs on the first mismatch.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

CTYPES = {"f32": "float", "f64": "double", "i32": "int32_t", "bool": "uint8_t"}
TOL = {"f32": (1e-5, 1e-6), "f64": (1e-10, 1e-12), "i32": (0, 0),
       "bool": (0, 0)}


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, **kw)
    if p.returncode != 0:
        sys.stderr.write("command failed: %s\n%s%s" %
                         (" ".join(cmd), p.stdout, p.stderr))
        sys.exit(1)
    return p.stdout


def parse_type(text):
    """'f32[B, 4]' -> ('f32', ['B', 4]); 'f32' -> ('f32', [])."""
    m = re.fullmatch(r"\s*(\w+)\s*(?:\[(.*)\])?\s*", text)
    dims = []
    if m.group(2):
        for d in m.group(2).split(","):
            d = d.strip()
            dims.append(int(d) if re.fullmatch(r"-?\d+", d) else d)
    return m.group(1), dims


def split_top(text):
    """Splits on commas outside brackets and parentheses."""
    parts, depth, cur = [], 0, ""
    for c in text:
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur)
    return parts


def signatures(gradc, grad_file, extra):
    """Function name -> (param types, result types) from --emit=grad-ir."""
    ir = run([gradc, grad_file, "--emit=grad-ir"] + extra)
    sigs = {}
    for line in ir.splitlines():
        m = re.match(r"func @([\w.]+)\((.*?)\) -> (.*?)( attributes .*)? \{$",
                     line)
        if not m:
            continue
        params = [parse_type(p.split(":", 1)[1]) for p in split_top(m.group(2))]
        res = m.group(3).strip()
        if res.startswith("("):
            res = res[1:-1]
        results = [parse_type(r) for r in split_top(res)]
        sigs[m.group(1)] = (params, results)
    return sigs


def shape_of(value):
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def flatten(value):
    if isinstance(value, list):
        out = []
        for v in value:
            out.extend(flatten(v))
        return out
    return [value]


def c_literal(dtype, v):
    if dtype == "bool":
        return "1" if v else "0"
    if dtype == "i32":
        return str(int(v))
    text = repr(float(v))
    return text + ("f" if dtype == "f32" else "")


def driver_block(module, name, call_args, sig, index):
    params, results = sig
    sizes, order = {}, []
    lines = ["  {"]
    args = []
    for (dtype, dims), value in zip(params, call_args):
        shape = shape_of(value)
        for d, n in zip(dims, shape):
            if isinstance(d, str) and d not in sizes:
                sizes[d] = n
                order.append(d)
    for i, ((dtype, dims), value) in enumerate(zip(params, call_args)):
        if not dims:
            args.append(c_literal(dtype, value))
            continue
        flat = flatten(value)
        items = ", ".join(c_literal(dtype, v) for v in flat) or "0"
        lines.append("    static const %s a%d[] = {%s};" %
                     (CTYPES[dtype], i, items))
        args.append("a%d" % i)
    outs = []
    for r, (dtype, dims) in enumerate(results):
        shape = [sizes[d] if isinstance(d, str) else d for d in dims]
        count = 1
        for n in shape:
            count *= n
        lines.append("    std::vector<%s> r%d(%d);" %
                     (CTYPES[dtype], r, max(count, 1)))
        outs.append(("r%d.data()" % r, dtype, shape))
    call = "%s_%s(%s)" % (module, name, ", ".join(
        [str(sizes[s]) for s in order] + args + [o[0] for o in outs]))
    lines.append("    int status = %s;" % call)
    lines.append('    std::printf("== call %d\\n");' % index)
    lines.append("    if (status != GRADC_OK)")
    lines.append('      std::printf("status %d\\n", status);')
    lines.append("    else {")
    for ptr, dtype, shape in outs:
        dims = ", ".join(str(n) for n in shape)
        lines.append("      printTensor(%s, std::vector<int64_t>{%s});" %
                     (ptr, dims))
    lines.append("    }")
    lines.append("  }")
    return lines


DRIVER_HEAD = r'''// Generated by test/Runtime/Inputs/compare.py.
#include "%s"

#include <cstdio>
#include <vector>

inline void printValue(float v) { std::printf("%%.9g", v); }
inline void printValue(double v) { std::printf("%%.17g", v); }
inline void printValue(int32_t v) { std::printf("%%d", v); }
inline void printValue(uint8_t v) { std::printf(v ? "true" : "false"); }

template <typename T>
static void printNested(const T *data, const std::vector<int64_t> &shape,
                        size_t dim, int64_t &pos) {
  if (dim == shape.size()) {
    printValue(data[pos++]);
    return;
  }
  std::printf("[");
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i)
      std::printf(", ");
    printNested(data, shape, dim + 1, pos);
  }
  std::printf("]");
}

template <typename T>
static void printTensor(const T *data, const std::vector<int64_t> &shape) {
  int64_t pos = 0;
  printNested(data, shape, 0, pos);
  std::printf("\n");
}

int main() {
'''

NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)|true|false")


def tokens(text):
    structure = NUMBER.sub("#", text).replace(" ", "")
    return structure, NUMBER.findall(text)


def to_float(t):
    if t == "true":
        return 1.0
    if t == "false":
        return 0.0
    return float(t)


def compare(call, dtypes, got, want):
    if len(got) != len(want):
        return "%d result lines from C++, %d from gradc run" % (len(got),
                                                                 len(want))
    for r, (g, w) in enumerate(zip(got, want)):
        gs, gn = tokens(g)
        ws, wn = tokens(w)
        if gs != ws or len(gn) != len(wn):
            return "result %d: C++ printed %s, gradc run %s" % (r, g, w)
        rtol, atol = TOL[dtypes[r]]
        for a, b in zip(gn, wn):
            x, y = to_float(a), to_float(b)
            if math.isnan(x) or math.isnan(y):
                if not (math.isnan(x) and math.isnan(y)):
                    return "result %d: %s against %s" % (r, a, b)
                continue
            if math.isinf(x) or math.isinf(y):
                if x != y:
                    return "result %d: %s against %s" % (r, a, b)
                continue
            if abs(x - y) > rtol * max(abs(x), abs(y)) + atol:
                return "result %d: %s against %s (C++ %s, gradc run %s)" % (
                    r, a, b, g, w)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("grad_file")
    ap.add_argument("--gradc", required=True)
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--out", required=True, help="directory for files")
    ap.add_argument("--cxx", action="append", default=[])
    ap.add_argument("--flags", default="-std=c++17 -O2 -Wall -Wextra "
                    "-Wpedantic -Werror")
    ap.add_argument("--call", action="append", default=[])
    ap.add_argument("--calls-from", action="append", default=[])
    ap.add_argument("--gradc-flag", action="append", default=[])
    ap.add_argument("--module-name", default="m")
    ap.add_argument("--backend", choices=["cpp", "llvm"], default="cpp",
                    help="link the driver with the C++ backend's code (the "
                    "default) or the LLVM backend's object file")
    opts = ap.parse_args()

    calls = list(opts.call)
    for path in opts.calls_from:
        for line in open(path):
            m = re.match(r"\s*#\s*CALL:\s*(.*\S)\s*$", line)
            if m:
                calls.append(m.group(1))
    os.makedirs(opts.out, exist_ok=True)
    module = opts.module_name
    base = os.path.join(opts.out, module)
    extra = opts.gradc_flag + ["--module-name=" + module]
    code = base + (".cpp" if opts.backend == "cpp" else ".o")
    run([opts.gradc, opts.grad_file,
         "--emit=" + ("cpp" if opts.backend == "cpp" else "obj"), "-o",
         code] + extra)
    run([opts.gradc, opts.grad_file, "--emit=header", "-o", base + ".h"] +
        extra)
    sigs = signatures(opts.gradc, opts.grad_file, opts.gradc_flag)

    driver = [DRIVER_HEAD % (base + ".h")]
    parsed = []
    for i, call in enumerate(calls):
        m = re.fullmatch(r"\s*([\w.]+)\s*\((.*)\)\s*", call, re.S)
        name = m.group(1)
        args = json.loads("[" + m.group(2) + "]")
        parsed.append((name, args))
        driver.extend(driver_block(module, name, args, sigs[name], i))
    driver.append("  return 0;\n}\n")
    with open(base + "_driver.cpp", "w") as f:
        f.write("\n".join(driver))

    # Flags the build asks for (GRADC_USE_BLAS): the build directory is
    # three levels above compiler/tools/gradc/gradc.
    build_dir = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(opts.gradc)))))
    build_flags = []
    flags_file = os.path.join(build_dir, "gradc-runtime-flags.txt")
    if os.path.exists(flags_file):
        build_flags = open(flags_file).read().split()
    outputs = []
    for cxx in opts.cxx or ["c++"]:
        exe = base + "_" + os.path.basename(cxx.split()[0])
        run(cxx.split() + opts.flags.split() + ["-I", opts.runtime, "-o", exe,
                                                code,
                                                base + "_driver.cpp"] + build_flags
            + (["-lm"] if opts.backend == "llvm" else []))
        outputs.append((cxx, run([exe])))

    for i, call in enumerate(calls):
        name, _ = parsed[i]
        dtypes = [d for d, _ in sigs[name][1]]
        want = run([opts.gradc, "run", opts.grad_file, "--call", call] +
                   opts.gradc_flag).strip().splitlines()
        for cxx, text in outputs:
            block = text.split("== call %d\n" % i)[1].split("== call")[0]
            got = block.strip().splitlines()
            problem = compare(call, dtypes, got, want)
            if problem:
                print("MISMATCH (%s) in %s: %s" % (cxx, call, problem))
                return 1
    print("%d calls agree with gradc run (%s)" %
          (len(calls), ", ".join(c for c in opts.cxx or ["c++"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
