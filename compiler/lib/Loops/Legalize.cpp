//===- Legalize.cpp - Elementwise ops as primitives -----------------------===//
//
// The one place where an elementwise op of Ops.def becomes a scalar
// expression over the loop IR's primitives (PrimOp) and intrinsics. It
// keeps no list of ops: the op table gives each elementwise op its scalar
// expansion (OpInfo::expand, written in lib/Ops/OpTable.cpp with the
// semantics of docs/IR.md and its one NaN policy), and this file
// translates that tree into loop IR, putting the loaded operand
// expressions where the expansion reads an operand. The interpreter
// evaluates the same tree, so the two cannot drift apart.
//
// Single primitives and intrinsics compute in their own type (f32
// `+ - * /` and sqrt are then exactly the interpreter's, and an intrinsic
// is defined as the exact value rounded to its type).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

ExprPtr translate(const ScalarNode &n, const std::vector<ExprPtr> &operands) {
  auto arg = [&](unsigned i) { return translate(*n.args[i], operands); };
  switch (n.kind) {
  case ScalarNode::Kind::Operand:
    return operands[n.operand]->clone();
  case ScalarNode::Kind::Const:
    return constant(n.type, n.value);
  case ScalarNode::Kind::Prim:
    return prim(n.op, arg(0), n.args.size() > 1 ? arg(1) : nullptr);
  case ScalarNode::Kind::Intrinsic:
    return intrinsic(n.fn, arg(0), n.args.size() > 1 ? arg(1) : nullptr);
  case ScalarNode::Kind::Select:
    return select(arg(0), arg(1), arg(2));
  case ScalarNode::Kind::Cast:
    return cast(n.type, arg(0));
  }
  return nullptr;
}

} // namespace

ExprPtr loops::legalizeScalar(OpKind kind, std::vector<ExprPtr> ops,
                              DType operandType, DType) {
  const OpInfo &info = getOpInfo(kind);
  if (!info.expand)
    return nullptr;
  return translate(*info.expand(fromDType(operandType)), ops);
}
