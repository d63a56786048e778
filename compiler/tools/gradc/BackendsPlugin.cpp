//===- BackendsPlugin.cpp - libgradc-backends.so --------------------------===//
//
// The plugin that Backends.h describes: the LLVM backend, the JITs and
// Clang, behind one table that the driver looks up by name after dlopen.
// Built as a module of its own, linked with libLLVM and libclang-cpp; the
// gradc symbols it uses come from the executable.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"

#include "gradc/Basic/Timing.h"
#include "gradc/ClangJIT/ClangJIT.h"
#include "gradc/Emit/LLVMJIT.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

using namespace gradc;
using namespace gradc::driver;

namespace {

bool emitLLVM(const ir::Module &module, const emit::LLVMOptions &options,
              bool object, std::string &bytes, std::string &error,
              bool &targetError) {
  targetError = true;
  std::unique_ptr<llvm::TargetMachine> tm =
      emit::createTargetMachine(options, error);
  if (!tm)
    return false;
  targetError = false;
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> llvmModule =
      emit::buildLLVMModule(module, ctx, *tm, options, error);
  if (!llvmModule)
    return false;
  llvm::raw_string_ostream os(bytes);
  if (!object) {
    TimeRegion region("print LLVM IR");
    llvmModule->print(os, nullptr);
    return true;
  }
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream objectOS(buffer);
  if (!emit::writeObjectFile(*llvmModule, *tm, objectOS, error)) {
    targetError = true;
    return false;
  }
  bytes.assign(buffer.begin(), buffer.end());
  return true;
}

bool parseLLVMOptions(const std::vector<std::string> &args,
                      std::string &error) {
  std::vector<const char *> argv = {"gradc -mllvm"};
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  llvm::raw_string_ostream errs(error);
  return llvm::cl::ParseCommandLineOptions(int(argv.size()), argv.data(), "",
                                           &errs);
}

const BackendPlugin plugin = {
    backendPluginVersion,
    emitLLVM,
    emit::runWithLLVMJIT,
    clangjit::runWithClangJIT,
    emit::runWithLLVMJITLoops,
    clangjit::checkExternHeaders,
    clangjit::getExternCompilerArgs,
    clangjit::setGeneratedCodeArgs,
    clangjit::setInjectedSource,
    clangjit::loadExterns,
    parseLLVMOptions,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const BackendPlugin *
gradc_backend_plugin() {
  return &plugin;
}
