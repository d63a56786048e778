//===- LowerSoftmax.cpp - softmax, log_softmax, softmax_cross_entropy -----===//
//
// Along `axis`, for each lane x[0..n) (one loop per other axis), in f64
// for floats, each sum in the interpreter's order (docs/IR.md, "Summation
// order"): along the last axis (softmax's default, and every row of
// softmax_cross_entropy) in the W lanes of Lowering::openLanes combined
// pairwise, along another axis in increasing k:
//
//   m = max_k x_k;  s = sum_k e^(x_k - m)
//   softmax_k     = e^(x_k - m) / s
//   log_softmax_k = x_k - m - log(s)
//
// softmax_cross_entropy(logits [..., C], labels [...]) per row r:
//   check 0 <= labels[r] < C (else the run-time error of the interpreter)
//   lse = isfinite(m) ? m + log(s) : m;   loss[r] = lse - logits[r, label]
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <cmath>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// m = max over k, s = sum of e^(x_k - m), in locals of type `wide`;
/// `at(k)` loads x_k; `contiguous`: the axis is the input's last, so the
/// sum runs in lanes.
void maxAndSum(Lowering &l, Block &body, const Dim &n, ScalarType wide,
               llvm::function_ref<ExprPtr(const ExprPtr &k)> at, Buffer *&m,
               Buffer *&s, bool contiguous) {
  m = l.local(wide, "m");
  s = l.local(wide, "s");
  l.store(body, m, index(0), constant(wide, -double(INFINITY)));
  {
    Nest k = l.openNest(body, {n});
    l.accumulate(*k.body, m, index(0), Combiner::Max, cast(wide, at(k.idx[0])));
  }
  auto term = [&](const ExprPtr &k) {
    return intrinsic(Intrinsic::Exp,
                     prim(PrimOp::Sub, cast(wide, at(k)), load(m, index(0))));
  };
  if (contiguous) {
    Buffer *lanes = l.openLanes(body);
    l.accumulateLanes(body, lanes, n, term);
    l.store(body, s, index(0), Lowering::combineLanes(lanes));
    return;
  }
  l.store(body, s, index(0), constant(wide, 0));
  Nest k = l.openNest(body, {n});
  l.accumulate(*k.body, s, index(0), Combiner::Add, term(k.idx[0]));
}

bool lowerSoftmaxAlongAxis(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const Shape &shape = x->getType().shape;
  int64_t rank = shape.size();
  std::vector<int64_t> axes = intListAttr(op, "axis");
  int64_t axis = axes.empty() ? -1 : axes[0];
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return l.fail("axis out of range in '" + op.getName().str() + "'");
  ScalarType wide = Lowering::computeType(x->getType().dtype);
  Buffer *out = l.resultBuffer(op), *in = l.bufferOf(x);
  Shape lanes;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      lanes.push_back(shape[d]);
  Nest lane = l.openNest(l.top(), lanes);
  // The flat index of lane index + k along the axis.
  auto indexAt = [&](const ExprPtr &k) {
    std::vector<ExprPtr> idx = lane.indices(0, axis);
    idx.push_back(k->clone());
    for (ExprPtr &e : lane.indices(axis))
      idx.push_back(std::move(e));
    return Lowering::flatIndex(shape, idx);
  };
  auto at = [&](const ExprPtr &k) { return load(in, indexAt(k)); };
  Buffer *m = nullptr, *s = nullptr;
  maxAndSum(l, *lane.body, shape[axis], wide, at, m, s, axis == rank - 1);
  Nest k = l.openNest(*lane.body, {shape[axis]});
  ExprPtr xk = cast(wide, at(k.idx[0]));
  ExprPtr v;
  if (op.getKind() == OpKind::LogSoftmax)
    v = prim(PrimOp::Sub, prim(PrimOp::Sub, std::move(xk), load(m, index(0))),
             intrinsic(Intrinsic::Log, load(s, index(0))));
  else
    v = prim(PrimOp::Div,
             intrinsic(Intrinsic::Exp,
                       prim(PrimOp::Sub, std::move(xk), load(m, index(0)))),
             load(s, index(0)));
  l.store(*k.body, out, indexAt(k.idx[0]), std::move(v));
  return true;
}

bool lowerCrossEntropy(Lowering &l, const ir::Op &op) {
  const ir::Value *logits = op.getOperand(0), *labels = op.getOperand(1);
  const Shape &shape = logits->getType().shape;
  if (shape.empty())
    return l.fail("softmax_cross_entropy needs logits of rank at least 1");
  Shape rows(shape.begin(), shape.end() - 1);
  const Dim &classes = shape.back();
  ScalarType wide = Lowering::computeType(logits->getType().dtype);
  Buffer *out = l.resultBuffer(op), *in = l.bufferOf(logits);
  Nest row = l.openNest(l.top(), rows);
  ExprPtr rowIndex = Lowering::flatIndex(rows, row.idx);
  ExprPtr label =
      cast(ScalarType::Index, load(l.bufferOf(labels), rowIndex->clone()));
  l.check(*row.body,
          prim(PrimOp::And, prim(PrimOp::Ge, label->clone(), index(0)),
               prim(PrimOp::Lt, label->clone(), extentOf(classes))),
          CheckStatus::Index, "a label is out of range");
  auto at = [&](const ExprPtr &k) {
    return load(in,
                prim(PrimOp::Add,
                     prim(PrimOp::Mul, rowIndex->clone(), extentOf(classes)),
                     k->clone()));
  };
  Buffer *m = nullptr, *s = nullptr;
  maxAndSum(l, *row.body, classes, wide, at, m, s, true);
  ExprPtr lse = select(prim(PrimOp::IsFinite, load(m, index(0))),
                       prim(PrimOp::Add, load(m, index(0)),
                            intrinsic(Intrinsic::Log, load(s, index(0)))),
                       load(m, index(0)));
  l.store(*row.body, out, rowIndex->clone(),
          prim(PrimOp::Sub, std::move(lse), cast(wide, at(label))));
  return true;
}

} // namespace

bool loops::lowerSoftmax(Lowering &l, const ir::Op &op) {
  if (op.getKind() == OpKind::SoftmaxCrossEntropy)
    return lowerCrossEntropy(l, op);
  return lowerSoftmaxAlongAxis(l, op);
}
