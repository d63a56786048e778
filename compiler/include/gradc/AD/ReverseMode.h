//===- ReverseMode.h - Generating NAME_grad functions -----------*- C++ -*-===//
//
// For every function marked @grad, adds `NAME_grad` to the module: the
// forward computation followed by its reverse sweep, with each op's
// gradient taken from the registry (lib/AD/GradRegistry.h): a user rule an
// annotation chose, else the op's built-in rule.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_AD_REVERSEMODE_H
#define GRADC_AD_REVERSEMODE_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"


namespace gradc::ad {

/// Generates the gradient of every function that has a GradSpec, in an
/// order where a gradient that calls another generated gradient comes
/// after it. Returns false after reporting an error.
bool differentiate(ir::Module &module, DiagnosticEngine &diags);

} // namespace gradc::ad

#endif // GRADC_AD_REVERSEMODE_H
