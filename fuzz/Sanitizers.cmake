# Flags for a GRADC_BUILD_FUZZER build: every gradc library gets libFuzzer's
# coverage instrumentation, AddressSanitizer and UndefinedBehaviorSanitizer,
# so that the fuzzer sees the edges of the whole front end and any memory
# error or UB aborts the run. Only clang has libFuzzer; configure with
#   cmake -S . -B build-fuzz -G Ninja -DGRADC_BUILD_FUZZER=ON \
#     -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_C_COMPILER=clang-19

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR
    "GRADC_BUILD_FUZZER needs clang (-DCMAKE_CXX_COMPILER=clang++-19)")
endif()

add_compile_options(
  -fsanitize=fuzzer-no-link,address,undefined
  -fno-sanitize-recover=all
  -fno-omit-frame-pointer
  -g)
add_link_options(-fsanitize=address,undefined)
