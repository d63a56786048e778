//===- AST.cpp - Syntax tree of a .grad file ------------------------------===//

#include "gradc/AST/AST.h"

#include "llvm/Support/ErrorHandling.h"

using namespace gradc;
using namespace gradc::ast;

Expr::~Expr() = default;
Stmt::~Stmt() = default;
Decl::~Decl() = default;

TensorType TypeExpr::toType() const {
  TensorType t(dtype);
  for (const DimExpr &d : dims)
    t.shape.push_back(d.dim);
  return t;
}

std::string ValueType::str() const {
  switch (kind) {
  case Unknown:
    return "<unknown>";
  case Tensor:
    return tensor.str();
  case List:
  case Tuple: {
    std::string s = kind == List ? "[" : "(";
    for (size_t i = 0; i < elements.size(); ++i)
      s += (i ? ", " : "") + elements[i].str();
    return s + (kind == List ? "]" : ")");
  }
  }
  llvm_unreachable("unknown value kind");
}

OpKind ast::getBinaryOpKind(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return OpKind::Add;
  case BinaryOp::Sub:
    return OpKind::Sub;
  case BinaryOp::Mul:
    return OpKind::Mul;
  case BinaryOp::Div:
    return OpKind::Div;
  case BinaryOp::MatMul:
    return OpKind::MatMul;
  case BinaryOp::Lt:
    return OpKind::Less;
  case BinaryOp::Le:
    return OpKind::LessEqual;
  case BinaryOp::Gt:
    return OpKind::Greater;
  case BinaryOp::Ge:
    return OpKind::GreaterEqual;
  case BinaryOp::Eq:
    return OpKind::Equal;
  case BinaryOp::Ne:
    return OpKind::NotEqual;
  }
  llvm_unreachable("unknown binary operator");
}

llvm::StringRef ast::getBinaryOpSpelling(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return "+";
  case BinaryOp::Sub:
    return "-";
  case BinaryOp::Mul:
    return "*";
  case BinaryOp::Div:
    return "/";
  case BinaryOp::MatMul:
    return "@";
  case BinaryOp::Lt:
    return "<";
  case BinaryOp::Le:
    return "<=";
  case BinaryOp::Gt:
    return ">";
  case BinaryOp::Ge:
    return ">=";
  case BinaryOp::Eq:
    return "==";
  case BinaryOp::Ne:
    return "!=";
  }
  llvm_unreachable("unknown binary operator");
}

const FnDecl *Module::findFn(llvm::StringRef name) const {
  for (const DeclPtr &d : decls)
    if (const auto *fn = llvm::dyn_cast<FnDecl>(d.get()))
      if (fn->name.name == name)
        return fn;
  return nullptr;
}

const RuleDecl *Module::findRule(llvm::StringRef name) const {
  for (const DeclPtr &d : decls)
    if (const auto *rule = llvm::dyn_cast<RuleDecl>(d.get()))
      if (rule->name.name == name)
        return rule;
  return nullptr;
}

ForExpr::~ForExpr() = default;
IfExpr::~IfExpr() = default;
