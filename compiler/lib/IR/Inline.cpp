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
#include "llvm/ADT/STLExtras.h"

#include <map>

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
    copy->setNote(calleeOp->getNote().empty() ? call->getNote()
                                              : calleeOp->getNote());
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

bool ir::inlineAllCalls(const Module &module, Function &fn,
                        llvm::function_ref<bool(const Op &)> shouldInline,
                        InlineFailure &failure) {
  // For each op that inlining made: the callees it was copied through.
  std::map<const Op *, std::vector<std::string>> chains;
  size_t i = 0;
  while (i < fn.getOps().size()) {
    Op *op = fn.getOps()[i].get();
    if (op->getKind() != OpKind::Call || !shouldInline(*op)) {
      ++i;
      continue;
    }
    std::string calleeName = op->getCallee().str();
    const Function *callee = module.lookup(calleeName);
    if (!callee || callee->getParams().size() != op->getNumOperands() ||
        callee->getReturns().size() != op->getNumResults()) {
      failure = {
          InlineFailure::Kind::UnknownCallee, op->getLoc(), calleeName, {}};
      return false;
    }
    std::vector<std::string> chain = chains[op];
    chains.erase(op);
    bool recursive = calleeName == fn.getName() ||
                     llvm::is_contained(chain, calleeName) || callee == &fn;
    chain.push_back(calleeName);
    if (recursive) {
      failure = {InlineFailure::Kind::Recursion, op->getLoc(), calleeName,
                 chain};
      return false;
    }
    size_t count = callee->getOps().size();
    inlineCall(fn, op, *callee);
    // The copies now sit at [i, i + count); look at them next, since they
    // may hold calls of their own.
    for (size_t k = i; k < i + count; ++k)
      chains[fn.getOps()[k].get()] = chain;
  }
  return true;
}
