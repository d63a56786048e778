//===- GradContext.h - What a gradient rule sees ----------------*- C++ -*-===//
//
// The reverse sweep hands each rule a GradContext: a builder positioned at
// the end of the gradient function (its ops already carry the note that
// explains them), the adjoint of every forward value computed so far, and
// accumulate(), the one place where contributions are summed and where
// broadcasting is undone. A rule therefore only states the calculus of its
// op: it never sums over broadcast axes, never checks whether an operand
// is integer-typed or constant, and never creates zeros it does not need.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_AD_GRADCONTEXT_H
#define GRADC_AD_GRADCONTEXT_H

#include "gradc/IR/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace gradc::ad {

class GradContext {
public:
  /// `active` holds the floating-point values that depend on a parameter
  /// being differentiated: only they receive adjoints.
  GradContext(ir::Function &grad, llvm::DenseSet<const ir::Value *> active)
      : b(grad), active(std::move(active)) {}

  ir::Builder &builder() { return b; }

  /// Whether `v` takes a gradient. A rule skips the contributions of
  /// inactive operands (integers, booleans, constants, values that do not
  /// depend on a differentiated parameter); accumulate() drops them anyway.
  bool isActive(const ir::Value *v) const { return active.contains(v); }

  /// The adjoint (cotangent) of `v` accumulated so far, or null when no
  /// gradient reaches `v`.
  ir::Value *adjointOf(const ir::Value *v) const { return adjoints.lookup(v); }

  /// The adjoint of `v`, or `zeros_like(v)` when none reaches it: for rules
  /// that need every result's cotangent (unstack, split, user rules).
  ir::Value *adjointOrZeros(ir::Value *v);

  /// Adds `contribution` into the adjoint of `v`. The contribution may have
  /// the broadcast shape of the op that used `v`: it is summed over the
  /// leading and expanded axes and reshaped back to `v`'s shape here, the
  /// one place that undoes broadcasting. Inactive values are ignored.
  void accumulate(ir::Value *v, ir::Value *contribution);

  /// Sets the adjoint of a value outright (the seed of the sweep).
  void setAdjoint(const ir::Value *v, ir::Value *adjoint) {
    adjoints[v] = adjoint;
  }

  /// Builds `c` as a scalar of `v`'s element type (`2.0` in `2 * x`).
  ir::Value *scalarLike(const ir::Value *v, double c) {
    return b.scalar(v->getType().dtype, c);
  }

  /// Sums or broadcasts `c` into `type`'s shape, NumPy-style in reverse.
  ir::Value *fitToType(ir::Value *c, const TensorType &type);

private:
  ir::Builder b;
  llvm::DenseSet<const ir::Value *> active;
  llvm::DenseMap<const ir::Value *, ir::Value *> adjoints;
};

} // namespace gradc::ad

#endif // GRADC_AD_GRADCONTEXT_H
