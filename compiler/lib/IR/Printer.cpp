//===- Printer.cpp - STUB: to be written ---------------------------------===//
#include "gradc/IR/Printer.h"
using namespace gradc;
void ir::printModule(const Module &, llvm::raw_ostream &, const PrintOptions &) {}
void ir::printFunction(const Function &, llvm::raw_ostream &, const PrintOptions &) {}
