//===- ClangJIT.cpp - Running the C++ backend's code in-process -----------===//
//
// The `cpp` run backend, in four steps:
//
//   1. emit::emitCpp writes the module's C++ with module name
//      emit::jitModuleName, and this file appends one trampoline per
//      exported function, the C++ twin of the ones EmitLLVM writes for the JIT
//      (`int32_t __gradc_call_SYM(const int64_t *sizes, void **args,
//      void **outs)`).
//   2. Clang's driver turns `clang++ -c gradc_jit.cpp` plus getCompilerFlags()
//      into a cc1 command line, so that the include paths of the system's
//      C++ library are found exactly as the clang++ binary would find them;
//      `-resource-dir` names LLVM 19's own built-in headers.
//   3. A CompilerInstance runs an EmitLLVMOnlyAction on that command line
//      over a virtual file system: the source and the runtime headers (embedded
//      in gradc at build time) live in memory under a directory that does
//      not exist on disk, layered over the real file system for the system
//      headers. The action runs Clang's -O2 pipeline and yields the
//      llvm::Module.
//   4. emit::JITModule::createFromLLVMModule compiles that module with ORC;
//      calls then go through the same marshalling as `--backend=llvm`.
//
// Clang's messages are collected rather than printed (library code never
// writes to stderr); the first error becomes err_clang_jit_rejected with
// the offending line of the generated code and a caret.
//
//===----------------------------------------------------------------------===//

#include "gradc/ClangJIT/ClangJIT.h"
#include "gradc/ClangJIT/Externs.h"

#include "gradc/Basic/Diagnostic.h"
#include "gradc/Emit/EmitCpp.h"
#include "gradc/Emit/EmitLLVM.h"
#include "gradc/Emit/Mangle.h"

#include "clang/Basic/Diagnostic.h"
#include "clang/Basic/DiagnosticLex.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/Basic/SourceManager.h"
#include "clang/CodeGen/CodeGenAction.h"
#include "clang/Driver/Compilation.h"
#include "clang/Driver/Driver.h"
#include "clang/Driver/Job.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/CompilerInvocation.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/VirtualFileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <mutex>

using namespace gradc;
using namespace gradc::clangjit;

#ifndef GRADC_CLANG_RESOURCE_DIR
#error "GRADC_CLANG_RESOURCE_DIR must name LLVM 19's lib/clang/19"
#endif

// The runtime headers' bytes (EmbedFile.cmake), listed as
// GRADC_EMBEDDED_HEADERS(X) by compiler/lib/ClangJIT/CMakeLists.txt.
#include "RuntimeHeaders.inc"

namespace {

/// The text of setInjectedSource (ClangJIT.h).
std::string &injectedSource() {
  static std::string text;
  return text;
}

/// The in-memory directory of the compilation. It does not exist on disk,
/// so nothing on disk can shadow the embedded runtime.
constexpr llvm::StringLiteral virtualDir = "/gradc-in-memory";
constexpr llvm::StringLiteral virtualIncludeDir = "/gradc-in-memory/include";

const char *const compilerFlags[] = {
    "-std=c++17",      // docs/CppBackend.md: the code is C++17
    "-O2",             // Clang's optimisation pipeline, as documented there
    "-fno-exceptions", // nothing generated or in Runtime.h throws
    "-w",              // the code is checked with -Werror elsewhere
    // One call per process: a per-thread cache of temporaries would only
    // hold memory, and the JIT need not support thread_local.
    "-DGRADC_NO_SCRATCH_CACHE",
};

/// A header of runtime/include, embedded.
struct EmbeddedHeader {
  llvm::StringLiteral path; // relative to the include directory
  llvm::StringRef text;
};

#define GRADC_EMBEDDED_ENTRY(PATH, ARRAY)                                      \
  {PATH,                                                                       \
   llvm::StringRef(reinterpret_cast<const char *>(ARRAY), sizeof(ARRAY) - 1)},
const EmbeddedHeader embeddedHeaders[] = {
    GRADC_EMBEDDED_HEADERS(GRADC_EMBEDDED_ENTRY)};
#undef GRADC_EMBEDDED_ENTRY

/// A path as the user should read it: relative to the virtual directory.
llvm::StringRef displayPath(llvm::StringRef path) {
  if (path.consume_front(virtualIncludeDir) || path.consume_front(virtualDir))
    path.consume_front("/");
  return path;
}

//===----------------------------------------------------------------------===//
// Collecting Clang's errors
//===----------------------------------------------------------------------===//

/// Keeps the first error Clang reports, formatted, and counts the rest.
class ErrorCollector : public clang::DiagnosticConsumer {
public:
  void HandleDiagnostic(clang::DiagnosticsEngine::Level level,
                        const clang::Diagnostic &info) override {
    clang::DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < clang::DiagnosticsEngine::Error)
      return;
    if (!first.empty()) {
      ++more;
      return;
    }
    llvm::SmallString<128> message;
    info.FormatDiagnostic(message);
    first = message.str().str();
    if (info.getLocation().isValid() && info.hasSourceManager()) {
      describeLocation(info.getSourceManager(), info.getLocation());
      // The runtime includes only standard headers: if one is missing, the
      // machine lacks a C++ standard library, which is no bug of gradc.
      missingStandardHeader =
          info.getID() == clang::diag::err_pp_file_not_found &&
          llvm::StringRef(where).starts_with("gradc/");
    }
  }

  bool hasError() const { return !first.empty(); }

  /// The first error in the user's own code, as Clang prints it.
  std::string formatUserError() const {
    std::string text = where.empty() ? first : where + ": error: " + first;
    if (!snippet.empty())
      text += "\n" + snippet;
    return text;
  }

  /// err_clang_jit_rejected for the first error (or err_clang_jit_setup
  /// when it has no location: a driver or set-up failure).
  std::string format() const {
    if (where.empty())
      return DiagnosticEngine::formatMessage(diag::err_clang_jit_setup,
                                             {first});
    if (missingStandardHeader)
      return DiagnosticEngine::formatMessage(
          diag::err_clang_jit_setup,
          {"the C++ standard library's headers are not installed (" + first +
           ", included by " + where + ")"});
    std::string others;
    if (more)
      others = "\n(and " + std::to_string(more) + " more error" +
               (more == 1 ? "" : "s") + ")";
    return DiagnosticEngine::formatMessage(diag::err_clang_jit_rejected,
                                           {where, first, snippet, others});
  }

private:
  /// Sets `where` ("gradc_jit.cpp:12:3") and `snippet`: the line, and a
  /// caret under the column, in the layout of Clang's own messages.
  void describeLocation(const clang::SourceManager &sm,
                        clang::SourceLocation loc) {
    loc = sm.getFileLoc(loc);
    clang::PresumedLoc presumed = sm.getPresumedLoc(loc);
    if (presumed.isInvalid())
      return;
    where = (displayPath(presumed.getFilename()) + ":" +
             llvm::Twine(presumed.getLine()) + ":" +
             llvm::Twine(presumed.getColumn()))
                .str();
    bool invalid = false;
    llvm::StringRef buffer = sm.getBufferData(sm.getFileID(loc), &invalid);
    unsigned offset = sm.getFileOffset(loc);
    if (invalid || offset > buffer.size())
      return;
    size_t start = buffer.rfind('\n', offset);
    start = start == llvm::StringRef::npos ? 0 : start + 1;
    llvm::StringRef line = buffer.substr(start).split('\n').first;
    std::string number = std::to_string(presumed.getLine());
    std::string gutter(number.size(), ' ');
    snippet = " " + number + " | " + line.rtrim().str() + "\n " + gutter +
              " | " + std::string(offset - start, ' ') + "^";
  }

  std::string first, where, snippet;
  unsigned more = 0;
  bool missingStandardHeader = false;
};

/// LLVM's native target, for Clang's code generator and for ORC.
void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

/// The cc1 command line for compiling `mainPath` with compilerFlags, as
/// Clang's driver builds it for the host (system include paths included).
/// Null on failure, with an error reported to `diags` if the driver had one.
std::shared_ptr<clang::CompilerInvocation>
buildInvocation(llvm::StringRef mainPath,
                llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs,
                clang::DiagnosticsEngine &diags,
                llvm::ArrayRef<std::string> extraArgs) {
  // The driver locates the GCC installation (libstdc++'s headers) from the
  // real file system and the resource directory from -resource-dir; the
  // executable path it is given needs to exist for neither.
  llvm::SmallString<128> clangPath(GRADC_CLANG_RESOURCE_DIR);
  for (int i = 0; i < 3; ++i)
    llvm::sys::path::remove_filename(clangPath); // lib/clang/19 -> prefix
  llvm::sys::path::append(clangPath, "bin", "clang++");
  clang::driver::Driver driver(clangPath, llvm::sys::getProcessTriple(), diags,
                               "gradc in-process clang", fs);
  driver.setCheckInputsExist(false);

  std::string mainArg = mainPath.str();
  std::string includeArg = "-I" + virtualIncludeDir.str();
  std::vector<const char *> args = {
      clangPath.c_str(), "--no-default-config",    "-c",
      "-resource-dir",   GRADC_CLANG_RESOURCE_DIR, includeArg.c_str()};
  args.insert(args.end(), std::begin(compilerFlags), std::end(compilerFlags));
  for (const std::string &a : extraArgs)
    args.push_back(a.c_str());
  args.push_back(mainArg.c_str());

  std::unique_ptr<clang::driver::Compilation> compilation(
      driver.BuildCompilation(args));
  if (!compilation || diags.hasErrorOccurred())
    return nullptr;
  const clang::driver::JobList &jobs = compilation->getJobs();
  if (jobs.size() != 1 || !llvm::isa<clang::driver::Command>(*jobs.begin()))
    return nullptr;
  const auto &command = llvm::cast<clang::driver::Command>(*jobs.begin());
  auto invocation = std::make_shared<clang::CompilerInvocation>();
  if (!clang::CompilerInvocation::CreateFromArgs(*invocation,
                                                 command.getArguments(), diags))
    return nullptr;
  // We compile once per process, but free what we allocate anyway, and
  // print no "1 error generated." summary: errors go to the collector.
  invocation->getFrontendOpts().DisableFree = false;
  invocation->getCodeGenOpts().DisableFree = false;
  invocation->getDiagnosticOpts().ShowCarets = false;
  return invocation;
}

//===----------------------------------------------------------------------===//
// Trampolines
//===----------------------------------------------------------------------===//

/// `static_cast<const float *>(args[1])`, or for a scalar its value.
std::string argumentFromArray(const emit::CParam &param, size_t index) {
  std::string type = emit::cTypeName(param.dtype).str();
  std::string slot = "args[" + std::to_string(index) + "]";
  if (param.type.isScalar())
    return "*static_cast<const " + type + " *>(" + slot + ")";
  return "static_cast<const " + type + " *>(" + slot + ")";
}

/// The trampoline of `fn`: unpacks the three arrays that
/// emit::JITModule::call fills and calls the function.
void writeTrampoline(const ir::Module &module, const ir::Function &fn,
                     llvm::raw_ostream &os) {
  std::string symbol = emit::cSymbolName(emit::jitModuleName, fn.getName());
  emit::NameScope scope;
  std::vector<std::string> args;
  size_t sizes = 0, inputs = 0, outputs = 0;
  for (const emit::CParam &param : emit::getCParams(module, fn, scope)) {
    switch (param.kind) {
    case emit::CParamKind::Size:
      args.push_back("sizes[" + std::to_string(sizes++) + "]");
      break;
    case emit::CParamKind::Input:
      args.push_back(argumentFromArray(param, inputs++));
      break;
    case emit::CParamKind::Output:
      args.push_back("static_cast<" + emit::cTypeName(param.dtype).str() +
                     " *>(outs[" + std::to_string(outputs++) + "])");
      break;
    }
  }
  os << "\nextern \"C\" int32_t " << emit::jitWrapperName(symbol)
     << "(const int64_t *sizes, void **args, void **outs) {\n"
     << "  return " << symbol << "(";
  for (size_t i = 0; i < args.size(); ++i)
    os << (i ? ",\n      " : "") << args[i];
  os << ");\n}\n";
}

/// Collects the C++ emitter's errors as text: the run backend has no
/// DiagnosticEngine of the driver to report them to.
class MessageCollector : public DiagnosticConsumer {
public:
  void handle(const Diagnostic &diag) override {
    if (diag.severity == Severity::Error && message.empty())
      message = diag.message;
  }
  std::string message;
};

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

llvm::ArrayRef<const char *> clangjit::getCompilerFlags() {
  return compilerFlags;
}

namespace {
/// The flags of setGeneratedCodeArgs (Externs.h).
std::vector<std::string> &generatedCodeArgs() {
  static std::vector<std::string> args;
  return args;
}
} // namespace

void clangjit::setGeneratedCodeArgs(std::vector<std::string> args) {
  generatedCodeArgs() = std::move(args);
}

void clangjit::setInjectedSource(std::string text) {
  injectedSource() = std::move(text);
}

std::unique_ptr<llvm::Module> clangjit::compileCpp(llvm::StringRef source,
                                                   llvm::LLVMContext &context,
                                                   std::string &error) {
  std::string mainPath = (virtualDir + "/" + sourceFileName).str();
  return compileSource(source, mainPath, generatedCodeArgs(), context, error,
                       /*userCode=*/false);
}

std::unique_ptr<llvm::Module>
clangjit::compileUserCpp(llvm::StringRef source, llvm::StringRef path,
                         llvm::ArrayRef<std::string> extraArgs,
                         llvm::LLVMContext &context, std::string &error) {
  // The in-memory file system wants an absolute path.
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  return compileSource(source, absolute, extraArgs, context, error,
                       /*userCode=*/true);
}

/// Compiles `source` as the file `mainPath` (in memory, over the real
/// file system, so that its `#include "..."` resolve beside that path).
/// The errors of the user's code are reported as Clang prints them; an
/// error in generated code is a bug of gradc's C++ backend.
std::unique_ptr<llvm::Module>
clangjit::compileSource(llvm::StringRef source, llvm::StringRef mainPathRef,
                        llvm::ArrayRef<std::string> extraArgs,
                        llvm::LLVMContext &context, std::string &error,
                        bool userCode) {
  initializeNativeTarget();
  if (!llvm::sys::fs::is_directory(GRADC_CLANG_RESOURCE_DIR)) {
    error = DiagnosticEngine::formatMessage(
        diag::err_clang_jit_setup,
        {"Clang's resource directory '" GRADC_CLANG_RESOURCE_DIR
         "' does not exist (is LLVM 19's clang installed?)"});
    return nullptr;
  }

  // The source and the runtime in memory, over the real file system.
  std::string mainPath = mainPathRef.str();
  auto memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  memory->addFile(mainPath, 0,
                  llvm::MemoryBuffer::getMemBuffer(source, mainPath));
  for (const EmbeddedHeader &header : embeddedHeaders) {
    std::string path = (virtualIncludeDir + "/" + header.path).str();
    memory->addFile(path, 0,
                    llvm::MemoryBuffer::getMemBuffer(header.text, path));
  }
  auto fs = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(
      llvm::vfs::getRealFileSystem());
  fs->pushOverlay(memory);

  ErrorCollector collector;
  auto diagOptions = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  clang::DiagnosticsEngine driverDiags(
      llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), diagOptions.get(),
      &collector, /*ShouldOwnClient=*/false);
  std::shared_ptr<clang::CompilerInvocation> invocation =
      buildInvocation(mainPath, fs, driverDiags, extraArgs);
  if (!invocation) {
    error = collector.hasError() ? collector.format()
                                 : DiagnosticEngine::formatMessage(
                                       diag::err_clang_jit_setup,
                                       {"the driver made no compile job"});
    return nullptr;
  }

  clang::CompilerInstance compiler;
  compiler.setInvocation(std::move(invocation));
  compiler.createDiagnostics(&collector, /*ShouldOwnClient=*/false);
  compiler.createFileManager(fs);
  clang::EmitLLVMOnlyAction action(&context);
  bool ok = compiler.ExecuteAction(action);
  std::unique_ptr<llvm::Module> module = ok ? action.takeModule() : nullptr;
  if (!module || collector.hasError()) {
    error = collector.hasError()
                ? (userCode ? collector.formatUserError() : collector.format())
                : DiagnosticEngine::formatMessage(diag::err_clang_jit_setup,
                                                  {"Clang made no module"});
    return nullptr;
  }
  return module;
}

bool clangjit::emitJITSource(const ir::Module &module, std::string &source,
                             std::string &error) {
  emit::EmitOptions options;
  options.moduleName = emit::jitModuleName;
  options.sourceName = sourceFileName;
  source.clear();
  llvm::raw_string_ostream os(source);
  std::string emitError;
  if (!emit::emitCpp(module, options, os, emitError)) {
    error = DiagnosticEngine::formatMessage(diag::err_clang_jit_cannot_emit,
                                            {emitError});
    return false;
  }
  os << "\n// Trampolines for emit::JITModule (lib/ClangJIT): every "
        "function\n// called through one signature.\n";
  for (const auto &fn : module.getFunctions())
    if (emit::isExported(*fn))
      writeTrampoline(module, *fn, os);
  if (!injectedSource().empty())
    os << "\n" << injectedSource() << "\n";
  return true;
}

std::unique_ptr<emit::JITModule>
clangjit::compileModule(const ir::Module &module, std::string &error) {
  std::string source;
  if (!emitJITSource(module, source, error))
    return nullptr;
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> llvmModule =
      compileCpp(source, *context, error);
  if (!llvmModule)
    return nullptr;
  std::unique_ptr<emit::JITModule> jit = emit::JITModule::createFromLLVMModule(
      module, std::move(llvmModule), std::move(context), 2, error);
  if (!jit)
    error = DiagnosticEngine::formatMessage(diag::err_clang_jit_load, {error});
  return jit;
}

bool clangjit::runWithClangJIT(const ir::Module &module, llvm::StringRef fnName,
                               llvm::ArrayRef<ir::Tensor> args,
                               std::vector<ir::Tensor> &results,
                               std::string &error) {
  emit::JITModule *jit = emit::getCachedJITModule(
      module, "cpp",
      [&](std::string &compileError) {
        return compileModule(module, compileError);
      },
      error);
  return jit && jit->call(fnName, args, results, error);
}
