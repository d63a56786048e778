//===- FusionDepth.h - A bound on the depth of fused code -------*- C++ -*-===//
//
// Both backends compute an elementwise value with one use inside the loop of
// its user (fusion), so a chain of n elementwise lets becomes one
// expression n levels deep. Past a few hundred levels that is C++ that
// Clang rejects (its bracket nesting limit is 256), and past a few
// thousand the emitters' own recursion over the expression overflows the
// stack. So the depth of a fused expression is bounded here, once for both
// backends: walking the ops in order, a value whose inlined chain would be
// deeper than maxFusedDepth is materialised (a named temporary) instead,
// and its users start a new chain.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_FUSIONDEPTH_H
#define GRADC_EMIT_FUSIONDEPTH_H

#include "gradc/IR/IR.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <vector>

namespace gradc::emit {

/// The most inlined values one fused expression may nest: deep enough that
/// ordinary code (a gradient's `d_h * (1 - h * h)`, a chain of a few dozen
/// elementwise lets) stays one loop, shallow enough for any C++ compiler's
/// nesting limits and for the emitters' recursion.
constexpr unsigned maxFusedDepth = 64;

/// The values of `fn` that must be materialised although the backend would
/// inline them (`isInlined`), so that no chain of inlined values is deeper
/// than `maxDepth`: the depth of an inlined value is one more than the
/// deepest of its inlined operands, and a value that would exceed
/// `maxDepth` is listed and counts as depth 0 for its users. One pass over
/// the ops, in order; no recursion.
std::vector<const ir::Value *>
valuesToMaterialize(const ir::Function &fn,
                    llvm::function_ref<bool(const ir::Value *)> isInlined,
                    unsigned maxDepth = maxFusedDepth);

} // namespace gradc::emit

#endif // GRADC_EMIT_FUSIONDEPTH_H
