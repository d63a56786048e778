//===- ClangJIT.h - Running the C++ backend's code in-process ---*- C++ -*-===//
//
// `gradc run --backend=cpp` and `gradc check --backend=cpp`: the module's
// C++ (emit::emitCpp) is compiled in-process by Clang 19 used as a library,
// with gradc/Runtime.h served from a copy embedded in gradc, and the resulting
// LLVM module is handed to the LLVM backend's ORC JIT (emit::JITModule),
// which marshals arguments and calls functions exactly as for
// `--backend=llvm`. No compiler, header or file outside gradc and LLVM's
// installation is needed at run time. docs/CppBackend.md ("In-process
// Clang") describes the flags and the error reporting.
//
// Only this library links libclang-cpp; the gradc tool is its one user.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_CLANGJIT_CLANGJIT_H
#define GRADC_CLANGJIT_CLANGJIT_H

#include "gradc/Emit/LLVMJIT.h"
#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace gradc::clangjit {

/// The file name under which generated C++ is compiled, and which Clang's
/// messages name.
inline constexpr const char *sourceFileName = "gradc_jit.cpp";

/// The compiler flags besides the input and the include directory of the
/// embedded runtime: C++17 as docs/CppBackend.md documents, -O2, no
/// exceptions (nothing generated throws), no warnings.
llvm::ArrayRef<const char *> getCompilerFlags();

/// Compiles the C++ translation unit `source` (named sourceFileName) at -O2
/// for the host into an LLVM module in `context`. `#include
/// "gradc/Runtime.h"` finds the runtime embedded in gradc. Null with
/// `error` set to a formatted diagnostic (the first error with its line
/// and a caret) when Clang rejects the code or cannot be set up.
std::unique_ptr<llvm::Module> compileCpp(llvm::StringRef source,
                                         llvm::LLVMContext &context,
                                         std::string &error);

/// compileCpp for the user's own code (an extern function's `.cpp`, or
/// the trampolines that call it): `source` is compiled as if it were the
/// file `path`, so that its includes resolve beside it, with `extraArgs`
/// (`-I`, `-D`) after the usual flags. Errors read as Clang prints them.
std::unique_ptr<llvm::Module>
compileUserCpp(llvm::StringRef source, llvm::StringRef path,
               llvm::ArrayRef<std::string> extraArgs,
               llvm::LLVMContext &context, std::string &error);

/// What compileCpp and compileUserCpp share.
std::unique_ptr<llvm::Module>
compileSource(llvm::StringRef source, llvm::StringRef mainPath,
              llvm::ArrayRef<std::string> extraArgs, llvm::LLVMContext &context,
              std::string &error, bool userCode);

/// The C++ that the `cpp` backend compiles for `module`: emit::emitCpp's
/// translation unit with module name emit::jitModuleName, followed by one
/// trampoline per exported function with the signature and name that
/// emit::JITModule calls (see emit::jitWrapperName). False with `error`
/// set when the C++ backend cannot emit the module.
bool emitJITSource(const ir::Module &module, std::string &source,
                   std::string &error);

/// emitJITSource, compileCpp and emit::JITModule::createFromLLVMModule in
/// a row: every exported function of `module`, ready to call.
std::unique_ptr<emit::JITModule> compileModule(const ir::Module &module,
                                               std::string &error);

/// A test hook (`gradc run --cpp-jit-inject=TEXT`): text appended to the
/// generated C++ that the cpp backend compiles, so that a lit test can make
/// Clang reject it and check how that is reported.
void setInjectedSource(std::string text);

/// Calls `fnName` of `module` compiled by compileModule: the `cpp` row of
/// the driver's backend table, with the signature of ir::interpret. The
/// whole module is compiled once per process and kept (see
/// emit::getCachedJITModule).
bool runWithClangJIT(const ir::Module &module, llvm::StringRef fnName,
                     llvm::ArrayRef<ir::Tensor> args,
                     std::vector<ir::Tensor> &results, std::string &error);

} // namespace gradc::clangjit

#endif // GRADC_CLANGJIT_CLANGJIT_H
