//===- LowerReduce.cpp - sum, mean, max, logsumexp ------------------------===//
//
// For each element of the result (one loop per kept axis), an
// accumulator runs over the reduced axes in increasing order, the
// summation order of docs/IR.md that the interpreter follows too: a
// float sum (sum, mean, logsumexp's) whose reduced axes include the
// input's last one adds into the W f64 lanes of Lowering::openLanes by
// the index along that axis (outer reduced axes loop around the lane
// loops), and `acc` is the lanes combined pairwise; any other sum (an i32
// one, or one over outer axes only) and every max add into one local in
// increasing flat index:
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
  // Lanes: a float sum that runs along the input's last axis.
  bool lanes = !isInt && rank > 0 && reduced[rank - 1];
  Shape outerReduced(reducedShape.begin(),
                     reducedShape.end() - (reducedShape.empty() ? 0 : 1));
  // Adds term(x) over the reduced axes into a new local of type `t`.
  auto sumInto = [&](ScalarType t, llvm::StringRef name,
                     llvm::function_ref<ExprPtr(ExprPtr x)> term) {
    Buffer *acc = l.local(t, name);
    if (!lanes) {
      l.store(body, acc, index(0), constant(t, 0));
      Nest r = l.openNest(body, reducedShape);
      l.accumulate(*r.body, acc, index(0), Combiner::Add, term(inputAt(r)));
      return acc;
    }
    Buffer *laneBuf = l.openLanes(body);
    Nest r = l.openNest(body, outerReduced);
    l.accumulateLanes(*r.body, laneBuf, in[rank - 1], [&](const ExprPtr &k) {
      Nest at;
      at.idx = r.indices();
      at.idx.push_back(k->clone());
      return term(inputAt(at));
    });
    l.store(body, acc, index(0), Lowering::combineLanes(laneBuf));
    return acc;
  };

  if (kind == OpKind::Sum || kind == OpKind::Mean) {
    ScalarType accType = kind == OpKind::Mean ? ScalarType::F64 : wide;
    Buffer *acc = sumInto(
        accType, "acc", [&](ExprPtr x) { return cast(accType, std::move(x)); });
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
  Buffer *s = sumInto(wide, "s", [&](ExprPtr x) {
    ExprPtr e =
        intrinsic(Intrinsic::Exp, prim(PrimOp::Sub, cast(wide, std::move(x)),
                                       load(m, index(0))));
    return select(prim(PrimOp::IsFinite, load(m, index(0))), std::move(e),
                  constant(wide, 0));
  });
  ExprPtr v = select(prim(PrimOp::IsFinite, load(m, index(0))),
                     prim(PrimOp::Add, load(m, index(0)),
                          intrinsic(Intrinsic::Log, load(s, index(0)))),
                     load(m, index(0)));
  l.store(body, out, std::move(outIndex), std::move(v));
  return true;
}
