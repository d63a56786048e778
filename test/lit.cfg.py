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
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", "")])
