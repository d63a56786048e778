//===- MergeLoops.cpp - Merging sibling row loops; one-row buffers
//---------===//
//
// The loop pass `merge` (loop fusion of siblings, then contraction): the
// passes over the rows of a matrix that the lowering emits one op at a
// time (a row's max, its exponentials, their sum, the quotient) become
// one loop over the rows, so that each row is in cache for all of them,
// and a temporary that holds one row at a time shrinks to one row.
//
//  1. Two adjacent top-level loops `for %i < E {A}` and `for %j < E {B}`
//     (the same extent) become `for %i < E {A; B[%j := %i]}` when every
//     buffer both touch, one of them writing it, is touched row by row:
//     each access is `%b[%i * S + r]` (or `%b[%i + r]` with S = 1), with
//     S the size of one row of %b (the product of its dimensions after
//     the first, whose extent is E) and r free of %i. Iteration i of B
//     then reads and writes only row i, which only iteration i of A
//     touched: nothing moves across rows, so every value is the one
//     computed before. A local or stack buffer both touch (one of them
//     writing) stops the merge, as do a call or kernel in either loop and
//     checks in both (which error comes first would change). A view with
//     offset 0 counts as its base.
//     A nest that only copies a transpose for a matmul at top level
//     (`for i { for j { t[i * C + j] = x[j * R + i] } }`, t a matmul
//     operand) merges with nothing: left alone, the C++ printer has the
//     matmul read x as gradc::Transposed and stores no t. Nor does a loop
//     of dot products (loops::isDotLoop) merge with a loop that has an
//     inner loop that stores to memory, or the other way round: K4's
//     outer product `for i { for j { d_w[i * N + j] = g[i] * x[j] + 0 }
//     }` inside the loop that computes g kept LLVM from vectorising that
//     loop (its loads of x become values carried from one iteration to
//     the next: 60 ns per gradient), and inside the independent loop of
//     d_x's dot products LLVM vectorised it across i, as columns that it
//     then transposed to store (21.0 ns). Alone, each row is one vector
//     (PrintLLVM vectorises the inner loop, loops::isRowStoreLoop): 19.0.
//  2. A scratch buffer that one top-level loop alone touches, row by row,
//     becomes one row (`%b[%i * S + r]` -> `%b[r]`, shape without its
//     first dimension; a local when the row is one element).
//
// Before 1, step 0 (twice) merges a loop into an earlier one that it
// shares a buffer with, as 1 says, over the statements between them (at
// most `window` back): each either moves below the merged loop (no buffer
// that it and the loop touch is written by either) or above the earlier
// loop (likewise independent of that loop and of the statements it
// crosses); checks and calls move nowhere. After 2, step 3 merges
// adjacent inner loops over the same extent whose shared buffers are
// touched at one index `%j + r`. K5's gradient so becomes one loop over
// the rows, its column sums inside, and its row passes fewer.
//
// Linear time: each statement's accesses are collected once, into a
// summary per loop (per root buffer: written? every access row by row?)
// that a merge updates instead of recollecting the growing loop; step 2
// finds every access of every buffer in one walk and rewrites only those.
// (Both once recollected: the gradient of a 3,000-let chain spent 25 s
// here; `gradc-opt --loop-work` counts the work,
// test/Loops/merge-linear.test.)
//
// Only statements move and buffers shrink: no arithmetic changes, so the
// result is bit for bit the unmerged one.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <functional>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// The terms of a sum of `index` expressions, left to right.
void addTerms(const Expr &e, llvm::SmallVectorImpl<const Expr *> &out) {
  if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Add &&
      e.type == ScalarType::Index) {
    addTerms(*e.args[0], out);
    addTerms(*e.args[1], out);
    return;
  }
  out.push_back(&e);
}

/// Whether `term` is `%var * S`, `S * %var` or `%var` (S = 1), setting
/// `stride` (null for 1).
bool rowTerm(const Expr &term, unsigned var, const Expr *&stride) {
  auto isVar = [&](const Expr &e) {
    return e.kind == Expr::Kind::LoopVar && e.var == var;
  };
  if (isVar(term)) {
    stride = nullptr;
    return true;
  }
  if (term.kind != Expr::Kind::Prim || term.op != PrimOp::Mul)
    return false;
  for (int side = 0; side < 2; ++side)
    if (isVar(*term.args[side]) && !usesVar(*term.args[1 - side], var)) {
      stride = term.args[1 - side].get();
      return true;
    }
  return false;
}

bool isOne(const Expr *e) {
  return !e || (e->kind == Expr::Kind::Const && e->value == 1);
}

/// The buffer an access really touches: a view at offset 0 is its base.
bool zeroOffsets(const Buffer *b) {
  for (; b->kind == Buffer::Kind::Alias && b->base; b = b->base)
    if (!b->offset || b->offset->kind != Expr::Kind::Const ||
        b->offset->value != 0)
      return false;
  return true;
}

/// Whether `index`, an access to `b` in a loop `for %var < extent`, is
/// row by row: `%var * S + r` with S the row size of `b` and r free of
/// %var.
bool isRowAccess(const Buffer *b, const Expr &idx, unsigned var,
                 const Expr &extent) {
  if (b->shape.empty() || !zeroOffsets(b))
    return false;
  ExprPtr rows = extentOf(llvm::ArrayRef<Dim>(b->shape).take_front(1));
  if (!sameExpr(*rows, extent))
    return false;
  llvm::SmallVector<const Expr *, 4> terms;
  addTerms(idx, terms);
  const Expr *row = nullptr, *stride = nullptr;
  for (const Expr *t : terms) {
    if (!usesVar(*t, var))
      continue;
    if (row || !rowTerm(*t, var, stride))
      return false;
    row = t;
  }
  if (!row)
    return false;
  ExprPtr size = extentOf(llvm::ArrayRef<Dim>(b->shape).drop_front(1));
  return isOne(stride) ? isOne(size.get()) : stride && sameExpr(*size, *stride);
}

/// One access to a buffer, and where: its index (null: a call or kernel
/// uses the whole buffer) and whether it writes.
struct Access {
  const Buffer *buffer;
  const Expr *index;
  bool writes;
};

/// Every access in `s` and the statements nested in it; whether it holds
/// a check, a call or a kernel.
void collectAccesses(const Stmt &s, std::vector<Access> &out, bool &checks,
                     bool &calls) {
  auto one = [&](const Stmt &t) {
    walkExprs(t, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Load)
        out.push_back({e.buffer, e.args[0].get(), false});
    });
    if (t.kind == Stmt::Kind::Store || t.kind == Stmt::Kind::Accumulate)
      out.push_back({t.buffer, t.index.get(), true});
    if (t.kind == Stmt::Kind::Check)
      checks = true;
    if (t.kind == Stmt::Kind::Call || t.kind == Stmt::Kind::KernelCall) {
      calls = true;
      for (const Buffer *b : t.outputs)
        out.push_back({b, nullptr, true});
      for (const Buffer *b : t.inputs)
        out.push_back({b, nullptr, false});
    }
  };
  one(s);
  walk(s.body, one);
}

void renameVar(Expr &e, unsigned from, unsigned to) {
  if (e.kind == Expr::Kind::LoopVar && e.var == from)
    e.var = to;
  for (ExprPtr &a : e.args)
    renameVar(*a, from, to);
}

void renameVar(Stmt &s, unsigned from, unsigned to) {
  forEachExprSlot(s, [&](ExprPtr &e) { renameVar(*e, from, to); });
  for (StmtPtr &c : s.body)
    renameVar(*c, from, to);
}

/// What a top-level loop does to the buffers it touches, kept per loop
/// and updated as loops merge, so that each statement is looked at once:
/// per root buffer whether the loop writes it and whether every access is
/// row by row; whether it holds a check or a call; whether it is a layout
/// copy that a matmul reads (step 1).
struct Summary {
  struct Use {
    bool writes = false;
    bool rows = true;
  };
  llvm::DenseMap<const Buffer *, Use> uses;
  bool checks = false, calls = false, layoutCopy = false;

  /// `other`'s loop, with its variable renamed to ours, is now part of
  /// ours (the same extent: row by row means the same).
  void absorb(const Summary &other) {
    for (const auto &[root, u] : other.uses) {
      Use &mine = uses[root];
      mine.writes |= u.writes;
      mine.rows &= u.rows;
    }
    checks |= other.checks;
    calls |= other.calls;
  }
};

/// Whether an inner loop of `loop` stores into memory (not a local): with
/// a loop of dot products it depends on, no merge (step 1).
bool storesInInnerLoop(const Stmt &loop) {
  bool hit = false;
  for (const StmtPtr &s : loop.body)
    if (s->kind == Stmt::Kind::For)
      walk(s->body, [&](const Stmt &w) {
        hit |=
            (w.kind == Stmt::Kind::Store || w.kind == Stmt::Kind::Accumulate) &&
            w.buffer->kind != Buffer::Kind::Local;
      });
  return hit;
}

/// `row * S + col` with `row` and `col` the loop variables given.
bool isRowColIndex(const Expr &e, unsigned row, unsigned col) {
  auto isVar = [](const Expr &x, unsigned v) {
    return x.kind == Expr::Kind::LoopVar && x.var == v;
  };
  return e.kind == Expr::Kind::Prim && e.op == PrimOp::Add &&
         isVar(*e.args[1], col) && e.args[0]->kind == Expr::Kind::Prim &&
         e.args[0]->op == PrimOp::Mul && isVar(*e.args[0]->args[0], row);
}

/// Whether `loop` is the nest `for i { for j { t[i * C + j] = x[j * R + i]
/// } }` and a matmul at top level reads `t`: kept alone, the C++ printer
/// lets the matmul read x transposed (gradc::Transposed) instead of
/// storing t (PrintCpp.cpp, findTransposedOperands).
bool isTransposeForMatmul(const Stmt &loop,
                          const llvm::DenseSet<const Buffer *> &matmulInputs) {
  if (loop.kind != Stmt::Kind::For || loop.body.size() != 1)
    return false;
  const Stmt &inner = *loop.body[0];
  if (inner.kind != Stmt::Kind::For || inner.body.size() != 1)
    return false;
  const Stmt &store = *inner.body[0];
  return store.kind == Stmt::Kind::Store && matmulInputs.count(store.buffer) &&
         store.value->kind == Expr::Kind::Load &&
         isRowColIndex(*store.index, loop.var, inner.var) &&
         isRowColIndex(*store.value->args[0], inner.var, loop.var);
}

class Merger {
public:
  Merger(LoopFunction &fn, uint64_t &work) : fn(fn), work(work) {}

  void run() {
    for (const StmtPtr &s : fn.body)
      if (s->kind == Stmt::Kind::KernelCall)
        matmulInputs.insert(s->inputs.begin(), s->inputs.end());
    // Twice: a loop that shares nothing with an earlier one may share a
    // buffer with it once the first round merged more into it (K5's
    // column sum of c, after the passes that read c joined the rows).
    for (int round = 0; round < 2; ++round)
      mergeAcross();
    Block merged;
    Summary back;
    for (StmtPtr &s : fn.body) {
      Summary next = summarize(*s);
      if (!merged.empty() && canMerge(*merged.back(), back, *s, next)) {
        Stmt &into = *merged.back();
        renameVar(*s, s->var, into.var);
        for (StmtPtr &c : s->body)
          into.body.push_back(std::move(c));
        back.absorb(next);
        continue;
      }
      merged.push_back(std::move(s));
      back = std::move(next);
    }
    fn.body = std::move(merged);
    contract();
    for (StmtPtr &s : fn.body)
      if (s->kind == Stmt::Kind::For)
        mergeInner(s->body);
    scalarize();
  }

private:
  LoopFunction &fn;
  /// Accesses looked at: linear in the size of the function (the test of
  /// linearity reads it, test/Loops/merge-linear.test).
  uint64_t &work;
  /// The buffers that a matmul (a kernel call) at top level reads.
  llvm::DenseSet<const Buffer *> matmulInputs;

  /// The summary of the top-level statement `s`.
  Summary summarize(const Stmt &s) {
    Summary sum;
    std::vector<Access> accesses;
    collectAccesses(s, accesses, sum.checks, sum.calls);
    work += accesses.size();
    bool loop = s.kind == Stmt::Kind::For;
    for (const Access &x : accesses) {
      Summary::Use &u = sum.uses[x.buffer->root()];
      u.writes |= x.writes;
      u.rows = u.rows && loop && x.index &&
               isRowAccess(x.buffer, *x.index, s.var, *s.extent);
    }
    sum.layoutCopy = isTransposeForMatmul(s, matmulInputs);
    return sum;
  }

  /// Whether the top-level loops `a` and `b` (adjacent, `a` first) can be
  /// one loop: every buffer both touch, one of them writing it, is not a
  /// local or stack buffer and is touched row by row by both.
  bool canMerge(const Stmt &a, const Summary &inA, const Stmt &b,
                const Summary &inB) {
    if (a.kind != Stmt::Kind::For || b.kind != Stmt::Kind::For ||
        !sameExpr(*a.extent, *b.extent))
      return false;
    if (inA.calls || inB.calls || (inA.checks && inB.checks) ||
        inA.layoutCopy || inB.layoutCopy)
      return false;
    if ((isDotLoop(a) && storesInInnerLoop(b)) ||
        (isDotLoop(b) && storesInInnerLoop(a)))
      return false;
    for (const auto &[root, useB] : inB.uses) {
      auto it = inA.uses.find(root);
      if (it == inA.uses.end() || !(it->second.writes || useB.writes))
        continue;
      if (root->kind == Buffer::Kind::Local ||
          root->kind == Buffer::Kind::Stack || !it->second.rows || !useB.rows)
        return false;
    }
    return true;
  }

  /// Whether no buffer that both touch is written by either of them.
  bool independent(const Summary &a, const Summary &b) {
    const Summary &small = a.uses.size() <= b.uses.size() ? a : b;
    const Summary &large = &small == &a ? b : a;
    for (const auto &[root, u] : small.uses) {
      ++work;
      auto it = large.uses.find(root);
      if (it != large.uses.end() && (u.writes || it->second.writes))
        return false;
    }
    return true;
  }

  /// Whether the loops `a` and `b` both touch a buffer row by row (then a
  /// merge keeps its rows in cache for both; a loop that shares only a
  /// scalar with an earlier one stays where it is, so that no buffer it
  /// writes lives longer).
  bool shares(const Summary &a, const Summary &b) {
    const Summary &small = a.uses.size() <= b.uses.size() ? a : b;
    const Summary &large = &small == &a ? b : a;
    for (const auto &[root, u] : small.uses) {
      ++work;
      auto it = large.uses.find(root);
      if (it != large.uses.end() && u.rows && it->second.rows)
        return true;
    }
    return false;
  }

  /// A statement that nothing moves across: a check (which error comes
  /// first, and a load that the check guards) or a call.
  static bool barrier(const Summary &s) { return s.checks || s.calls; }

  /// A top-level statement that later loops may still merge into.
  struct Open {
    StmtPtr stmt;
    Summary sum;
  };
  /// How many of the last top-level statements a loop looks back at:
  /// a constant, so that the pass stays linear.
  static constexpr size_t window = 8;

  /// Step 0: a loop merges into an earlier one that it shares a buffer
  /// with, over statements between them: each is independent of the loop
  /// (no buffer that both touch is written by either: the loop moves
  /// over it) or of the earlier loop and of the statements it would cross
  /// (it moves up, before the earlier loop). So the lowering's
  /// initialisation of an accumulator (`for %j < C { %acc[%j] = 0 }`)
  /// between two passes over the rows no longer separates them.
  void mergeAcross() {
    Block done;
    std::vector<Open> open;
    for (StmtPtr &s : fn.body) {
      Summary next = summarize(*s);
      if (mergeBack(open, s, next))
        continue;
      open.push_back({std::move(s), std::move(next)});
      if (open.size() > window) {
        done.push_back(std::move(open.front().stmt));
        open.erase(open.begin());
      }
    }
    for (Open &o : open)
      done.push_back(std::move(o.stmt));
    fn.body = std::move(done);
  }

  /// Merges `s` into the last statement of `open` that it can merge
  /// into, moving the statements between them as step 0 says.
  bool mergeBack(std::vector<Open> &open, StmtPtr &s, const Summary &next) {
    if (s->kind != Stmt::Kind::For || barrier(next))
      return false;
    for (size_t k = open.size(); k-- > 0;) {
      Open &x = open[k];
      if (!shares(x.sum, next) || !canMerge(*x.stmt, x.sum, *s, next))
        continue;
      llvm::SmallVector<size_t, window> stay, up;
      bool ok = true;
      for (size_t j = k + 1; ok && j < open.size(); ++j) {
        const Summary &y = open[j].sum;
        if (!barrier(y) && independent(y, next)) {
          stay.push_back(j);
          continue;
        }
        ok = !barrier(y) && !barrier(x.sum) && independent(y, x.sum);
        for (size_t t : stay)
          ok = ok && independent(y, open[t].sum);
        up.push_back(j);
      }
      if (!ok)
        continue;
      renameVar(*s, s->var, x.stmt->var);
      for (StmtPtr &c : s->body)
        x.stmt->body.push_back(std::move(c));
      x.sum.absorb(next);
      std::vector<Open> order;
      for (size_t j = 0; j < k; ++j)
        order.push_back(std::move(open[j]));
      for (size_t j : up)
        order.push_back(std::move(open[j]));
      order.push_back(std::move(open[k]));
      for (size_t j : stay)
        order.push_back(std::move(open[j]));
      open = std::move(order);
      return true;
    }
    return false;
  }

  /// Step 3: in the body of a loop, adjacent loops over the same extent
  /// (the passes over one row: `%4[%j] = ...`, `%acc[%j] += f(%4[%j])`)
  /// become one when they share no local or stack buffer that either
  /// writes and every other buffer that both touch, one writing it, is
  /// touched at one index, `%j + r` with r free of %j: iteration j of the
  /// second touches only the element that iteration j of the first did.
  void mergeInner(Block &block) {
    Block out;
    for (StmtPtr &s : block) {
      if (!out.empty() && canMergeInner(*out.back(), *s)) {
        Stmt &into = *out.back();
        renameVar(*s, s->var, into.var);
        for (StmtPtr &c : s->body)
          into.body.push_back(std::move(c));
        continue;
      }
      out.push_back(std::move(s));
    }
    block = std::move(out);
    for (StmtPtr &s : block)
      if (s->kind == Stmt::Kind::For)
        mergeInner(s->body);
  }

  bool canMergeInner(const Stmt &a, const Stmt &b) {
    if (a.kind != Stmt::Kind::For || b.kind != Stmt::Kind::For ||
        !sameExpr(*a.extent, *b.extent) || usesVar(*b.extent, a.var))
      return false;
    std::vector<Access> inA, inB;
    bool checksA = false, callsA = false, checksB = false, callsB = false;
    collectAccesses(a, inA, checksA, callsA);
    collectAccesses(b, inB, checksB, callsB);
    work += inA.size() + inB.size();
    if (checksA || callsA || checksB || callsB)
      return false;
    // Per root buffer: written by a or b, and the one index of its
    // accesses (in a's variable), null when they differ.
    struct Use {
      bool writesA = false, writesB = false, inA = false, inB = false;
      bool oneIndex = true;
      ExprPtr index;
    };
    llvm::DenseMap<const Buffer *, Use> uses;
    auto note = [&](const Access &x, bool fromB) {
      Use &u = uses[x.buffer->root()];
      (fromB ? u.writesB : u.writesA) |= x.writes;
      (fromB ? u.inB : u.inA) = true;
      if (!x.index || !zeroOffsets(x.buffer)) {
        u.oneIndex = false;
        return;
      }
      ExprPtr index = x.index->clone();
      if (fromB)
        renameVar(*index, b.var, a.var);
      if (!u.index)
        u.index = std::move(index);
      else if (!sameExpr(*u.index, *index))
        u.oneIndex = false;
    };
    for (const Access &x : inA)
      note(x, false);
    for (const Access &x : inB)
      note(x, true);
    // The loops nested in either: an index that one of them moves
    // touches several elements per iteration.
    llvm::SmallVector<unsigned, 4> nested;
    for (const Stmt *loop : {&a, &b})
      walk(loop->body, [&](const Stmt &t) {
        if (t.kind == Stmt::Kind::For)
          nested.push_back(t.var);
      });
    for (const auto &[root, u] : uses) {
      if (!u.inA || !u.inB || !(u.writesA || u.writesB))
        continue;
      if (root->kind == Buffer::Kind::Local ||
          root->kind == Buffer::Kind::Stack || !u.oneIndex)
        return false;
      llvm::SmallVector<const Expr *, 4> terms;
      addTerms(*u.index, terms);
      unsigned moving = 0;
      for (const Expr *t : terms)
        if (usesVar(*t, a.var))
          moving += t->kind == Expr::Kind::LoopVar ? 1 : 2;
      if (moving != 1 || llvm::any_of(nested, [&](unsigned v) {
            return usesVar(*u.index, v);
          }))
        return false;
    }
    return true;
  }

  /// Where a buffer is touched, for step 4: the statement of `loop`'s
  /// body (position `pos`) that holds the access, and the index slot.
  struct IterSite {
    const Stmt *loop;
    size_t pos;
    ExprPtr *index;
    bool store; ///< a Store statement's own index (not a load in it)
    bool load;  ///< a load's index
  };
  struct IterUses {
    bool ok = true;
    llvm::SmallVector<IterSite, 2> sites;
  };

  /// Step 4: a scratch buffer that one loop alone touches, each access at
  /// the loop's variable in a statement directly in its body, the first
  /// of them a store (`for %j < C { %t[%j] = a; ... %t[%j] ... }`, after
  /// step 3 joined the passes of a row) holds one element per iteration:
  /// it becomes a local (the store of a row and the loads back are gone;
  /// K5's gradient, `%19 = %18 * %d` read twice). Each iteration sets the
  /// element before it reads it, and no other iteration or statement
  /// reads it, so every load sees the value it saw. One walk of the
  /// function finds every access.
  void scalarize() {
    llvm::DenseSet<const Buffer *> viewed;
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        viewed.insert(b->base);
    BufferTable<IterUses> found(fn);
    std::function<void(Block &, const Stmt *)> visit = [&](Block &block,
                                                           const Stmt *loop) {
      for (size_t pos = 0; pos < block.size(); ++pos) {
        Stmt &s = *block[pos];
        std::function<void(ExprPtr &)> inExpr = [&](ExprPtr &e) {
          if (e->kind == Expr::Kind::Load)
            found[e->buffer].sites.push_back(
                {loop, pos, &e->args[0], false, true});
          for (ExprPtr &a : e->args)
            inExpr(a);
        };
        forEachExprSlot(s, inExpr);
        if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate)
          found[s.buffer].sites.push_back(
              {loop, pos, &s.index, s.kind == Stmt::Kind::Store, false});
        for (Buffer *b : s.outputs)
          found[b].ok = false;
        for (Buffer *b : s.inputs)
          found[b].ok = false;
        work += 1;
        visit(s.body, s.kind == Stmt::Kind::For ? &s : loop);
      }
    };
    visit(fn.body, nullptr);
    for (const auto &b : fn.buffers) {
      Buffer *buffer = b.get();
      IterUses *uses = found.find(buffer);
      if (buffer->kind != Buffer::Kind::Scratch || viewed.count(buffer) ||
          !uses || !uses->ok || !oneElementPerIteration(uses->sites))
        continue;
      for (const IterSite &x : uses->sites)
        *x.index = loops::index(0);
      buffer->kind = Buffer::Kind::Local;
      buffer->shape.clear();
    }
  }

  /// Step 4's condition on the accesses of one buffer.
  static bool oneElementPerIteration(llvm::ArrayRef<IterSite> sites) {
    const Stmt *loop = sites.front().loop;
    if (!loop)
      return false;
    const IterSite *first = &sites.front();
    for (const IterSite &x : sites) {
      const Expr &index = **x.index;
      if (x.loop != loop || index.kind != Expr::Kind::LoopVar ||
          index.var != loop->var)
        return false;
      if (x.pos < first->pos)
        first = &x;
    }
    // The first statement that touches it stores it and does not read it;
    // some statement reads it (a local that is only set would make a C++
    // compiler warn).
    for (const IterSite &x : sites)
      if (x.pos == first->pos && !x.store)
        return false;
    if (llvm::none_of(sites, [](const IterSite &x) { return x.load; }))
      return false;
    return llvm::count_if(sites, [&](const IterSite &x) {
             return x.pos == first->pos;
           }) == 1;
  }

  /// Where an index of a buffer sits: `Load.args[0]` or a store's index.
  struct Site {
    ExprPtr *index;
    bool writes;
  };
  /// Per buffer: the one top-level statement that touches it (null: more,
  /// or a call or kernel uses it) and where.
  struct Uses {
    Stmt *owner = nullptr;
    llvm::SmallVector<Site, 2> sites;
  };

  /// Every access in `s` and the statements nested in it, as `collect`
  /// visits them; whether it holds a call or a kernel.
  void collectSites(Stmt &s, Stmt &top, bool &calls) {
    std::function<void(ExprPtr &)> inExpr = [&](ExprPtr &e) {
      if (e->kind == Expr::Kind::Load)
        addSite(e->buffer, top, {&e->args[0], false});
      for (ExprPtr &a : e->args)
        inExpr(a);
    };
    forEachExprSlot(s, inExpr);
    if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate)
      addSite(s.buffer, top, {&s.index, true});
    if (s.kind == Stmt::Kind::Call || s.kind == Stmt::Kind::KernelCall) {
      calls = true;
      for (Buffer *b : s.outputs)
        addSite(b, top, {nullptr, true});
      for (Buffer *b : s.inputs)
        addSite(b, top, {nullptr, false});
    }
    for (StmtPtr &c : s.body)
      collectSites(*c, top, calls);
  }

  void addSite(const Buffer *b, Stmt &top, Site site) {
    ++work;
    auto [u, inserted] = uses.insert(b);
    if (inserted)
      u.owner = &top;
    else if (u.owner != &top)
      u.owner = nullptr;
    if (!site.index)
      u.owner = nullptr;
    if (u.owner)
      u.sites.push_back(site);
  }

  BufferTable<Uses> uses{fn};
  /// The index slots of loads that a shrink took out of the function, and
  /// the expressions it took out (kept, so no slot dangles).
  llvm::DenseSet<const ExprPtr *> dead;
  std::vector<ExprPtr> removed;

  /// Shrinks each scratch buffer that one top-level loop alone touches,
  /// row by row, to one row; one walk of the function finds every access.
  void contract() {
    llvm::DenseSet<const Buffer *> viewed;
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        viewed.insert(b->base);
    llvm::DenseSet<const Stmt *> withCalls;
    for (StmtPtr &top : fn.body) {
      bool calls = false;
      collectSites(*top, *top, calls);
      if (calls)
        withCalls.insert(top.get());
    }
    for (const auto &b : fn.buffers) {
      Buffer *buffer = b.get();
      Uses *u = uses.find(buffer);
      if (buffer->kind != Buffer::Kind::Scratch || viewed.count(buffer) || !u ||
          !u->owner || u->owner->kind != Stmt::Kind::For)
        continue;
      Stmt &loop = *u->owner;
      // A buffer that is never read is left alone (a printer would warn
      // about a local that is only set).
      bool rows = !withCalls.count(&loop), read = false;
      for (const Site &x : u->sites) {
        if (dead.count(x.index))
          continue;
        read = read || !x.writes;
        rows = rows && isRowAccess(buffer, **x.index, loop.var, *loop.extent);
      }
      if (rows && read)
        shrink(buffer, loop, u->sites);
    }
  }

  /// Takes `e` out of the function: the loads in it are gone.
  void remove(ExprPtr e) {
    std::function<void(Expr &)> mark = [&](Expr &x) {
      if (x.kind == Expr::Kind::Load)
        dead.insert(&x.args[0]);
      for (ExprPtr &a : x.args)
        mark(*a);
    };
    mark(*e);
    removed.push_back(std::move(e));
  }

  /// The terms of a sum of `index` expressions, left to right, taken out
  /// of it (the additions themselves are removed).
  void takeTerms(ExprPtr e, llvm::SmallVectorImpl<ExprPtr> &out) {
    if (e->kind == Expr::Kind::Prim && e->op == PrimOp::Add &&
        e->type == ScalarType::Index) {
      takeTerms(std::move(e->args[0]), out);
      takeTerms(std::move(e->args[1]), out);
      removed.push_back(std::move(e));
      return;
    }
    out.push_back(std::move(e));
  }

  /// `%b[%i * S + r]` -> `%b[r]` at each of `sites` in `loop`, and %b one
  /// row. The terms of r move (not copied), so that the sites of other
  /// buffers inside them stay where they are.
  void shrink(Buffer *b, Stmt &loop, llvm::ArrayRef<Site> sites) {
    bool scalar = true;
    for (const Dim &d : llvm::ArrayRef<Dim>(b->shape).drop_front(1))
      scalar = scalar && d.isKnown() && d.getSize() == 1;
    for (const Site &x : sites) {
      if (dead.count(x.index))
        continue;
      ++work;
      ExprPtr &index = *x.index;
      if (scalar) {
        remove(std::move(index));
        index = loops::index(0);
        continue;
      }
      llvm::SmallVector<ExprPtr, 4> terms;
      takeTerms(std::move(index), terms);
      ExprPtr r;
      for (ExprPtr &t : terms) {
        if (usesVar(*t, loop.var)) {
          remove(std::move(t));
          continue;
        }
        r = r ? prim(PrimOp::Add, std::move(r), std::move(t)) : std::move(t);
      }
      index = r ? std::move(r) : loops::index(0);
    }
    b->shape.erase(b->shape.begin());
    if (scalar) {
      b->kind = Buffer::Kind::Local;
      b->shape.clear();
    }
  }
};

} // namespace

static uint64_t lastWork = 0;

uint64_t loops::mergeLoopsWork() { return lastWork; }

bool loops::mergeLoops(LoopModule &module, std::string &) {
  lastWork = 0;
  for (auto &fn : module.functions)
    Merger(*fn, lastWork).run();
  return true;
}
