//===- DCE.cpp - Dead code elimination ------------------------------------===//
//
// Every op is pure, so an op none of whose results is used can go. The
// other passes leave such ops behind on purpose (simplify replaces
// `a * 0` by a zero but does not look at whether `a` is still needed);
// this pass removes them in one backward walk per function.
//
// Rule instances (Role::RuleInstance) are internal functions that a
// gradient rule annotation or a call names; once nothing names one, it is
// removed too. User functions and generated gradients are never removed:
// they are the module's interface.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

using namespace gradc;
using namespace gradc::ir;

namespace {

void removeDeadOps(Function &fn) {
  llvm::DenseSet<const Value *> used(fn.getReturns().begin(),
                                     fn.getReturns().end());
  llvm::DenseSet<const Op *> dead;
  const auto &ops = fn.getOps();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const Op &op = **it;
    bool live = llvm::any_of(op.getResults(),
                             [&](const Value *r) { return used.contains(r); });
    if (!live) {
      dead.insert(&op);
      continue;
    }
    used.insert(op.getOperands().begin(), op.getOperands().end());
  }
  if (!dead.empty())
    fn.eraseOpsIf([&](const Op &op) { return dead.contains(&op); });
}

/// The functions that the module names: by a call, as the gradient rule
/// an annotation chose for an op, or as a @custom_grad function's own rule
/// (which differentiating it again, or splitting it, needs).
llvm::StringSet<> namedFunctions(const Module &module) {
  llvm::StringSet<> names;
  for (const auto &fn : module.getFunctions()) {
    if (fn->getCustomGrad().isSet())
      names.insert(fn->getCustomGrad().function);
    for (const auto &op : fn->getOps()) {
      for (llvm::StringRef f : op->getCalledFunctions())
        names.insert(f);
      // A checkpointed reverse loop reruns the forward body it names.
      if (op->getKind() == OpKind::For && op->getAttrs().has("recompute"))
        names.insert(op->getAttrs().getString("recompute"));
      if (op->getGradRule().isSet())
        names.insert(op->getGradRule().function);
    }
  }
  return names;
}

/// Removes the rule instances that nothing names. Removing one may leave
/// another unnamed (a rule that calls a function), hence the loop.
void removeDeadRuleInstances(Module &module) {
  for (;;) {
    llvm::StringSet<> named = namedFunctions(module);
    Function *unused = nullptr;
    for (const auto &fn : module.getFunctions())
      if ((fn->getRole() == Function::Role::RuleInstance ||
           fn->getRole() == Function::Role::LoopBody) &&
          !named.contains(fn->getName())) {
        unused = fn.get();
        break;
      }
    if (!unused)
      return;
    module.eraseFunction(unused);
  }
}

} // namespace

bool gradc::runDCE(Module &module, DiagnosticEngine &) {
  for (const auto &fn : module.getFunctions())
    removeDeadOps(*fn);
  removeDeadRuleInstances(module);
  return true;
}
