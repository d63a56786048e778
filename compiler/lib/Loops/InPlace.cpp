//===- InPlace.cpp - A row buffer kept in the output row it ends in -------===//
//
// The loop pass `inplace`: in a top-level loop over rows, a scratch row %t
// whose last pass stores the output's row element by element,
//
//   for %i < R {
//     W:  for %j < E { ...; %t[%j] = V }        (sets the whole row)
//         ...                                   (reads %t: a sum)
//     L:  for %k < E { ...; %out[%i * E + %k] = f(%t[%k]) }
//   }
//
// lives in that output row instead: each access %t[e] becomes
// %out[%i * E + e], and L rewrites the row in place. K3's gradient so
// stores its exponentials into d_x, sums them there and scales them
// there, as the hand-written code does, where it stored them into a
// scratch row and copied that row, scaled, into d_x: the output's cache
// misses now come while the exponentials are computed, and the scaling
// reads a row in L1. It applies when
//
//  1. L is a loop over E whose body is stores of locals (a value's fused
//     parts) and last a store into an output (not viewed) at exactly
//     `%i * E + %k`, which read %t only at `%k` and not the output; no
//     statement after L in the row touches %t or the output;
//  2. %t is scratch of E elements and the output's element type, not
//     viewed, touched by no other top-level statement and by nothing but
//     loads and stores (no call or kernel operand), and not small enough
//     for the stack (`plan` would put it there, and the row loop could
//     then get threads from `parallel`, which the output's chunked indices
//     would stop);
//  3. the output is touched by no other statement of the function than L;
//  4. the first statement of the row that touches %t is W: a loop over E
//     of stores only, which stores %t at `%j` and does not read it. So
//     every iteration sets its row before it reads it, and no value flows
//     from one row to the next through %t.
//
// Each element of the output row then holds what %t[e] held at every
// point of the iteration (nothing else writes that row, and L reads
// element k just before it writes it), and L stores what it stored
// before: the same bits.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <functional>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// Whether `s` or a statement in it refers to `b` in any way (a load, a
/// store, a call's or kernel's operand).
bool touches(const Stmt &s, const Buffer *b) {
  bool found = s.buffer == b || llvm::is_contained(s.inputs, b) ||
               llvm::is_contained(s.outputs, b);
  walkExprs(s, [&](const Expr &e) {
    found |= e.kind == Expr::Kind::Load && e.buffer == b;
  });
  for (const StmtPtr &c : s.body)
    found = found || touches(*c, b);
  return found;
}

/// Whether every reference to `b` in `s` (and in it) is a load or a
/// store's or accumulation's destination.
bool onlyLoadsAndStores(const Stmt &s, const Buffer *b) {
  if (llvm::is_contained(s.inputs, b) || llvm::is_contained(s.outputs, b))
    return false;
  return llvm::all_of(
      s.body, [&](const StmtPtr &c) { return onlyLoadsAndStores(*c, b); });
}

/// Whether every load of `b` in `e` is at `at`.
bool loadsOnlyAt(const Expr &e, const Buffer *b, const Expr &at) {
  if (e.kind == Expr::Kind::Load && e.buffer == b && !sameExpr(*e.args[0], at))
    return false;
  return llvm::all_of(e.args,
                      [&](const ExprPtr &a) { return loadsOnlyAt(*a, b, at); });
}

bool reads(const Expr &e, const Buffer *b) {
  if (e.kind == Expr::Kind::Load && e.buffer == b)
    return true;
  return llvm::any_of(e.args, [&](const ExprPtr &a) { return reads(*a, b); });
}

/// Whether `b` is small enough for `plan` to put it on the stack.
bool stackSized(const Buffer &b) {
  int64_t n = 1;
  for (const Dim &d : b.shape) {
    if (!d.isKnown())
      return false;
    n *= d.getSize();
  }
  return n * int64_t(elementByteSize(b.dtype)) <= stackThresholdBytes;
}

class InPlace {
public:
  explicit InPlace(LoopFunction &fn) : fn(fn) {
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        viewed.insert(b->base);
  }

  void run() {
    for (size_t r = 0; r < fn.body.size(); ++r) {
      Stmt &rows = *fn.body[r];
      if (rows.kind != Stmt::Kind::For)
        continue;
      for (size_t l = 0; l < rows.body.size(); ++l)
        if (Buffer *t = rowFor(r, l))
          rewrite(rows, l, t);
    }
  }

private:
  LoopFunction &fn;
  llvm::DenseSet<const Buffer *> viewed;

  /// Whether a top-level statement other than fn.body[r] touches `b`.
  bool touchedOutside(size_t r, const Buffer *b) const {
    for (size_t i = 0; i < fn.body.size(); ++i)
      if (i != r && touches(*fn.body[i], b))
        return true;
    return false;
  }

  /// `%i * E + e`, the output element of row %i that e of %t becomes.
  static ExprPtr rowIndex(const Stmt &rows, const Expr &extent, ExprPtr e) {
    return prim(PrimOp::Add,
                prim(PrimOp::Mul, loopVar(rows.var), extent.clone()),
                std::move(e));
  }

  /// The buffer %t that statement l of the row loop fn.body[r] may keep
  /// in its output row (conditions 1-4), or null.
  Buffer *rowFor(size_t r, size_t l) {
    const Stmt &rows = *fn.body[r];
    const Stmt &last = *rows.body[l];
    if (last.kind != Stmt::Kind::For || last.body.empty())
      return nullptr;
    // L's body: the fused locals of the value, then the store.
    const Stmt &store = *last.body.back();
    if (store.kind != Stmt::Kind::Store)
      return nullptr;
    Buffer *out = store.buffer;
    if (out->kind != Buffer::Kind::Output || viewed.count(out))
      return nullptr;
    for (const StmtPtr &s : last.body)
      if (s->kind != Stmt::Kind::Store || reads(*s->value, out) ||
          reads(*s->index, out) ||
          (s.get() != &store && s->buffer->kind != Buffer::Kind::Local))
        return nullptr;
    const Expr &extent = *last.extent;
    ExprPtr k = loopVar(last.var);
    if (!sameExpr(*store.index, *rowIndex(rows, extent, k->clone())))
      return nullptr;
    // %t: the first scratch buffer that L reads at %k.
    Buffer *t = nullptr;
    for (const StmtPtr &s : last.body)
      walkExprs(*s, [&](const Expr &e) {
        if (e.kind == Expr::Kind::Load &&
            e.buffer->kind == Buffer::Kind::Scratch &&
            sameExpr(*e.args[0], *k) && !t)
          t = e.buffer;
      });
    if (!t || t->dtype != out->dtype || viewed.count(t) || t->count ||
        stackSized(*t) || !sameExpr(*t->numElements(), extent))
      return nullptr;
    for (const StmtPtr &s : last.body)
      if (!loadsOnlyAt(*s->value, t, *k) || reads(*s->index, t))
        return nullptr;
    for (size_t i = l + 1; i < rows.body.size(); ++i)
      if (touches(*rows.body[i], t) || touches(*rows.body[i], out))
        return nullptr;
    if (touchedOutside(r, t) || touchedOutside(r, out) ||
        !onlyLoadsAndStores(rows, t))
      return nullptr;
    for (size_t i = 0; i < l; ++i)
      if (touches(*rows.body[i], out))
        return nullptr;
    // W: the first statement of the row that touches %t.
    size_t w = 0;
    while (w < l && !touches(*rows.body[w], t))
      ++w;
    return w < l && setsRow(*rows.body[w], t, extent) ? t : nullptr;
  }

  /// Condition 4: `w` is a loop over `extent` of stores only that stores
  /// `t` at its own variable and does not read it.
  static bool setsRow(const Stmt &w, const Buffer *t, const Expr &extent) {
    if (w.kind != Stmt::Kind::For || !sameExpr(*w.extent, extent))
      return false;
    bool stores = false;
    for (const StmtPtr &s : w.body) {
      if (s->kind != Stmt::Kind::Store || reads(*s->value, t) ||
          reads(*s->index, t))
        return false;
      if (s->buffer != t)
        continue;
      if (s->index->kind != Expr::Kind::LoopVar || s->index->var != w.var)
        return false;
      stores = true;
    }
    return stores;
  }

  /// Every access to `t` in `s` becomes one of the output row.
  void retarget(Stmt &s, const Stmt &rows, const Expr &extent, Buffer *t,
                Buffer *out) {
    std::function<void(ExprPtr &)> visit = [&](ExprPtr &e) {
      for (ExprPtr &a : e->args)
        visit(a);
      if (e->kind == Expr::Kind::Load && e->buffer == t) {
        e->buffer = out;
        e->args[0] = rowIndex(rows, extent, std::move(e->args[0]));
      }
    };
    forEachExprSlot(s, visit);
    if (s.buffer == t) {
      s.buffer = out;
      s.index = rowIndex(rows, extent, std::move(s.index));
    }
    for (StmtPtr &c : s.body)
      retarget(*c, rows, extent, t, out);
  }

  void rewrite(Stmt &rows, size_t l, Buffer *t) {
    Stmt &last = *rows.body[l];
    Buffer *out = last.body.back()->buffer;
    ExprPtr extent = last.extent->clone();
    for (StmtPtr &s : rows.body)
      retarget(*s, rows, *extent, t, out);
    fn.bufferNames.erase(t->name);
    std::erase_if(fn.buffers, [&](const std::unique_ptr<Buffer> &b) {
      return b.get() == t;
    });
  }
};

} // namespace

bool loops::keepRowsInPlace(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    InPlace(*fn).run();
  return true;
}
