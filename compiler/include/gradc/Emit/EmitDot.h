//===- EmitDot.h - Graphviz view of forward and backward graphs -*- C++ -*-===//
//
// `gradc --emit=dot`: one cluster per function, params and ops as nodes,
// SSA uses as edges. In a generated gradient, the ops differentiation made
// are coloured by the rule that made them (built-in, @override,
// @custom_grad or grad block), so a user sees where an override took
// effect — the thing TensorFlow's gradient_override_map never shows.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_EMITDOT_H
#define GRADC_EMIT_EMITDOT_H

#include "gradc/IR/IR.h"

#include "llvm/Support/raw_ostream.h"

namespace gradc::emit {

/// Where an op of a gradient function came from, read from its note.
enum class GradOrigin { Forward, Seed, BuiltIn, Override, CustomGrad };

GradOrigin classifyGradOrigin(const ir::Op &op);

void emitDot(const ir::Module &module, llvm::raw_ostream &os);

} // namespace gradc::emit

#endif // GRADC_EMIT_EMITDOT_H
