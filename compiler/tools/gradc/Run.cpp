//===- Run.cpp - STUB: to be written ---------------------------------===//
#include "Driver.h"
#include "llvm/Support/raw_ostream.h"
using namespace gradc;
int driver::runCommand(Compilation &, llvm::StringRef, llvm::StringRef) { llvm::errs() << "gradc: error: run not implemented\n"; return 1; }
