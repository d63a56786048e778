# The gradc lit suite: golden tests per phase, diagnostics via -verify, and
# numeric end-to-end tests.
import os
import shutil

import lit.formats

config.name = "gradc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".grad", ".ir", ".test", ".cpp"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gradc_obj_root, "test")

tools = config.gradc_tools_dir
# Longer names first: lit substitutes in order, and %gradc is a prefix.
config.substitutions.append(("%gradc_src", config.gradc_src_root))
config.substitutions.append(("%gradc_obj", config.gradc_obj_root))
filecheck = os.path.join(config.llvm_tools_dir, "FileCheck")
config.substitutions.append(("%gradc-opt", os.path.join(tools, "gradc-opt", "gradc-opt")))
config.substitutions.append(("%gradc", os.path.join(tools, "gradc", "gradc")))
config.substitutions.append(("%filecheck", filecheck + " --implicit-check-not=error:"))
config.substitutions.append(("%cxx", config.cxx_compiler))
config.substitutions.append(("%runtime", os.path.join(config.gradc_src_root, "runtime", "include")))
config.substitutions.append(("%examples_bin", os.path.join(config.gradc_obj_root, "dsl_examples")))
config.substitutions.append(("%examples", os.path.join(config.gradc_src_root, "dsl_examples")))
config.substitutions.append(("%python", "python3"))
# OpenBLAS, where CMake found it: the BLAS paths of both backends.
if config.openblas_library and not config.openblas_library.endswith("NOTFOUND"):
    config.available_features.add("openblas")
    config.substitutions.append(("%openblas", config.openblas_library))
# The driver links mimalloc (CMake's GRADC_ALLOCATOR found it).
if getattr(config, "gradc_mimalloc", "OFF") in ("ON", "1", "TRUE"):
    config.available_features.add("mimalloc")

# A Python 3 with NumPy for the Python modules' tests (test/Package), and
# one with NumPy and PyTorch for the doc blocks that run Python
# (docs/Python.md): the first of $GRADC_PYTHON, python3 and /usr/bin/python3
# that imports them.
import subprocess


def find_python(modules):
    for python in [os.environ.get("GRADC_PYTHON"), "python3",
                   "/usr/bin/python3"]:
        if python and shutil.which(python) and subprocess.call(
                [python, "-c", "import " + modules],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
            return shutil.which(python)
    return None


python_numpy = find_python("numpy")
if python_numpy:
    config.available_features.add("python-numpy")
    # Before %python, of which it is a longer form.
    config.substitutions.insert(0, ("%python_numpy", python_numpy))
python_torch = find_python("numpy, torch")
if python_torch:
    config.environment["GRADC_DOCS_PYTHON"] = python_torch
    config.available_features.add("python-torch")
    # Before %python_numpy and %python, of which it is a longer form.
    config.substitutions.insert(0, ("%python_torch", python_torch))

# test/Package builds a project against the installed package with CMake
# and Ninja; test/Examples runs the host programs of dsl_examples/.
config.substitutions.append(("%cmake", config.cmake_command))
config.substitutions.append(("%cc", config.c_compiler))
config.substitutions.append(("%llvm_libdir", config.llvm_library_dir))
ninja = config.cmake_make_program
if os.path.basename(ninja) != "ninja":
    ninja = shutil.which("ninja") or ""
if ninja:
    config.available_features.add("ninja")
    config.substitutions.append(("%ninja", ninja))
for tool in ("g++-12", "clang++-19", "gcc-12", "clang-19"):
    if shutil.which(tool):
        config.available_features.add(tool)
if config.gradc_build_examples.upper() in ("ON", "TRUE", "1", "YES"):
    config.available_features.add("examples")

# FileCheck and not come from LLVM 19's tools directory.
# No cache of extern header checks (docs/Extern.md) unless a test asks for
# one: every test sees Clang's check, whatever ran before it.
config.environment["GRADC_CACHE_DIR"] = ""
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", "")])
