//===- LLVMJIT.h - Running IR functions through LLVM's JIT ------*- C++ -*-===//
//
// `gradc run --backend=llvm`: the module is lowered by EmitLLVM with one
// trampoline per exported function (`__gradc_call_<symbol>(sizes, args,
// outs)`), optimised for the host, compiled in memory by ORC's LLJIT, and
// called with the interpreter's tensors marshalled into C buffers. The
// results are the same tensors the interpreter returns, so the driver
// prints them with the same printer.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_LLVMJIT_H
#define GRADC_EMIT_LLVMJIT_H

#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace gradc::emit {

/// A module compiled in memory: compile once, call any exported function
/// many times (finite differences call the same function again and again).
class JITModule {
public:
  ~JITModule();

  /// Lowers, optimises (LLVM level `optLevel`) and compiles `module` for
  /// the host: the functions in `roots` and what they call, or every
  /// exported function when `roots` is empty. Null with `error` set on
  /// failure.
  static std::unique_ptr<JITModule>
  create(const ir::Module &module, unsigned optLevel, std::string &error,
         llvm::ArrayRef<std::string> roots = {});

  /// Calls `fnName` on `args`, whose shapes must fit the signature (the
  /// driver checks them). False with `error` set on a shape mismatch or a
  /// non-zero status of the generated code.
  bool call(llvm::StringRef fnName, llvm::ArrayRef<ir::Tensor> args,
            std::vector<ir::Tensor> &results, std::string &error);

private:
  struct Impl;
  explicit JITModule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Calls `fnName` of `module` compiled at -O2: the `llvm` row of the
/// driver's backend table, with the signature of ir::interpret. The
/// compiled function is kept for the life of the process (keyed by the
/// module's printed IR), so repeated calls compile once.
bool runWithLLVMJIT(const ir::Module &module, llvm::StringRef fnName,
                    llvm::ArrayRef<ir::Tensor> args,
                    std::vector<ir::Tensor> &results, std::string &error);

/// The message for a status of docs/ABI.md ("integer division by zero").
std::string describeStatus(int status);

} // namespace gradc::emit

#endif // GRADC_EMIT_LLVMJIT_H
