//===- Run.cpp - gradc run: evaluate one call of a function ---------------===//
//
//   gradc run FILE.grad --call 'synth_grad([1, 2], [[3, 4], [6, 8]])'
//
// `--call` may be repeated: the file is compiled once and the calls are
// evaluated in turn, each one's results after a line `# CALL` (the
// differential tests of test/Backends run many calls per process).
//
// Compiles the file through differentiation (so generated `NAME_grad`
// functions can be called too), parses the call text with the literal
// parser of lib/IR, converts each literal to its parameter's element type,
// checks the literal shapes against the signature (binding size names), and
// evaluates the call with a backend. Each result is printed on its own line
// as a nested bracket list.
//
// The call text is added to the SourceManager as a buffer named "<call>",
// so that every error about it is printed like an error in a file, with
// the text and a caret under the offending column.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "Backends.h"

#include "gradc/Emit/Mangle.h"
#include "gradc/IR/Literal.h"
#include "gradc/Loops/Loops.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace gradc;
using namespace gradc::driver;

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

namespace {

/// The `llvm` and `cpp` backends, from the plugin (Backends.h).
bool runWithLLVMJIT(const ir::Module &module, llvm::StringRef fnName,
                    llvm::ArrayRef<ir::Tensor> args,
                    std::vector<ir::Tensor> &results, std::string &error) {
  const BackendPlugin *plugin = getBackendPlugin(error);
  return plugin && plugin->runLLVM(module, fnName, args, results, error);
}

/// A test hook (clangjit::setInjectedSource). Hidden: it exists only to
/// test gradc.
llvm::cl::opt<std::string> injectedSource(
    "cpp-jit-inject", llvm::cl::Hidden,
    llvm::cl::desc("Append this text to the C++ that --backend=cpp compiles "
                   "(tests the report of a Clang error)"),
    llvm::cl::value_desc("TEXT"), llvm::cl::init(""),
    llvm::cl::sub(llvm::cl::SubCommand::getAll()));

/// `gradc run --memory-stats`: what the interpreter held (InterpreterStats).
llvm::cl::opt<bool> memoryStats(
    "memory-stats",
    llvm::cl::desc("With --backend=interp: print the peak tensor bytes, the "
                   "peak checkpointed loop carries and the recomputed loop "
                   "steps of each call on standard error"),
    llvm::cl::sub(llvm::cl::SubCommand::getAll()));

bool runWithClangJIT(const ir::Module &module, llvm::StringRef fnName,
                     llvm::ArrayRef<ir::Tensor> args,
                     std::vector<ir::Tensor> &results, std::string &error) {
  const BackendPlugin *plugin = getBackendPlugin(error);
  if (!plugin)
    return false;
  plugin->setInjectedSource(injectedSource);
  return plugin->runCpp(module, fnName, args, results, error);
}

/// `llvm-loops`: `llvm` by its name from when EmitLLVM.cpp lowered ops.
bool runWithLLVMJITLoops(const ir::Module &module, llvm::StringRef fnName,
                         llvm::ArrayRef<ir::Tensor> args,
                         std::vector<ir::Tensor> &results, std::string &error) {
  const BackendPlugin *plugin = getBackendPlugin(error);
  return plugin && plugin->runLLVMLoops(module, fnName, args, results, error);
}

/// Adding a backend is one row here (the emitters add `llvm` and `cpp`).
const RunBackend runBackends[] = {
    {"interp", "the reference interpreter of lib/IR", ir::interpret},
    {"llvm",
     "the loop IR (after its passes) built as LLVM IR (lib/Emit/PrintLLVM), "
     "compiled by ORC's JIT (lib/Emit/LLVMJIT)",
     runWithLLVMJIT},
    {"cpp",
     "the C++ backend's code (the loop IR printed by lib/Emit/PrintCpp) "
     "compiled in-process by Clang, run by ORC's JIT (lib/ClangJIT)",
     runWithClangJIT},
    {"llvm-loops",
     "the same as llvm (its name while two LLVM lowerings existed)",
     runWithLLVMJITLoops},
    {"loops",
     "the loop IR of lib/Loops (docs/Loops.md), run by its evaluator with "
     "the interpreter's numerics",
     loops::runWithLoops},
    {"loops-opt",
     "the same after the loop passes (fusion, buffer planning), each "
     "verified",
     loops::runWithLoopPasses},
};

std::string listBackends() {
  std::string list;
  for (const RunBackend &b : runBackends)
    list += (list.empty() ? "" : ", ") + std::string(b.name);
  return list;
}

} // namespace

llvm::ArrayRef<RunBackend> driver::getRunBackends() { return runBackends; }

llvm::StringRef driver::backendDisplayName(llvm::StringRef name) {
  if (name == "cpp")
    return "C++";
  if (name == "llvm" || name == "llvm-loops")
    return "LLVM";
  return "loop IR";
}

bool driver::backendRunsLoops(llvm::StringRef name) {
  return name == "interp" || name == "loops" || name == "loops-opt" ||
         name == "cpp" || name == "llvm" || name == "llvm-loops";
}

const RunBackend *driver::lookupRunBackend(llvm::StringRef name) {
  for (const RunBackend &b : runBackends)
    if (name == b.name)
      return &b;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// The call
//===----------------------------------------------------------------------===//

namespace {

/// A parsed `--call`, with locations into the "<call>" buffer.
struct CallSite {
  SourceLoc start; ///< first character of the call text
  std::string callee;
  SourceLoc calleeLoc;
  SourceLoc closeLoc; ///< the final ')'
  std::vector<ir::Literal> args;

  SourceLoc locOf(size_t column) const { return start.getAdvanced(column); }
  SourceLoc locOf(const ir::Literal &lit) const { return locOf(lit.column); }
};

class CallRunner {
public:
  CallRunner(Compilation &c, const RunBackend &backend)
      : c(c), diags(*c.diags), backend(backend) {}

  /// Parses, checks and evaluates `callText`; false after an error.
  bool run(llvm::StringRef callText);

private:
  bool parseCall(llvm::StringRef callText);
  const ir::Function *findCallee();
  void reportUnknownFunction();
  bool checkArity(const ir::Function &fn);
  bool convertArguments(const ir::Function &fn, std::vector<ir::Tensor> &args);
  bool checkSizes(const ir::Function &fn, llvm::ArrayRef<ir::Tensor> args);

  static bool isCallable(const ir::Function &fn) {
    return fn.getRole() != ir::Function::Role::RuleInstance &&
           fn.getRole() != ir::Function::Role::LoopBody;
  }
  /// `x: f32[2]` for parameter `i`.
  static std::string describeParam(const ir::Function &fn, unsigned i) {
    const ir::Value *p = fn.getParam(i);
    return p->getName().str() + ": " + p->getType().str();
  }
  void noteDeclared(const ir::Function &fn) {
    if (fn.getLoc().isValid())
      diags.report(fn.getLoc(), diag::note_run_declared_here) << fn.getName();
  }

  Compilation &c;
  DiagnosticEngine &diags;
  const RunBackend &backend;
  CallSite call;
};

/// The call text goes into its own buffer so that errors show it with a
/// caret; the literal parser reports 0-based columns into it.
bool CallRunner::parseCall(llvm::StringRef callText) {
  call.start = c.sm.addBuffer("<call>", callText.str());
  std::string error;
  size_t errorColumn = 0;
  if (!ir::parseCallLiteral(callText, call.callee, call.args, error,
                            errorColumn)) {
    diags.report(call.locOf(errorColumn), diag::err_run_call_syntax) << error;
    return false;
  }
  size_t calleeColumn = callText.find_first_not_of(" \t\r\n");
  call.calleeLoc = call.locOf(calleeColumn);
  call.closeLoc = call.locOf(callText.rfind(')'));
  return true;
}

/// A user function or a generated `_grad` one; rule instances are internal.
const ir::Function *CallRunner::findCallee() {
  if (const ir::Function *fn = c.ir->lookup(call.callee))
    if (isCallable(*fn))
      return fn;
  reportUnknownFunction();
  return nullptr;
}

/// Says why the name is not callable: a rule, a gradient that was not
/// asked for, or a typo (with the nearest callable name).
void CallRunner::reportUnknownFunction() {
  const std::string &name = call.callee;
  const ir::Function *irFn = c.ir->lookup(name);
  if (c.ast->findRule(name) || (irFn && !isCallable(*irFn))) {
    diags.report(call.calleeLoc, diag::err_run_call_rule) << name;
    return;
  }
  llvm::StringRef base = llvm::StringRef(name);
  if (base.consume_back("_grad"))
    if (const ir::Function *fn = c.ir->lookup(base);
        fn && isCallable(*fn) && !fn->getGradSpec()) {
      diags.report(call.calleeLoc, diag::err_run_grad_not_generated)
          << name << base;
      noteDeclared(*fn);
      return;
    }
  // NAME_value_and_grad exists only with --value-and-grad.
  base = name;
  if (base.consume_back("_value_and_grad"))
    if (const ir::Function *fn = c.ir->lookup(base); fn && isCallable(*fn)) {
      if (fn->getGradSpec())
        diags.report(call.calleeLoc, diag::err_run_value_and_grad_not_generated)
            << name;
      else
        diags.report(call.calleeLoc, diag::err_run_grad_not_generated)
            << name << base;
      noteDeclared(*fn);
      return;
    }
  // NAME_fwd and NAME_bwd exist only with --split-grad.
  base = name;
  if (base.consume_back("_fwd") || base.consume_back("_bwd"))
    if (const ir::Function *fn = c.ir->lookup(base); fn && isCallable(*fn)) {
      if (fn->getGradSpec())
        diags.report(call.calleeLoc, diag::err_run_split_not_generated) << name;
      else
        diags.report(call.calleeLoc, diag::err_run_grad_not_generated)
            << name << base;
      noteDeclared(*fn);
      return;
    }
  llvm::StringRef best;
  unsigned bestDistance =
      std::max<unsigned>(2, static_cast<unsigned>(name.size() / 3)) + 1;
  for (const auto &fn : c.ir->getFunctions()) {
    if (!isCallable(*fn))
      continue;
    unsigned d = llvm::StringRef(name).edit_distance(fn->getName(), true,
                                                     bestDistance - 1);
    if (d < bestDistance) {
      bestDistance = d;
      best = fn->getName();
    }
  }
  if (best.empty())
    diags.report(call.calleeLoc, diag::err_unknown_function_in_call) << name;
  else
    diags.report(call.calleeLoc, diag::err_run_unknown_function_suggest)
        << name << best;
}

/// "'synth' takes 1 argument (x: f32[2]), but the call gives 2": at the
/// first extra argument, or at the ')' when arguments are missing.
bool CallRunner::checkArity(const ir::Function &fn) {
  size_t want = fn.getParams().size(), got = call.args.size();
  if (want == got)
    return true;
  std::string params;
  for (unsigned i = 0; i < want; ++i)
    params += (i ? ", " : "") + describeParam(fn, i);
  std::string count =
      std::to_string(want) + (want == 1 ? " argument" : " arguments");
  SourceLoc at = got > want ? call.locOf(call.args[want]) : call.closeLoc;
  diags.report(at, diag::err_run_arity)
      << fn.getName() << count << params << std::to_string(got);
  noteDeclared(fn);
  return false;
}

/// Each literal becomes a tensor of its parameter's element type; the
/// shape comes from the literal's nesting.
bool CallRunner::convertArguments(const ir::Function &fn,
                                  std::vector<ir::Tensor> &args) {
  for (unsigned i = 0; i < call.args.size(); ++i) {
    const ir::Value *param = fn.getParam(i);
    ir::Tensor t;
    std::string error;
    size_t column = call.args[i].column;
    if (!ir::literalToTensor(call.args[i], param->getType().dtype, t, error,
                             &column)) {
      diags.report(call.locOf(column), diag::err_run_bad_argument)
          << param->getName() << fn.getName() << param->getType().str()
          << error;
      return false;
    }
    args.push_back(std::move(t));
  }
  return true;
}

std::string literalShapeStr(const ir::Tensor &t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

/// Checks each literal's shape against its parameter's type, binding size
/// names from left to right, so that a size conflict names the size and
/// both arguments (the interpreter would only say that something is off).
bool CallRunner::checkSizes(const ir::Function &fn,
                            llvm::ArrayRef<ir::Tensor> args) {
  struct Binding {
    int64_t size;
    unsigned arg;
  };
  llvm::StringMap<Binding> sizes;
  for (unsigned i = 0; i < args.size(); ++i) {
    const ir::Value *param = fn.getParam(i);
    const TensorType &type = param->getType();
    const ir::Tensor &t = args[i];
    auto mismatch = [&] {
      diags.report(call.locOf(call.args[i]), diag::err_run_shape_mismatch)
          << param->getName() << fn.getName() << type.str()
          << literalShapeStr(t);
      return false;
    };
    if (t.shape.size() != type.getRank())
      return mismatch();
    // Sizes bound by this argument, checked against each other first.
    llvm::StringMap<int64_t> local;
    for (unsigned d = 0; d < type.getRank(); ++d) {
      const Dim &dim = type.shape[d];
      if (dim.isKnown()) {
        if (dim.getSize() != t.shape[d])
          return mismatch();
        continue;
      }
      auto [it, inserted] = local.try_emplace(dim.getName(), t.shape[d]);
      if (!inserted && it->second != t.shape[d])
        return mismatch();
    }
    for (const auto &[name, size] : local) {
      auto [it, inserted] = sizes.try_emplace(name, Binding{size, i});
      if (inserted || it->second.size == size)
        continue;
      const Binding &first = it->second;
      const ir::Value *firstParam = fn.getParam(first.arg);
      diags.report(call.locOf(call.args[i]), diag::err_run_size_conflict)
          << name << std::to_string(first.size) << firstParam->getName()
          << std::to_string(size) << param->getName();
      diags.report(call.locOf(call.args[first.arg]), diag::note_run_size_bound)
          << name << std::to_string(first.size) << firstParam->getName();
      return false;
    }
  }
  return true;
}

bool CallRunner::run(llvm::StringRef callText) {
  if (!parseCall(callText))
    return false;
  const ir::Function *fn = findCallee();
  if (!fn || !checkArity(*fn))
    return false;
  std::vector<ir::Tensor> args;
  if (!convertArguments(*fn, args) || !checkSizes(*fn, args))
    return false;
  std::vector<ir::Tensor> results;
  std::string error;
  if (!backend.run(*c.ir, fn->getName(), args, results, error)) {
    diags.report(call.calleeLoc, diag::err_run_failed)
        << fn->getName() << error;
    return false;
  }
  for (const ir::Tensor &result : results) {
    ir::printTensor(result, llvm::outs());
    llvm::outs() << "\n";
  }
  llvm::outs().flush();
  if (memoryStats && llvm::StringRef(backend.name) == "interp") {
    const ir::InterpreterStats &stats = ir::lastInterpreterStats();
    llvm::errs() << "memory: peak " << stats.peakLiveBytes
                 << " bytes, checkpointed carries "
                 << stats.peakCheckpointCarries << ", recomputed steps "
                 << stats.recomputedSteps << ", copied " << stats.copiedBytes
                 << " bytes\n";
  }
  return true;
}

} // namespace

/// `gradc run` may call an extern function directly, to try the user's
/// kernel on each backend: each extern gets a function of its own name
/// (its C symbol in generated code has the module prefix) that calls it.
static void addExternWrappers(ir::Module &module) {
  for (const ir::ExternDecl &e : module.externs) {
    if (module.lookup(e.name))
      continue;
    ir::Function *fn = module.addFunction(e.name);
    fn->setLoc(e.loc);
    std::vector<ir::Value *> params;
    for (size_t i = 0; i < e.paramTypes.size(); ++i)
      params.push_back(fn->addParam(e.paramTypes[i], e.paramNames[i]));
    AttrList attrs;
    attrs.set("callee", e.name);
    ir::Op *op = fn->createOp(OpKind::ExternCall, params, e.resultTypes,
                              std::move(attrs), e.loc);
    fn->setReturns(op->getResults());
  }
}

int driver::runCommand(Compilation &c, llvm::StringRef path,
                       llvm::ArrayRef<std::string> callTexts,
                       llvm::StringRef backendName, llvm::StringRef pipeline) {
  const RunBackend *backend = lookupRunBackend(backendName);
  if (!backend) {
    c.diags->report(SourceLoc(), diag::err_run_unknown_backend)
        << backendName << listBackends();
    return c.finish();
  }
  if (!c.readFile(path) || !c.parse() || !c.check() || !c.lower() ||
      !c.differentiate(pipeline) || !c.loadExterns())
    return c.finish();
  if (!backendRunsLoops(backendName) &&
      !emit::checkBackendSupport(*c.ir, backendDisplayName(backendName),
                                 *c.diags))
    return c.finish();
  addExternWrappers(*c.ir);
  // Several calls share one compilation (and the backend's compiled code):
  // each one's results follow a line "# CALL", and a failed call does not
  // stop the next ones.
  bool several = callTexts.size() > 1;
  for (const std::string &callText : callTexts) {
    if (several) {
      std::string header = callText;
      std::replace(header.begin(), header.end(), '\n', ' ');
      llvm::outs() << "# " << header << "\n";
    }
    CallRunner(c, *backend).run(callText);
  }
  llvm::outs().flush();
  return c.finish();
}
