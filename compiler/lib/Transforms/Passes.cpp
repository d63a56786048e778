//===- Passes.cpp - STUB: to be written ---------------------------------===//
#include "gradc/Transforms/Passes.h"
using namespace gradc;
llvm::ArrayRef<PassInfo> gradc::getAllPasses() { return {}; }
const PassInfo *gradc::lookupPass(llvm::StringRef) { return nullptr; }
bool gradc::runPasses(ir::Module &, llvm::StringRef, DiagnosticEngine &, bool) { return true; }
llvm::StringRef gradc::getDefaultPipeline() { return ""; }
