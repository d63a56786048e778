//===- Externs.cpp - Loading the user's extern functions ------------------===//
//
// `gradc run` and `gradc check` call extern functions from every run
// backend. loadExterns, once per process and before anything runs:
//
//   1. loads each `--load` library (llvm::sys::DynamicLibrary, globally,
//      so that the JIT's process symbols see it);
//   2. compiles, with the in-process Clang of the cpp backend, the `.cpp`
//      (or `.cc`, `.c`) beside each header that has one, with the -I/-D of
//      the header check;
//   3. compiles one trampoline per extern, the twin of those the cpp and
//      llvm backends write for their own functions: it includes the
//      header and unpacks (sizes, inputs, outputs) arrays into a call;
//   4. puts all of it into one LLJIT that lives as long as the process,
//      and registers each function's address and trampoline with
//      ir::registerLoadedExtern: the interpreter calls the trampoline,
//      and the LLVM and cpp backends' JITs resolve the symbol to it.
//
//===----------------------------------------------------------------------===//

#include "gradc/ClangJIT/Externs.h"

#include "gradc/ClangJIT/ClangJIT.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

using namespace gradc;
using namespace gradc::clangjit;

namespace {

/// The trampoline of an extern function, by which the interpreter calls it.
std::string trampolineName(llvm::StringRef name) {
  return ("__gradc_extern_" + name).str();
}

/// `extern "C" int32_t __gradc_extern_f(const int64_t *sizes, void **args,
/// void **outs)`: calls `f` with the arrays unpacked, as docs/Extern.md's
/// ABI orders them.
void writeTrampoline(const ir::ExternDecl &decl, llvm::raw_ostream &os) {
  std::vector<std::string> args;
  for (size_t i = 0; i < decl.getSizeNames().size(); ++i)
    args.push_back("sizes[" + std::to_string(i) + "]");
  for (size_t i = 0; i < decl.paramTypes.size(); ++i) {
    std::string type = emit::cTypeName(decl.paramTypes[i].dtype).str();
    std::string slot = "args[" + std::to_string(i) + "]";
    args.push_back(decl.paramTypes[i].isScalar()
                       ? "*static_cast<const " + type + " *>(" + slot + ")"
                       : "static_cast<const " + type + " *>(" + slot + ")");
  }
  for (size_t i = 0; i < decl.resultTypes.size(); ++i)
    args.push_back("static_cast<" +
                   emit::cTypeName(decl.resultTypes[i].dtype).str() +
                   " *>(outs[" + std::to_string(i) + "])");
  std::string call = decl.name + "(" + llvm::join(args, ", ") + ")";
  os << "extern \"C\" int32_t " << trampolineName(decl.name)
     << "(const int64_t *sizes, void **args, void **outs) {\n"
     << "  (void)sizes;\n  (void)args;\n  (void)outs;\n";
  if (decl.returnsStatus)
    os << "  return " << call << ";\n}\n";
  else
    os << "  " << call << ";\n  return 0;\n}\n";
}

/// Finds `header` as the header check does: beside the .grad file, then
/// in each -I directory. "" when it is nowhere.
std::string findHeader(const ExternOptions &options, llvm::StringRef header) {
  std::vector<std::string> dirs;
  dirs.push_back(options.baseDir.empty() ? "." : options.baseDir);
  dirs.insert(dirs.end(), options.includeDirs.begin(),
              options.includeDirs.end());
  for (const std::string &dir : dirs) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, header);
    if (llvm::sys::fs::exists(path))
      return path.str().str();
  }
  return "";
}

/// The source beside a header with the same stem, or "".
std::string findSource(llvm::StringRef headerPath) {
  for (const char *ext : {".cpp", ".cc", ".cxx", ".c"}) {
    llvm::SmallString<256> path(headerPath);
    llvm::sys::path::replace_extension(path, ext);
    if (llvm::sys::fs::exists(path))
      return path.str().str();
  }
  return "";
}

/// The JIT that holds the user's code for the rest of the process.
std::unique_ptr<llvm::orc::LLJIT> &externJIT() {
  static std::unique_ptr<llvm::orc::LLJIT> jit;
  return jit;
}

} // namespace

bool clangjit::loadExterns(const ir::Module &module,
                           const ExternOptions &options, std::string &error) {
  if (module.externs.empty())
    return true;
  // Every extern already loaded: nothing to do (gradc check and run load
  // once; the unit tests may call twice).
  if (llvm::all_of(module.externs, [](const ir::ExternDecl &e) {
        return ir::lookupLoadedExtern(e.name) != nullptr;
      }))
    return true;

  // 1. Libraries.
  for (const std::string &lib : options.libraries) {
    std::string why;
    if (llvm::sys::DynamicLibrary::LoadLibraryPermanently(lib.c_str(), &why)) {
      error = "cannot load '" + lib + "': " + why;
      return false;
    }
  }

  // 2. The sources beside the headers, and 3. the trampolines.
  std::vector<std::string> headers, sources;
  std::string trampolines;
  llvm::raw_string_ostream tos(trampolines);
  tos << "// The trampolines of gradc's extern functions (lib/ClangJIT).\n"
      << "#include <stdint.h>\n";
  for (const ir::ExternDecl &decl : module.externs) {
    if (llvm::is_contained(headers, decl.header))
      continue;
    headers.push_back(decl.header);
    tos << "#include \"" << decl.header << "\"\n";
    std::string headerPath = findHeader(options, decl.header);
    std::string source = headerPath.empty() ? "" : findSource(headerPath);
    if (!source.empty() && !llvm::is_contained(sources, source))
      sources.push_back(source);
  }
  for (const ir::ExternDecl &decl : module.externs)
    writeTrampoline(decl, tos);

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) {
    error = llvm::toString(jit.takeError());
    return false;
  }
  // The externs that a --load library defines: the JIT links them (and
  // the trampolines' calls) to the library's code.
  llvm::orc::SymbolMap fromLibraries;
  for (const ir::ExternDecl &decl : module.externs)
    if (void *address = llvm::sys::DynamicLibrary::SearchForAddressOfSymbol(
            decl.name.c_str()))
      fromLibraries[(*jit)->mangleAndIntern(decl.name)] = {
          llvm::orc::ExecutorAddr::fromPtr(address),
          llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (!fromLibraries.empty())
    if (llvm::Error e = (*jit)->getMainJITDylib().define(
            llvm::orc::absoluteSymbols(std::move(fromLibraries)))) {
      error = llvm::toString(std::move(e));
      return false;
    }
  auto addModule = [&](llvm::StringRef text, llvm::StringRef path) {
    std::vector<std::string> args;
    if (!getExternCompilerArgs(options, path, args, error))
      return false;
    auto context = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> m =
        compileUserCpp(text, path, args, *context, error);
    if (!m)
      return false;
    if (llvm::Error e = (*jit)->addIRModule(
            llvm::orc::ThreadSafeModule(std::move(m), std::move(context)))) {
      error = llvm::toString(std::move(e));
      return false;
    }
    return true;
  };
  for (const std::string &source : sources) {
    auto buffer = llvm::MemoryBuffer::getFile(source);
    if (!buffer) {
      error = "cannot read '" + source + "'";
      return false;
    }
    if (!addModule((*buffer)->getBuffer(), source))
      return false;
  }
  llvm::SmallString<256> trampolinePath(
      options.baseDir.empty() ? "." : options.baseDir);
  llvm::sys::path::append(trampolinePath, "gradc-extern-trampolines.cpp");
  if (!addModule(trampolines, trampolinePath))
    return false;

  // 4. Addresses.
  for (const ir::ExternDecl &decl : module.externs) {
    auto address = (*jit)->lookup(decl.name);
    if (!address) {
      llvm::consumeError(address.takeError());
      error = "extern function '" + decl.name +
              "' is defined nowhere: no source beside '" + decl.header +
              "' defines it (looked for the same name ending in .cpp, .cc, "
              ".cxx or .c), and no --load library does";
      return false;
    }
    auto trampoline = (*jit)->lookup(trampolineName(decl.name));
    if (!trampoline) {
      error = llvm::toString(trampoline.takeError());
      return false;
    }
    ir::LoadedExtern code;
    code.address = address->toPtr<void *>();
    code.trampoline = trampoline->toPtr<ir::ExternTrampoline>();
    ir::registerLoadedExtern(decl.name, code);
  }
  externJIT() = std::move(*jit);
  return true;
}
