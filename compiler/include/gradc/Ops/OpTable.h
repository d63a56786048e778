//===- OpTable.h - The one table of built-in ops ----------------*- C++ -*-===//
//
// Every phase asks this table about an op: Sema to check a call and infer
// its type, the IR verifier to re-check an op, the IR builder to type the
// ops that differentiation creates, and the docs generator for the op
// reference. Adding an op means one row here and one gradient rule in
// lib/AD/Rules.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_OPS_OPTABLE_H
#define GRADC_OPS_OPTABLE_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/Ops/Attr.h"
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
/// elements at the same (broadcast) position by arithmetic: the unary math
/// ops, the binary operators, comparisons, select and clip. The emitters
/// fuse these into loops; constant folding keeps splats splat through them.
bool isElementwiseArithmetic(OpKind op);

/// The shape that NumPy broadcasting gives `a` and `b`, or nullopt.
/// Size names broadcast only against themselves and 1.
std::optional<Shape> broadcastShapes(llvm::ArrayRef<Dim> a,
                                     llvm::ArrayRef<Dim> b);

} // namespace gradc

#endif // GRADC_OPS_OPTABLE_H
