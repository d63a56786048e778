//===- LowerLayout.cpp - transpose, reshape, stack, slice, ... ------------===//
//
// Layout ops move elements without arithmetic:
//
//   transpose     y[i_0..i_r] = x[j] with j[perm[d]] = i_d
//   reshape       a view (alias) of x at offset 0: same elements, same
//                 order (Lower.cpp copies a returned view into the output)
//   broadcast_to  y[i] = x[broadcast index of i]
//   stack         y[o, k, i] = xs[k][o, i]        (one nest per operand)
//   unstack       ys[k][o, i] = x[o, k, i]
//   concat        y[o, off_k + j, i] = xs[k][o, j, i]
//   split         ys[k][o, j, i] = x[o, off_k + j, i]
//   slice         y[o, j, i] = x[o, start + j, i]: a view of x at offset
//                 start * (elements per index of the axis) when the axes
//                 before `axis` have size 1 (`x[a:b]` of the first axis)
//                 and y is not written to an output, a copy otherwise.
//                 First, unless the sizes are known (Sema checked them),
//                 a check that start + size fits the axis
//                 (GRADC_ERROR_INDEX), so nothing is read out of bounds
//   pad           z = 0; the same check; z[o, start + j, i] = x[o, j, i]
//   one_hot       y[i, j] = (int64(indices[i]) == j) ? 1 : 0; an index
//                 outside [0, depth) equals no j: a row of zeros
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

int64_t axisAttr(const ir::Op &op, int64_t rank) {
  std::vector<int64_t> axes = intListAttr(op, "axis");
  int64_t axis = axes.empty() ? 0 : axes[0];
  return axis < 0 ? axis + rank : axis;
}

/// idx with `e` inserted at position `axis`.
std::vector<ExprPtr> insertAt(const Nest &n, size_t axis, ExprPtr e) {
  std::vector<ExprPtr> idx = n.indices(0, axis);
  idx.push_back(std::move(e));
  for (ExprPtr &i : n.indices(axis))
    idx.push_back(std::move(i));
  return idx;
}

/// idx with `e` added to position `axis`.
std::vector<ExprPtr> shiftAt(const Nest &n, size_t axis, const ExprPtr &e) {
  std::vector<ExprPtr> idx = n.indices();
  idx[axis] = prim(PrimOp::Add, e->clone(), std::move(idx[axis]));
  return idx;
}

bool lowerTranspose(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const Shape &in = x->getType().shape;
  int64_t rank = in.size();
  std::vector<int64_t> perm = intListAttr(op, "perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  if (int64_t(perm.size()) != rank)
    return l.fail("'perm' of transpose does not fit its operand");
  const Shape &shape = op.getResult()->getType().shape;
  Buffer *y = l.resultBuffer(op);
  Nest n = l.openNest(l.top(), shape);
  std::vector<ExprPtr> src(rank);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t p = perm[d] < 0 ? perm[d] + rank : perm[d];
    if (p < 0 || p >= rank)
      return l.fail("'perm' of transpose is not a permutation");
    src[p] = n.idx[d]->clone();
  }
  for (ExprPtr &e : src)
    if (!e)
      return l.fail("'perm' of transpose is not a permutation");
  l.store(*n.body, y, Lowering::flatIndex(shape, n.idx),
          load(l.bufferOf(x), Lowering::flatIndex(in, src)));
  return true;
}

bool lowerReshape(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const TensorType &type = op.getResult()->getType();
  Buffer *view = l.fn.addBuffer(
      Buffer::Kind::Alias, type.dtype, type.shape,
      l.origin.result().size() > 1 ? l.origin.result().substr(1) : "view");
  view->base = l.bufferOf(x);
  view->offset = index(0);
  l.bind(op.getResult(), view);
  return true;
}

bool lowerBroadcastTo(Lowering &l, const ir::Op &op) {
  const Shape &shape = op.getResult()->getType().shape;
  Buffer *y = l.resultBuffer(op);
  Nest n = l.openNest(l.top(), shape);
  l.store(*n.body, y, Lowering::flatIndex(shape, n.idx),
          l.read(op.getOperand(0), n.idx));
  return true;
}

bool lowerStack(Lowering &l, const ir::Op &op) {
  const Shape &shape = op.getResult()->getType().shape;
  int64_t axis = axisAttr(op, shape.size());
  Buffer *y = l.resultBuffer(op);
  for (unsigned k = 0; k < op.getNumOperands(); ++k) {
    const ir::Value *x = op.getOperand(k);
    const Shape &in = x->getType().shape;
    if (l.isPartInPlace(x))
      continue;
    Nest n = l.openNest(l.top(), in);
    l.store(*n.body, y, Lowering::flatIndex(shape, insertAt(n, axis, index(k))),
            load(l.bufferOf(x), Lowering::flatIndex(in, n.idx)));
  }
  return true;
}

bool lowerUnstack(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const Shape &in = x->getType().shape;
  int64_t axis = axisAttr(op, in.size());
  for (unsigned k = 0; k < op.getNumResults(); ++k) {
    const Shape &part = op.getResult(k)->getType().shape;
    Buffer *y = l.resultBuffer(op, k);
    Nest n = l.openNest(l.top(), part);
    l.store(*n.body, y, Lowering::flatIndex(part, n.idx),
            load(l.bufferOf(x),
                 Lowering::flatIndex(in, insertAt(n, axis, index(k)))));
  }
  return true;
}

bool lowerConcat(Lowering &l, const ir::Op &op) {
  const Shape &shape = op.getResult()->getType().shape;
  int64_t axis = axisAttr(op, shape.size());
  Buffer *y = l.resultBuffer(op);
  ExprPtr offset = index(0);
  for (const ir::Value *x : op.getOperands()) {
    const Shape &in = x->getType().shape;
    if (l.isPartInPlace(x)) {
      offset = prim(PrimOp::Add, std::move(offset), extentOf(in[axis]));
      continue;
    }
    Nest n = l.openNest(l.top(), in);
    l.store(*n.body, y, Lowering::flatIndex(shape, shiftAt(n, axis, offset)),
            load(l.bufferOf(x), Lowering::flatIndex(in, n.idx)));
    offset = prim(PrimOp::Add, std::move(offset), extentOf(in[axis]));
  }
  return true;
}

bool lowerSplit(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const Shape &in = x->getType().shape;
  int64_t axis = axisAttr(op, in.size());
  ExprPtr offset = index(0);
  for (unsigned k = 0; k < op.getNumResults(); ++k) {
    const Shape &part = op.getResult(k)->getType().shape;
    Buffer *y = l.resultBuffer(op, k);
    Nest n = l.openNest(l.top(), part);
    l.store(
        *n.body, y, Lowering::flatIndex(part, n.idx),
        load(l.bufferOf(x), Lowering::flatIndex(in, shiftAt(n, axis, offset))));
    offset = prim(PrimOp::Add, std::move(offset), extentOf(part[axis]));
  }
  return true;
}

/// Checks, when the program runs, that `part` elements from `start` fit
/// in an axis of `whole` elements; nothing when both sizes are known
/// (the op table checked them).
void checkSliceFits(Lowering &l, const ir::Op &op, int64_t start,
                    const Dim &part, const Dim &whole, int64_t axis) {
  if (part.isKnown() && whole.isKnown())
    return;
  if (part == whole && start == 0)
    return;
  std::string end = part.isKnown() ? std::to_string(start + part.getSize())
                    : start == 0   ? part.str()
                                   : std::to_string(start) + " + " + part.str();
  l.check(l.top(),
          prim(PrimOp::Le, prim(PrimOp::Add, index(start), extentOf(part)),
               extentOf(whole)),
          CheckStatus::Index,
          "'" + op.getName().str() + "': elements [" + std::to_string(start) +
              ", " + end + ") are out of range [0, " + whole.str() +
              ") for axis " + std::to_string(axis) + " (GRADC_ERROR_INDEX)");
}

bool lowerSlice(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const Shape &in = x->getType().shape;
  const TensorType &type = op.getResult()->getType();
  int64_t axis = axisAttr(op, in.size());
  int64_t start = op.getAttrs().getInt("start");
  checkSliceFits(l, op, start, type.shape[axis], in[axis], axis);
  bool contiguous =
      llvm::all_of(llvm::ArrayRef<Dim>(in).take_front(axis), [](const Dim &d) {
        return d.isKnown() && d.getSize() == 1;
      });
  if (contiguous && l.mayAlias(op)) {
    Buffer *view = l.fn.addBuffer(
        Buffer::Kind::Alias, type.dtype, type.shape,
        l.origin.result().size() > 1 ? l.origin.result().substr(1) : "view");
    view->base = l.bufferOf(x);
    view->offset =
        start == 0
            ? index(0)
            : prim(PrimOp::Mul, index(start),
                   extentOf(llvm::ArrayRef<Dim>(in).drop_front(axis + 1)));
    l.bind(op.getResult(), view);
    return true;
  }
  Buffer *y = l.resultBuffer(op);
  Nest n = l.openNest(l.top(), type.shape);
  l.store(*n.body, y, Lowering::flatIndex(type.shape, n.idx),
          load(l.bufferOf(x),
               Lowering::flatIndex(in, shiftAt(n, axis, index(start)))));
  return true;
}

bool lowerPad(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const Shape &in = x->getType().shape;
  const TensorType &type = op.getResult()->getType();
  int64_t axis = axisAttr(op, in.size());
  int64_t start = op.getAttrs().getInt("start");
  checkSliceFits(l, op, start, in[axis], type.shape[axis], axis);
  Buffer *z = l.resultBuffer(op);
  Nest zero = l.openNest(l.top(), type.shape);
  l.store(*zero.body, z, Lowering::flatIndex(type.shape, zero.idx),
          constant(fromDType(type.dtype), 0));
  Nest n = l.openNest(l.top(), in);
  l.store(*n.body, z,
          Lowering::flatIndex(type.shape, shiftAt(n, axis, index(start))),
          load(l.bufferOf(x), Lowering::flatIndex(in, n.idx)));
  return true;
}

bool lowerOneHot(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const TensorType &type = op.getResult()->getType();
  Buffer *y = l.resultBuffer(op);
  Nest n = l.openNest(l.top(), type.shape);
  size_t rank = type.shape.size();
  ExprPtr label =
      cast(ScalarType::Index,
           load(l.bufferOf(x), Lowering::flatIndex(x->getType().shape,
                                                   n.indices(0, rank - 1))));
  ScalarType t = fromDType(type.dtype);
  l.store(*n.body, y, Lowering::flatIndex(type.shape, n.idx),
          select(prim(PrimOp::Eq, std::move(label), n.idx[rank - 1]->clone()),
                 constant(t, 1), constant(t, 0)));
  return true;
}

} // namespace

bool loops::lowerLayout(Lowering &l, const ir::Op &op) {
  switch (op.getKind()) {
  case OpKind::Transpose:
    return lowerTranspose(l, op);
  case OpKind::Reshape:
    return lowerReshape(l, op);
  case OpKind::BroadcastTo:
    return lowerBroadcastTo(l, op);
  case OpKind::Stack:
    return lowerStack(l, op);
  case OpKind::Unstack:
    return lowerUnstack(l, op);
  case OpKind::Concat:
    return lowerConcat(l, op);
  case OpKind::Split:
    return lowerSplit(l, op);
  case OpKind::Slice:
    return lowerSlice(l, op);
  case OpKind::Pad:
    return lowerPad(l, op);
  case OpKind::OneHot:
    return lowerOneHot(l, op);
  default:
    return l.fail("cannot lower '" + op.getName().str() + "' to loops");
  }
}
