# gradc_add_module(<target> <file.grad>
#                  [BACKEND cpp|llvm] [MODULE_NAME <name>] [SPLIT_GRAD]
#                  [VALUE_AND_GRAD] [NO_BLAS]
#                  [INCLUDE_DIRECTORIES <dirs>...] [SOURCES <files>...]
#                  [OPTIONS <flags>...])
#
# Generates code for <file.grad> at build time and makes <target>, a static
# library that carries the generated header: `#include "<stem>.h"` after
# `target_link_libraries(app PRIVATE <target>)`, where <stem> is the file's
# name without `.grad`. The code is regenerated when the .grad file or the
# gradc executable changes.
#
# BACKEND cpp (the default) compiles generated C++ with the project's own
# compiler and flags; BACKEND llvm links an object file that gradc compiles
# with LLVM for the host CPU (pass OPTIONS --cpu=generic, or --target=...,
# for another machine). Both implement the same C ABI, declared by the same
# header, so switching backends changes no line of the program.
#
# MODULE_NAME sets the prefix of the C symbols and the C++ namespace
# (`--module-name`); without it gradc derives them from <stem> (docs/ABI.md).
# SPLIT_GRAD also generates NAME_fwd and NAME_bwd, the split form of each
# gradient (`--split-grad`, docs/ABI.md), for use inside another autodiff
# system. VALUE_AND_GRAD also generates NAME_value_and_grad, the results
# and the gradient from one forward pass (`--value-and-grad`). Where CMake
# finds OpenBLAS (Debian: libopenblas-dev), matrix products above a size
# call cblas_sgemm/dgemm and the target links OpenBLAS: BACKEND cpp
# compiles the code with -DGRADC_USE_BLAS (docs/CppBackend.md), BACKEND
# llvm passes --blas (docs/LLVMBackend.md); NO_BLAS keeps the inline
# kernels. OPTIONS are passed to every gradc command of the module (for
# example -O0 or --passes=...).
#
# For `extern fn` declarations (docs/Extern.md): INCLUDE_DIRECTORIES are
# searched for their headers (after the .grad file's own directory, which
# is always searched), both by gradc's header check (`-I`) and when the
# generated C++ is compiled; SOURCES (the C/C++ that defines the extern
# functions) are compiled into <target>.
#
# Works in the gradc tree (GRADC_EXECUTABLE is the `gradc` target) and from
# an installed package (the imported `gradc::gradc`). GRADC_RUNTIME_TARGET
# names the interface library with the runtime headers (`gradc/Runtime.h`),
# which the C++ layer of every generated header includes.

function(gradc_add_module target grad_file)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "SPLIT_GRAD;VALUE_AND_GRAD;NO_BLAS"
    "BACKEND;MODULE_NAME" "OPTIONS;INCLUDE_DIRECTORIES;SOURCES")
  if(ARG_UNPARSED_ARGUMENTS)
    list(JOIN ARG_UNPARSED_ARGUMENTS " " unparsed)
    message(FATAL_ERROR "gradc_add_module: unknown argument(s) '${unparsed}'; "
      "expected BACKEND, MODULE_NAME, SPLIT_GRAD, VALUE_AND_GRAD, NO_BLAS, "
      "INCLUDE_DIRECTORIES, SOURCES or OPTIONS")
  endif()
  if(NOT ARG_BACKEND)
    set(ARG_BACKEND cpp)
  endif()
  if(NOT ARG_BACKEND MATCHES "^(cpp|llvm)$")
    message(FATAL_ERROR
      "gradc_add_module: BACKEND must be cpp or llvm, not '${ARG_BACKEND}'")
  endif()
  if(NOT GRADC_EXECUTABLE)
    message(FATAL_ERROR "gradc_add_module: GRADC_EXECUTABLE is not set")
  endif()

  get_filename_component(grad_path "${grad_file}" ABSOLUTE)
  get_filename_component(stem "${grad_file}" NAME_WE)
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/gradc/${target}")
  set(header "${out_dir}/${stem}.h")
  set(flags ${ARG_OPTIONS})
  if(ARG_SPLIT_GRAD)
    list(PREPEND flags "--split-grad")
  endif()
  if(ARG_VALUE_AND_GRAD)
    list(PREPEND flags "--value-and-grad")
  endif()
  # BLAS where CMake finds OpenBLAS, unless NO_BLAS: the C++ backend's code
  # is compiled with -DGRADC_USE_BLAS (below), the LLVM backend's with
  # --blas; both link OpenBLAS.
  if(NOT ARG_NO_BLAS AND ARG_BACKEND STREQUAL "llvm")
    find_library(GRADC_OPENBLAS_LIBRARY openblas)
    if(GRADC_OPENBLAS_LIBRARY)
      list(APPEND flags "--blas")
    endif()
  endif()
  # Without MODULE_NAME gradc names the module itself, so that the symbols
  # are those that docs/ABI.md promises for the file name.
  if(ARG_MODULE_NAME)
    list(PREPEND flags "--module-name=${ARG_MODULE_NAME}")
  endif()
  # Extern functions: the .grad file's directory and INCLUDE_DIRECTORIES
  # hold their headers.
  get_filename_component(grad_dir "${grad_path}" DIRECTORY)
  set(include_dirs "${grad_dir}")
  foreach(dir IN LISTS ARG_INCLUDE_DIRECTORIES)
    get_filename_component(dir "${dir}" ABSOLUTE)
    list(APPEND include_dirs "${dir}")
    list(APPEND flags "-I${dir}")
  endforeach()
  set(extern_sources "")
  foreach(src IN LISTS ARG_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE)
    list(APPEND extern_sources "${src}")
  endforeach()

  # An executable target in DEPENDS, the `gradc` of this tree or the
  # imported gradc::gradc, makes the commands re-run when its file changes.
  if(TARGET "${GRADC_EXECUTABLE}")
    set(gradc_cmd "$<TARGET_FILE:${GRADC_EXECUTABLE}>")
  else()
    set(gradc_cmd "${GRADC_EXECUTABLE}")
  endif()

  if(ARG_BACKEND STREQUAL "cpp")
    set(code "${out_dir}/${stem}.cpp")
    set(emit cpp)
  else()
    # The object suffix of the platform (.o, .obj) from whichever of C++
    # and C the project enabled.
    set(ext "${CMAKE_CXX_OUTPUT_EXTENSION}")
    if(NOT ext)
      set(ext "${CMAKE_C_OUTPUT_EXTENSION}")
    endif()
    if(NOT ext)
      set(ext ".o")
    endif()
    set(code "${out_dir}/${stem}${ext}")
    set(emit obj)
  endif()

  get_filename_component(code_name "${code}" NAME)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)

  # One command writes both files, so the header never describes other
  # code than the one linked.
  add_custom_command(
    OUTPUT "${header}" "${code}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${out_dir}"
    COMMAND ${gradc_cmd} "${grad_path}" --emit=header -o "${header}" ${flags}
    COMMAND ${gradc_cmd} "${grad_path}" --emit=${emit} -o "${code}" ${flags}
    DEPENDS "${grad_path}" "${GRADC_EXECUTABLE}"
    COMMENT "gradc: generating ${stem}.h and ${code_name} for ${target}"
    VERBATIM)

  if(ARG_BACKEND STREQUAL "cpp")
    add_library(${target} STATIC "${code}" "${header}" ${extern_sources})
    if(NOT ARG_NO_BLAS)
      find_library(GRADC_OPENBLAS_LIBRARY openblas)
      if(GRADC_OPENBLAS_LIBRARY)
        # Only the generated .cpp: the header's C++ layer needs no BLAS.
        target_compile_definitions(${target} PRIVATE GRADC_USE_BLAS)
        target_link_libraries(${target} PUBLIC ${GRADC_OPENBLAS_LIBRARY})
      endif()
    endif()
  else()
    set_source_files_properties("${code}" PROPERTIES
      EXTERNAL_OBJECT TRUE GENERATED TRUE)
    add_library(${target} STATIC "${code}" "${header}" ${extern_sources})
    # The library has no source to infer the language from; a C program
    # needs no C++ to link the object.
    if("CXX" IN_LIST languages)
      set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
    else()
      set_target_properties(${target} PROPERTIES LINKER_LANGUAGE C)
    endif()
    if(NOT ARG_NO_BLAS)
      find_library(GRADC_OPENBLAS_LIBRARY openblas)
      if(GRADC_OPENBLAS_LIBRARY)
        target_link_libraries(${target} PUBLIC ${GRADC_OPENBLAS_LIBRARY})
      endif()
    endif()
    # LLVM's code calls libm (exp, log, tanh, ...) and malloc; a C++ link
    # brings libm anyway, a C program's link does not.
    if(UNIX AND NOT APPLE)
      target_link_libraries(${target} PUBLIC m)
    endif()
  endif()
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out_dir}>")
  target_include_directories(${target} PRIVATE ${include_dirs})
  if(GRADC_RUNTIME_TARGET)
    target_link_libraries(${target} PUBLIC ${GRADC_RUNTIME_TARGET})
  else()
    target_include_directories(${target} PUBLIC ${GRADC_RUNTIME_INCLUDE_DIR})
  endif()
  # The C++ layer of the header (and the generated C++) needs C++17.
  if("CXX" IN_LIST languages)
    target_compile_features(${target} PUBLIC cxx_std_17)
  endif()
endfunction()

# gradc_add_python_module(<name> <file.grad>
#                         [BACKEND cpp|llvm] [OPTIONS <flags>...])
#
# Builds <name>, a Python extension module (`import <name>`) with every
# function of <file.grad>, its NAME_grad and the split NAME_fwd/NAME_bwd
# (docs/Python.md): `gradc --emit=python` writes the module's C++ source,
# which is compiled against the Python headers and gradc/Python.h and linked
# with the module's code from BACKEND (as gradc_add_module, built
# position-independent, into the static library <name>_gradc). The C
# symbols are prefixed <name>. gradc_torch.py and gradc_build.py are copied
# next to the module, so that `import gradc_torch` works from its
# directory.
#
# It needs Python 3's development files and NumPy at run time (Debian:
# python3-dev, python3-numpy); it calls find_package(Python3) unless the
# project did. Set Python3_EXECUTABLE to choose the interpreter.

function(gradc_add_python_module target grad_file)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "BACKEND" "OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    list(JOIN ARG_UNPARSED_ARGUMENTS " " unparsed)
    message(FATAL_ERROR "gradc_add_python_module: unknown argument(s) "
      "'${unparsed}'; expected BACKEND or OPTIONS")
  endif()
  if(NOT ARG_BACKEND)
    set(ARG_BACKEND cpp)
  endif()
  if(NOT ARG_BACKEND MATCHES "^(cpp|llvm)$")
    message(FATAL_ERROR "gradc_add_python_module: BACKEND must be cpp or "
      "llvm, not '${ARG_BACKEND}'")
  endif()
  if(NOT target MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "gradc_add_python_module: '${target}' is not a "
      "Python module name")
  endif()
  if(NOT COMMAND Python3_add_library)
    find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
  endif()

  gradc_add_module(${target}_gradc "${grad_file}" BACKEND ${ARG_BACKEND}
    MODULE_NAME ${target} SPLIT_GRAD OPTIONS ${ARG_OPTIONS})
  set_target_properties(${target}_gradc PROPERTIES
    POSITION_INDEPENDENT_CODE ON)

  get_filename_component(grad_path "${grad_file}" ABSOLUTE)
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/gradc/${target}")
  set(wrapper "${out_dir}/${target}_python.cpp")
  if(TARGET "${GRADC_EXECUTABLE}")
    set(gradc_cmd "$<TARGET_FILE:${GRADC_EXECUTABLE}>")
  else()
    set(gradc_cmd "${GRADC_EXECUTABLE}")
  endif()
  add_custom_command(
    OUTPUT "${wrapper}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${out_dir}"
    COMMAND ${gradc_cmd} "${grad_path}" --emit=python -o "${wrapper}"
            --split-grad --module-name=${target} ${ARG_OPTIONS}
    DEPENDS "${grad_path}" "${GRADC_EXECUTABLE}"
    COMMENT "gradc: generating the Python module ${target}"
    VERBATIM)
  Python3_add_library(${target} MODULE WITH_SOABI "${wrapper}")
  target_link_libraries(${target} PRIVATE ${target}_gradc)
  if(GRADC_PYTHON_DIR)
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND "${CMAKE_COMMAND}" -E copy_if_different
              "${GRADC_PYTHON_DIR}/gradc_torch.py"
              "${GRADC_PYTHON_DIR}/gradc_build.py"
              "$<TARGET_FILE_DIR:${target}>"
      VERBATIM)
  endif()
endfunction()
