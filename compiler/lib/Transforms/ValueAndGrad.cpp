//===- ValueAndGrad.cpp - NAME_value_and_grad: the loss and its gradient --===//
//
// A training step wants the loss and its gradient. NAME_grad returns only
// the gradient, so a caller that also calls NAME runs the forward twice.
// Like JAX's `value_and_grad`, this pass adds for every function `f`
// marked @grad
//
//   f_value_and_grad(params[, cotangents]) -> (results, gradients)
//
// taking what f_grad takes (the seed of a scalar loss is 1) and returning
// f's results, then what f_grad returns. It is ad::buildValueAndGrad: the
// same forward copy and reverse sweep as f_grad, with the forward's results
// returned too, so the forward runs once. The pipeline's passes that run
// after it simplify it like any function; `gradc --value-and-grad` runs it
// right after differentiation, before them.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "gradc/AD/ReverseMode.h"

using namespace gradc;
using namespace gradc::ir;

bool gradc::runValueAndGrad(Module &module, DiagnosticEngine &diags) {
  // The pass adds functions: collect first.
  std::vector<Function *> todo;
  for (const auto &fn : module.getFunctions()) {
    const auto &spec = fn->getGradSpec();
    // A module that has it already (printed IR read back) keeps it.
    if (spec && spec->valueAndGradName.empty())
      todo.push_back(fn.get());
  }
  for (Function *fn : todo) {
    Function::GradSpec spec = *fn->getGradSpec();
    std::string name = fn->getName().str() + "_value_and_grad";
    if (const Function *existing = module.lookup(name)) {
      diags.report(spec.loc, diag::err_value_and_grad_name_clash)
          << name << fn->getName();
      if (existing->getLoc().isValid())
        diags.report(existing->getLoc(), diag::note_split_declared_here)
            << name;
      return false;
    }
    Function *out = module.addFunction(name);
    if (!ad::buildValueAndGrad(module, *fn, *out, diags)) {
      module.eraseFunction(out);
      return false;
    }
    spec.valueAndGradName = name;
    fn->setGradSpec(std::move(spec));
  }
  return true;
}
