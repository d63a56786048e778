//===- Elementwise.cpp - Gradients of elementwise ops ---------------------===//
//
// Rules for the ops that act element by element, with NumPy broadcasting
// for the binary ones. Each rule states the derivative for one element;
// GradContext::accumulate sums a broadcast operand's contribution back to
// its shape. Where a derivative has a kink (relu, abs, maximum, minimum,
// clip) the convention is written above the rule and in docs/Gradients.md.
// Every rule is built from differentiable ops, so gradients can be
// differentiated again: relu uses `select` rather than a mask product that
// would need a cast, abs uses `sign` (whose own derivative is zero).
//
//===----------------------------------------------------------------------===//

#include "GradContext.h"

#include "gradc/AD/GradRegistry.h"

using namespace gradc;
using namespace gradc::ad;
using ir::Value;

namespace {

//===----------------------------------------------------------------------===//
// One operand: y = f(x), dx += dy * f'(x)
//===----------------------------------------------------------------------===//

// y = identity(x):   dx += dy
void identityGrad(GradContext &ctx, const ir::Op &op) {
  ctx.accumulate(op.getOperand(0), ctx.adjointOf(op.getResult()));
}

// y = -x:   dx += -dy
void negGrad(GradContext &ctx, const ir::Op &op) {
  ctx.accumulate(op.getOperand(0),
                 ctx.builder().neg(ctx.adjointOf(op.getResult())));
}

// y = e^x:   dx += dy * y          (reuses the forward result)
void expGrad(GradContext &ctx, const ir::Op &op) {
  Value *y = op.getResult();
  ctx.accumulate(op.getOperand(0), ctx.builder().mul(ctx.adjointOf(y), y));
}

// y = ln x:   dx += dy / x
void logGrad(GradContext &ctx, const ir::Op &op) {
  Value *x = op.getOperand(0);
  ctx.accumulate(x, ctx.builder().div(ctx.adjointOf(op.getResult()), x));
}

// y = sqrt(x):   dx += dy / (2 * y)     (y = sqrt(x), reused)
void sqrtGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *y = op.getResult();
  Value *twoY = b.mul(ctx.scalarLike(y, 2.0), y);
  ctx.accumulate(op.getOperand(0), b.div(ctx.adjointOf(y), twoY));
}

// y = |x|:   dx += dy * sign(x)      (0 at x = 0, the subgradient TF uses)
void absGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *sign = b.unary(OpKind::Sign, x);
  ctx.accumulate(x, b.mul(ctx.adjointOf(op.getResult()), sign));
}

// y = sin x:   dx += dy * cos x
void sinGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *cos = b.unary(OpKind::Cos, x);
  ctx.accumulate(x, b.mul(ctx.adjointOf(op.getResult()), cos));
}

// y = cos x:   dx += -(dy * sin x)
void cosGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *sin = b.unary(OpKind::Sin, x);
  ctx.accumulate(x, b.neg(b.mul(ctx.adjointOf(op.getResult()), sin)));
}

// y = atan x:   dx += dy / (1 + x^2)
void atanGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *slope = b.add(ctx.scalarLike(x, 1.0), b.unary(OpKind::Square, x));
  ctx.accumulate(x, b.div(ctx.adjointOf(op.getResult()), slope));
}

// y = tanh x:   dx += dy * (1 - y^2)
void tanhGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *y = op.getResult();
  // One op per statement, so that the order of the ops is fixed.
  Value *ySquared = b.unary(OpKind::Square, y);
  Value *slope = b.sub(ctx.scalarLike(y, 1.0), ySquared);
  ctx.accumulate(op.getOperand(0), b.mul(ctx.adjointOf(y), slope));
}

// y = sigmoid(x) = 1 / (1 + e^-x):   dx += dy * y * (1 - y)
void sigmoidGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *y = op.getResult();
  Value *dyY = b.mul(ctx.adjointOf(y), y);
  ctx.accumulate(op.getOperand(0),
                 b.mul(dyY, b.sub(ctx.scalarLike(y, 1.0), y)));
}

// y = relu(x) = max(x, 0):   dx += select(x > 0, dy, 0)
// At the kink x = 0 the derivative is taken as 0, as in TensorFlow.
void reluGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *zero = ctx.scalarLike(x, 0.0);
  Value *positive = b.binary(OpKind::Greater, x, zero);
  ctx.accumulate(x, b.select(positive, ctx.adjointOf(op.getResult()), zero));
}

// y = softplus(x) = ln(1 + e^x):   dx += dy * sigmoid(x)
void softplusGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *slope = b.unary(OpKind::Sigmoid, x);
  ctx.accumulate(x, b.mul(ctx.adjointOf(op.getResult()), slope));
}

// y = x^2:   dx += dy * (2 * x)
void squareGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0);
  Value *twoX = b.mul(ctx.scalarLike(x, 2.0), x);
  ctx.accumulate(x, b.mul(ctx.adjointOf(op.getResult()), twoX));
}

//===----------------------------------------------------------------------===//
// Two operands, broadcast: z = f(x, y)
//===----------------------------------------------------------------------===//

// z = x + y:   dx += dz    dy += dz
void addGrad(GradContext &ctx, const ir::Op &op) {
  Value *dz = ctx.adjointOf(op.getResult());
  ctx.accumulate(op.getOperand(0), dz);
  ctx.accumulate(op.getOperand(1), dz);
}

// z = x - y:   dx += dz    dy += -dz
void subGrad(GradContext &ctx, const ir::Op &op) {
  Value *dz = ctx.adjointOf(op.getResult());
  ctx.accumulate(op.getOperand(0), dz);
  if (ctx.isActive(op.getOperand(1)))
    ctx.accumulate(op.getOperand(1), ctx.builder().neg(dz));
}

// z = x * y:   dx += dz * y    dy += dz * x
void mulGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getOperand(1);
  Value *dz = ctx.adjointOf(op.getResult());
  if (ctx.isActive(x))
    ctx.accumulate(x, b.mul(dz, y));
  if (ctx.isActive(y))
    ctx.accumulate(y, b.mul(dz, x));
}

// z = x / y:   dx += dz / y    dy += -(dz * z) / y     (since -x/y^2 = -z/y)
//
// When y is broadcast against z (a row's norm, a sum), both divide by y
// once per element of y rather than once per element of z:
//   dx += dz * (1 / y)    dy += -sum(dz * z) / y
// where the sum runs over the axes y was broadcast along. Divisions are
// the slowest f32 arithmetic (layer norm's gradient was bound by them).
void divGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getOperand(1), *z = op.getResult();
  Value *dz = ctx.adjointOf(z);
  if (y->getType().shape != z->getType().shape) {
    if (ctx.isActive(x))
      ctx.accumulate(x, b.mul(dz, b.div(ctx.scalarLike(y, 1), y)));
    if (ctx.isActive(y))
      ctx.accumulate(
          y, b.neg(b.div(ctx.fitToType(b.mul(dz, z), y->getType()), y)));
    return;
  }
  if (ctx.isActive(x))
    ctx.accumulate(x, b.div(dz, y));
  if (ctx.isActive(y))
    ctx.accumulate(y, b.neg(b.div(b.mul(dz, z), y)));
}

// z = x^y:   dx += dz * y * x^(y - 1)
//            dy += dz * z * ln x     where x > 0, else 0
// ln x is real only for x > 0; elsewhere y's gradient is taken as 0 (the
// convention of TensorFlow's Pow gradient). The logarithm is applied to
// select(x > 0, x, 1), so that no NaN or infinity appears, not even in the
// branch that select discards or in a second derivative.
void powGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getOperand(1), *z = op.getResult();
  Value *dz = ctx.adjointOf(z);
  if (ctx.isActive(x)) {
    Value *yMinusOne = b.sub(y, ctx.scalarLike(y, 1.0));
    Value *slope = b.mul(y, b.binary(OpKind::Pow, x, yMinusOne));
    ctx.accumulate(x, b.mul(dz, slope));
  }
  if (ctx.isActive(y)) {
    Value *zero = ctx.scalarLike(x, 0.0);
    Value *positive = b.binary(OpKind::Greater, x, zero);
    Value *safeX = b.select(positive, x, ctx.scalarLike(x, 1.0));
    Value *logX = b.unary(OpKind::Log, safeX);
    Value *grad = b.mul(b.mul(dz, z), logX);
    ctx.accumulate(y, b.select(positive, grad, zero));
  }
}

/// The share of dz that maximum/minimum give each operand where the two
/// are equal: half of it, and 0 elsewhere.
Value *tieShare(GradContext &ctx, Value *x, Value *y, Value *dz) {
  ir::Builder &b = ctx.builder();
  Value *tie = b.binary(OpKind::Equal, x, y);
  Value *half = b.mul(dz, ctx.scalarLike(dz, 0.5));
  return b.select(tie, half, ctx.scalarLike(dz, 0.0));
}

// z = max(x, y):   dx += dz where x > y, dz/2 where x == y, else 0
//                  dy += dz where y > x, dz/2 where x == y, else 0
// At a tie the two operands share the cotangent equally (as the `max`
// reduction does among its tied elements), so dx + dy = dz everywhere.
void maximumGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getOperand(1);
  Value *dz = ctx.adjointOf(op.getResult());
  Value *tied = tieShare(ctx, x, y, dz);
  if (ctx.isActive(x))
    ctx.accumulate(x, b.select(b.binary(OpKind::Greater, x, y), dz, tied));
  if (ctx.isActive(y))
    ctx.accumulate(y, b.select(b.binary(OpKind::Less, x, y), dz, tied));
}

// z = min(x, y):   dx += dz where x < y, dz/2 where x == y, else 0
//                  dy += dz where y < x, dz/2 where x == y, else 0
void minimumGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *y = op.getOperand(1);
  Value *dz = ctx.adjointOf(op.getResult());
  Value *tied = tieShare(ctx, x, y, dz);
  if (ctx.isActive(x))
    ctx.accumulate(x, b.select(b.binary(OpKind::Less, x, y), dz, tied));
  if (ctx.isActive(y))
    ctx.accumulate(y, b.select(b.binary(OpKind::Greater, x, y), dz, tied));
}

// z = select(cond, a, b):   da += select(cond, dz, 0)
//                           db += select(cond, 0, dz)
// `cond` is bool: it has no gradient.
void selectGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *cond = op.getOperand(0), *a = op.getOperand(1),
        *other = op.getOperand(2);
  Value *dz = ctx.adjointOf(op.getResult());
  Value *zero = ctx.scalarLike(dz, 0.0);
  if (ctx.isActive(a))
    ctx.accumulate(a, b.select(cond, dz, zero));
  if (ctx.isActive(other))
    ctx.accumulate(other, b.select(cond, zero, dz));
}

// z = clip(x, lo, hi) = min(max(x, lo), hi):
//   dx  += dz where lo <= x <= hi, else 0
//   dlo += dz where x < lo (and lo <= hi), else 0
//   dhi += dz where x > hi, or everywhere when lo > hi (z is then hi)
// At x == lo or x == hi the cotangent goes to x.
void clipGrad(GradContext &ctx, const ir::Op &op) {
  ir::Builder &b = ctx.builder();
  Value *x = op.getOperand(0), *lo = op.getOperand(1), *hi = op.getOperand(2);
  Value *dz = ctx.adjointOf(op.getResult());
  Value *zero = ctx.scalarLike(dz, 0.0);
  Value *below = b.binary(OpKind::Less, x, lo);
  Value *above = b.binary(OpKind::Greater, x, hi);
  if (ctx.isActive(x))
    ctx.accumulate(x, b.select(below, zero, b.select(above, zero, dz)));
  if (!ctx.isActive(lo) && !ctx.isActive(hi))
    return;
  Value *inverted = b.binary(OpKind::Greater, lo, hi);
  if (ctx.isActive(lo))
    ctx.accumulate(lo, b.select(below, b.select(inverted, zero, dz), zero));
  if (ctx.isActive(hi))
    ctx.accumulate(hi, b.select(above, dz, b.select(inverted, dz, zero)));
}

} // namespace

void gradc::ad::registerElementwiseGrads(GradRegistry &registry) {
  registry.add(OpKind::Identity, identityGrad);
  registry.add(OpKind::Neg, negGrad);
  registry.add(OpKind::Exp, expGrad);
  registry.add(OpKind::Log, logGrad);
  registry.add(OpKind::Sqrt, sqrtGrad);
  registry.add(OpKind::Abs, absGrad);
  registry.add(OpKind::Sin, sinGrad);
  registry.add(OpKind::Cos, cosGrad);
  registry.add(OpKind::Atan, atanGrad);
  registry.add(OpKind::Tanh, tanhGrad);
  registry.add(OpKind::Sigmoid, sigmoidGrad);
  registry.add(OpKind::Relu, reluGrad);
  registry.add(OpKind::Softplus, softplusGrad);
  registry.add(OpKind::Square, squareGrad);
  registry.add(OpKind::Add, addGrad);
  registry.add(OpKind::Sub, subGrad);
  registry.add(OpKind::Mul, mulGrad);
  registry.add(OpKind::Div, divGrad);
  registry.add(OpKind::Pow, powGrad);
  registry.add(OpKind::Maximum, maximumGrad);
  registry.add(OpKind::Minimum, minimumGrad);
  registry.add(OpKind::Select, selectGrad);
  registry.add(OpKind::Clip, clipGrad);
}
