//===- IRParser.cpp - STUB: to be written ---------------------------------===//
#include "gradc/IR/IRParser.h"
using namespace gradc;
std::unique_ptr<ir::Module> ir::parseIR(const SourceManager &, SourceLoc, DiagnosticEngine &) { return nullptr; }
