//===- Reduce.cpp - Gradients of reductions and normalisations ------------===//
//
// A reduction over `axes` maps x: S -> R. Its cotangent dy has shape R; the
// rules first give dy back the reduced axes as size 1 (the `keepdims`
// shape K) so that it broadcasts against x. Reductions take their `axis`
// attribute normalised by the op table: a sorted list of non-negative axes.
//
//===----------------------------------------------------------------------===//

#include "GradContext.h"

#include "gradc/AD/GradRegistry.h"

#include "llvm/ADT/STLExtras.h"

using namespace gradc;
using namespace gradc::ad;
using ir::Value;

namespace {

const std::vector<int64_t> &reducedAxes(const ir::Op &op) {
  return op.getAttrs().getInts("axis");
}

/// The shape of the operand with every reduced axis kept as size 1.
Shape keptShape(const ir::Op &op) {
  Shape kept = op.getOperand(0)->getType().shape;
  for (int64_t axis : reducedAxes(op))
    kept[axis] = Dim::known(1);
  return kept;
}

/// `v` (shaped like the op's result) in a shape that broadcasts against the
/// operand: reshaped to the keepdims shape K, unless the reduced axes are
/// the leading ones, where NumPy's right-aligned broadcasting already fits.
Value *withKeptAxes(GradContext &ctx, const ir::Op &op, Value *v) {
  Shape kept = keptShape(op);
  if (v->getType().shape == kept)
    return v;
  const std::vector<int64_t> &axes = reducedAxes(op);
  bool leadingOnly = true;
  for (size_t i = 0; i < axes.size(); ++i)
    leadingOnly &= axes[i] == int64_t(i);
  if (leadingOnly && !op.getAttrs().getBool("keepdims"))
    return v;
  return ctx.builder().reshape(v, kept);
}

// y = sum(x, axes):   dx += broadcast_to(reshape(dy, K), shape(x))
void sumGrad(GradContext &ctx, const ir::Op &op) {
  Value *x = op.getOperand(0);
  Value *dy = withKeptAxes(ctx, op, ctx.adjointOf(op.getResult()));
  ctx.accumulate(x, ctx.builder().broadcastTo(dy, x->getType().shape));
}

// y = mean(x, axes) = sum(x, axes) / n, n = number of elements reduced:
//   dx += broadcast_to(reshape(dy, K), shape(x)) / n
// n is a constant when the reduced sizes are known; with a size name it is
// computed as sum(ones_like(x), axes, keepdims).
void meanGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *dy = withKeptAxes(ctx, op, ctx.adjointOf(op.getResult()));
  Value *spread = b.broadcastTo(dy, x->getType().shape);
  int64_t count = 1;
  bool known = true;
  for (int64_t axis : reducedAxes(op)) {
    const Dim &d = x->getType().shape[axis];
    known &= d.isKnown();
    count *= d.isKnown() ? d.getSize() : 1;
  }
  Value *n = known ? ctx.scalarLike(x, double(count))
                   : b.sum(b.onesLike(x), reducedAxes(op), /*keepdims=*/true);
  ctx.accumulate(x, b.div(spread, n));
}

// y = max(x, axes):   dx += m * reshape(dy, K) / sum(m, axes, keepdims)
//   where m = (x == reshape(y, K)) as 1 or 0.
// The cotangent is divided equally among the elements that tie for the
// maximum, so that it is a valid subgradient and sums to dy.
void maxGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getResult();
  Value *atMax = b.binary(OpKind::Equal, x, withKeptAxes(ctx, op, y));
  Value *one = ctx.scalarLike(x, 1.0);
  Value *zero = ctx.scalarLike(x, 0.0);
  Value *mask = b.select(atMax, one, zero);
  Value *ties = b.sum(mask, reducedAxes(op), /*keepdims=*/true);
  Value *dy = withKeptAxes(ctx, op, ctx.adjointOf(y));
  ctx.accumulate(x, b.div(b.mul(mask, dy), ties));
}

// y = logsumexp(x, axes) = ln sum(e^x):
//   dx += reshape(dy, K) * (e^(x - m) * (1 / sum(e^(x - m))))  (the softmax)
// with m = stop_gradient(max(x, axes, keepdims)). The softmax does not
// depend on m, so stopping its gradient is exact; shifting by m instead of
// y keeps the exponent exact where y is large and rounded (at x = [1000,
// 1000] in f32, e^(x - y) gives 0.4999855, the shifted form 0.5). The sum
// is inverted once per row and multiplies each element, as `div`'s rule
// does for a broadcast divisor (one more rounding: an element may differ
// from e / sum in its last bit): with the row in L1 (the `inplace` loop
// pass), a division per element bound K3's scaling pass.
void logSumExpGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getResult();
  AttrList maxAttrs;
  maxAttrs.set("axis", reducedAxes(op));
  maxAttrs.set("keepdims", true);
  Value *m = b.unary(OpKind::StopGradient,
                     b.create1(OpKind::Max, {x}, std::move(maxAttrs)));
  Value *e = b.unary(OpKind::Exp, b.sub(x, m));
  Value *total = b.sum(e, reducedAxes(op), /*keepdims=*/true);
  Value *softmax = b.mul(e, b.div(ctx.scalarLike(total, 1), total));
  Value *dy = withKeptAxes(ctx, op, ctx.adjointOf(y));
  ctx.accumulate(x, b.mul(dy, softmax));
}

/// The one axis of softmax / log_softmax, as a reduction's axis list.
std::vector<int64_t> softmaxAxis(const ir::Op &op) {
  return {op.getAttrs().getInt("axis")};
}

// y = softmax(x, axis):   dx += y * (dy - sum(dy * y, axis, keepdims))
void softmaxGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *y = op.getResult();
  Value *dy = ctx.adjointOf(y);
  Value *dot = b.sum(b.mul(dy, y), softmaxAxis(op), /*keepdims=*/true);
  ctx.accumulate(op.getOperand(0), b.mul(y, b.sub(dy, dot)));
}

// y = log_softmax(x, axis) = x - logsumexp(x, axis):
//   dx += dy - e^y * sum(dy, axis, keepdims)           (e^y = softmax(x))
void logSoftmaxGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *y = op.getResult();
  Value *dy = ctx.adjointOf(y);
  Value *total = b.sum(dy, softmaxAxis(op), /*keepdims=*/true);
  Value *softmax = b.unary(OpKind::Exp, y);
  ctx.accumulate(op.getOperand(0), b.sub(dy, b.mul(softmax, total)));
}

} // namespace

void gradc::ad::registerReduceGrads(GradRegistry &registry) {
  registry.add(OpKind::Sum, sumGrad);
  registry.add(OpKind::Mean, meanGrad);
  registry.add(OpKind::Max, maxGrad);
  registry.add(OpKind::LogSumExp, logSumExpGrad);
  registry.add(OpKind::Softmax, softmaxGrad);
  registry.add(OpKind::LogSoftmax, logSoftmaxGrad);
}
