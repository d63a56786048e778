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
//   logsumexp m = max x;  s += isfinite(m) ? f64(e^(x - m)) : 0;
//             y = isfinite(m) ? m + log(s) : m
// The maximum and logsumexp's terms e^(x - m) are in the data type (for
// f32: f32 compares, the f32 difference and gradc/Math.h's f32 exp, which
// vectorise; docs/IR.md, "Rows"), the sums in f64.
//
// The maximum along the last axis alone runs in lanes too
// (Lowering::maxLanes), bit for bit the one accumulator.
//
// When the last axis is kept (sum, mean and max over leading or middle
// axes), the accumulators are a buffer, one per result, and the input is
// walked once in row-major order (lowerColumns): the same terms in the
// same order per result, with the contiguous axis innermost.
//
// With accumulate = "f32" (docs/IR.md, the second order) every float
// accumulator above is f32 and the lanes are reductionLanesF32 f32 ones;
// mean and logsumexp continue from the f32 sum in f64.
//
// An empty reduced axis runs no iteration, so the result is the
// accumulator's identity; an empty kept axis runs nothing at all.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "gradc/IR/Interpreter.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// sum, mean and max over axes that leave the last one kept (a column
/// sum, such as the gradient's sum over a broadcast batch axis): a buffer
/// of accumulators, one per result, and the input walked once in
/// row-major order, each element into its result's accumulator. Each
/// result still takes its terms in increasing flat index, so it is the
/// same bit for bit as one accumulator per result walked down its column,
/// but the inner loop runs along the contiguous last axis, over
/// independent accumulators: it vectorises, and reads each row once.
///
///   acc[j] = 0 (max: the lowest value)          for each result j
///   for each x[i] in row-major order:  acc[j(i)] += x[i]  (max=)
///   y[j] = acc[j]   (mean: acc[j] / count)
bool lowerColumns(Lowering &l, const ir::Op &op,
                  const std::vector<bool> &reduced, const Shape &keptShape,
                  const Shape &reducedShape, Buffer *out) {
  const ir::Value *x = op.getOperand(0);
  const Shape &in = x->getType().shape;
  DType dtype = x->getType().dtype;
  bool isInt = dtype == DType::I32;
  OpKind kind = op.getKind();
  bool isMax = kind == OpKind::Max;
  // Floats add in f64 (mean even for i32; f32 with accumulate = "f32"),
  // i32 sums wrap, max is exact.
  DType accDType = isMax                              ? dtype
                   : Lowering::accumulatesInF32(op)   ? DType::F32
                   : (kind == OpKind::Mean || !isInt) ? DType::F64
                                                      : dtype;
  ScalarType accType = fromDType(accDType);
  double identity = !isMax  ? 0
                    : isInt ? double(std::numeric_limits<int32_t>::min())
                            : -double(INFINITY);
  Buffer *acc =
      l.fn.addBuffer(Buffer::Kind::Scratch, accDType, keptShape, "acc");
  {
    Nest k = l.openNest(l.top(), keptShape);
    l.store(*k.body, acc, Lowering::flatIndex(keptShape, k.idx),
            constant(accType, identity));
  }
  {
    Nest i = l.openNest(l.top(), in);
    std::vector<ExprPtr> kept;
    for (size_t d = 0; d < in.size(); ++d)
      if (!reduced[d])
        kept.push_back(i.idx[d]->clone());
    l.accumulate(
        *i.body, acc, Lowering::flatIndex(keptShape, kept),
        isMax ? Combiner::Max : Combiner::Add,
        cast(accType, load(l.bufferOf(x), Lowering::flatIndex(in, i.idx))));
  }
  Nest k = l.openNest(l.top(), keptShape);
  ExprPtr at = Lowering::flatIndex(keptShape, k.idx);
  ExprPtr v = load(acc, at->clone());
  if (kind == OpKind::Mean)
    v = prim(PrimOp::Div, cast(ScalarType::F64, std::move(v)),
             cast(ScalarType::F64, extentOf(reducedShape)));
  l.store(*k.body, out, std::move(at), std::move(v));
  return true;
}

/// The sum of ones over `outer` reduced axes and the last axis of `in`
/// in the 16 f32 lanes of accumulate = "f32", without a loop over them:
/// lane l receives c_l = |outer| * (n / 16 + (l < n % 16)) ones, and a
/// sequential f32 sum of c ones is min(c, 2^24) (2^24 + 1 rounds back to
/// 2^24), so `lanes[l] = f32(min(f64(c_l), 2^24))` holds what the loop
/// would, and the lanes combine as ever. The gradient of a `mean` of
/// unknown size sums such ones for its count (K5).
ExprPtr onesInF32Lanes(Lowering &l, Block &body, const Shape &in,
                       const Shape &outer) {
  const int64_t w = ir::reductionLanesF32;
  Buffer *lanes =
      l.fn.addBuffer(Buffer::Kind::Stack, DType::F32, {Dim::known(w)}, "lanes");
  auto [lane, k] = l.openLoop(body, index(w));
  const Dim &n = in.back();
  ExprPtr mine = prim(PrimOp::Add, prim(PrimOp::Div, extentOf(n), index(w)),
                      select(prim(PrimOp::Lt, k->clone(),
                                  prim(PrimOp::Rem, extentOf(n), index(w))),
                             index(1), index(0)));
  ExprPtr count =
      prim(PrimOp::Mul, extentOf(llvm::ArrayRef<Dim>(outer)), std::move(mine));
  l.store(*lane, lanes, k->clone(),
          prim(PrimOp::Min, cast(ScalarType::F64, std::move(count)),
               constant(ScalarType::F64, double(int64_t(1) << 24))));
  return Lowering::combineLanes(lanes);
}

} // namespace

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
  OpKind kind = op.getKind();
  if (kind != OpKind::LogSumExp && rank > 0 && !reduced[rank - 1] &&
      !reducedShape.empty())
    return lowerColumns(l, op, reduced, keptShape, reducedShape, out);

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

  // Lanes: a float sum that runs along the input's last axis.
  bool lanes = !isInt && rank > 0 && reduced[rank - 1];
  // The second order: f32 accumulators, reductionLanesF32 lanes.
  bool inF32 = Lowering::accumulatesInF32(op);
  const int64_t w = inF32 ? ir::reductionLanesF32 : ir::reductionLanes;
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
    int64_t outerCount = 1;
    for (const Dim &d : outerReduced)
      outerCount = d.isKnown() ? outerCount * d.getSize() : -1;
    const Dim &n = in[rank - 1];
    if (outerCount == 1 && n.isKnown() && n.getSize() >= 1 &&
        n.getSize() <= w) {
      // One term per lane (K4's sum of 4): no lanes (Lowering::sumFewTerms).
      Nest none;
      for (size_t d = 0; d < outerReduced.size(); ++d)
        none.idx.push_back(index(0));
      ExprPtr v = l.sumFewTerms(
          body, n.getSize(),
          [&](const ExprPtr &k) {
            Nest at;
            for (const ExprPtr &i : none.idx)
              at.idx.push_back(i->clone());
            at.idx.push_back(k->clone());
            return term(inputAt(at));
          },
          inF32);
      l.store(body, acc, index(0), std::move(v));
      return acc;
    }
    Buffer *laneBuf = l.openLanes(body, inF32);
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
    ScalarType accType = inF32                  ? ScalarType::F32
                         : kind == OpKind::Mean ? ScalarType::F64
                                                : wide;
    // A float sum of n terms that are all +-0 or all 1 (the gradient of
    // `mean` sums ones for its count): every partial sum, in whatever
    // order and lanes, is an integer below 2^53, so exact, and the sum is
    // n (+0 for zeros: accumulators start at +0, and +0 + -0 = +0), with
    // no loop. The same value, bit for bit. In f32 accumulators the
    // partial sums of ones are exact only up to 2^24, so then only a
    // known count up to that takes this way.
    std::optional<double> splat = l.splatValue(x);
    bool exactOnes = !inF32;
    if (inF32) {
      int64_t count = 1;
      for (const Dim &d : reducedShape)
        count = d.isKnown() && count >= 0 ? count * d.getSize() : -1;
      exactOnes = count >= 0 && count <= (int64_t(1) << 24);
    }
    if (!isInt && splat && (*splat == 0 || *splat == 1)) {
      ExprPtr v = *splat == 0 ? constant(accType, 0)
                  : exactOnes ? cast(accType, extentOf(reducedShape))
                              : onesInF32Lanes(l, body, in, outerReduced);
      if (kind == OpKind::Mean)
        v = prim(PrimOp::Div, cast(ScalarType::F64, std::move(v)),
                 cast(ScalarType::F64, extentOf(reducedShape)));
      l.store(body, out, std::move(outIndex), std::move(v));
      return true;
    }
    Buffer *acc = sumInto(
        accType, "acc", [&](ExprPtr x) { return cast(accType, std::move(x)); });
    ExprPtr v = load(acc, index(0));
    if (kind == OpKind::Mean)
      v = prim(PrimOp::Div, cast(ScalarType::F64, std::move(v)),
               cast(ScalarType::F64, extentOf(reducedShape)));
    l.store(body, out, std::move(outIndex), std::move(v));
    return true;
  }

  // The maximum is exact: in the data type (f32 compares are what
  // vectorise).
  ScalarType maxType = fromDType(dtype);
  Buffer *m = l.local(maxType, "m");
  if (reducedShape.size() == 1 && reduced[rank - 1]) {
    // Along the last axis only (a row): in lanes.
    l.maxLanes(body, m, in[rank - 1], [&](const ExprPtr &k) {
      Nest at;
      at.idx.push_back(k->clone());
      return cast(maxType, inputAt(at));
    });
  } else {
    l.store(body, m, index(0), constant(maxType, lowest));
    Nest r = l.openNest(body, reducedShape);
    l.accumulate(*r.body, m, index(0), Combiner::Max,
                 cast(maxType, inputAt(r)));
  }
  if (kind == OpKind::Max) {
    l.store(body, out, std::move(outIndex), load(m, index(0)));
    return true;
  }
  // logsumexp: each term in the data type (for f32: the f32 difference
  // and gradc/Math.h's f32 exp), added in f64.
  ExprPtr finite = prim(PrimOp::IsFinite, load(m, index(0)));
  ScalarType sType = Lowering::sumType(dtype, inF32);
  Buffer *s = sumInto(sType, "s", [&](ExprPtr x) {
    ExprPtr e =
        intrinsic(Intrinsic::Exp, prim(PrimOp::Sub, cast(maxType, std::move(x)),
                                       load(m, index(0))));
    return select(finite->clone(), cast(sType, std::move(e)),
                  constant(sType, 0));
  });
  ExprPtr mWide = cast(wide, load(m, index(0)));
  ExprPtr v =
      select(std::move(finite),
             prim(PrimOp::Add, mWide->clone(),
                  intrinsic(Intrinsic::Log, cast(wide, load(s, index(0))))),
             mWide->clone());
  l.store(body, out, std::move(outIndex), std::move(v));
  return true;
}
