//===- SizeChecks.cpp - Element counts generated code must check ----------===//
//
// Collects the shapes of a function and reduces them to the few products
// that the generated prologue checks (SizeChecks.h).
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/SizeChecks.h"

#include <algorithm>
#include <limits>

using namespace gradc;
using namespace gradc::emit;

std::vector<SizeProduct> emit::sizeProductsToCheck(const ir::Function &fn) {
  std::vector<SizeProduct> products;
  auto add = [&](const TensorType &type) {
    SizeProduct p;
    for (const Dim &d : type.shape) {
      if (d.isNamed()) {
        p.names.push_back(d.getName().str());
        continue;
      }
      if (d.getSize() == 0)
        return; // no elements, whatever the names
      // A constant part that overflows by itself is Sema's to reject; it
      // saturates here, so the check fails for every non-zero size.
      if (p.constant > std::numeric_limits<int64_t>::max() / d.getSize())
        p.constant = std::numeric_limits<int64_t>::max();
      else
        p.constant *= d.getSize();
    }
    if (p.names.empty() || (p.names.size() == 1 && p.constant <= 1))
      return;
    // The same names in any order are the same product; the first
    // spelling is kept.
    std::vector<std::string> key = p.names;
    std::sort(key.begin(), key.end());
    for (SizeProduct &q : products)
      if (std::is_permutation(q.names.begin(), q.names.end(), key.begin(),
                              key.end())) {
        q.constant = std::max(q.constant, p.constant);
        return;
      }
    products.push_back(std::move(p));
  };
  for (const ir::Value *v : fn.getParams())
    add(v->getType());
  for (const ir::Value *v : fn.getReturns())
    add(v->getType());
  for (const auto &op : fn.getOps())
    for (const ir::Value *v : op->getResults())
      add(v->getType());
  return products;
}
