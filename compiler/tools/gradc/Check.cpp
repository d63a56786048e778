//===- Check.cpp - gradc check: gradients against finite differences ------===//
//
//   gradc check FILE.grad [--backend=interp|llvm] [--points=N] [--seed=S]
//
// For every function marked @grad, evaluates the generated gradient and
// central finite differences of the forward function in f64 at seeded
// random points, and prints one line per function and parameter with the
// largest absolute and relative error. A gradient that disagrees fails
// (exit 1), unless the function's gradient is declared to differ on
// purpose: a `@surrogate` rule it uses (directly, through an override or a
// @custom_grad, or in a function it calls), or a `@surrogate` function.
// A declared surrogate that turns out exact is reported too, since the
// declaration is then wrong or the rule does less than intended.
//
// With --split-grad, the split form is checked against the gradient at
// the same points: NAME_fwd must return NAME's results, and NAME_bwd, given
// those residuals and the cotangents (for a scalar result, the 1 that
// NAME_grad implies), must return what NAME_grad returns. Both compute the
// same ops, so the tolerance is tight.
//
// With --value-and-grad, NAME_value_and_grad is checked the same way: given
// what NAME_grad takes, it must return NAME's results, then what NAME_grad
// returns.
//
// The module is compiled once, then promoted from f32 to f64 in place:
// every op is polymorphic over the floating types, so the promoted module
// computes the same functions with rounding errors small enough for finite
// differences to be meaningful.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "gradc/Emit/Mangle.h"
#include "gradc/IR/Literal.h"
#include "gradc/IR/Verifier.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

using namespace gradc;
using namespace gradc::driver;

namespace {

/// How finely gradients are compared with finite differences.
struct Tolerances {
  /// Finite differences with step h = hRel * max(1, |x|): truncation
  /// error ~h^2 and rounding error ~eps/h balance near 1e-5 in f64.
  double hRel;
  /// A gradient element passes when |g - fd| <= absTol or
  /// |g - fd| <= relTol * max(|g|, |fd|).
  double relTol, absTol;
  /// Two step sizes that disagree by more than this mark a kink (relu at
  /// 0, a tie in max, the edge of a clip): such elements are skipped.
  double kinkTol;
};
/// A module promoted to f64.
constexpr Tolerances f64Tolerances = {1e-5, 1e-6, 1e-8, 1e-4};
/// A module that calls extern functions stays f32: the user's kernels are
/// compiled for their declared element type, so every evaluation rounds
/// to float (eps 6e-8). The step balances that rounding (~eps/h) against
/// truncation (~h^2); a wrong rule is still off by far more than 1e-2.
constexpr Tolerances f32Tolerances = {3e-3, 1e-2, 1e-3, 5e-2};
/// How far NAME_fwd and NAME_bwd are from NAME and NAME_grad: the largest
/// absolute and relative difference over all elements. They compute the
/// same ops, but the module is simplified in f32 before it is promoted, so
/// a constant folded in one and not the other (`1/240` against `d_out/240`)
/// differs by an f32 rounding; they must agree as closely as a gradient
/// must agree with finite differences.
struct Difference {
  double maxAbs = 0, maxRel = 0;

  void add(llvm::ArrayRef<ir::Tensor> a, llvm::ArrayRef<ir::Tensor> b) {
    for (size_t t = 0; t < a.size() && t < b.size(); ++t)
      for (size_t i = 0; i < a[t].data.size() && i < b[t].data.size(); ++i) {
        double x = a[t].data[i], y = b[t].data[i];
        if (x == y || (std::isnan(x) && std::isnan(y)))
          continue;
        double abs = std::fabs(x - y);
        // A NaN against a number, or an infinity against anything else,
        // is as far apart as values get (and NaN must not reach std::max).
        if (!std::isfinite(abs)) {
          maxAbs = maxRel = std::numeric_limits<double>::infinity();
          continue;
        }
        maxAbs = std::max(maxAbs, abs);
        maxRel = std::max(maxRel, abs / std::max(std::fabs(x), std::fabs(y)));
      }
  }
  bool agrees(const Tolerances &tol) const {
    return maxAbs <= tol.absTol || maxRel <= tol.relTol;
  }
};

/// Promotes every f32 value of `module` to f64.
void promoteToF64(ir::Module &module) {
  auto promote = [](ir::Value *v) {
    if (v->getType().dtype != DType::F32)
      return;
    TensorType t = v->getType();
    t.dtype = DType::F64;
    v->setType(t);
  };
  for (const auto &fn : module.getFunctions()) {
    for (ir::Value *p : fn->getParams())
      promote(p);
    for (const auto &op : fn->getOps()) {
      for (ir::Value *r : op->getResults())
        promote(r);
      // f64 data has one summation order.
      op->getAttrs().erase("accumulate");
      // one_hot is the one op whose float type is not its operands'.
      if (op->getKind() == OpKind::OneHot)
        op->getAttrs().set("dtype", std::string("f64"));
    }
  }
}

bool hasAnnotation(const std::vector<ast::Annotation> &annotations,
                   llvm::StringRef name) {
  return llvm::any_of(annotations, [&](const ast::Annotation &a) {
    return a.name.name == name;
  });
}

/// Why a function's gradient may differ from its derivative: the surrogate
/// rules and functions it uses, and the stop_gradient ops it contains.
struct Deviations {
  std::vector<std::string> surrogates; ///< "rule 'clip_grad'", ...
  std::vector<std::string> undeclaredRules;
  std::vector<std::string> stopGradients; ///< locations
};

class GradientChecker {
public:
  GradientChecker(const ir::Module &module, const ast::Module &ast,
                  const SourceManager &sm, const RunBackend &backend,
                  llvm::raw_ostream &os, uint64_t seed, unsigned points,
                  const Tolerances &tol)
      : module(module), ast(ast), sm(sm), backend(backend), os(os), rng(seed),
        points(points), tol(tol) {}

  /// Checks every @grad function; returns the number of failures.
  unsigned checkAll();

private:
  struct ParamReport {
    double maxAbs = 0, maxRel = 0;
    unsigned compared = 0, skippedKinks = 0;
  };
  /// NAME_fwd against NAME and NAME_bwd against NAME_grad.
  struct SplitReport {
    Difference forward, backward;
    size_t residuals = 0;
    std::string error;
  };

  void compareSplit(const ir::Function &fn, const ir::Function::GradSpec &spec,
                    llvm::ArrayRef<ir::Tensor> args,
                    llvm::ArrayRef<ir::Tensor> cotangents,
                    llvm::ArrayRef<ir::Tensor> grads, SplitReport &report);
  bool printSplit(const ir::Function &fn, const ir::Function::GradSpec &spec,
                  const ir::Function &grad, const SplitReport &report,
                  unsigned usablePoints);
  /// NAME_value_and_grad against NAME (`value`) and NAME_grad (`grad`).
  struct ValueAndGradReport {
    Difference value, grad;
    std::string error;
  };
  void compareValueAndGrad(const ir::Function &fn, llvm::StringRef name,
                           llvm::ArrayRef<ir::Tensor> args,
                           llvm::ArrayRef<ir::Tensor> gradArgs,
                           llvm::ArrayRef<ir::Tensor> grads,
                           ValueAndGradReport &report);
  bool printValueAndGrad(const ir::Function &fn, llvm::StringRef name,
                         const ir::Function &grad,
                         const ValueAndGradReport &report,
                         unsigned usablePoints);

  bool checkFunction(const ir::Function &fn, const ir::Function &grad,
                     const ir::Function::GradSpec &spec);
  void noteRule(const ir::GradRuleAttr &rule, llvm::StringRef owner,
                Deviations &out);
  void collectDeviations(const ir::Function &fn, Deviations &out,
                         llvm::SmallPtrSetImpl<const ir::Function *> &seen);
  bool drawPoint(const ir::Function &fn, std::vector<ir::Tensor> &args);
  bool objective(const ir::Function &fn, llvm::ArrayRef<ir::Tensor> args,
                 llvm::ArrayRef<ir::Tensor> cotangents, double &value);
  double centralDifference(const ir::Function &fn,
                           std::vector<ir::Tensor> &args,
                           llvm::ArrayRef<ir::Tensor> cotangents,
                           unsigned param, size_t element, double h, bool &ok);
  ir::Tensor randomTensor(DType dtype, llvm::ArrayRef<int64_t> shape, double lo,
                          double hi);
  std::vector<int64_t> concreteShape(const TensorType &t);

  const ir::Module &module;
  const ast::Module &ast;
  const SourceManager &sm;
  const RunBackend &backend;
  llvm::raw_ostream &os;
  std::mt19937_64 rng;
  unsigned points;
  const Tolerances &tol;
  /// Size names get 2, 3, 4, ... in order of first appearance.
  llvm::StringMap<int64_t> sizes;
  /// The last error of the backend while drawing points.
  std::string drawError;
};

std::vector<int64_t> GradientChecker::concreteShape(const TensorType &t) {
  std::vector<int64_t> shape;
  for (const Dim &d : t.shape) {
    if (d.isKnown()) {
      shape.push_back(d.getSize());
      continue;
    }
    auto it = sizes.find(d.getName());
    if (it == sizes.end())
      it = sizes.insert({d.getName(), int64_t(2 + sizes.size() % 3)}).first;
    shape.push_back(it->second);
  }
  return shape;
}

ir::Tensor GradientChecker::randomTensor(DType dtype,
                                         llvm::ArrayRef<int64_t> shape,
                                         double lo, double hi) {
  ir::Tensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.data.resize(t.numElements());
  std::uniform_real_distribution<double> real(lo, hi);
  // Integers are indices or labels far more often than anything else, so
  // keep them small and non-negative; bools are fair coins.
  std::uniform_int_distribution<int> small(0, 1);
  for (double &v : t.data) {
    if (isFloat(dtype))
      v = real(rng);
    else
      v = small(rng);
  }
  return t;
}

bool GradientChecker::objective(const ir::Function &fn,
                                llvm::ArrayRef<ir::Tensor> args,
                                llvm::ArrayRef<ir::Tensor> cotangents,
                                double &value) {
  std::vector<ir::Tensor> results;
  std::string error;
  if (!backend.run(module, fn.getName(), args, results, error))
    return false;
  value = 0;
  if (cotangents.empty()) {
    value = results[0].data[0];
    return std::isfinite(value);
  }
  for (size_t r = 0; r < results.size(); ++r) {
    if (!isFloat(results[r].dtype))
      continue;
    for (size_t i = 0; i < results[r].data.size(); ++i)
      value += cotangents[r].data[i] * results[r].data[i];
  }
  return std::isfinite(value);
}

/// Draws arguments where the forward function is defined and finite:
/// first from [-1, 1], then (for log, sqrt and friends) from [0.2, 1.2].
bool GradientChecker::drawPoint(const ir::Function &fn,
                                std::vector<ir::Tensor> &args) {
  const std::pair<double, double> domains[] = {{-1, 1}, {0.2, 1.2}};
  for (auto [lo, hi] : domains) {
    for (unsigned attempt = 0; attempt < 4; ++attempt) {
      args.clear();
      for (ir::Value *p : fn.getParams())
        args.push_back(randomTensor(p->getType().dtype,
                                    concreteShape(p->getType()), lo, hi));
      std::vector<ir::Tensor> results;
      std::string error;
      if (!backend.run(module, fn.getName(), args, results, error)) {
        drawError = error;
        continue;
      }
      bool finite = llvm::all_of(results, [](const ir::Tensor &t) {
        return llvm::all_of(t.data, [](double v) { return std::isfinite(v); });
      });
      if (finite)
        return true;
    }
  }
  return false;
}

double GradientChecker::centralDifference(const ir::Function &fn,
                                          std::vector<ir::Tensor> &args,
                                          llvm::ArrayRef<ir::Tensor> cotangents,
                                          unsigned param, size_t element,
                                          double h, bool &ok) {
  double saved = args[param].data[element];
  double plus = 0, minus = 0;
  // The step the backend sees: x +- h rounded to the element type (f32
  // when the module calls extern functions).
  DType dtype = args[param].dtype;
  double up = ir::roundToDType(dtype, saved + h);
  double down = ir::roundToDType(dtype, saved - h);
  args[param].data[element] = up;
  ok = objective(fn, args, cotangents, plus);
  args[param].data[element] = down;
  ok = ok && objective(fn, args, cotangents, minus);
  args[param].data[element] = saved;
  // In f64 the step is 2h as it always was (rounding changes nothing).
  double step = dtype == DType::F64 ? 2 * h : up - down;
  return (plus - minus) / step;
}

/// Records `rule` as a declared surrogate when the rule, or the
/// @custom_grad function `owner` it is the gradient of, says @surrogate.
void GradientChecker::noteRule(const ir::GradRuleAttr &rule,
                               llvm::StringRef owner, Deviations &out) {
  std::string what = "rule '" + rule.ruleName + "' (@" + rule.via + " at " +
                     sm.formatLoc(rule.annotationLoc) + ")";
  const ast::RuleDecl *decl = ast.findRule(rule.ruleName);
  const ast::FnDecl *ownerDecl = owner.empty() ? nullptr : ast.findFn(owner);
  bool declared =
      (decl && hasAnnotation(decl->annotations, "surrogate")) ||
      (ownerDecl && hasAnnotation(ownerDecl->annotations, "surrogate"));
  (declared ? out.surrogates : out.undeclaredRules).push_back(what);
}

void GradientChecker::collectDeviations(
    const ir::Function &fn, Deviations &out,
    llvm::SmallPtrSetImpl<const ir::Function *> &seen) {
  if (!seen.insert(&fn).second)
    return;
  if (const ast::FnDecl *decl = ast.findFn(fn.getName()))
    if (hasAnnotation(decl->annotations, "surrogate"))
      out.surrogates.push_back("function '" + fn.getName().str() + "'");
  // A @custom_grad function (or one with a grad block) is differentiated
  // as a whole by its own rule.
  if (fn.getCustomGrad().isSet())
    noteRule(fn.getCustomGrad(), fn.getName(), out);
  for (const auto &op : fn.getOps()) {
    const ir::GradRuleAttr &rule = op->getGradRule();
    bool isCall =
        op->getKind() == OpKind::Call || op->getKind() == OpKind::ExternCall;
    if (rule.isSet())
      noteRule(rule, isCall ? op->getCallee() : "", out);
    // An extern declared @surrogate without a rule passes no gradient.
    if (op->getKind() == OpKind::ExternCall && !rule.isSet())
      if (const ir::ExternDecl *e = module.lookupExtern(op->getCallee()))
        if (e->noGradient)
          out.surrogates.push_back("extern function '" + e->name +
                                   "' (no gradient)");
    if (op->getKind() == OpKind::StopGradient)
      out.stopGradients.push_back(sm.formatLoc(op->getLoc()));
    // A custom-grad function is a primitive: its body is never
    // differentiated, so only its own rule matters.
    if (!rule.isSet())
      for (llvm::StringRef name : op->getCalledFunctions())
        if (const ir::Function *callee = module.lookup(name))
          collectDeviations(*callee, out, seen);
  }
}

void GradientChecker::compareSplit(const ir::Function &fn,
                                   const ir::Function::GradSpec &spec,
                                   llvm::ArrayRef<ir::Tensor> args,
                                   llvm::ArrayRef<ir::Tensor> cotangents,
                                   llvm::ArrayRef<ir::Tensor> grads,
                                   SplitReport &report) {
  if (!report.error.empty())
    return;
  std::vector<ir::Tensor> results, forward, backward;
  std::string error;
  if (!backend.run(module, fn.getName(), args, results, error) ||
      !backend.run(module, spec.fwdName, args, forward, error)) {
    report.error = spec.fwdName + ": " + error;
    return;
  }
  size_t numResults = fn.getReturns().size();
  report.residuals = forward.size() - numResults;
  report.forward.add(results, llvm::ArrayRef(forward).take_front(numResults));

  // f_bwd always takes cotangents: for a scalar loss, the seed 1 that
  // f_grad implies. (Not a random scale: a surrogate rule such as a
  // clip need not be linear in its cotangent.)
  std::vector<ir::Tensor> bwdArgs(args.begin(), args.end());
  bwdArgs.insert(bwdArgs.end(), forward.begin(), forward.end());
  if (cotangents.empty()) {
    ir::Tensor seed;
    seed.dtype = fn.getReturns()[0]->getType().dtype;
    seed.data = {1.0};
    bwdArgs.push_back(seed);
  } else {
    bwdArgs.insert(bwdArgs.end(), cotangents.begin(), cotangents.end());
  }
  if (!backend.run(module, spec.bwdName, bwdArgs, backward, error)) {
    report.error = spec.bwdName + ": " + error;
    return;
  }
  report.backward.add(grads, backward);
}

/// One line for the split form of a function; false when it disagrees.
bool GradientChecker::printSplit(const ir::Function &fn,
                                 const ir::Function::GradSpec &spec,
                                 const ir::Function &grad,
                                 const SplitReport &report,
                                 unsigned usablePoints) {
  if (!report.error.empty()) {
    os << "error     " << report.error << "\n";
    return false;
  }
  bool agrees = report.forward.agrees(tol) && report.backward.agrees(tol);
  os << llvm::left_justify(agrees ? "ok" : "FAIL", 10) << spec.bwdName
     << "  against " << grad.getName() << ": max abs difference "
     << llvm::format("%.2e", report.backward.maxAbs) << "  max rel difference "
     << llvm::format("%.2e", report.backward.maxRel) << "  (" << spec.fwdName
     << " against " << fn.getName() << ": "
     << llvm::format("%.2e", report.forward.maxRel) << "; " << report.residuals
     << (report.residuals == 1 ? " residual, " : " residuals, ") << usablePoints
     << " points)\n";
  return agrees;
}

void GradientChecker::compareValueAndGrad(const ir::Function &fn,
                                          llvm::StringRef name,
                                          llvm::ArrayRef<ir::Tensor> args,
                                          llvm::ArrayRef<ir::Tensor> gradArgs,
                                          llvm::ArrayRef<ir::Tensor> grads,
                                          ValueAndGradReport &report) {
  if (!report.error.empty())
    return;
  std::vector<ir::Tensor> results, both;
  std::string error;
  if (!backend.run(module, fn.getName(), args, results, error)) {
    report.error = fn.getName().str() + ": " + error;
    return;
  }
  if (!backend.run(module, name, gradArgs, both, error)) {
    report.error = name.str() + ": " + error;
    return;
  }
  size_t numResults = fn.getReturns().size();
  if (both.size() != numResults + grads.size()) {
    report.error = name.str() + ": returned " + std::to_string(both.size()) +
                   " values, expected " +
                   std::to_string(numResults + grads.size());
    return;
  }
  report.value.add(results, llvm::ArrayRef(both).take_front(numResults));
  report.grad.add(grads, llvm::ArrayRef(both).drop_front(numResults));
}

/// One line for NAME_value_and_grad; false when it disagrees.
bool GradientChecker::printValueAndGrad(const ir::Function &fn,
                                        llvm::StringRef name,
                                        const ir::Function &grad,
                                        const ValueAndGradReport &report,
                                        unsigned usablePoints) {
  if (!report.error.empty()) {
    os << "error     " << report.error << "\n";
    return false;
  }
  bool agrees = report.value.agrees(tol) && report.grad.agrees(tol);
  os << llvm::left_justify(agrees ? "ok" : "FAIL", 10) << name << "  against "
     << fn.getName() << " and " << grad.getName() << ": max rel difference "
     << llvm::format("%.2e", report.value.maxRel) << " (results), "
     << llvm::format("%.2e", report.grad.maxRel) << " (gradients)  ("
     << usablePoints << " points)\n";
  return agrees;
}

bool GradientChecker::checkFunction(const ir::Function &fn,
                                    const ir::Function &grad,
                                    const ir::Function::GradSpec &spec) {
  Deviations deviations;
  llvm::SmallPtrSet<const ir::Function *, 8> seen;
  collectDeviations(fn, deviations, seen);
  bool declaredSurrogate = !deviations.surrogates.empty();

  bool scalarLoss = fn.getReturns().size() == 1 &&
                    fn.getReturns()[0]->getType().isScalar() &&
                    isFloat(fn.getReturns()[0]->getType().dtype);
  std::vector<ParamReport> reports(spec.wrt.size());
  SplitReport split;
  bool hasSplit = !spec.fwdName.empty();
  ValueAndGradReport valueAndGrad;
  bool hasValueAndGrad = !spec.valueAndGradName.empty();
  unsigned usablePoints = 0;
  for (unsigned point = 0; point < points; ++point) {
    std::vector<ir::Tensor> args;
    if (!drawPoint(fn, args))
      continue;
    ++usablePoints;
    std::vector<ir::Tensor> cotangents;
    if (!scalarLoss)
      for (ir::Value *r : fn.getReturns())
        cotangents.push_back(randomTensor(r->getType().dtype,
                                          concreteShape(r->getType()), -1, 1));
    std::vector<ir::Tensor> gradArgs = args;
    gradArgs.insert(gradArgs.end(), cotangents.begin(), cotangents.end());
    std::vector<ir::Tensor> grads;
    std::string error;
    if (!backend.run(module, grad.getName(), gradArgs, grads, error)) {
      os << "error   " << grad.getName() << ": " << error << "\n";
      return false;
    }
    if (hasSplit)
      compareSplit(fn, spec, args, cotangents, grads, split);
    if (hasValueAndGrad)
      compareValueAndGrad(fn, spec.valueAndGradName, args, gradArgs, grads,
                          valueAndGrad);
    for (size_t w = 0; w < spec.wrt.size(); ++w) {
      unsigned param = spec.wrt[w];
      ParamReport &report = reports[w];
      // At most 16 elements per parameter and point, chosen at random, so
      // that a large weight matrix costs no more than a small one.
      std::vector<size_t> elements(args[param].data.size());
      std::iota(elements.begin(), elements.end(), 0);
      std::shuffle(elements.begin(), elements.end(), rng);
      elements.resize(std::min<size_t>(elements.size(), 16));
      std::sort(elements.begin(), elements.end());
      for (size_t e : elements) {
        double h = tol.hRel * std::max(1.0, std::fabs(args[param].data[e]));
        bool ok1, ok2;
        double fd = centralDifference(fn, args, cotangents, param, e, h, ok1);
        double fd2 =
            centralDifference(fn, args, cotangents, param, e, 2 * h, ok2);
        if (!ok1 || !ok2 ||
            std::fabs(fd - fd2) > tol.kinkTol * std::max(1.0, std::fabs(fd))) {
          ++report.skippedKinks;
          continue;
        }
        double g = grads[w].data[e];
        double abs = std::fabs(g - fd);
        double scale = std::max(std::fabs(g), std::fabs(fd));
        report.maxAbs = std::max(report.maxAbs, abs);
        report.maxRel = std::max(report.maxRel, scale > 0 ? abs / scale : 0);
        ++report.compared;
      }
    }
  }

  if (usablePoints == 0) {
    // A backend that cannot run the function at all (the cpp backend's
    // Clang rejecting generated code, say) says why.
    if (!drawError.empty())
      os << "error   " << grad.getName() << ": " << drawError << "\n";
    else
      os << "error   " << grad.getName() << ": found no point where '"
         << fn.getName() << "' is finite\n";
    return false;
  }

  bool passed = true;
  bool anyDeviation = false;
  for (size_t w = 0; w < spec.wrt.size(); ++w) {
    const ParamReport &r = reports[w];
    bool agrees = r.maxAbs <= tol.absTol || r.maxRel <= tol.relTol;
    anyDeviation |= !agrees;
    llvm::StringRef status =
        agrees ? "ok" : (declaredSurrogate ? "surrogate" : "FAIL");
    os << llvm::left_justify(status, 10) << grad.getName() << "  "
       << fn.getParam(spec.wrt[w])->getName() << "  max abs error "
       << llvm::format("%.2e", r.maxAbs) << "  max rel error "
       << llvm::format("%.2e", r.maxRel) << "  (" << r.compared
       << " elements at " << usablePoints << " points";
    if (r.skippedKinks)
      os << ", " << r.skippedKinks << " skipped near kinks";
    os << ")\n";
    if (!agrees && !declaredSurrogate)
      passed = false;
  }

  if (anyDeviation && declaredSurrogate) {
    os << "          differs from the derivative as declared by "
       << llvm::join(deviations.surrogates, ", ") << "\n";
  } else if (!anyDeviation && declaredSurrogate) {
    os << "note      " << grad.getName() << " matches the derivative although "
       << llvm::join(deviations.surrogates, ", ")
       << " is declared @surrogate\n";
  }
  if (!passed) {
    if (!deviations.undeclaredRules.empty())
      os << "          not the derivative: "
         << llvm::join(deviations.undeclaredRules, ", ")
         << "; mark the rule @surrogate if that is intended\n";
    if (!deviations.stopGradients.empty())
      os << "          stop_gradient at "
         << llvm::join(deviations.stopGradients, ", ")
         << " changes the gradient; mark the function @surrogate if that is "
            "intended\n";
  }
  // The split form after the gradient's own verdict and its reasons.
  if (hasSplit && !printSplit(fn, spec, grad, split, usablePoints))
    passed = false;
  if (hasValueAndGrad && !printValueAndGrad(fn, spec.valueAndGradName, grad,
                                            valueAndGrad, usablePoints))
    passed = false;
  return passed;
}

unsigned GradientChecker::checkAll() {
  unsigned failures = 0;
  for (const auto &fn : module.getFunctions()) {
    const auto &spec = fn->getGradSpec();
    if (!spec)
      continue;
    const ir::Function *grad = module.lookup(spec->gradName);
    if (!grad) {
      os << "error   " << spec->gradName << " was not generated\n";
      ++failures;
      continue;
    }
    sizes.clear();
    drawError.clear();
    if (!checkFunction(*fn, *grad, *spec))
      ++failures;
  }
  return failures;
}

} // namespace

int driver::checkCommand(Compilation &c, llvm::StringRef path,
                         llvm::StringRef backendName, llvm::StringRef pipeline,
                         uint64_t seed, unsigned points) {
  const RunBackend *backend = lookupRunBackend(backendName);
  if (!backend) {
    llvm::errs() << "gradc: error: unknown backend '" << backendName << "'\n";
    return 1;
  }
  // No point would compare nothing and report every gradient as failing.
  if (points == 0) {
    c.diags->report(SourceLoc(), diag::err_check_no_points);
    return c.finish();
  }
  if (!c.readFile(path) || !c.parse() || !c.check() || !c.lower() ||
      !c.differentiate(pipeline) || !c.loadExterns())
    return c.finish();
  if (!backendRunsLoops(backendName) &&
      !emit::checkBackendSupport(*c.ir, backendDisplayName(backendName),
                                 *c.diags))
    return c.finish();
  // The user's kernels are compiled for their declared element types: a
  // module that calls them is checked as it is, in f32.
  bool callsExterns = !c.ir->externs.empty();
  if (callsExterns) {
    std::vector<std::string> names;
    for (const ir::ExternDecl &e : c.ir->externs)
      names.push_back("'" + e.name + "'");
    llvm::outs() << "note      calls extern function(s) "
                 << llvm::join(names, ", ")
                 << ": checked in their element types, with f32 tolerances\n";
  } else {
    promoteToF64(*c.ir);
    if (!ir::verifyModule(*c.ir, *c.diags, "promote-f64"))
      return c.finish();
  }
  GradientChecker checker(*c.ir, *c.ast, c.sm, *backend, llvm::outs(), seed,
                          points, callsExterns ? f32Tolerances : f64Tolerances);
  unsigned failures = checker.checkAll();
  llvm::outs().flush();
  if (failures) {
    llvm::errs() << "gradc check: " << failures
                 << " gradient(s) disagree with finite differences\n";
    return 1;
  }
  return c.finish();
}
