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
//  2. A scratch buffer that one top-level loop alone touches, row by row,
//     becomes one row (`%b[%i * S + r]` -> `%b[r]`, shape without its
//     first dimension; a local when the row is one element).
//
// Only statements move and buffers shrink: no arithmetic changes, so the
// result is bit for bit the unmerged one.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <functional>

using namespace gradc;
using namespace gradc::loops;

namespace {

bool sameExpr(const Expr &a, const Expr &b) {
  if (a.kind != b.kind || a.type != b.type || a.args.size() != b.args.size())
    return false;
  switch (a.kind) {
  case Expr::Kind::Const:
    if (!(a.value == b.value || (std::isnan(a.value) && std::isnan(b.value))))
      return false;
    break;
  case Expr::Kind::Size:
    if (a.name != b.name)
      return false;
    break;
  case Expr::Kind::LoopVar:
    if (a.var != b.var)
      return false;
    break;
  case Expr::Kind::Load:
    if (a.buffer != b.buffer)
      return false;
    break;
  case Expr::Kind::Prim:
    if (a.op != b.op)
      return false;
    break;
  case Expr::Kind::Intrinsic:
    if (a.fn != b.fn)
      return false;
    break;
  case Expr::Kind::Select:
  case Expr::Kind::Cast:
    break;
  }
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!sameExpr(*a.args[i], *b.args[i]))
      return false;
  return true;
}

bool usesVar(const Expr &e, unsigned var) {
  if (e.kind == Expr::Kind::LoopVar && e.var == var)
    return true;
  for (const ExprPtr &a : e.args)
    if (usesVar(*a, var))
      return true;
  return false;
}

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
const Buffer *rootOf(const Buffer *b) {
  while (b->kind == Buffer::Kind::Alias && b->base)
    b = b->base;
  return b;
}

bool zeroOffsets(const Buffer *b) {
  for (; b->kind == Buffer::Kind::Alias && b->base; b = b->base)
    if (!b->offset || b->offset->kind != Expr::Kind::Const ||
        b->offset->value != 0)
      return false;
  return true;
}

/// Whether `index`, an access to `b` in a loop `for %var < extent`, is
/// row by row: `%var * S + r` with S the row size of `b` and r free of
/// %var; `rest` gets the terms of r.
bool isRowAccess(const Buffer *b, const Expr &idx, unsigned var,
                 const Expr &extent,
                 llvm::SmallVectorImpl<const Expr *> *rest = nullptr) {
  if (b->shape.empty() || !zeroOffsets(b))
    return false;
  ExprPtr rows = extentOf(llvm::ArrayRef<Dim>(b->shape).take_front(1));
  if (!sameExpr(*rows, extent))
    return false;
  llvm::SmallVector<const Expr *, 4> terms;
  addTerms(idx, terms);
  const Expr *row = nullptr, *stride = nullptr;
  for (const Expr *t : terms) {
    if (!usesVar(*t, var)) {
      if (rest)
        rest->push_back(t);
      continue;
    }
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

void collectLoads(const Expr &e, std::vector<Access> &out) {
  if (e.kind == Expr::Kind::Load)
    out.push_back({e.buffer, e.args[0].get(), false});
  for (const ExprPtr &a : e.args)
    collectLoads(*a, out);
}

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
  for (ExprPtr *e : {&s.extent, &s.index, &s.value, &s.cond})
    if (*e)
      renameVar(**e, from, to);
  for (ExprPtr &e : s.operands)
    renameVar(*e, from, to);
  for (auto &[name, e] : s.sizeArgs)
    renameVar(*e, from, to);
  for (StmtPtr &c : s.body)
    renameVar(*c, from, to);
}

/// Whether the top-level loops `a` and `b` (adjacent, `a` first) can be
/// one loop.
bool canMerge(const Stmt &a, const Stmt &b) {
  if (a.kind != Stmt::Kind::For || b.kind != Stmt::Kind::For ||
      !sameExpr(*a.extent, *b.extent))
    return false;
  std::vector<Access> inA, inB;
  bool checksA = false, checksB = false, callsA = false, callsB = false;
  collectAccesses(a, inA, checksA, callsA);
  collectAccesses(b, inB, checksB, callsB);
  if (callsA || callsB || (checksA && checksB))
    return false;
  // Per buffer touched by both: whether either writes it.
  llvm::DenseMap<const Buffer *, bool> touchedA, written;
  for (const Access &x : inA)
    touchedA[rootOf(x.buffer)] |= x.writes;
  llvm::DenseSet<const Buffer *> shared;
  for (const Access &x : inB) {
    auto it = touchedA.find(rootOf(x.buffer));
    if (it == touchedA.end())
      continue;
    shared.insert(it->first);
    written[it->first] |= it->second || x.writes;
  }
  auto rowByRow = [&](const std::vector<Access> &accesses, const Stmt &loop) {
    for (const Access &x : accesses) {
      const Buffer *root = rootOf(x.buffer);
      if (!shared.count(root) || !written.lookup(root))
        continue;
      if (root->kind == Buffer::Kind::Local ||
          root->kind == Buffer::Kind::Stack ||
          !isRowAccess(x.buffer, *x.index, loop.var, *loop.extent))
        return false;
    }
    return true;
  };
  return rowByRow(inA, a) && rowByRow(inB, b);
}

class Merger {
public:
  explicit Merger(LoopFunction &fn) : fn(fn) {}

  void run() {
    Block merged;
    for (StmtPtr &s : fn.body) {
      if (!merged.empty() && canMerge(*merged.back(), *s)) {
        Stmt &into = *merged.back();
        renameVar(*s, s->var, into.var);
        for (StmtPtr &c : s->body)
          into.body.push_back(std::move(c));
        continue;
      }
      merged.push_back(std::move(s));
    }
    fn.body = std::move(merged);
    contract();
  }

private:
  LoopFunction &fn;

  /// Shrinks each scratch buffer that one top-level loop alone touches,
  /// row by row, to one row.
  void contract() {
    // The one top-level statement that touches each buffer (null: more).
    llvm::DenseMap<const Buffer *, Stmt *> owner;
    llvm::DenseSet<const Buffer *> viewed;
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        viewed.insert(b->base);
    for (StmtPtr &top : fn.body) {
      std::vector<Access> accesses;
      bool checks = false, calls = false;
      collectAccesses(*top, accesses, checks, calls);
      for (const Access &x : accesses) {
        auto [it, inserted] = owner.try_emplace(x.buffer, top.get());
        if ((!inserted && it->second != top.get()) || !x.index)
          it->second = nullptr;
      }
    }
    for (const auto &b : fn.buffers) {
      Buffer *buffer = b.get();
      auto it = owner.find(buffer);
      if (buffer->kind != Buffer::Kind::Scratch || viewed.count(buffer) ||
          it == owner.end() || !it->second ||
          it->second->kind != Stmt::Kind::For)
        continue;
      Stmt &loop = *it->second;
      std::vector<Access> accesses;
      bool checks = false, calls = false;
      collectAccesses(loop, accesses, checks, calls);
      // A buffer that is never read is left alone (a printer would warn
      // about a local that is only set).
      bool rows = !calls, read = false;
      for (const Access &x : accesses)
        if (x.buffer == buffer) {
          read = read || !x.writes;
          rows = rows && x.index &&
                 isRowAccess(buffer, *x.index, loop.var, *loop.extent);
        }
      rows = rows && read;
      if (rows)
        shrink(buffer, loop);
    }
  }

  /// `%b[%i * S + r]` -> `%b[r]` in `loop`, and %b one row.
  void shrink(Buffer *b, Stmt &loop) {
    bool scalar = true;
    for (const Dim &d : llvm::ArrayRef<Dim>(b->shape).drop_front(1))
      scalar = scalar && d.isKnown() && d.getSize() == 1;
    auto reindex = [&](ExprPtr &index) {
      if (scalar) {
        index = loops::index(0);
        return;
      }
      llvm::SmallVector<const Expr *, 4> rest;
      isRowAccess(b, *index, loop.var, *loop.extent, &rest);
      ExprPtr r;
      for (const Expr *t : rest)
        r = r ? prim(PrimOp::Add, std::move(r), t->clone()) : t->clone();
      index = r ? std::move(r) : loops::index(0);
    };
    std::function<void(ExprPtr &)> inExpr = [&](ExprPtr &e) {
      for (ExprPtr &a : e->args)
        inExpr(a);
      if (e->kind == Expr::Kind::Load && e->buffer == b)
        reindex(e->args[0]);
    };
    std::function<void(Stmt &)> inStmt = [&](Stmt &s) {
      for (ExprPtr *e : {&s.extent, &s.index, &s.value, &s.cond})
        if (*e)
          inExpr(*e);
      if ((s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate) &&
          s.buffer == b)
        reindex(s.index);
      for (StmtPtr &c : s.body)
        inStmt(*c);
    };
    inStmt(loop);
    b->shape.erase(b->shape.begin());
    if (scalar) {
      b->kind = Buffer::Kind::Local;
      b->shape.clear();
    }
  }
};

} // namespace

bool loops::mergeLoops(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    Merger(*fn).run();
  return true;
}
