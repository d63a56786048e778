//===- Layout.cpp - Gradients of stack, concat, slice, take and inverses --===//
//
// These ops only move elements, so each one's gradient is its inverse
// (its transpose, for slice and take) applied to the cotangents: stack <->
// unstack, concat <-> split, slice <-> pad, take <-> scatter_add. A list
// operand is several IR operands, and a list result several IR results;
// a result that no gradient reached contributes zeros of its type.
//
//===----------------------------------------------------------------------===//

#include "GradContext.h"

#include "gradc/AD/GradRegistry.h"

using namespace gradc;
using namespace gradc::ad;
using ir::Value;

namespace {

AttrList axisAttr(int64_t axis) {
  AttrList attrs;
  attrs.set("axis", axis);
  return attrs;
}

bool anyOperandActive(GradContext &ctx, const ir::Op &op) {
  for (Value *v : op.getOperands())
    if (ctx.isActive(v))
      return true;
  return false;
}

/// The cotangent of every result, zeros where none reached it.
llvm::SmallVector<Value *, 4> resultAdjoints(GradContext &ctx,
                                             const ir::Op &op) {
  llvm::SmallVector<Value *, 4> adjoints;
  for (Value *r : op.getResults())
    adjoints.push_back(ctx.adjointOrZeros(r));
  return adjoints;
}

// y = stack([x_0, ..., x_n-1], axis):   [dx_0, ..., dx_n-1] += unstack(dy,
// axis)
void stackGrad(GradContext &ctx, const ir::Op &op) {
  if (!anyOperandActive(ctx, op))
    return;
  int64_t axis = op.getAttrs().getInt("axis");
  auto parts = ctx.builder().create(
      OpKind::Unstack, {ctx.adjointOf(op.getResult())}, axisAttr(axis));
  for (unsigned i = 0; i < op.getNumOperands(); ++i)
    ctx.accumulate(op.getOperand(i), parts[i]);
}

// [y_0, ..., y_n-1] = unstack(x, axis):   dx += stack([dy_0, ..., dy_n-1],
// axis)
void unstackGrad(GradContext &ctx, const ir::Op &op) {
  int64_t axis = op.getAttrs().getInt("axis");
  ctx.accumulate(op.getOperand(0),
                 ctx.builder().create1(OpKind::Stack, resultAdjoints(ctx, op),
                                       axisAttr(axis)));
}

// y = concat([x_0, ..., x_n-1], axis):
//   [dx_0, ..., dx_n-1] += split(dy, axis, sizes = [size of x_i along axis])
void concatGrad(GradContext &ctx, const ir::Op &op) {
  if (!anyOperandActive(ctx, op))
    return;
  int64_t axis = op.getAttrs().getInt("axis");
  Shape sizes;
  for (Value *x : op.getOperands())
    sizes.push_back(x->getType().shape[axis]);
  AttrList attrs = axisAttr(axis);
  attrs.set("sizes", sizes);
  auto parts = ctx.builder().create(
      OpKind::Split, {ctx.adjointOf(op.getResult())}, std::move(attrs));
  for (unsigned i = 0; i < op.getNumOperands(); ++i)
    ctx.accumulate(op.getOperand(i), parts[i]);
}

// [y_0, ..., y_n-1] = split(x, axis, sizes):
//   dx += concat([dy_0, ..., dy_n-1], axis)
void splitGrad(GradContext &ctx, const ir::Op &op) {
  int64_t axis = op.getAttrs().getInt("axis");
  ctx.accumulate(op.getOperand(0),
                 ctx.builder().create1(OpKind::Concat, resultAdjoints(ctx, op),
                                       axisAttr(axis)));
}

/// The axis, start and size attributes of a slice or a pad, with `size`
/// replaced.
AttrList sliceAttrs(const ir::Op &op, const Dim &size) {
  AttrList attrs = axisAttr(op.getAttrs().getInt("axis"));
  attrs.set("start", op.getAttrs().getInt("start"));
  attrs.set("size", Shape{size});
  return attrs;
}

// y = slice(x, axis, start, size) (y[p, i, q] = x[p, start + i, q]):
//   dx += pad(dy, axis, start, size = x's size along axis)
// the elements outside the slice do not reach y: their cotangent is 0.
void sliceGrad(GradContext &ctx, const ir::Op &op) {
  Value *x = op.getOperand(0);
  int64_t axis = op.getAttrs().getInt("axis");
  ctx.accumulate(
      x, ctx.builder().create1(OpKind::Pad, {ctx.adjointOf(op.getResult())},
                               sliceAttrs(op, x->getType().shape[axis])));
}

// z = pad(x, axis, start, size) (z[p, start + i, q] = x[p, i, q], 0
// elsewhere):   dx += slice(dz, axis, start, size = x's size along axis)
void padGrad(GradContext &ctx, const ir::Op &op) {
  Value *x = op.getOperand(0);
  int64_t axis = op.getAttrs().getInt("axis");
  ctx.accumulate(
      x, ctx.builder().create1(OpKind::Slice, {ctx.adjointOf(op.getResult())},
                               sliceAttrs(op, x->getType().shape[axis])));
}

// y = take(table, idx, axis) (y[p, i, q] = table[p, idx[i], q]):
//   dtable += scatter_add(dy, idx, axis, size = table's size along axis)
// a repeated index receives the sum of its cotangents.
void takeGrad(GradContext &ctx, const ir::Op &op) {
  Value *table = op.getOperand(0);
  if (!ctx.isActive(table))
    return;
  int64_t axis = op.getAttrs().getInt("axis");
  AttrList attrs = axisAttr(axis);
  attrs.set("size", Shape{table->getType().shape[axis]});
  ctx.accumulate(table, ctx.builder().create1(
                            OpKind::ScatterAdd,
                            {ctx.adjointOf(op.getResult()), op.getOperand(1)},
                            std::move(attrs)));
}

// z = scatter_add(src, idx, axis, size) (z[p, idx[i], q] += src[p, i, q]):
//   dsrc += take(dz, idx, axis)
void scatterAddGrad(GradContext &ctx, const ir::Op &op) {
  int64_t axis = op.getAttrs().getInt("axis");
  ctx.accumulate(
      op.getOperand(0),
      ctx.builder().create1(OpKind::Take,
                            {ctx.adjointOf(op.getResult()), op.getOperand(1)},
                            axisAttr(axis)));
}

} // namespace

void gradc::ad::registerLayoutGrads(GradRegistry &registry) {
  registry.add(OpKind::Take, takeGrad);
  registry.add(OpKind::ScatterAdd, scatterAddGrad);
  registry.add(OpKind::Stack, stackGrad);
  registry.add(OpKind::Unstack, unstackGrad);
  registry.add(OpKind::Concat, concatGrad);
  registry.add(OpKind::Split, splitGrad);
  registry.add(OpKind::Slice, sliceGrad);
  registry.add(OpKind::Pad, padGrad);
}
