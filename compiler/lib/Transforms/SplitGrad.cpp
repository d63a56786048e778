//===- SplitGrad.cpp - The split form of gradients: NAME_fwd, NAME_bwd ----===//
//
// Another autodiff system (a PyTorch autograd.Function, a JAX custom_vjp,
// a hand-written tape) calls a layer's forward during its own forward pass
// and the layer's backward much later, with the cotangent it computed. For
// that, `split` adds for every function `f` marked @grad:
//
//   f_fwd(params)                                  -> (results, residuals)
//   f_bwd(params, results, residuals, cotangents)  -> gradients of wrt params
//
// that is, f_bwd takes everything f_fwd took and returned, then one
// cotangent per result (even for a scalar result, whose f_grad implies 1).
//
// The cut is made on the vector-Jacobian product of `f` (ad::buildVJP: an
// explicit cotangent for every result, the results returned first) after
// canonicalization:
//
//   1. Forward ops are those the results depend on. f_fwd runs exactly
//      these, so it costs what `f` costs, plus writing the residuals.
//   2. Every other op the gradients need runs in f_bwd, including ops that
//      do not depend on a cotangent (`1 - h*h` for tanh, a transpose of a
//      weight): recomputing them is cheaper than storing them, and the
//      parameters are passed to f_bwd again.
//   3. Residuals are the forward values, other than parameters and
//      results, that an op of f_bwd or a returned gradient reads. A forward
//      constant is copied into f_bwd instead, and a `zeros_like`/`ones_like`
//      whose operand the half lacks (f_bwd a forward value, or f_fwd a
//      cotangent that canonicalization put under a forward fill) becomes a
//      constant of its type, since only the type matters.
//
// f_bwd(x, residuals, dy) computes the same ops as f_grad(x, dy) (with dy
// = 1 for a scalar result), so the two agree to the last bit on every
// backend; the tests compare them.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "gradc/AD/ReverseMode.h"
#include "gradc/IR/Builder.h"

#include "Rewriter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace gradc;
using namespace gradc::ir;
using namespace gradc::transforms;

namespace {

/// Step 1: the ops that the first `numResults` returned values depend on.
void markForward(const Function &vjp, unsigned numResults, Cut &cut) {
  std::vector<const Value *> work(vjp.getReturns().begin(),
                                  vjp.getReturns().begin() + numResults);
  while (!work.empty()) {
    const Op *def = work.back()->getDefiningOp();
    work.pop_back();
    if (!def || !cut.forward.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
}

/// Steps 2 and 3: the ops the gradients need outside the forward, and the
/// forward values they read. Parameters and results are f_bwd's
/// parameters.
void markBackward(const Function &vjp, unsigned numResults, Cut &cut) {
  auto returns = vjp.getReturns();
  transforms::markBackward(
      vjp, {returns.begin() + numResults, returns.end()},
      {returns.begin(), returns.begin() + numResults},
      [](const Op &) { return false; }, cut);
}

void cloneParams(const Function &from, unsigned begin, unsigned end,
                 Function &to, llvm::DenseMap<const Value *, Value *> &map) {
  for (unsigned i = begin; i < end; ++i) {
    const Value *p = from.getParam(i);
    map[p] = to.addParam(p->getType(), p->getName());
  }
}

/// f_fwd: the parameters, the forward ops, and the results followed by the
/// residuals. An unnamed residual is named `res<i>` here and in f_bwd, so
/// that the two halves of the ABI name it alike.
void buildForward(const Function &vjp, unsigned numParams, unsigned numResults,
                  const Cut &cut, Function &fwd) {
  llvm::DenseMap<const Value *, Value *> map;
  cloneParams(vjp, 0, numParams, fwd, map);
  for (const auto &op : vjp.getOps())
    if (cut.forward.contains(op.get()))
      cloneOrFill(*op, fwd, map);
  std::vector<Value *> returns;
  for (unsigned i = 0; i < numResults; ++i)
    returns.push_back(map.lookup(vjp.getReturns()[i]));
  for (size_t i = 0; i < cut.residuals.size(); ++i) {
    Value *r = map.lookup(cut.residuals[i]);
    if (r->getName().empty())
      r->setName("res" + std::to_string(i));
    returns.push_back(r);
  }
  fwd.setReturns(returns);
}

/// "out" for one result, "out0", "out1", ... for several: the names of
/// the results in the C ABI (docs/ABI.md).
std::string resultName(unsigned i, unsigned numResults) {
  return numResults == 1 ? "out" : "out" + std::to_string(i);
}

/// f_bwd: the parameters, the results, the residuals, the cotangents,
/// then the backward ops; returns the gradients.
void buildBackward(const Function &vjp, const Function &fwd, unsigned numParams,
                   unsigned numResults, const Cut &cut, Function &bwd) {
  llvm::DenseMap<const Value *, Value *> map;
  cloneParams(vjp, 0, numParams, bwd, map);
  for (unsigned i = 0; i < numResults; ++i) {
    const Value *result = vjp.getReturns()[i];
    Value *param = bwd.addParam(result->getType(), resultName(i, numResults));
    // A result that is a parameter, or is returned twice, is read from
    // where it was passed first.
    map.try_emplace(result, param);
  }
  for (size_t i = 0; i < cut.residuals.size(); ++i) {
    const Value *named = fwd.getReturns()[numResults + i];
    map[cut.residuals[i]] =
        bwd.addParam(cut.residuals[i]->getType(), named->getName());
  }
  cloneParams(vjp, numParams, vjp.getParams().size(), bwd, map);
  for (const auto &op : vjp.getOps())
    if (cut.backward.contains(op.get()))
      cloneOrFill(*op, bwd, map);
  std::vector<Value *> returns;
  for (size_t i = numResults; i < vjp.getReturns().size(); ++i)
    returns.push_back(map.lookup(vjp.getReturns()[i]));
  bwd.setReturns(returns);
}

/// Reports `name` if the module has it already; the split form of `fn`
/// would then overwrite a function.
bool checkNameFree(const Module &module, const Function &fn,
                   llvm::StringRef name, llvm::StringRef half,
                   DiagnosticEngine &diags) {
  const Function *existing = module.lookup(name);
  if (!existing)
    return true;
  diags.report(fn.getGradSpec()->loc, diag::err_split_name_clash)
      << name << half << fn.getName();
  if (existing->getLoc().isValid())
    diags.report(existing->getLoc(), diag::note_split_declared_here) << name;
  return false;
}

bool splitOne(Module &module, Function &fn, DiagnosticEngine &diags) {
  Function::GradSpec spec = *fn.getGradSpec();
  std::string fwdName = fn.getName().str() + "_fwd";
  std::string bwdName = fn.getName().str() + "_bwd";
  if (!checkNameFree(module, fn, fwdName, "forward", diags) ||
      !checkNameFree(module, fn, bwdName, "backward", diags))
    return false;

  // The VJP lives in a scratch module so that canonicalize sees it alone;
  // it calls nothing (differentiation inlines every call), so it needs no
  // other function there.
  Module scratch;
  Function *vjp = scratch.addFunction(fn.getName().str() + "_vjp");
  if (!ad::buildVJP(module, fn, *vjp, diags) ||
      !runCanonicalize(scratch, diags))
    return false;

  unsigned numParams = fn.getParams().size();
  unsigned numResults = fn.getReturns().size();
  Cut cut;
  markForward(*vjp, numResults, cut);
  markBackward(*vjp, numResults, cut);

  Function *fwd = module.addFunction(fwdName);
  fwd->setRole(Function::Role::Forward);
  fwd->setLoc(spec.loc);
  buildForward(*vjp, numParams, numResults, cut, *fwd);
  Function *bwd = module.addFunction(bwdName);
  bwd->setRole(Function::Role::Backward);
  bwd->setLoc(spec.loc);
  buildBackward(*vjp, *fwd, numParams, numResults, cut, *bwd);

  spec.fwdName = fwdName;
  spec.bwdName = bwdName;
  fn.setGradSpec(std::move(spec));
  return true;
}

} // namespace

bool gradc::runSplitGrad(Module &module, DiagnosticEngine &diags) {
  // Splitting adds functions: collect first.
  std::vector<Function *> todo;
  for (const auto &fn : module.getFunctions()) {
    const auto &spec = fn->getGradSpec();
    // A function split before (printed IR read back) keeps its halves.
    if (spec && spec->fwdName.empty())
      todo.push_back(fn.get());
  }
  bool ok = true;
  for (Function *fn : todo)
    ok &= splitOne(module, *fn, diags);
  return ok;
}
