//===- Verifier.cpp - STUB: to be written ---------------------------------===//
#include "gradc/IR/Verifier.h"
using namespace gradc;
bool ir::verifyModule(const Module &, DiagnosticEngine &, llvm::StringRef) { return true; }
