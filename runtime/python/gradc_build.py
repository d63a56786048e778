"""Build and import the Python module of a .grad file (docs/Python.md).

    import gradc_build
    spiral = gradc_build.load("dsl_examples/spiral_mlp.grad")

runs what docs/Python.md lists for the path without CMake::

    gradc FILE --split-grad --emit=python -o NAME_python.cpp
    gradc FILE --split-grad --emit=obj -o NAME.o     # or --emit=cpp
    c++ -std=c++17 -O2 -shared -fPIC -I runtime/include -I <python include> \\
        NAME_python.cpp NAME.o -o NAME<extension suffix>

in a cache directory ($GRADC_PYTHON_CACHE, or gradc-python-UID in the
temporary directory) keyed by the source, the options, gradc/Python.h and
the gradc executable, so that a second load (another process of a distributed run,
say) only imports. gradc is found in $GRADC, then next to this file in the
source tree's build/ directory, then on $PATH; the C++ compiler is $CXX or
c++.
"""

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

__all__ = ["load", "build", "find_gradc"]

_HERE = os.path.dirname(os.path.abspath(__file__))
# Read once, at import: sysconfig fills its tables lazily and without a
# lock, so a first call from several building threads at once can see
# them empty (EXT_SUFFIX None).
_EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
_PYTHON_INCLUDE = sysconfig.get_paths()["include"]


def find_gradc():
    """The gradc executable: $GRADC, the source tree's build, or $PATH."""
    candidates = [os.environ.get("GRADC")]
    build = os.environ.get("GRADC_BUILD_DIR",
                           os.path.join(_HERE, "..", "..", "build"))
    candidates.append(os.path.join(build, "compiler", "tools", "gradc",
                                   "gradc"))
    candidates.append(shutil.which("gradc"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise FileNotFoundError(
        "gradc not found: set $GRADC, build the tree (utils/build.sh) or "
        "put gradc on $PATH")


def _runtime_include():
    for d in (os.environ.get("GRADC_RUNTIME_INCLUDE"),
              os.path.join(_HERE, "..", "include"),      # source tree
              os.path.join(_HERE, "..", "..", "..", "include")):  # installed
        if d and os.path.isfile(os.path.join(d, "gradc", "Python.h")):
            return os.path.abspath(d)
    raise FileNotFoundError("gradc/Python.h not found: set "
                            "$GRADC_RUNTIME_INCLUDE to runtime/include")


def _module_name(grad_file):
    stem = os.path.splitext(os.path.basename(grad_file))[0]
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    if not name or name[0].isdigit():
        name = "gradc_" + name
    return name


def _run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}")


def build(grad_file, backend="llvm", module_name=None, options=(),
          build_dir=None, split=True):
    """Compiles `grad_file` into an extension module; returns its path.
    With split=False the module has no NAME_fwd and NAME_bwd, and
    gradc_torch differentiates through NAME_grad instead."""
    if backend not in ("llvm", "cpp"):
        raise ValueError(f"backend must be 'llvm' or 'cpp', not '{backend}'")
    gradc = find_gradc()
    name = module_name or _module_name(grad_file)
    options = (["--split-grad"] if split else []) + list(options)
    if module_name:
        options.append(f"--module-name={module_name}")
    with open(grad_file, "rb") as f:
        source = f.read()
    include = _runtime_include()
    with open(os.path.join(include, "gradc", "Python.h"), "rb") as f:
        header = f.read()
    key = hashlib.sha256()
    for part in (source, header, name.encode(), backend.encode(),
                 " ".join(options).encode(), sys.version.encode(),
                 str(os.stat(gradc).st_mtime_ns).encode()):
        key.update(part + b"\0")
    base = build_dir or os.environ.get("GRADC_PYTHON_CACHE") or os.path.join(
        tempfile.gettempdir(), f"gradc-python-{os.getuid()}")
    out_dir = os.path.join(base, f"{name}-{key.hexdigest()[:16]}")
    target = os.path.join(out_dir, name + _EXT_SUFFIX)
    if os.path.exists(target):
        return target
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix=name + "-", dir=base)
    try:
        wrapper = os.path.join(work, name + "_python.cpp")
        code = os.path.join(work, name + (".o" if backend == "llvm"
                                          else "_code.cpp"))
        _run([gradc, grad_file, "--emit=python", "-o", wrapper, *options])
        _run([gradc, grad_file, "--emit=obj" if backend == "llvm"
              else "--emit=cpp", "-o", code, *options])
        built = os.path.join(work, os.path.basename(target))
        _run([os.environ.get("CXX", "c++"), "-std=c++17", "-O2", "-shared",
              "-fPIC", "-I", include, "-I",
              _PYTHON_INCLUDE, wrapper, code, "-o", built])
        os.makedirs(out_dir, exist_ok=True)
        os.replace(built, target)  # atomic: concurrent builders agree
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def load(grad_file, backend="llvm", module_name=None, options=(),
         build_dir=None, split=True):
    """Builds `grad_file` if needed and imports its module."""
    path = build(grad_file, backend, module_name, options, build_dir, split)
    name = os.path.basename(path).split(".")[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module
