//===- LowerReduce.cpp - sum, mean, max, logsumexp ------------------------===//
//
// For each element of the result (one loop per kept axis), a local
// accumulator runs over the reduced axes in increasing order, which is
// the interpreter's order (increasing flat index of the input):
//
//   sum       acc = 0;    acc += x            (f64 for floats; i32 wraps)
//   mean      acc = 0;    acc += x;   y = acc / count    (0/0 = NaN)
//   max       acc = -inf; acc = max(acc, x)   (lowest i32 for i32; NaN
//             propagates; the max of nothing is -inf)
//   logsumexp m = max x;  s += isfinite(m) ? e^(x - m) : 0;
//             y = isfinite(m) ? m + log(s) : m
//
// An empty reduced axis runs no iteration, so the result is the
// accumulator's identity; an empty kept axis runs nothing at all.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <cmath>
#include <limits>

using namespace gradc;
using namespace gradc::loops;

bool loops::lowerReduce(Lowering &l, const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const Shape &in = x->getType().shape;
  int64_t rank = in.size();
  std::vector<bool> reduced(rank, !op.getAttrs().has("axis"));
  for (int64_t a : intListAttr(op, "axis")) {
    if (a < 0)
      a += rank;
    if (a < 0 || a >= rank)
      return l.fail("axis out of range in '" + op.getName().str() + "'");
    reduced[a] = true;
  }
  Shape keptShape, reducedShape;
  for (int64_t d = 0; d < rank; ++d)
    (reduced[d] ? reducedShape : keptShape).push_back(in[d]);

  DType dtype = x->getType().dtype;
  bool isInt = dtype == DType::I32;
  ScalarType wide = Lowering::computeType(dtype);
  Buffer *out = l.resultBuffer(op);

  // Loops over the kept axes; the result's flat index is theirs.
  Nest outer = l.openNest(l.top(), keptShape);
  ExprPtr outIndex = Lowering::flatIndex(keptShape, outer.idx);
  // The input index of kept index `outer` and reduced index `r`.
  auto inputAt = [&](const Nest &r) {
    std::vector<ExprPtr> idx;
    size_t k = 0, j = 0;
    for (int64_t d = 0; d < rank; ++d)
      idx.push_back(reduced[d] ? r.idx[j++]->clone() : outer.idx[k++]->clone());
    return load(l.bufferOf(x), Lowering::flatIndex(in, idx));
  };
  Block &body = *outer.body;
  double lowest =
      isInt ? double(std::numeric_limits<int32_t>::min()) : -double(INFINITY);

  OpKind kind = op.getKind();
  if (kind == OpKind::Sum || kind == OpKind::Mean) {
    ScalarType accType = kind == OpKind::Mean ? ScalarType::F64 : wide;
    Buffer *acc = l.local(accType, "acc");
    l.store(body, acc, index(0), constant(accType, 0));
    Nest r = l.openNest(body, reducedShape);
    l.accumulate(*r.body, acc, index(0), Combiner::Add,
                 cast(accType, inputAt(r)));
    ExprPtr v = load(acc, index(0));
    if (kind == OpKind::Mean)
      v = prim(PrimOp::Div, std::move(v),
               cast(ScalarType::F64, extentOf(reducedShape)));
    l.store(body, out, std::move(outIndex), std::move(v));
    return true;
  }

  ScalarType maxType = isInt ? ScalarType::I32 : wide;
  Buffer *m = l.local(maxType, "m");
  l.store(body, m, index(0), constant(maxType, lowest));
  {
    Nest r = l.openNest(body, reducedShape);
    l.accumulate(*r.body, m, index(0), Combiner::Max,
                 cast(maxType, inputAt(r)));
  }
  if (kind == OpKind::Max) {
    l.store(body, out, std::move(outIndex), load(m, index(0)));
    return true;
  }
  // logsumexp
  Buffer *s = l.local(wide, "s");
  l.store(body, s, index(0), constant(wide, 0));
  {
    Nest r = l.openNest(body, reducedShape);
    ExprPtr e =
        intrinsic(Intrinsic::Exp,
                  prim(PrimOp::Sub, cast(wide, inputAt(r)), load(m, index(0))));
    l.accumulate(*r.body, s, index(0), Combiner::Add,
                 select(prim(PrimOp::IsFinite, load(m, index(0))), std::move(e),
                        constant(wide, 0)));
  }
  ExprPtr v = select(prim(PrimOp::IsFinite, load(m, index(0))),
                     prim(PrimOp::Add, load(m, index(0)),
                          intrinsic(Intrinsic::Log, load(s, index(0)))),
                     load(m, index(0)));
  l.store(body, out, std::move(outIndex), std::move(v));
  return true;
}
