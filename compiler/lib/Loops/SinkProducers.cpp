//===- SinkProducers.cpp - A row's elementwise loop into its sum's lanes --===//
//
// The loop pass `sink`: a loop over the elements of a row that stores a
// row buffer, followed (in the same block) by the chunks of an 8-lane sum
// that reads that buffer element by element, runs in the sum's loops
// instead: each element is computed where the sum adds it, and the row is
// not walked twice (K5's gradient: `%d_d` stored by one loop and summed
// by the next; the store stays, for the loop after the sum). In a block
//
//   P:  for %j < E { B }                      (stores %p[%j])
//       ...                                   (independent of P)
//   N:  for %c < E / 8 { ...; for %l < 8 { S }; ... }
//   T:  for %r < E % 8 { S' }                 (among the loops after N)
//
// P becomes `B[%j := %c * 8 + %l]` at the head of the lane loop's body S
// and `B[%j := E - E % 8 + %r]` at the head of S', and is deleted. It
// applies in the body of a loop (a row's passes; a top-level loop over
// elements is one that `parallel` may give threads) when
//
//  1. P's body is stores only (no loop, check or call) of arithmetic (no
//     math function), each of a local that P sets before it reads it, or
//     of a buffer %p (scratch or stack, no view) at exactly `%j`, which P
//     does not read; or (1b) P is a loop that `jam` made of F rows and
//     marked `independent`, which may also read its %p, at `%j` only:
//     the rows it stored there, and the column sums it adds to
//     (`%acc.col = %acc[%j] + t; ...; %acc[%j] = %acc.col + t'`);
//  2. N's body holds lane loops (loops::isLaneLoop), exactly one of which
//     reads the buffers %p (2b: with a jammed P, the F rows' lane loops
//     may each read them, and P goes into the first), each at
//     `%c * 8 + %l` (its own %l) and nowhere else in N; T is the first
//     loop over E % 8 after N that reads them, each at `E - E % 8 + %r`;
//     neither writes a %p, and neither touches a local of P or writes a
//     buffer that P reads;
//  3. every statement between P and N, and the loops between N and T,
//     touch no %p and no local of P, and write nothing that P reads.
//
// Iteration j of P then runs, in the order of j (the chunks, then the
// rest), just before the sum reads element j, and it reads what it read
// before (nothing it reads is written in between) and writes what no
// statement in between reads: every value, and so every bit, is the one
// of the loop before, and the sum adds in its own order. The lane loop
// stays a lane loop (it stores and adds as before; isLaneLoop allows
// stores), so the printers still vectorise it across its lanes. Run after
// `jam`, whose conditions ask for a row buffer stored by a loop over its
// length: jammed, the F rows' producers each sink into their own lane
// loop of the one chunk loop, and a jammed column loop (K5's `x-hat`, its
// column sums d_gamma and d_beta) into the first lane loop of the sum that
// reads its rows (`sum(c * gamma * x-hat)`: one walk of the F rows less,
// C++ gradient -8%, LLVM -11 to -14%). Each element j of a column sum
// still gets its F rows' terms in order, and no statement between P and
// T touches it. Such a lane loop and T are marked `independent` as P
// was: each of their writes is at their own element or lane (GCC
// vectorised it only with GRADC_IVDEP; without, K5's gradient took twice
// as long).
//
// Then, in every chunk loop of lane loops (ChunkRows), a scratch row that
// now lives one chunk at a time, stored by the first lane loop that
// touches it and read by that and later ones of the same chunk, at
// `%c * W + %l`, and likewise in the rest loops after it, becomes a row of
// W (the stack, after `plan`), or gets one of its own when its other uses
// are loops that set the whole row first (`jam`'s rows after the groups):
// K5's four rows of x-hat no longer take 16 KB of the L1 cache beside x,
// c, d_x and the column sums (gradient -1 to -5% on both backends;
// Performance.md, session 19).
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

class Sinker {
public:
  explicit Sinker(LoopFunction &fn) : fn(fn) {
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        viewed.insert(b->base->root());
  }

  /// Sinks in the body of every loop: a row's passes. (At the top level
  /// a loop over elements is one that the `parallel` pass may give
  /// threads; in the chunks of a sum it would have none.)
  void run(Block &block, bool top) {
    for (size_t p = 0; !top && p < block.size();) {
      if (sink(block, p))
        block.erase(block.begin() + p);
      else
        ++p;
    }
    for (StmtPtr &s : block)
      run(s->body, false);
  }

private:
  LoopFunction &fn;
  llvm::DenseSet<const Buffer *> viewed;

  /// P's row buffers (stored at %j) and locals, and what it reads.
  struct Producer {
    llvm::SmallVector<Buffer *, 2> rows;
    llvm::DenseSet<const Buffer *> locals;
    llvm::DenseSet<const Buffer *> reads;
  };

  /// Condition 1.
  bool producer(const Stmt &p, Producer &out) {
    if (p.kind != Stmt::Kind::For || p.parallel || p.body.empty())
      return false;
    for (const StmtPtr &s : p.body) {
      // A jammed column loop (condition 1b) adds to its column sums as
      // loads and stores at %j; elsewhere an accumulation stays.
      if (s->kind != Stmt::Kind::Store)
        return false;
      bool ok = true;
      walkExprs(*s, [&](const Expr &e) {
        // A math function stays in a loop of its own (a lane loop is kept
        // rolled and vectorised across its 8 lanes; K3's exp in the
        // chunks of its sum took its gradient from 1.08 to 1.20 ms).
        ok &= e.kind != Expr::Kind::Intrinsic;
        if (e.kind != Expr::Kind::Load)
          return;
        Buffer *b = e.buffer->root();
        // A local of P is read only after P set it.
        if (b->kind == Buffer::Kind::Local && !out.locals.count(b) &&
            llvm::any_of(p.body,
                         [&](const StmtPtr &t) { return t->buffer == b; }))
          ok = false;
        out.reads.insert(b);
      });
      if (!ok)
        return false;
      Buffer *b = s->buffer;
      if (b->kind == Buffer::Kind::Local) {
        out.locals.insert(b);
        continue;
      }
      if ((b->kind != Buffer::Kind::Scratch &&
           b->kind != Buffer::Kind::Stack) ||
          viewed.count(b) || s->index->kind != Expr::Kind::LoopVar ||
          s->index->var != p.var)
        return false;
      if (!llvm::is_contained(out.rows, b))
        out.rows.push_back(b);
    }
    for (Buffer *b : out.rows)
      if (out.reads.count(b) && !(p.independent && readsOnlyAtVar(p, b)))
        return false;
    return !out.rows.empty();
  }

  /// Whether every load of `b` in P's body is at P's variable (condition
  /// 1b: a jammed loop reads its column sums and the rows it stored
  /// there only).
  static bool readsOnlyAtVar(const Stmt &p, const Buffer *b) {
    bool ok = true;
    for (const StmtPtr &s : p.body)
      walkExprs(*s, [&](const Expr &e) {
        if (e.kind == Expr::Kind::Load && e.buffer->root() == b)
          ok &= e.buffer == b && e.args[0]->kind == Expr::Kind::LoopVar &&
                e.args[0]->var == p.var;
      });
    return ok;
  }

  /// Whether `s` stays clear of P (condition 3, and the part of
  /// condition 2 that is not about the row buffers' loads).
  static bool clearOf(const BufferAccesses &t, const Producer &p,
                      bool rowsReadOk) {
    if (t.calls)
      return false;
    for (const Buffer *b : p.locals)
      if (t.touches(b))
        return false;
    for (const Buffer *b : p.rows)
      if (t.writes.count(b) || (!rowsReadOk && t.reads.count(b)))
        return false;
    for (const Buffer *b : t.writes)
      if (p.reads.count(b))
        return false;
    return true;
  }

  /// Whether every access in `s` (and the statements in it) to a row
  /// buffer of P is a load at `index`; `found` is set when one is.
  static bool readsAt(const Stmt &s, const Producer &p, const Expr &index,
                      bool &found) {
    bool ok = true;
    walkExprs(s, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Load && llvm::is_contained(p.rows, e.buffer)) {
        found = true;
        ok &= sameExpr(*e.args[0], index);
      }
    });
    for (const StmtPtr &c : s.body)
      ok &= readsAt(*c, p, index, found);
    return ok;
  }

  static bool readsRows(const Stmt &s, const Producer &p) {
    BufferAccesses t;
    t.add(s);
    return llvm::any_of(p.rows,
                        [&](const Buffer *b) { return t.reads.count(b); });
  }

  /// P's body with %j replaced by `at`, before the statements of `into`.
  void prepend(const Stmt &p, const Expr &at, Block &into) {
    Block copies = substitutedStores(p.body, p.var, at);
    for (StmtPtr &s : into)
      copies.push_back(std::move(s));
    into = std::move(copies);
  }

  /// The first statement from block[from] on that reads one of P's row
  /// buffers, when every statement before it is clear of P; else (or when
  /// none reads them) block.size().
  static size_t nextReader(const Block &block, size_t from,
                           const Producer &prod) {
    for (size_t i = from; i < block.size(); ++i) {
      if (readsRows(*block[i], prod))
        return i;
      BufferAccesses t;
      t.add(*block[i]);
      if (!clearOf(t, prod, false))
        return block.size();
    }
    return block.size();
  }

  /// Sinks block[at] into the sum after it when it can; true if it did
  /// (the caller erases it).
  bool sink(Block &block, size_t at) {
    const Stmt &p = *block[at];
    Producer prod;
    if (!producer(p, prod))
      return false;
    const Expr &extent = *p.extent;
    // N: the first statement after P that reads a row buffer.
    size_t n = nextReader(block, at + 1, prod);
    if (n == block.size())
      return false;
    Stmt &chunk = *block[n];
    if (chunk.kind != Stmt::Kind::For)
      return false;
    // W: 8 f64 lanes, or 16 f32 ones (accumulate = "f32").
    int64_t w = ir::reductionLanes;
    auto chunksOf = [&](int64_t lanes) {
      return prim(PrimOp::Div, extent.clone(), index(lanes));
    };
    if (!sameExpr(*chunk.extent, *chunksOf(w))) {
      w = ir::reductionLanesF32;
      if (!sameExpr(*chunk.extent, *chunksOf(w)))
        return false;
    }
    ExprPtr rest = prim(PrimOp::Rem, extent.clone(), index(w));
    // P goes into the first lane loop that reads its rows; the rows of a
    // jammed loop (condition 2b) are read by the F rows' lane loops.
    Stmt *lane = nullptr;
    for (const StmtPtr &s : chunk.body) {
      if (!isLaneLoop(*s))
        return false;
      if (!readsRows(*s, prod))
        continue;
      if (lane && !p.independent)
        return false;
      if (!lane)
        lane = s.get();
      ExprPtr j =
          prim(PrimOp::Add, prim(PrimOp::Mul, loopVar(chunk.var), index(w)),
               loopVar(s->var));
      bool found = false;
      if (!readsAt(*s, prod, *j, found))
        return false;
    }
    BufferAccesses inChunk;
    inChunk.add(chunk);
    if (!lane || !clearOf(inChunk, prod, true))
      return false;
    // T: the first loop over the rest after N that reads a row buffer.
    size_t r = nextReader(block, n + 1, prod);
    if (r == block.size())
      return false;
    Stmt &tail = *block[r];
    if (tail.kind != Stmt::Kind::For || !sameExpr(*tail.extent, *rest))
      return false;
    ExprPtr jRest =
        prim(PrimOp::Add, prim(PrimOp::Sub, extent.clone(), rest->clone()),
             loopVar(tail.var));
    bool found = false;
    BufferAccesses inTail;
    inTail.add(tail);
    if (!readsAt(tail, prod, *jRest, found) || !clearOf(inTail, prod, true))
      return false;
    ExprPtr jChunk =
        prim(PrimOp::Add, prim(PrimOp::Mul, loopVar(chunk.var), index(w)),
             loopVar(lane->var));
    prepend(p, *jChunk, lane->body);
    prepend(p, *jRest, tail.body);
    // P's iterations touched disjoint memory (`jam`'s mark, the C++
    // printer's GRADC_IVDEP); so do the lanes it now runs in, each of
    // whose writes is at its element or its lane.
    lane->independent |= p.independent;
    tail.independent |= p.independent;
    return true;
  }
};

/// Rows that live one chunk at a time (the second half of `sink`, after
/// the first in every function, in the body of a loop as the first): a
/// scratch row %p that is stored and read
/// only in the lane loops of one chunk loop N, at `%c * W + %l`, and in
/// the loops over the rest right after N, at `E - E % W + %r`, and stored
/// before it is read in each part (the first access of the chunks, and of the
/// rest, is a store whose value does not read it), holds in each chunk only
/// the W elements that the chunk's loops store and read: it becomes
/// `%p: [W]`, indexed by `%l` and `%r`, which `plan` then puts on the
/// stack. When %p is also used elsewhere, in other top-level loops each of
/// whose iterations first sets all of it (`setsFirst`: the rows after
/// `jam`'s groups reuse the first row's buffers), and in the top-level
/// statement of N only by these loops, N and its rests get a row of W of
/// their own instead: no value crosses between the two. Every element is
/// stored before it is read as before, with the same value: the same bits.
/// K5's gradient: the four jammed rows of `x-hat` that sink put in the
/// chunks of `sum(c * gamma * x-hat)` no longer take 4 KB each of the L1
/// cache beside x, c, d_x and the column sums.
class ChunkRows {
public:
  explicit ChunkRows(LoopFunction &fn) : fn(fn), uses(countUses(fn)) {}

  void run() {
    for (StmtPtr &s : fn.body) {
      top = s.get();
      run(s->body);
    }
  }

private:
  LoopFunction &fn;
  BufferTable<unsigned> uses;
  /// The top-level statement being walked.
  const Stmt *top = nullptr;

  void run(Block &block) {
    for (size_t n = 0; n < block.size(); ++n)
      shrinkAfter(block, n);
    for (StmtPtr &s : block)
      run(s->body);
  }

  /// How many of `uses` are in `s` (and the statements in it).
  static unsigned usesIn(const Stmt &s, const Buffer *b) {
    unsigned n = 0;
    walk(s.body, [&](const Stmt &st) { n += usesOf(st, b); });
    return n + usesOf(s, b);
  }
  static unsigned usesOf(const Stmt &st, const Buffer *b) {
    unsigned n = st.buffer == b;
    walkExprs(st, [&](const Expr &e) {
      n += e.kind == Expr::Kind::Load && e.buffer == b;
    });
    n += llvm::count(st.inputs, b) + llvm::count(st.outputs, b);
    return n;
  }

  /// Whether loop `x` sets all of `b` before anything reads it, in each of
  /// its iterations: the first statement of its body that touches `b` is a
  /// loop over b's elements that stores it at its variable, before it
  /// reads it, and touches it nowhere else (the rows of `jam`'s remainder:
  /// the values of the chunks are never read there).
  static bool setsFirst(const Stmt &x, const Buffer *b) {
    if (x.kind != Stmt::Kind::For || usesOf(x, b))
      return false;
    for (const StmtPtr &s : x.body) {
      if (!usesIn(*s, b))
        continue;
      if (s->kind != Stmt::Kind::For ||
          !sameExpr(*s->extent, *b->numElements()))
        return false;
      bool stored = false, ok = true;
      for (const StmtPtr &st : s->body) {
        if (st->kind == Stmt::Kind::For)
          return false;
        walkExprs(*st, [&](const Expr &e) {
          if (e.kind == Expr::Kind::Load && e.buffer == b)
            ok &= stored && e.args[0]->kind == Expr::Kind::LoopVar &&
                  e.args[0]->var == s->var;
        });
        if (st->buffer == b) {
          ok &= st->kind == Stmt::Kind::Store &&
                st->index->kind == Expr::Kind::LoopVar &&
                st->index->var == s->var;
          stored = true;
        }
      }
      return ok && stored;
    }
    return true;
  }

  /// Whether the values that the region of `top` stores in `b` (its `n`
  /// accesses) are read nowhere else: every other access is in another
  /// top-level loop that sets b first.
  bool privateTo(const Buffer *b, unsigned n) {
    if (usesIn(*top, b) != n)
      return false;
    unsigned outside = 0;
    for (const StmtPtr &s : fn.body) {
      if (s.get() == top)
        continue;
      unsigned here = usesIn(*s, b);
      if (here && !setsFirst(*s, b))
        return false;
      outside += here;
    }
    return n + outside == uses[b];
  }

  /// A row's accesses in the chunk loop and the rest loops: how many (as
  /// countUses counts them), whether all are at their loop's element, and
  /// whether the first of each of the two parts stores it.
  struct Row {
    unsigned count = 0;
    bool ok = true;
    bool started[2] = {false, false};
  };

  /// The width W of chunk loop `s` (its body lane loops of W lanes, W its
  /// extent's divisor), or 0.
  static int64_t chunkWidth(const Stmt &s) {
    if (s.kind != Stmt::Kind::For || s.parallel || s.body.empty() ||
        s.extent->kind != Expr::Kind::Prim || s.extent->op != PrimOp::Div ||
        s.extent->args[1]->kind != Expr::Kind::Const)
      return 0;
    int64_t w = int64_t(s.extent->args[1]->value);
    for (const StmtPtr &c : s.body)
      if (!isLaneLoop(*c) || !isIndexConst(*c->extent, w))
        return 0;
    return w;
  }

  /// Notes the accesses of loop `l` (a body of stores and accumulations:
  /// a lane loop, a rest loop) to scratch buffers, which are at `at` if
  /// they are a row's, in part `part` (0 the chunks, 1 the rest).
  static void note(const Stmt &l, const Expr &at, unsigned part,
                   llvm::MapVector<Buffer *, Row> &rows) {
    auto access = [&](Buffer *b, const Expr &index, bool firstOk) {
      if (b->kind != Buffer::Kind::Scratch)
        return;
      Row &r = rows[b];
      ++r.count;
      r.ok &= sameExpr(index, at);
      if (!r.started[part])
        r.ok &= firstOk;
      r.started[part] = true;
    };
    for (const StmtPtr &st : l.body) {
      // A store's value (and index) is computed before it stores.
      bool readsOwn = false;
      walkExprs(*st, [&](const Expr &e) {
        if (e.kind != Expr::Kind::Load)
          return;
        readsOwn |= e.buffer == st->buffer;
        access(e.buffer, *e.args[0], false);
      });
      if (st->buffer)
        access(st->buffer, *st->index,
               st->kind == Stmt::Kind::Store && !readsOwn);
    }
  }

  static bool storesOnly(const Stmt &s) {
    return llvm::all_of(s.body, [](const StmtPtr &st) {
      return st->kind == Stmt::Kind::Store ||
             st->kind == Stmt::Kind::Accumulate;
    });
  }

  /// Shrinks the rows of chunk loop block[n] and the rest loops after it.
  void shrinkAfter(Block &block, size_t n) {
    Stmt &chunk = *block[n];
    int64_t w = chunkWidth(chunk);
    if (!w)
      return;
    const Expr &extent = *chunk.extent->args[0];
    ExprPtr rest = prim(PrimOp::Rem, extent.clone(), index(w));
    // In order of first access: the rows' new buffers are numbered so.
    llvm::MapVector<Buffer *, Row> rows;
    llvm::SmallVector<Stmt *, 8> loops;
    for (const StmtPtr &l : chunk.body) {
      note(*l,
           *prim(PrimOp::Add, prim(PrimOp::Mul, loopVar(chunk.var), index(w)),
                 loopVar(l->var)),
           0, rows);
      loops.push_back(l.get());
    }
    // The rest loops right after N (K5's: the F rows'); a row touched
    // further on is not one of these.
    for (size_t t = n + 1; t < block.size(); ++t) {
      Stmt &tail = *block[t];
      if (tail.kind != Stmt::Kind::For || !sameExpr(*tail.extent, *rest) ||
          !storesOnly(tail))
        break;
      note(tail,
           *prim(PrimOp::Add, prim(PrimOp::Sub, extent.clone(), rest->clone()),
                 loopVar(tail.var)),
           1, rows);
      loops.push_back(&tail);
    }
    for (auto &[b, r] : rows) {
      // Every access of the function is one of these (a view counts
      // twice for its base: never), and the row becomes W elements; or
      // the others are in loops of their own that set it first, and
      // these get a row of W of their own.
      if (!r.ok || b->root() != b)
        continue;
      Buffer *to = b;
      if (r.count == uses[b]) {
        b->shape = {Dim::known(w)};
        b->count.reset();
      } else if (privateTo(b, r.count)) {
        to = fn.addBuffer(Buffer::Kind::Scratch, b->dtype, {Dim::known(w)},
                          b->name);
      } else {
        continue;
      }
      for (Stmt *l : loops)
        for (StmtPtr &st : l->body) {
          if (st->buffer == b) {
            st->buffer = to;
            st->index = loopVar(l->var);
          }
          forEachExprSlot(*st,
                          [&](ExprPtr &slot) { reindex(slot, b, to, l->var); });
        }
    }
  }

  /// `e` with every load of `b` a load of `to` at `%var`.
  static void reindex(ExprPtr &e, Buffer *b, Buffer *to, unsigned var) {
    if (e->kind == Expr::Kind::Load && e->buffer == b) {
      e->buffer = to;
      e->args[0] = loopVar(var);
      return;
    }
    for (ExprPtr &a : e->args)
      reindex(a, b, to, var);
  }
};

} // namespace

bool loops::sinkProducers(LoopModule &module, std::string &) {
  for (auto &fn : module.functions) {
    Sinker(*fn).run(fn->body, /*top=*/true);
    ChunkRows(*fn).run();
  }
  return true;
}
