//===- Parser.cpp - STUB: to be written ---------------------------------===//
#include "gradc/Parse/Parser.h"
using namespace gradc;
std::unique_ptr<ast::Module> gradc::parseModule(const SourceManager &, SourceLoc s, DiagnosticEngine &) { auto m = std::make_unique<ast::Module>(); m->bufferStart = s; return m; }
