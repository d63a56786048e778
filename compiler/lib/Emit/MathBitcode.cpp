//===- MathBitcode.cpp - gradc/Math.h for the LLVM backend ----------------===//
//
// Not compiled into gradc: CMake compiles it with clang++-19 -O2
// -emit-llvm to bitcode, which gradc embeds and links into every module
// the LLVM backend makes (EmitLLVM.cpp, linkMathLibrary), so that the
// generated loops call the same f32 functions as the C++ backend and the
// interpreter and inline and vectorise them. One entry point per function
// that EmitLLVM calls, named gradc_math_NAME_f32; the linker takes only
// those a module uses and makes them internal.
//
//===----------------------------------------------------------------------===//

#include "gradc/Math.h"

extern "C" {
float gradc_math_exp_f32(float x) { return gradc::exp(x); }
float gradc_math_log_f32(float x) { return gradc::log(x); }
float gradc_math_tanh_f32(float x) { return gradc::tanh(x); }
float gradc_math_sigmoid_f32(float x) { return gradc::sigmoid(x); }
float gradc_math_softplus_f32(float x) { return gradc::softplus(x); }
float gradc_math_sin_f32(float x) { return gradc::sin(x); }
float gradc_math_cos_f32(float x) { return gradc::cos(x); }
float gradc_math_atan_f32(float x) { return gradc::atan(x); }
float gradc_math_pow_f32(float x, float y) { return gradc::pow(x, y); }
}
