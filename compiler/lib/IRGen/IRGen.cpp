//===- IRGen.cpp - STUB: to be written ---------------------------------===//
#include "gradc/IRGen/IRGen.h"
using namespace gradc;
std::unique_ptr<ir::Module> gradc::lowerModule(const ast::Module &, const SourceManager &) { return std::make_unique<ir::Module>(); }
