//===- ASTClone.h - Deep copies of statements and expressions ---*- C++ -*-===//
//
// Rule instantiation types a fresh copy of a rule's body at each use, and
// an inline `grad` block becomes an instance whose body is a copy of the
// function's `let` statements followed by the block. These helpers make
// those copies: every node, every source range, and whatever Sema already
// wrote into the nodes (types, resolved callees, attributes, rule choices),
// so that a copy of a checked statement is checked too.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_LIB_SEMA_ASTCLONE_H
#define GRADC_LIB_SEMA_ASTCLONE_H

#include "gradc/AST/AST.h"

namespace gradc::sema {

ast::ExprPtr cloneExpr(const ast::Expr *expr);
ast::StmtPtr cloneStmt(const ast::Stmt &stmt);
void cloneStmts(llvm::ArrayRef<ast::StmtPtr> stmts,
                std::vector<ast::StmtPtr> &out);

} // namespace gradc::sema

#endif // GRADC_LIB_SEMA_ASTCLONE_H
