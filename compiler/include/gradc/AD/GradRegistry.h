//===- GradRegistry.h - Built-in gradient rules by op -----------*- C++ -*-===//
//
// Every differentiable op of Ops.def has one built-in rule here; the op
// table declares the others non-differentiable (OpInfo::nonDiffReason), and
// a unit test keeps the two in step. A rule is a plain function that reads
// the forward op and emits its reverse-mode contribution through a
// GradContext. User rules (@override, @custom_grad, grad blocks) do not
// live here: they are IR functions named by the op's GradRuleAttr, and the
// reverse sweep tries them first.
//
// Rules are registered with explicit calls (registerElementwiseGrads ...)
// rather than static constructors, so the registry is built when needed
// and its contents do not depend on link order.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_AD_GRADREGISTRY_H
#define GRADC_AD_GRADREGISTRY_H

#include "gradc/IR/IR.h"

#include <array>

namespace gradc::ad {

class GradContext;

/// A built-in rule: given the forward op, accumulates the cotangent of each
/// active operand from the adjoints of the op's results.
using GradRuleFn = void (*)(GradContext &ctx, const ir::Op &op);

class GradRegistry {
public:
  /// Registers the rule of `kind`; a second rule for one op is our bug.
  void add(OpKind kind, GradRuleFn rule);
  /// The built-in rule of `kind`, or null.
  GradRuleFn lookup(OpKind kind) const;

  /// A registry that holds every built-in rule.
  static GradRegistry createBuiltin();

private:
  static constexpr size_t numOps = 0
#define GRADC_OP(Id, Name) +1
#include "gradc/Ops/Ops.def"
      ;
  std::array<GradRuleFn, numOps> rules{};
};

/// One call per family of ops, each defined in lib/AD/Rules/<Family>.cpp.
void registerElementwiseGrads(GradRegistry &registry);
void registerReduceGrads(GradRegistry &registry);
void registerLinalgGrads(GradRegistry &registry);
void registerLayoutGrads(GradRegistry &registry);
void registerLossGrads(GradRegistry &registry);

} // namespace gradc::ad

#endif // GRADC_AD_GRADREGISTRY_H
