//===- Backends.h - The part of gradc that needs LLVM and Clang -*- C++ -*-===//
//
// Everything that needs more of LLVM than its Support library lives in a
// plugin beside the executable, libgradc-backends.so: the LLVM backend
// (--emit=llvm, --emit=obj), the JITs of `gradc run` and `gradc check`
// (--backend=llvm, --backend=cpp) and Clang's checks of extern headers.
// The driver links LLVMSupport statically and loads the plugin, and with
// it libLLVM and libclang-cpp, on first use: compiling to C++, a header,
// Python or IR maps neither (docs/Performance.md#start-up).
//
// The plugin resolves gradc's own symbols (the IR, the diagnostics, the
// emitters it shares with the C++ backend) from the executable, which
// exports them, so there is one copy of gradc's code and state. The two
// copies of LLVMSupport (the driver's, static and private to it, and
// libLLVM's) share no state: what crosses the boundary is gradc's own
// types, strings and streams, whose LLVM parts are header-only data
// structures of the same LLVM release.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_TOOLS_GRADC_BACKENDS_H
#define GRADC_TOOLS_GRADC_BACKENDS_H

#include "gradc/AST/AST.h"
#include "gradc/Basic/Diagnostic.h"
#include "gradc/ClangJIT/Externs.h"
#include "gradc/Emit/EmitLLVM.h"
#include "gradc/IR/IR.h"
#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>
#include <vector>

namespace gradc::driver {

/// The entry points of the plugin: the functions of lib/Emit's LLVM
/// backend and of lib/ClangJIT that the driver calls.
struct BackendPlugin {
  /// backendPluginVersion of the plugin; a stale plugin is refused.
  unsigned version;
  /// --emit=llvm (`object` false) or --emit=obj: the optimised module as
  /// text or as an object file in `bytes`. On failure, `error` says why
  /// and `targetError` whether the target was at fault (an unknown triple
  /// or CPU) rather than gradc.
  bool (*emitLLVM)(const ir::Module &module, const emit::LLVMOptions &options,
                   bool object, std::string &bytes, std::string &error,
                   bool &targetError);
  /// The `llvm` and `cpp` backends of `gradc run` and `gradc check`, with
  /// the signature of ir::interpret.
  bool (*runLLVM)(const ir::Module &module, llvm::StringRef fnName,
                  llvm::ArrayRef<ir::Tensor> args,
                  std::vector<ir::Tensor> &results, std::string &error);
  bool (*runCpp)(const ir::Module &module, llvm::StringRef fnName,
                 llvm::ArrayRef<ir::Tensor> args,
                 std::vector<ir::Tensor> &results, std::string &error);
  /// `llvm-loops`: `llvm` through the loop IR's LLVM printer.
  bool (*runLLVMLoops)(const ir::Module &module, llvm::StringRef fnName,
                       llvm::ArrayRef<ir::Tensor> args,
                       std::vector<ir::Tensor> &results, std::string &error);
  /// lib/ClangJIT/Externs.h.
  bool (*checkExternHeaders)(ast::Module &module,
                             const clangjit::ExternOptions &options,
                             SourceManager &sm, DiagnosticEngine &diags,
                             llvm::function_ref<void(SourceLoc)> onHeaderBuffer,
                             std::vector<clangjit::CheckedHeader> *checked);
  bool (*getExternCompilerArgs)(const clangjit::ExternOptions &options,
                                llvm::StringRef headerPath,
                                std::vector<std::string> &args,
                                std::string &error);
  void (*setGeneratedCodeArgs)(std::vector<std::string> args);
  /// lib/ClangJIT/ClangJIT.h (`--cpp-jit-inject`).
  void (*setInjectedSource)(std::string text);
  bool (*loadExterns)(const ir::Module &module,
                      const clangjit::ExternOptions &options,
                      std::string &error);
  /// `-mllvm ARG...`: parsed by the plugin's own copy of LLVM's command
  /// line (where -pass-remarks and the other LLVM options live; the
  /// driver's static LLVMSupport does not know them).
  bool (*parseLLVMOptions)(const std::vector<std::string> &args,
                           std::string &error);
};

/// Changes whenever BackendPlugin or what its functions mean changes.
inline constexpr unsigned backendPluginVersion = 6;

/// The C name of the function, `const BackendPlugin *()`, that the plugin
/// exports.
inline constexpr const char *backendPluginEntry = "gradc_backend_plugin";

/// The file the plugin would be loaded from (see getBackendPlugin), or ""
/// when there is none; it is not loaded.
std::string findBackendPlugin();

/// Loads the plugin on the first call (the file named by the environment
/// variable GRADC_BACKENDS if set, else libgradc-backends.so beside the
/// executable or in its installed place) and returns it; null after
/// reporting why it could not be loaded.
const BackendPlugin *getBackendPlugin(DiagnosticEngine &diags);

/// The same, with the reason as a string (for the run backends, which
/// report their errors as strings).
const BackendPlugin *getBackendPlugin(std::string &error);
/// The `-mllvm` arguments, handed to the plugin when it loads.
void setLLVMArgs(std::vector<std::string> args);

} // namespace gradc::driver

#endif // GRADC_TOOLS_GRADC_BACKENDS_H
