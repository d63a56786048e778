//===- Driver.h - Shared pieces of the gradc driver -------------*- C++ -*-===//
//
// The compile pipeline that every subcommand starts with: read, parse,
// check, lower, differentiate, simplify. Each step stops at the first
// phase that reported an error.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_TOOLS_GRADC_DRIVER_H
#define GRADC_TOOLS_GRADC_DRIVER_H

#include "gradc/AST/AST.h"
#include "gradc/Basic/Diagnostic.h"
#include "gradc/ClangJIT/Externs.h"
#include "gradc/IR/IR.h"
#include "gradc/IR/Interpreter.h"

#include <memory>
#include <string>

namespace gradc::driver {

struct Compilation {
  SourceManager sm;
  std::unique_ptr<DiagnosticConsumer> consumer;
  std::unique_ptr<DiagnosticEngine> diags;
  SourceLoc mainBuffer;
  std::unique_ptr<ast::Module> ast;
  std::unique_ptr<ir::Module> ir;
  bool verifyMode = false;
  /// Verify the IR after differentiation and after every pass, not only
  /// once after them all (`--verify-each`).
  bool verifyEach = false;
  /// Where extern functions' headers and code are found (-I, -D, -p,
  /// --load); readFile sets the base directory.
  clangjit::ExternOptions externOptions;

  /// Sets up diagnostics (printed to stderr, or checked with -verify).
  explicit Compilation(bool verify);
  /// Reads `path`; false after reporting an error.
  bool readFile(llvm::StringRef path);
  bool parse();
  /// Sema, then the headers of extern functions (clangjit).
  bool check();
  /// Makes the extern functions callable by the run backends
  /// (clangjit::loadExterns); false after reporting why not.
  bool loadExterns();
  /// Lowers to IR and verifies it.
  bool lower();
  /// Adds every NAME_grad and runs `pipeline` ("" for none); verifies the
  /// result (after each step with verifyEach).
  bool differentiate(llvm::StringRef pipeline);
  /// The exit status: with -verify, whether the expectations were met;
  /// otherwise 1 if any error was reported.
  int finish();
};

/// A way to evaluate a function of the compiled module
/// (`gradc run --backend=NAME`). Returns false with `error` set on a
/// run-time error (arguments whose sizes contradict the signature).
struct RunBackend {
  const char *name;
  const char *description;
  bool (*run)(const ir::Module &module, llvm::StringRef fnName,
              llvm::ArrayRef<ir::Tensor> args, std::vector<ir::Tensor> &results,
              std::string &error);
};

/// Every backend, in the order `--help` and error messages list them.
llvm::ArrayRef<RunBackend> getRunBackends();
/// The backend called `name`, or null.
const RunBackend *lookupRunBackend(llvm::StringRef name);
/// How diagnostics name the code generator behind backend `name`:
/// "C++", "LLVM" or "loop IR".
llvm::StringRef backendDisplayName(llvm::StringRef name);
/// Whether backend `name` runs loops and indexing (`for`, `take`,
/// `scatter_add`): the interpreter and the backends of the loop IR.
bool backendRunsLoops(llvm::StringRef name);

/// `gradc run FILE --call EXPR...`: compiles `path` (running `pipeline`
/// after differentiation), evaluates each call with `backend` and prints
/// each result on its own line; with several calls, each call's results
/// follow a line `# EXPR`. Returns the exit status.
int runCommand(Compilation &c, llvm::StringRef path,
               llvm::ArrayRef<std::string> callTexts, llvm::StringRef backend,
               llvm::StringRef pipeline);

/// `gradc check FILE`: compares every generated gradient with central
/// finite differences in f64 at `points` random points drawn from `seed`.
/// Returns the exit status (1 when an undeclared gradient disagrees).
int checkCommand(Compilation &c, llvm::StringRef path, llvm::StringRef backend,
                 llvm::StringRef pipeline, uint64_t seed, unsigned points);

} // namespace gradc::driver

#endif // GRADC_TOOLS_GRADC_DRIVER_H
