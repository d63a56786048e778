//===- TapeResiduals.cpp - Loop tapes that keep what the VJP reads --------===//
//
// Differentiation gives a loop `for B` a forward loop over B.tape, which
// stacks each step's carries, and a reverse loop over B.rev, which calls
// B's VJP at each step (docs/Gradients.md, "Loops"). The VJP starts by
// computing B's forward again from the step's carries: every step runs its
// forward twice, and a loop nested in B three times (the outer VJP reruns
// the inner loop's taped forward, and the inner VJP reruns each of its
// steps). An LSTM's gradient spent more time there than in its backward.
//
// `tape-residuals` moves that work to the forward loop, as JAX's scan and
// TensorFlow's while_loop keep their per-iteration values. For each pair
// of loops:
//
//  1. The VJP `V(t, c, v, rows, dc', dy)` is cut in two: its forward ops
//     (those that read no cotangent) and the rest. The residuals are the
//     forward values that the rest reads, except constants, fills,
//     layout ops (`w[0]`, a reshape) and cheap arithmetic (`1 - s`),
//     which V.bwd recomputes from the residuals and parameters: cheaper
//     than a store and a load.
//  2. `V.res(t, c, v, rows) -> residuals` runs the forward ops;
//     `V.bwd(t, c, v, rows, dc', dy, residuals) -> V's results` the rest.
//  3. B.tape.res is B.tape that also returns the residuals (V.res inlined
//     into it: after cse, its ops are B's own, and a loop of B and the
//     taped loop of V.res that run on the same operands become the taped
//     loop alone); the forward loop runs it and stacks the residuals like
//     the carries.
//  4. B.rev.res is B.rev that reads each step's residuals from those
//     stacks and calls V.bwd; the reverse loop runs it.
//
// The new bodies have new names because differentiation reuses a body it
// finds by name (ReverseMode.cpp) and `split` differentiates again after
// this pass; the old bodies and V go with dce.
//
// The backward ops and their operands' values are those the VJP computed,
// so the gradients are bit for bit what they were; the tape holds more per
// step (the residuals besides the carries), as in JAX and TensorFlow. A
// loop with @checkpoint keeps no tape and is left alone.
//
// Pairs are found by their shape: a reverse `for` over `N.rev` whose
// first stacked operand is a result of a `for` over `N.tape`, and N.rev
// calls the VJP once. Loops inside a VJP are done before the VJP is cut,
// so that the outer cut moves the inner taped loop (and its stacks) into
// the forward.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "gradc/IR/Builder.h"
#include "gradc/IR/Inline.h"

#include "Rewriter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace gradc;
using namespace gradc::ir;
using namespace gradc::transforms;

namespace {

/// The size name of a reverse body's stacks (ReverseMode.cpp).
constexpr llvm::StringLiteral tripName = "gradc_loop_trip";

bool isForOver(const Op &op, llvm::StringRef body) {
  return op.getKind() == OpKind::For && op.getAttrs().getString("body") == body;
}

/// Ops that V.bwd recomputes rather than load from the tape: layout ops,
/// which only select or rearrange elements (`w[0]`, a reshape), and
/// arithmetic that costs less than a load and a store per element (the
/// `1 - s` of a sigmoid's derivative). Math functions, divisions,
/// reductions, products and loops are taped.
bool isCheap(OpKind kind) {
  switch (kind) {
  case OpKind::Take:
  case OpKind::Reshape:
  case OpKind::Transpose:
  case OpKind::BroadcastTo:
  case OpKind::Slice:
  case OpKind::Unstack:
  case OpKind::Identity:
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Neg:
  case OpKind::Square:
    return true;
  default:
    return false;
  }
}

/// Whether two loops run over the same operands, steps and carries (their
/// bodies aside).
bool sameLoop(const Op &a, const Op &b) {
  const AttrList &x = a.getAttrs(), &y = b.getAttrs();
  auto flag = [](const AttrList &l) {
    return l.has("reverse") && l.getBool("reverse");
  };
  return a.getOperands() == b.getOperands() &&
         x.getInt("start") == y.getInt("start") &&
         x.getShape("trip") == y.getShape("trip") &&
         x.getInt("carries") == y.getInt("carries") && flag(x) == flag(y) &&
         !x.has("checkpoint") && !y.has("checkpoint") && !x.has("recompute") &&
         !y.has("recompute");
}

TensorType stacked(TensorType type, const Dim &trip) {
  type.shape.insert(type.shape.begin(), trip);
  return type;
}

/// Cuts `vjp`, whose last `numCotangents` parameters are cotangents.
Cut cutVJP(const Function &vjp, unsigned numCotangents) {
  Cut cut;
  llvm::DenseSet<const Value *> dependent(vjp.getParams().end() - numCotangents,
                                          vjp.getParams().end());
  for (const auto &op : vjp.getOps()) {
    bool reads = llvm::any_of(op->getOperands(), [&](const Value *v) {
      return dependent.contains(v);
    });
    if (reads)
      dependent.insert(op->getResults().begin(), op->getResults().end());
    else
      cut.forward.insert(op.get());
  }
  // From the results back: a forward value that V.bwd needs is recomputed
  // when that is cheap, else taped.
  auto returns = vjp.getReturns();
  markBackward(
      vjp, {returns.begin(), returns.end()}, {},
      [](const Op &op) { return isCheap(op.getKind()); }, cut);
  return cut;
}

Function *newBody(Module &module, std::string name, const Function &like) {
  Function *fn = module.addFunction(std::move(name));
  fn->setRole(Function::Role::LoopBody);
  fn->setLoc(like.getLoc());
  return fn;
}

/// V.res(t, c, v, rows) -> residuals: the forward ops.
Function *buildResiduals(Module &module, const Function &vjp,
                         unsigned numCotangents, const Cut &cut) {
  Function *res = newBody(module, vjp.getName().str() + ".res", vjp);
  llvm::DenseMap<const Value *, Value *> map;
  for (const Value *p : vjp.getParams().drop_back(numCotangents))
    map[p] = res->addParam(p->getType(), p->getName());
  for (const auto &op : vjp.getOps())
    if (cut.forward.contains(op.get()))
      cloneOrFill(*op, *res, map);
  std::vector<Value *> returns;
  for (const Value *r : cut.residuals)
    returns.push_back(map.lookup(r));
  res->setReturns(returns);
  return res;
}

/// V.bwd(t, c, v, rows, dc', dy, residuals) -> V's results.
Function *buildBackward(Module &module, const Function &vjp, const Cut &cut) {
  Function *bwd = newBody(module, vjp.getName().str() + ".bwd", vjp);
  llvm::DenseMap<const Value *, Value *> map;
  for (const Value *p : vjp.getParams())
    map[p] = bwd->addParam(p->getType(), p->getName());
  for (size_t i = 0; i < cut.residuals.size(); ++i) {
    const Value *r = cut.residuals[i];
    map[r] = bwd->addParam(r->getType(), r->getName().empty()
                                             ? "res" + std::to_string(i)
                                             : r->getName().str());
  }
  for (const auto &op : vjp.getOps())
    if (cut.backward.contains(op.get()))
      cloneOrFill(*op, *bwd, map);
  std::vector<Value *> returns;
  for (const Value *r : vjp.getReturns())
    returns.push_back(map.lookup(r));
  bwd->setReturns(returns);
  return bwd;
}

/// A copy of `body` named `name`.
Function *copyBody(Module &module, const Function &body, std::string name) {
  Function *copy = newBody(module, std::move(name), body);
  llvm::SmallVector<Value *, 8> params;
  for (const Value *p : body.getParams())
    params.push_back(copy->addParam(p->getType(), p->getName()));
  llvm::SmallVector<TensorType, 4> types;
  for (const Value *r : body.getReturns())
    types.push_back(r->getType());
  Builder b(*copy);
  b.setLoc(body.getLoc());
  auto results = b.call(body.getName(), params, types);
  copy->setReturns(std::vector<Value *>(results.begin(), results.end()));
  inlineCall(*copy, results.front()->getDefiningOp(), body);
  return copy;
}

/// The one call of a function in `fn`, or null.
Op *soleCall(Function &fn) {
  Op *found = nullptr;
  for (const auto &op : fn.getOps())
    if (op->getKind() == OpKind::Call) {
      if (found)
        return nullptr;
      found = op.get();
    }
  return found;
}

class TapeResiduals {
public:
  TapeResiduals(Module &module, DiagnosticEngine &diags)
      : module(module), diags(diags) {}

  bool run();

private:
  /// What one loop's reverse body needs to be rewritten: its prefix N
  /// (bodies N.tape, N.rev), carries k and outputs o of the loop, the VJP.
  struct Candidate {
    std::string prefix;
    unsigned carries = 0, outputs = 0, revCarries = 0;
    int64_t start = 0;
    Function *vjp = nullptr;
  };

  std::optional<Candidate> candidate(const Op &rev);
  bool transform(const Candidate &c);
  bool rewriteTapeBody(const Candidate &c, Function &tape, const Function &res,
                       llvm::ArrayRef<unsigned> rowSources);
  void rewriteRevBody(const Candidate &c, Function &rev, Op &call,
                      const Function &bwd, llvm::ArrayRef<TensorType> types);
  void rewriteLoops(const Candidate &c, llvm::ArrayRef<TensorType> types);
  void mergeTapedTwins();

  Module &module;
  DiagnosticEngine &diags;
  llvm::StringSet<> done;
};

/// The loop pair whose reverse loop is `rev`, if it has the shape that
/// ReverseMode.cpp gives it.
std::optional<TapeResiduals::Candidate>
TapeResiduals::candidate(const Op &rev) {
  if (rev.getKind() != OpKind::For)
    return std::nullopt;
  llvm::StringRef body = rev.getAttrs().getString("body");
  if (!body.consume_back(".rev"))
    return std::nullopt;
  Candidate c;
  c.prefix = body.str();
  c.revCarries = rev.getAttrs().getInt("carries");
  if (rev.getNumOperands() <= c.revCarries)
    return std::nullopt;
  const Op *tape = rev.getOperand(c.revCarries)->getDefiningOp();
  if (!tape || !isForOver(*tape, c.prefix + ".tape"))
    return std::nullopt;
  c.carries = tape->getAttrs().getInt("carries");
  c.start = tape->getAttrs().getInt("start");
  if (tape->getNumResults() < 2 * c.carries)
    return std::nullopt;
  c.outputs = tape->getNumResults() - 2 * c.carries;
  // The tapes are the taped loop's last results, in order.
  for (unsigned i = 0; i < c.carries; ++i)
    if (rev.getNumOperands() <= c.revCarries + i ||
        rev.getOperand(c.revCarries + i) !=
            tape->getResult(c.carries + c.outputs + i))
      return std::nullopt;
  Function *revBody = module.lookup(c.prefix + ".rev");
  if (!revBody || !module.lookup(c.prefix + ".tape"))
    return std::nullopt;
  Op *call = soleCall(*revBody);
  if (!call)
    return std::nullopt;
  c.vjp = module.lookup(call->getAttrs().getString("callee"));
  if (!c.vjp || c.vjp->getParams().size() < c.carries + c.outputs)
    return std::nullopt;
  return c;
}

bool TapeResiduals::run() {
  // Candidates, each once, keyed by prefix; a prefix with a reverse loop
  // that does not fit is left alone entirely.
  llvm::StringMap<Candidate> found;
  llvm::StringSet<> rejected;
  for (const auto &fn : module.getFunctions())
    for (const auto &op : fn->getOps()) {
      if (op->getKind() != OpKind::For)
        continue;
      llvm::StringRef body = op->getAttrs().getString("body");
      if (!body.ends_with(".rev"))
        continue;
      if (std::optional<Candidate> c = candidate(*op))
        found.try_emplace(c->prefix, *c);
      else
        rejected.insert(body.drop_back(4));
    }
  for (const auto &r : rejected)
    found.erase(r.getKey());

  // Inner loops first: a candidate waits while its VJP holds a reverse
  // loop of another candidate not yet done.
  bool changed = false;
  for (bool progress = true; progress;) {
    progress = false;
    for (auto &[prefix, c] : found) {
      if (done.contains(prefix))
        continue;
      bool waits = llvm::any_of(c.vjp->getOps(), [&](const auto &op) {
        if (op->getKind() != OpKind::For)
          return false;
        llvm::StringRef body = op->getAttrs().getString("body");
        return body.consume_back(".rev") && found.count(body) &&
               !done.contains(body);
      });
      if (waits)
        continue;
      done.insert(prefix);
      progress = true;
      changed |= transform(c);
    }
  }
  if (!changed)
    return true;
  // The forward ops V.res copied into each tape body are B's own: cse
  // merges them, and a loop of B beside its taped twin goes.
  if (!runCanonicalize(module, diags))
    return false;
  mergeTapedTwins();
  return runCanonicalize(module, diags);
}

bool TapeResiduals::transform(const Candidate &c) {
  // The VJP may have changed since the candidate was found (its own loops
  // were done): look it up again.
  Function *revBody = module.lookup(c.prefix + ".rev");
  Function *tapeBody = module.lookup(c.prefix + ".tape");
  Op *call = soleCall(*revBody);
  Function *vjp = module.lookup(call->getAttrs().getString("callee"));
  if (!vjp || module.lookup(vjp->getName().str() + ".res") ||
      module.lookup(vjp->getName().str() + ".bwd"))
    return false;
  unsigned numCotangents = c.carries + c.outputs;
  unsigned numInvariants = tapeBody->getParams().size() - 1 - c.carries;
  unsigned numRows =
      vjp->getParams().size() - numCotangents - 1 - c.carries - numInvariants;
  if (vjp->getParams().size() < numCotangents + 1 + c.carries + numInvariants)
    return false;

  // Which invariant each row of the VJP is: the reverse body passes it
  // take(v, t), v one of its parameters (its layout: t, the carries'
  // adjoints, the accumulated adjoints, the tapes, the invariants, ...).
  unsigned firstInvariant = 1 + c.revCarries + c.carries;
  llvm::SmallVector<unsigned, 2> rowSources;
  for (unsigned j = 0; j < numRows; ++j) {
    const Value *arg = call->getOperand(1 + c.carries + numInvariants + j);
    const Op *take = arg->getDefiningOp();
    if (!take || take->getKind() != OpKind::Take ||
        take->getOperand(1) != revBody->getParam(0))
      return false;
    auto it = llvm::find(revBody->getParams(), take->getOperand(0));
    unsigned index = it - revBody->getParams().begin();
    if (it == revBody->getParams().end() || index < firstInvariant ||
        index >= firstInvariant + numInvariants)
      return false;
    rowSources.push_back(index - firstInvariant);
  }

  Cut cut = cutVJP(*vjp, numCotangents);
  std::string tapeName = c.prefix + ".tape.res",
              revName = c.prefix + ".rev.res";
  if (cut.residuals.empty() || module.lookup(tapeName) ||
      module.lookup(revName))
    return false;
  Function *res = buildResiduals(module, *vjp, numCotangents, cut);
  Function *bwd = buildBackward(module, *vjp, cut);
  llvm::SmallVector<TensorType, 4> types;
  for (const Value *r : cut.residuals)
    types.push_back(r->getType());
  // New bodies under new names: differentiation reuses a body of a known
  // name (ReverseMode.cpp), and `split`, after this pass, differentiates
  // the loops again; the old bodies go with dce.
  Function *newTape = copyBody(module, *tapeBody, tapeName);
  Function *newRev = copyBody(module, *revBody, revName);
  if (!rewriteTapeBody(c, *newTape, *res, rowSources))
    return false;
  rewriteRevBody(c, *newRev, *soleCall(*newRev), *bwd, types);
  rewriteLoops(c, types);
  return true;
}

/// B.tape(t, c, v) -> (c', y, c) also returns V.res(t, c, v, rows). B's
/// calls are inlined first, as the VJP has them, so that cse finds V.res's
/// forward ops in B's.
bool TapeResiduals::rewriteTapeBody(const Candidate &c, Function &tape,
                                    const Function &res,
                                    llvm::ArrayRef<unsigned> rowSources) {
  InlineFailure failure;
  if (!inlineAllCalls(
          module, tape,
          [](const Op &op) { return op.getKind() == OpKind::Call; }, failure))
    return false;
  Builder b(tape);
  b.setLoc(tape.getLoc());
  llvm::SmallVector<Value *, 8> args(tape.getParams().begin(),
                                     tape.getParams().end());
  AttrList axis0;
  axis0.set("axis", int64_t(0));
  for (unsigned r : rowSources)
    args.push_back(
        b.create1(OpKind::Take,
                  {tape.getParam(1 + c.carries + r), tape.getParam(0)}, axis0));
  llvm::SmallVector<TensorType, 4> types;
  for (const Value *r : res.getReturns())
    types.push_back(r->getType());
  auto results = b.call(res.getName(), args, types);
  if (results.size() != types.size())
    return false;
  Op *call = results.front()->getDefiningOp();
  std::vector<Value *> residuals = inlineCall(tape, call, res);
  std::vector<Value *> returns(tape.getReturns().begin(),
                               tape.getReturns().end());
  llvm::append_range(returns, residuals);
  tape.setReturns(returns);
  return true;
}

/// B.rev reads step t's residuals from stacks of its own and calls V.bwd.
void TapeResiduals::rewriteRevBody(const Candidate &c, Function &rev, Op &call,
                                   const Function &bwd,
                                   llvm::ArrayRef<TensorType> types) {
  llvm::SmallVector<Value *, 4> stacks;
  for (const Value *r : bwd.getParams().take_back(types.size()))
    stacks.push_back(rev.addParam(stacked(r->getType(), Dim::named(tripName)),
                                  "tape_" + r->getName().str()));
  Builder b(rev);
  b.setLoc(call.getLoc());
  b.setInsertionIndex(rev.indexOf(&call));
  // The step's position in the stacks, as ReverseMode.cpp computes it.
  Value *pos = rev.getParam(0);
  if (c.start != 0)
    pos = b.sub(pos, b.scalar(DType::I32, double(c.start)));
  AttrList axis0;
  axis0.set("axis", int64_t(0));
  llvm::SmallVector<Value *, 12> args(call.getOperands().begin(),
                                      call.getOperands().end());
  for (Value *s : stacks)
    args.push_back(b.create1(OpKind::Take, {s, pos}, axis0));
  llvm::SmallVector<TensorType, 4> resultTypes;
  for (const Value *r : call.getResults())
    resultTypes.push_back(r->getType());
  auto results = b.call(bwd.getName(), args, resultTypes);
  for (unsigned i = 0; i < call.getNumResults(); ++i)
    rev.replaceAllUses(call.getResult(i), results[i]);
  rev.eraseOpsIf([&](const Op &op) { return &op == &call; });
}

/// Every loop over B.tape stacks the residuals too; every loop over B.rev
/// reads those stacks.
void TapeResiduals::rewriteLoops(const Candidate &c,
                                 llvm::ArrayRef<TensorType> types) {
  std::string tapeName = c.prefix + ".tape", revName = c.prefix + ".rev";
  for (const auto &fn : module.getFunctions()) {
    llvm::DenseMap<Op *, Op *> taped;
    std::vector<Op *> tapes, revs;
    for (const auto &op : fn->getOps()) {
      if (isForOver(*op, tapeName))
        tapes.push_back(op.get());
      else if (isForOver(*op, revName))
        revs.push_back(op.get());
    }
    llvm::DenseSet<const Op *> erase;
    for (Op *old : tapes) {
      llvm::SmallVector<TensorType, 8> resultTypes;
      for (const Value *r : old->getResults())
        resultTypes.push_back(r->getType());
      const Dim &trip = old->getAttrs().getShape("trip").front();
      for (const TensorType &t : types)
        resultTypes.push_back(stacked(t, trip));
      std::vector<std::string> names;
      for (const Value *r : old->getResults())
        names.push_back(r->getName().str());
      AttrList attrs = old->getAttrs();
      attrs.set("body", tapeName + ".res");
      Op *now = fn->createOp(OpKind::For, old->getOperands(), resultTypes,
                             attrs, old->getLoc(), names, fn->indexOf(old));
      now->setNote(old->getNote());
      now->setProvenance(old->getProvenance());
      for (unsigned i = 0; i < old->getNumResults(); ++i)
        fn->replaceAllUses(old->getResult(i), now->getResult(i));
      taped[old] = now;
      erase.insert(old);
    }
    for (Op *old : revs) {
      Op *tape =
          const_cast<Op *>(old->getOperand(c.revCarries)->getDefiningOp());
      llvm::SmallVector<Value *, 12> operands(old->getOperands().begin(),
                                              old->getOperands().end());
      for (unsigned i = 0; i < types.size(); ++i)
        operands.push_back(
            tape->getResult(tape->getNumResults() - types.size() + i));
      llvm::SmallVector<TensorType, 8> resultTypes;
      std::vector<std::string> names;
      for (const Value *r : old->getResults()) {
        resultTypes.push_back(r->getType());
        names.push_back(r->getName().str());
      }
      AttrList attrs = old->getAttrs();
      attrs.set("body", revName + ".res");
      Op *now = fn->createOp(OpKind::For, operands, resultTypes, attrs,
                             old->getLoc(), names, fn->indexOf(old));
      now->setNote(old->getNote());
      now->setProvenance(old->getProvenance());
      for (unsigned i = 0; i < old->getNumResults(); ++i)
        fn->replaceAllUses(old->getResult(i), now->getResult(i));
      erase.insert(old);
    }
    fn->eraseOpsIf([&](const Op &op) { return erase.contains(&op); });
  }
}

/// In a tape body, B's loop `for X` and the taped loop `for X.tape` that
/// V.res brought, on the same operands, compute the same results: the
/// taped loop takes the place of the other.
void TapeResiduals::mergeTapedTwins() {
  for (const auto &fn : module.getFunctions()) {
    for (bool merged = true; merged;) {
      merged = false;
      const auto &ops = fn->getOps();
      for (size_t i = 0; i < ops.size() && !merged; ++i) {
        const Op &plain = *ops[i];
        if (plain.getKind() != OpKind::For)
          continue;
        std::string twin = plain.getAttrs().getString("body") + ".tape";
        for (size_t j = i + 1; j < ops.size(); ++j) {
          Op &taped = *ops[j];
          if ((!isForOver(taped, twin) && !isForOver(taped, twin + ".res")) ||
              !sameLoop(plain, taped) ||
              taped.getNumResults() < plain.getNumResults())
            continue;
          // Its operands are the plain loop's: it may move up to it.
          auto list = fn->takeOps();
          std::unique_ptr<Op> moved = std::move(list[j]);
          list.erase(list.begin() + j);
          list.insert(list.begin() + i, std::move(moved));
          fn->setOps(std::move(list));
          Op &plainOp = *fn->getOps()[i + 1];
          for (unsigned r = 0; r < plainOp.getNumResults(); ++r)
            fn->replaceAllUses(plainOp.getResult(r), taped.getResult(r));
          fn->eraseOpsIf([&](const Op &op) { return &op == &plainOp; });
          merged = true;
          break;
        }
      }
    }
  }
}

} // namespace

bool gradc::runTapeResiduals(Module &module, DiagnosticEngine &diags) {
  return TapeResiduals(module, diags).run();
}
