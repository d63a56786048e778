//===- Scalar.h - One element of an elementwise op --------------*- C++ -*-===//
//
// The scalar vocabulary that every elementwise op of the table expands
// into: element types, a small set of primitive operations and the math
// library's functions (intrinsics). An op's *scalar expansion* (OpInfo's
// `expand`) is a small tree over them that says how one result element is
// computed from the operand elements at its position. Two consumers read
// it and nothing else:
//
//  - the loop IR's legalisation turns it into loop IR expressions
//    (lib/Loops/Legalize.cpp), which both backends print;
//  - the reference interpreter evaluates it per element with
//    `evalScalar`, whose primitives and intrinsics are the same functions
//    the loop evaluator calls (`evalPrim`, `evalIntrinsic`: the f32
//    intrinsics are gradc/Math.h's), so that the two agree bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_OPS_SCALAR_H
#define GRADC_OPS_SCALAR_H

#include "gradc/Ops/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace gradc {

/// The type of a scalar expression: an element type, or `index` (a
/// signed 64-bit integer for extents, loop variables and offsets).
enum class ScalarType : uint8_t { F32, F64, I32, Bool, Index };

ScalarType fromDType(DType t);
llvm::StringRef scalarTypeName(ScalarType t);
inline bool isFloatType(ScalarType t) {
  return t == ScalarType::F32 || t == ScalarType::F64;
}

/// Primitive operations. Arithmetic on i32 wraps (two's complement);
/// i32 division truncates toward zero (a Check before it rules out zero).
/// `Max`/`Min` are the one NaN-propagating maximum and minimum of
/// docs/IR.md: NaN if either operand is NaN, else `a < b ? b : a`
/// (resp. `b < a ? b : a`), so that of -0 and +0 the first operand wins.
enum class PrimOp : uint8_t {
  // Unary.
  Neg,
  Abs,
  Not,
  IsNaN,
  IsFinite,
  // Binary.
  Add,
  Sub,
  Mul,
  Div,
  Rem, ///< index only: the remainder of a truncating division
  Max,
  Min,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or,
};

llvm::StringRef primOpName(PrimOp op);
bool isUnaryPrim(PrimOp op);
bool isComparison(PrimOp op);

/// Math functions on f32 or f64, one per GRADC_MATH1/GRADC_MATH2 row of
/// Ops.def: `gradc::NAME` of gradc/Math.h (sqrt and log1p: <cmath>'s).
/// A plain enum so that each printer maps it to one runtime function by
/// its name; the contract (docs/Loops.md): the result is the exact value
/// rounded to the argument's type. `Sigmoid` and `Softplus` are used for
/// f32 only: gradc/Math.h has them as functions of their own
/// (docs/Math.md), which every backend calls; f64 expands them into
/// primitives.
enum class Intrinsic : uint8_t {
#define GRADC_MATH1(Id, fn) Id,
#define GRADC_MATH2(Id, fn) Id,
#include "gradc/Ops/Ops.def"
};

llvm::StringRef intrinsicName(Intrinsic f);
unsigned intrinsicArity(Intrinsic f);

//===----------------------------------------------------------------------===//
// Evaluation: the scalar semantics, once
//===----------------------------------------------------------------------===//

/// `v` rounded to `t` (f32: IEEE rounding, overflow to ±inf; i32: truncated
/// and wrapped; bool: 0 or 1; index: truncated).
double roundToScalar(ScalarType t, double v);

/// One primitive on operands of type `t` (values held in doubles, as
/// everywhere in the interpreters), rounded to its result type. Sets
/// `divByZero` on an integer division or remainder by zero (and returns 0).
double evalPrim(PrimOp op, ScalarType t, double a, double b, bool &divByZero);

/// One intrinsic on arguments of type `t` (f32 or f64), rounded to `t`.
double evalIntrinsic(Intrinsic f, ScalarType t, double a, double b);

//===----------------------------------------------------------------------===//
// Scalar expansions
//===----------------------------------------------------------------------===//

/// A node of an op's scalar expansion. Trees, not DAGs: an operand used
/// twice appears twice (printers print expressions where they are used).
struct ScalarNode {
  enum class Kind : uint8_t {
    Operand,   ///< the element of operand number `operand`
    Const,     ///< `value` of `type`
    Prim,      ///< `op(args...)`
    Intrinsic, ///< `fn(args...)`
    Select,    ///< `args[0] ? args[1] : args[2]`
    Cast,      ///< `args[0]` converted to `type`
  };
  Kind kind;
  ScalarType type;
  double value = 0;
  unsigned operand = 0;
  PrimOp op = PrimOp::Add;
  Intrinsic fn = Intrinsic::Exp;
  std::vector<std::unique_ptr<ScalarNode>> args;

  ScalarNode(Kind kind, ScalarType type) : kind(kind), type(type) {}
};

using ScalarNodePtr = std::unique_ptr<ScalarNode>;

/// Builds the expansion of one elementwise op whose (value) operands have
/// type `t`. Comparisons give bool; everything else gives `t` unless it
/// casts.
using ScalarExpandFn = ScalarNodePtr (*)(ScalarType t);

/// Builders of expansions. Types follow the loop IR's: a primitive has
/// its first argument's type (bool for comparisons, IsNaN, IsFinite, Not,
/// And, Or), an intrinsic its argument's, a select its arms'; a cast to
/// the same type is no node.
namespace sx {
ScalarNodePtr operand(unsigned index, ScalarType type);
ScalarNodePtr constant(ScalarType type, double value);
ScalarNodePtr prim(PrimOp op, ScalarNodePtr a, ScalarNodePtr b = nullptr);
ScalarNodePtr intrinsic(Intrinsic fn, ScalarNodePtr a,
                        ScalarNodePtr b = nullptr);
ScalarNodePtr select(ScalarNodePtr cond, ScalarNodePtr a, ScalarNodePtr b);
ScalarNodePtr cast(ScalarType to, ScalarNodePtr a);
} // namespace sx

/// Evaluates an expansion on one element of each operand (`operands`
/// indexed by ScalarNode::operand). Every node rounds to its own type, as
/// the loop evaluator does; both arms of a select are evaluated. Sets
/// `divByZero` on an integer division by zero.
double evalScalar(const ScalarNode &node, llvm::ArrayRef<double> operands,
                  bool &divByZero);

} // namespace gradc

#endif // GRADC_OPS_SCALAR_H
