//===- LowerSoftmax.cpp - softmax, log_softmax, softmax_cross_entropy -----===//
//
// Along `axis`, for each lane x[0..n) (one loop per other axis), each sum
// in the interpreter's order (docs/IR.md, "Summation order"): along the
// last axis (softmax's default, and every row of softmax_cross_entropy)
// in the W f64 lanes of Lowering::openLanes combined pairwise, along
// another axis in increasing k. The maximum and each term e_k are in the
// data type (for f32: the f32 difference and gradc/Math.h's f32 exp,
// which vectorise), the sum in f64 (docs/IR.md, "Rows"):
//
//   m = max_k x_k;  e_k = e^(x_k - m);  s = sum_k f64(e_k)
//   softmax_k     = f64(e_k) / s          (e_k stored in the output by the
//                                          sum's loop, then divided)
//   log_softmax_k = f64(x_k) - f64(m) - log(s)    (log s once per lane)
//
// With accumulate = "f32", s is an f32 sum (16 f32 lanes along the last
// axis) and the formulas continue from f64(s).
//
// softmax_cross_entropy(logits [..., C], labels [...]) per row r:
//   check 0 <= labels[r] < C (else the run-time error of the interpreter)
//   lse = isfinite(m) ? f64(m) + log(s) : f64(m);
//   loss[r] = lse - f64(logits[r, label])
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "gradc/IR/Interpreter.h"

#include <cmath>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// m = max over k (type `t`, the data's), s = sum of f64(e^(x_k - m)) (an
/// f64 local; f32 with `inF32`, accumulate = "f32"); `at(k)` loads x_k;
/// `contiguous`: the axis is the input's last, so the sum runs in lanes.
/// `keep(body, k, e)`, when given, stores the term e_k (type `t`) where
/// the sum's loop computes it.
void maxAndSum(
    Lowering &l, Block &body, const Dim &n, ScalarType t,
    llvm::function_ref<ExprPtr(const ExprPtr &k)> at, Buffer *&m, Buffer *&s,
    bool contiguous, bool inF32,
    llvm::function_ref<void(Block &, const ExprPtr &, const ExprPtr &)> keep =
        nullptr) {
  ScalarType sType = inF32 ? ScalarType::F32 : ScalarType::F64;
  m = l.local(t, "m");
  s = l.local(sType, "s");
  if (contiguous) {
    l.maxLanes(body, m, n, [&](const ExprPtr &k) { return cast(t, at(k)); });
  } else {
    l.store(body, m, index(0), constant(t, -double(INFINITY)));
    Nest k = l.openNest(body, {n});
    l.accumulate(*k.body, m, index(0), Combiner::Max, cast(t, at(k.idx[0])));
  }
  Buffer *local = keep ? l.local(t, "e") : nullptr;
  auto term = [&](Block &inner, const ExprPtr &k) {
    ExprPtr e = intrinsic(Intrinsic::Exp,
                          prim(PrimOp::Sub, cast(t, at(k)), load(m, index(0))));
    if (!keep)
      return cast(sType, std::move(e));
    l.store(inner, local, index(0), std::move(e));
    keep(inner, k, load(local, index(0)));
    return cast(sType, load(local, index(0)));
  };
  if (contiguous && n.isKnown() && n.getSize() >= 1 &&
      n.getSize() <= (inF32 ? ir::reductionLanesF32 : ir::reductionLanes)) {
    // One term per lane (a classifier's few logits): no lanes.
    l.store(body, s, index(0), l.sumFewTerms(body, n.getSize(), term, inF32));
    return;
  }
  if (contiguous) {
    Buffer *lanes = l.openLanes(body, inF32);
    l.accumulateLanes(body, lanes, n, term);
    l.store(body, s, index(0), Lowering::combineLanes(lanes));
    return;
  }
  l.store(body, s, index(0), constant(sType, 0));
  Nest k = l.openNest(body, {n});
  ExprPtr v = term(*k.body, k.idx[0]);
  l.accumulate(*k.body, s, index(0), Combiner::Add, std::move(v));
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
  DType dtype = x->getType().dtype;
  if (!isFloat(dtype))
    return l.fail("'" + op.getName().str() + "' of integers");
  ScalarType t = fromDType(dtype), f64 = ScalarType::F64;
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
  bool isLog = op.getKind() == OpKind::LogSoftmax;
  auto keep = [&](Block &body, const ExprPtr &k, const ExprPtr &e) {
    l.store(body, out, indexAt(k), e->clone());
  };
  bool inF32 = Lowering::accumulatesInF32(op);
  if (isLog)
    maxAndSum(l, *lane.body, shape[axis], t, at, m, s, axis == rank - 1, inF32);
  else
    maxAndSum(l, *lane.body, shape[axis], t, at, m, s, axis == rank - 1, inF32,
              keep);
  ExprPtr v;
  Nest k;
  if (isLog) {
    Buffer *logS = l.local(f64, "log_s");
    l.store(*lane.body, logS, index(0),
            intrinsic(Intrinsic::Log, cast(f64, load(s, index(0)))));
    k = l.openNest(*lane.body, {shape[axis]});
    v = prim(PrimOp::Sub,
             prim(PrimOp::Sub, cast(f64, at(k.idx[0])),
                  cast(f64, load(m, index(0)))),
             load(logS, index(0)));
  } else {
    k = l.openNest(*lane.body, {shape[axis]});
    v = prim(PrimOp::Div, cast(f64, load(out, indexAt(k.idx[0]))),
             cast(f64, load(s, index(0))));
  }
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
  DType dtype = logits->getType().dtype;
  if (!isFloat(dtype))
    return l.fail("softmax_cross_entropy of integer logits");
  ScalarType t = fromDType(dtype), f64 = ScalarType::F64;
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
  maxAndSum(l, *row.body, classes, t, at, m, s, true,
            Lowering::accumulatesInF32(op));
  ExprPtr lse =
      select(prim(PrimOp::IsFinite, load(m, index(0))),
             prim(PrimOp::Add, cast(f64, load(m, index(0))),
                  intrinsic(Intrinsic::Log, cast(f64, load(s, index(0))))),
             cast(f64, load(m, index(0))));
  l.store(*row.body, out, rowIndex->clone(),
          prim(PrimOp::Sub, std::move(lse), cast(f64, at(label))));
  return true;
}

} // namespace

bool loops::lowerSoftmax(Lowering &l, const ir::Op &op) {
  if (op.getKind() == OpKind::SoftmaxCrossEntropy)
    return lowerCrossEntropy(l, op);
  return lowerSoftmaxAlongAxis(l, op);
}
