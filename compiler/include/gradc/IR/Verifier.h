//===- Verifier.h - Checking IR invariants ----------------------*- C++ -*-===//

#ifndef GRADC_IR_VERIFIER_H
#define GRADC_IR_VERIFIER_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

namespace gradc::ir {

/// Checks types and shapes (with the op table), dominance (every operand
/// defined earlier), arity, attributes and calls. Each problem is reported
/// as an error naming the op, the function and `afterPass` (the pass that
/// just ran, or "" for input IR). Returns false if any was found.
bool verifyModule(const Module &module, DiagnosticEngine &diags,
                  llvm::StringRef afterPass = "");

} // namespace gradc::ir

#endif // GRADC_IR_VERIFIER_H
