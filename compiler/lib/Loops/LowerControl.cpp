//===- LowerControl.cpp - for, take and scatter_add -----------------------===//
//
//   for          the body is a function of the loop module, called once per
//                iteration:
//
//                  carry_j = init_j                      (a copy)
//                  for %i < trip {
//                    %t = i32(start + pos)               pos = %i, or
//                                                        trip - 1 - %i
//                                                        when `reverse`
//                    call @body(%t, carry..., inv...)
//                        -> (next..., stacked_o + pos * (step size)...)
//                    carry_j = next_j                    (a copy)
//                  }
//
//                but with carries, two iterations per turn, the second
//                reading `next` and writing the carries back, and an odd
//                last one alone, then the copy: no copy per step; each
//                per-step output is written by the body in place, at its
//                position in the stacked buffer (the call's output offset)
//
//                A carry lives in the op's result buffer (the function's
//                output when it is returned), so the last iteration leaves
//                the final carry there; the body writes the new carry into
//                a buffer of its own (`next`), never over the one it reads.
//                The stacked outputs (and so the reverse mode's tape,
//                which is one) are buffers indexed by the position.
//                A checkpointed reverse loop (`recompute`) recomputes the
//                carries of each step from snapshots (LowerCheckpoint.cpp).
//   take         y[p, i, q] = table[p, idx[i], q]: first a check of every
//                index (GRADC_ERROR_INDEX), then the gather, so that no
//                element is read out of bounds and nothing is written
//                before an error; a row `xs[t]` (a scalar index known at
//                entry, only size-1 axes before it) is instead a view of
//                the table at t * (row size), after the same check
//   scatter_add  z = 0; the same check; z[p, idx[i], q] += src[p, i, q], in
//                increasing i (the interpreter's order of rounding)
//   if           for %i < index(c) { call @then(...) -> (r...) }
//                for %j < index(!c) { call @else(...) -> (r...) }: a loop
//                of one iteration or none per branch, so that only the
//                branch taken runs and no new statement kind is needed
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <cmath>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// dst[dstOffset + flat(idx)] = src[flat(idx)] over `shape`, in `block`;
/// `src` may be a splat (read through Lowering::read).
void copyInto(Lowering &l, Block &block, Buffer *dst, const ExprPtr &dstOffset,
              llvm::ArrayRef<Dim> shape, Buffer *src) {
  Nest n = l.openNest(block, shape);
  ExprPtr at = Lowering::flatIndex(shape, n.idx);
  l.store(*n.body, dst, prim(PrimOp::Add, dstOffset->clone(), at->clone()),
          load(src, at->clone()));
}

/// Checks in `block` that the index `i` of `op` lies in [0, size) along
/// `axis`, else GRADC_ERROR_INDEX.
void checkIndex(Lowering &l, Block &block, const ir::Op &op, const Expr &i,
                const Dim &size, int64_t axis) {
  std::string bound =
      size.isKnown() ? std::to_string(size.getSize()) : size.getName().str();
  l.check(block,
          prim(PrimOp::And, prim(PrimOp::Ge, i.clone(), index(0)),
               prim(PrimOp::Lt, i.clone(), extentOf(size))),
          CheckStatus::Index,
          "'" + op.getName().str() + "': an index is out of range [0, " +
              bound + ") for axis " + std::to_string(axis) +
              " (GRADC_ERROR_INDEX)");
}

/// Checks that every element of the i32 tensor `idx` lies in [0, size).
void checkIndices(Lowering &l, const ir::Op &op, Buffer *idx,
                  llvm::ArrayRef<Dim> idxShape, const Dim &size, int64_t axis) {
  Nest n = l.openNest(l.top(), idxShape);
  ExprPtr i =
      cast(ScalarType::Index, load(idx, Lowering::flatIndex(idxShape, n.idx)));
  checkIndex(l, *n.body, op, *i, size, axis);
}

} // namespace

/// Passes each size name of `callee` to `call`, read off the operand that
/// binds it: parameter firstParam + i of the callee is operand
/// firstOperand + i of `op`.
bool loops::bindSizes(Lowering &l, const ir::Op &op, const ir::Function &callee,
                      unsigned firstParam, unsigned firstOperand, Stmt &call) {
  for (const std::string &name : callee.getSizeNames()) {
    ExprPtr value;
    for (unsigned p = firstParam; p < callee.getParams().size() && !value;
         ++p) {
      unsigned o = p - firstParam + firstOperand;
      const Shape &param = callee.getParams()[p]->getType().shape;
      for (unsigned d = 0;
           o < op.getNumOperands() && d < param.size() && !value; ++d)
        if (param[d].isNamed() && param[d].getName() == name)
          value = extentOf(op.getOperand(o)->getType().shape[d]);
    }
    if (!value)
      return l.fail("size '" + name + "' of '" + callee.getName().str() +
                    "' is bound by no operand");
    call.sizeArgs.emplace_back(name, std::move(value));
  }
  return true;
}

namespace {

bool lowerFor(Lowering &l, const ir::Op &op) {
  const AttrList &attrs = op.getAttrs();
  std::string bodyName = attrs.getString("body");
  const ir::Function *body = l.module.lookup(bodyName);
  if (!body)
    return l.fail("'for' runs unknown body function '" + bodyName + "'");
  if (attrs.has("recompute"))
    return lowerCheckpointedFor(l, op);
  const Shape &tripShape = attrs.getShape("trip");
  if (tripShape.size() != 1)
    return l.fail("'for' needs one 'trip'");
  const Dim &trip = tripShape.front();
  int64_t start = attrs.getInt("start");
  bool reverse = attrs.has("reverse") && attrs.getBool("reverse");
  size_t k = attrs.getInt("carries");
  size_t numOutputs = op.getNumResults() - k;
  if (body->getParams().size() != 1 + op.getNumOperands())
    return l.fail("'for' passes " + std::to_string(op.getNumOperands()) +
                  " operand(s) to '" + bodyName + "', which takes " +
                  std::to_string(body->getParams().size()) +
                  " after its index");

  // The body's parameter p + 1 is the op's operand p: its size arguments,
  // bound once and copied into each call.
  Stmt sizes(Stmt::Kind::Call);
  if (!bindSizes(l, op, *body, /*firstParam=*/1, /*firstOperand=*/0, sizes))
    return false;

  // The carries start as the initial values.
  std::vector<Buffer *> carries, next;
  for (size_t j = 0; j < k; ++j) {
    const ir::Value *init = op.getOperand(j);
    const Shape &shape = init->getType().shape;
    Buffer *carry = l.resultBuffer(op, j);
    Nest n = l.openNest(l.top(), shape);
    l.store(*n.body, carry, Lowering::flatIndex(shape, n.idx),
            l.read(init, n.idx));
    carries.push_back(carry);
    next.push_back(l.fn.addBuffer(Buffer::Kind::Scratch, init->getType().dtype,
                                  shape, carry->name + ".next"));
  }
  // Each per-step output goes straight into its stacked buffer, at the
  // step's position (an output offset of the call): a `.step` buffer and
  // its copy per step cost the LSTM's gradient 7-10% of its time (memmove,
  // and the scratch of the step buffers in every call of the body).
  std::vector<Buffer *> stacked;
  std::vector<ExprPtr> stepSizes;
  for (size_t o = 0; o < numOutputs; ++o) {
    const TensorType &type = op.getResult(k + o)->getType();
    stacked.push_back(l.resultBuffer(op, k + o));
    stepSizes.push_back(
        extentOf(llvm::ArrayRef<Dim>(type.shape).drop_front(1)));
  }
  std::vector<Buffer *> invariants;
  for (size_t p = k; p < op.getNumOperands(); ++p)
    invariants.push_back(l.bufferOf(op.getOperand(p)));
  Buffer *t = l.local(ScalarType::I32, "t");

  // The position of iteration `i` (0 <= i < trip).
  auto positionOf = [&](ExprPtr i) {
    return reverse
               ? prim(PrimOp::Sub, prim(PrimOp::Sub, extentOf(trip), index(1)),
                      std::move(i))
               : std::move(i);
  };
  // The iteration at `pos` in `in`: the body reads the carries from `from`
  // and writes the new ones into `to`, and its per-step outputs at their
  // position in the stacked buffers.
  auto iteration = [&](Block &in, ExprPtr pos, llvm::ArrayRef<Buffer *> from,
                       llvm::ArrayRef<Buffer *> to) {
    l.store(
        in, t, index(0),
        cast(ScalarType::I32, prim(PrimOp::Add, index(start), pos->clone())));
    auto call = std::make_unique<Stmt>(Stmt::Kind::Call);
    call->callee = bodyName;
    call->isExtern = sizes.isExtern;
    call->checksStatus = sizes.checksStatus;
    for (const auto &[name, value] : sizes.sizeArgs)
      call->sizeArgs.emplace_back(name, value->clone());
    call->inputs.push_back(t);
    call->inputs.insert(call->inputs.end(), from.begin(), from.end());
    call->inputs.insert(call->inputs.end(), invariants.begin(),
                        invariants.end());
    call->outputs.assign(to.begin(), to.end());
    call->outputs.insert(call->outputs.end(), stacked.begin(), stacked.end());
    if (numOutputs > 0) {
      for (size_t j = 0; j < to.size(); ++j)
        call->operands.push_back(index(0));
      for (size_t o = 0; o < numOutputs; ++o)
        call->operands.push_back(
            prim(PrimOp::Mul, pos->clone(), stepSizes[o]->clone()));
    }
    l.add(in, std::move(call));
  };
  auto newLoop = [&](ExprPtr extent) {
    auto loop = std::make_unique<Stmt>(Stmt::Kind::For);
    loop->var = l.fn.numVars++;
    loop->extent = std::move(extent);
    return loop;
  };

  if (k == 0) {
    auto loop = newLoop(extentOf(trip));
    iteration(loop->body, positionOf(loopVar(loop->var)), {}, {});
    l.add(l.top(), std::move(loop));
    return true;
  }
  // Two iterations per turn, the first from the carries into `next` and
  // the second back: no copy of the carries per step (the LSTM's gradient
  // copied 1.3 KB of them per step, 8% of its time in memmove). An odd
  // last iteration runs alone and copies `next` back.
  auto pairs = newLoop(prim(PrimOp::Div, extentOf(trip), index(2)));
  ExprPtr first = prim(PrimOp::Mul, loopVar(pairs->var), index(2));
  iteration(pairs->body, positionOf(first->clone()), carries, next);
  iteration(pairs->body,
            positionOf(prim(PrimOp::Add, std::move(first), index(1))), next,
            carries);
  l.add(l.top(), std::move(pairs));
  auto last = newLoop(prim(PrimOp::Rem, extentOf(trip), index(2)));
  iteration(last->body,
            reverse ? index(0) : prim(PrimOp::Sub, extentOf(trip), index(1)),
            carries, next);
  for (size_t j = 0; j < k; ++j)
    copyInto(l, last->body, carries[j], index(0), carries[j]->shape, next[j]);
  l.add(l.top(), std::move(last));
  return true;
}

/// if: a loop of one iteration or none on the condition, calling the
/// `then` function, and one on its negation calling `else`; both write the
/// op's result buffers. No statement kind is needed for a branch.
bool lowerIf(Lowering &l, const ir::Op &op) {
  std::vector<Buffer *> results;
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    results.push_back(l.resultBuffer(op, i));
  std::vector<Buffer *> args;
  for (unsigned i = 1; i < op.getNumOperands(); ++i)
    args.push_back(l.bufferOf(op.getOperand(i)));
  for (llvm::StringRef key : {"then", "else"}) {
    std::string name = op.getAttrs().getString(key);
    const ir::Function *branch = l.module.lookup(name);
    if (!branch)
      return l.fail("'if' runs unknown branch function '" + name + "'");
    auto call = std::make_unique<Stmt>(Stmt::Kind::Call);
    call->callee = name;
    if (!bindSizes(l, op, *branch, /*firstParam=*/0, /*firstOperand=*/1, *call))
      return false;
    call->inputs = args;
    call->outputs = results;
    ExprPtr cond = l.read(op.getOperand(0), {});
    if (key == "else")
      cond = prim(PrimOp::Not, std::move(cond));
    auto loop = std::make_unique<Stmt>(Stmt::Kind::For);
    loop->var = l.fn.numVars++;
    loop->extent = cast(ScalarType::Index, std::move(cond));
    l.add(loop->body, std::move(call));
    l.add(l.top(), std::move(loop));
  }
  return true;
}

/// The shape of `table` with axis `axis` replaced by `middle`.
Shape around(llvm::ArrayRef<Dim> table, int64_t axis,
             llvm::ArrayRef<Dim> middle) {
  Shape s(table.begin(), table.begin() + axis);
  s.append(middle.begin(), middle.end());
  s.append(table.begin() + axis + 1, table.end());
  return s;
}

/// The value of a scalar index known before the function's first
/// statement: a constant (`w[0]`), or a parameter (a loop body's index
/// `t` in `xs[t]`, a read-only input); null otherwise.
ExprPtr indexAtEntry(Lowering &l, const ir::Value *idx) {
  if (!idx->getType().shape.empty())
    return nullptr;
  if (const ir::Op *def = idx->getDefiningOp();
      def && def->getKind() == OpKind::Constant) {
    const AttrValue *attr = def->getAttrs().find("value");
    const auto *values =
        attr ? std::get_if<std::vector<double>>(attr) : nullptr;
    if (!values || values->size() != 1)
      return nullptr;
    return index(int64_t(values->front()));
  }
  Buffer *b = l.bufferOf(idx);
  if (!b || b->kind != Buffer::Kind::Param)
    return nullptr;
  return cast(ScalarType::Index, load(b, index(0)));
}

/// take(table, i, axis = a) with a scalar index known at entry, where the
/// axes before `a` all have size 1 (so `xs[t]` and `w[0]`): the selected
/// row is contiguous in the table, and the result is a view of it, the
/// alias table + i * (the row's size), after the check of `i`, instead of
/// a copy. A loop body that reads its step's row of a sequence, or a row
/// of its weights, reads it in place (as a slice does).
bool lowerTakeRow(Lowering &l, const ir::Op &op, int64_t axis) {
  const ir::Value *table = op.getOperand(0), *idx = op.getOperand(1);
  const Shape &tableShape = table->getType().shape;
  bool contiguous = llvm::all_of(
      llvm::ArrayRef<Dim>(tableShape).take_front(axis),
      [](const Dim &d) { return d.isKnown() && d.getSize() == 1; });
  if (!contiguous || !l.mayAlias(op))
    return false;
  ExprPtr i = indexAtEntry(l, idx);
  Buffer *in = l.bufferOf(table);
  if (!i || !in)
    return false;
  const Dim &size = tableShape[axis];
  bool inRange = i->kind == Expr::Kind::Const && size.isKnown() &&
                 i->value >= 0 && i->value < double(size.getSize());
  if (!inRange)
    checkIndex(l, l.top(), op, *i, size, axis);
  const TensorType &type = op.getResult()->getType();
  Buffer *view = l.fn.addBuffer(
      Buffer::Kind::Alias, type.dtype, type.shape,
      l.origin.result().size() > 1 ? l.origin.result().substr(1) : "row");
  view->base = in;
  view->offset =
      prim(PrimOp::Mul, std::move(i),
           extentOf(llvm::ArrayRef<Dim>(tableShape).drop_front(axis + 1)));
  l.bind(op.getResult(), view);
  return true;
}

bool lowerTake(Lowering &l, const ir::Op &op) {
  const ir::Value *table = op.getOperand(0), *idx = op.getOperand(1);
  const Shape &tableShape = table->getType().shape;
  const Shape &idxShape = idx->getType().shape;
  int64_t axis = op.getAttrs().getInt("axis");
  if (axis < 0 || axis >= int64_t(tableShape.size()))
    return l.fail("'take' has axis " + std::to_string(axis) + " out of range");
  if (lowerTakeRow(l, op, axis))
    return true;
  Buffer *in = l.bufferOf(table), *at = l.bufferOf(idx);
  checkIndices(l, op, at, idxShape, tableShape[axis], axis);
  Shape shape = around(tableShape, axis, idxShape);
  Buffer *out = l.resultBuffer(op);
  Nest n = l.openNest(l.top(), shape);
  // y[p, i, q] = table[p, idx[i], q]
  size_t r = idxShape.size();
  std::vector<ExprPtr> src = n.indices(0, axis);
  src.push_back(
      cast(ScalarType::Index,
           load(at, Lowering::flatIndex(idxShape, n.indices(axis, axis + r)))));
  for (ExprPtr &q : n.indices(axis + r))
    src.push_back(std::move(q));
  l.store(*n.body, out, Lowering::flatIndex(shape, n.idx),
          load(in, Lowering::flatIndex(tableShape, src)));
  return true;
}

bool lowerScatterAdd(Lowering &l, const ir::Op &op) {
  const ir::Value *src = op.getOperand(0), *idx = op.getOperand(1);
  const Shape &srcShape = src->getType().shape;
  const Shape &idxShape = idx->getType().shape;
  const Shape &shape = op.getResult()->getType().shape;
  int64_t axis = op.getAttrs().getInt("axis");
  size_t r = idxShape.size();
  if (axis < 0 || axis >= int64_t(shape.size()) || axis + r > srcShape.size())
    return l.fail("'scatter_add' has axis " + std::to_string(axis) +
                  " out of range");
  Buffer *from = l.bufferOf(src), *at = l.bufferOf(idx);
  Buffer *out = l.resultBuffer(op);
  ScalarType t = fromDType(op.getResult()->getType().dtype);
  Nest zero = l.openNest(l.top(), shape);
  l.store(*zero.body, out, Lowering::flatIndex(shape, zero.idx),
          constant(t, 0));
  checkIndices(l, op, at, idxShape, shape[axis], axis);
  // z[p, idx[i], q] += src[p, i, q]
  Nest n = l.openNest(l.top(), srcShape);
  std::vector<ExprPtr> dst = n.indices(0, axis);
  dst.push_back(
      cast(ScalarType::Index,
           load(at, Lowering::flatIndex(idxShape, n.indices(axis, axis + r)))));
  for (ExprPtr &q : n.indices(axis + r))
    dst.push_back(std::move(q));
  l.accumulate(*n.body, out, Lowering::flatIndex(shape, dst), Combiner::Add,
               load(from, Lowering::flatIndex(srcShape, n.idx)));
  return true;
}

} // namespace

bool loops::lowerControl(Lowering &l, const ir::Op &op) {
  switch (op.getKind()) {
  case OpKind::For:
    return lowerFor(l, op);
  case OpKind::Take:
    return lowerTake(l, op);
  case OpKind::ScatterAdd:
    return lowerScatterAdd(l, op);
  case OpKind::If:
    return lowerIf(l, op);
  default:
    return l.fail("'" + op.getName().str() + "' is not a loop or indexing op");
  }
}
