//===- CSE.cpp - Common subexpression elimination -------------------------===//
//
// Every op of the IR is pure (the language has no state and no control
// flow), so two ops of the same kind on the same operands with the same
// attributes compute the same tensors, and the later one can use the
// earlier one's results. Differentiation needs this: the reverse sweep
// recomputes forward values (`transpose(W)` once per use of W) and two
// rules often build the same intermediate.
//
// Two ops that differ only in their gradient rule are not merged: when the
// function is differentiated again, each must keep its own rule.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "Rewriter.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace gradc;
using namespace gradc::ir;
using namespace gradc::transforms;

namespace {

/// Writes to `key` a string that is equal for two ops exactly when they compute
/// the same thing: kind, operand identities, attributes (with their variant
/// kind), result types and gradient rule. Only used as a map key, so operands
/// are identified by address.
void computationKey(const Op &op, llvm::SmallVectorImpl<char> &key) {
  key.clear();
  llvm::raw_svector_ostream os(key);
  os << op.getName() << '(';
  for (const Value *v : op.getOperands())
    os << static_cast<const void *>(v) << ',';
  os << '{';
  for (const NamedAttr &a : op.getAttrs().entries())
    os << a.name << '#' << a.value.index() << '=' << attrValueStr(a.value)
       << ';';
  os << "}->";
  for (const Value *r : op.getResults()) {
    r->getType().print(os);
    os << ',';
  }
  // The rule function is the instance of a rule at one use, so it
  // identifies the rule; where the annotation was written does not matter.
  const GradRuleAttr &rule = op.getGradRule();
  if (rule.isSet())
    os << " rule " << rule.function << '/' << rule.ruleName << '/' << rule.via;
}

} // namespace

bool gradc::runCSE(Module &module, DiagnosticEngine &) {
  for (const auto &fn : module.getFunctions()) {
    FunctionRewriter rewriter(*fn);
    // A StringMap keeps each key in its entry (one allocation, not a
    // node and a string), and the entries of one function come from one
    // bump allocator (not a malloc each: 700,000 in a gradient of 100,000
    // steps); the key is built on the stack.
    llvm::StringMap<Op *, llvm::BumpPtrAllocator> seen;
    llvm::SmallString<256> key;
    rewriter.run([&](Op &op) {
      // Operands were already redirected to the kept ops' results, so a
      // chain of duplicates collapses in this one walk.
      computationKey(op, key);
      auto [it, inserted] = seen.try_emplace(key, &op);
      if (inserted)
        return false;
      return rewriter.replaceOp(
          op, llvm::SmallVector<Value *, 2>(it->second->getResults()));
    });
  }
  return true;
}
