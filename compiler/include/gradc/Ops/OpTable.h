//===- OpTable.h - The one table of built-in ops ----------------*- C++ -*-===//
//
// Every phase asks this table about an op: Sema to check a call and infer
// its type, the IR verifier to re-check an op, the IR builder to type the
// ops that differentiation creates, the docs generator for the op
// reference; and through the op's traits and scalar expansion, the
// interpreter, Simplify, ConstantFold and the loop IR's lowering, which
// keep no list of ops of their own. Adding an elementwise op means one
// row here (and in Ops.def), one gradient rule in lib/AD/Rules, and a math
// function in Ops.def when the expansion needs a new one
// (docs/Design.md, "Adding an op").
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_OPS_OPTABLE_H
#define GRADC_OPS_OPTABLE_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/Ops/Attr.h"
#include "gradc/Ops/Scalar.h"
#include "gradc/Ops/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace gradc {

enum class OpKind : uint16_t {
#define GRADC_OP(Id, Name) Id,
#include "gradc/Ops/Ops.def"
};

/// How an op's attribute is written and stored.
enum class AttrKind {
  Int,     ///< an integer: `axis = 1`
  Axes,    ///< an integer or a list; absent means all axes. Stored as a
           ///< sorted list of non-negative axes.
  IntList, ///< a list of integers: `perm = [1, 0]`
  Bool,    ///< `true` / `false`
  Shape,   ///< a list of sizes or size names: `[N, 784]`; -1 in reshape
  Dim,     ///< one size or size name: `one_hot(y, 10)`; stored as a Shape
           ///< of one dimension
  Floats,  ///< IR only: a constant's values
  Symbol,  ///< IR only: a callee's name
};

struct AttrInfo {
  const char *name;
  AttrKind kind;
  bool required;
};

/// A type error found while inferring an op's result types: a diagnostic
/// of DiagnosticsSema.def and its arguments, so that Sema reports it at the
/// call and the IR verifier at the op.
struct OpTypeError {
  diag::ID id = diag::note_generic;
  llvm::SmallVector<std::string, 4> args;
};

using InferTypesFn = bool (*)(llvm::ArrayRef<TensorType> operands,
                              AttrList &attrs,
                              llvm::SmallVectorImpl<TensorType> &results,
                              OpTypeError &error);

/// What an op is, for the passes that reason about many ops at once. A
/// bit set; docs/IR.md lists each op's traits.
enum OpTrait : uint8_t {
  NoTraits = 0,
  /// Each result element is computed from the operand elements at the
  /// same (NumPy-broadcast) position by the op's scalar expansion
  /// (`expand`). The interpreter and the loop lowering run nothing else.
  Elementwise = 1 << 0,
  /// Elementwise and computes (the math ops, operators, comparisons,
  /// select, clip), as opposed to copying (identity) or filling
  /// (zeros_like). The backends fuse these into loops.
  Arithmetic = 1 << 1,
  /// Each result element is a copy of one operand element at a position
  /// given by an index map (identity, transpose, reshape, stack, ...).
  IndexMap = 1 << 2,
  /// Operands that are splats of one value give a splat of that value
  /// (index maps, `max`): constant folding need not compute anything.
  SplatPreserving = 1 << 3,
  /// An i32 instance fails at run time on a zero divisor (`div`): its
  /// result must never be folded away.
  IntDivision = 1 << 4,
};

/// When an op's result is a structural zero because some operands are
/// (Simplify's zero propagation): exactly (sum, transpose, relu, ... of
/// +0.0 are +0.0) or as "no contribution" (a * 0, matmul(0, a)).
enum class ZeroWhen : uint8_t {
  Never,  ///< no rule
  First,  ///< operand 0 is zero
  All,    ///< every operand is zero
  Any,    ///< one operand is zero
  Values, ///< operands 1 and 2 (select's values) are zero
};

struct OpInfo {
  OpKind kind;
  const char *name;
  /// Operand names in order (`x`, `y`). An op with `variadic` set takes a
  /// list of tensors (`stack([a, b])`): `operandNames` has one entry, and
  /// the IR holds the list's elements as separate operands.
  llvm::ArrayRef<const char *> operandNames;
  bool variadic;
  llvm::ArrayRef<AttrInfo> attrs;
  /// Whether a gradient flows to each operand (indexed like operandNames;
  /// for a variadic op, to every element). Empty means "to every operand".
  /// An op with no differentiable operand carries `nonDiffReason`.
  llvm::ArrayRef<bool> differentiableOperands;
  const char *nonDiffReason; ///< null when the op has a gradient
  bool userVisible;          ///< false for IR-only ops
  const char *summary;       ///< one line for the docs
  /// Checks operand types and attributes, normalises the attributes in place
  /// (fills defaults, resolves negative axes) and computes result types.
  /// Null for ops whose result types are explicit (constant, call).
  InferTypesFn inferTypes;
  /// OpTrait bits.
  unsigned traits;
  ZeroWhen zeroWhen;
  /// For an Elementwise op: how one result element is computed from the
  /// operand elements at its position (gradc/Ops/Scalar.h). Null for
  /// other ops.
  ScalarExpandFn expand;

  bool has(OpTrait t) const { return (traits & t) != 0; }
  bool isDifferentiable() const { return nonDiffReason == nullptr; }
  bool isOperandDifferentiable(unsigned index) const;
  const AttrInfo *findAttr(llvm::StringRef name) const;
};

const OpInfo &getOpInfo(OpKind kind);
llvm::StringRef getOpName(OpKind kind);
/// All ops in Ops.def order.
llvm::ArrayRef<OpInfo> getAllOps();
/// A user-visible op by the name a program calls it by.
const OpInfo *lookupOp(llvm::StringRef name);
/// The nearest user-visible op name within a small edit distance, or "".
llvm::StringRef suggestOpName(llvm::StringRef name);
/// Our op for a TensorFlow op-type name (`Pack` -> `stack`,
/// `MatMul` -> `matmul`), or "" when we know none.
llvm::StringRef mapTensorFlowOpName(llvm::StringRef tfName);

/// Infers the result types of `op` on `operands`, normalising `attrs`.
/// Returns false with `error` set on a type or shape error.
bool inferOpTypes(OpKind op, llvm::ArrayRef<TensorType> operands,
                  AttrList &attrs, llvm::SmallVectorImpl<TensorType> &results,
                  OpTypeError &error);

/// Whether each result element of `op` is computed from the operand
/// elements at the same (broadcast) position by arithmetic: the ops with
/// the Elementwise and Arithmetic traits. The emitters fuse these into
/// loops.
bool isElementwiseArithmetic(OpKind op);

/// The shape that NumPy broadcasting gives `a` and `b`, or nullopt.
/// Size names broadcast only against themselves and 1.
std::optional<Shape> broadcastShapes(llvm::ArrayRef<Dim> a,
                                     llvm::ArrayRef<Dim> b);

} // namespace gradc

#endif // GRADC_OPS_OPTABLE_H
