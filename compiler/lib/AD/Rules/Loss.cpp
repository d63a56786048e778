//===- Loss.cpp - Gradient of softmax_cross_entropy -----------------------===//
//
// softmax_cross_entropy(logits: [..., C], labels: i32[...]) is one loss
// per row: logsumexp(logits) - logits[label]. Its labels are integer
// class indices and take no gradient; one_hot, which turns them into rows,
// is not differentiable at all (the op table says why).
//
//===----------------------------------------------------------------------===//

#include "GradContext.h"

#include "gradc/AD/GradRegistry.h"

using namespace gradc;
using namespace gradc::ad;
using ir::Value;

namespace {

/// one_hot(labels, C) in the element type of `like`. one_hot itself makes
/// f32 rows; for f64 logits the 1s are selected into f64 (the language has
/// no cast op).
Value *oneHotLike(GradContext &ctx, Value *labels, Value *like) {
  ir::Builder &b = ctx.builder();
  AttrList attrs;
  attrs.set("depth", Shape{like->getType().shape.back()});
  Value *rows = b.create1(OpKind::OneHot, {labels}, std::move(attrs));
  DType dtype = like->getType().dtype;
  if (dtype == DType::F32)
    return rows;
  Value *isOne = b.binary(OpKind::Equal, rows, b.scalar(DType::F32, 1.0));
  Value *one = b.scalar(dtype, 1.0);
  Value *zero = b.scalar(dtype, 0.0);
  return b.select(isOne, one, zero);
}

// loss = softmax_cross_entropy(logits, labels)
//      = logsumexp(logits, -1) - sum(logits * one_hot(labels, C), -1):
//   dlogits += reshape(dloss, [..., 1]) * (softmax(logits) - one_hot(labels))
// labels are integers: no gradient.
void softmaxCrossEntropyGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *logits = op.getOperand(0), *labels = op.getOperand(1);
  Value *dloss = ctx.adjointOf(op.getResult());
  Shape column = dloss->getType().shape;
  column.push_back(Dim::known(1));
  Value *dlossColumn = b.reshape(dloss, column);
  AttrList lastAxis;
  lastAxis.set("axis", int64_t(-1));
  Value *probs = b.create1(OpKind::Softmax, {logits}, std::move(lastAxis));
  Value *error = b.sub(probs, oneHotLike(ctx, labels, logits));
  ctx.accumulate(logits, b.mul(dlossColumn, error));
}

} // namespace

void gradc::ad::registerLossGrads(GradRegistry &registry) {
  registry.add(OpKind::SoftmaxCrossEntropy, softmaxCrossEntropyGrad);
}
