//===- Linalg.cpp - Gradients of matmul and the shape-changing ops --------===//
//
// matmul follows NumPy: batch dimensions broadcast (accumulate sums a
// broadcast batch back), and a vector operand is a matrix with a unit axis
// that the result drops. The vector cases are handled by putting that unit
// axis back, applying the matrix rule and dropping it again, so that the
// gradient is itself made of matmul, reshape and transpose and can be
// differentiated again.
//
//===----------------------------------------------------------------------===//

#include "GradContext.h"

#include "gradc/AD/GradRegistry.h"

using namespace gradc;
using namespace gradc::ad;
using ir::Value;

namespace {

/// `shape` with a unit axis inserted before position `pos` from the end
/// (pos = 0: appended; pos = 1: before the last axis).
Shape withUnitAxis(llvm::ArrayRef<Dim> shape, size_t pos) {
  Shape s(shape.begin(), shape.end());
  s.insert(s.end() - pos, Dim::known(1));
  return s;
}

/// `shape` without the axis at position `pos` from the end (pos = 1: the
/// last axis; pos = 2: the one before it).
Shape withoutAxis(llvm::ArrayRef<Dim> shape, size_t pos) {
  Shape s(shape.begin(), shape.end());
  s.erase(s.end() - pos);
  return s;
}

// z = matmul(x, y), both at least matrices, batches broadcast:
//   dx += dz · yᵀ     dy += xᵀ · dz          (ᵀ swaps the last two axes)
// A vector x is the matrix [1, k] (z lost that row axis); a vector y is the
// matrix [k, 1] (z lost that column axis). Both vectors: z = x · y, a
// scalar, and dx += dz * y, dy += dz * x.
void matmulGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getOperand(1);
  Value *dz = ctx.adjointOf(op.getResult());
  bool xVector = x->getType().getRank() == 1;
  bool yVector = y->getType().getRank() == 1;
  if (xVector && yVector) {
    if (ctx.isActive(x))
      ctx.accumulate(x, b.mul(dz, y));
    if (ctx.isActive(y))
      ctx.accumulate(y, b.mul(dz, x));
    return;
  }
  // Give dz, and each vector that a product needs, back its unit axis.
  Value *dzm = dz;
  if (xVector)
    dzm = b.reshape(dzm, withUnitAxis(dzm->getType().shape, 1));
  if (yVector)
    dzm = b.reshape(dzm, withUnitAxis(dzm->getType().shape, 0));
  if (ctx.isActive(x)) {
    Value *ym = yVector ? b.reshape(y, withUnitAxis(y->getType().shape, 0)) : y;
    Value *dx = b.matmul(dzm, b.transposeLastTwo(ym));
    if (xVector)
      dx = b.reshape(dx, withoutAxis(dx->getType().shape, 2));
    ctx.accumulate(x, dx);
  }
  if (ctx.isActive(y)) {
    Value *xm = xVector ? b.reshape(x, withUnitAxis(x->getType().shape, 1)) : x;
    Value *dy = b.matmul(b.transposeLastTwo(xm), dzm);
    if (yVector)
      dy = b.reshape(dy, withoutAxis(dy->getType().shape, 1));
    ctx.accumulate(y, dy);
  }
}

// y = transpose(x, perm), y's axis i is x's axis perm[i]:
//   dx += transpose(dy, inverse(perm)), inverse[perm[i]] = i
void transposeGrad(GradContext &ctx, const ir::Op &op) {
  const std::vector<int64_t> &perm = op.getAttrs().getInts("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  ctx.accumulate(op.getOperand(0), ctx.builder().transpose(
                                       ctx.adjointOf(op.getResult()), inverse));
}

// y = reshape(x, shape):   dx += reshape(dy, shape(x))
void reshapeGrad(GradContext &ctx, const ir::Op &op) {
  Value *x = op.getOperand(0);
  ctx.accumulate(x, ctx.builder().reshape(ctx.adjointOf(op.getResult()),
                                          x->getType().shape));
}

// y = broadcast_to(x, shape):   dx += sum of dy over the broadcast axes
// That sum is exactly what accumulate() does for every broadcasting op.
void broadcastToGrad(GradContext &ctx, const ir::Op &op) {
  ctx.accumulate(op.getOperand(0), ctx.adjointOf(op.getResult()));
}

} // namespace

void gradc::ad::registerLinalgGrads(GradRegistry &registry) {
  registry.add(OpKind::MatMul, matmulGrad);
  registry.add(OpKind::Transpose, transposeGrad);
  registry.add(OpKind::Reshape, reshapeGrad);
  registry.add(OpKind::BroadcastTo, broadcastToGrad);
}
