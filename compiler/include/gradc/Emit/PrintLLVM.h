//===- PrintLLVM.h - The LLVM printer of the loop IR ------------*- C++ -*-===//
//
// `gradc --emit=llvm --lower=loops` (and `--emit=obj`), `gradc run
// --backend=llvm-loops`: the module is lowered to the loop IR (lib/Loops),
// the loop passes of loops::defaultLoopPipeline run, and each loop
// function becomes one LLVM function with EmitLLVM's C ABI (docs/ABI.md),
// built statement by statement: a loop per `for`, a store per store. The
// twin of PrintCpp.h; selected by LLVMOptions::viaLoops, after which the
// module is linked with the math bitcode, verified and optimised exactly
// as EmitLLVM's (docs/LLVMBackend.md, "Printing the loop IR").
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
