//===- Rewriter.h - One forward walk that rewrites a function ---*- C++ -*-===//
//
// simplify, fold and cse all rewrite a function the same way: walk the ops
// in order, redirect each operand to the value that replaced it, and maybe
// replace the op's results by other values (existing ones, or the results
// of new ops placed just before it). FunctionRewriter does the bookkeeping
// once, in one pass over the op list, instead of a replaceAllUses per
// rewrite, and it never lets a rewrite change a value's type.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_LIB_TRANSFORMS_REWRITER_H
#define GRADC_LIB_TRANSFORMS_REWRITER_H

#include "gradc/IR/IR.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <vector>

namespace gradc::transforms {

class FunctionRewriter {
public:
  explicit FunctionRewriter(ir::Function &fn) : fn(fn) {}

  ir::Function &getFunction() { return fn; }

  /// Walks the ops in order. Before `visit` sees an op, its operands are
  /// redirected to their replacements. `visit` returns true when it
  /// replaced the op's results (replaceOp); the op is then removed. Ops that
  /// `visit` creates go just before the visited op. The returned values
  /// are redirected last. Returns true if anything changed.
  bool run(llvm::function_ref<bool(ir::Op &op)> visit);

  /// The value that now stands for `v`.
  ir::Value *lookup(ir::Value *v) const;

  /// Replaces every result of `op` by the value at the same index, once
  /// the walk reaches the uses. A replacement must have the same type as
  /// the result; if one does not (a bug in a rewrite), nothing is replaced
  /// and false is returned. A replacing temporary (an unnamed op result)
  /// takes the user's name of the value it replaces.
  bool replaceOp(ir::Op &op, llvm::ArrayRef<ir::Value *> values);

  /// Creates an op of `kind` before the visited op, typed by the op table
  /// and with the location and note of `like`. Returns null when the op
  /// table rejects the operands (the rewrite must then not happen).
  ir::Op *create(OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                 AttrList attrs, const ir::Op &like);
  /// The same for a single result; null when rejected.
  ir::Value *create1(OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                     AttrList attrs, const ir::Op &like);
  /// A constant of `type` with `values` (one value: a splat).
  ir::Value *createConstant(const TensorType &type,
                            llvm::ArrayRef<double> values, const ir::Op &like);

  /// Records a change made in place (an operand of a kept op rewired).
  void markChanged() { changed = true; }

private:
  ir::Function &fn;
  llvm::DenseMap<ir::Value *, ir::Value *> replacements;
  /// Removed ops stay allocated until the rewriter dies, so that no
  /// pointer held during the walk dangles.
  std::vector<std::unique_ptr<ir::Op>> removed;
  bool changed = false;
};

/// The values of a constant op's result `v` (one value for a splat), or
/// null when `v` is not defined by a `constant`.
const std::vector<double> *getConstantValues(const ir::Value *v);

/// Whether `v` is defined by an op of `kind`.
bool isDefinedBy(const ir::Value *v, OpKind kind);

/// Whether `op` is a `zeros_like` or `ones_like`, whose operand gives only
/// its type.
inline bool isFill(const ir::Op &op) {
  return op.getKind() == OpKind::ZerosLike || op.getKind() == OpKind::OnesLike;
}

/// A function cut in two (the passes that cut a VJP in two: split,
/// tape-residuals): the ops of its forward half, those of its backward
/// half, and the forward values the backward half reads.
struct Cut {
  llvm::DenseSet<const ir::Op *> forward;
  llvm::DenseSet<const ir::Op *> backward;
  /// In order of definition.
  std::vector<const ir::Value *> residuals;
};

/// Walks back from `roots` and marks the backward half of `cut`, whose
/// forward half is set: an op outside it, and a forward op that the
/// backward half recomputes (a constant, a fill, or one `recompute`
/// accepts) is backward; any other forward value it reads is a residual.
/// Values in `given` (passed to the backward half) stop the walk. A fill
/// reads only its operand's type (cloneOrFill), so the walk stops there.
void markBackward(const ir::Function &fn,
                  llvm::ArrayRef<const ir::Value *> roots,
                  llvm::DenseSet<const ir::Value *> given,
                  llvm::function_ref<bool(const ir::Op &)> recompute, Cut &cut);

/// Copies `op` to the end of `to` (the passes that cut a function in two:
/// split, tape-residuals), its operands mapped through `map`, which then
/// maps its results to the copy's. A `zeros_like`/`ones_like` whose
/// operand `map` lacks becomes a constant of its type (only the type
/// matters): canonicalization may leave a fill of a value of the other
/// half, a forward `zeros_like` of a cotangent of the same type, say.
void cloneOrFill(const ir::Op &op, ir::Function &to,
                 llvm::DenseMap<const ir::Value *, ir::Value *> &map);

/// Whether `op` has a gradient rule chosen by an annotation; such ops are
/// never rewritten (see Passes.h).
inline bool hasCustomGradient(const ir::Op &op) {
  return op.getGradRule().isSet();
}

} // namespace gradc::transforms

#endif // GRADC_LIB_TRANSFORMS_REWRITER_H
