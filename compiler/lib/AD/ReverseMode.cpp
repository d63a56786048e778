//===- ReverseMode.cpp - Generating NAME_grad functions -------------------===//
//
// Reverse-mode differentiation of straight-line tensor code. For a
// function `f` with a GradSpec, differentiate() builds `f_grad`:
//
//   1. Parameters: f's parameters, then one cotangent per result (none
//      when f returns one floating-point scalar: its seed is 1).
//   2. Forward: a copy of f's body, with every call of a user function
//      inlined recursively, except calls that carry a gradient rule (a
//      @custom_grad function is one primitive whose gradient is its rule).
//   3. Activity: the floating-point values that depend on a `wrt`
//      parameter through differentiable operands. Only they get adjoints.
//   4. Reverse sweep: the forward ops in reverse order; each op that some
//      cotangent reached runs its rule (the user rule named by its
//      GradRuleAttr, as a call of the rule instance, else the built-in
//      rule), which accumulates into its operands' adjoints. Every op a
//      rule creates carries a note saying which op and which rule.
//   5. Results: the adjoint of each `wrt` parameter, or zeros when none
//      reached it.
//   6. The rule-instance calls are inlined; the @custom_grad calls of the
//      forward body stay calls carrying their rule (as in f), so that
//      differentiating f_grad again uses the rule, not the body.
//
// Gradients are generated in dependency order (a function calling `g_grad`
// needs g_grad's body), and rule instances that nothing refers to any more
// are removed at the end.
//
// buildVJP() runs the same steps with an explicit cotangent for every
// result and the results returned before the gradients: the function that
// the `split` pass cuts into NAME_fwd and NAME_bwd. buildValueAndGrad()
// takes the parameters of NAME_grad and returns the results before the
// gradients: NAME_value_and_grad.
//
//===----------------------------------------------------------------------===//

#include "gradc/AD/ReverseMode.h"

#include "GradContext.h"

#include "gradc/IR/Inline.h"
#include "gradc/IR/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include <functional>
#include <map>

using namespace gradc;
using namespace gradc::ad;
using ir::Function;
using ir::Op;
using ir::Value;

namespace {

/// `d_<name>` for a value the user named, or "" for a temporary.
std::string adjointName(const Value *v) {
  if (v->getName().empty())
    return "";
  return ("d_" + v->getName()).str();
}

/// The cotangent parameter of result `i` of `fn`.
std::string cotangentName(const Function &fn, unsigned i) {
  std::string name = adjointName(fn.getReturns()[i]);
  if (!name.empty())
    return name;
  return fn.getReturns().size() == 1 ? "d_out" : "d_out" + std::to_string(i);
}

/// How diagnostics and notes name an op: `'stack'`, or `call of 'f'`.
std::string opLabel(const Op &op) {
  if (op.getKind() == OpKind::Call)
    return ("call of '" + op.getCallee() + "'").str();
  if (op.getKind() == OpKind::ExternCall)
    return ("call of extern '" + op.getCallee() + "'").str();
  return ("'" + op.getName() + "'").str();
}

class Differentiator {
public:
  Differentiator(ir::Module &module, DiagnosticEngine &diags,
                 const GradRegistry &registry)
      : module(module), diags(diags), registry(registry) {}

  bool run();

  /// How a gradient function is shaped. NAME_grad: implicit seed 1 for a
  /// scalar result and only the gradients returned. The VJP: a cotangent
  /// parameter for every result, and the results returned first.
  /// NAME_value_and_grad: NAME_grad's parameters, the results first.
  struct Form {
    bool alwaysCotangents = false;
    bool returnResults = false;
  };
  bool buildGradient(const Function &fn, Function &grad, Form form) {
    return buildGradient(fn, *fn.getGradSpec(), grad, form);
  }
  bool buildGradient(const Function &fn, const Function::GradSpec &spec,
                     Function &grad, Form form);

private:
  bool collectSpecs(std::vector<Function *> &pending);
  bool orderSpecs(std::vector<Function *> &pending);
  void collectGradCalls(const Function &fn, llvm::StringSet<> &visited,
                        std::vector<Function *> &deps);
  bool generate(Function &fn);
  llvm::DenseSet<const Value *> findActive(const Function &grad,
                                           llvm::ArrayRef<unsigned> wrt) const;
  bool sweepOp(GradContext &ctx, const Op &op, const Function &grad);
  bool applyUserRule(GradContext &ctx, const Op &op);
  bool sweepLoop(GradContext &ctx, const Op &op, Function &grad);
  bool sweepCheckpointedLoop(GradContext &ctx, const Op &op,
                             const Function &body, const Function &rev);
  const Function *loopVJP(const Op &op, const Function &body,
                          llvm::ArrayRef<unsigned> skip = {});
  const Function *loopTapeBody(const Function &body, unsigned carries);
  const Function *loopRowsBody(const Function &body, unsigned carries,
                               llvm::ArrayRef<unsigned> rowed);
  const Function *loopReverseBody(const Op &op, const Function &body,
                                  const Function &vjp, bool checkpointed,
                                  llvm::ArrayRef<unsigned> rowed = {});
  bool sweepExternWithoutRule(const Op &op, const Function &grad);
  bool sweepIf(GradContext &ctx, const Op &op, const Function &grad);
  const Function *branchVJP(const Op &op, const Function &branch);
  void reportInlineFailure(const Function &fn,
                           const ir::InlineFailure &failure);
  void eraseUnusedRuleInstances();

  /// "f.grad:7:13": file name (without directories, so that printed IR
  /// does not depend on where the file lives), line and column.
  std::string locText(SourceLoc loc) const;
  /// The note on every op that the rule of `op` creates.
  std::string ruleNote(const Op &op) const;
  static ir::Provenance provenanceOf(const ir::GradRuleAttr &rule);

  ir::Module &module;
  DiagnosticEngine &diags;
  const GradRegistry &registry;
  /// The pending gradients by name, to find calls of them.
  llvm::StringMap<Function *> pendingByGradName;
  /// Forward loops that sweepLoop replaced by their taped form, erased
  /// once the sweep is over, and the replacement of each of their results.
  llvm::DenseSet<const Op *> replacedLoops;
  llvm::DenseMap<Value *, Value *> replacedValues;
};

std::string Differentiator::locText(SourceLoc loc) const {
  PresumedLoc p = diags.getSourceManager().getPresumedLoc(loc);
  if (!p.isValid())
    return "";
  return (llvm::sys::path::filename(p.filename) + ":" + llvm::Twine(p.line) +
          ":" + llvm::Twine(p.column))
      .str();
}

/// The field that `--emit=dot` and the loop IR's origins read: which
/// mechanism chose the rule whose ops are being made.
ir::Provenance Differentiator::provenanceOf(const ir::GradRuleAttr &rule) {
  if (!rule.isSet())
    return ir::Provenance::BuiltIn;
  if (rule.gradBlock)
    return ir::Provenance::GradBlock;
  return rule.via == "override" ? ir::Provenance::Override
                                : ir::Provenance::CustomGrad;
}

std::string Differentiator::ruleNote(const Op &op) const {
  bool isCall =
      op.getKind() == OpKind::Call || op.getKind() == OpKind::ExternCall;
  std::string what = isCall ? op.getCallee().str() : op.getName().str();
  std::string note = "gradient of '" + what + "'";
  std::string where = locText(op.getLoc());
  if (!where.empty())
    note += " at " + where;
  const ir::GradRuleAttr &rule = op.getGradRule();
  if (!rule.isSet())
    return note + ": built-in rule";
  // IRGen names the rule of a grad block "grad block of 'f'".
  if (rule.gradBlock)
    note += ": the " + rule.ruleName;
  else
    note += ": rule '" + rule.ruleName + "' from @" + rule.via;
  std::string annotation = locText(rule.annotationLoc);
  if (!annotation.empty())
    note += " at " + annotation;
  return note;
}

//===----------------------------------------------------------------------===//
// Which gradients, in which order
//===----------------------------------------------------------------------===//

/// Gathers the functions with a GradSpec whose gradient does not exist yet
/// and reports specs that cannot be generated.
bool Differentiator::collectSpecs(std::vector<Function *> &pending) {
  bool ok = true;
  for (const auto &fn : module.getFunctions()) {
    const auto &spec = fn->getGradSpec();
    if (!spec)
      continue;
    for (unsigned index : spec->wrt) {
      if (index < fn->getParams().size())
        continue;
      diags.report(spec->loc, diag::err_ad_wrt_range)
          << fn->getName() << index << fn->getParams().size();
      ok = false;
    }
    Function *existing = module.lookup(spec->gradName);
    // A generated gradient of a printed module: differentiated already.
    if (existing && existing->getRole() == Function::Role::Grad &&
        !pendingByGradName.count(spec->gradName))
      continue;
    if (existing || pendingByGradName.count(spec->gradName)) {
      diags.report(spec->loc, diag::err_ad_grad_name_clash)
          << spec->gradName << fn->getName();
      if (existing && existing->getLoc().isValid())
        diags.report(existing->getLoc(), diag::note_ad_declared_here)
            << spec->gradName;
      if (!existing) {
        const Function *other = pendingByGradName[spec->gradName];
        diags.report(other->getGradSpec()->loc, diag::note_ad_grad_name_taken)
            << other->getName() << spec->gradName;
      }
      ok = false;
      continue;
    }
    pendingByGradName[spec->gradName] = fn.get();
    pending.push_back(fn.get());
  }
  return ok;
}

/// Adds to `deps` the pending functions whose gradient `fn` calls, directly
/// or through the functions and rules it uses, in depth-first order. An
/// explicit stack replaces recursion: a chain of 100,000 calls must not
/// overflow the C++ stack.
void Differentiator::collectGradCalls(const Function &fn,
                                      llvm::StringSet<> &visited,
                                      std::vector<Function *> &deps) {
  // A function being walked: its next op, and the names the current op
  // uses (a callee, a rule) not looked at yet.
  struct Walk {
    explicit Walk(const Function *fn) : fn(fn) {}
    const Function *fn;
    size_t nextOp = 0;
    llvm::SmallVector<llvm::StringRef, 2> names;
    size_t nextName = 0;
  };
  std::vector<Walk> stack;
  stack.emplace_back(&fn);
  while (!stack.empty()) {
    Walk &top = stack.back();
    if (top.nextName < top.names.size()) {
      llvm::StringRef name = top.names[top.nextName++];
      if (!visited.insert(name).second)
        continue;
      if (Function *owner = pendingByGradName.lookup(name))
        deps.push_back(owner);
      else if (const Function *callee = module.lookup(name))
        stack.emplace_back(callee); // invalidates `top`
      continue;
    }
    if (top.nextOp == top.fn->getOps().size()) {
      stack.pop_back();
      continue;
    }
    const Op &op = *top.fn->getOps()[top.nextOp++];
    top.names.clear();
    top.nextName = 0;
    if (op.getKind() == OpKind::Call)
      top.names.push_back(op.getCallee());
    if (op.getGradRule().isSet())
      top.names.push_back(op.getGradRule().function);
  }
}

/// Sorts `pending` so that every gradient comes after the gradients it
/// calls (depth first, in module order, so the order is deterministic).
/// Reports a cycle.
bool Differentiator::orderSpecs(std::vector<Function *> &pending) {
  std::map<Function *, std::vector<Function *>> deps;
  for (Function *fn : pending) {
    llvm::StringSet<> visited;
    visited.insert(fn->getName());
    collectGradCalls(*fn, visited, deps[fn]);
  }
  enum class Mark { None, Active, Done };
  std::map<Function *, Mark> marks;
  std::vector<Function *> sorted, stack;
  std::function<bool(Function *)> visit = [&](Function *fn) {
    Mark &mark = marks[fn];
    if (mark == Mark::Done)
      return true;
    if (mark == Mark::Active) {
      // The cycle is the part of the stack from fn's first appearance.
      auto start = llvm::find(stack, fn);
      std::string cycle;
      for (auto it = start; it != stack.end(); ++it)
        cycle += (*it)->getGradSpec()->gradName + " -> ";
      cycle += fn->getGradSpec()->gradName;
      diags.report(fn->getGradSpec()->loc, diag::err_ad_grad_cycle) << cycle;
      return false;
    }
    mark = Mark::Active;
    stack.push_back(fn);
    for (Function *dep : deps[fn])
      if (!visit(dep))
        return false;
    stack.pop_back();
    marks[fn] = Mark::Done;
    sorted.push_back(fn);
    return true;
  };
  for (Function *fn : pending)
    if (!visit(fn))
      return false;
  pending = std::move(sorted);
  return true;
}

//===----------------------------------------------------------------------===//
// One gradient
//===----------------------------------------------------------------------===//

void Differentiator::reportInlineFailure(const Function &fn,
                                         const ir::InlineFailure &failure) {
  SourceLoc loc = failure.loc.isValid() ? failure.loc : fn.getLoc();
  if (failure.kind == ir::InlineFailure::Kind::UnknownCallee) {
    diags.report(loc, diag::err_ad_unknown_callee)
        << fn.getName() << failure.callee;
    return;
  }
  std::string chain;
  for (const std::string &name : failure.chain)
    chain += (chain.empty() ? "" : " -> ") + name;
  diags.report(loc, diag::err_ad_recursion) << fn.getName() << chain;
}

llvm::DenseSet<const Value *>
Differentiator::findActive(const Function &grad,
                           llvm::ArrayRef<unsigned> wrt) const {
  llvm::DenseSet<const Value *> active;
  for (unsigned index : wrt)
    if (isFloat(grad.getParam(index)->getType().dtype))
      active.insert(grad.getParam(index));
  for (const auto &op : grad.getOps()) {
    // A user rule may send a gradient to any operand; a built-in one only
    // to the operands the op table calls differentiable.
    bool userRule = op->getGradRule().isSet();
    bool reached = false;
    for (unsigned i = 0; i < op->getNumOperands() && !reached; ++i)
      reached = active.contains(op->getOperand(i)) &&
                (userRule || op->getInfo().isOperandDifferentiable(i));
    if (!reached)
      continue;
    for (Value *r : op->getResults())
      if (isFloat(r->getType().dtype))
        active.insert(r);
  }
  return active;
}

// A user rule instance takes (operands..., results..., cotangents...) and
// returns one cotangent per operand; each is accumulated like a built-in
// rule's contribution. The instance of a grad block recomputes the
// function's `let`s itself and takes (operands..., cotangents...). Its
// size names are bound by the arguments, as at any call.
bool Differentiator::applyUserRule(GradContext &ctx, const Op &op) {
  const ir::GradRuleAttr &rule = op.getGradRule();
  const Function *fn = module.lookup(rule.function);
  if (!fn) {
    diags.report(op.getLoc(), diag::err_ad_rule_missing)
        << rule.ruleName << opLabel(op) << rule.function;
    return false;
  }
  unsigned numOperands = op.getNumOperands(), numResults = op.getNumResults();
  unsigned numParams = fn->getParams().size();
  bool takesResults = numParams == numOperands + 2 * numResults;
  if (!takesResults && numParams != numOperands + numResults) {
    diags.report(op.getLoc(), diag::err_ad_rule_arity)
        << rule.ruleName << opLabel(op) << numParams
        << numOperands + 2 * numResults << numOperands << numResults;
    return false;
  }
  llvm::SmallVector<Value *, 8> args(op.getOperands());
  if (takesResults)
    llvm::append_range(args, op.getResults());
  // The cotangents come last; zeros for results no gradient reached are
  // made only once the rule is known to fit.
  ir::SizeBindings sizes;
  for (unsigned i = 0; i < numParams; ++i) {
    const TensorType &param = fn->getParam(i)->getType();
    const TensorType &arg = i < args.size()
                                ? args[i]->getType()
                                : op.getResult(i - args.size())->getType();
    std::string conflict;
    if (ir::unifyParamType(param, arg, sizes, conflict))
      continue;
    diags.report(op.getLoc(), diag::err_ad_rule_param_type)
        << rule.ruleName << opLabel(op) << param.str() << i << arg.str();
    return false;
  }
  if (fn->getReturns().size() != numOperands) {
    diags.report(op.getLoc(), diag::err_ad_rule_result_count)
        << rule.ruleName << fn->getReturns().size() << opLabel(op)
        << numOperands;
    return false;
  }
  llvm::SmallVector<TensorType, 4> returnTypes;
  for (unsigned i = 0; i < numOperands; ++i) {
    // A cotangent fits when accumulate() can sum it to the operand's
    // shape: the operand's own type, or a broadcast of it.
    TensorType ret = ir::substituteSizes(fn->getReturns()[i]->getType(), sizes);
    const TensorType &operand = op.getOperand(i)->getType();
    std::optional<Shape> both = broadcastShapes(ret.shape, operand.shape);
    if (ret.dtype != operand.dtype || !both || *both != ret.shape) {
      diags.report(op.getLoc(), diag::err_ad_rule_result_type)
          << rule.ruleName << ret.str() << i << opLabel(op) << operand.str();
      return false;
    }
    returnTypes.push_back(ret);
  }

  for (Value *r : op.getResults())
    args.push_back(ctx.adjointOrZeros(r));
  auto cotangents = ctx.builder().call(rule.function, args, returnTypes);
  for (unsigned i = 0; i < numOperands; ++i)
    ctx.accumulate(op.getOperand(i), cotangents[i]);
  return true;
}

/// An extern function is C++ that differentiation cannot see into: without
/// a rule, a cotangent that reaches its call is an error naming it, unless
/// it is declared @surrogate (no gradient flows through it, on purpose).
bool Differentiator::sweepExternWithoutRule(const Op &op,
                                            const Function &grad) {
  const ir::ExternDecl *decl = module.lookupExtern(op.getCallee());
  if (decl && decl->noGradient)
    return true;
  diags.report(op.getLoc(), diag::err_ad_extern_no_rule)
      << op.getCallee() << grad.getName();
  if (decl && decl->loc.isValid())
    diags.report(decl->loc, diag::note_ad_declared_here) << op.getCallee();
  return false;
}

/// Runs the rule of one forward op, if a cotangent reached it.
bool Differentiator::sweepOp(GradContext &ctx, const Op &op,
                             const Function &grad) {
  bool reached = false;
  for (Value *r : op.getResults()) {
    Value *adjoint = ctx.adjointOf(r);
    if (!adjoint)
      continue;
    reached = true;
    // Every use of r comes later, so its adjoint is complete: name it.
    if (adjoint->getName().empty() && !adjoint->isParam())
      adjoint->setName(adjointName(r));
  }
  if (!reached)
    return true;

  ir::Builder &b = ctx.builder();
  b.setLoc(op.getLoc());
  b.setNote(ruleNote(op));
  b.setProvenance(provenanceOf(op.getGradRule()));
  if (op.getGradRule().isSet())
    return applyUserRule(ctx, op);
  if (op.getKind() == OpKind::For)
    return sweepLoop(ctx, op, const_cast<Function &>(grad));
  if (op.getKind() == OpKind::If)
    return sweepIf(ctx, op, grad);
  if (op.getKind() == OpKind::ExternCall)
    return sweepExternWithoutRule(op, grad);
  if (GradRuleFn rule = registry.lookup(op.getKind())) {
    rule(ctx, op);
    return true;
  }
  // Activity analysis never lets a cotangent reach a non-differentiable
  // op; a differentiable op without a rule is a hole in the registry.
  if (!op.getInfo().isDifferentiable())
    return true;
  diags.report(op.getLoc(), diag::err_ad_no_rule)
      << op.getName() << grad.getName();
  return false;
}

//===----------------------------------------------------------------------===//
// Loops
//===----------------------------------------------------------------------===//
//
// The adjoint of `for` (docs/Gradients.md, "Loops"), for a body
// B(t, c, v) -> (c', y) with carries c, invariants v and outputs y:
//
//   1. B.vjp(t, c, v, dc', dy) -> (dc, dv): the body's VJP, built like any
//      gradient, with respect to its floating-point carries and invariants.
//   2. B.tape(t, c, v) -> (c', y, c): the body that also outputs the carries
//      it was given; the forward loop is replaced by a loop over B.tape, so
//      that its stacked extra outputs are the tape of per-step carries.
//   3. B.rev(t, dc, acc, tape, v, dys) -> (dc, acc + dv): one reverse step
//      reads c_t and dy_t at t from the tape and the stacked cotangents and
//      runs B.vjp; a `for` with `reverse = true` runs it from the last index
//      down to the first (or upwards, when the loop differentiated is itself
//      a reverse loop), carrying the carries' adjoints and the invariants'
//      accumulated adjoints.
//   4. The loop's operands receive the reverse loop's results.
//
// An invariant v that the body reads only as its row at the loop index,
// v[t] (`take(v, t, axis = 0)`; the common `xs[t]`), is "rowed": its
// adjoint is a sum of one row per step, and accumulating scatter_add(dx_t,
// t) into a zero tensor of v's size at every step would cost O(T * |v|),
// quadratic in T. Instead B.rows(t, c, v, x) -> (c', y) is the body with
// the row v[t] as a parameter x of its own, its VJP gives dx_t, and B.rev
// returns dx_t as a per-step output of the reverse loop: stacked at the
// step's position, that is d v itself (padded with zero rows when the
// loop does not cover v's first axis), at O(T * |x|) in time and memory,
// like `lax.scan`'s stacked outputs (docs/Gradients.md, "Loops").
//
// The functions are made once per body (role LoopBody) and reused.
//
// A loop with `@checkpoint` (attribute `checkpoint`) keeps no tape: the
// forward loop runs B itself, and the reverse loop runs
// B.crev(t, dc, acc, c_t, v, dys), which takes c_t itself where B.rev
// reads the tape. Its operands hold the initial carries c_0 in c_t's place,
// and its attribute `recompute = B` says that at step t the body receives
// the carries B had at t, recomputed from c_0 (docs/IR.md): the executor
// keeps some of them (every k-th step, or Griewank's binomial schedule)
// and reruns B from the nearest one. The values are those a tape would
// hold, so the gradient is bitwise the same; only memory and time differ.

/// Whether `v` has a floating-point type (only those take adjoints).
static bool isFloatValue(const Value *v) { return isFloat(v->getType().dtype); }

/// `T[n, ...]`: a per-step type stacked along a new first axis.
static TensorType stacked(const TensorType &type, const Dim &trip) {
  TensorType t = type;
  t.shape.insert(t.shape.begin(), trip);
  return t;
}

/// Whether the body's parameter `p` is read only as `take(p, t, axis = 0)`
/// with `t` the loop index (parameter 0), and never returned.
static bool isReadByRowOnly(const Function &body, const Value *p) {
  bool used = false;
  for (const auto &op : body.getOps())
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      if (op->getOperand(i) != p)
        continue;
      if (op->getKind() != OpKind::Take || i != 0 ||
          op->getOperand(1) != body.getParam(0) ||
          op->getAttrs().getInt("axis") != 0)
        return false;
      used = true;
    }
  return used && !llvm::is_contained(body.getReturns(), p);
}

/// The positions (among the invariants) of the rowed invariants of a loop
/// body with `carries` carries: floating-point ones read only as v[t].
static llvm::SmallVector<unsigned, 2> rowedInvariants(const Function &body,
                                                      unsigned carries) {
  llvm::SmallVector<unsigned, 2> rowed;
  for (unsigned i = 1 + carries; i < body.getParams().size(); ++i)
    if (isFloatValue(body.getParam(i)) &&
        isReadByRowOnly(body, body.getParam(i)))
      rowed.push_back(i - 1 - carries);
  return rowed;
}

const Function *Differentiator::loopVJP(const Op &op, const Function &body,
                                        llvm::ArrayRef<unsigned> skip) {
  std::string name = (body.getName() + ".vjp").str();
  if (const Function *existing = module.lookup(name))
    return existing;
  Function::GradSpec spec;
  spec.gradName = name;
  spec.loc = op.getLoc();
  for (unsigned i = 1; i < body.getParams().size(); ++i)
    if (isFloatValue(body.getParam(i)) && !llvm::is_contained(skip, i))
      spec.wrt.push_back(i);
  Function *vjp = module.addFunction(name);
  vjp->setRole(Function::Role::LoopBody);
  vjp->setLoc(op.getLoc());
  // The body's own loops are swept in a gradient of their own.
  auto savedLoops = std::move(replacedLoops);
  auto savedValues = std::move(replacedValues);
  replacedLoops.clear();
  replacedValues.clear();
  Form form;
  form.alwaysCotangents = true;
  bool ok = buildGradient(body, spec, *vjp, form);
  replacedLoops = std::move(savedLoops);
  replacedValues = std::move(savedValues);
  if (ok)
    return vjp;
  module.eraseFunction(vjp);
  return nullptr;
}

const Function *Differentiator::loopTapeBody(const Function &body,
                                             unsigned carries) {
  std::string name = (body.getName() + ".tape").str();
  if (const Function *existing = module.lookup(name))
    return existing;
  Function *tape = module.addFunction(name);
  tape->setRole(Function::Role::LoopBody);
  tape->setLoc(body.getLoc());
  for (const Value *p : body.getParams())
    tape->addParam(p->getType(), p->getName());
  ir::Builder b(*tape);
  b.setLoc(body.getLoc());
  llvm::SmallVector<TensorType, 4> types;
  for (const Value *r : body.getReturns())
    types.push_back(r->getType());
  auto results = b.call(body.getName(), tape->getParams(), types);
  std::vector<Value *> returns(results.begin(), results.end());
  for (unsigned i = 0; i < carries; ++i)
    returns.push_back(tape->getParam(1 + i));
  tape->setReturns(returns);
  ir::inlineCall(*tape, tape->getOps().back().get(), body);
  return tape;
}

/// B.rows(t, c, v, x_rowed...) -> (c', y): the body with each rowed
/// invariant's row v[t] replaced by a parameter of its own (v is then
/// unread).
const Function *Differentiator::loopRowsBody(const Function &body,
                                             unsigned carries,
                                             llvm::ArrayRef<unsigned> rowed) {
  std::string name = (body.getName() + ".rows").str();
  if (const Function *existing = module.lookup(name))
    return existing;
  Function *rows = module.addFunction(name);
  rows->setRole(Function::Role::LoopBody);
  rows->setLoc(body.getLoc());
  for (const Value *p : body.getParams())
    rows->addParam(p->getType(), p->getName());
  llvm::SmallVector<Value *, 2> xs;
  for (unsigned r : rowed) {
    const Value *v = body.getParam(1 + carries + r);
    TensorType row = v->getType();
    row.shape.erase(row.shape.begin());
    xs.push_back(rows->addParam(
        row, v->getName().empty() ? "" : (v->getName() + "_row").str()));
  }
  ir::Builder b(*rows);
  b.setLoc(body.getLoc());
  llvm::SmallVector<TensorType, 4> types;
  for (const Value *r : body.getReturns())
    types.push_back(r->getType());
  llvm::SmallVector<Value *, 8> args(rows->getParams().begin(),
                                     rows->getParams().begin() +
                                         body.getParams().size());
  auto results = b.call(body.getName(), args, types);
  rows->setReturns(std::vector<Value *>(results.begin(), results.end()));
  ir::inlineCall(*rows, rows->getOps().back().get(), body);
  llvm::DenseSet<const Op *> rowReads;
  for (const auto &op : rows->getOps())
    for (unsigned j = 0; j < rowed.size(); ++j)
      if (op->getKind() == OpKind::Take &&
          op->getOperand(0) == rows->getParam(1 + carries + rowed[j])) {
        rows->replaceAllUses(op->getResult(), xs[j]);
        rowReads.insert(op.get());
      }
  rows->eraseOpsIf([&](const Op &op) { return rowReads.contains(&op); });
  return rows;
}

const Function *
Differentiator::loopReverseBody(const Op &op, const Function &body,
                                const Function &vjp, bool checkpointed,
                                llvm::ArrayRef<unsigned> rowed) {
  std::string name = (body.getName() + (checkpointed ? ".crev" : ".rev")).str();
  if (const Function *existing = module.lookup(name))
    return existing;
  const AttrList &attrs = op.getAttrs();
  unsigned k = attrs.getInt("carries");
  unsigned numInvariants = body.getParams().size() - 1 - k;
  unsigned numOutputs = body.getReturns().size() - k;
  // The stacked tapes and cotangents have the loop's length, which differs
  // between the copies of one loop that inlining makes (a function with a
  // loop called with two sizes): a size name of its own binds it per call.
  Dim trip = Dim::named("gradc_loop_trip");
  int64_t start = attrs.getInt("start");

  Function *rev = module.addFunction(name);
  rev->setRole(Function::Role::LoopBody);
  rev->setLoc(op.getLoc());
  auto paramName = [](const Value *v, llvm::StringRef prefix) {
    return v->getName().empty() ? std::string() : (prefix + v->getName()).str();
  };
  Value *t = rev->addParam(TensorType(DType::I32), body.getParam(0)->getName());
  llvm::SmallVector<Value *, 4> dcs, accs, tapes, invariants, dys;
  for (unsigned i = 0; i < k; ++i)
    dcs.push_back(rev->addParam(body.getParam(1 + i)->getType(),
                                paramName(body.getParam(1 + i), "d_")));
  for (unsigned i = 0; i < numInvariants; ++i) {
    const Value *v = body.getParam(1 + k + i);
    if (isFloatValue(v) && !llvm::is_contained(rowed, i))
      accs.push_back(rev->addParam(v->getType(), paramName(v, "d_")));
  }
  for (unsigned i = 0; i < k; ++i) {
    const Value *c = body.getParam(1 + i);
    tapes.push_back(checkpointed ? rev->addParam(c->getType(), c->getName())
                                 : rev->addParam(stacked(c->getType(), trip),
                                                 paramName(c, "tape_")));
  }
  for (unsigned i = 0; i < numInvariants; ++i) {
    const Value *v = body.getParam(1 + k + i);
    invariants.push_back(rev->addParam(v->getType(), v->getName()));
  }
  for (unsigned o = 0; o < numOutputs; ++o) {
    const Value *y = body.getReturns()[k + o];
    dys.push_back(
        rev->addParam(stacked(y->getType(), trip), paramName(y, "d_")));
  }

  ir::Builder b(*rev);
  b.setLoc(op.getLoc());
  Value *pos = t;
  if (start != 0)
    pos = b.sub(t, b.scalar(DType::I32, double(start)));
  AttrList axis0;
  axis0.set("axis", int64_t(0));
  llvm::SmallVector<Value *, 8> args{t};
  for (Value *tape : tapes)
    args.push_back(checkpointed ? tape
                                : b.create1(OpKind::Take, {tape, pos}, axis0));
  args.append(invariants.begin(), invariants.end());
  for (unsigned r : rowed)
    args.push_back(b.create1(OpKind::Take, {invariants[r], t}, axis0));
  args.append(dcs.begin(), dcs.end());
  for (Value *d : dys)
    args.push_back(b.create1(OpKind::Take, {d, pos}, axis0));
  llvm::SmallVector<TensorType, 4> gradTypes;
  for (const Value *r : vjp.getReturns())
    gradTypes.push_back(r->getType());
  auto grads = b.call(vjp.getName(), args, gradTypes);

  // The VJP returns the adjoints of the floating-point carries and
  // invariants, in parameter order.
  std::vector<Value *> returns;
  unsigned next = 0;
  for (unsigned i = 0; i < k; ++i)
    returns.push_back(isFloatValue(body.getParam(1 + i)) ? grads[next++]
                                                         : dcs[i]);
  unsigned acc = 0;
  for (unsigned i = 0; i < numInvariants; ++i)
    if (isFloatValue(body.getParam(1 + k + i)) &&
        !llvm::is_contained(rowed, i)) {
      returns.push_back(b.add(accs[acc], grads[next++]));
      returns.back()->setName(accs[acc]->getName());
      ++acc;
    }
  // The rows' adjoints, per-step outputs that the loop stacks.
  for (size_t j = 0; j < rowed.size(); ++j)
    returns.push_back(grads[next++]);
  rev->setReturns(returns);
  return rev;
}

bool Differentiator::sweepLoop(GradContext &ctx, const Op &op, Function &grad) {
  const AttrList &attrs = op.getAttrs();
  const Function *body = module.lookup(attrs.getString("body"));
  if (!body) {
    diags.report(op.getLoc(), diag::err_ad_unknown_callee)
        << grad.getName() << attrs.getString("body");
    return false;
  }
  unsigned k = attrs.getInt("carries");
  unsigned numOutputs = op.getNumResults() - k;
  Dim trip = attrs.getShape("trip").front();
  if (attrs.has("recompute")) {
    diags.report(op.getLoc(), diag::err_ad_checkpoint_again) << grad.getName();
    return false;
  }
  if (attrs.has("checkpoint")) {
    const Function *vjp = loopVJP(op, *body);
    if (!vjp)
      return false;
    return sweepCheckpointedLoop(ctx, op, *body,
                                 *loopReverseBody(op, *body, *vjp, true));
  }
  // Rowed invariants (above) are differentiated through their rows.
  llvm::SmallVector<unsigned, 2> rowed = rowedInvariants(*body, k);
  const Function *vjpBody = body;
  llvm::SmallVector<unsigned, 2> skip;
  if (!rowed.empty()) {
    vjpBody = loopRowsBody(*body, k, rowed);
    for (unsigned r : rowed)
      skip.push_back(1 + k + r);
  }
  const Function *vjp = loopVJP(op, *vjpBody, skip);
  if (!vjp)
    return false;
  const Function *tapeBody = loopTapeBody(*body, k);
  const Function *rev = loopReverseBody(op, *body, *vjp, false, rowed);

  // 2. The forward loop runs the taped body instead.
  llvm::SmallVector<TensorType, 6> types;
  for (Value *r : op.getResults())
    types.push_back(r->getType());
  for (unsigned i = 0; i < k; ++i)
    types.push_back(stacked(op.getOperand(i)->getType(), trip));
  AttrList tapeAttrs = attrs;
  tapeAttrs.set("body", tapeBody->getName().str());
  ir::Builder fb(grad);
  fb.setInsertionIndex(grad.indexOf(&op));
  fb.setLoc(op.getLoc());
  Op *taped =
      fb.createWithTypes(OpKind::For, op.getOperands(), types, tapeAttrs);

  // 3. The reverse loop.
  ir::Builder &b = ctx.builder();
  unsigned numInvariants = op.getNumOperands() - k;
  llvm::SmallVector<Value *, 8> operands;
  for (unsigned i = 0; i < k; ++i)
    operands.push_back(ctx.adjointOrZeros(op.getResult(i)));
  for (unsigned i = 0; i < numInvariants; ++i)
    if (isFloatValue(op.getOperand(k + i)) && !llvm::is_contained(rowed, i))
      operands.push_back(b.zerosLike(op.getOperand(k + i)));
  unsigned carried = operands.size();
  for (unsigned i = 0; i < k; ++i)
    operands.push_back(taped->getResult(op.getNumResults() + i));
  for (unsigned i = 0; i < numInvariants; ++i)
    operands.push_back(op.getOperand(k + i));
  for (unsigned o = 0; o < numOutputs; ++o)
    operands.push_back(ctx.adjointOrZeros(op.getResult(k + o)));
  llvm::SmallVector<TensorType, 6> revTypes;
  for (unsigned i = 0; i < carried; ++i)
    revTypes.push_back(operands[i]->getType());
  for (unsigned r : rowed) {
    TensorType row = op.getOperand(k + r)->getType();
    row.shape.erase(row.shape.begin());
    revTypes.push_back(stacked(row, trip));
  }
  AttrList revAttrs = attrs;
  revAttrs.set("body", rev->getName().str());
  revAttrs.set("carries", int64_t(carried));
  // The adjoint runs the other way: a reverse loop (as in a gradient
  // differentiated again) has a forward adjoint.
  bool wasReverse = attrs.has("reverse") && attrs.getBool("reverse");
  if (wasReverse)
    revAttrs.erase("reverse");
  else
    revAttrs.set("reverse", true);
  Op *reverse = b.createWithTypes(OpKind::For, operands, revTypes, revAttrs);

  // The forward loop's uses (zeros made above for results no cotangent
  // reached included) move to the taped loop; the sweep erases it at the
  // end.
  for (unsigned i = 0; i < op.getNumResults(); ++i) {
    taped->getResult(i)->setName(op.getResult(i)->getName());
    grad.replaceAllUses(op.getResult(i), taped->getResult(i));
    replacedValues[op.getResult(i)] = taped->getResult(i);
  }
  replacedLoops.insert(&op);

  // 4. The adjoints of the initial carries and of the invariants.
  for (unsigned i = 0; i < k; ++i)
    if (isFloatValue(op.getOperand(i)))
      ctx.accumulate(op.getOperand(i), reverse->getResult(i));
  unsigned next = k;
  for (unsigned i = 0; i < numInvariants; ++i)
    if (isFloatValue(op.getOperand(k + i)) && !llvm::is_contained(rowed, i))
      ctx.accumulate(op.getOperand(k + i), reverse->getResult(next++));
  // A rowed invariant's adjoint is the stacked rows, at rows start ..
  // start + trip of its first axis.
  for (size_t j = 0; j < rowed.size(); ++j) {
    Value *v = op.getOperand(k + rowed[j]);
    Value *rows = reverse->getResult(carried + j);
    const Dim &first = v->getType().shape.front();
    int64_t start = attrs.getInt("start");
    if (start != 0 || first != trip) {
      AttrList padAttrs;
      padAttrs.set("axis", int64_t(0));
      padAttrs.set("start", start);
      padAttrs.set("size", Shape{first});
      rows = b.create1(OpKind::Pad, {rows}, padAttrs);
    }
    ctx.accumulate(v, rows);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Branches
//===----------------------------------------------------------------------===//
//
// The adjoint of `r = if c, args {then = T, else = E}` (docs/Gradients.md,
// "Branches"): T.vjp(args, dr) -> d args and E.vjp(args, dr) -> d args,
// each built like any gradient with respect to every floating-point
// argument (both branches take the same arguments, so both VJPs return the
// same types), and run by an `if` on the same condition, so that only the
// branch taken is differentiated: d args += if c { T.vjp(args, dr) } else
// { E.vjp(args, dr) }. Nothing is taped: the VJP recomputes the branch's
// forward values from its arguments.

const Function *Differentiator::branchVJP(const Op &op,
                                          const Function &branch) {
  std::string name = (branch.getName() + ".vjp").str();
  if (const Function *existing = module.lookup(name))
    return existing;
  Function::GradSpec spec;
  spec.gradName = name;
  spec.loc = op.getLoc();
  for (unsigned i = 0; i < branch.getParams().size(); ++i)
    if (isFloatValue(branch.getParam(i)))
      spec.wrt.push_back(i);
  Function *vjp = module.addFunction(name);
  vjp->setRole(Function::Role::LoopBody);
  vjp->setLoc(op.getLoc());
  // The branch's own loops are swept in a gradient of their own.
  auto savedLoops = std::move(replacedLoops);
  auto savedValues = std::move(replacedValues);
  replacedLoops.clear();
  replacedValues.clear();
  Form form;
  form.alwaysCotangents = true;
  bool ok = buildGradient(branch, spec, *vjp, form);
  replacedLoops = std::move(savedLoops);
  replacedValues = std::move(savedValues);
  if (ok)
    return vjp;
  module.eraseFunction(vjp);
  return nullptr;
}

bool Differentiator::sweepIf(GradContext &ctx, const Op &op,
                             const Function &grad) {
  const Function *branches[2];
  const Function *vjps[2];
  const char *keys[2] = {"then", "else"};
  for (int i = 0; i < 2; ++i) {
    const std::string &name = op.getAttrs().getString(keys[i]);
    branches[i] = module.lookup(name);
    if (!branches[i]) {
      diags.report(op.getLoc(), diag::err_ad_unknown_callee)
          << grad.getName() << name;
      return false;
    }
    vjps[i] = branchVJP(op, *branches[i]);
    if (!vjps[i])
      return false;
  }
  ir::Builder &b = ctx.builder();
  llvm::SmallVector<Value *, 8> operands(op.getOperands().begin(),
                                         op.getOperands().end());
  for (Value *r : op.getResults())
    operands.push_back(ctx.adjointOrZeros(r));
  llvm::SmallVector<TensorType, 4> types;
  for (const Value *r : vjps[0]->getReturns())
    types.push_back(r->getType());
  AttrList attrs;
  attrs.set("then", vjps[0]->getName().str());
  attrs.set("else", vjps[1]->getName().str());
  Op *adjoint = b.createWithTypes(OpKind::If, operands, types, attrs);
  unsigned next = 0;
  for (unsigned i = 1; i < op.getNumOperands(); ++i)
    if (isFloatValue(op.getOperand(i)))
      ctx.accumulate(op.getOperand(i), adjoint->getResult(next++));
  return true;
}

/// The reverse loop of a loop with `@checkpoint`: the forward loop stays
/// as it is, and the reverse loop takes the initial carries where the
/// taped form takes the tape, and recomputes the steps' carries from them.
bool Differentiator::sweepCheckpointedLoop(GradContext &ctx, const Op &op,
                                           const Function &body,
                                           const Function &rev) {
  const AttrList &attrs = op.getAttrs();
  unsigned k = attrs.getInt("carries");
  unsigned numOutputs = op.getNumResults() - k;
  unsigned numInvariants = op.getNumOperands() - k;
  ir::Builder &b = ctx.builder();
  llvm::SmallVector<Value *, 8> operands;
  for (unsigned i = 0; i < k; ++i)
    operands.push_back(ctx.adjointOrZeros(op.getResult(i)));
  for (unsigned i = 0; i < numInvariants; ++i)
    if (isFloatValue(op.getOperand(k + i)))
      operands.push_back(b.zerosLike(op.getOperand(k + i)));
  unsigned carried = operands.size();
  // The initial carries and the invariants: exactly B's operands.
  operands.append(op.getOperands().begin(), op.getOperands().end());
  for (unsigned o = 0; o < numOutputs; ++o)
    operands.push_back(ctx.adjointOrZeros(op.getResult(k + o)));
  llvm::SmallVector<TensorType, 6> revTypes;
  for (unsigned i = 0; i < carried; ++i)
    revTypes.push_back(operands[i]->getType());
  AttrList revAttrs = attrs;
  revAttrs.set("body", rev.getName().str());
  revAttrs.set("carries", int64_t(carried));
  revAttrs.set("recompute", body.getName().str());
  revAttrs.set("recompute_carries", int64_t(k));
  if (attrs.has("reverse") && attrs.getBool("reverse"))
    revAttrs.erase("reverse");
  else
    revAttrs.set("reverse", true);
  Op *reverse = b.createWithTypes(OpKind::For, operands, revTypes, revAttrs);

  for (unsigned i = 0; i < k; ++i)
    if (isFloatValue(op.getOperand(i)))
      ctx.accumulate(op.getOperand(i), reverse->getResult(i));
  unsigned next = k;
  for (unsigned i = 0; i < numInvariants; ++i)
    if (isFloatValue(op.getOperand(k + i)))
      ctx.accumulate(op.getOperand(k + i), reverse->getResult(next++));
  return true;
}

bool Differentiator::buildGradient(const Function &fn,
                                   const Function::GradSpec &spec,
                                   Function &grad, Form form) {
  // 1. The signature: fn's parameters, then the cotangents (if any).
  llvm::SmallVector<TensorType, 8> paramTypes, gradTypes;
  fn.getGradSignature(paramTypes, gradTypes);
  if (form.alwaysCotangents && paramTypes.size() == fn.getParams().size())
    for (const Value *r : fn.getReturns())
      paramTypes.push_back(r->getType());
  for (Value *p : fn.getParams())
    grad.addParam(p->getType(), p->getName());
  llvm::SmallVector<Value *, 2> cotangents;
  for (unsigned i = fn.getParams().size(); i < paramTypes.size(); ++i) {
    unsigned result = i - fn.getParams().size();
    cotangents.push_back(
        grad.addParam(paramTypes[i], cotangentName(fn, result)));
  }
  bool seedIsOne = cotangents.empty() && !fn.getReturns().empty();

  // 2. The forward body: a call of fn, inlined with everything it calls
  // except the calls that carry a rule.
  ir::Builder b(grad);
  b.setLoc(fn.getLoc().isValid() ? fn.getLoc() : spec.loc);
  llvm::SmallVector<TensorType, 2> resultTypes;
  for (Value *r : fn.getReturns())
    resultTypes.push_back(r->getType());
  llvm::ArrayRef<Value *> params =
      grad.getParams().take_front(fn.getParams().size());
  grad.setReturns(b.call(fn.getName(), params, resultTypes));
  // A @custom_grad function is one primitive even in its own gradient.
  if (fn.getCustomGrad().isSet())
    grad.getOps().back()->getGradRule() = fn.getCustomGrad();
  ir::InlineFailure failure;
  auto withoutRule = [](const Op &op) { return !op.getGradRule().isSet(); };
  if (!ir::inlineAllCalls(module, grad, withoutRule, failure)) {
    reportInlineFailure(fn, failure);
    return false;
  }
  std::vector<Value *> outputs(grad.getReturns().begin(),
                               grad.getReturns().end());
  std::vector<Op *> forward;
  for (const auto &op : grad.getOps())
    forward.push_back(op.get());

  // 3. Activity, and the seed: 1 for a scalar result, else the cotangent
  // parameters (a value returned twice gets both).
  GradContext ctx(grad, findActive(grad, spec.wrt));
  ir::Builder &cb = ctx.builder();
  cb.setLoc(spec.loc);
  cb.setProvenance(ir::Provenance::Seed);
  if (seedIsOne) {
    Value *out = outputs.front();
    cb.setNote(("seed: the gradient of '" + fn.getName() +
                "' with respect to its result is 1")
                   .str());
    if (ctx.isActive(out))
      ctx.setAdjoint(out, ctx.scalarLike(out, 1.0));
  } else {
    cb.setNote(("cotangents of the results of '" + fn.getName() + "'").str());
    for (auto [out, cotangent] : llvm::zip(outputs, cotangents))
      ctx.accumulate(out, cotangent);
  }

  // 4. The reverse sweep.
  for (Op *op : llvm::reverse(forward))
    if (!sweepOp(ctx, *op, grad))
      return false;

  // The forward loops that the sweep replaced by their taped form go.
  if (!replacedLoops.empty()) {
    grad.eraseOpsIf([&](const Op &op) { return replacedLoops.contains(&op); });
    for (Value *&out : outputs)
      if (Value *now = replacedValues.lookup(out))
        out = now;
    replacedLoops.clear();
    replacedValues.clear();
  }

  // 5. The gradients of the wrt parameters.
  cb.setLoc(spec.loc);
  cb.setProvenance(ir::Provenance::Seed);
  std::vector<Value *> grads;
  for (unsigned index : spec.wrt) {
    Value *param = grad.getParam(index);
    Value *adjoint = ctx.adjointOf(param);
    if (!adjoint) {
      cb.setNote(("'" + param->getName() + "' does not affect the result of '" +
                  fn.getName() + "': zero gradient")
                     .str());
      adjoint = cb.zerosLike(param);
    }
    if (adjoint->getName().empty() && !adjoint->isParam())
      adjoint->setName(adjointName(param));
    grads.push_back(adjoint);
  }
  if (form.returnResults)
    grads.insert(grads.begin(), outputs.begin(), outputs.end());
  grad.setReturns(grads);

  // 6. Inline the rule instances. The @custom_grad calls of the forward
  // body stay calls that carry their rule, as in f itself: f_grad is an
  // ordinary function that @grad may differentiate again, and there too
  // each is one primitive whose gradient is its rule.
  if (!ir::inlineAllCalls(module, grad, withoutRule, failure)) {
    reportInlineFailure(fn, failure);
    return false;
  }
  return true;
}

bool Differentiator::generate(Function &fn) {
  const Function::GradSpec &spec = *fn.getGradSpec();
  Function *grad = module.addFunction(spec.gradName);
  grad->setRole(Function::Role::Grad);
  grad->setLoc(spec.loc);
  if (buildGradient(fn, *grad, Form()))
    return true;
  module.eraseFunction(grad);
  return false;
}

/// Removes the rule instances that no call, no op's rule and no function's
/// own rule names: they have been inlined everywhere they were used.
void Differentiator::eraseUnusedRuleInstances() {
  bool erased = true;
  while (erased) {
    llvm::StringSet<> used;
    for (const auto &fn : module.getFunctions()) {
      // A @custom_grad function's own rule: differentiating or splitting
      // the function again needs it.
      if (fn->getCustomGrad().isSet())
        used.insert(fn->getCustomGrad().function);
      for (const auto &op : fn->getOps()) {
        if (op->getKind() == OpKind::Call)
          used.insert(op->getCallee());
        if (op->getGradRule().isSet())
          used.insert(op->getGradRule().function);
      }
    }
    erased = false;
    std::vector<Function *> unused;
    for (const auto &fn : module.getFunctions())
      if (fn->getRole() == Function::Role::RuleInstance &&
          !used.contains(fn->getName()))
        unused.push_back(fn.get());
    for (Function *fn : unused) {
      module.eraseFunction(fn);
      erased = true;
    }
  }
}

bool Differentiator::run() {
  std::vector<Function *> pending;
  if (!collectSpecs(pending) || !orderSpecs(pending))
    return false;
  for (Function *fn : pending)
    if (!generate(*fn))
      return false;
  eraseUnusedRuleInstances();
  return true;
}

} // namespace

bool ad::differentiate(ir::Module &module, DiagnosticEngine &diags,
                       const GradRegistry &registry) {
  return Differentiator(module, diags, registry).run();
}

bool ad::buildVJP(const ir::Module &module, const ir::Function &fn,
                  ir::Function &vjp, DiagnosticEngine &diags) {
  assert(fn.getGradSpec() && "only a function marked @grad has a VJP");
  GradRegistry registry = GradRegistry::createBuiltin();
  // The Differentiator only reads the module here: it looks up callees
  // and rule instances, and builds into `vjp`.
  Differentiator d(const_cast<ir::Module &>(module), diags, registry);
  Differentiator::Form form;
  form.alwaysCotangents = true;
  form.returnResults = true;
  vjp.setRole(Function::Role::Grad);
  vjp.setLoc(fn.getGradSpec()->loc);
  return d.buildGradient(fn, vjp, form);
}

bool ad::buildValueAndGrad(ir::Module &module, const ir::Function &fn,
                           ir::Function &out, DiagnosticEngine &diags) {
  assert(fn.getGradSpec() && "only a function marked @grad has a gradient");
  GradRegistry registry = GradRegistry::createBuiltin();
  Differentiator d(module, diags, registry);
  Differentiator::Form form;
  form.returnResults = true;
  out.setRole(Function::Role::ValueAndGrad);
  out.setLoc(fn.getGradSpec()->loc);
  return d.buildGradient(fn, out, form);
}

bool ad::differentiate(ir::Module &module, DiagnosticEngine &diags) {
  GradRegistry registry = GradRegistry::createBuiltin();
  return differentiate(module, diags, registry);
}
