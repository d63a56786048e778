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

#include <cstring>

using namespace gradc;
using namespace gradc::ir;

namespace {

/// At most this many rounds; each round only removes ops or moves toward
/// a normal form, so real programs settle in two or three.
constexpr unsigned maxRounds = 16;

/// A record of the module that changes whenever a pass changes it:
/// functions, ops, operands (numbered in order of definition),
/// attributes, result types and names, and returns, as words compared
/// exactly (a text of the module, made once per round, was 8% of the
/// compile time of a gradient of 10,000 steps).
class Fingerprint {
public:
  /// `expected`: the words of the last round's, about as many (one
  /// allocation, not a vector grown by doubling and copied).
  explicit Fingerprint(const Module &module, size_t expected = 0) {
    words.reserve(expected);
    for (const auto &fn : module.getFunctions())
      addFunction(*fn);
  }
  bool operator==(const Fingerprint &o) const { return words == o.words; }
  size_t size() const { return words.size(); }

private:
  std::vector<uint64_t> words;

  void add(uint64_t w) { words.push_back(w); }

  void addString(llvm::StringRef s) {
    add(s.size());
    for (size_t at = 0; at < s.size(); at += 8) {
      uint64_t w = 0;
      std::memcpy(&w, s.data() + at, std::min<size_t>(8, s.size() - at));
      add(w);
    }
  }

  // A size name is interned: its address identifies it.
  void addDim(const Dim &d) {
    add(d.getSize());
    add(reinterpret_cast<uintptr_t>(d.getName().data()));
  }

  void addType(const TensorType &t) {
    add(static_cast<uint64_t>(t.dtype));
    add(t.shape.size());
    for (const Dim &d : t.shape)
      addDim(d);
  }

  void addDouble(double v) { add(printedDoubleBits(v)); }

  void addAttr(const NamedAttr &a) {
    addString(a.name);
    add(a.value.index());
    struct Adder {
      Fingerprint &f;
      void operator()(int64_t v) { f.add(v); }
      void operator()(bool v) { f.add(v); }
      void operator()(double v) { f.addDouble(v); }
      void operator()(const std::vector<int64_t> &v) {
        f.add(v.size());
        for (int64_t x : v)
          f.add(x);
      }
      void operator()(const std::vector<double> &v) {
        f.add(v.size());
        for (double x : v)
          f.addDouble(x);
      }
      void operator()(const Shape &v) {
        f.add(v.size());
        for (const Dim &d : v)
          f.addDim(d);
      }
      void operator()(const std::string &v) { f.addString(v); }
    };
    std::visit(Adder{*this}, a.value);
  }

  void addFunction(const Function &fn) {
    llvm::DenseMap<const Value *, unsigned> number;
    for (const Value *p : fn.getParams())
      number.try_emplace(p, number.size());
    addString(fn.getName());
    add(fn.getOps().size());
    for (const auto &op : fn.getOps()) {
      add(static_cast<uint64_t>(op->getKind()));
      add(op->getNumResults());
      for (const Value *r : op->getResults()) {
        number.try_emplace(r, number.size());
        addString(r->getName());
        addType(r->getType());
      }
      add(op->getNumOperands());
      for (const Value *v : op->getOperands())
        add(number.lookup(v));
      add(op->getAttrs().entries().size());
      for (const NamedAttr &a : op->getAttrs().entries())
        addAttr(a);
    }
    add(fn.getReturns().size());
    for (const Value *v : fn.getReturns())
      add(number.lookup(v));
  }
};

} // namespace

bool gradc::runCanonicalize(Module &module, DiagnosticEngine &diags) {
  Fingerprint before(module);
  for (unsigned round = 0; round < maxRounds; ++round) {
    auto timed = [&](llvm::StringRef name, PassFn pass) {
      TimeRegion region(name);
      return pass(module, diags);
    };
    if (!timed("simplify", runSimplify) || !timed("fold", runConstantFold) ||
        !timed("cse", runCSE) || !timed("dce", runDCE))
      return false;
    TimeRegion region("fingerprint");
    Fingerprint after(module, before.size() + before.size() / 8);
    if (after == before)
      break;
    before = std::move(after);
  }
  return true;
}
