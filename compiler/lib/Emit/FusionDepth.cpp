//===- FusionDepth.cpp - A bound on the depth of fused expressions --------===//
//
// The depth of every inlined value, computed in one forward pass over the
// ops (operands are defined before their users), and the values that
// would be too deep (FusionDepth.h).
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/FusionDepth.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

using namespace gradc;
using namespace gradc::emit;

std::vector<const ir::Value *>
emit::valuesToMaterialize(const ir::Function &fn,
                          llvm::function_ref<bool(const ir::Value *)> isInlined,
                          unsigned maxDepth) {
  // depth(v) = 1 + max depth of v's inlined operands, for an inlined v;
  // materialised values (and parameters) are 0.
  llvm::DenseMap<const ir::Value *, unsigned> depth;
  std::vector<const ir::Value *> materialize;
  for (const auto &op : fn.getOps()) {
    unsigned deepest = 0;
    for (const ir::Value *operand : op->getOperands())
      deepest = std::max(deepest, depth.lookup(operand));
    for (const ir::Value *v : op->getResults()) {
      if (!isInlined(v))
        continue;
      if (deepest + 1 > maxDepth) {
        materialize.push_back(v);
        continue;
      }
      depth[v] = deepest + 1;
    }
  }
  return materialize;
}
