//===- LowerMatMul.cpp - matmul as a library kernel -----------------------===//
//
// NumPy's matmul: a vector operand is promoted ([K] -> [1, K] on the left,
// [K, 1] on the right) and the added axis dropped from the result; the
// leading (batch) axes broadcast. One loop per batch axis calls the
// `matmul` kernel on the matrices at that batch index:
//
//   z[zOff + i*N + j] = sum_p a[aOff + i*K + p] * b[bOff + p*N + j]
//
// accumulated in increasing p, in f64 for floats (f32 with accumulate =
// "f32") and wrapping i32 for i32 (docs/Loops.md). A printer calls its
// runtime's kernel (or BLAS).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace gradc;
using namespace gradc::loops;

bool loops::lowerMatMul(Lowering &l, const ir::Op &op) {
  const ir::Value *a = op.getOperand(0), *b = op.getOperand(1);
  Shape as = a->getType().shape, bs = b->getType().shape;
  if (as.empty() || bs.empty())
    return l.fail("matmul needs operands of rank at least 1");
  if (as.size() == 1)
    as.insert(as.begin(), Dim::known(1));
  if (bs.size() == 1)
    bs.push_back(Dim::known(1));
  Dim m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  // The broadcast batch shape: the longer one, a known 1 giving way.
  size_t rank = std::max(aBatch.size(), bBatch.size());
  Shape batch;
  for (size_t i = 0; i < rank; ++i) {
    size_t la = rank - aBatch.size(), lb = rank - bBatch.size();
    Dim da = i < la ? Dim::known(1) : aBatch[i - la];
    Dim db = i < lb ? Dim::known(1) : bBatch[i - lb];
    batch.push_back(da.isKnown() && da.getSize() == 1 ? db : da);
  }
  Buffer *z = l.resultBuffer(op);
  Nest nest = l.openNest(l.top(), batch);
  auto s = std::make_unique<Stmt>(Stmt::Kind::KernelCall);
  s->kernel = Kernel::MatMul;
  s->accType =
      Lowering::sumType(a->getType().dtype, Lowering::accumulatesInF32(op));
  s->outputs = {z};
  s->inputs = {l.bufferOf(a), l.bufferOf(b)};
  Shape mn = {m, n}, mk = {m, k}, kn = {k, n};
  s->operands.push_back(
      prim(PrimOp::Mul, Lowering::flatIndex(batch, nest.idx), extentOf(mn)));
  s->operands.push_back(prim(
      PrimOp::Mul, Lowering::broadcastIndex(aBatch, nest.idx), extentOf(mk)));
  s->operands.push_back(prim(
      PrimOp::Mul, Lowering::broadcastIndex(bBatch, nest.idx), extentOf(kn)));
  s->operands.push_back(extentOf(m));
  s->operands.push_back(extentOf(k));
  s->operands.push_back(extentOf(n));
  l.add(*nest.body, std::move(s));
  return true;
}
