//===- Passes.h - IR passes by name -----------------------------*- C++ -*-===//
//
// Every IR-to-IR transformation is a pass with one entry point, known to
// the drivers by name (`gradc-opt --passes=simplify,cse`), so that each can
// be tested on its own. docs/Passes.md describes each pass and what it
// guarantees about floating-point results.
//
// Every pass keeps the module well typed (the verifier can run after each
// one), keeps the location and note of every op it does not remove, and is
// deterministic: the same input gives the same output, op for op.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_TRANSFORMS_PASSES_H
#define GRADC_TRANSFORMS_PASSES_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace gradc {

/// A pass returns false only after reporting a diagnostic.
using PassFn = bool (*)(ir::Module &module, DiagnosticEngine &diags);

struct PassInfo {
  const char *name;
  const char *description;
  PassFn run;
};

/// All passes, in a stable order.
llvm::ArrayRef<PassInfo> getAllPasses();
/// The pass called `name`, or null.
const PassInfo *lookupPass(llvm::StringRef name);

/// Runs a comma-separated list of passes (spaces around names are
/// ignored; "" runs none), verifying the module after each one when
/// `verifyEach` is set. Every name is checked before any pass runs: an
/// unknown or empty name is an error that lists the known passes. Stops at
/// the first pass or verification that fails and returns false.
bool runPasses(ir::Module &module, llvm::StringRef pipeline,
               DiagnosticEngine &diags, bool verifyEach);

/// What `gradc` runs after differentiation unless -O0 or --passes= is
/// given: "canonicalize,tape-residuals".
llvm::StringRef getDefaultPipeline();

//===----------------------------------------------------------------------===//
// The passes. Each lives in its own file of lib/Transforms; the registry
// names them. All ops are pure, so removing or merging an op never changes
// what a function computes. An op whose gradient an annotation chose (its
// GradRuleAttr is set) is never rewritten or folded, since the function may
// still be differentiated and the rule must then apply.
//===----------------------------------------------------------------------===//

/// `simplify`: algebraic identities that are exact in floating point, and
/// propagation of structural zeros (see docs/Passes.md). In each function:
///  1. Walk the ops in order, first redirecting each operand to the value
///     that replaced it.
///  2. Record which values are structural zeros: results of `zeros_like`,
///     integer and bool constants that are all zero, and the results of
///     ops that map zeros to zeros (`mul` with a zero operand, `sum`,
///     `transpose`, `matmul` with a zero operand, ...).
///  3. Rewrite the op when an identity applies: drop zero terms of `add`
///     and `sub`, replace `x * 1`, `x / 1`, `identity(x)`, `neg(neg(x))`,
///     `select(c, x, x)` by `x`, compose `transpose`, `reshape` and
///     `broadcast_to` chains, drop no-op layout ops, and replace an op that
///     computes zeros by an existing zero of its type or by `zeros_like`.
///     When the surviving operand has a smaller (broadcast) type than the
///     op's result, it is broadcast with `broadcast_to`.
///  4. Point each `zeros_like`/`ones_like` at the cheapest value of the
///     same type (a parameter, else the earliest value in its chain), since
///     only the type matters.
///  5. Remove the replaced ops and repeat until nothing changes.
/// Leaves other ops that became unused for `dce`.
bool runSimplify(ir::Module &module, DiagnosticEngine &diags);

/// `tape-residuals`: the forward loop of a differentiated loop also stacks
/// the values that the loop body's VJP reads (its residuals), and the
/// reverse loop reads them instead of running the body's forward again
/// (TapeResiduals.cpp, docs/Passes.md). Canonicalizes after a change.
bool runTapeResiduals(ir::Module &module, DiagnosticEngine &diags);

/// `fold`: constant folding with the reference interpreter. In each
/// function:
///  1. A constant whose elements are all equal becomes a splat constant.
///  2. `ones_like(x)` becomes a splat constant 1 of x's type.
///  3. An op whose operands are all constants and whose results have
///     known shapes with at most 64 elements in all is evaluated by
///     ir::interpret on a one-op module and replaced by constants.
///  4. An elementwise op on splat constants is evaluated once on scalars,
///     and a layout op (`transpose`, `reshape`, `broadcast_to`, `stack`,
///     `concat`, `unstack`, `split`) or `max` on splats of one value gives
///     a splat, whatever the size, size names included.
/// An op whose evaluation fails (an integer division by zero) is kept, so
/// the error still happens at run time.
bool runConstantFold(ir::Module &module, DiagnosticEngine &diags);

/// `cse`: common subexpression elimination. In each function:
///  1. Walk the ops in order, redirecting operands to kept values.
///  2. Two ops are the same computation when they have the same kind,
///     operands, attributes, result types and gradient rule.
///  3. Keep the first; replace the results of a later one by the first's
///     and remove it. The kept value takes the removed one's name if it
///     had none.
bool runCSE(ir::Module &module, DiagnosticEngine &diags);

/// `dce`: dead code elimination.
///  1. In each function, walk the ops backwards from the returned values,
///     keeping an op when one of its results is used, and remove the rest.
///  2. Remove every rule-instance function (Role::RuleInstance) that no
///     call, no op's gradient rule and no function's own (@custom_grad)
///     rule in the module names any more, repeating until none is left.
bool runDCE(ir::Module &module, DiagnosticEngine &diags);

/// `inline`: in every function, replaces each call of a function of the
/// module by a copy of its body, repeatedly, until no call is left. A call
/// whose gradient an annotation chose (`@custom_grad`) is kept. Reports a
/// recursive call or an unknown callee as an error.
bool runInline(ir::Module &module, DiagnosticEngine &diags);

/// `split`: the split form of every gradient, for embedding into another
/// autodiff system (docs/ABI.md). For each function `f` marked @grad that
/// has no split form yet, adds `f_fwd` (f's parameters; returns f's
/// results, then the residuals) and `f_bwd` (f's parameters, the
/// residuals, one cotangent per result even for a scalar result; returns
/// what f_grad returns):
///  1. Build the vector-Jacobian product of `f` (ad::buildVJP) in a
///     scratch module and canonicalize it, whatever the pipeline.
///  2. The ops that f's results depend on go to f_fwd; the other ops the
///     gradients need go to f_bwd, recomputed there rather than stored.
///  3. The residuals are the forward values, other than parameters, that
///     f_bwd reads; constants and fills are copied instead.
/// Records the names in f's GradSpec. Reports a name that is taken.
bool runSplitGrad(ir::Module &module, DiagnosticEngine &diags);

/// `value-and-grad`: for each function `f` marked @grad that has none
/// yet, adds `f_value_and_grad` (ad::buildValueAndGrad): it takes what
/// f_grad takes and returns f's results, then what f_grad returns, from
/// one forward pass (docs/ABI.md). Records the name in f's GradSpec.
/// Reports a name that is taken.
bool runValueAndGrad(ir::Module &module, DiagnosticEngine &diags);

/// `accumulate-f32`: sets `accumulate = "f32"` on every op that sums f32
/// data (sum, mean, logsumexp, softmax, log_softmax,
/// softmax_cross_entropy, matmul), which selects the second summation
/// order of docs/IR.md: f32 accumulators, 16 lanes along the last axis.
/// `gradc --accumulate=f32` runs it first and last.
bool runAccumulateF32(ir::Module &module, DiagnosticEngine &diags);

/// `canonicalize`: runs simplify, fold, cse and dce in turn until the
/// module stops changing (at most 16 rounds). The default pipeline.
bool runCanonicalize(ir::Module &module, DiagnosticEngine &diags);

} // namespace gradc

#endif // GRADC_TRANSFORMS_PASSES_H
