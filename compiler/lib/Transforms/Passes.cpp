//===- Passes.cpp - The pass registry -------------------------------------===//
//
// The drivers know passes only by name: `gradc --passes=` and
// `gradc-opt --passes=` hand a comma-separated list to runPasses, which
// checks every name first (so a typo does not run half a pipeline), then
// runs the passes in order and, when asked, verifies the module after each
// one so that a broken pass is caught at the pass that broke it.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "gradc/AD/ReverseMode.h"
#include "gradc/Basic/Timing.h"
#include "gradc/IR/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace gradc;

namespace {

bool runDifferentiate(ir::Module &module, DiagnosticEngine &diags) {
  return ad::differentiate(module, diags);
}

const PassInfo passes[] = {
    {"differentiate", "add NAME_grad for every function marked @grad",
     runDifferentiate},
    {"inline", "replace every call by the callee's body", runInline},
    {"simplify", "exact algebraic identities and zero propagation",
     runSimplify},
    {"fold", "evaluate ops on constants with the reference interpreter",
     runConstantFold},
    {"cse", "merge ops that compute the same value", runCSE},
    {"dce", "remove unused ops and rule instances", runDCE},
    {"canonicalize", "simplify, fold, cse and dce until nothing changes",
     runCanonicalize},
    {"tape-residuals",
     "loop tapes keep the values a loop's VJP reads instead of recomputing "
     "them",
     runTapeResiduals},
    {"split", "add NAME_fwd and NAME_bwd, the split form of each gradient",
     runSplitGrad},
    {"value-and-grad",
     "add NAME_value_and_grad, the results and the gradient in one call",
     runValueAndGrad},
    {"accumulate-f32", "f32 sums add in f32, 16 lanes wide (docs/IR.md)",
     runAccumulateF32},
};

std::string knownPassNames() {
  llvm::SmallVector<llvm::StringRef, 8> names;
  for (const PassInfo &p : passes)
    names.push_back(p.name);
  return llvm::join(names, ", ");
}

} // namespace

llvm::ArrayRef<PassInfo> gradc::getAllPasses() { return passes; }

const PassInfo *gradc::lookupPass(llvm::StringRef name) {
  for (const PassInfo &p : passes)
    if (name == p.name)
      return &p;
  return nullptr;
}

llvm::StringRef gradc::getDefaultPipeline() {
  return "canonicalize,tape-residuals";
}

bool gradc::runPasses(ir::Module &module, llvm::StringRef pipeline,
                      DiagnosticEngine &diags, bool verifyEach) {
  if (pipeline.trim().empty())
    return true;
  llvm::SmallVector<llvm::StringRef, 8> names;
  pipeline.split(names, ',');
  llvm::SmallVector<const PassInfo *, 8> toRun;
  bool ok = true;
  bool reportedEmpty = false; // once per list, however many commas
  for (llvm::StringRef name : names) {
    name = name.trim();
    if (name.empty()) {
      if (!reportedEmpty)
        diags.report(SourceLoc(), diag::err_empty_pass_name) << pipeline;
      reportedEmpty = true;
      ok = false;
      continue;
    }
    const PassInfo *pass = lookupPass(name);
    if (!pass) {
      diags.report(SourceLoc(), diag::err_unknown_pass)
          << name << knownPassNames();
      ok = false;
      continue;
    }
    toRun.push_back(pass);
  }
  if (!ok)
    return false;
  for (const PassInfo *pass : toRun) {
    {
      TimeRegion region(pass->name);
      if (!pass->run(module, diags))
        return false;
    }
    if (!verifyEach)
      continue;
    TimeRegion region("verify");
    if (!ir::verifyModule(module, diags, pass->name))
      return false;
  }
  return true;
}
