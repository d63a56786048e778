//===- Verifier.h - Checking IR invariants ----------------------*- C++ -*-===//
//
// The verifier runs after IRGen, after differentiation, after every pass
// (gradc-opt --verify-each) and on parsed IR. docs/IR.md lists its checks.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_VERIFIER_H
#define GRADC_IR_VERIFIER_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

#include <map>
#include <string>

namespace gradc::ir {

/// Checks types and shapes (with the op table), dominance (every operand
/// defined earlier), arity, attributes and calls. Each problem is reported
/// as an error naming the op, the function and `afterPass` (the pass that
/// just ran, or "" for input IR), at the op's location (the message stands
/// alone when the location is invalid). Returns false if any was found.
bool verifyModule(const Module &module, DiagnosticEngine &diags,
                  llvm::StringRef afterPass = "");

/// Size-name bindings of a callee at one call: its size name -> the
/// caller's dimension.
using SizeBindings = std::map<std::string, Dim>;

/// Matches a callee's parameter type against an argument type, binding the
/// parameter's size names. Known sizes must be equal; a size name must
/// mean the same dimension every time. On a conflict returns false and,
/// for a size name bound twice, sets `conflictName`.
bool unifyParamType(const TensorType &param, const TensorType &arg,
                    SizeBindings &bindings, std::string &conflictName);

/// `type` with the callee's size names replaced by their bindings.
TensorType substituteSizes(const TensorType &type,
                           const SizeBindings &bindings);

} // namespace gradc::ir

#endif // GRADC_IR_VERIFIER_H
