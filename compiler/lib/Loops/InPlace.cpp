//===- InPlace.cpp - A row buffer kept in the output row it ends in -------===//
//
// The loop pass `inplace`: in a top-level loop over rows, a scratch row %t
// whose last pass stores the output's row element by element,
//
//   for %i < R {
//     W:  for %j < E { ...; %t[%j] = V }        (sets the whole row)
//         ...                                   (reads %t: a sum)
//     L:  for %k < E { ...; %out[ROW * E + %k] = f(%t[%k]) }
//   }
//
// lives in that output row instead: each access %t[e] becomes
// %out[ROW * E + e], and L rewrites the row in place. ROW is the row of
// the iteration: `%i`, or after `jam` one of its F rows (`%i * F + r`) or
// a row after the groups (`R - R % F + %i`). K3's gradient so stores its
// exponentials into d_x, sums them there and scales them there, as the
// hand-written code does, where it stored them into a scratch row and
// copied that row, scaled, into d_x: the output's cache misses now come
// while the exponentials are computed, and the scaling reads a row in L1.
// K5's gradient (jammed, `d_d` summed in the chunks of its sum by `sink`)
// keeps each row's `d_d` in d_x's row. It applies when
//
//  1. L is a loop over E whose body is stores of locals (a value's fused
//     parts) and last a store into an output (not viewed) at exactly
//     `ROW * E + %k`, which read %t only at `%k` and not the output; no
//     statement after L in the row touches %t;
//  2. %t is scratch of E elements and the output's element type, not
//     viewed, touched in the row loop by nothing but loads and stores (no
//     call or kernel operand), and not small enough for the stack (`plan`
//     would put it there, and the row loop could then get threads from
//     `parallel`, which the output's chunked indices would stop); any
//     other top-level statement that touches %t is a loop that sets it
//     before it reads it, as W does below (the rows after `jam`'s groups
//     reuse the first row's buffers), and keeps it;
//  3. the statements of the row loop that touch the output are such L's,
//     each of its own row: ROW is `%i` (one L), or `%i * F + r` for one
//     constant F and distinct constants 0 <= r < F, or `B + %i` with B
//     free of %i (one L). So no two iterations and no two L's share a
//     row. Other top-level statements run wholly before or after the
//     loop, and L stores every element of its row as before;
//  4. the first statement of the row that touches %t is W: a loop over E
//     of stores only, which stores %t at `%j` and does not read it; or
//     the chunks of a sum that `sink` filled, `for %c < E / n`, whose
//     lane loops `for %l < n` that touch %t first store it at
//     `%c * n + %l` (not reading it) and touch it nowhere else, followed
//     by the next statement that touches %t, the rest `for %r < E % n`,
//     which does the same at `E - E % n + %r`. So every iteration sets
//     its row before it reads it, and no value flows from one row to the
//     next through %t.
//
// Each element of the output row then holds what %t[e] held at every
// point of the iteration (nothing else writes that row, and L reads
// element k just before it writes it), and L stores what it stored
// before: the same bits.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>

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

/// The row of one iteration as `%i * F + r` (or `B + %i`): what
/// condition 3 compares.
struct RowForm {
  int64_t factor = 1;
  int64_t offset = 0;
  const Expr *base = nullptr; ///< B of `B + %i`, else null
};

std::optional<int64_t> constIndex(const Expr &e) {
  if (e.kind == Expr::Kind::Const && e.type == ScalarType::Index)
    return int64_t(e.value);
  return std::nullopt;
}

bool isVar(const Expr &e, unsigned var) {
  return e.kind == Expr::Kind::LoopVar && e.var == var;
}

/// `row` as `%i`, `%i * F`, `%i * F + r` or `B + %i` (%i = var), if it is.
std::optional<RowForm> rowForm(const Expr &row, unsigned var) {
  if (isVar(row, var))
    return RowForm{};
  auto scaled = [&](const Expr &e) -> std::optional<int64_t> {
    if (e.kind != Expr::Kind::Prim || e.op != PrimOp::Mul ||
        !isVar(*e.args[0], var))
      return std::nullopt;
    std::optional<int64_t> f = constIndex(*e.args[1]);
    return f && *f > 0 ? f : std::nullopt;
  };
  if (std::optional<int64_t> f = scaled(row))
    return RowForm{*f, 0, nullptr};
  if (row.kind != Expr::Kind::Prim || row.op != PrimOp::Add)
    return std::nullopt;
  if (std::optional<int64_t> f = scaled(*row.args[0])) {
    std::optional<int64_t> r = constIndex(*row.args[1]);
    if (r && *r >= 0 && *r < *f)
      return RowForm{*f, *r, nullptr};
    return std::nullopt;
  }
  if (isVar(*row.args[1], var) && !usesVar(*row.args[0], var))
    return RowForm{1, 0, row.args[0].get()};
  return std::nullopt;
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
      llvm::SmallVector<Candidate, 4> found;
      for (size_t l = 0; l < rows.body.size(); ++l)
        if (std::optional<Candidate> c = rowFor(r, l))
          found.push_back(std::move(*c));
      // Condition 3, for each output: decided before any rewrite, which
      // adds loads of it.
      llvm::SmallVector<const Candidate *, 4> chosen;
      for (const Candidate &c : found)
        if (ownRows(rows, c.out, found))
          chosen.push_back(&c);
      for (const Candidate *c : chosen)
        rewrite(rows, *c);
      for (const Candidate *c : chosen)
        dropIfUnused(c->t);
    }
  }

private:
  LoopFunction &fn;
  llvm::DenseSet<const Buffer *> viewed;

  /// A pass L of a row loop, its scratch row %t, the output and the row.
  struct Candidate {
    size_t l;
    Buffer *t;
    Buffer *out;
    ExprPtr row;
  };

  /// `ROW * E + e`, the output element of the row that e of %t becomes.
  static ExprPtr rowIndex(const Expr &row, const Expr &extent, ExprPtr e) {
    return prim(PrimOp::Add, prim(PrimOp::Mul, row.clone(), extent.clone()),
                std::move(e));
  }

  /// ROW of an index `ROW * E + %k` (ROW uses the row variable, not %k).
  static const Expr *rowOf(const Expr &index, const Expr &extent, unsigned k,
                           unsigned rowVar) {
    if (index.kind != Expr::Kind::Prim || index.op != PrimOp::Add ||
        !isVar(*index.args[1], k))
      return nullptr;
    const Expr &mul = *index.args[0];
    if (mul.kind != Expr::Kind::Prim || mul.op != PrimOp::Mul ||
        !sameExpr(*mul.args[1], extent) || usesVar(*mul.args[0], k) ||
        !usesVar(*mul.args[0], rowVar))
      return nullptr;
    return mul.args[0].get();
  }

  /// Condition 2's other top-level statements: none but loops that set
  /// %t before they read it.
  bool othersSetFirst(size_t r, const Buffer *t, const Expr &extent) const {
    for (size_t i = 0; i < fn.body.size(); ++i) {
      const Stmt &s = *fn.body[i];
      if (i == r || !touches(s, t))
        continue;
      if (s.kind != Stmt::Kind::For || !onlyLoadsAndStores(s, t))
        return false;
      size_t w = 0;
      while (w < s.body.size() && !touches(*s.body[w], t))
        ++w;
      if (w == s.body.size() || !setsRow(s.body, w, t, extent))
        return false;
    }
    return true;
  }

  /// The pass L = statement l of the row loop fn.body[r] with the buffer
  /// %t that it may keep in its output row (conditions 1, 2 and 4), or
  /// none.
  std::optional<Candidate> rowFor(size_t r, size_t l) {
    const Stmt &rows = *fn.body[r];
    const Stmt &last = *rows.body[l];
    if (last.kind != Stmt::Kind::For || last.body.empty())
      return std::nullopt;
    // L's body: the fused locals of the value, then the store.
    const Stmt &store = *last.body.back();
    if (store.kind != Stmt::Kind::Store)
      return std::nullopt;
    Buffer *out = store.buffer;
    if (out->kind != Buffer::Kind::Output || viewed.count(out))
      return std::nullopt;
    for (const StmtPtr &s : last.body)
      if (s->kind != Stmt::Kind::Store || reads(*s->value, out) ||
          reads(*s->index, out) ||
          (s.get() != &store && s->buffer->kind != Buffer::Kind::Local))
        return std::nullopt;
    const Expr &extent = *last.extent;
    const Expr *row = rowOf(*store.index, extent, last.var, rows.var);
    if (!row)
      return std::nullopt;
    ExprPtr k = loopVar(last.var);
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
      return std::nullopt;
    for (const StmtPtr &s : last.body)
      if (!loadsOnlyAt(*s->value, t, *k) || reads(*s->index, t))
        return std::nullopt;
    for (size_t i = l + 1; i < rows.body.size(); ++i)
      if (touches(*rows.body[i], t))
        return std::nullopt;
    if (!onlyLoadsAndStores(rows, t) || !othersSetFirst(r, t, extent))
      return std::nullopt;
    // W: the first statement of the row that touches %t.
    size_t w = 0;
    while (w < l && !touches(*rows.body[w], t))
      ++w;
    if (w == l || !setsRow(rows.body, w, t, extent))
      return std::nullopt;
    return Candidate{l, t, out, row->clone()};
  }

  /// Condition 3 for `out`: the statements of the row loop that touch it
  /// are candidates, each of its own row.
  static bool ownRows(const Stmt &rows, const Buffer *out,
                      llvm::ArrayRef<Candidate> found) {
    llvm::SmallVector<RowForm, 4> forms;
    for (size_t i = 0; i < rows.body.size(); ++i) {
      if (!touches(*rows.body[i], out))
        continue;
      const Candidate *c = nullptr;
      for (const Candidate &f : found)
        if (f.l == i && f.out == out)
          c = &f;
      if (!c)
        return false;
      std::optional<RowForm> form = rowForm(*c->row, rows.var);
      if (!form)
        return false;
      forms.push_back(*form);
    }
    if (forms.size() == 1)
      return true;
    for (size_t a = 0; a < forms.size(); ++a) {
      if (forms[a].base || forms[a].factor != forms[0].factor)
        return false;
      for (size_t b = 0; b < a; ++b)
        if (forms[a].offset == forms[b].offset)
          return false;
    }
    return true;
  }

  /// Whether the first statement of `loop`'s body that touches `t` stores
  /// it at `at` without reading it, and every access to `t` in the body
  /// is at `at`, in a statement that holds no other.
  static bool storesFirstAt(const Stmt &loop, const Buffer *t, const Expr &at) {
    bool first = true;
    for (const StmtPtr &s : loop.body) {
      if (!touches(*s, t))
        continue;
      if (s->kind == Stmt::Kind::For)
        return false;
      if (first && (s->kind != Stmt::Kind::Store || s->buffer != t ||
                    reads(*s->value, t)))
        return false;
      first = false;
      if (!loadsOnlyAt(*s->value, t, at) || reads(*s->index, t) ||
          (s->buffer == t && !sameExpr(*s->index, at)))
        return false;
    }
    return !first;
  }

  /// Condition 4: block[w] (the first statement to touch `t`) sets the
  /// whole row before anything reads it: a loop over `extent` of stores
  /// only, which stores `t` at its own variable and does not read it; or
  /// the chunks of a sum and its rest, each of whose lane loops that
  /// touch `t` stores it first at its element.
  static bool setsRow(const Block &block, size_t w, const Buffer *t,
                      const Expr &extent) {
    const Stmt &loop = *block[w];
    if (loop.kind != Stmt::Kind::For)
      return false;
    if (sameExpr(*loop.extent, extent))
      return storesOnlyAt(loop, t);
    for (int64_t n : {ir::reductionLanes, ir::reductionLanesF32})
      if (sameExpr(*loop.extent, *prim(PrimOp::Div, extent.clone(), index(n))))
        return chunksSetRow(block, w, t, extent, n);
    return false;
  }

  /// The loop over the row (condition 4's first form).
  static bool storesOnlyAt(const Stmt &w, const Buffer *t) {
    bool stores = false;
    for (const StmtPtr &s : w.body) {
      if (s->kind != Stmt::Kind::Store || reads(*s->value, t) ||
          reads(*s->index, t))
        return false;
      if (s->buffer != t)
        continue;
      if (!isVar(*s->index, w.var))
        return false;
      stores = true;
    }
    return stores;
  }

  /// The chunks `for %c < E / n` at block[w] and the rest after them
  /// (condition 4's second form).
  static bool chunksSetRow(const Block &block, size_t w, const Buffer *t,
                           const Expr &extent, int64_t n) {
    const Stmt &chunks = *block[w];
    bool any = false;
    for (const StmtPtr &s : chunks.body) {
      if (!touches(*s, t))
        continue;
      if (!isLaneLoop(*s) || !sameExpr(*s->extent, *index(n)))
        return false;
      ExprPtr at =
          prim(PrimOp::Add, prim(PrimOp::Mul, loopVar(chunks.var), index(n)),
               loopVar(s->var));
      if (!storesFirstAt(*s, t, *at))
        return false;
      any = true;
    }
    size_t v = w + 1;
    while (v < block.size() && !touches(*block[v], t))
      ++v;
    if (!any || v == block.size())
      return false;
    const Stmt &rest = *block[v];
    ExprPtr remainder = prim(PrimOp::Rem, extent.clone(), index(n));
    if (rest.kind != Stmt::Kind::For || !sameExpr(*rest.extent, *remainder))
      return false;
    ExprPtr at =
        prim(PrimOp::Add, prim(PrimOp::Sub, extent.clone(), remainder->clone()),
             loopVar(rest.var));
    return storesFirstAt(rest, t, *at);
  }

  /// Every access to `t` in `s` becomes one of the output row.
  void retarget(Stmt &s, const Expr &row, const Expr &extent, Buffer *t,
                Buffer *out) {
    std::function<void(ExprPtr &)> visit = [&](ExprPtr &e) {
      for (ExprPtr &a : e->args)
        visit(a);
      if (e->kind == Expr::Kind::Load && e->buffer == t) {
        e->buffer = out;
        e->args[0] = rowIndex(row, extent, std::move(e->args[0]));
      }
    };
    forEachExprSlot(s, visit);
    if (s.buffer == t) {
      s.buffer = out;
      s.index = rowIndex(row, extent, std::move(s.index));
    }
    for (StmtPtr &c : s.body)
      retarget(*c, row, extent, t, out);
  }

  void rewrite(Stmt &rows, const Candidate &c) {
    ExprPtr extent = rows.body[c.l]->extent->clone();
    for (StmtPtr &s : rows.body)
      retarget(*s, *c.row, *extent, c.t, c.out);
  }

  /// Removes `t` when no statement names it any more (the rows after
  /// `jam`'s groups may keep it).
  void dropIfUnused(Buffer *t) {
    for (const StmtPtr &s : fn.body)
      if (touches(*s, t))
        return;
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
