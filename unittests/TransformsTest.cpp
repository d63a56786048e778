//===- TransformsTest.cpp - The pass registry and the passes --------------===//
//
// Builds small functions with ir::Builder, runs one pass, and checks the
// ops that remain through a compact dump of the function (independent of
// the IR printer): one line per op, `name(operands)`, values named by the
// index of the op that defines them (`%2`) or by their parameter name.
// The lit tests in test/Transforms cover the same passes on textual IR.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "gradc/IR/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <bit>
#include <limits>

using namespace gradc;
using namespace gradc::ir;

namespace {

Dim k(int64_t size) { return Dim::known(size); }
Dim n(llvm::StringRef name) { return Dim::named(name); }
TensorType f32(std::initializer_list<Dim> dims) {
  return TensorType(DType::F32, llvm::ArrayRef<Dim>(dims.begin(), dims.size()));
}
TensorType i32(std::initializer_list<Dim> dims) {
  return TensorType(DType::I32, llvm::ArrayRef<Dim>(dims.begin(), dims.size()));
}

/// Collects diagnostics as formatted messages.
class Collector : public DiagnosticConsumer {
public:
  void handle(const Diagnostic &d) override { messages.push_back(d.message); }
  std::vector<std::string> messages;
};

/// A module with one function `f`, a builder at its end and a diagnostic
/// engine.
struct Fixture {
  SourceManager sm;
  Collector collector;
  DiagnosticEngine diags{sm, collector};
  Module module;
  Function *fn = module.addFunction("f");
  Builder b{*fn};

  Value *param(const TensorType &t, llvm::StringRef name) {
    return fn->addParam(t, name);
  }
  bool run(llvm::StringRef pipeline) {
    return runPasses(module, pipeline, diags, /*verifyEach=*/true);
  }
  std::string dump() const { return dumpFunction(*fn); }

  /// Gives `op` (one operand, one result of the same type) the gradient
  /// rule `name`, a rule instance that passes the cotangent through, as
  /// an @override would.
  void setRule(Op &op, llvm::StringRef name) {
    Function *rule = module.addFunction(name.str());
    rule->setRole(Function::Role::RuleInstance);
    const TensorType &type = op.getResult()->getType();
    rule->addParam(type, "x");
    rule->addParam(type, "y");
    rule->setReturns({rule->addParam(type, "dy")});
    GradRuleAttr &attr = op.getGradRule();
    attr.function = name.str();
    attr.ruleName = "pass_through";
    attr.via = "override";
  }

  static std::string dumpFunction(const Function &f) {
    llvm::DenseMap<const Value *, std::string> names;
    for (const Value *p : f.getParams())
      names[p] = p->getName().str();
    std::string s;
    llvm::raw_string_ostream os(s);
    for (const auto &[i, op] : llvm::enumerate(f.getOps())) {
      for (const Value *r : op->getResults()) {
        // (Streams, not `"%" + std::to_string(i)`: GCC 12 warns wrongly.)
        std::string name;
        llvm::raw_string_ostream ns(name);
        ns << '%' << i;
        if (op->getNumResults() > 1)
          ns << '#' << r->getResultIndex();
        names[r] = name;
      }
      os << "%" << i << " = " << op->getName() << "(";
      for (const auto &[j, v] : llvm::enumerate(op->getOperands()))
        os << (j ? ", " : "") << names.lookup(v);
      os << ")";
      for (const NamedAttr &a : op->getAttrs().entries())
        os << " " << a.name << "=" << attrValueStr(a.value);
      os << " : " << op->getResult(0)->getType().str() << "\n";
    }
    os << "return";
    for (const Value *v : f.getReturns())
      os << " " << names.lookup(v);
    return s;
  }
};

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

TEST(PassRegistry, KnowsEveryPassByName) {
  for (const char *name : {"differentiate", "inline", "simplify", "fold", "cse",
                           "dce", "canonicalize", "tape-residuals"}) {
    const PassInfo *pass = lookupPass(name);
    ASSERT_NE(pass, nullptr) << name;
    EXPECT_EQ(llvm::StringRef(pass->name), name);
  }
  EXPECT_EQ(lookupPass("simplfy"), nullptr);
  EXPECT_EQ(getDefaultPipeline(), "canonicalize,tape-residuals");
  // The default pipeline is itself a valid pass list.
  Fixture t;
  EXPECT_TRUE(t.run(getDefaultPipeline()));
  EXPECT_TRUE(t.collector.messages.empty());
}

TEST(PassRegistry, UnknownPassIsAnErrorAndNothingRuns) {
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *dead = t.b.neg(x);
  (void)dead;
  t.fn->setReturns({x});
  EXPECT_FALSE(t.run("dce, simplfy"));
  ASSERT_EQ(t.collector.messages.size(), 1u);
  EXPECT_EQ(t.collector.messages[0],
            "unknown pass 'simplfy'; known passes: differentiate, inline, "
            "simplify, fold, cse, dce, canonicalize, tape-residuals, split, "
            "value-and-grad, accumulate-f32");
  // dce came first in the list but did not run.
  EXPECT_EQ(t.fn->getOps().size(), 1u);
}

TEST(PassRegistry, EmptyNameIsAnError) {
  Fixture t;
  EXPECT_FALSE(t.run("simplify,,dce"));
  ASSERT_EQ(t.collector.messages.size(), 1u);
  EXPECT_EQ(t.collector.messages[0],
            "empty pass name in pass list 'simplify,,dce'");
  // An empty list runs nothing and is fine.
  Fixture u;
  EXPECT_TRUE(u.run(""));
  EXPECT_TRUE(u.collector.messages.empty());
}

//===----------------------------------------------------------------------===//
// simplify: exact identities
//===----------------------------------------------------------------------===//

TEST(Simplify, MulByOneAndDivByOne) {
  Fixture t;
  Value *x = t.param(f32({k(2), k(3)}), "x");
  Value *one = t.b.scalar(DType::F32, 1.0);
  Value *a = t.b.mul(x, one);
  Value *b = t.b.mul(one, a);
  Value *c = t.b.div(b, one);
  t.fn->setReturns({c});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "return x");
}

TEST(Simplify, MulByOneThatBroadcastsKeepsTheType) {
  // x: f32[3] times ones of f32[2, 3] is x broadcast to [2, 3].
  Fixture t;
  Value *x = t.param(f32({k(3)}), "x");
  Value *y = t.param(f32({k(2), k(3)}), "y");
  Value *prod = t.b.mul(x, t.b.onesLike(y));
  t.fn->setReturns({prod});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = broadcast_to(x) shape=[2, 3] : f32[2, 3]\n"
                      "return %0");
}

TEST(Simplify, AddOfPositiveZeroLiteralIsNotExactAndStays) {
  // -0.0 + 0.0 is +0.0, so x + 0.0 is not x for x = -0.0.
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *sum = t.b.add(x, t.b.scalar(DType::F32, 0.0));
  Value *diff = t.b.sub(t.b.scalar(DType::F32, 0.0), x);
  t.fn->setReturns({sum, diff});
  ASSERT_TRUE(t.run("simplify"));
  EXPECT_EQ(t.fn->getOps().size(), 4u);
  EXPECT_EQ(t.fn->getReturns()[0], sum);
  EXPECT_EQ(t.fn->getReturns()[1], diff);
}

TEST(Simplify, SignedZeroLiteralsThatAreExact) {
  // x + (-0.0) = x, x - (+0.0) = x, (-0.0) - x = -x for every x.
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *a = t.b.add(t.b.scalar(DType::F32, -0.0), x);
  Value *s = t.b.sub(a, t.b.scalar(DType::F32, 0.0));
  Value *n = t.b.sub(t.b.scalar(DType::F32, -0.0), s);
  t.fn->setReturns({s, n});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = neg(x) : f32[2]\n"
                      "return x %0");
}

TEST(Simplify, NegNegIdentityAndStopGradient) {
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *nn = t.b.neg(t.b.neg(x));
  Value *id = t.b.unary(OpKind::Identity, nn);
  Value *sg = t.b.unary(OpKind::StopGradient, id);
  Value *sg2 = t.b.unary(OpKind::StopGradient, sg);
  t.fn->setReturns({sg2});
  ASSERT_TRUE(t.run("simplify,dce"));
  // stop_gradient(x) stays: this function may still be differentiated.
  EXPECT_EQ(t.dump(), "%0 = stop_gradient(x) : f32[2]\n"
                      "return %0");
}

TEST(Simplify, TransposeChains) {
  Fixture t;
  Value *x = t.param(f32({k(2), k(3), k(4)}), "x");
  // p = [1, 2, 0] then q = [2, 0, 1]: r[i] = p[q[i]] = [0, 1, 2].
  Value *back = t.b.transpose(t.b.transpose(x, {1, 2, 0}), {2, 0, 1});
  // p = [1, 0, 2] then q = [0, 2, 1]: r = [p[0], p[2], p[1]] = [1, 2, 0].
  Value *composed = t.b.transpose(t.b.transpose(x, {1, 0, 2}), {0, 2, 1});
  Value *same = t.b.transpose(x, {0, 1, 2});
  t.fn->setReturns({back, composed, same});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = transpose(x) perm=[1, 2, 0] : f32[3, 4, 2]\n"
                      "return x %0 x");
}

TEST(Simplify, ReshapeAndBroadcastChains) {
  Fixture t;
  Value *x = t.param(f32({n("N"), k(6)}), "x");
  Value *r =
      t.b.reshape(t.b.reshape(x, {n("N"), k(2), k(3)}), {n("N"), k(3), k(2)});
  Value *back =
      t.b.reshape(t.b.reshape(x, {n("N"), k(2), k(3)}), {n("N"), k(6)});
  Value *s = t.param(f32({k(3)}), "s");
  Value *bb =
      t.b.broadcastTo(t.b.broadcastTo(s, {k(2), k(3)}), {k(4), k(2), k(3)});
  Value *noop = t.b.broadcastTo(s, {k(3)});
  t.fn->setReturns({r, back, bb, noop});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = reshape(x) shape=[N, 3, 2] : f32[N, 3, 2]\n"
                      "%1 = broadcast_to(s) shape=[4, 2, 3] : f32[4, 2, 3]\n"
                      "return %0 x %1 s");
}

TEST(Simplify, SelectOfTheSameValue) {
  Fixture t;
  Value *c = t.param(TensorType(DType::Bool, {k(2), k(3)}), "c");
  Value *x = t.param(f32({k(3)}), "x");
  t.fn->setReturns({t.b.select(c, x, x)});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = broadcast_to(x) shape=[2, 3] : f32[2, 3]\n"
                      "return %0");
}

//===----------------------------------------------------------------------===//
// simplify: zero propagation
//===----------------------------------------------------------------------===//

TEST(Simplify, ZeroTermsVanish) {
  Fixture t;
  Value *x = t.param(f32({k(2), k(3)}), "x");
  Value *dy = t.param(f32({k(2), k(3)}), "dy");
  Value *z = t.b.zerosLike(dy);
  Value *a = t.b.add(t.b.unary(OpKind::Exp, x), z);
  Value *s = t.b.sub(a, z);
  t.fn->setReturns({s});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = exp(x) : f32[2, 3]\n"
                      "return %0");
}

TEST(Simplify, ZeroThatBroadcastsTheOtherOperand) {
  // x: f32[3] plus zeros of f32[2, 3] is x broadcast to [2, 3], not x.
  Fixture t;
  Value *x = t.param(f32({k(3)}), "x");
  Value *y = t.param(f32({k(2), k(3)}), "y");
  Value *sum = t.b.add(x, t.b.zerosLike(y));
  Value *diff = t.b.sub(t.b.zerosLike(y), x);
  t.fn->setReturns({sum, diff});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = broadcast_to(x) shape=[2, 3] : f32[2, 3]\n"
                      "%1 = neg(x) : f32[3]\n"
                      "%2 = broadcast_to(%1) shape=[2, 3] : f32[2, 3]\n"
                      "return %0 %2");
}

TEST(Simplify, ProductsWithZeroAreZeros) {
  Fixture t;
  Value *x = t.param(f32({k(2), k(3)}), "x");
  Value *w = t.param(f32({k(3), k(4)}), "w");
  Value *s = t.param(f32({}), "s");
  // mul(x, 0) where the zero is a scalar: zeros of x's type, anchored on a
  // parameter of that type.
  Value *m = t.b.mul(t.b.unary(OpKind::Exp, x), t.b.zerosLike(s));
  // matmul(0, w): zeros of f32[2, 4]; no value of that type precedes it,
  // so it stays, known to be zero, and the add below still drops it.
  Value *mm = t.b.matmul(t.b.zerosLike(x), w);
  Value *e = t.b.unary(OpKind::Exp, t.b.matmul(x, w));
  Value *total = t.b.add(e, mm);
  t.fn->setReturns({m, total});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = zeros_like(x) : f32[2, 3]\n"
                      "%1 = matmul(x, w) : f32[2, 4]\n"
                      "%2 = exp(%1) : f32[2, 4]\n"
                      "return %0 %2");
}

TEST(Simplify, ZerosThroughLayoutAndReductions) {
  // sum, transpose, reshape, stack, concat, unstack of zeros are zeros: the
  // gradient rules of these ops pass a zero cotangent through.
  Fixture t;
  Value *x = t.param(f32({k(2), k(3)}), "x");
  Value *v = t.param(f32({k(3)}), "v");
  Value *z = t.b.zerosLike(x);
  Value *col = t.b.sum(z, {0}, false);               // f32[3]
  Value *tr = t.b.transpose(z, {1, 0});              // f32[3, 2]
  Value *st = t.b.create1(OpKind::Stack, {z, z});    // f32[2, 2, 3]
  auto parts = t.b.create(OpKind::Unstack, {z});     // 2 x f32[3]
  Value *total = t.b.add(t.b.add(v, col), parts[1]); // v
  t.fn->setReturns({total, tr, st});
  ASSERT_TRUE(t.run("simplify,dce"));
  // tr and st have no value of their type before them: they stay, but
  // their zeros_like is anchored on the parameter.
  EXPECT_EQ(t.dump(), "%0 = zeros_like(x) : f32[2, 3]\n"
                      "%1 = transpose(%0) perm=[1, 0] : f32[3, 2]\n"
                      "%2 = stack(%0, %0) axis=0 : f32[2, 2, 3]\n"
                      "return v %1 %2");
}

TEST(Simplify, ZerosLikeIsAnchoredOnACheapValue) {
  Fixture t;
  Value *x = t.param(f32({k(4)}), "x");
  Value *h = t.b.unary(OpKind::Tanh, t.b.unary(OpKind::Exp, x));
  t.fn->setReturns({t.b.zerosLike(h)});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = zeros_like(x) : f32[4]\n"
                      "return %0");
}

TEST(Simplify, IntegerZerosAreExact) {
  // For i32, x * 0 = 0 and x + 0 = x exactly; 0 / x stays (x may be 0,
  // which is a run-time error).
  Fixture t;
  Value *x = t.param(i32({k(3)}), "x");
  Value *zero = t.b.scalar(DType::I32, 0);
  Value *p = t.b.add(t.b.mul(x, zero), x);
  Value *q = t.b.div(zero, x);
  t.fn->setReturns({p, q});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.dump(), "%0 = constant() value=[0] : i32\n"
                      "%1 = div(%0, x) : i32[3]\n"
                      "return x %1");
}

TEST(Simplify, OpsWithAnAnnotatedRuleAreKept) {
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *id = t.b.unary(OpKind::Identity, x);
  t.setRule(*id->getDefiningOp(), "rule_instance");
  Value *z = t.b.zerosLike(x);
  t.setRule(*z->getDefiningOp(), "other_rule");
  t.fn->setReturns({t.b.add(id, z)});
  ASSERT_TRUE(t.run("simplify,dce"));
  EXPECT_EQ(t.fn->getOps().size(), 3u);
}

TEST(Simplify, KeepsNotesAndLocationsAndMovesNames) {
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *y = t.param(f32({k(3), k(2)}), "y");
  t.b.setLoc(SourceLoc::fromRaw(7));
  t.b.setNote("gradient of 'add'");
  Value *e = t.b.unary(OpKind::Exp, x);
  Value *sum = t.b.add(e, t.b.zerosLike(y));
  sum->setName("d_x");
  t.fn->setReturns({sum});
  ASSERT_TRUE(t.run("simplify,dce"));
  ASSERT_EQ(t.fn->getOps().size(), 2u);
  const Op &bcast = *t.fn->getOps()[1];
  EXPECT_EQ(bcast.getKind(), OpKind::BroadcastTo);
  EXPECT_EQ(bcast.getNote(), "gradient of 'add'");
  EXPECT_EQ(bcast.getLoc(), SourceLoc::fromRaw(7));
  EXPECT_EQ(bcast.getResult()->getName(), "d_x");
}

//===----------------------------------------------------------------------===//
// cse, dce
//===----------------------------------------------------------------------===//

TEST(CSE, MergesEqualOpsOnly) {
  Fixture t;
  Value *x = t.param(f32({k(2), k(3)}), "x");
  Value *a = t.b.transpose(x, {1, 0});
  Value *b = t.b.transpose(x, {1, 0});
  b->setName("wt");
  Value *c = t.b.sum(x, {0}, false);
  Value *d = t.b.sum(x, {1}, false); // other attributes
  Value *e = t.b.unary(OpKind::Exp, a);
  Value *f = t.b.unary(OpKind::Exp, b); // equal once b is a
  Value *c1 = t.b.scalar(DType::F32, 2.0);
  Value *c2 = t.b.scalar(DType::F32, 2.0);
  Value *c3 = t.b.scalar(DType::F64, 2.0); // other type
  t.fn->setReturns({e, f, c, d, c1, c2, c3});
  ASSERT_TRUE(t.run("cse"));
  EXPECT_EQ(t.dump(), "%0 = transpose(x) perm=[1, 0] : f32[3, 2]\n"
                      "%1 = sum(x) axis=[0] keepdims=false : f32[3]\n"
                      "%2 = sum(x) axis=[1] keepdims=false : f32[2]\n"
                      "%3 = exp(%0) : f32[3, 2]\n"
                      "%4 = constant() value=[2] : f32\n"
                      "%5 = constant() value=[2] : f64\n"
                      "return %3 %3 %1 %2 %4 %4 %5");
  // The kept transpose took the user's name of the removed one.
  EXPECT_EQ(t.fn->getOps()[0]->getResult()->getName(), "wt");
}

// cse compares attributes as they print: doubles bit for bit, except that
// every NaN is alike (they all print `nan`); size names by name.
TEST(CSE, ComparesAttributesAsTheyPrint) {
  Fixture t;
  double quiet = std::numeric_limits<double>::quiet_NaN();
  double payload = std::bit_cast<double>(std::bit_cast<uint64_t>(quiet) | 1);
  Value *n1 = t.b.scalar(DType::F64, quiet);
  Value *n2 = t.b.scalar(DType::F64, payload); // merges with n1
  Value *z1 = t.b.constant(f32({k(2)}), {0.0, 1.0});
  Value *z2 = t.b.constant(f32({k(2)}), {-0.0, 1.0}); // stays
  Value *z3 = t.b.constant(f32({k(2)}), {0.0, 1.0});  // merges with z1
  Value *x = t.param(f32({n("N"), k(3)}), "x");
  Value *r1 = t.b.reshape(x, {n("N"), k(3), k(1)});
  Value *r2 = t.b.reshape(x, {n("N"), k(3), k(1)}); // merges with r1
  Value *r3 = t.b.reshape(x, {k(3), n("N"), k(1)}); // stays
  t.fn->setReturns({n1, n2, z1, z2, z3, r1, r2, r3});
  ASSERT_TRUE(t.run("cse"));
  EXPECT_EQ(t.fn->getOps().size(), 5u);
  llvm::ArrayRef<Value *> r = t.fn->getReturns();
  EXPECT_EQ(r[0], r[1]);
  EXPECT_NE(r[2], r[3]);
  EXPECT_EQ(r[2], r[4]);
  EXPECT_EQ(r[5], r[6]);
  EXPECT_NE(r[5], r[7]);
}

// Ops under different gradient rules (or one under none) compute the same
// value but must keep their own backward; under the same rule they merge.
TEST(CSE, MergesOpsUnderTheSameGradientRuleOnly) {
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *plain = t.b.unary(OpKind::Exp, x);
  Value *ruled = t.b.unary(OpKind::Exp, x);
  Value *copy = t.b.unary(OpKind::Exp, x);
  t.setRule(*ruled->getDefiningOp(), "exp_rule_0");
  copy->getDefiningOp()->getGradRule() = ruled->getDefiningOp()->getGradRule();
  t.fn->setReturns({plain, ruled, copy});
  ASSERT_TRUE(t.run("cse"));
  EXPECT_EQ(t.fn->getOps().size(), 2u);
  llvm::ArrayRef<Value *> r = t.fn->getReturns();
  EXPECT_NE(r[0], r[1]);
  EXPECT_EQ(r[1], r[2]);
}

TEST(DCE, RemovesUnusedOpsAndRuleInstances) {
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *used = t.b.unary(OpKind::Exp, x);
  Value *dead = t.b.unary(OpKind::Exp, t.b.neg(x));
  (void)dead;
  auto call = t.b.call("rule_live", {x}, {f32({k(2)})});
  t.fn->setReturns({t.b.add(used, call[0])});
  for (const char *name : {"rule_live", "rule_dead"}) {
    Function *r = t.module.addFunction(name);
    r->setRole(Function::Role::RuleInstance);
    Value *p = r->addParam(f32({k(2)}), "dy");
    r->setReturns({p});
  }
  Function *user = t.module.addFunction("unused_user_fn");
  user->setReturns({user->addParam(f32({}), "a")});
  ASSERT_TRUE(t.run("dce"));
  EXPECT_EQ(t.dump(), "%0 = exp(x) : f32[2]\n"
                      "%1 = call(x) callee=\"rule_live\" : f32[2]\n"
                      "%2 = add(%0, %1) : f32[2]\n"
                      "return %2");
  EXPECT_NE(t.module.lookup("rule_live"), nullptr);
  EXPECT_EQ(t.module.lookup("rule_dead"), nullptr);
  EXPECT_NE(t.module.lookup("unused_user_fn"), nullptr);
}

//===----------------------------------------------------------------------===//
// inline: errors the verifier normally catches first
//===----------------------------------------------------------------------===//

TEST(Inline, RecursionAndUnknownCalleeAreErrors) {
  // gradc and gradc-opt verify a module before any pass, and the verifier
  // rejects both; runPasses on an unverified module still must not loop
  // or crash.
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  t.fn->setReturns({t.b.call("f", {x}, {f32({k(2)})})[0]});
  EXPECT_FALSE(t.run("inline"));
  ASSERT_EQ(t.collector.messages.size(), 1u);
  EXPECT_EQ(t.collector.messages[0],
            "cannot inline the call of 'f': it is recursive (f -> f)");

  Fixture u;
  Value *y = u.param(f32({k(2)}), "y");
  u.fn->setReturns({u.b.call("missing", {y}, {f32({k(2)})})[0]});
  EXPECT_FALSE(u.run("inline"));
  ASSERT_EQ(u.collector.messages.size(), 1u);
  EXPECT_EQ(u.collector.messages[0], "cannot inline the call of 'missing': no "
                                     "function of that name in the module");
}

//===----------------------------------------------------------------------===//
// fold (the parts that need no interpreter) and canonicalize
//===----------------------------------------------------------------------===//

TEST(Fold, OnesLikeAndSplatLayout) {
  Fixture t;
  Value *x = t.param(f32({k(100), k(3)}), "x");
  Value *ones = t.b.onesLike(t.b.unary(OpKind::Exp, x));
  Value *tr = t.b.transpose(ones, {1, 0});
  Value *c = t.b.constant(f32({k(3)}), {2.0, 2.0, 2.0});
  Value *st = t.b.create1(OpKind::Stack, {c, c});
  t.fn->setReturns({tr, st});
  ASSERT_TRUE(t.run("fold,dce"));
  EXPECT_EQ(t.dump(), "%0 = constant() value=[1] : f32[3, 100]\n"
                      "%1 = constant() value=[2] : f32[2, 3]\n"
                      "return %0 %1");
}

TEST(Fold, ZerosOfDifferentSignsStayApart) {
  // +0.0 and -0.0 are different constants: merging them, or making a
  // splat of [0, -0], would change a result's sign.
  Fixture t;
  Value *a = t.b.constant(f32({k(2)}), {0.0});
  Value *b = t.b.constant(f32({k(2)}), {-0.0});
  Value *c = t.b.constant(f32({k(2)}), {0.0, -0.0});
  Value *d = t.b.constant(f32({k(2)}), {-0.0, -0.0});
  t.fn->setReturns({a, b, c, d});
  ASSERT_TRUE(t.run("fold,cse"));
  EXPECT_EQ(t.dump(), "%0 = constant() value=[0] : f32[2]\n"
                      "%1 = constant() value=[-0] : f32[2]\n"
                      "%2 = constant() value=[0, -0] : f32[2]\n"
                      "return %0 %1 %2 %1");
}

TEST(Canonicalize, StackOverrideGradientShape) {
  // The shape of the gradient of `stack([x, x])` under the rule
  // first_only after inlining: d_x = parts[0] + zeros_like(parts[1]).
  Fixture t;
  Value *x = t.param(f32({k(2)}), "x");
  Value *dy = t.param(f32({k(2), k(2)}), "dy");
  Value *y = t.b.create1(OpKind::Stack, {x, x});
  (void)y;
  auto parts = t.b.create(OpKind::Unstack, {dy});
  Value *z = t.b.zerosLike(parts[1]);
  Value *one = t.b.scalar(DType::F32, 1.0);
  Value *dx = t.b.add(t.b.mul(parts[0], one), z);
  dx->setName("d_x");
  t.fn->setReturns({dx});
  ASSERT_TRUE(t.run("canonicalize"));
  EXPECT_EQ(t.dump(), "%0 = unstack(dy) axis=0 : f32[2]\n"
                      "return %0#0");
  EXPECT_EQ(t.fn->getOps()[0]->getResult(0)->getName(), "d_x");
}

} // namespace
