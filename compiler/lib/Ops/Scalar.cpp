//===- Scalar.cpp - The scalar vocabulary and its semantics ---------------===//
//
// Names of the scalar types, primitives and intrinsics, their evaluation
// (the one definition that the interpreter and the loop evaluator share)
// and the builders of scalar expansions.
//
//===----------------------------------------------------------------------===//

#include "gradc/Ops/Scalar.h"

#include "gradc/Math.h"

#include <cassert>
#include <cmath>

using namespace gradc;

ScalarType gradc::fromDType(DType t) {
  switch (t) {
  case DType::F32:
    return ScalarType::F32;
  case DType::F64:
    return ScalarType::F64;
  case DType::I32:
    return ScalarType::I32;
  case DType::Bool:
    return ScalarType::Bool;
  }
  return ScalarType::F32;
}

llvm::StringRef gradc::scalarTypeName(ScalarType t) {
  switch (t) {
  case ScalarType::F32:
    return "f32";
  case ScalarType::F64:
    return "f64";
  case ScalarType::I32:
    return "i32";
  case ScalarType::Bool:
    return "bool";
  case ScalarType::Index:
    return "index";
  }
  return "?";
}

llvm::StringRef gradc::primOpName(PrimOp op) {
  switch (op) {
  case PrimOp::Neg:
    return "-";
  case PrimOp::Abs:
    return "abs";
  case PrimOp::Not:
    return "!";
  case PrimOp::IsNaN:
    return "isnan";
  case PrimOp::IsFinite:
    return "isfinite";
  case PrimOp::Add:
    return "+";
  case PrimOp::Sub:
    return "-";
  case PrimOp::Mul:
    return "*";
  case PrimOp::Div:
    return "/";
  case PrimOp::Rem:
    return "%";
  case PrimOp::Max:
    return "max";
  case PrimOp::Min:
    return "min";
  case PrimOp::Lt:
    return "<";
  case PrimOp::Le:
    return "<=";
  case PrimOp::Gt:
    return ">";
  case PrimOp::Ge:
    return ">=";
  case PrimOp::Eq:
    return "==";
  case PrimOp::Ne:
    return "!=";
  case PrimOp::And:
    return "&&";
  case PrimOp::Or:
    return "||";
  }
  return "?";
}

bool gradc::isUnaryPrim(PrimOp op) {
  return op == PrimOp::Neg || op == PrimOp::Abs || op == PrimOp::Not ||
         op == PrimOp::IsNaN || op == PrimOp::IsFinite;
}

bool gradc::isComparison(PrimOp op) {
  switch (op) {
  case PrimOp::Lt:
  case PrimOp::Le:
  case PrimOp::Gt:
  case PrimOp::Ge:
  case PrimOp::Eq:
  case PrimOp::Ne:
    return true;
  default:
    return false;
  }
}

llvm::StringRef gradc::intrinsicName(Intrinsic f) {
  switch (f) {
#define GRADC_MATH1(Id, fn)                                                    \
  case Intrinsic::Id:                                                          \
    return #fn;
#define GRADC_MATH2(Id, fn) GRADC_MATH1(Id, fn)
#include "gradc/Ops/Ops.def"
  }
  return "?";
}

unsigned gradc::intrinsicArity(Intrinsic f) {
  switch (f) {
#define GRADC_MATH1(Id, fn)                                                    \
  case Intrinsic::Id:                                                          \
    return 1;
#define GRADC_MATH2(Id, fn)                                                    \
  case Intrinsic::Id:                                                          \
    return 2;
#include "gradc/Ops/Ops.def"
  }
  return 1;
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

namespace gradc {
namespace {
// The two intrinsics that gradc/Math.h leaves to <cmath>: sqrt is exact in
// both types; log1p is used by f64 expansions only (f32 gets the exact
// value rounded).
float sqrt(float x) { return std::sqrt(x); }
double sqrt(double x) { return std::sqrt(x); }
float log1p(float x) { return float(std::log1p(double(x))); }
double log1p(double x) { return std::log1p(x); }
} // namespace

/// `gradc::fn` of gradc/Math.h (or of the two above) in type T.
template <typename T> double mathOf(Intrinsic f, T x, T y) {
  (void)y;
  switch (f) {
#define GRADC_MATH1(Id, fn)                                                    \
  case Intrinsic::Id:                                                          \
    return fn(x);
#define GRADC_MATH2(Id, fn)                                                    \
  case Intrinsic::Id:                                                          \
    return fn(x, y);
#include "gradc/Ops/Ops.def"
  }
  return NAN;
}
} // namespace gradc

namespace {
double wrap32(uint64_t v) { return double(int32_t(uint32_t(v))); }
uint64_t asU64(double v) { return uint64_t(int64_t(v)); }

/// The NaN policy of docs/IR.md: NaN if either is NaN, else the larger
/// (of -0 and +0, the first).
double maxOf(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return NAN;
  return a < b ? b : a;
}
double minOf(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return NAN;
  return b < a ? b : a;
}
} // namespace

double gradc::roundToScalar(ScalarType t, double v) {
  switch (t) {
  case ScalarType::F32:
    // Values at or beyond FLT_MAX + half an ulp round to infinity; the
    // explicit test keeps the conversion defined in C++.
    if (std::fabs(v) >= 0x1.ffffffp+127)
      return std::copysign(INFINITY, v);
    return double(float(v));
  case ScalarType::F64:
    return v;
  case ScalarType::I32: {
    if (!std::isfinite(v))
      return 0;
    double m = std::fmod(std::trunc(v), 4294967296.0);
    if (m < 0)
      m += 4294967296.0;
    return double(int32_t(uint32_t(m)));
  }
  case ScalarType::Bool:
    return v != 0 ? 1 : 0;
  case ScalarType::Index:
    return std::isfinite(v) ? std::trunc(v) : 0;
  }
  return v;
}

double gradc::evalPrim(PrimOp op, ScalarType t, double a, double b,
                       bool &divByZero) {
  bool isInt = t == ScalarType::I32;
  bool isIndex = t == ScalarType::Index;
  switch (op) {
  case PrimOp::Neg:
    return isInt ? wrap32(0 - asU64(a)) : -a;
  case PrimOp::Abs:
    return isInt ? wrap32(a < 0 ? 0 - asU64(a) : asU64(a)) : std::fabs(a);
  case PrimOp::Not:
    return a == 0;
  case PrimOp::IsNaN:
    return std::isnan(a);
  case PrimOp::IsFinite:
    return std::isfinite(a);
  case PrimOp::Add:
    if (isIndex)
      return double(int64_t(a) + int64_t(b));
    return isInt ? wrap32(asU64(a) + asU64(b)) : roundToScalar(t, a + b);
  case PrimOp::Sub:
    if (isIndex)
      return double(int64_t(a) - int64_t(b));
    return isInt ? wrap32(asU64(a) - asU64(b)) : roundToScalar(t, a - b);
  case PrimOp::Mul:
    if (isIndex)
      return double(int64_t(a) * int64_t(b));
    return isInt ? wrap32(asU64(a) * asU64(b)) : roundToScalar(t, a * b);
  case PrimOp::Div:
  case PrimOp::Rem:
    if (isInt || isIndex) {
      if (b == 0) {
        divByZero = true;
        return 0;
      }
      // In 64 bits INT_MIN / -1 is 2^31, which wraps back to INT_MIN.
      int64_t q = int64_t(a) / int64_t(b), r = int64_t(a) % int64_t(b);
      if (op == PrimOp::Rem)
        return double(r);
      return isInt ? wrap32(uint64_t(q)) : double(q);
    }
    return roundToScalar(t, a / b);
  case PrimOp::Max:
    return maxOf(a, b);
  case PrimOp::Min:
    return minOf(a, b);
  case PrimOp::Lt:
    return a < b;
  case PrimOp::Le:
    return a <= b;
  case PrimOp::Gt:
    return a > b;
  case PrimOp::Ge:
    return a >= b;
  case PrimOp::Eq:
    return a == b;
  case PrimOp::Ne:
    return a != b;
  case PrimOp::And:
    return a != 0 && b != 0;
  case PrimOp::Or:
    return a != 0 || b != 0;
  }
  return NAN;
}

double gradc::evalIntrinsic(Intrinsic f, ScalarType t, double a, double b) {
  if (t == ScalarType::F32)
    return mathOf<float>(f, float(a), float(b));
  return roundToScalar(t, mathOf<double>(f, a, b));
}

double gradc::evalScalar(const ScalarNode &n, llvm::ArrayRef<double> operands,
                         bool &divByZero) {
  auto arg = [&](unsigned i) {
    return evalScalar(*n.args[i], operands, divByZero);
  };
  switch (n.kind) {
  case ScalarNode::Kind::Operand:
    return operands[n.operand];
  case ScalarNode::Kind::Const:
    return n.value;
  case ScalarNode::Kind::Prim:
    return evalPrim(n.op, n.args[0]->type, arg(0),
                    n.args.size() > 1 ? arg(1) : 0, divByZero);
  case ScalarNode::Kind::Intrinsic:
    return evalIntrinsic(n.fn, n.type, arg(0), n.args.size() > 1 ? arg(1) : 0);
  case ScalarNode::Kind::Select: {
    // Both arms are evaluated, as a vectorised printer would.
    double c = arg(0), a = arg(1), b = arg(2);
    return c != 0 ? a : b;
  }
  case ScalarNode::Kind::Cast:
    return roundToScalar(n.type, arg(0));
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Builders
//===----------------------------------------------------------------------===//

ScalarNodePtr sx::operand(unsigned index, ScalarType type) {
  auto n = std::make_unique<ScalarNode>(ScalarNode::Kind::Operand, type);
  n->operand = index;
  return n;
}

ScalarNodePtr sx::constant(ScalarType type, double value) {
  auto n = std::make_unique<ScalarNode>(ScalarNode::Kind::Const, type);
  n->value = value;
  return n;
}

ScalarNodePtr sx::prim(PrimOp op, ScalarNodePtr a, ScalarNodePtr b) {
  assert(a && (isUnaryPrim(op) == !b) && "wrong number of operands");
  ScalarType t = a->type;
  if (isComparison(op) || op == PrimOp::Not || op == PrimOp::IsNaN ||
      op == PrimOp::IsFinite)
    t = ScalarType::Bool;
  auto n = std::make_unique<ScalarNode>(ScalarNode::Kind::Prim, t);
  n->op = op;
  n->args.push_back(std::move(a));
  if (b)
    n->args.push_back(std::move(b));
  return n;
}

ScalarNodePtr sx::intrinsic(Intrinsic fn, ScalarNodePtr a, ScalarNodePtr b) {
  assert(a && (intrinsicArity(fn) == 2) == bool(b) && "wrong arity");
  auto n = std::make_unique<ScalarNode>(ScalarNode::Kind::Intrinsic, a->type);
  n->fn = fn;
  n->args.push_back(std::move(a));
  if (b)
    n->args.push_back(std::move(b));
  return n;
}

ScalarNodePtr sx::select(ScalarNodePtr cond, ScalarNodePtr a, ScalarNodePtr b) {
  auto n = std::make_unique<ScalarNode>(ScalarNode::Kind::Select, a->type);
  n->args.push_back(std::move(cond));
  n->args.push_back(std::move(a));
  n->args.push_back(std::move(b));
  return n;
}

ScalarNodePtr sx::cast(ScalarType to, ScalarNodePtr a) {
  if (a->type == to)
    return a;
  auto n = std::make_unique<ScalarNode>(ScalarNode::Kind::Cast, to);
  n->args.push_back(std::move(a));
  return n;
}
