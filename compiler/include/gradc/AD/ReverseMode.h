//===- ReverseMode.h - Generating NAME_grad functions -----------*- C++ -*-===//
//
// For every function marked @grad, adds `NAME_grad` to the module: the
// forward computation followed by its reverse sweep, with each op's
// gradient taken from the registry (lib/AD/GradRegistry.h): a user rule an
// annotation chose, else the op's built-in rule. docs/Gradients.md
// describes the method and every rule.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_AD_REVERSEMODE_H
#define GRADC_AD_REVERSEMODE_H

#include "gradc/AD/GradRegistry.h"
#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

namespace gradc::ad {

/// Generates the gradient of every function that has a GradSpec, in an
/// order where a gradient that calls another generated gradient comes
/// after it. `NAME_grad` takes the function's parameters, then one
/// cotangent per result unless the function returns one floating-point
/// scalar (whose seed is 1), and returns the gradients of the GradSpec's
/// `wrt` parameters in parameter order. A GradSpec whose gradient already
/// exists as a generated (Role::Grad) function is skipped, so that
/// differentiating printed gradient IR again is harmless. Rule-instance
/// functions that nothing refers to any more are removed afterwards.
/// Returns false after reporting an error; the module is then unchanged
/// except for the gradients generated before the error.
bool differentiate(ir::Module &module, DiagnosticEngine &diags);

/// The same with an explicit set of built-in rules (for tests).
bool differentiate(ir::Module &module, DiagnosticEngine &diags,
                   const GradRegistry &registry);

/// Builds into `vjp` (an empty function, usually of a scratch module) the
/// vector-Jacobian product of `fn`, which must have a GradSpec: it takes
/// fn's parameters and then one cotangent per result, even when fn returns
/// one scalar, and returns fn's results followed by the gradients of the
/// `wrt` parameters. Callees, rule instances and generated gradients are
/// looked up in `module`, which is not changed. The `split` pass cuts this
/// function into NAME_fwd and NAME_bwd (Transforms/Passes.h). Returns false
/// after reporting an error.
bool buildVJP(const ir::Module &module, const ir::Function &fn,
              ir::Function &vjp, DiagnosticEngine &diags);

/// Builds into `out` (an empty function of `module`) the value and the
/// gradient of `fn`, which must have a GradSpec, from one forward pass:
/// it takes what NAME_grad takes (fn's parameters, then one cotangent per
/// result unless fn returns one floating-point scalar, whose seed is 1) and
/// returns fn's results followed by what NAME_grad returns. The
/// `value-and-grad` pass adds it as NAME_value_and_grad
/// (Transforms/Passes.h). Returns false after reporting an error.
bool buildValueAndGrad(ir::Module &module, const ir::Function &fn,
                       ir::Function &out, DiagnosticEngine &diags);

} // namespace gradc::ad

#endif // GRADC_AD_REVERSEMODE_H
