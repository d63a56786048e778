//===- Inline.h - Replacing calls by the callee's body ----------*- C++ -*-===//
//
// The language has no control flow, so inlining a call is a copy of the
// callee's ops into the caller at the call, with the callee's parameters
// replaced by the call's arguments and the call's results by the callee's
// returned values. Differentiation inlines user functions before its
// reverse sweep (so one sweep sees every op) and the rule instances after
// it; the simplification passes may inline too.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_INLINE_H
#define GRADC_IR_INLINE_H

#include "gradc/IR/IR.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>
#include <vector>

namespace gradc::ir {

/// Replaces `call` (a `call` op of `caller` whose callee is `callee`) by a
/// copy of the callee's ops, placed where the call was. The copies keep
/// their locations, names, attributes and gradient rules; a copied op
/// without a note of its own takes the call's note, so that the ops of an
/// inlined gradient rule still say why they exist. A call result's name
/// moves to the value that replaces it when that value is a fresh,
/// unnamed copy. Returns the values that replaced the call's results.
std::vector<Value *> inlineCall(Function &caller, Op *call,
                                const Function &callee);

/// Why inlineAllCalls stopped.
struct InlineFailure {
  enum class Kind { None, UnknownCallee, Recursion };
  Kind kind = Kind::None;
  /// The call that could not be inlined: its location and callee.
  SourceLoc loc;
  std::string callee;
  /// For a recursion, the functions called one inside the other, from
  /// the caller's own body to the repeated callee (`f`, `g`, `f`).
  std::vector<std::string> chain;
};

/// Inlines, in `fn`, every call for which `shouldInline` holds, then every
/// such call that the inlined bodies contain, until none is left. Stops
/// and returns false with `failure` set at a call of a function that is
/// not in `module`, or at a call that would inline a function into itself
/// (recursion, direct or through other functions).
bool inlineAllCalls(const Module &module, Function &fn,
                    llvm::function_ref<bool(const Op &)> shouldInline,
                    InlineFailure &failure);

} // namespace gradc::ir

#endif // GRADC_IR_INLINE_H
