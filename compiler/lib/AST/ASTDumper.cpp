//===- ASTDumper.cpp - STUB: to be written ---------------------------------===//
#include "gradc/AST/ASTDumper.h"
using namespace gradc;
void ast::dumpModule(const Module &, const SourceManager &, llvm::raw_ostream &) {}
