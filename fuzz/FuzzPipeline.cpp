//===- FuzzPipeline.cpp - libFuzzer target for the whole pipeline ---------===//
//
// Feeds arbitrary bytes through everything `gradc FILE --emit=cpp` and
// `--emit=llvm` do: parse, check, lower to IR, differentiate, run the
// default pipeline (canonicalize) and the split pass, then emit the C++
// text and lower to an LLVM module. An error in the input is the expected
// outcome of most inputs and simply ends the run; what must never happen
// is a crash, an assertion, a memory error or UB (ASan and UBSan abort),
// or an internal error: IR that fails gradc's verifier after a phase that
// reported no error, or an LLVM module that fails LLVM's verifier. Those
// call abort() so that the fuzzer records the input.
//
//===----------------------------------------------------------------------===//

#include "gradc/AD/ReverseMode.h"
#include "gradc/Basic/Diagnostic.h"
#include "gradc/Emit/EmitCpp.h"
#include "gradc/Emit/EmitLLVM.h"
#include "gradc/IR/Verifier.h"
#include "gradc/IRGen/IRGen.h"
#include "gradc/Parse/Parser.h"
#include "gradc/Sema/Sema.h"
#include "gradc/Transforms/Passes.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace gradc;

namespace {

/// Drops every diagnostic; formatting them already happened in the engine.
class DropConsumer : public DiagnosticConsumer {
public:
  void handle(const Diagnostic &) override {}
};

[[noreturn]] void internalError(const char *phase, const std::string &why) {
  std::fprintf(stderr, "FuzzPipeline: internal error after %s: %s\n", phase,
               why.c_str());
  std::abort();
}

/// Verifies with gradc's verifier; a failure is a compiler bug.
void verifyOrAbort(const ir::Module &module, const SourceManager &sm,
                   const char *phase) {
  DropConsumer consumer;
  DiagnosticEngine diags(sm, consumer);
  if (!ir::verifyModule(module, diags, phase))
    internalError(phase, "the IR verifier failed");
}

llvm::TargetMachine &targetMachine() {
  static std::unique_ptr<llvm::TargetMachine> tm = [] {
    emit::LLVMOptions options;
    options.triple = "x86_64-unknown-linux-gnu";
    options.cpu = "generic";
    options.optLevel = 0;
    std::string error;
    std::unique_ptr<llvm::TargetMachine> made =
        emit::createTargetMachine(options, error);
    if (!made)
      internalError("setup", error);
    return made;
  }();
  return *tm;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  SourceManager sm;
  SourceLoc start = sm.addBuffer(
      "fuzz.grad", std::string(reinterpret_cast<const char *>(data), size));
  DropConsumer consumer;
  DiagnosticEngine diags(sm, consumer);

  std::unique_ptr<ast::Module> ast = parseModule(sm, start, diags);
  if (diags.hadError() || !checkModule(*ast, diags))
    return 0;
  std::unique_ptr<ir::Module> ir = lowerModule(*ast, sm);
  verifyOrAbort(*ir, sm, "irgen");
  if (!ad::differentiate(*ir, diags))
    return 0;
  verifyOrAbort(*ir, sm, "differentiate");
  // The passes may report errors in the input (a constant integer
  // division by zero); each one that succeeds must leave valid IR.
  for (const char *pass : {"canonicalize", "split"}) {
    if (!runPasses(*ir, pass, diags, /*verifyEach=*/false))
      return 0;
    verifyOrAbort(*ir, sm, pass);
  }

  emit::EmitOptions cppOptions;
  cppOptions.moduleName = "fuzz";
  cppOptions.sourceName = "fuzz.grad";
  cppOptions.sourceManager = &sm;
  llvm::raw_null_ostream null;
  std::string cppError;
  if (!emit::emitCpp(*ir, cppOptions, null, cppError))
    return 0;

  // lowerToLLVM runs LLVM's verifier; at -O0 no LLVM pass runs, which
  // keeps an execution fast enough to fuzz.
  emit::LLVMOptions llvmOptions;
  llvmOptions.moduleName = "fuzz";
  llvmOptions.optLevel = 0;
  llvmOptions.jitWrappers = true;
  llvm::LLVMContext ctx;
  std::string error;
  if (!emit::lowerToLLVM(*ir, ctx, targetMachine(), llvmOptions, error))
    internalError("lowerToLLVM", error);
  return 0;
}
