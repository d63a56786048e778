//===- Sema.cpp - STUB: to be written ---------------------------------===//
#include "gradc/Sema/Sema.h"
using namespace gradc;
bool gradc::checkModule(ast::Module &, DiagnosticEngine &) { return true; }
