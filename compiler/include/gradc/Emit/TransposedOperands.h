//===- TransposedOperands.h - matmul operands read in place -----*- C++ -*-===//
//
// The nests that only transpose a matmul operand, which the printers of
// the loop IR leave out: the kernel reads the source in place, transposed
// (the C++ runtime's gradc::Transposed, the LLVM backend's narrow kernel).
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_TRANSPOSEDOPERANDS_H
#define GRADC_EMIT_TRANSPOSEDOPERANDS_H

#include "gradc/Loops/LoopIR.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/FunctionExtras.h"

namespace gradc::emit {

struct TransposedOperands {
  /// Each transposed copy that is not stored, and the buffer it copies.
  llvm::DenseMap<const loops::Buffer *, const loops::Buffer *> from;
  /// The nests that stored those copies: not printed.
  llvm::DenseSet<const loops::Stmt *> elided;
  /// The nest of each copy (a key of `from`): the loop over a batch when
  /// there is one.
  llvm::DenseMap<const loops::Buffer *, const loops::Stmt *> nestOf;
};

/// Finds the nests `for i < R { for j < C { t[i * C + j] = x[j * R + i] } }`
/// at the top of `fn` whose `t` only a later matmul of the same block reads
/// (at offset 0, as an R x C operand), with no statement between them that
/// writes `x` or its storage, and for which `wanted` (given the kernel)
/// holds: that kernel can read `x` transposed instead, so no transpose is
/// stored. With `batches`, also such a nest in a loop over a batch of
/// matrices, `t[b * (R * C) + i * C + j] = x[b * (C * R) + j * R + i]`,
/// whose `t` the next loop over the batch passes to one matmul per matrix
/// at `b * (R * C)` (the loop is elided; the kernel reads `x` at the same
/// offset).
TransposedOperands findTransposedOperands(
    const loops::LoopFunction &fn,
    llvm::function_ref<bool(const loops::Stmt &kernel)> wanted,
    bool batches = false);

} // namespace gradc::emit

#endif // GRADC_EMIT_TRANSPOSEDOPERANDS_H
