//===- Rewriter.cpp - One forward walk that rewrites a function -----------===//
//
// The op list is taken out of the function and rebuilt: kept ops move to
// the new list, ops created by a rewrite are appended to the (emptied)
// function list and moved over right away, so they land before the op that
// made them and every value is still defined before its uses.
//
//===----------------------------------------------------------------------===//

#include "Rewriter.h"

#include "gradc/IR/Builder.h"

using namespace gradc;
using namespace gradc::ir;
using namespace gradc::transforms;

bool FunctionRewriter::run(llvm::function_ref<bool(Op &op)> visit) {
  std::vector<std::unique_ptr<Op>> old = fn.takeOps();
  fn.setOps({});
  std::vector<std::unique_ptr<Op>> out;
  out.reserve(old.size());
  for (std::unique_ptr<Op> &op : old) {
    for (unsigned i = 0, e = op->getNumOperands(); i != e; ++i) {
      Value *to = lookup(op->getOperand(i));
      if (to != op->getOperand(i)) {
        op->setOperand(i, to);
        changed = true;
      }
    }
    bool replaced = visit(*op);
    for (std::unique_ptr<Op> &created : fn.takeOps())
      out.push_back(std::move(created));
    fn.setOps({});
    if (replaced) {
      changed = true;
      removed.push_back(std::move(op));
      continue;
    }
    out.push_back(std::move(op));
  }
  for (unsigned i = 0, e = fn.getReturns().size(); i != e; ++i) {
    Value *to = lookup(fn.getReturns()[i]);
    if (to != fn.getReturns()[i]) {
      fn.setReturn(i, to);
      changed = true;
    }
  }
  fn.setOps(std::move(out));
  bool result = changed;
  changed = false;
  replacements.clear();
  return result;
}

Value *FunctionRewriter::lookup(Value *v) const {
  // replaceOp only records values that are already final, so one step
  // suffices.
  return replacements.lookup(v) ? replacements.lookup(v) : v;
}

bool FunctionRewriter::replaceOp(Op &op, llvm::ArrayRef<Value *> values) {
  if (values.size() != op.getNumResults())
    return false;
  for (unsigned i = 0, e = values.size(); i != e; ++i)
    if (!values[i] || values[i]->getType() != op.getResult(i)->getType())
      return false;
  for (unsigned i = 0, e = values.size(); i != e; ++i) {
    Value *from = op.getResult(i), *to = lookup(values[i]);
    // `h = x * 1` keeps the name of `x`; `d_x = t + 0` names `t` d_x.
    if (to->getName().empty() && !to->isParam() && !from->getName().empty())
      to->setName(from->getName());
    replacements[from] = to;
  }
  return true;
}

Op *FunctionRewriter::create(OpKind kind, llvm::ArrayRef<Value *> operands,
                             AttrList attrs, const Op &like) {
  llvm::SmallVector<TensorType, 4> operandTypes;
  for (Value *v : operands)
    operandTypes.push_back(v->getType());
  llvm::SmallVector<TensorType, 1> resultTypes;
  OpTypeError error;
  if (!getOpInfo(kind).inferTypes ||
      !inferOpTypes(kind, operandTypes, attrs, resultTypes, error))
    return nullptr;
  Op *op =
      fn.createOp(kind, operands, resultTypes, std::move(attrs), like.getLoc());
  op->setNote(like.getNote());
  op->setProvenance(like.getProvenance());
  return op;
}

Value *FunctionRewriter::create1(OpKind kind, llvm::ArrayRef<Value *> operands,
                                 AttrList attrs, const Op &like) {
  Op *op = create(kind, operands, std::move(attrs), like);
  if (!op || op->getNumResults() != 1)
    return nullptr;
  return op->getResult();
}

Value *FunctionRewriter::createConstant(const TensorType &type,
                                        llvm::ArrayRef<double> values,
                                        const Op &like) {
  AttrList attrs;
  attrs.set("value", std::vector<double>(values.begin(), values.end()));
  Op *op = fn.createOp(OpKind::Constant, {}, {type}, std::move(attrs),
                       like.getLoc());
  op->setNote(like.getNote());
  op->setProvenance(like.getProvenance());
  return op->getResult();
}

const std::vector<double> *transforms::getConstantValues(const Value *v) {
  const Op *def = v->getDefiningOp();
  if (!def || def->getKind() != OpKind::Constant)
    return nullptr;
  const AttrValue *value = def->getAttrs().find("value");
  if (!value)
    return nullptr;
  return std::get_if<std::vector<double>>(value);
}

bool transforms::isDefinedBy(const Value *v, OpKind kind) {
  return v->getDefiningOp() && v->getDefiningOp()->getKind() == kind;
}

/// Copies `op` to the end of `to`, mapping its operands through `map`.
static void cloneOp(const Op &op, Function &to,
                    llvm::DenseMap<const Value *, Value *> &map) {
  llvm::SmallVector<Value *, 3> operands;
  for (const Value *v : op.getOperands())
    operands.push_back(map.lookup(v));
  llvm::SmallVector<TensorType, 1> types;
  std::vector<std::string> names;
  for (const Value *r : op.getResults()) {
    types.push_back(r->getType());
    names.push_back(r->getName().str());
  }
  Op *copy = to.createOp(op.getKind(), operands, types, op.getAttrs(),
                         op.getLoc(), names);
  copy->getGradRule() = op.getGradRule();
  copy->setNote(op.getNote());
  copy->setProvenance(op.getProvenance());
  for (auto [from, into] : llvm::zip(op.getResults(), copy->getResults()))
    map[from] = into;
}

void transforms::cloneOrFill(const Op &op, Function &to,
                             llvm::DenseMap<const Value *, Value *> &map) {
  if (!isFill(op) || map.count(op.getOperand(0))) {
    cloneOp(op, to, map);
    return;
  }
  Builder b(to);
  b.setLoc(op.getLoc());
  b.setNote(op.getNote());
  b.setProvenance(op.getProvenance());
  double fill = op.getKind() == OpKind::OnesLike ? 1.0 : 0.0;
  Value *c = b.constant(op.getResult()->getType(), {fill});
  c->setName(op.getResult()->getName());
  map[op.getResult()] = c;
}

void transforms::markBackward(const Function &fn,
                              llvm::ArrayRef<const Value *> roots,
                              llvm::DenseSet<const Value *> given,
                              llvm::function_ref<bool(const Op &)> recompute,
                              Cut &cut) {
  llvm::DenseSet<const Value *> residuals;
  std::vector<const Value *> work(roots.begin(), roots.end());
  while (!work.empty()) {
    const Value *v = work.back();
    work.pop_back();
    const Op *def = v->getDefiningOp();
    if (!def || !given.insert(v).second)
      continue;
    if (cut.forward.contains(def) && def->getKind() != OpKind::Constant &&
        !isFill(*def) && !recompute(*def)) {
      residuals.insert(v);
      continue;
    }
    cut.backward.insert(def);
    if (!isFill(*def))
      llvm::append_range(work, def->getOperands());
  }
  for (const auto &op : fn.getOps())
    for (const Value *r : op->getResults())
      if (residuals.contains(r))
        cut.residuals.push_back(r);
}
