//===- Inline.cpp - The inline pass ---------------------------------------===//
//
// Replaces calls by the bodies of their callees, with the inliner that
// differentiation uses (IR/Inline.h). After inlining, simplify, cse and
// dce see across what were function boundaries: a gradient that calls the
// forward function and then its own reverse sweep shares the forward ops.
//
// A call whose gradient an annotation chose (`@custom_grad`) stays a call:
// its body must not be differentiated, and inlining it would lose the rule
// if the caller is differentiated later.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "gradc/IR/Inline.h"

#include "llvm/ADT/StringExtras.h"

using namespace gradc;
using namespace gradc::ir;

namespace {

bool shouldInline(const Op &op) {
  return op.getKind() == OpKind::Call && !op.getGradRule().isSet();
}

void reportFailure(const Function &caller, const InlineFailure &failure,
                   DiagnosticEngine &diags) {
  switch (failure.kind) {
  case InlineFailure::Kind::UnknownCallee:
    diags.report(failure.loc, diag::err_inline_unknown_callee)
        << failure.callee;
    return;
  case InlineFailure::Kind::Recursion:
    diags.report(failure.loc, diag::err_inline_recursion)
        << failure.callee
        << caller.getName().str() + " -> " + llvm::join(failure.chain, " -> ");
    return;
  case InlineFailure::Kind::None:
    return;
  }
}

} // namespace

bool gradc::runInline(Module &module, DiagnosticEngine &diags) {
  for (const auto &fn : module.getFunctions()) {
    InlineFailure failure;
    if (!inlineAllCalls(module, *fn, shouldInline, failure)) {
      reportFailure(*fn, failure, diags);
      return false;
    }
  }
  return true;
}
