//===- GradCheckTest.cpp - Gradients against finite differences -----------===//
//
// For every differentiable op: build a small f64 function with ir::Builder
// (several shapes, broadcasting, negative axes, keepdims, matmul's vector
// and batch cases), differentiate it, run NAME_grad with the reference
// interpreter and compare it with central finite differences of the
// forward function, to 1e-6 relative. Points are drawn away from kinks
// (relu, abs, max, clip, maximum ties) and their conventions are checked
// separately with exact values. Second derivatives are checked the same
// way: `g` calls `f_grad`, and g_grad is compared with differences of g.
// The registry is checked to cover every op of Ops.def, and the AD
// diagnostics that IR from text can trigger are checked here too.
//
//===----------------------------------------------------------------------===//

#include "gradc/AD/ReverseMode.h"
#include "gradc/IR/Builder.h"
#include "gradc/IR/Interpreter.h"
#include "gradc/IR/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

using namespace gradc;
using ir::Builder;
using ir::Tensor;
using ir::Value;

namespace {

//===----------------------------------------------------------------------===//
// Building functions
//===----------------------------------------------------------------------===//

TensorType f64(std::initializer_list<int64_t> dims) {
  TensorType t(DType::F64);
  for (int64_t d : dims)
    t.shape.push_back(Dim::known(d));
  return t;
}

TensorType i32(std::initializer_list<int64_t> dims) {
  TensorType t = f64(dims);
  t.dtype = DType::I32;
  return t;
}

AttrList axisAttr(AttrValue axis, bool keepdims = false) {
  AttrList attrs;
  attrs.set("axis", std::move(axis));
  if (keepdims)
    attrs.set("keepdims", true);
  return attrs;
}

using Body =
    std::function<std::vector<Value *>(Builder &, llvm::ArrayRef<Value *>)>;

/// Adds `name(params) { body }`, marked @grad with respect to `wrt` (every
/// floating-point parameter when empty).
ir::Function *addFunction(ir::Module &module, llvm::StringRef name,
                          llvm::ArrayRef<TensorType> params, const Body &body,
                          bool wantsGrad = true,
                          std::vector<unsigned> wrt = {}) {
  ir::Function *fn = module.addFunction(name.str());
  std::vector<Value *> values;
  for (unsigned i = 0; i < params.size(); ++i)
    values.push_back(fn->addParam(params[i], ("p" + llvm::Twine(i)).str()));
  Builder b(*fn);
  fn->setReturns(body(b, values));
  if (!wantsGrad)
    return fn;
  if (wrt.empty())
    for (unsigned i = 0; i < params.size(); ++i)
      if (isFloat(params[i].dtype))
        wrt.push_back(i);
  fn->setGradSpec({name.str() + "_grad", wrt, SourceLoc(), "", "", ""});
  return fn;
}

/// A body of one op whose results are all returned (created once).
Body opAll(OpKind kind, AttrList attrs = {}) {
  return [=](Builder &b, llvm::ArrayRef<Value *> p) {
    auto results = b.create(kind, p, attrs);
    return std::vector<Value *>(results.begin(), results.end());
  };
}

class CollectingConsumer : public DiagnosticConsumer {
public:
  void handle(const Diagnostic &diag) override { seen.push_back(diag); }
  std::string messages() const {
    std::string all;
    for (const Diagnostic &d : seen)
      all += d.message + "\n";
    return all;
  }
  std::vector<Diagnostic> seen;
};

struct Env {
  SourceManager sm;
  CollectingConsumer consumer;
  DiagnosticEngine diags{sm, consumer};
};

/// Differentiates `module` and checks that the result is valid IR.
bool differentiateAndVerify(ir::Module &module, Env &env) {
  return ad::differentiate(module, env.diags) &&
         ir::verifyModule(module, env.diags, "differentiate");
}

//===----------------------------------------------------------------------===//
// Running and finite differences
//===----------------------------------------------------------------------===//

/// Deterministic uniform numbers, the same on every platform.
class Rng {
public:
  explicit Rng(uint32_t seed) : engine(seed) {}
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * (double(engine()) / 4294967296.0);
  }

private:
  std::mt19937 engine;
};

std::vector<int64_t> knownShape(const TensorType &t) {
  std::vector<int64_t> shape;
  for (const Dim &d : t.shape)
    shape.push_back(d.isKnown() ? d.getSize() : 2); // size names: 2
  return shape;
}

Tensor makeTensor(const TensorType &t, std::vector<double> data) {
  Tensor tensor;
  tensor.dtype = t.dtype;
  tensor.shape = knownShape(t);
  tensor.data = std::move(data);
  return tensor;
}

Tensor randomTensor(const TensorType &t, Rng &rng, double lo, double hi) {
  Tensor tensor = makeTensor(t, {});
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    tensor.data.push_back(t.dtype == DType::I32
                              ? std::floor(rng.uniform(0, 2.999))
                              : rng.uniform(lo, hi));
  return tensor;
}

std::vector<Tensor> run(const ir::Module &module, llvm::StringRef fn,
                        llvm::ArrayRef<Tensor> args) {
  std::vector<Tensor> results;
  std::string error;
  bool ok = ir::interpret(module, fn, args, results, error);
  EXPECT_TRUE(ok) << "running '" << fn.str() << "': " << error;
  return results;
}

/// Where to evaluate a gradient: the range of every floating-point
/// argument, how far elements stay from 0 and from each other (kinks and
/// ties), and a hook to set some arguments outright.
struct Points {
  double lo = -2, hi = 2;
  double minMagnitude = 0;
  double minGap = 0;
  std::function<void(std::vector<Tensor> &)> adjust;
  int count = 2;
};

bool farEnough(const std::vector<Tensor> &args, const Points &points) {
  std::vector<double> values;
  for (const Tensor &t : args)
    if (isFloat(t.dtype))
      llvm::append_range(values, t.data);
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::fabs(values[i]) < points.minMagnitude)
      return false;
    for (size_t j = 0; j < i; ++j)
      if (std::fabs(values[i] - values[j]) < points.minGap)
        return false;
  }
  return true;
}

std::vector<Tensor> randomArgs(const ir::Function &fn, Rng &rng,
                               const Points &points) {
  for (int attempt = 0;; ++attempt) {
    std::vector<Tensor> args;
    for (Value *p : fn.getParams())
      args.push_back(randomTensor(p->getType(), rng, points.lo, points.hi));
    if (points.adjust)
      points.adjust(args);
    if (farEnough(args, points) || attempt == 10000)
      return args;
  }
}

bool returnsFloatScalar(const ir::Function &fn) {
  return fn.getReturns().size() == 1 &&
         fn.getReturns()[0]->getType().isScalar() &&
         isFloat(fn.getReturns()[0]->getType().dtype);
}

/// Compares fn's generated gradient at `args` with central differences of
/// <cotangents, fn(args)>.
void checkGradientAt(const ir::Module &module, const ir::Function &fn,
                     const std::vector<Tensor> &args, Rng &rng) {
  const ir::Function::GradSpec &spec = *fn.getGradSpec();
  std::vector<Tensor> cotangents;
  if (!returnsFloatScalar(fn))
    for (Value *r : fn.getReturns())
      cotangents.push_back(randomTensor(r->getType(), rng, -1, 1));
  std::vector<Tensor> gradArgs = args;
  llvm::append_range(gradArgs, cotangents);
  std::vector<Tensor> grads = run(module, spec.gradName, gradArgs);
  ASSERT_EQ(grads.size(), spec.wrt.size());

  auto objective = [&](const std::vector<Tensor> &at) {
    std::vector<Tensor> outs = run(module, fn.getName(), at);
    if (cotangents.empty())
      return outs.empty() ? 0.0 : outs[0].data[0];
    double total = 0;
    for (size_t i = 0; i < outs.size() && i < cotangents.size(); ++i)
      for (size_t k = 0; k < outs[i].data.size(); ++k)
        total += outs[i].data[k] * cotangents[i].data[k];
    return total;
  };
  for (size_t k = 0; k < spec.wrt.size(); ++k) {
    unsigned p = spec.wrt[k];
    ASSERT_EQ(grads[k].shape, args[p].shape) << "gradient of parameter " << p;
    for (size_t j = 0; j < args[p].data.size(); ++j) {
      double x = args[p].data[j];
      double h = 1e-6 * std::max(1.0, std::fabs(x));
      std::vector<Tensor> plus = args, minus = args;
      plus[p].data[j] = x + h;
      minus[p].data[j] = x - h;
      double fd = (objective(plus) - objective(minus)) / (2 * h);
      EXPECT_NEAR(grads[k].data[j], fd, 1e-6 * std::max(1.0, std::fabs(fd)))
          << "d/d(parameter " << p << ")[" << j << "] at " << x;
    }
  }
}

/// Builds `f(params) = body` with @grad, and, when `secondOrder` is set,
/// `g(params, cotangents) = f_grad(params, cotangents)` with @grad too;
/// differentiates the module and checks every gradient against finite
/// differences at a few random points.
void checkOp(llvm::ArrayRef<TensorType> params, const Body &body,
             const Points &points = {}, bool secondOrder = false) {
  Env env;
  ir::Module module;
  ir::Function *f = addFunction(module, "f", params, body);
  ir::Function *g = nullptr;
  if (secondOrder) {
    std::vector<TensorType> gParams(params.begin(), params.end());
    if (!returnsFloatScalar(*f))
      for (Value *r : f->getReturns())
        gParams.push_back(r->getType());
    std::vector<TensorType> gradTypes;
    for (unsigned i : f->getGradSpec()->wrt)
      gradTypes.push_back(params[i]);
    g = addFunction(module, "g", gParams,
                    [&](Builder &b, llvm::ArrayRef<Value *> p) {
                      auto r = b.call("f_grad", p, gradTypes);
                      return std::vector<Value *>(r.begin(), r.end());
                    });
  }
  ASSERT_TRUE(differentiateAndVerify(module, env)) << env.consumer.messages();
  ASSERT_TRUE(module.lookup("f_grad"));
  Rng rng(20240601);
  for (int i = 0; i < points.count; ++i) {
    checkGradientAt(module, *f, randomArgs(*f, rng, points), rng);
    if (g)
      checkGradientAt(module, *g, randomArgs(*g, rng, points), rng);
  }
}

/// Runs the gradient of `body` at fixed arguments and cotangents.
std::vector<Tensor> gradientAt(llvm::ArrayRef<TensorType> params,
                               const Body &body, std::vector<Tensor> args) {
  Env env;
  ir::Module module;
  addFunction(module, "f", params, body);
  EXPECT_TRUE(differentiateAndVerify(module, env)) << env.consumer.messages();
  return run(module, "f_grad", args);
}

//===----------------------------------------------------------------------===//
// The registry
//===----------------------------------------------------------------------===//

TEST(GradRegistry, EveryOpHasARuleOrAReasonWhyNot) {
  ad::GradRegistry registry = ad::GradRegistry::createBuiltin();
  for (const OpInfo &info : getAllOps()) {
    // A call has no rule of its own: differentiation inlines the callee,
    // or applies the @custom_grad rule that the call carries.
    // An extern_call has only the rule its call carries, or an error
    // naming the extern. A `for` is differentiated by the reverse sweep
    // itself, which builds its body's VJP (ReverseMode.cpp, "Loops"), and
    // an `if` likewise from its branches' VJPs ("Branches").
    if (info.kind == OpKind::Call || info.kind == OpKind::ExternCall ||
        info.kind == OpKind::For || info.kind == OpKind::If)
      continue;
    bool hasRule = registry.lookup(info.kind) != nullptr;
    EXPECT_EQ(hasRule, info.isDifferentiable())
        << "'" << info.name << "' "
        << (hasRule ? "has a rule but the op table calls it "
                      "non-differentiable"
                    : "is differentiable but has no built-in rule");
    if (!info.isDifferentiable()) {
      EXPECT_TRUE(info.nonDiffReason && *info.nonDiffReason) << info.name;
    }
  }
}

//===----------------------------------------------------------------------===//
// Elementwise ops, first and second derivatives
//===----------------------------------------------------------------------===//

struct UnaryCase {
  OpKind kind;
  Points points;
};

TEST(GradCheck, UnaryOps) {
  Points anywhere;
  Points positive;
  positive.lo = 0.5;
  Points awayFromZero;
  awayFromZero.minMagnitude = 0.1;
  const UnaryCase cases[] = {
      {OpKind::Identity, anywhere}, {OpKind::Neg, anywhere},
      {OpKind::Exp, anywhere},      {OpKind::Log, positive},
      {OpKind::Sqrt, positive},     {OpKind::Abs, awayFromZero},
      {OpKind::Sin, anywhere},      {OpKind::Cos, anywhere},
      {OpKind::Atan, anywhere},     {OpKind::Tanh, anywhere},
      {OpKind::Sigmoid, anywhere},  {OpKind::Relu, awayFromZero},
      {OpKind::Softplus, anywhere}, {OpKind::Square, anywhere},
  };
  for (const UnaryCase &c : cases) {
    SCOPED_TRACE(getOpName(c.kind).str());
    for (const TensorType &t : {f64({2, 3}), f64({})})
      checkOp({t}, opAll(c.kind), c.points, /*secondOrder=*/true);
  }
}

TEST(GradCheck, BinaryOpsWithBroadcasting) {
  Points anywhere;
  anywhere.minGap = 0.01; // keeps maximum/minimum away from ties
  Points divisor = anywhere;
  divisor.minMagnitude = 0.3;
  Points power;
  power.adjust = [](std::vector<Tensor> &args) {
    for (double &x : args[0].data)
      x = 0.5 + std::fabs(x) * 0.75; // base in [0.5, 2]
  };
  const std::pair<TensorType, TensorType> shapes[] = {
      {f64({2, 3}), f64({2, 3})}, {f64({2, 3}), f64({3})},
      {f64({2, 1}), f64({1, 3})}, {f64({}), f64({2, 3})},
      {f64({3}), f64({2, 2, 3})},
  };
  const std::pair<OpKind, Points> cases[] = {
      {OpKind::Add, anywhere},     {OpKind::Sub, anywhere},
      {OpKind::Mul, anywhere},     {OpKind::Div, divisor},
      {OpKind::Pow, power},        {OpKind::Maximum, anywhere},
      {OpKind::Minimum, anywhere},
  };
  for (const auto &[kind, points] : cases)
    for (const auto &[x, y] : shapes) {
      SCOPED_TRACE(getOpName(kind).str() + " " + x.str() + " " + y.str());
      checkOp({x, y}, opAll(kind), points, /*secondOrder=*/true);
    }
}

TEST(GradCheck, SelectAndClip) {
  // select(c > 0, a, b) with a broadcast b: c is a float whose gradient
  // is zero (it only feeds a comparison).
  Points points;
  points.minMagnitude = 0.1;
  checkOp(
      {f64({2, 3}), f64({2, 3}), f64({3})},
      [](Builder &b, llvm::ArrayRef<Value *> p) {
        Value *cond =
            b.binary(OpKind::Greater, p[0], b.scalar(DType::F64, 0.0));
        return std::vector<Value *>{b.select(cond, p[1], p[2])};
      },
      points, /*secondOrder=*/true);

  // clip(x, lo, hi) with every operand differentiated, lo <= hi.
  Points clipPoints;
  clipPoints.minGap = 0.02;
  clipPoints.adjust = [](std::vector<Tensor> &args) {
    args[1].data[0] = -0.5 - std::fabs(args[1].data[0]) * 0.1;
    args[2].data[0] = 0.5 + std::fabs(args[2].data[0]) * 0.1;
  };
  clipPoints.count = 4;
  checkOp({f64({2, 3}), f64({}), f64({})}, opAll(OpKind::Clip), clipPoints,
          /*secondOrder=*/true);
  // lo > hi: the result is hi everywhere, and so is the gradient.
  Points inverted;
  inverted.minGap = 0.02;
  inverted.adjust = [](std::vector<Tensor> &args) {
    args[1].data[0] = 1.0;
    args[2].data[0] = -1.0;
  };
  checkOp({f64({3}), f64({}), f64({})}, opAll(OpKind::Clip), inverted);
  // Broadcast bounds, one per column.
  Points columns;
  columns.minGap = 0.02;
  columns.adjust = [](std::vector<Tensor> &args) {
    for (size_t i = 0; i < 3; ++i) {
      args[1].data[i] = -1.0 + 0.1 * i;
      args[2].data[i] = 1.0 + 0.1 * i;
    }
  };
  checkOp({f64({2, 3}), f64({3}), f64({3})}, opAll(OpKind::Clip), columns);
}

//===----------------------------------------------------------------------===//
// Kinks and ties: the documented conventions, exactly
//===----------------------------------------------------------------------===//

TEST(GradConventions, KinksAtZero) {
  // relu'(0) = 0, abs'(0) = 0 (sign(0) = 0); the cotangent is [1, 1, 1].
  std::vector<Tensor> args = {makeTensor(f64({3}), {-1, 0, 2}),
                              makeTensor(f64({3}), {1, 1, 1})};
  auto relu = gradientAt({f64({3})}, opAll(OpKind::Relu), args);
  ASSERT_EQ(relu.size(), 1u);
  EXPECT_EQ(relu[0].data, (std::vector<double>{0, 0, 1}));
  auto abs = gradientAt({f64({3})}, opAll(OpKind::Abs), args);
  ASSERT_EQ(abs.size(), 1u);
  EXPECT_EQ(abs[0].data, (std::vector<double>{-1, 0, 1}));
}

TEST(GradConventions, MaximumAndMinimumSplitTies) {
  // x = [1, 2, 3], y = [2, 2, 2], dz = [4, 4, 4]: maximum gives x the
  // cotangent where x > y and half of it at the tie.
  std::vector<Tensor> args = {makeTensor(f64({3}), {1, 2, 3}),
                              makeTensor(f64({3}), {2, 2, 2}),
                              makeTensor(f64({3}), {4, 4, 4})};
  auto max = gradientAt({f64({3}), f64({3})}, opAll(OpKind::Maximum), args);
  ASSERT_EQ(max.size(), 2u);
  EXPECT_EQ(max[0].data, (std::vector<double>{0, 2, 4}));
  EXPECT_EQ(max[1].data, (std::vector<double>{4, 2, 0}));
  auto min = gradientAt({f64({3}), f64({3})}, opAll(OpKind::Minimum), args);
  ASSERT_EQ(min.size(), 2u);
  EXPECT_EQ(min[0].data, (std::vector<double>{4, 2, 0}));
  EXPECT_EQ(min[1].data, (std::vector<double>{0, 2, 4}));
}

TEST(GradConventions, MaxReductionDividesAmongTies) {
  // max([1, 3, 3, 0]) = 3, reached twice: each tied element gets dy / 2.
  std::vector<Tensor> args = {makeTensor(f64({4}), {1, 3, 3, 0})};
  auto grad = gradientAt({f64({4})}, opAll(OpKind::Max), args);
  ASSERT_EQ(grad.size(), 1u);
  EXPECT_EQ(grad[0].data, (std::vector<double>{0, 0.5, 0.5, 0}));
}

TEST(GradConventions, ClipPassesAtTheBounds) {
  // clip(x, -1, 1) at x = [-2, -1, 0, 1, 2]: the cotangent passes where
  // -1 <= x <= 1, bounds included; lo and hi get the rest.
  std::vector<Tensor> args = {
      makeTensor(f64({5}), {-2, -1, 0, 1, 2}), makeTensor(f64({}), {-1}),
      makeTensor(f64({}), {1}), makeTensor(f64({5}), {1, 1, 1, 1, 1})};
  auto grad =
      gradientAt({f64({5}), f64({}), f64({})}, opAll(OpKind::Clip), args);
  ASSERT_EQ(grad.size(), 3u);
  EXPECT_EQ(grad[0].data, (std::vector<double>{0, 1, 1, 1, 0}));
  EXPECT_EQ(grad[1].data, (std::vector<double>{1}));
  EXPECT_EQ(grad[2].data, (std::vector<double>{1}));
}

TEST(GradConventions, PowExponentGradientIsZeroForNonPositiveBase) {
  // z = x^y at x = [-2, 0, 2], y = [2, 2, 2]: dz/dy = z ln x only for
  // x > 0 (4 ln 2), 0 elsewhere, and never NaN; dz/dx = y x^(y-1).
  std::vector<Tensor> args = {makeTensor(f64({3}), {-2, 0, 2}),
                              makeTensor(f64({3}), {2, 2, 2}),
                              makeTensor(f64({3}), {1, 1, 1})};
  auto grad = gradientAt({f64({3}), f64({3})}, opAll(OpKind::Pow), args);
  ASSERT_EQ(grad.size(), 2u);
  EXPECT_EQ(grad[0].data, (std::vector<double>{-4, 0, 4}));
  EXPECT_EQ(grad[1].data[0], 0);
  EXPECT_EQ(grad[1].data[1], 0);
  EXPECT_NEAR(grad[1].data[2], 4 * std::log(2.0), 1e-15);
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

TEST(GradCheck, Reductions) {
  Points distinct;
  distinct.minGap = 0.01; // max: no ties
  const OpKind kinds[] = {OpKind::Sum, OpKind::Mean, OpKind::Max,
                          OpKind::LogSumExp};
  for (OpKind kind : kinds) {
    SCOPED_TRACE(getOpName(kind).str());
    checkOp({f64({2, 3})}, opAll(kind), distinct);
    checkOp({f64({2, 3})}, opAll(kind, axisAttr(int64_t(1))), distinct);
    checkOp({f64({2, 3})}, opAll(kind, axisAttr(int64_t(-2))), distinct);
    checkOp({f64({2, 3})}, opAll(kind, axisAttr(int64_t(-1), true)), distinct);
    checkOp({f64({2, 2, 3})}, opAll(kind, axisAttr(std::vector<int64_t>{0, 2})),
            distinct);
    checkOp({f64({2, 2, 3})},
            opAll(kind, axisAttr(std::vector<int64_t>{-1, 0}, true)), distinct);
    checkOp({f64({3})}, opAll(kind, axisAttr(std::vector<int64_t>{})),
            distinct);
  }
}

TEST(GradCheck, MeanOverASizeName) {
  // The count of a mean over N is computed at run time.
  TensorType t(DType::F64, {Dim::named("N"), Dim::known(3)});
  checkOp({t}, opAll(OpKind::Mean, axisAttr(int64_t(0))));
  checkOp({t}, opAll(OpKind::Mean));
}

TEST(GradCheck, SoftmaxFamily) {
  for (OpKind kind : {OpKind::Softmax, OpKind::LogSoftmax}) {
    SCOPED_TRACE(getOpName(kind).str());
    checkOp({f64({2, 3})}, opAll(kind), {}, /*secondOrder=*/true);
    checkOp({f64({2, 3})}, opAll(kind, axisAttr(int64_t(0))));
    checkOp({f64({4})}, opAll(kind));
  }
  checkOp({f64({2, 3})}, opAll(OpKind::LogSumExp, axisAttr(int64_t(-1))), {},
          /*secondOrder=*/true);
}

//===----------------------------------------------------------------------===//
// matmul and layout ops
//===----------------------------------------------------------------------===//

TEST(GradCheck, MatMulFollowsNumPy) {
  const std::pair<TensorType, TensorType> shapes[] = {
      {f64({2, 3}), f64({3, 4})},       // matrix · matrix
      {f64({2, 3}), f64({3})},          // W @ x
      {f64({3}), f64({3, 4})},          // x @ W
      {f64({3}), f64({3})},             // dot product
      {f64({2, 2, 3}), f64({2, 3, 4})}, // batch
      {f64({2, 2, 3}), f64({3, 4})},    // broadcast batch
      {f64({1, 2, 3}), f64({2, 3, 2})}, // batch of 1 against 2
      {f64({2, 2, 3}), f64({3})},       // batch · vector
      {f64({3}), f64({2, 3, 4})},       // vector · batch
  };
  for (const auto &[x, y] : shapes) {
    SCOPED_TRACE(x.str() + " @ " + y.str());
    checkOp({x, y}, opAll(OpKind::MatMul), {}, /*secondOrder=*/true);
  }
}

TEST(GradCheck, LayoutOps) {
  AttrList perm;
  perm.set("perm", std::vector<int64_t>{1, 2, 0});
  checkOp({f64({2, 3, 4})}, opAll(OpKind::Transpose, perm));
  checkOp({f64({2, 3})}, opAll(OpKind::Transpose));

  AttrList shape;
  shape.set("shape", Shape{Dim::known(3), Dim::known(2)});
  checkOp({f64({2, 3})}, opAll(OpKind::Reshape, shape));
  shape.set("shape", Shape{Dim::known(-1)});
  checkOp({f64({2, 3})}, opAll(OpKind::Reshape, shape));

  AttrList to;
  to.set("shape", Shape{Dim::known(2), Dim::known(3)});
  checkOp({f64({3})}, opAll(OpKind::BroadcastTo, to));
  checkOp({f64({2, 1})}, opAll(OpKind::BroadcastTo, to));
  checkOp({f64({})}, opAll(OpKind::BroadcastTo, to));

  for (int64_t axis : {0, 1, -1}) {
    SCOPED_TRACE(("axis " + llvm::Twine(axis)).str());
    checkOp({f64({2, 3}), f64({2, 3})}, opAll(OpKind::Stack, axisAttr(axis)),
            {}, /*secondOrder=*/true);
    checkOp({f64({2, 3})}, opAll(OpKind::Unstack, axisAttr(axis)));
  }
  // A stack of one value used twice: both uses accumulate.
  checkOp({f64({3})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
    return std::vector<Value *>{
        b.create1(OpKind::Stack, {p[0], p[0]}, axisAttr(int64_t(0)))};
  });
  // unstack with one part unused: its cotangent is zeros.
  checkOp({f64({3, 2})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
    auto parts = b.create(OpKind::Unstack, {p[0]}, axisAttr(int64_t(0)));
    return std::vector<Value *>{parts[0], parts[2]};
  });

  checkOp({f64({2, 3}), f64({1, 3})},
          opAll(OpKind::Concat, axisAttr(int64_t(0))));
  checkOp({f64({2, 3}), f64({2, 1}), f64({2, 2})},
          opAll(OpKind::Concat, axisAttr(int64_t(-1))));
  checkOp({f64({2, 3})}, opAll(OpKind::Concat, axisAttr(int64_t(1))));

  AttrList split = axisAttr(int64_t(1));
  split.set("sizes", Shape{Dim::known(1), Dim::known(2)});
  checkOp({f64({2, 3})}, opAll(OpKind::Split, split));
  // Only the second part used: the first part's cotangent is zeros.
  checkOp({f64({2, 3})}, [split](Builder &b, llvm::ArrayRef<Value *> p) {
    auto parts = b.create(OpKind::Split, {p[0]}, split);
    return std::vector<Value *>{parts[1]};
  });
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy
//===----------------------------------------------------------------------===//

TEST(GradCheck, SoftmaxCrossEntropy) {
  // Labels are i32 and take no gradient (only logits are differentiated).
  Points labels;
  labels.adjust = [](std::vector<Tensor> &args) { args[1].data = {2, 0}; };
  checkOp({f64({2, 3}), i32({2})}, opAll(OpKind::SoftmaxCrossEntropy), labels);
  Points one;
  one.adjust = [](std::vector<Tensor> &args) { args[1].data = {1}; };
  checkOp({f64({4}), i32({})}, opAll(OpKind::SoftmaxCrossEntropy), one);
}

TEST(GradConventions, SoftmaxCrossEntropyInF32) {
  // f32 logits use one_hot directly. At logits 0 the softmax is 1/3 each:
  // the gradient is softmax - one_hot = [1/3, -2/3, 1/3] for label 1.
  TensorType logits(DType::F32, {Dim::known(1), Dim::known(3)});
  TensorType labels(DType::I32, {Dim::known(1)});
  std::vector<Tensor> args = {makeTensor(logits, {0, 0, 0}),
                              makeTensor(labels, {1})};
  args.push_back(makeTensor(TensorType(DType::F32, {Dim::known(1)}), {1}));
  auto grad =
      gradientAt({logits, labels}, opAll(OpKind::SoftmaxCrossEntropy), args);
  ASSERT_EQ(grad.size(), 1u);
  EXPECT_NEAR(grad[0].data[0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(grad[0].data[1], -2.0 / 3, 1e-7);
  EXPECT_NEAR(grad[0].data[2], 1.0 / 3, 1e-7);
}

//===----------------------------------------------------------------------===//
// Whole functions: composition, calls, stop_gradient, user rules
//===----------------------------------------------------------------------===//

TEST(GradCheck, CompositeModel) {
  // loss = mean(softplus(W @ x + b) * v) + sum(square(x)), every piece
  // differentiated at once; b broadcasts over nothing, x is used twice.
  checkOp(
      {f64({3, 4}), f64({4}), f64({3})},
      [](Builder &b, llvm::ArrayRef<Value *> p) {
        Value *h = b.add(b.matmul(p[0], p[1]), p[2]);
        Value *act = b.unary(OpKind::Softplus, h);
        Value *loss = b.create1(OpKind::Mean, {b.mul(act, p[2])});
        Value *reg = b.sum(b.unary(OpKind::Square, p[1]), {0}, false);
        return std::vector<Value *>{b.add(loss, reg)};
      },
      {}, /*secondOrder=*/true);
}

TEST(GradCheck, CallsAreInlined) {
  // h(x, y) = sin(x) * y; f(x, y) = h(x, y) + h(y, x) with broadcasting.
  Env env;
  ir::Module module;
  addFunction(
      module, "h", {f64({2, 3}), f64({3})},
      [](Builder &b, llvm::ArrayRef<Value *> p) {
        return std::vector<Value *>{b.mul(b.unary(OpKind::Sin, p[0]), p[1])};
      },
      /*wantsGrad=*/false);
  ir::Function *f = addFunction(
      module, "f", {f64({2, 3}), f64({3})},
      [](Builder &b, llvm::ArrayRef<Value *> p) {
        Value *a = b.call("h", {p[0], p[1]}, {f64({2, 3})})[0];
        Value *c = b.call("h", {p[0], b.neg(p[1])}, {f64({2, 3})})[0];
        return std::vector<Value *>{b.create1(OpKind::Sum, {b.mul(a, c)})};
      });
  ASSERT_TRUE(differentiateAndVerify(module, env)) << env.consumer.messages();
  const ir::Function *grad = module.lookup("f_grad");
  ASSERT_TRUE(grad);
  for (const auto &op : grad->getOps())
    EXPECT_NE(op->getKind(), OpKind::Call) << "calls are inlined";
  Rng rng(7);
  checkGradientAt(module, *f, randomArgs(*f, rng, {}), rng);
}

TEST(GradCheck, StopGradientContributesNothing) {
  // f(x) = 2x + stop_gradient(x * x): forward 2x + x^2, gradient 2 * dy.
  std::vector<Tensor> args = {makeTensor(f64({2}), {3, -1}),
                              makeTensor(f64({2}), {1, 5})};
  auto grad = gradientAt(
      {f64({2})},
      [](Builder &b, llvm::ArrayRef<Value *> p) {
        Value *two = b.mul(b.scalar(DType::F64, 2.0), p[0]);
        Value *stopped = b.unary(OpKind::StopGradient, b.mul(p[0], p[0]));
        return std::vector<Value *>{b.add(two, stopped)};
      },
      args);
  ASSERT_EQ(grad.size(), 1u);
  EXPECT_EQ(grad[0].data, (std::vector<double>{2, 10}));
}

TEST(GradCheck, UnreachedParametersGetZeros) {
  // f(x, y, n) = sum(sin(x)): y does not reach the result and gets zeros.
  Env env;
  ir::Module module;
  addFunction(module, "f", {f64({2}), f64({3}), i32({})},
              [](Builder &b, llvm::ArrayRef<Value *> p) {
                return std::vector<Value *>{
                    b.create1(OpKind::Sum, {b.unary(OpKind::Sin, p[0])})};
              });
  ASSERT_TRUE(differentiateAndVerify(module, env));
  const ir::Function *grad = module.lookup("f_grad");
  ASSERT_TRUE(grad);
  // The signature: the parameters, and no cotangent for a scalar result.
  ASSERT_EQ(grad->getParams().size(), 3u);
  ASSERT_EQ(grad->getReturns().size(), 2u);
  EXPECT_EQ(grad->getReturns()[0]->getName(), "d_p0");
  EXPECT_EQ(grad->getReturns()[1]->getName(), "d_p1");
  const ir::Op *zeros = grad->getReturns()[1]->getDefiningOp();
  ASSERT_TRUE(zeros);
  EXPECT_EQ(zeros->getKind(), OpKind::ZerosLike);
  // No other zeros are made.
  unsigned numZeros = 0;
  for (const auto &op : grad->getOps())
    numZeros += op->getKind() == OpKind::ZerosLike;
  EXPECT_EQ(numZeros, 1u);
}

TEST(GradCheck, SignatureWithCotangentsAndTuples) {
  // f(x, y) = (x * y, sum(x)): f_grad(x, y, d_out0, d_out1) -> (dx, dy).
  Env env;
  ir::Module module;
  addFunction(module, "f", {f64({2}), f64({2})},
              [](Builder &b, llvm::ArrayRef<Value *> p) {
                return std::vector<Value *>{b.mul(p[0], p[1]),
                                            b.create1(OpKind::Sum, {p[0]})};
              });
  ASSERT_TRUE(differentiateAndVerify(module, env));
  const ir::Function *grad = module.lookup("f_grad");
  ASSERT_TRUE(grad);
  EXPECT_EQ(grad->getRole(), ir::Function::Role::Grad);
  ASSERT_EQ(grad->getParams().size(), 4u);
  EXPECT_EQ(grad->getParams()[2]->getName(), "d_out0");
  EXPECT_EQ(grad->getParams()[3]->getType(), f64({}));
  // x = [1, 2], y = [3, 4], d0 = [1, 1], d1 = 10:
  // dx = d0 * y + d1 = [13, 14], dy = d0 * x = [1, 2].
  auto grads = run(module, "f_grad",
                   {makeTensor(f64({2}), {1, 2}), makeTensor(f64({2}), {3, 4}),
                    makeTensor(f64({2}), {1, 1}), makeTensor(f64({}), {10})});
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[0].data, (std::vector<double>{13, 14}));
  EXPECT_EQ(grads[1].data, (std::vector<double>{1, 2}));
}

/// Adds a rule instance `name(operands..., results..., cotangents...)`.
ir::Function *addRule(ir::Module &module, llvm::StringRef name,
                      llvm::ArrayRef<TensorType> params, const Body &body) {
  ir::Function *fn = addFunction(module, name, params, body, false);
  fn->setRole(ir::Function::Role::RuleInstance);
  return fn;
}

ir::GradRuleAttr ruleAttr(llvm::StringRef function, llvm::StringRef via) {
  ir::GradRuleAttr rule;
  rule.function = function.str();
  rule.ruleName = function.str();
  rule.via = via.str();
  return rule;
}

TEST(GradCheck, OverrideRuleIsUsedAndInlined) {
  // synth(x) = stack([x, x]) with the rule first_only: only the first copy
  // gets a gradient. synth_grad([1, 2], [[3, 4], [6, 8]]) = [3, 4].
  Env env;
  ir::Module module;
  addRule(
      module, "first_only.1", {f64({2}), f64({2}), f64({2, 2}), f64({2, 2})},
      [](Builder &b, llvm::ArrayRef<Value *> p) {
        auto parts = b.create(OpKind::Unstack, {p[3]}, axisAttr(int64_t(0)));
        return std::vector<Value *>{parts[0], b.zerosLike(parts[1])};
      });
  addFunction(
      module, "synth", {f64({2})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
        Value *y = b.create1(OpKind::Stack, {p[0], p[0]}, axisAttr(int64_t(0)));
        y->getDefiningOp()->getGradRule() =
            ruleAttr("first_only.1", "override");
        return std::vector<Value *>{y};
      });
  ASSERT_TRUE(differentiateAndVerify(module, env)) << env.consumer.messages();
  const ir::Function *grad = module.lookup("synth_grad");
  ASSERT_TRUE(grad);
  for (const auto &op : grad->getOps())
    EXPECT_NE(op->getKind(), OpKind::Call);
  // The forward op keeps its rule, so the rule instance stays.
  EXPECT_TRUE(module.lookup("first_only.1"));
  auto grads = run(
      module, "synth_grad",
      {makeTensor(f64({2}), {1, 2}), makeTensor(f64({2, 2}), {3, 4, 6, 8})});
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].data, (std::vector<double>{3, 4}));
}

TEST(GradCheck, CustomGradCallIsOnePrimitive) {
  // layer(x) = x * x with @custom_grad(clip_dy): the gradient is
  // clip(dy, -0.1, 0.1) whatever the body. model(x) = sum(3 * layer(x)):
  // the layer's cotangent is 3, clipped to 0.1. The layer's own gradient
  // uses the rule too.
  Env env;
  ir::Module module;
  addRule(module, "clip_dy.1", {f64({2}), f64({2}), f64({2})},
          [](Builder &b, llvm::ArrayRef<Value *> p) {
            Value *lo = b.scalar(DType::F64, -0.1);
            Value *hi = b.scalar(DType::F64, 0.1);
            return std::vector<Value *>{
                b.create1(OpKind::Clip, {p[2], lo, hi})};
          });
  ir::Function *layer = addFunction(
      module, "layer", {f64({2})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
        return std::vector<Value *>{b.mul(p[0], p[0])};
      });
  layer->setCustomGrad(ruleAttr("clip_dy.1", "custom_grad"));
  addFunction(module, "model", {f64({2})},
              [](Builder &b, llvm::ArrayRef<Value *> p) {
                auto h = b.call("layer", {p[0]}, {f64({2})});
                h[0]->getDefiningOp()->getGradRule() =
                    ruleAttr("clip_dy.1", "custom_grad");
                Value *scaled = b.mul(b.scalar(DType::F64, 3.0), h[0]);
                return std::vector<Value *>{b.create1(OpKind::Sum, {scaled})};
              });
  ASSERT_TRUE(differentiateAndVerify(module, env)) << env.consumer.messages();
  auto model = run(module, "model_grad", {makeTensor(f64({2}), {3, -5})});
  ASSERT_EQ(model.size(), 1u);
  EXPECT_EQ(model[0].data, (std::vector<double>{0.1, 0.1}));
  auto own =
      run(module, "layer_grad",
          {makeTensor(f64({2}), {3, -5}), makeTensor(f64({2}), {1, -0.05})});
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].data, (std::vector<double>{0.1, -0.05}));
  // The rule instance is inlined; the forward call of the primitive stays,
  // carrying its rule, so that differentiating the gradient again applies
  // the rule and not the body's derivative.
  for (const char *name : {"model_grad", "layer_grad"}) {
    for (const auto &op : module.lookup(name)->getOps()) {
      if (op->getKind() == OpKind::Call) {
        EXPECT_TRUE(op->getGradRule().isSet()) << name;
      }
    }
  }
}

TEST(GradCheck, UnusedRuleInstancesAreRemoved) {
  Env env;
  ir::Module module;
  addRule(module, "orphan.1", {f64({2}), f64({2}), f64({2})},
          [](Builder &, llvm::ArrayRef<Value *> p) {
            return std::vector<Value *>{p[2]};
          });
  addFunction(module, "f", {f64({2})}, opAll(OpKind::Sin));
  ASSERT_TRUE(differentiateAndVerify(module, env));
  EXPECT_FALSE(module.lookup("orphan.1"));
}

TEST(GradCheck, GradientsOfGradientsComeInOrder) {
  // g calls f_grad and comes first in the module: f_grad is generated
  // before g_grad, which differentiates it again (a Hessian-vector
  // product: g(x, v) = f_grad(x, v) for f(x) = sin(x) * x).
  Env env;
  ir::Module module;
  ir::Function *g =
      addFunction(module, "g", {f64({3}), f64({3})},
                  [](Builder &b, llvm::ArrayRef<Value *> p) {
                    auto r = b.call("f_grad", {p[0], p[1]}, {f64({3})});
                    return std::vector<Value *>{r[0]};
                  });
  ir::Function *f = addFunction(
      module, "f", {f64({3})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
        return std::vector<Value *>{b.mul(b.unary(OpKind::Sin, p[0]), p[0])};
      });
  ASSERT_TRUE(differentiateAndVerify(module, env)) << env.consumer.messages();
  Rng rng(3);
  checkGradientAt(module, *f, randomArgs(*f, rng, {}), rng);
  checkGradientAt(module, *g, randomArgs(*g, rng, {}), rng);
}

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

TEST(GradDiagnostics, NoRuleIsAnError) {
  Env env;
  ir::Module module;
  addFunction(module, "f", {f64({2})}, opAll(OpKind::Sin));
  ad::GradRegistry empty;
  EXPECT_FALSE(ad::differentiate(module, env.diags, empty));
  EXPECT_EQ(env.consumer.messages(),
            "no gradient rule for 'sin' in 'f_grad': it has no built-in rule "
            "and no @override or @custom_grad chose one\n");
  EXPECT_FALSE(module.lookup("f_grad")) << "no half-built gradient is left";
}

TEST(GradDiagnostics, CyclesAmongGradients) {
  Env env;
  ir::Module module;
  addFunction(
      module, "f", {f64({})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
        return std::vector<Value *>{b.call("g_grad", {p[0]}, {f64({})})[0]};
      });
  addFunction(
      module, "g", {f64({})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
        return std::vector<Value *>{b.call("f_grad", {p[0]}, {f64({})})[0]};
      });
  EXPECT_FALSE(ad::differentiate(module, env.diags));
  EXPECT_EQ(env.consumer.messages(),
            "generated gradients call each other in a cycle: f_grad -> "
            "g_grad -> f_grad\n");
}

TEST(GradDiagnostics, NameClash) {
  Env env;
  ir::Module module;
  addFunction(module, "f", {f64({})}, opAll(OpKind::Sin));
  addFunction(module, "f_grad", {f64({})}, opAll(OpKind::Cos), false);
  EXPECT_FALSE(ad::differentiate(module, env.diags));
  EXPECT_EQ(env.consumer.messages(),
            "cannot generate 'f_grad', the gradient of 'f': a function named "
            "'f_grad' already exists\n");
}

TEST(GradDiagnostics, RecursionCannotBeInlined) {
  Env env;
  ir::Module module;
  addFunction(module, "f", {f64({})},
              [](Builder &b, llvm::ArrayRef<Value *> p) {
                return std::vector<Value *>{b.call("f", {p[0]}, {f64({})})[0]};
              });
  EXPECT_FALSE(ad::differentiate(module, env.diags));
  EXPECT_EQ(env.consumer.messages(),
            "cannot differentiate 'f': the recursive calls f -> f cannot be "
            "inlined\n");
}

TEST(GradDiagnostics, UserRuleThatDoesNotFit) {
  auto build = [](ir::Module &module, std::vector<TensorType> ruleParams,
                  Body ruleBody) {
    addRule(module, "bad.1", ruleParams, ruleBody);
    addFunction(
        module, "f", {f64({2})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
          Value *y = b.unary(OpKind::Sin, p[0]);
          y->getDefiningOp()->getGradRule() = ruleAttr("bad.1", "override");
          return std::vector<Value *>{y};
        });
  };
  {
    Env env;
    ir::Module module;
    build(module, {f64({2}), f64({2}), f64({2})},
          [](Builder &, llvm::ArrayRef<Value *> p) {
            return std::vector<Value *>{p[0], p[1]};
          });
    EXPECT_FALSE(ad::differentiate(module, env.diags));
    EXPECT_EQ(env.consumer.messages(),
              "rule 'bad.1' returns 2 cotangents, but 'sin' has 1 operands\n");
  }
  {
    Env env;
    ir::Module module;
    build(module, {f64({2}), f64({2}), f64({2})},
          [](Builder &b, llvm::ArrayRef<Value *> p) {
            return std::vector<Value *>{b.create1(OpKind::Sum, {p[2]})};
          });
    EXPECT_FALSE(ad::differentiate(module, env.diags));
    EXPECT_EQ(env.consumer.messages(),
              "rule 'bad.1' returns a cotangent of type f64 for operand 0 of "
              "'sin', which has type f64[2]\n");
  }
  {
    Env env;
    ir::Module module;
    build(module, {f64({2}), f64({2}), f64({2}), f64({2})},
          [](Builder &, llvm::ArrayRef<Value *> p) {
            return std::vector<Value *>{p[1]};
          });
    EXPECT_FALSE(ad::differentiate(module, env.diags));
    EXPECT_EQ(env.consumer.messages(),
              "rule 'bad.1' used for 'sin' takes 4 arguments, but it is "
              "called with 3 (1 operands, 1 results and 1 cotangents)\n");
  }
  {
    Env env;
    ir::Module module;
    build(module, {f64({2}), f64({3}), f64({2})},
          [](Builder &, llvm::ArrayRef<Value *> p) {
            return std::vector<Value *>{p[0]};
          });
    EXPECT_FALSE(ad::differentiate(module, env.diags));
    EXPECT_EQ(env.consumer.messages(),
              "rule 'bad.1' used for 'sin' takes f64[3] as argument 1, but is "
              "given f64[2]\n");
  }
}

TEST(GradCheck, GradBlockRuleTakesOperandsAndCotangents) {
  // A grad block's instance recomputes the function's lets and may take
  // (operands..., cotangents...) only: here d(sin x) := 2 * dy. (The IR
  // verifier asks for the full form, so this is not verified.)
  Env env;
  ir::Module module;
  addRule(module, "f.grad", {f64({2}), f64({2})},
          [](Builder &b, llvm::ArrayRef<Value *> p) {
            return std::vector<Value *>{b.mul(b.scalar(DType::F64, 2.0), p[1])};
          });
  addFunction(
      module, "f", {f64({2})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
        Value *y = b.unary(OpKind::Sin, p[0]);
        y->getDefiningOp()->getGradRule() = ruleAttr("f.grad", "custom_grad");
        return std::vector<Value *>{y};
      });
  ASSERT_TRUE(ad::differentiate(module, env.diags)) << env.consumer.messages();
  auto grads =
      run(module, "f_grad",
          {makeTensor(f64({2}), {1, 2}), makeTensor(f64({2}), {3, 4})});
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].data, (std::vector<double>{6, 8}));
}

TEST(GradCheck, RuleSizesAreBoundAtTheUse) {
  // A rule instance typed with size names (f64[N]) serves an op on f64[3],
  // and the callee's N is replaced by 3 when the call is inlined.
  Env env;
  ir::Module module;
  TensorType vecN(DType::F64, {Dim::named("N")});
  addRule(module, "scale.1", {vecN, vecN, vecN},
          [](Builder &b, llvm::ArrayRef<Value *> p) {
            Value *doubled = b.mul(b.scalar(DType::F64, 2.0), p[2]);
            AttrList shape;
            shape.set("shape", Shape{Dim::named("N")});
            return std::vector<Value *>{
                b.create1(OpKind::Reshape, {doubled}, shape)};
          });
  addFunction(
      module, "f", {f64({3})}, [](Builder &b, llvm::ArrayRef<Value *> p) {
        Value *y = b.unary(OpKind::Identity, p[0]);
        y->getDefiningOp()->getGradRule() = ruleAttr("scale.1", "override");
        return std::vector<Value *>{b.create1(OpKind::Sum, {y})};
      });
  ASSERT_TRUE(differentiateAndVerify(module, env)) << env.consumer.messages();
  for (const auto &op : module.lookup("f_grad")->getOps())
    for (Value *r : op->getResults())
      EXPECT_EQ(r->getType().str().find('N'), std::string::npos)
          << r->getType().str();
  auto grads = run(module, "f_grad", {makeTensor(f64({3}), {1, 2, 3})});
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].data, (std::vector<double>{2, 2, 2}));
}

} // namespace
