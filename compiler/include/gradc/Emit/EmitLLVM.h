//===- EmitLLVM.h - Lowering the IR to LLVM IR ------------------*- C++ -*-===//
//
// The LLVM backend: every exported function of an IR module becomes one
// LLVM function with the C ABI of docs/ABI.md (size arguments, scalars by
// value, tensors by pointer, one output pointer per result, an int
// status). The module is verified, optimised with LLVM's standard pipeline
// for a target machine, and then printed (`--emit=llvm`), written as an
// object file (`--emit=obj`) or run in the JIT (`gradc run`, LLVMJIT.h).
// docs/LLVMBackend.md describes the generated code.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_EMITLLVM_H
#define GRADC_EMIT_EMITLLVM_H

#include "gradc/IR/IR.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
class raw_pwrite_stream;
} // namespace llvm

namespace gradc::emit {

struct LLVMOptions {
  /// The prefix of every exported symbol (`<module>_<function>`).
  std::string moduleName = "module";
  /// The target triple; empty means the host.
  std::string triple;
  /// The CPU (`skylake`, `native`); empty means the host's CPU for the
  /// host triple and the generic CPU for any other triple.
  std::string cpu;
  /// LLVM's optimisation level, 0 to 3 (0: no LLVM pass at all).
  unsigned optLevel = 2;
  /// Also emit `__gradc_call_<symbol>(sizes, args, outs)` per exported
  /// function, the uniform entry point that the JIT calls.
  bool jitWrappers = false;
  /// Take scratch blocks from, and return them to, a per-thread cache
  /// that keeps large blocks across calls (gradc_scratch_take/give of the
  /// math bitcode); false: malloc and free (the JIT, whose code may be
  /// freed before a thread exits).
  bool scratchCache = true;
  /// Call CBLAS's cblas_sgemm/cblas_dgemm for an f32/f64 matrix product of
  /// at least blasMinWork multiply-adds (the program must link a CBLAS,
  /// such as OpenBLAS); smaller products stay inline (docs/LLVMBackend.md).
  bool blas = false;
  /// Let the code generator fuse a multiply and an add into one FMA where
  /// the target has it (`--fp-contract=fast`, LLVM's FPOpFusion::Fast, what
  /// g++ does by default under -march=native). Off by default: then every
  /// `*` and `+` rounds separately and the results equal the interpreter's
  /// bit for bit (docs/Math.md, "Contraction").
  bool fpContractFast = false;
  /// The vector width in bits that the loop vectoriser prefers
  /// (`--prefer-vector-width`, clang's `-mprefer-vector-width`); 0: 512
  /// where the target has AVX-512F, else the target's own default
  /// (preferredVectorWidth).
  unsigned preferVectorWidth = 0;
  /// Innermost loops that may run few iterations are printed with their
  /// remainder as masked vector steps (PrintLLVM's innermostLoop); set
  /// by lowerToLLVM where the vectors are 512 bits wide (AVX-512, whose
  /// masks make those steps cheap), where a narrower width asked for
  /// would otherwise still get 512-bit mask arithmetic.
  bool maskedTails = false;
  /// When not empty, lower only these functions and what they call (the
  /// JIT compiles just the function it runs).
  std::vector<std::string> roots;
};

/// The name of the JIT trampoline of an exported symbol.
std::string jitWrapperName(llvm::StringRef symbol);

/// Creates the target machine for `options` (the host by default). On an
/// unknown triple or CPU returns null with `error` set.
std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const LLVMOptions &options, std::string &error);

/// Lowers every user and gradient function of `module` to `ctx`, for the
/// data layout and triple of `tm`, and verifies the result. Rule instances
/// are lowered as internal functions only where a call needs them. Returns
/// null with `error` set when verification fails (a bug in gradc).
std::unique_ptr<llvm::Module> lowerToLLVM(const ir::Module &module,
                                          llvm::LLVMContext &ctx,
                                          llvm::TargetMachine &tm,
                                          const LLVMOptions &options,
                                          std::string &error);

/// Runs `work` (LLVM's pipeline, code generation, a JIT lookup that
/// compiles) on a thread with a 512 MB stack, since LLVM's passes recurse
/// as deep as the longest chain of values in a function.
void runWithLargeStack(llvm::function_ref<void()> work);

/// Runs LLVM's default per-module pipeline at `optLevel` (1 to 3; 0 does
/// nothing) with loop vectorisation (not SLP), tuned for `tm`. The loop
/// vectoriser also vectorises loops that accumulate floats in order
/// (LLVM's in-order reductions: the additions stay in the source order,
/// so the result is the same bit for bit), unless `-mllvm
/// -force-ordered-reductions` says otherwise.
/// Every function prefers vectors of `preferVectorWidth` bits (0: see
/// preferredVectorWidth).
void optimizeModule(llvm::Module &module, llvm::TargetMachine &tm,
                    unsigned optLevel, unsigned preferVectorWidth = 0);

/// The vector width that `optimizeModule` asks for: `requested` if not
/// 0; else 512 on a target with AVX-512F, whose x86 tuning would
/// otherwise prefer 256-bit vectors (docs/LLVMBackend.md, "Vector
/// width"); else 0, the target's own choice.
unsigned preferredVectorWidth(const llvm::TargetMachine &tm,
                              unsigned requested);

/// Lowers, verifies and optimises: what `--emit=llvm` prints and
/// `--emit=obj` compiles. Null with `error` set on failure.
std::unique_ptr<llvm::Module> buildLLVMModule(const ir::Module &module,
                                              llvm::LLVMContext &ctx,
                                              llvm::TargetMachine &tm,
                                              const LLVMOptions &options,
                                              std::string &error);

/// Writes `module` as an object file for `tm`. False with `error` set if
/// the target cannot emit object files.
bool writeObjectFile(llvm::Module &module, llvm::TargetMachine &tm,
                     llvm::raw_pwrite_stream &os, std::string &error);

} // namespace gradc::emit

#endif // GRADC_EMIT_EMITLLVM_H
