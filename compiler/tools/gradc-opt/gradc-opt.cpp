//===- gradc-opt.cpp - Run passes on textual IR ---------------------------===//
//
//   gradc-opt FILE.ir [--passes=a,b] [--verify-each=false] [--print-locs]
//                     [--emit=ir|loops] [--loop-passes=fuse,plan]
//                     [--loop-work]
//                     [--call 'f([1, 2])'] [-verify] [-o OUT]
//
// In the spirit of LLVM's `opt`: reads a module in the textual form of
// docs/IR.md, verifies it, runs the named passes (verifying after each one
// unless --verify-each=false) and prints the result. With --call it
// interprets one call instead and prints each result on its own line, the
// way `gradc run` does. --emit=loops lowers the result to the loop IR
// (docs/Loops.md), runs the --loop-passes, and prints that; with --call,
// the loop IR's evaluator runs the call instead of the interpreter. Any error
// in the input exits with status 1; with -verify, diagnostics are checked
// against `expected-*` comments instead.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/IRParser.h"
#include "gradc/IR/Interpreter.h"
#include "gradc/IR/Literal.h"
#include "gradc/IR/Printer.h"
#include "gradc/IR/Verifier.h"
#include "gradc/Loops/Loops.h"
#include "gradc/Transforms/Passes.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

using namespace gradc;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory optCategory("gradc-opt options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("FILE.ir"),
                               cl::Required, cl::cat(optCategory));

cl::opt<std::string> passes("passes",
                            cl::desc("Passes to run, in order (comma list)"),
                            cl::value_desc("a,b"), cl::init(""),
                            cl::cat(optCategory));

cl::opt<bool> verifyEach("verify-each",
                         cl::desc("Verify the module after every pass"),
                         cl::init(true), cl::cat(optCategory));

cl::opt<bool> printLocs("print-locs", cl::desc("Print locations"),
                        cl::cat(optCategory));

cl::opt<std::string>
    callExpr("call", cl::desc("Interpret this call and print its results"),
             cl::value_desc("f([1, 2])"), cl::init(""), cl::cat(optCategory));

enum class EmitKind { IR, Loops };
cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to print"), cl::init(EmitKind::IR),
    cl::values(clEnumValN(EmitKind::IR, "ir", "the IR after the passes"),
               clEnumValN(EmitKind::Loops, "loops",
                          "the loop IR that the backends print")),
    cl::cat(optCategory));

cl::opt<std::string> loopPasses(
    "loop-passes",
    cl::desc("With --emit=loops: loop passes to run after lowering (fuse, "
             "plan, parallel)"),
    cl::value_desc("a,b"), cl::init(""), cl::cat(optCategory));

cl::opt<bool> loopWork(
    "loop-work",
    cl::desc("With --emit=loops: print to stderr the accesses the merge "
             "pass and the statements the fuse pass looked at (a "
             "deterministic measure of their time)"),
    cl::cat(optCategory));

cl::opt<bool> verify("verify",
                     cl::desc("Check diagnostics against expected-* comments"),
                     cl::cat(optCategory));

cl::opt<std::string> outputFile("o", cl::desc("Write output to this file"),
                                cl::value_desc("OUT"), cl::init("-"),
                                cl::cat(optCategory));

/// The diagnostics of one run: printed, or checked with -verify.
struct Session {
  SourceManager sm;
  std::unique_ptr<DiagnosticConsumer> consumer;
  std::unique_ptr<DiagnosticEngine> diags;

  Session() {
    if (verify)
      consumer = std::make_unique<VerifyDiagnosticConsumer>(llvm::errs(), sm);
    else
      consumer = std::make_unique<TextDiagnosticPrinter>(llvm::errs(), sm);
    diags = std::make_unique<DiagnosticEngine>(sm, *consumer);
  }

  /// The exit status: with -verify whether the expectations were met,
  /// otherwise 1 after any error.
  int finish() {
    if (verify)
      return consumer->finish() ? 0 : 1;
    return diags->hadError() ? 1 : 0;
  }
};

std::unique_ptr<llvm::ToolOutputFile> openOutput() {
  std::error_code ec;
  auto out = std::make_unique<llvm::ToolOutputFile>(outputFile, ec,
                                                    llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "gradc-opt: error: cannot write '" << outputFile
                 << "': " << ec.message() << "\n";
    return nullptr;
  }
  return out;
}

/// Lowers `module` to loops and runs --loop-passes, verifying after each
/// step; null after an error (a gradc bug, or an unknown pass name).
std::unique_ptr<loops::LoopModule> lowerToLoops(const ir::Module &module,
                                                std::string &error) {
  std::unique_ptr<loops::LoopModule> lowered =
      loops::lowerModule(module, error);
  if (!lowered || !loops::verifyLoops(*lowered, error) ||
      !loops::runLoopPasses(*lowered, loopPasses, error, verifyEach))
    return nullptr;
  if (loopWork) {
    llvm::errs() << "merge: " << loops::mergeLoopsWork()
                 << " accesses looked at\n";
    llvm::errs() << "fuse: " << loops::fuseElementwiseWork()
                 << " statements looked at\n";
  }
  return lowered;
}

bool runLoops(const ir::Module &module, llvm::StringRef callee,
              llvm::ArrayRef<ir::Tensor> args, std::vector<ir::Tensor> &results,
              std::string &error) {
  std::unique_ptr<loops::LoopModule> lowered = lowerToLoops(module, error);
  return lowered &&
         loops::evaluateLoops(*lowered, callee, args, results, error);
}

/// Interprets `--call`: parses the call text (kept in a "<call>" buffer so
/// that errors point into it), converts each literal to its parameter's
/// element type, runs the interpreter and prints the results.
bool runCall(Session &s, const ir::Module &module, llvm::raw_ostream &os) {
  SourceLoc callStart = s.sm.addBuffer("<call>", callExpr);
  std::string callee, error;
  std::vector<ir::Literal> literals;
  size_t column = 0;
  if (!ir::parseCallLiteral(callExpr, callee, literals, error, column)) {
    s.diags->report(callStart.getAdvanced(column), diag::err_opt_call_syntax)
        << error;
    return false;
  }
  const ir::Function *fn = module.lookup(callee);
  if (!fn) {
    s.diags->report(callStart, diag::err_unknown_function_in_call) << callee;
    return false;
  }
  if (literals.size() != fn->getParams().size()) {
    s.diags->report(callStart, diag::err_opt_call_arity)
        << callee << fn->getParams().size() << literals.size();
    return false;
  }
  std::vector<ir::Tensor> args(literals.size());
  for (size_t i = 0; i < literals.size(); ++i) {
    const ir::Value *param = fn->getParam(i);
    if (!ir::literalToTensor(literals[i], param->getType().dtype, args[i],
                             error, &column)) {
      s.diags->report(callStart.getAdvanced(column),
                      diag::err_opt_call_argument)
          << param->getName() << callee << param->getType().str() << error;
      return false;
    }
  }
  std::vector<ir::Tensor> results;
  bool ran = emitKind == EmitKind::Loops
                 ? runLoops(module, callee, args, results, error)
                 : ir::interpret(module, callee, args, results, error);
  if (!ran) {
    s.diags->report(callStart, diag::err_opt_run_failed) << callee << error;
    return false;
  }
  for (const ir::Tensor &t : results) {
    ir::printTensor(t, os);
    os << "\n";
  }
  return true;
}

int run() {
  Session s;
  SourceLoc start;
  std::string error;
  if (!s.sm.addFile(inputFile, start, error)) {
    s.diags->report(SourceLoc(), diag::err_cannot_open_file)
        << inputFile << error;
    return s.finish();
  }
  if (verify)
    static_cast<VerifyDiagnosticConsumer &>(*s.consumer).addExpectations(start);

  std::unique_ptr<ir::Module> module = ir::parseIR(s.sm, start, *s.diags);
  if (!module || !ir::verifyModule(*module, *s.diags))
    return s.finish();
  if (!passes.empty() && !runPasses(*module, passes, *s.diags, verifyEach))
    return s.finish();

  auto out = openOutput();
  if (!out)
    return 1;
  if (!callExpr.empty()) {
    if (!runCall(s, *module, out->os()))
      return s.finish();
  } else if (emitKind == EmitKind::Loops) {
    std::unique_ptr<loops::LoopModule> lowered = lowerToLoops(*module, error);
    if (!lowered) {
      llvm::errs() << "gradc-opt: error: " << error << "\n";
      return 1;
    }
    loops::printLoops(*lowered, out->os(), &s.sm);
  } else {
    ir::PrintOptions options;
    options.printLocations = printLocs;
    options.sourceManager = &s.sm;
    ir::printModule(*module, out->os(), options);
  }
  int status = s.finish();
  if (status == 0)
    out->keep();
  return status;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(optCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "gradc-opt: run gradc passes on textual IR\n");
  return run();
}
