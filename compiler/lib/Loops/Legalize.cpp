//===- Legalize.cpp - Elementwise ops as primitives -----------------------===//
//
// The one place where an elementwise op of Ops.def becomes a scalar
// expression over the loop IR's primitives (PrimOp) and intrinsics. Its
// rules are the semantics of docs/IR.md; in particular the one NaN
// policy: `maximum`/`minimum`/`clip` propagate NaN (PrimOp::Max/Min),
// `relu` and `sign` keep a NaN, and no op turns a NaN into a number.
//
// Composite ops whose intermediate values would round differently in f32
// (sigmoid, softplus) compute in f64 and round once when stored, as the
// interpreter does; single primitives and intrinsics compute in their own
// type (f32 `+ - * /` and sqrt are then exactly the interpreter's, and an
// intrinsic is defined as the exact value rounded to its type).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

ExprPtr c(ScalarType t, double v) { return constant(t, v); }

ExprPtr cl(const ExprPtr &e) { return e->clone(); }

/// sigmoid(x) = 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so that
/// no large positive number is exponentiated. NaN gives NaN (second arm).
ExprPtr sigmoid(ExprPtr x) {
  ScalarType t = x->type;
  ExprPtr pos = prim(PrimOp::Div, c(t, 1),
                     prim(PrimOp::Add, c(t, 1),
                          intrinsic(Intrinsic::Exp, prim(PrimOp::Neg, cl(x)))));
  ExprPtr neg =
      prim(PrimOp::Div, intrinsic(Intrinsic::Exp, cl(x)),
           prim(PrimOp::Add, c(t, 1), intrinsic(Intrinsic::Exp, cl(x))));
  return select(prim(PrimOp::Ge, std::move(x), c(t, 0)), std::move(pos),
                std::move(neg));
}

/// softplus(x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|.
ExprPtr softplus(ExprPtr x) {
  ScalarType t = x->type;
  ExprPtr positive = prim(PrimOp::Max, cl(x), c(t, 0));
  return prim(
      PrimOp::Add, std::move(positive),
      intrinsic(Intrinsic::Log1p,
                intrinsic(Intrinsic::Exp,
                          prim(PrimOp::Neg, prim(PrimOp::Abs, std::move(x))))));
}

/// A NaN stays itself; otherwise `rest`.
ExprPtr keepNaN(const ExprPtr &x, ExprPtr rest) {
  if (!isFloatType(x->type))
    return rest;
  return select(prim(PrimOp::IsNaN, cl(x)), cl(x), std::move(rest));
}

Intrinsic intrinsicOf(OpKind kind) {
  switch (kind) {
  case OpKind::Exp:
    return Intrinsic::Exp;
  case OpKind::Log:
    return Intrinsic::Log;
  case OpKind::Sqrt:
    return Intrinsic::Sqrt;
  case OpKind::Sin:
    return Intrinsic::Sin;
  case OpKind::Cos:
    return Intrinsic::Cos;
  default:
    return Intrinsic::Tanh;
  }
}

PrimOp primOf(OpKind kind) {
  switch (kind) {
  case OpKind::Add:
    return PrimOp::Add;
  case OpKind::Sub:
    return PrimOp::Sub;
  case OpKind::Mul:
    return PrimOp::Mul;
  case OpKind::Div:
    return PrimOp::Div;
  case OpKind::Maximum:
    return PrimOp::Max;
  case OpKind::Minimum:
    return PrimOp::Min;
  case OpKind::Less:
    return PrimOp::Lt;
  case OpKind::LessEqual:
    return PrimOp::Le;
  case OpKind::Greater:
    return PrimOp::Gt;
  case OpKind::GreaterEqual:
    return PrimOp::Ge;
  case OpKind::Equal:
    return PrimOp::Eq;
  default:
    return PrimOp::Ne;
  }
}

} // namespace

ExprPtr loops::legalizeScalar(OpKind kind, std::vector<ExprPtr> ops,
                              DType operandType, DType resultType) {
  ScalarType t = fromDType(operandType), rt = fromDType(resultType);
  ScalarType wide = Lowering::computeType(operandType);
  switch (kind) {
  case OpKind::Identity:
  case OpKind::StopGradient:
    return std::move(ops[0]);
  case OpKind::ZerosLike:
    return c(rt, 0);
  case OpKind::OnesLike:
    return c(rt, 1);
  case OpKind::Neg:
    return prim(PrimOp::Neg, std::move(ops[0]));
  case OpKind::Abs:
    return prim(PrimOp::Abs, std::move(ops[0]));
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sqrt:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Tanh:
    return intrinsic(intrinsicOf(kind), std::move(ops[0]));
  // sign(x) = 1, -1 or 0 (+0 for ±0); NaN stays NaN.
  case OpKind::Sign: {
    ExprPtr &x = ops[0];
    ExprPtr s =
        select(prim(PrimOp::Gt, cl(x), c(t, 0)), c(t, 1),
               select(prim(PrimOp::Lt, cl(x), c(t, 0)), c(t, -1), c(t, 0)));
    return keepNaN(x, std::move(s));
  }
  // relu(x) = x > 0 ? x : +0; NaN stays NaN (not max(x, 0), which would
  // keep -0).
  case OpKind::Relu: {
    ExprPtr &x = ops[0];
    return keepNaN(x, select(prim(PrimOp::Gt, cl(x), c(t, 0)), cl(x), c(t, 0)));
  }
  // f32 calls the math library's own functions (docs/Math.md), as the
  // interpreter and both backends do; f64 is expanded here.
  case OpKind::Sigmoid:
    if (t == ScalarType::F32)
      return intrinsic(Intrinsic::Sigmoid, std::move(ops[0]));
    return sigmoid(cast(wide, std::move(ops[0])));
  case OpKind::Softplus:
    if (t == ScalarType::F32)
      return intrinsic(Intrinsic::Softplus, std::move(ops[0]));
    return softplus(cast(wide, std::move(ops[0])));
  case OpKind::Square:
    return prim(PrimOp::Mul, cl(ops[0]), cl(ops[0]));
  // pow of integers is the f64 power converted back (truncated, wrapped).
  case OpKind::Pow:
    if (!isFloatType(t))
      return cast(t, intrinsic(Intrinsic::Pow,
                               cast(ScalarType::F64, std::move(ops[0])),
                               cast(ScalarType::F64, std::move(ops[1]))));
    return intrinsic(Intrinsic::Pow, std::move(ops[0]), std::move(ops[1]));
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Maximum:
  case OpKind::Minimum:
  case OpKind::Less:
  case OpKind::LessEqual:
  case OpKind::Greater:
  case OpKind::GreaterEqual:
  case OpKind::Equal:
  case OpKind::NotEqual:
    return prim(primOf(kind), std::move(ops[0]), std::move(ops[1]));
  case OpKind::Select:
    return select(std::move(ops[0]), std::move(ops[1]), std::move(ops[2]));
  // clip(x, lo, hi) = minimum(maximum(x, lo), hi).
  case OpKind::Clip:
    return prim(PrimOp::Min,
                prim(PrimOp::Max, std::move(ops[0]), std::move(ops[1])),
                std::move(ops[2]));
  default:
    return nullptr;
  }
}
