# gradc_add_module(<target> <file.grad>
#                  [BACKEND cpp|llvm] [MODULE_NAME <name>] [OPTIONS <flags>...])
#
# Generates code for <file.grad> at build time and makes <target>, a static
# library that carries the generated header: `#include "<stem>.h"` after
# `target_link_libraries(app PRIVATE <target>)`. The code is regenerated
# when the .grad file or the gradc executable changes.
#
# BACKEND cpp (the default) compiles generated C++ with the project's own
# compiler; BACKEND llvm links an object file that gradc produces with LLVM
# for the host. Both implement the same C ABI, declared by the same header.
#
# Works in the gradc tree (GRADC_EXECUTABLE is the `gradc` target) and from
# an installed package (the imported `gradc::gradc`).

function(gradc_add_module target grad_file)
  cmake_parse_arguments(ARG "" "BACKEND;MODULE_NAME" "OPTIONS" ${ARGN})
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
  if(NOT ARG_MODULE_NAME)
    string(MAKE_C_IDENTIFIER "${stem}" ARG_MODULE_NAME)
  endif()
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/gradc/${target}")
  set(header "${out_dir}/${stem}.h")
  set(common_flags "--module-name=${ARG_MODULE_NAME}" ${ARG_OPTIONS})
  # Depending on the executable's file makes a rebuilt gradc regenerate.
  if(TARGET "${GRADC_EXECUTABLE}")
    set(gradc_dep "${GRADC_EXECUTABLE}")
    set(gradc_cmd "$<TARGET_FILE:${GRADC_EXECUTABLE}>")
  else()
    set(gradc_dep "${GRADC_EXECUTABLE}")
    set(gradc_cmd "${GRADC_EXECUTABLE}")
  endif()

  add_custom_command(
    OUTPUT "${header}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${out_dir}"
    COMMAND ${gradc_cmd} "${grad_path}" --emit=header -o "${header}"
            ${common_flags}
    DEPENDS "${grad_path}" ${gradc_dep}
    COMMENT "gradc: header for ${grad_file}"
    VERBATIM)

  if(ARG_BACKEND STREQUAL "cpp")
    set(code "${out_dir}/${stem}.cpp")
    add_custom_command(
      OUTPUT "${code}"
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${out_dir}"
      COMMAND ${gradc_cmd} "${grad_path}" --emit=cpp -o "${code}"
              ${common_flags}
      DEPENDS "${grad_path}" ${gradc_dep}
      COMMENT "gradc: C++ for ${grad_file}"
      VERBATIM)
    add_library(${target} STATIC "${code}" "${header}")
  else()
    set(code "${out_dir}/${stem}${CMAKE_C_OUTPUT_EXTENSION}")
    if(NOT CMAKE_C_OUTPUT_EXTENSION)
      set(code "${out_dir}/${stem}.o")
    endif()
    add_custom_command(
      OUTPUT "${code}"
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${out_dir}"
      COMMAND ${gradc_cmd} "${grad_path}" --emit=obj -o "${code}"
              ${common_flags}
      DEPENDS "${grad_path}" ${gradc_dep}
      COMMENT "gradc: object file for ${grad_file}"
      VERBATIM)
    set_source_files_properties("${code}" PROPERTIES
      EXTERNAL_OBJECT TRUE GENERATED TRUE)
    add_library(${target} STATIC "${code}" "${header}")
    set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  endif()
  target_include_directories(${target} PUBLIC
    "$<BUILD_INTERFACE:${out_dir}>" ${GRADC_RUNTIME_INCLUDE_DIR})
  target_compile_features(${target} PUBLIC cxx_std_17)
endfunction()
