//===- ASTClone.cpp - Deep copies of statements and expressions -----------===//
//
// One function per node kind. A copy keeps the source ranges of the
// original, so that a diagnostic found while checking a rule instance
// points into the rule's body as the user wrote it.
//
//===----------------------------------------------------------------------===//

#include "ASTClone.h"

#include "llvm/Support/ErrorHandling.h"

using namespace gradc;
using namespace gradc::ast;

namespace {

std::vector<ExprPtr> cloneAll(const std::vector<ExprPtr> &exprs) {
  std::vector<ExprPtr> out;
  out.reserve(exprs.size());
  for (const ExprPtr &e : exprs)
    out.push_back(sema::cloneExpr(e.get()));
  return out;
}

ExprPtr cloneCall(const CallExpr &call) {
  auto copy = std::make_unique<CallExpr>(call.getRange(), call.callee);
  copy->args = cloneAll(call.args);
  for (const KeywordArg &k : call.keywordArgs)
    copy->keywordArgs.push_back({k.name, sema::cloneExpr(k.value.get())});
  copy->op = call.op;
  copy->fn = call.fn;
  copy->callsGrad = call.callsGrad;
  copy->attrs = call.attrs;
  copy->rule = call.rule;
  return copy;
}

ExprPtr cloneNode(const Expr &e) {
  switch (e.getKind()) {
  case Expr::Kind::Number: {
    const auto &n = llvm::cast<NumberExpr>(e);
    return std::make_unique<NumberExpr>(n.getRange(), n.value, n.isInteger);
  }
  case Expr::Kind::Bool:
    return std::make_unique<BoolExpr>(e.getRange(),
                                      llvm::cast<BoolExpr>(e).value);
  case Expr::Kind::Name:
    return std::make_unique<NameExpr>(e.getRange(),
                                      llvm::cast<NameExpr>(e).name);
  case Expr::Kind::Unary: {
    const auto &u = llvm::cast<UnaryExpr>(e);
    auto copy = std::make_unique<UnaryExpr>(u.getRange(), u.opLoc,
                                            sema::cloneExpr(u.operand.get()));
    copy->rule = u.rule;
    return copy;
  }
  case Expr::Kind::Binary: {
    const auto &b = llvm::cast<BinaryExpr>(e);
    auto copy = std::make_unique<BinaryExpr>(b.getRange(), b.op, b.opLoc,
                                             sema::cloneExpr(b.lhs.get()),
                                             sema::cloneExpr(b.rhs.get()));
    copy->rule = b.rule;
    return copy;
  }
  case Expr::Kind::Call:
    return cloneCall(llvm::cast<CallExpr>(e));
  case Expr::Kind::List: {
    auto copy = std::make_unique<ListExpr>(e.getRange());
    copy->elements = cloneAll(llvm::cast<ListExpr>(e).elements);
    return copy;
  }
  case Expr::Kind::Tuple: {
    auto copy = std::make_unique<TupleExpr>(e.getRange());
    copy->elements = cloneAll(llvm::cast<TupleExpr>(e).elements);
    return copy;
  }
  case Expr::Kind::Index: {
    const auto &i = llvm::cast<IndexExpr>(e);
    auto copy = std::make_unique<IndexExpr>(
        i.getRange(), sema::cloneExpr(i.base.get()), i.index, i.indexRange);
    copy->indexExpr = sema::cloneExpr(i.indexExpr.get());
    copy->indexesTensor = i.indexesTensor;
    return copy;
  }
  case Expr::Kind::Slice: {
    const auto &sl = llvm::cast<SliceExpr>(e);
    auto copy = std::make_unique<SliceExpr>(sl.getRange(),
                                            sema::cloneExpr(sl.base.get()));
    copy->axes = sl.axes;
    copy->starts = sl.starts;
    copy->lengths = sl.lengths;
    return copy;
  }
  case Expr::Kind::For: {
    const auto &f = llvm::cast<ForExpr>(e);
    auto copy = std::make_unique<ForExpr>(f.getRange());
    copy->index = f.index;
    copy->start = f.start;
    copy->startRange = f.startRange;
    copy->end = f.end;
    copy->endRange = f.endRange;
    for (const LoopCarry &c : f.carries)
      copy->carries.push_back({c.name, sema::cloneExpr(c.init.get())});
    sema::cloneStmts(f.body, copy->body);
    copy->value = sema::cloneExpr(f.value.get());
    copy->trip = f.trip;
    copy->carryTypes = f.carryTypes;
    copy->outputTypes = f.outputTypes;
    copy->checkpoint = f.checkpoint;
    copy->checkpointSize = f.checkpointSize;
    copy->isWhile = f.isWhile;
    return copy;
  }
  case Expr::Kind::If: {
    const auto &i = llvm::cast<IfExpr>(e);
    auto copy = std::make_unique<IfExpr>(i.getRange());
    copy->cond = sema::cloneExpr(i.cond.get());
    sema::cloneStmts(i.thenBranch.body, copy->thenBranch.body);
    copy->thenBranch.value = sema::cloneExpr(i.thenBranch.value.get());
    sema::cloneStmts(i.elseBranch.body, copy->elseBranch.body);
    copy->elseBranch.value = sema::cloneExpr(i.elseBranch.value.get());
    copy->elseLoc = i.elseLoc;
    copy->whileBody = i.whileBody;
    return copy;
  }
  }
  llvm_unreachable("unknown expression kind");
}

} // namespace

ExprPtr sema::cloneExpr(const Expr *expr) {
  if (!expr)
    return nullptr;
  ExprPtr copy = cloneNode(*expr);
  copy->type = expr->type;
  return copy;
}

StmtPtr sema::cloneStmt(const Stmt &stmt) {
  if (const auto *ret = llvm::dyn_cast<ReturnStmt>(&stmt))
    return std::make_unique<ReturnStmt>(ret->getRange(),
                                        cloneExpr(ret->value.get()));
  const auto &let = llvm::cast<LetStmt>(stmt);
  auto copy = std::make_unique<LetStmt>(let.getRange());
  copy->annotations = let.annotations;
  copy->names = let.names;
  copy->destructures = let.destructures;
  copy->declaredType = let.declaredType;
  copy->value = cloneExpr(let.value.get());
  return copy;
}

void sema::cloneStmts(llvm::ArrayRef<StmtPtr> stmts,
                      std::vector<StmtPtr> &out) {
  for (const StmtPtr &s : stmts)
    if (s)
      out.push_back(cloneStmt(*s));
}
