//===- Inline.cpp - Replacing calls by the callee's body ------------------===//
//
// Straight-line code makes inlining a copy: the callee's ops go into the
// caller at the call, with a value map from the callee's parameters to the
// call's arguments. The callee's size names are replaced by the dimensions
// they have at the call. inlineAllCalls repeats this until no call it may
// inline is left, remembering for every copied op the chain of callees it
// came through, so that recursion is found instead of looping forever.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Inline.h"

#include "gradc/IR/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace gradc;
using namespace gradc::ir;

/// `attrs` with the size names in shape attributes (reshape's `shape`,
/// split's `sizes`, one_hot's `depth`) replaced by their bindings.
static AttrList substituteAttrSizes(const AttrList &attrs,
                                    const SizeBindings &sizes) {
  AttrList result;
  for (const NamedAttr &attr : attrs.entries()) {
    AttrValue value = attr.value;
    if (Shape *shape = std::get_if<Shape>(&value))
      *shape = substituteSizes(TensorType(DType::F32, *shape), sizes).shape;
    result.set(attr.name, std::move(value));
  }
  return result;
}

std::vector<Value *> ir::inlineCall(Function &caller, Op *call,
                                    const Function &callee) {
  assert(call->getKind() == OpKind::Call && "inlining a non-call");
  assert(call->getNumOperands() == callee.getParams().size() &&
         "call arity differs from the callee's");
  size_t pos = caller.indexOf(call);

  // The callee's size names take the caller's dimensions at this call:
  // `N` of `fn h(x: f32[N])` becomes 3 in a call `h(a)` with `a: f32[3]`.
  llvm::DenseMap<const Value *, Value *> map;
  SizeBindings sizes;
  for (auto [param, arg] : llvm::zip(callee.getParams(), call->getOperands())) {
    map[param] = arg;
    std::string conflict;
    bool unified =
        unifyParamType(param->getType(), arg->getType(), sizes, conflict);
    assert(unified && "inlining an ill-typed call");
    (void)unified;
  }

  // Values made by this inlining: only they may take a call result's name.
  llvm::DenseMap<const Value *, bool> fresh;
  for (const auto &calleeOp : callee.getOps()) {
    llvm::SmallVector<Value *, 3> operands;
    for (Value *v : calleeOp->getOperands())
      operands.push_back(map.lookup(v));
    llvm::SmallVector<TensorType, 1> types;
    std::vector<std::string> names;
    for (Value *r : calleeOp->getResults()) {
      types.push_back(substituteSizes(r->getType(), sizes));
      names.push_back(r->getName().str());
    }
    Op *copy = caller.createOp(calleeOp->getKind(), operands, types,
                               substituteAttrSizes(calleeOp->getAttrs(), sizes),
                               calleeOp->getLoc(), names, pos++);
    copy->getGradRule() = calleeOp->getGradRule();
    bool own = !calleeOp->getNote().empty();
    copy->setNote(own ? calleeOp->getNote() : call->getNote());
    copy->setProvenance(own ? calleeOp->getProvenance()
                            : call->getProvenance());
    for (auto [from, to] :
         llvm::zip(calleeOp->getResults(), copy->getResults())) {
      map[from] = to;
      fresh[to] = true;
    }
  }

  std::vector<Value *> replacements;
  for (auto [result, returned] :
       llvm::zip(call->getResults(), callee.getReturns())) {
    Value *to = map.lookup(returned);
    if (!result->getName().empty() && fresh.lookup(to))
      to->setName(result->getName());
    caller.replaceAllUses(result, to);
    replacements.push_back(to);
  }
  caller.eraseOpsIf([&](const Op &op) { return &op == call; });
  return replacements;
}

namespace {

/// One callee being copied into the caller by inlineAllCalls: the frames
/// on the stack are the chain of calls from the caller's own body down to
/// the innermost callee.
struct Frame {
  const Function *callee;
  /// The callee's values -> the caller's.
  llvm::DenseMap<const Value *, Value *> map;
  SizeBindings sizes;
  /// The next op of the callee to copy.
  size_t next = 0;
  /// The call this frame replaces: its result names and note (for a call
  /// inside an inlined body, those of its copy as inlineCall would make it).
  std::vector<std::string> resultNames;
  std::string note;
  Provenance provenance = Provenance::Source;
  SourceLoc loc;
  /// The callee's values whose copies are fresh in inlineCall's sense
  /// (made by this inlining: results of ops copied here, and results of
  /// inner calls whose own inlining found a fresh value): only their
  /// copies may take a call result's name.
  llvm::DenseSet<const Value *> fresh;
  /// In the parent (or the caller): where this frame's results go.
  std::vector<const Value *> callResults;
};

} // namespace

// A single pass over the caller that expands each call in place, with an
// explicit stack of frames instead of recursion (a chain of 100,000 calls
// must not overflow the C++ stack). Every op of the result is made once,
// and nothing is searched: the time is linear in the size of the inlined
// function, where inlining one call at a time (copy, insert, replace uses,
// erase) is quadratic on a chain of calls.
bool ir::inlineAllCalls(const Module &module, Function &fn,
                        llvm::function_ref<bool(const Op &)> shouldInline,
                        InlineFailure &failure) {
  if (llvm::none_of(fn.getOps(), [&](const std::unique_ptr<Op> &op) {
        return op->getKind() == OpKind::Call && shouldInline(*op);
      }))
    return true;

  std::vector<std::unique_ptr<Op>> old = fn.takeOps();
  // Results of the caller's own inlined calls -> their replacements.
  llvm::DenseMap<Value *, Value *> replaced;
  auto resolve = [&](Value *v) {
    auto it = replaced.find(v);
    return it == replaced.end() ? v : it->second;
  };
  std::vector<Frame> stack;
  llvm::StringMap<unsigned> active; // callee name -> frames on the stack

  // Starts a frame for `call` (an op of the caller, or of the callee on top
  // of the stack) whose operands in the caller are `args`; false with
  // `failure` set if the callee is unknown or already on the stack.
  auto push = [&](const Op &call, llvm::ArrayRef<Value *> args,
                  const std::string &note, Provenance provenance) {
    std::string calleeName = call.getCallee().str();
    const Function *callee = module.lookup(calleeName);
    if (!callee || callee->getParams().size() != args.size() ||
        callee->getReturns().size() != call.getNumResults()) {
      failure = {
          InlineFailure::Kind::UnknownCallee, call.getLoc(), calleeName, {}};
      return false;
    }
    if (calleeName == fn.getName() || active.lookup(calleeName) ||
        callee == &fn) {
      std::vector<std::string> chain;
      for (const Frame &f : stack)
        chain.push_back(f.callee->getName().str());
      chain.push_back(calleeName);
      failure = {InlineFailure::Kind::Recursion, call.getLoc(), calleeName,
                 chain};
      return false;
    }
    Frame frame;
    frame.callee = callee;
    for (auto [param, arg] : llvm::zip(callee->getParams(), args)) {
      frame.map[param] = arg;
      std::string conflict;
      bool unified = unifyParamType(param->getType(), arg->getType(),
                                    frame.sizes, conflict);
      assert(unified && "inlining an ill-typed call");
      (void)unified;
    }
    for (const Value *r : call.getResults()) {
      frame.resultNames.push_back(r->getName().str());
      frame.callResults.push_back(r);
    }
    frame.note = note;
    frame.provenance = provenance;
    frame.loc = call.getLoc();
    ++active[calleeName];
    stack.push_back(std::move(frame));
    return true;
  };

  // Finishes the frame on top: its results replace the call's, and a
  // fresh result takes the call result's name.
  auto pop = [&]() {
    Frame frame = std::move(stack.back());
    stack.pop_back();
    --active[frame.callee->getName()];
    for (auto [i, returned] : llvm::enumerate(frame.callee->getReturns())) {
      Value *to = frame.map.lookup(returned);
      bool isFresh = frame.fresh.contains(returned);
      if (!frame.resultNames[i].empty() && isFresh)
        to->setName(frame.resultNames[i]);
      const Value *result = frame.callResults[i];
      if (stack.empty()) {
        replaced[const_cast<Value *>(result)] = to;
      } else {
        stack.back().map[result] = to;
        if (isFresh)
          stack.back().fresh.insert(result);
      }
    }
  };

  for (std::unique_ptr<Op> &op : old) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      op->setOperand(i, resolve(op->getOperand(i)));
    if (op->getKind() != OpKind::Call || !shouldInline(*op)) {
      fn.appendOp(std::move(op));
      continue;
    }
    // On failure the ops not reached yet go back, so that every op stays
    // owned by the function.
    auto giveBack = [&] {
      for (std::unique_ptr<Op> &rest : old)
        if (rest)
          fn.appendOp(std::move(rest));
      return false;
    };
    llvm::SmallVector<Value *, 4> args(op->getOperands());
    if (!push(*op, args, op->getNote(), op->getProvenance()))
      return giveBack();
    while (!stack.empty()) {
      Frame &top = stack.back();
      if (top.next == top.callee->getOps().size()) {
        pop();
        continue;
      }
      const Op &calleeOp = *top.callee->getOps()[top.next++];
      llvm::SmallVector<Value *, 3> operands;
      for (Value *v : calleeOp.getOperands())
        operands.push_back(top.map.lookup(v));
      bool own = !calleeOp.getNote().empty();
      std::string note = own ? calleeOp.getNote() : top.note;
      Provenance provenance = own ? calleeOp.getProvenance() : top.provenance;
      if (calleeOp.getKind() == OpKind::Call && shouldInline(calleeOp)) {
        if (!push(calleeOp, operands, note, provenance))
          return giveBack();
        continue;
      }
      llvm::SmallVector<TensorType, 1> types;
      std::vector<std::string> names;
      for (Value *r : calleeOp.getResults()) {
        types.push_back(substituteSizes(r->getType(), top.sizes));
        names.push_back(r->getName().str());
      }
      Op *copy =
          fn.createOp(calleeOp.getKind(), operands, types,
                      substituteAttrSizes(calleeOp.getAttrs(), top.sizes),
                      calleeOp.getLoc(), names);
      copy->getGradRule() = calleeOp.getGradRule();
      copy->setNote(std::move(note));
      copy->setProvenance(provenance);
      for (auto [from, to] :
           llvm::zip(calleeOp.getResults(), copy->getResults())) {
        top.map[from] = to;
        top.fresh.insert(from);
      }
    }
  }
  for (unsigned i = 0; i < fn.getReturns().size(); ++i)
    fn.setReturn(i, resolve(fn.getReturns()[i]));
  return true;
}
