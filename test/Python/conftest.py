"""Fixtures of the Python tests: modules built with runtime/python/
gradc_build.py from dsl_examples/ and Inputs/, and `gradc run` for the
numbers to compare with. Run by utils/check.sh; by hand:

    python3 -m pytest -q test/Python

The modules are cached under $GRADC_BUILD_DIR/test/Python (build/ by
default), keyed by their source, the gradc executable and gradc/Python.h.
"""

import concurrent.futures
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "runtime" / "python"))

import gradc_build  # noqa: E402

EXAMPLES = ROOT / "dsl_examples"
INPUTS = pathlib.Path(__file__).resolve().parent / "Inputs"
BUILD = pathlib.Path(os.environ.get("GRADC_BUILD_DIR", ROOT / "build"))


def _cache_dir():
    header = (ROOT / "runtime" / "include" / "gradc" / "Python.h").read_bytes()
    d = BUILD / "test" / "Python" / hashlib.sha256(header).hexdigest()[:12]
    d.mkdir(parents=True, exist_ok=True)
    return str(d)


CACHE = _cache_dir()
_modules = {}


def load(path, backend="llvm", options=(), module_name=None, split=True):
    key = (str(path), backend, tuple(options), module_name, split)
    if key not in _modules:
        _modules[key] = gradc_build.load(str(path), backend=backend,
                                         options=options,
                                         module_name=module_name,
                                         build_dir=CACHE, split=split)
    return _modules[key]


def f64_variant(name):
    """dsl_examples/NAME.grad with every f32 made f64, for gradcheck."""
    text = (EXAMPLES / f"{name}.grad").read_text().replace("f32", "f64")
    path = pathlib.Path(CACHE) / f"{name}_f64.grad"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def example(name, f64=False, backend="llvm"):
    path = f64_variant(name) if f64 else EXAMPLES / f"{name}.grad"
    return load(path, backend)


def gradc_run(path, call):
    """The results of `gradc run PATH --call CALL`, as nested lists."""
    out = subprocess.run([gradc_build.find_gradc(), "run", str(path),
                          "--call", call], check=True, text=True,
                         stdout=subprocess.PIPE).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def calls():
    return load(INPUTS / "calls.grad")


# Every module the tests load, built up front on every core (a cold cache,
# after gradc changed, costs a compile per module).
PREBUILT = [(INPUTS / "calls.grad", "llvm", True),
            (INPUTS / "calls.grad", "cpp", True),
            (INPUTS / "calls.grad", "llvm", False)]
PREBUILT += [(EXAMPLES / f"{n}.grad", "llvm", True) for n in (
    "stack_override", "identity_overrides", "custom_clip",
    "gradient_reversal", "dann", "split_layer")]


@pytest.fixture(scope="session", autouse=True)
def prebuild():
    jobs = PREBUILT + [(f64_variant(n), "llvm", True) for n in (
        "spiral_mlp", "mlp", "split_layer", "stable_logsumexp", "dann",
        "identity_overrides", "stack_override")]
    jobs.append((f64_variant("split_layer"), "llvm", False))
    jobs.append((EXAMPLES / "spiral_mlp.grad", "llvm", True))
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        for f in [pool.submit(gradc_build.build, str(path), backend,
                              build_dir=CACHE, split=split)
                  for path, backend, split in jobs]:
            f.result()
