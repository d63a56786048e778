//===- LLVMABI.h - The C ABI as LLVM IR, shared by both lowerings -*- C++
//-*-===//
//
// What the LLVM backend's two lowerings (EmitLLVM.cpp, per op, and
// PrintLLVM.cpp, the printer of the loop IR) share: the C function of an
// IR function (docs/ABI.md: sizes, scalars by value, tensors by pointer,
// one output pointer per result, an int status), the JIT's trampoline,
// the declaration of an extern function and of CBLAS's gemm, and the
// overflow test of an element count. One place, so that both produce
// exactly the same ABI.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_LIB_EMIT_LLVMABI_H
#define GRADC_LIB_EMIT_LLVMABI_H

#include "gradc/Emit/EmitLLVM.h"
#include "gradc/Emit/SizeChecks.h"
#include "gradc/IR/IR.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/IR/IRBuilder.h"

namespace gradc::emit {

/// Declares the C function of `fn` in `llvmModule` with the parameters of
/// Mangle.h's getCParams (the order and names of the generated header):
/// the exported symbol `<module>_<fn>`, or an internal one containing a
/// '.' for a function that is not exported. Tensor arguments are noalias
/// and nocapture, inputs readonly.
llvm::Function *declareCFunction(llvm::Module &llvmModule,
                                 const ir::Module &module,
                                 const ir::Function &fn,
                                 const LLVMOptions &options);

/// `int32_t __gradc_call_SYM(const int64_t *sizes, void **args, void
/// **outs)`: loads every argument from the arrays and calls `target`, so
/// that the JIT calls every function through one C++ signature.
void emitJITWrapper(llvm::Module &llvmModule, const ir::Function &fn,
                    llvm::Function *target);

/// The declaration of an extern function's C symbol (docs/Extern.md).
llvm::Function *getExternFunction(llvm::Module &llvmModule,
                                  const ir::ExternDecl &decl);

/// cblas_sgemm (f32) or cblas_dgemm (f64), row-major, LP64 (`int` sizes),
/// as OpenBLAS declares them.
llvm::FunctionCallee getGemm(llvm::Module &llvmModule, DType t);

/// The C type of a scalar passed by value (`i8` for bool).
llvm::Type *scalarParamType(llvm::LLVMContext &ctx, DType t);

/// Whether the element count `p` (SizeChecks.h) exceeds INT64_MAX: the
/// product of its factors, unless one is 0, computed with
/// llvm.umul.with.overflow. `sizes` maps each size name to its value.
llvm::Value *elementCountOverflows(llvm::IRBuilder<> &b, const SizeProduct &p,
                                   const llvm::StringMap<llvm::Value *> &sizes);

/// Below this many multiply-adds (m n k) a CBLAS call costs more than the
/// product (a 4x4 matrix-vector product is several times slower through
/// cblas_sgemm); the same bound as gradc::blasMinWork of Runtime.h.
constexpr int64_t blasMinWork = 32 * 32 * 32;

} // namespace gradc::emit

#endif // GRADC_LIB_EMIT_LLVMABI_H
