//===- ASTDumper.h - Printing the syntax tree -------------------*- C++ -*-===//
//
// `gradc --emit=ast`: an indented, stable dump of every node with its
// location (line:col) and, after Sema, its type.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_AST_ASTDUMPER_H
#define GRADC_AST_ASTDUMPER_H

#include "gradc/AST/AST.h"

#include "llvm/Support/raw_ostream.h"

namespace gradc::ast {

void dumpModule(const Module &module, const SourceManager &sm,
                llvm::raw_ostream &os);

} // namespace gradc::ast

#endif // GRADC_AST_ASTDUMPER_H
