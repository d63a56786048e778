//===- gradc.cpp - The gradc command line ---------------------------------===//
//
//   gradc FILE.grad [--emit=ast|ir|grad-ir|cpp|llvm|obj|header|python]
//                   [-o OUT]
//   gradc run FILE.grad --call 'EXPR' [--call 'EXPR' ...] [--backend=...]
//   gradc check FILE.grad
//
// A thin layer over Driver.h: option parsing and output files. Exit status
// 1 means an error in the input; gradc never crashes on bad input.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "gradc/AST/ASTDumper.h"
#include "gradc/Emit/EmitCpp.h"
#include "gradc/Emit/EmitDot.h"
#include "gradc/Emit/EmitHeader.h"
#include "gradc/Emit/EmitLLVM.h"
#include "gradc/Emit/EmitPython.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/IR/Printer.h"
#include "gradc/Transforms/Passes.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

using namespace gradc;
using namespace gradc::driver;
namespace cl = llvm::cl;

namespace {

cl::SubCommand runCmd("run", "Evaluate one call of a function of the file");
cl::SubCommand checkCmd(
    "check", "Compare every gradient with central finite differences");

cl::OptionCategory gradcCategory("gradc options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("FILE.grad"),
                               cl::Required, cl::sub(cl::SubCommand::getAll()),
                               cl::cat(gradcCategory));

enum class EmitKind {
  None,
  AST,
  IR,
  GradIR,
  Dot,
  Cpp,
  Header,
  Python,
  LLVM,
  Obj
};

cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to print"), cl::init(EmitKind::None),
    cl::values(clEnumValN(EmitKind::AST, "ast", "the checked syntax tree"),
               clEnumValN(EmitKind::IR, "ir", "the IR of the functions"),
               clEnumValN(EmitKind::GradIR, "grad-ir",
                          "the IR with generated gradient functions"),
               clEnumValN(EmitKind::Dot, "dot",
                          "forward and backward graphs for Graphviz"),
               clEnumValN(EmitKind::Cpp, "cpp", "C++ source"),
               clEnumValN(EmitKind::Header, "header", "the C ABI header"),
               clEnumValN(EmitKind::Python, "python",
                          "a Python extension module (C++ over the C ABI)"),
               clEnumValN(EmitKind::LLVM, "llvm", "LLVM IR"),
               clEnumValN(EmitKind::Obj, "obj", "an object file")),
    cl::cat(gradcCategory));

cl::opt<std::string> outputFile("o", cl::desc("Write output to this file"),
                                cl::value_desc("OUT"), cl::init("-"),
                                cl::cat(gradcCategory));

cl::opt<bool> verify("verify",
                     cl::desc("Check diagnostics against expected-* comments"),
                     cl::sub(cl::SubCommand::getAll()),
                     cl::cat(gradcCategory));

cl::opt<bool> parseOnly("parse-only",
                        cl::desc("With --emit=ast: dump before checking"),
                        cl::cat(gradcCategory));

cl::opt<bool> noOpt("O0", cl::desc("Do not simplify after differentiation"),
                    cl::sub(cl::SubCommand::getAll()),
                    cl::cat(gradcCategory));

cl::opt<std::string> passes(
    "passes", cl::desc("Passes to run after differentiation (comma list)"),
    cl::init(""), cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> splitGrad(
    "split-grad",
    cl::desc("Also generate NAME_fwd and NAME_bwd, the split form of each "
             "gradient (runs the 'split' pass last)"),
    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> valueAndGrad(
    "value-and-grad",
    cl::desc("Also generate NAME_value_and_grad, the results and the "
             "gradient from one forward pass (runs the 'value-and-grad' pass "
             "first)"),
    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> printLocs("print-locs", cl::desc("Print locations in IR"),
                        cl::cat(gradcCategory));

cl::opt<std::string>
    targetTriple("target",
                 cl::desc("Target triple of --emit=llvm|obj (default: host)"),
                 cl::value_desc("TRIPLE"), cl::init(""),
                 cl::cat(gradcCategory));

cl::opt<std::string> targetCPU(
    "cpu",
    cl::desc("Target CPU of --emit=llvm|obj (default: the host's; generic "
             "with --target)"),
    cl::value_desc("CPU"), cl::init(""), cl::cat(gradcCategory));

cl::list<std::string>
    callExprs("call",
              cl::desc("The call to evaluate (repeat for several calls)"),
              cl::value_desc("EXPR"), cl::sub(runCmd), cl::OneOrMore,
              cl::cat(gradcCategory));

cl::opt<std::string> backend("backend",
                             cl::desc("How to run: llvm (default), interp "
                                      "or cpp"),
                             cl::init("llvm"), cl::sub(runCmd),
                             cl::sub(checkCmd), cl::cat(gradcCategory));

cl::opt<uint64_t> checkSeed("seed",
                            cl::desc("Seed of the random points (check)"),
                            cl::init(20261130), cl::sub(checkCmd),
                            cl::cat(gradcCategory));

cl::opt<unsigned> checkPoints("points",
                              cl::desc("Random points per function (check)"),
                              cl::init(3), cl::sub(checkCmd),
                              cl::cat(gradcCategory));

cl::opt<bool> useBlas(
    "blas",
    cl::desc("With --emit=llvm|obj: call cblas_sgemm/cblas_dgemm for large "
             "matrix products (link a CBLAS such as OpenBLAS)"),
    cl::cat(gradcCategory));

cl::opt<std::string> moduleName(
    "module-name",
    cl::desc("Prefix of the C symbols (default: the file's stem)"),
    cl::value_desc("NAME"), cl::init(""), cl::cat(gradcCategory));

cl::list<std::string>
    includeDirs("I", cl::Prefix,
                cl::desc("Search DIR for the headers of extern functions"),
                cl::value_desc("DIR"), cl::sub(cl::SubCommand::getAll()),
                cl::cat(gradcCategory));

cl::list<std::string> defines(
    "D", cl::Prefix,
    cl::desc("Define a macro when headers and extern code are compiled"),
    cl::value_desc("NAME[=VALUE]"), cl::sub(cl::SubCommand::getAll()),
    cl::cat(gradcCategory));

cl::opt<std::string> compileCommandsDir(
    "p",
    cl::desc("Read compile_commands.json in DIR for the flags of extern "
             "headers (libTooling's -p)"),
    cl::value_desc("DIR"), cl::init(""), cl::sub(cl::SubCommand::getAll()),
    cl::cat(gradcCategory));

cl::list<std::string> loadLibraries(
    "load",
    cl::desc("Load a shared library that defines extern functions (run, "
             "check)"),
    cl::value_desc("LIB"), cl::sub(cl::SubCommand::getAll()),
    cl::cat(gradcCategory));

std::string pipeline() {
  std::string list = !passes.empty() ? passes.getValue()
                     : noOpt         ? ""
                                     : getDefaultPipeline().str();
  // Before the other passes, so that they simplify it like NAME_grad.
  if (valueAndGrad)
    list = list.empty() ? "value-and-grad" : "value-and-grad," + list;
  if (splitGrad)
    list += list.empty() ? "split" : ",split";
  return list;
}

/// Opens `-o` (or stdout); false after printing why it could not.
std::unique_ptr<llvm::ToolOutputFile> openOutput(bool binary) {
  std::error_code ec;
  auto out = std::make_unique<llvm::ToolOutputFile>(
      outputFile, ec,
      binary ? llvm::sys::fs::OF_None : llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "gradc: error: cannot write '" << outputFile
                 << "': " << ec.message() << "\n";
    return nullptr;
  }
  return out;
}

/// --emit=llvm and --emit=obj: the verified module, optimised at -O2
/// (unoptimised with -O0), for the host or --target/--cpu.
int emitLLVM(Compilation &c, bool object) {
  emit::LLVMOptions options;
  options.moduleName = moduleName.empty()
                           ? emit::moduleNameFromPath(inputFile)
                           : emit::sanitizeModuleName(moduleName);
  options.triple = targetTriple;
  options.cpu = targetCPU;
  options.optLevel = noOpt ? 0 : 2;
  options.blas = useBlas;
  std::string error;
  std::unique_ptr<llvm::TargetMachine> tm =
      emit::createTargetMachine(options, error);
  if (!tm) {
    c.diags->report(SourceLoc(), diag::err_llvm_target) << error;
    return c.finish();
  }
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module =
      emit::buildLLVMModule(*c.ir, ctx, *tm, options, error);
  if (!module) {
    c.diags->report(SourceLoc(), diag::err_llvm_internal) << error;
    return c.finish();
  }
  if (object && outputFile == "-" &&
      llvm::sys::Process::StandardOutIsDisplayed()) {
    c.diags->report(SourceLoc(), diag::err_llvm_obj_terminal);
    return c.finish();
  }
  auto out = openOutput(object);
  if (!out)
    return 1;
  if (!object)
    module->print(out->os(), nullptr);
  else if (!emit::writeObjectFile(*module, *tm, out->os(), error)) {
    c.diags->report(SourceLoc(), diag::err_llvm_target) << error;
    return c.finish();
  }
  out->keep();
  return c.finish();
}

int compileCommand(Compilation &c) {
  if (!c.readFile(inputFile) || !c.parse())
    return c.finish();
  if (emitKind == EmitKind::AST && parseOnly) {
    auto out = openOutput(false);
    if (!out)
      return 1;
    ast::dumpModule(*c.ast, c.sm, out->os());
    out->keep();
    return c.finish();
  }
  if (!c.check())
    return c.finish();
  if (emitKind == EmitKind::AST) {
    auto out = openOutput(false);
    if (!out)
      return 1;
    ast::dumpModule(*c.ast, c.sm, out->os());
    out->keep();
    return c.finish();
  }
  if (!c.lower())
    return c.finish();
  ir::PrintOptions printOptions;
  printOptions.printLocations = printLocs;
  printOptions.sourceManager = &c.sm;
  if (emitKind == EmitKind::IR) {
    auto out = openOutput(false);
    if (!out)
      return 1;
    ir::printModule(*c.ir, out->os(), printOptions);
    out->keep();
    return c.finish();
  }
  if (!c.differentiate(pipeline()))
    return c.finish();
  switch (emitKind) {
  case EmitKind::None:
  case EmitKind::AST:
  case EmitKind::IR:
    break;
  case EmitKind::GradIR: {
    auto out = openOutput(false);
    if (!out)
      return 1;
    ir::printModule(*c.ir, out->os(), printOptions);
    out->keep();
    break;
  }
  case EmitKind::Dot: {
    auto out = openOutput(false);
    if (!out)
      return 1;
    emit::emitDot(*c.ir, out->os());
    out->keep();
    break;
  }
  case EmitKind::Cpp:
  case EmitKind::Header:
  case EmitKind::Python: {
    emit::EmitOptions options;
    options.moduleName = moduleName.empty()
                             ? emit::moduleNameFromPath(inputFile)
                             : emit::sanitizeModuleName(moduleName);
    options.sourceName = llvm::sys::path::filename(inputFile).str();
    options.sourceManager = &c.sm;
    std::string text;
    llvm::raw_string_ostream os(text);
    if (emitKind == EmitKind::Header)
      emit::emitHeader(*c.ir, options, os);
    else if (emitKind == EmitKind::Python)
      emit::emitPython(*c.ir, options, os);
    else if (!emit::emitCpp(*c.ir, options, os, *c.diags))
      return c.finish();
    auto out = openOutput(false);
    if (!out)
      return 1;
    out->os() << text;
    out->keep();
    break;
  }
  case EmitKind::LLVM:
  case EmitKind::Obj:
    return emitLLVM(c, emitKind == EmitKind::Obj);
  }
  return c.finish();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(gradcCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "gradc: a source-to-source gradient compiler\n");
  Compilation c(verify);
  c.externOptions.includeDirs = includeDirs;
  c.externOptions.defines = defines;
  c.externOptions.compileCommandsDir = compileCommandsDir;
  c.externOptions.libraries = loadLibraries;
  if (runCmd)
    return runCommand(c, inputFile, callExprs, backend, pipeline());
  if (checkCmd)
    return checkCommand(c, inputFile, backend, pipeline(), checkSeed,
                        checkPoints);
  return compileCommand(c);
}
