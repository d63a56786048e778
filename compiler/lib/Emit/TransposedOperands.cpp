//===- TransposedOperands.cpp - matmul operands read in place -------------===//
//
// The transposes that a matmul kernel can read from their source
// (TransposedOperands.h), for both printers of the loop IR.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/TransposedOperands.h"

using namespace gradc;
using namespace gradc::emit;
using namespace gradc::loops;

namespace {

bool isVar(const Expr &e, unsigned v) {
  return e.kind == Expr::Kind::LoopVar && e.var == v;
}

/// Whether `e` is `row * stride + col`; sets `stride`.
bool matchIndex(const Expr &e, unsigned row, unsigned col,
                const Expr *&stride) {
  if (e.kind != Expr::Kind::Prim || e.op != PrimOp::Add ||
      !isVar(*e.args[1], col))
    return false;
  const Expr &m = *e.args[0];
  if (m.kind != Expr::Kind::Prim || m.op != PrimOp::Mul ||
      !isVar(*m.args[0], row))
    return false;
  stride = m.args[1].get();
  return true;
}

/// Whether `a` and `b` may be the same memory: one root, or one planned
/// slot.
bool overlap(const Buffer *a, const Buffer *b) {
  a = a->root();
  b = b->root();
  return a == b ||
         (a->kind == b->kind && a->slot >= 0 && a->slot == b->slot &&
          (a->kind == Buffer::Kind::Scratch || a->kind == Buffer::Kind::Stack));
}

bool writes(const Stmt &s, const Buffer *x) {
  bool hit = false;
  auto visit = [&](const Stmt &w) {
    if ((w.kind == Stmt::Kind::Store || w.kind == Stmt::Kind::Accumulate) &&
        w.buffer)
      hit = hit || overlap(w.buffer, x);
    for (const Buffer *o : w.outputs)
      hit = hit || overlap(o, x);
  };
  visit(s);
  walk(s.body, visit);
  return hit;
}

/// Whether `s` (or a statement in it) uses `t`.
bool touches(const Stmt &s, const Buffer *t) {
  bool hit = writes(s, t) || llvm::is_contained(s.inputs, t);
  walkExprs(s, [&](const Expr &e) {
    hit = hit || (e.kind == Expr::Kind::Load && e.buffer == t);
  });
  walk(s.body, [&](const Stmt &n) {
    hit = hit || llvm::is_contained(n.inputs, t);
    walkExprs(n, [&](const Expr &e) {
      hit = hit || (e.kind == Expr::Kind::Load && e.buffer == t);
    });
  });
  return hit;
}

/// Appends the factors of the product `e` (itself when no product).
void factorsOf(const Expr &e, llvm::SmallVectorImpl<const Expr *> &out) {
  if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Mul) {
    factorsOf(*e.args[0], out);
    factorsOf(*e.args[1], out);
  } else {
    out.push_back(&e);
  }
}

/// Whether the products `a` and `b` multiply the same factors, in any
/// order (a batch's stride `R * C` against `C * R`).
bool sameFactors(llvm::ArrayRef<const Expr *> a,
                 llvm::ArrayRef<const Expr *> b) {
  llvm::SmallVector<const Expr *, 4> fa, fb;
  for (const Expr *e : a)
    factorsOf(*e, fa);
  for (const Expr *e : b)
    factorsOf(*e, fb);
  if (fa.size() != fb.size())
    return false;
  for (const Expr *f : fa) {
    auto it =
        llvm::find_if(fb, [&](const Expr *g) { return g && sameExpr(*f, *g); });
    if (it == fb.end())
      return false;
    *it = nullptr;
  }
  return true;
}

/// For `batch * S + (row * stride + col)`: returns S and sets `rest` to a
/// copy of the index without the batch term; null for any other index.
const Expr *peelBatch(const Expr &e, unsigned batch, ExprPtr &rest) {
  if (e.kind != Expr::Kind::Prim || e.op != PrimOp::Add)
    return nullptr;
  const Expr &sum = *e.args[0];
  if (sum.kind != Expr::Kind::Prim || sum.op != PrimOp::Add)
    return nullptr;
  const Expr &m = *sum.args[0];
  if (m.kind != Expr::Kind::Prim || m.op != PrimOp::Mul ||
      !isVar(*m.args[0], batch))
    return nullptr;
  rest = e.clone();
  rest->args[0] = sum.args[1]->clone();
  return m.args[1].get();
}

} // namespace

TransposedOperands
emit::findTransposedOperands(const LoopFunction &fn,
                             llvm::function_ref<bool(const Stmt &)> wanted,
                             bool batches) {
  TransposedOperands found;
  BufferTable<unsigned> uses = countUses(fn);
  for (size_t i = 0; i + 1 < fn.body.size(); ++i) {
    // The nest, alone or in a loop over a batch of matrices (with
    // `batches`: the gradient of a batched product, GMM's
    // transpose(centered) @ d_z per component).
    const Stmt *batch = nullptr, *outerP = fn.body[i].get();
    if (outerP->kind != Stmt::Kind::For || outerP->body.size() != 1)
      continue;
    if (const Stmt &b = *outerP->body[0];
        batches && b.kind == Stmt::Kind::For && b.body.size() == 1 &&
        b.body[0]->kind == Stmt::Kind::For) {
      batch = outerP;
      outerP = &b;
    }
    const Stmt &outer = *outerP;
    const Stmt &inner = *outer.body[0];
    if (inner.kind != Stmt::Kind::For || inner.body.size() != 1)
      continue;
    const Stmt &store = *inner.body[0];
    if (store.kind != Stmt::Kind::Store)
      continue;
    const Buffer *t = store.buffer;
    const Expr &v = *store.value;
    if ((t->kind != Buffer::Kind::Scratch && t->kind != Buffer::Kind::Stack) ||
        uses.lookup(t) != 2 || v.kind != Expr::Kind::Load ||
        v.buffer->dtype != t->dtype || v.buffer == t ||
        (v.buffer->kind == Buffer::Kind::Param && v.buffer->shape.empty()) ||
        v.buffer->kind == Buffer::Kind::Local)
      continue;
    const Expr *tIndex = store.index.get(), *xIndex = v.args[0].get();
    ExprPtr tRest, xRest;
    if (batch) {
      // Both matrices of a batch element are rows x cols elements.
      const Expr *tBatch = peelBatch(*tIndex, batch->var, tRest);
      const Expr *xBatch = peelBatch(*xIndex, batch->var, xRest);
      if (!tBatch || !xBatch ||
          !sameFactors({tBatch}, {outer.extent.get(), inner.extent.get()}) ||
          !sameFactors({xBatch}, {outer.extent.get(), inner.extent.get()}))
        continue;
      tIndex = tRest.get();
      xIndex = xRest.get();
    }
    const Expr *tStride, *xStride;
    if (!matchIndex(*tIndex, outer.var, inner.var, tStride) ||
        !matchIndex(*xIndex, inner.var, outer.var, xStride))
      continue;
    const Expr &rows = *outer.extent, &cols = *inner.extent;
    if (!sameExpr(*tStride, cols) || !sameExpr(*xStride, rows))
      continue;
    // The first statement after the nest that touches `t` must be the
    // matmul (in a loop over the same batch, each reading its matrix of
    // `t`). Buffer planning may have given the source's memory to a
    // buffer written in between, or to the product, since the transpose
    // nest was the source's last reader.
    size_t at = i + 1;
    bool clobbered = false;
    for (; at < fn.body.size(); ++at) {
      const Stmt &between = *fn.body[at];
      if (touches(between, t))
        break;
      clobbered = clobbered || writes(between, v.buffer);
    }
    if (clobbered || at == fn.body.size())
      continue;
    const Stmt *kp = fn.body[at].get();
    const Stmt *kernelLoop = nullptr;
    if (batch) {
      if (kp->kind != Stmt::Kind::For || kp->body.size() != 1 ||
          !sameExpr(*kp->extent, *batch->extent))
        continue;
      kernelLoop = kp;
      kp = kp->body[0].get();
    }
    if (kp->kind != Stmt::Kind::KernelCall)
      continue;
    const Stmt &k = *kp;
    if (overlap(v.buffer, k.outputs[0]) || !wanted(k))
      continue;
    // Where the kernel reads `t`: at 0, or at its batch element's matrix.
    auto readsMatrix = [&](const Expr &offset) {
      if (!kernelLoop)
        return isIndexConst(offset, 0);
      return offset.kind == Expr::Kind::Prim && offset.op == PrimOp::Mul &&
             isVar(*offset.args[0], kernelLoop->var) &&
             sameFactors({offset.args[1].get()},
                         {outer.extent.get(), inner.extent.get()});
    };
    for (unsigned op = 0; op < 2; ++op) {
      if (k.inputs[op] != t || !readsMatrix(*k.operands[op + 1]))
        continue;
      // a is M x K, b is K x N.
      const Expr &r = *k.operands[op == 0 ? 3 : 4];
      const Expr &c = *k.operands[op == 0 ? 4 : 5];
      if (!sameExpr(r, rows) || !sameExpr(c, cols) || k.inputs[1 - op] == t)
        continue;
      found.from[t] = v.buffer;
      found.elided.insert(batch ? batch : &outer);
      found.nestOf[t] = batch ? batch : &outer;
    }
  }
  return found;
}
