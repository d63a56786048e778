//===- gradc.cpp - The gradc command line ---------------------------------===//
//
//   gradc FILE.grad [--emit=ast|ir|grad-ir|loops|cpp|llvm|obj|header|python]
//                   [-o OUT]
//   gradc run FILE.grad --call 'EXPR' [--call 'EXPR' ...] [--backend=...]
//   gradc check FILE.grad
//
// A thin layer over Driver.h: option parsing and output files. Exit status
// 1 means an error in the input; gradc never crashes on bad input.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"
#include "Driver.h"

#include "gradc/AST/ASTDumper.h"
#include "gradc/Basic/Timing.h"
#include "gradc/Emit/EmitCpp.h"
#include "gradc/Emit/EmitDot.h"
#include "gradc/Emit/EmitHeader.h"
#include "gradc/Emit/EmitPython.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/IR/Printer.h"
#include "gradc/Loops/Loops.h"
#include "gradc/Transforms/Passes.h"

#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

using namespace gradc;
using namespace gradc::driver;
namespace cl = llvm::cl;

namespace {

cl::SubCommand runCmd("run", "Evaluate one call of a function of the file");
cl::SubCommand
    checkCmd("check", "Compare every gradient with central finite differences");

cl::OptionCategory gradcCategory("gradc options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("FILE.grad"),
                               cl::Required, cl::sub(cl::SubCommand::getAll()),
                               cl::cat(gradcCategory));

enum class EmitKind {
  None,
  AST,
  IR,
  GradIR,
  Loops,
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
               clEnumValN(EmitKind::Loops, "loops",
                          "the loop IR that the backends print"),
               clEnumValN(EmitKind::Dot, "dot",
                          "forward and backward graphs for Graphviz"),
               clEnumValN(EmitKind::Cpp, "cpp", "C++ source"),
               clEnumValN(EmitKind::Header, "header", "the C ABI header"),
               clEnumValN(EmitKind::Python, "python",
                          "a Python extension module (C++ over the C ABI)"),
               clEnumValN(EmitKind::LLVM, "llvm", "LLVM IR"),
               clEnumValN(EmitKind::Obj, "obj", "an object file")),
    cl::cat(gradcCategory));

cl::opt<std::string>
    lowerTo("lower",
            cl::desc("Obsolete and ignored: both backends print the loop IR "
                     "('loops' is the only value, kept so that old build "
                     "scripts keep working)"),
            cl::value_desc("loops"), cl::init(""), cl::cat(gradcCategory));

cl::opt<std::string> outputFile("o", cl::desc("Write output to this file"),
                                cl::value_desc("OUT"), cl::init("-"),
                                cl::cat(gradcCategory));

cl::opt<bool> verify("verify",
                     cl::desc("Check diagnostics against expected-* comments"),
                     cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> parseOnly("parse-only",
                        cl::desc("With --emit=ast: dump before checking"),
                        cl::cat(gradcCategory));

cl::opt<bool> noOpt("O0", cl::desc("Do not simplify after differentiation"),
                    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> verifyEach(
    "verify-each",
    cl::desc("Verify the IR after differentiation and after every pass "
             "(default: once after them all)"),
    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<std::string> passes(
    "passes", cl::desc("Passes to run after differentiation (comma list)"),
    cl::init(""), cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> splitGrad(
    "split-grad",
    cl::desc("Also generate NAME_fwd and NAME_bwd, the split form of each "
             "gradient (runs the 'split' pass last)"),
    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

enum class Accumulate { F64, F32 };
cl::opt<Accumulate> accumulate(
    "accumulate",
    cl::desc("The order f32 sums and matmul add in (docs/IR.md, \"Summation "
             "order\"); every backend follows it bit for bit"),
    cl::values(clEnumValN(Accumulate::F64, "f64",
                          "in f64, 8 lanes along the last axis (the default)"),
               clEnumValN(Accumulate::F32, "f32",
                          "in f32, 16 lanes along the last axis (runs the "
                          "'accumulate-f32' pass first and last)")),
    cl::init(Accumulate::F64), cl::sub(cl::SubCommand::getAll()),
    cl::cat(gradcCategory));

cl::opt<bool> valueAndGrad(
    "value-and-grad",
    cl::desc("Also generate NAME_value_and_grad, the results and the "
             "gradient from one forward pass (runs the 'value-and-grad' pass "
             "first)"),
    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> timePhases(
    "time-phases",
    cl::desc("Print the wall and CPU time of each phase on standard error"),
    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

// A test hook (test/Emit/cpp-streamed.test): the output must not depend on it.
cl::opt<unsigned> cppWriteChunk(
    "cpp-write-chunk", cl::Hidden, cl::init(1u << 20),
    cl::desc("Bytes of a function's C++ held before they are written"),
    cl::sub(cl::SubCommand::getAll()), cl::cat(gradcCategory));

cl::opt<bool> printLocs("print-locs", cl::desc("Print locations in IR"),
                        cl::cat(gradcCategory));

cl::opt<std::string> targetTriple(
    "target", cl::desc("Target triple of --emit=llvm|obj (default: host)"),
    cl::value_desc("TRIPLE"), cl::init(""), cl::cat(gradcCategory));

cl::opt<std::string> targetCPU(
    "cpu",
    cl::desc("Target CPU of --emit=llvm|obj (default: the host's; generic "
             "with --target)"),
    cl::value_desc("CPU"), cl::init(""), cl::cat(gradcCategory));

cl::list<std::string> llvmArgs(
    "mllvm",
    cl::desc("Pass ARG to LLVM's own options, e.g. "
             "-mllvm -pass-remarks=loop-vectorize (loads the LLVM backend)"),
    cl::value_desc("ARG"), cl::cat(gradcCategory));

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

cl::opt<bool> noScratchCache(
    "no-scratch-cache",
    cl::desc("With --emit=llvm|obj: malloc and free every temporary in each "
             "call, as -DGRADC_NO_SCRATCH_CACHE does for the C++ backend "
             "(no per-thread cache of blocks)"),
    cl::cat(gradcCategory));

enum class FPContract { Off, Fast };
cl::opt<FPContract> fpContract(
    "fp-contract",
    cl::desc("With --emit=llvm|obj: fuse multiplies and adds into FMA "
             "instructions (fast) or not (off, the default: results equal "
             "the interpreter's bit for bit)"),
    cl::values(clEnumValN(FPContract::Off, "off", "round every * and +"),
               clEnumValN(FPContract::Fast, "fast",
                          "fuse where the target has FMA, as g++ does")),
    cl::init(FPContract::Off), cl::cat(gradcCategory));

enum class VectorWidth : unsigned {
  Auto = 0,
  W128 = 128,
  W256 = 256,
  W512 = 512
};
cl::opt<VectorWidth> preferVectorWidth(
    "prefer-vector-width",
    cl::desc("With --emit=llvm|obj: the vector width in bits that loops are "
             "vectorised for"),
    cl::values(clEnumValN(VectorWidth::Auto, "auto",
                          "512 where the target has AVX-512, else the "
                          "target's choice (the default)"),
               clEnumValN(VectorWidth::W128, "128", "128 bits"),
               clEnumValN(VectorWidth::W256, "256", "256 bits"),
               clEnumValN(VectorWidth::W512, "512", "512 bits")),
    cl::init(VectorWidth::Auto), cl::cat(gradcCategory));

cl::opt<std::string>
    moduleName("module-name",
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

/// The prefix of the C symbols: `--module-name` sanitised when given,
/// even empty (which docs/ABI.md makes `gradc_`), else the file's stem.
std::string cModuleName() {
  return moduleName.getNumOccurrences() ? emit::sanitizeModuleName(moduleName)
                                        : emit::moduleNameFromPath(inputFile);
}

std::string pipeline() {
  std::string list = !passes.empty() ? passes.getValue()
                     : noOpt         ? ""
                                     : getDefaultPipeline().str();
  // Before the other passes, so that they simplify it like NAME_grad.
  if (valueAndGrad)
    list = list.empty() ? "value-and-grad" : "value-and-grad," + list;
  if (splitGrad)
    list += list.empty() ? "split" : ",split";
  // First, so that folding runs in this order; last, for the sums that
  // the other passes made.
  if (accumulate == Accumulate::F32)
    list = list.empty() ? "accumulate-f32"
                        : "accumulate-f32," + list + ",accumulate-f32";
  return list;
}

/// Where `--emit` writes: standard output, or the `-o` file written
/// atomically. A regular file is written to a temporary file in the same
/// directory and renamed over `-o` only by commit(), so that a run that
/// fails (an error in the input, a full disk) leaves no file and no half
/// of one behind. What cannot be renamed onto (`/dev/null`, `/dev/full`, a
/// FIFO) is written directly. A write error is reported as an error, never
/// left for raw_fd_ostream to abort on.
class Output {
public:
  ~Output() {
    if (temp)
      llvm::consumeError(temp->discard());
  }

  /// Opens the output; null after reporting why it could not.
  static std::unique_ptr<Output> open(Compilation &c, bool binary) {
    auto out = std::unique_ptr<Output>(new Output(c));
    if (outputFile == "-") {
      out->stream = &llvm::outs();
      return out;
    }
    std::error_code ec;
    llvm::sys::fs::file_status status;
    bool exists = !llvm::sys::fs::status(outputFile, status);
    if (exists && !llvm::sys::fs::is_regular_file(status)) {
      out->direct = std::make_unique<llvm::raw_fd_ostream>(
          outputFile, ec,
          binary ? llvm::sys::fs::OF_None : llvm::sys::fs::OF_Text);
      if (ec)
        return out->fail(ec);
      out->stream = out->direct.get();
      return out;
    }
    llvm::SmallString<256> model(outputFile.getValue());
    model += "-%%%%%%%%.tmp";
    llvm::Expected<llvm::sys::fs::TempFile> temp =
        llvm::sys::fs::TempFile::create(model);
    if (!temp)
      return out->fail(llvm::errorToErrorCode(temp.takeError()));
    out->temp = std::make_unique<llvm::sys::fs::TempFile>(std::move(*temp));
    out->direct = std::make_unique<llvm::raw_fd_ostream>(out->temp->FD,
                                                         /*shouldClose=*/false);
    out->stream = out->direct.get();
    return out;
  }

  llvm::raw_pwrite_stream &os() { return *stream; }

  /// Flushes and, for a temporary file, renames it onto `-o`; false after
  /// reporting a write error (the temporary file is then removed).
  bool commit() {
    stream->flush();
    if (std::error_code ec = stream->error()) {
      stream->clear_error();
      fail(ec);
      return false;
    }
    if (!temp)
      return true;
    direct.reset();
    if (llvm::Error e = temp->keep(outputFile)) {
      fail(llvm::errorToErrorCode(std::move(e)));
      return false;
    }
    temp.reset();
    return true;
  }

private:
  explicit Output(Compilation &c) : c(c) {}

  std::nullptr_t fail(std::error_code ec) {
    c.diags->report(SourceLoc(), diag::err_cannot_write_output)
        << (outputFile == "-" ? std::string("standard output")
                              : "'" + outputFile + "'")
        << ec.message();
    return nullptr;
  }

  Compilation &c;
  std::unique_ptr<llvm::sys::fs::TempFile> temp;
  std::unique_ptr<llvm::raw_fd_ostream> direct;
  llvm::raw_fd_ostream *stream = nullptr;
};

/// `-o` naming the input (as given, through `./`, `..` or a link) would
/// replace the source with the output: refused, as compilers do.
bool outputIsInput(Compilation &c) {
  if (outputFile == "-" || inputFile == "-")
    return false;
  bool same = false;
  if (llvm::sys::fs::equivalent(inputFile, outputFile, same) || !same)
    return false;
  c.diags->report(SourceLoc(), diag::err_output_is_input)
      << outputFile << inputFile;
  return true;
}

/// --emit=llvm and --emit=obj: the verified module, optimised at -O2
/// (unoptimised with -O0), for the host or --target/--cpu; built by the
/// plugin (Backends.h).
int emitLLVM(Compilation &c, bool object) {
  const BackendPlugin *plugin = getBackendPlugin(*c.diags);
  if (!plugin)
    return c.finish();
  emit::LLVMOptions options;
  options.moduleName = cModuleName();
  options.triple = targetTriple;
  options.cpu = targetCPU;
  options.optLevel = noOpt ? 0 : 2;
  options.blas = useBlas;
  options.scratchCache = !noScratchCache;
  options.fpContractFast = fpContract == FPContract::Fast;
  options.preferVectorWidth = unsigned(VectorWidth(preferVectorWidth));
  std::string bytes, error;
  bool targetError = false;
  if (!plugin->emitLLVM(*c.ir, options, object, bytes, error, targetError)) {
    c.diags->report(SourceLoc(), targetError ? diag::err_llvm_target
                                             : diag::err_llvm_internal)
        << error;
    return c.finish();
  }
  if (object && outputFile == "-" &&
      llvm::sys::Process::StandardOutIsDisplayed()) {
    c.diags->report(SourceLoc(), diag::err_llvm_obj_terminal);
    return c.finish();
  }
  auto out = Output::open(c, object);
  if (!out)
    return c.finish();
  out->os() << bytes;
  out->commit();
  return c.finish();
}

int compileCommand(Compilation &c) {
  if (!lowerTo.empty() && lowerTo != "loops") {
    llvm::errs() << "gradc: error: --lower=" << lowerTo
                 << ": the only value is 'loops'\n";
    return 1;
  }
  if (outputIsInput(c))
    return c.finish();
  if (!c.readFile(inputFile) || !c.parse())
    return c.finish();
  if (emitKind == EmitKind::AST && parseOnly) {
    auto out = Output::open(c, false);
    if (!out)
      return c.finish();
    ast::dumpModule(*c.ast, c.sm, out->os());
    out->commit();
    return c.finish();
  }
  if (!c.check())
    return c.finish();
  if (emitKind == EmitKind::AST) {
    auto out = Output::open(c, false);
    if (!out)
      return c.finish();
    ast::dumpModule(*c.ast, c.sm, out->os());
    out->commit();
    return c.finish();
  }
  if (!c.lower())
    return c.finish();
  ir::PrintOptions printOptions;
  printOptions.printLocations = printLocs;
  printOptions.sourceManager = &c.sm;
  if (emitKind == EmitKind::IR) {
    auto out = Output::open(c, false);
    if (!out)
      return c.finish();
    TimeRegion region("print IR");
    ir::printModule(*c.ir, out->os(), printOptions);
    out->commit();
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
    auto out = Output::open(c, false);
    if (!out)
      return c.finish();
    TimeRegion region("print IR");
    ir::printModule(*c.ir, out->os(), printOptions);
    out->commit();
    break;
  }
  case EmitKind::Loops: {
    std::string error;
    std::unique_ptr<loops::LoopModule> lowered =
        loops::lowerModule(*c.ir, error);
    if (!lowered || !loops::verifyLoops(*lowered, error)) {
      llvm::errs() << "gradc: error: internal error: " << error << "\n";
      return 1;
    }
    auto out = Output::open(c, false);
    if (!out)
      return c.finish();
    loops::printLoops(*lowered, out->os(), &c.sm);
    out->commit();
    break;
  }
  case EmitKind::Dot: {
    auto out = Output::open(c, false);
    if (!out)
      return c.finish();
    emit::emitDot(*c.ir, out->os());
    out->commit();
    break;
  }
  case EmitKind::Cpp:
  case EmitKind::Header:
  case EmitKind::Python: {
    // The C++ backend prints the loop IR, which lowers loops and indexing.
    emit::EmitOptions options;
    options.moduleName = cModuleName();
    options.sourceName = llvm::sys::path::filename(inputFile).str();
    options.sourceManager = &c.sm;
    options.disableFree = true;
    options.writeChunk = cppWriteChunk;
    TimeRegion region(emitKind == EmitKind::Header   ? "emit header"
                      : emitKind == EmitKind::Python ? "emit python"
                                                     : "emit cpp");
    // The emitters write straight into the output (a temporary file until
    // commit): emitCpp fails, if at all, before it writes anything.
    auto out = Output::open(c, false);
    if (!out)
      return c.finish();
    llvm::raw_ostream &os = out->os();
    if (emitKind == EmitKind::Header)
      emit::emitHeader(*c.ir, options, os);
    else if (emitKind == EmitKind::Python)
      emit::emitPython(*c.ir, options, os);
    else {
      std::string error;
      if (!emit::emitCpp(*c.ir, options, os, error)) {
        llvm::errs() << "gradc: error: internal error: " << error << "\n";
        return 1;
      }
    }
    out->commit();
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
  setLLVMArgs({llvmArgs.begin(), llvmArgs.end()});
  // Printed when main returns, after every phase's region has closed.
  struct PrintTimes {
    std::unique_ptr<PhaseTimer> timer;
    ~PrintTimes() {
      if (timer)
        timer->print(llvm::errs());
      PhaseTimer::active = nullptr;
    }
  } times;
  if (timePhases) {
    times.timer = std::make_unique<PhaseTimer>();
    PhaseTimer::active = times.timer.get();
  }
  Compilation c(verify);
  c.verifyEach = verifyEach;
  c.externOptions.includeDirs = includeDirs;
  c.externOptions.defines = defines;
  c.externOptions.compileCommandsDir = compileCommandsDir;
  c.externOptions.libraries = loadLibraries;
  if (runCmd)
    return runCommand(c, inputFile, callExprs, backend, pipeline());
  if (checkCmd)
    return checkCommand(c, inputFile, backend, pipeline(), checkSeed,
                        checkPoints);
  int status = compileCommand(c);
  // gradc exits next: the AST and the IR are left allocated rather than
  // freed node by node (see emit::EmitOptions::disableFree).
  llvm::BuryPointer(std::move(c.ir));
  llvm::BuryPointer(std::move(c.ast));
  return status;
}
