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
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace gradc::emit {

/// The module name of the C symbols of JIT-compiled code: function F is
/// `cSymbolName(jitModuleName, F)` and its trampoline that name passed
/// through jitWrapperName (EmitLLVM.h).
inline constexpr const char *jitModuleName = "gradc_jit";

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

  /// Compiles an LLVM module that another compiler made from `module`
  /// (the `cpp` backend's in-process Clang) for the host, with code
  /// generation level `optLevel`. It must define the trampoline of every
  /// function that call() will be asked for, with EmitLLVM's signature
  /// `int32_t (const int64_t *sizes, void **args, void **outs)` and name;
  /// marshalling and status codes are then the same as for create().
  /// Symbols it leaves undefined resolve to the process (libm, malloc).
  static std::unique_ptr<JITModule>
  createFromLLVMModule(const ir::Module &module,
                       std::unique_ptr<llvm::Module> llvmModule,
                       std::unique_ptr<llvm::LLVMContext> context,
                       unsigned optLevel, std::string &error);

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

/// The same (`llvm-loops`, the name `llvm` had while two LLVM lowerings
/// existed; every LLVM module now comes from the loop IR's printer).
bool runWithLLVMJITLoops(const ir::Module &module, llvm::StringRef fnName,
                         llvm::ArrayRef<ir::Tensor> args,
                         std::vector<ir::Tensor> &results, std::string &error);

/// The JITModule that `compile` makes for `module`, compiled on the first
/// request and kept for the life of the process: `gradc check` calls the
/// same functions hundreds of times. Entries are keyed by the module's
/// printed IR and by `tag` (what was compiled, and how: "llvm:f",
/// "cpp"), so a changed module is never served stale code. Null with
/// `error` set when `compile` fails; the failure is kept too.
JITModule *getCachedJITModule(
    const ir::Module &module, llvm::StringRef tag,
    llvm::function_ref<std::unique_ptr<JITModule>(std::string &)> compile,
    std::string &error);

/// The message for a status of docs/ABI.md ("integer division by zero").
std::string describeStatus(int status);

} // namespace gradc::emit

#endif // GRADC_EMIT_LLVMJIT_H
