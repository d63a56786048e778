//===- Canonicalize.cpp - The simplification passes to a fixpoint ---------===//
//
// The four cleanup passes feed each other: simplify turns `a * 0` into a
// zero and leaves `a` dead for dce; fold turns `ones_like(x)` into the
// constant 1 that simplify then drops from `dy * 1`; cse merges two equal
// constants that simplify then recognises as one operand. Running them in
// turn until the module stops changing gives one canonical result, which
// is what `gradc` runs after differentiation.
//
// "Stops changing" is decided by comparing a fingerprint of the module
// (every op with its operands, attributes and types) before and after a
// round, so that each pass keeps a single entry point.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "gradc/Basic/Timing.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace gradc;
using namespace gradc::ir;

namespace {

/// At most this many rounds; each round only removes ops or moves toward
/// a normal form, so real programs settle in two or three.
constexpr unsigned maxRounds = 16;

/// A text that changes whenever a pass changes the module: functions,
/// ops, operands (numbered in order of definition), attributes, result
/// types and names, and returns.
std::string fingerprint(const Module &module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  // Buffered: unbuffered, each `<<` is a call that appends to the string.
  os.SetBuffered();
  for (const auto &fn : module.getFunctions()) {
    llvm::DenseMap<const Value *, unsigned> number;
    for (const Value *p : fn->getParams())
      number.try_emplace(p, number.size());
    os << fn->getName() << '\n';
    for (const auto &op : fn->getOps()) {
      for (const Value *r : op->getResults()) {
        number.try_emplace(r, number.size());
        os << '%' << number.lookup(r) << ':' << r->getName() << ':';
        r->getType().print(os);
        os << ' ';
      }
      os << "= " << op->getName();
      for (const Value *v : op->getOperands())
        os << " %" << number.lookup(v);
      for (const NamedAttr &a : op->getAttrs().entries())
        os << ' ' << a.name << '=' << attrValueStr(a.value);
      os << '\n';
    }
    os << "return";
    for (const Value *v : fn->getReturns())
      os << " %" << number.lookup(v);
    os << '\n';
  }
  os.flush();
  return text;
}

} // namespace

bool gradc::runCanonicalize(Module &module, DiagnosticEngine &diags) {
  std::string before = fingerprint(module);
  for (unsigned round = 0; round < maxRounds; ++round) {
    auto timed = [&](llvm::StringRef name, PassFn pass) {
      TimeRegion region(name);
      return pass(module, diags);
    };
    if (!timed("simplify", runSimplify) || !timed("fold", runConstantFold) ||
        !timed("cse", runCSE) || !timed("dce", runDCE))
      return false;
    TimeRegion region("fingerprint");
    std::string after = fingerprint(module);
    if (after == before)
      break;
    before = std::move(after);
  }
  return true;
}
