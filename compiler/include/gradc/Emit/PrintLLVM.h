//===- PrintLLVM.h - The LLVM printer of the loop IR ------------*- C++ -*-===//
//
// The LLVM backend (`gradc --emit=llvm|obj`, `gradc run --backend=llvm`,
// the JIT): the module is lowered to the loop IR (lib/Loops), the loop
// passes of loops::defaultLoopPipeline run, and each loop function becomes
// one LLVM function with the C ABI of LLVMABI.h (docs/ABI.md), built
// statement by statement: a loop per `for`, a store per store. The twin of
// PrintCpp.h; EmitLLVM.cpp then links the math bitcode, verifies and
// optimises the module (docs/LLVMBackend.md).
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_PRINTLLVM_H
#define GRADC_EMIT_PRINTLLVM_H

#include "gradc/Emit/EmitLLVM.h"

#include <string>

namespace gradc::emit {

/// Lowers `module` to loops, runs the loop passes and builds the functions
/// (those of `options.roots` and their callees, or every one) into
/// `llvmModule`, with JIT trampolines if `options.jitWrappers`. Returns
/// false with `error` set only on an internal error (a lowering or a loop
/// pass that breaks the loop IR's invariants).
bool printLLVMFromLoops(const ir::Module &module, llvm::Module &llvmModule,
                        const LLVMOptions &options, std::string &error);

} // namespace gradc::emit

#endif // GRADC_EMIT_PRINTLLVM_H
