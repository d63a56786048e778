//===- GradContext.cpp - Adjoints and their accumulation ------------------===//
//
// accumulate() is the only code in gradc that undoes NumPy broadcasting in
// a gradient: an op whose operand `b: f32[3]` was broadcast against
// `a: f32[2, 3]` contributes a `[2, 3]` cotangent to `b`, which is summed
// over axis 0 here before it is added to `b`'s adjoint.
//
//===----------------------------------------------------------------------===//

#include "GradContext.h"

#include "gradc/Ops/OpTable.h"

#include <cassert>

using namespace gradc;
using namespace gradc::ad;

ir::Value *GradContext::adjointOrZeros(ir::Value *v) {
  if (ir::Value *adjoint = adjointOf(v))
    return adjoint;
  return b.zerosLike(v);
}

static bool isKnownOne(const Dim &d) { return d.isKnown() && d.getSize() == 1; }

// Broadcasting maps x: S -> B = broadcast(S, ...), copying x along the
// leading axes that B adds and the axes where S has size 1. Its transpose,
// which the adjoint needs, sums over exactly those axes:
//   dx = reshape(sum(dB, leading ∪ expanded axes), S).
ir::Value *GradContext::fitToType(ir::Value *c, const TensorType &type) {
  const Shape &target = type.shape;
  if (c->getType().shape == target)
    return c;
  std::optional<Shape> both = broadcastShapes(c->getType().shape, target);
  assert(both && "a contribution that does not broadcast with its value");
  // A contribution smaller than its value (a rule that relies on
  // broadcasting, such as a scalar cotangent) first grows to full size.
  if (*both != c->getType().shape)
    c = b.broadcastTo(c, *both);
  if (c->getType().shape == target)
    return c;

  const Shape &shape = c->getType().shape;
  size_t leading = shape.size() - target.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < shape.size(); ++i)
    if (i < leading ||
        (isKnownOne(target[i - leading]) && !isKnownOne(shape[i])))
      axes.push_back(i);
  ir::Value *summed = b.sum(c, axes, /*keepdims=*/false);
  if (summed->getType().shape != target)
    summed = b.reshape(summed, target);
  return summed;
}

void GradContext::accumulate(ir::Value *v, ir::Value *contribution) {
  if (!isActive(v))
    return;
  assert(contribution->getType().dtype == v->getType().dtype &&
         "a contribution of another element type");
  contribution = fitToType(contribution, v->getType());
  ir::Value *&adjoint = adjoints[v];
  adjoint = adjoint ? b.add(adjoint, contribution) : contribution;
}
