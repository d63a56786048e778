//===- SizeChecks.h - Element counts generated code must check --*- C++ -*-===//
//
// The sizes of a call are the caller's: `f32[B, 5]` with B =
// 3689348814741910324 has 18446744073709551620 elements, which wraps to 4
// in 64-bit index arithmetic, and every loop, offset and allocation of the
// function would then be computed from the wrapped count. So before it
// touches memory, every generated function checks that the element count
// of every tensor it reads, writes or computes fits in int64_t, and
// returns GRADC_ERROR_SIZE otherwise (docs/ABI.md). Once those counts fit,
// every offset and loop bound inside the function is below one of them and
// cannot wrap; allocations check their byte counts themselves
// (GRADC_ERROR_ALLOC). This file is the one place that decides which
// products to check; both backends print the checks it lists.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_SIZECHECKS_H
#define GRADC_EMIT_SIZECHECKS_H

#include "gradc/IR/IR.h"

#include <string>
#include <vector>

namespace gradc::emit {

/// An element count that can overflow: `constant` times the size names in
/// `names` (in the order of the shape, with repetition).
struct SizeProduct {
  int64_t constant = 1;
  std::vector<std::string> names;
};

/// The element counts of the tensors of `fn` (parameters, results and
/// every op's results) that involve size names and could exceed INT64_MAX:
/// a product of two or more size names, or of one and a constant above 1.
/// For each multiset of names only the largest constant is listed (if it
/// fits, the smaller ones do); a count with a known size 0 is never listed.
/// The order is deterministic (first appearance in the function).
std::vector<SizeProduct> sizeProductsToCheck(const ir::Function &fn);

} // namespace gradc::emit

#endif // GRADC_EMIT_SIZECHECKS_H
