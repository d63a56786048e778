//===- LowerElementwise.cpp - Elementwise and broadcasting ops ------------===//
//
// z[i] = f(x[i'], y[i''], ...) over the result's shape, one loop per
// dimension; each operand is read through its broadcast index (a known-1
// axis reads index 0). The scalar f comes from Legalize.cpp (the op
// table's expansion). An i32 division (trait IntDivision) first checks
// its divisor (the interpreter's run-time error).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace gradc;
using namespace gradc::loops;

bool loops::lowerElementwise(Lowering &l, const ir::Op &op) {
  if (op.getNumResults() != 1 || op.getNumOperands() == 0)
    return l.fail("cannot lower '" + op.getName().str() + "' to loops");
  const TensorType &type = op.getResult()->getType();
  // The operand type that decides the arithmetic: the last operand's (for
  // select, the values'), as in the interpreter.
  DType operandType = op.getOperands().back()->getType().dtype;
  Buffer *out = l.resultBuffer(op);
  Nest n = l.openNest(l.top(), type.shape);
  std::vector<ExprPtr> operands;
  for (const ir::Value *v : op.getOperands())
    operands.push_back(l.read(v, n.idx));
  if (op.getInfo().has(IntDivision) && operandType == DType::I32)
    l.check(
        *n.body,
        prim(PrimOp::Ne, operands[1]->clone(), constant(ScalarType::I32, 0)),
        CheckStatus::DivZero, "integer division by zero");
  ExprPtr value = legalizeScalar(op.getKind(), std::move(operands), operandType,
                                 type.dtype);
  if (!value)
    return l.fail("cannot lower '" + op.getName().str() + "' to loops");
  l.store(*n.body, out, Lowering::flatIndex(type.shape, n.idx),
          std::move(value));
  return true;
}
