//===- JamRows.cpp - Four or two rows at a time: sums and column sums -----===//
//
// The loop pass `jam` (unroll and jam by F, 4 or 2): once `merge` and
// `hoist` made a gradient one loop over the rows (K5, layer norm), each
// row runs its sums one after the other (each 8-lane f64 sum of a row of
// C elements is C / 8 dependent additions per lane), and its column sums
// (dgamma, dbeta) load and store each f64 element once per row. Working
// on F rows at once, each with its own lanes, gives the core F times the
// independent work per element, and the column sums load and store each
// element once per F rows; no sum changes: each row still adds its own
// elements in its own order. A top-level loop `for %i < R { S_1; ...;
// S_n }` becomes
//
//   for %k < R / F { S_1[Fk] ⋈ ... ⋈ S_1[Fk+F-1]; ...;
//                    S_n[Fk] ⋈ ... ⋈ S_n[Fk+F-1] }
//   for %r < R % F { S_1[R - R % F + r]; ...; S_n[R - R % F + r] }
//
// where S[e] is S with %i replaced by e and the private buffers of every
// row but the first renamed, and A ⋈ B is one loop `for %j < E { body_A;
// body_B }` when A is a loop over E (free of %i) that holds the chunks of
// a sum (a lane loop in its body: the rows' chains in one loop) or adds
// to a column sum (below: the column read and written once for all F
// rows), else A; B (an elementwise loop gains nothing from more rows and
// would give a C++ compiler more pointers to prove apart). F is 4 when S
// has at most half of jamMaxStatements statements and R is not a constant
// below 4, else 2 (`jamFactor`; K5's gradient, 4 against 2: -3% C++, -6%
// LLVM). F rows pay only while their passes stay in the cache: when the
// sums add in their own type (`--accumulate=f32`), the groups run only
// while the bytes the F rows touch (`rowsFootprint`) are at most
// jamCacheBytes, a test of the sizes (at run time when they are names:
// the groups' loop runs `select(bytes <= 65536, R / F, 0)` times and the
// rows after them, all of them when the test fails, run one at a time);
// sums that widen (`lanes[l] += f64(x)`, the default order) are bound by
// their conversions, and jam at any width. The loop is jammed when
//
//  1. S has no check, call or kernel call, and no i32 division;
//  2. every buffer that S writes (through views, by root) is
//     a. *private*: a local, stack or scratch buffer (of a tensor shape,
//        with no view) that no statement outside the loop touches, and
//        that each iteration sets before it reads it: a local is read (or
//        added to) only after a definition in the same or an enclosing
//        block of S; an array is first touched by a top-level loop
//        `for %j < N` of S, N its length, whose body stores it at `%j`
//        (directly in the body) before any other access, all of them at
//        `%j`. Every row but the first gets its own copy;
//     b. a *column sum*: S only adds to it (accumulates, never loads or
//        stores it), in one top-level statement of S, and when that is a
//        loop that is jammed, each accumulation is at exactly that loop's
//        variable `%j`. In the jammed loop, element j gets row Fk's terms,
//        then row Fk+1's, ..., in the order in which row Fk's all came
//        before row Fk+1's: bit for bit the sums of `for %i < R`;
//     c. a *row* of its own per iteration: every access in S is at `%i`,
//        or at `%i * W + %j` with %j a loop of S over W (one W for the
//        buffer), so two rows touch disjoint elements;
//  3. at least one buffer is a column sum (a loop without one is
//     independent across rows, and the `parallel` pass gives it threads
//     instead: the indices of a jammed loop are no longer of one layout);
//  4. S holds a lane loop (`loops::isLaneLoop`) with no math function in
//     it whose lanes are private: a sum of the row's own, a chain of cheap
//     adds (a sum of exponentials waits on exp, not on the add; the lanes
//     of a sum over every axis live across the chunks of `for %c < N / 8`
//     and are a column sum there), and S has at most jamMaxStatements
//     statements (the loop's code grows F-fold).
//
// Then the reads and writes of the rows touch disjoint memory (renamed
// privates, disjoint rows) except the column sums, whose order per
// element is kept: interp, loops and both backends agree bit for bit.
// In a jammed loop where each row adds once to a column sum,
// `%acc[%j] += a; ...; %acc[%j] += b` becomes `%acc.col = %acc[%j] + a;
// ...; %acc[%j] = %acc.col + b` (the same additions; with four rows the
// local carries the element through the two between), and a jammed loop
// that touches each buffer it writes only at %j is marked `independent`
// (the C++ printer's GRADC_IVDEP: GCC checks at most 10 pairs of pointers
// for overlap before it vectorises, and K5's column loop has 18).
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// At most this many statements (nested ones included) in a jammed loop.
constexpr unsigned jamMaxStatements = 256;

/// At most this many bytes touched by the F rows of a jammed iteration
/// whose sums add in their own type (`Jammer::rowsFootprint`): K5's
/// gradient with `--accumulate=f32` (eight arrays of C floats a row, five
/// of them the row's own) gains from four rows at C = 512 (48 KB: C++
/// -9%, LLVM the same) and loses at C = 1,024 (95 KB: one row at a time
/// is 7% (C++) and 17% (LLVM) faster; the four rows' passes evict one
/// another's rows from the 48 KB L1 cache).
constexpr int64_t jamCacheBytes = 64 * 1024;

/// Whether every view from `b` to its root starts at element 0.
bool zeroOffsets(const Buffer *b) {
  for (; b->kind == Buffer::Kind::Alias && b->base; b = b->base)
    if (!b->offset || !isIndexConst(*b->offset, 0))
      return false;
  return true;
}

/// `e` as an index constant, if it is one.
std::optional<int64_t> constIndex(const Expr &e) {
  if (e.kind == Expr::Kind::Const && e.type == ScalarType::Index)
    return int64_t(e.value);
  return std::nullopt;
}

/// The value of index arithmetic of constants (`1024 / 16 * 16`), if `e`
/// is that.
std::optional<int64_t> foldIndex(const Expr &e) {
  if (std::optional<int64_t> c = constIndex(e))
    return c;
  if (e.kind != Expr::Kind::Prim || e.type != ScalarType::Index ||
      e.args.size() != 2)
    return std::nullopt;
  std::optional<int64_t> a = foldIndex(*e.args[0]), b = foldIndex(*e.args[1]);
  if (!a || !b)
    return std::nullopt;
  switch (e.op) {
  case PrimOp::Add:
    return *a + *b;
  case PrimOp::Sub:
    return *a - *b;
  case PrimOp::Mul:
    return *a * *b;
  case PrimOp::Div:
    return *b ? std::optional<int64_t>(*a / *b) : std::nullopt;
  case PrimOp::Rem:
    return *b ? std::optional<int64_t>(*a % *b) : std::nullopt;
  default:
    return std::nullopt;
  }
}

/// Whether `e` uses any loop variable.
bool usesLoopVar(const Expr &e) {
  if (e.kind == Expr::Kind::LoopVar)
    return true;
  return llvm::any_of(e.args, [](const ExprPtr &a) { return usesLoopVar(*a); });
}

/// One access of a buffer in the loop: its index, the statement (for a
/// store or an accumulation) or null (a load), and the loops around it
/// inside the jammed loop, innermost last.
struct Access {
  Buffer *buffer; ///< as written (a view or the root)
  const Expr *index;
  const Stmt *write;
  size_t top; ///< which top-level statement of the loop holds it
  llvm::SmallVector<const Stmt *, 4> loops;
};

/// Copies statements with the row variable replaced by an expression,
/// fresh loop variables, and some buffers renamed.
class Copier {
public:
  Copier(LoopFunction &fn, unsigned rowVar, const Expr &row)
      : fn(fn), rowVar(rowVar), row(row) {}

  llvm::DenseMap<unsigned, unsigned> vars;
  llvm::DenseMap<const Buffer *, Buffer *> buffers;

  ExprPtr expr(const Expr &e) {
    if (e.kind == Expr::Kind::LoopVar) {
      if (e.var == rowVar)
        return row.clone();
      auto it = vars.find(e.var);
      return loopVar(it == vars.end() ? e.var : it->second);
    }
    auto c = std::make_unique<Expr>(e.kind, e.type);
    c->value = e.value;
    c->name = e.name;
    c->var = e.var;
    c->buffer = buffer(e.buffer);
    c->op = e.op;
    c->fn = e.fn;
    for (const ExprPtr &a : e.args)
      c->args.push_back(expr(*a));
    return c;
  }

  StmtPtr stmt(const Stmt &s) {
    auto c = std::make_unique<Stmt>(s.kind);
    c->origin = s.origin;
    if (s.kind == Stmt::Kind::For) {
      if (!vars.count(s.var))
        vars[s.var] = fn.numVars++;
      c->var = vars[s.var];
      c->extent = expr(*s.extent);
      for (const StmtPtr &b : s.body)
        c->body.push_back(stmt(*b));
    }
    c->buffer = buffer(s.buffer);
    c->index = s.index ? expr(*s.index) : nullptr;
    c->value = s.value ? expr(*s.value) : nullptr;
    c->combiner = s.combiner;
    return c;
  }

private:
  LoopFunction &fn;
  unsigned rowVar;
  const Expr &row;

  Buffer *buffer(Buffer *b) {
    if (!b)
      return nullptr;
    auto it = buffers.find(b);
    return it == buffers.end() ? b : it->second;
  }
};

class Jammer {
public:
  explicit Jammer(LoopFunction &fn) : fn(fn) {}

  void run() {
    // Which top-level statements touch each buffer (by root), and which
    // buffers have views.
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        viewed.insert(b->base->root());
    for (const StmtPtr &top : fn.body)
      walk(*top, [&](Buffer *b) {
        User &u = users[b->root()];
        u.many |= u.top && u.top != top.get();
        u.top = top.get();
      });
    for (size_t t = 0; t < fn.body.size(); ++t) {
      Stmt &loop = *fn.body[t];
      if (loop.kind != Stmt::Kind::For || loop.parallel || !jammable(loop))
        continue;
      std::vector<StmtPtr> jammed = jam(loop);
      fn.body.erase(fn.body.begin() + t);
      fn.body.insert(fn.body.begin() + t,
                     std::make_move_iterator(jammed.begin()),
                     std::make_move_iterator(jammed.end()));
      t += jammed.size() - 1;
    }
  }

private:
  LoopFunction &fn;
  llvm::DenseSet<const Buffer *> viewed;
  /// Per buffer (by root): the top-level statement that touches it, and
  /// whether another one does too. Statements keep their address when a
  /// jam before them replaces a loop, so this stays true as `run` goes
  /// (the buffers of a jammed loop are not asked about again).
  struct User {
    const Stmt *top = nullptr;
    bool many = false;
  };
  BufferTable<User> users{fn};

  // Analysis of the loop being looked at.
  /// Rows per iteration of the jammed loop (`jamFactor`).
  int64_t factor = 2;
  llvm::SmallVector<Buffer *, 8> privates;
  llvm::DenseMap<const Buffer *, size_t> columnSums; // -> its statement
  llvm::SmallVector<Buffer *, 4> columnOrder;        // in order of access
  /// The bytes that the F rows of an iteration touch when that is known
  /// only at run time (`rowsFootprint`), else null.
  ExprPtr footprint;
  /// Whether a lane loop adds its values in a wider type (`lanes[l] +=
  /// f64(x[...])`, the default order of f32 sums).
  bool widens = false;

  /// Calls f on every buffer a statement (nested ones included) names.
  static void walk(const Stmt &s, llvm::function_ref<void(Buffer *)> f) {
    walkExprs(s, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Load)
        f(e.buffer);
    });
    if (s.buffer)
      f(s.buffer);
    for (Buffer *b : s.outputs)
      f(b);
    for (Buffer *b : s.inputs)
      f(b);
    for (const StmtPtr &b : s.body)
      walk(*b, f);
  }

  static bool integerDivision(const Expr &e) {
    if (e.kind == Expr::Kind::Prim &&
        (e.op == PrimOp::Div || e.op == PrimOp::Rem) &&
        e.type == ScalarType::I32)
      return true;
    for (const ExprPtr &a : e.args)
      if (integerDivision(*a))
        return true;
    return false;
  }

  /// Collects the accesses of the loop's body; false if a statement kind
  /// or an expression rules the loop out (condition 1).
  bool collect(const Stmt &loop, std::vector<Access> &accesses,
               unsigned &statements,
               llvm::DenseSet<const Buffer *> &cheapLanes) {
    llvm::SmallVector<const Stmt *, 4> loops;
    size_t top = 0;
    bool ok = true;
    std::function<void(const Stmt &)> visit = [&](const Stmt &s) {
      ++statements;
      if (s.kind == Stmt::Kind::Check || s.kind == Stmt::Kind::Call ||
          s.kind == Stmt::Kind::KernelCall) {
        ok = false;
        return;
      }
      walkExprs(s, [&](const Expr &e) {
        if (e.kind == Expr::Kind::Load)
          accesses.push_back({e.buffer, e.args[0].get(), nullptr, top, loops});
        ok &= !integerDivision(e);
      });
      if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate)
        accesses.push_back({s.buffer, s.index.get(), &s, top, loops});
      if (s.kind != Stmt::Kind::For)
        return;
      if (isLaneLoop(s)) {
        bool math = false;
        for (const StmtPtr &b : s.body)
          walkExprs(*b, [&](const Expr &e) {
            math |= e.kind == Expr::Kind::Intrinsic;
          });
        for (const StmtPtr &b : s.body) {
          if (!math && b->buffer && b->buffer->kind == Buffer::Kind::Stack)
            cheapLanes.insert(b->buffer);
          widens |= b->kind == Stmt::Kind::Accumulate && b->value &&
                    b->value->kind == Expr::Kind::Cast;
        }
      }
      loops.push_back(&s);
      for (const StmtPtr &b : s.body)
        visit(*b);
      loops.pop_back();
    };
    for (; top < loop.body.size(); ++top)
      visit(*loop.body[top]);
    return ok;
  }

  /// Whether a local of the loop is read (or added to) only after a
  /// definition in the same or an enclosing block of the loop's body.
  static bool definedBeforeRead(const Block &body, const Buffer *local) {
    bool ok = true;
    std::function<void(const Block &, bool)> visit = [&](const Block &block,
                                                         bool defined) {
      for (const StmtPtr &s : block) {
        walkExprs(*s, [&](const Expr &e) {
          ok &= defined || e.kind != Expr::Kind::Load || e.buffer != local;
        });
        if (s->kind == Stmt::Kind::Accumulate && s->buffer == local)
          ok &= defined;
        visit(s->body, defined);
        defined |= s->kind == Stmt::Kind::Store && s->buffer == local;
      }
    };
    visit(body, false);
    return ok;
  }

  /// Condition 2a for an array: its first toucher is a top-level loop
  /// over its length that stores it at its variable first, and touches
  /// it only there.
  static bool writtenFirst(const Stmt &loop, const Buffer *b,
                           const std::vector<Access> &accesses) {
    size_t first = loop.body.size();
    for (const Access &a : accesses)
      if (a.buffer->root() == b)
        first = std::min(first, a.top);
    if (first == loop.body.size())
      return false;
    const Stmt &f = *loop.body[first];
    if (f.kind != Stmt::Kind::For || usesVar(*f.extent, loop.var) ||
        !sameExpr(*f.extent, *b->numElements()))
      return false;
    // The first statement of f's body that touches b stores it at %j.
    for (const StmtPtr &s : f.body) {
      bool touches = false;
      walk(*s, [&](Buffer *x) { touches |= x == b; });
      if (!touches)
        continue;
      if (s->kind != Stmt::Kind::Store || s->buffer != b)
        return false;
      bool reads = false;
      walkExprs(*s, [&](const Expr &e) {
        reads |= e.kind == Expr::Kind::Load && e.buffer == b;
      });
      if (reads)
        return false;
      break;
    }
    for (const Access &a : accesses)
      if (a.top == first && a.buffer->root() == b &&
          (a.buffer != b || a.index->kind != Expr::Kind::LoopVar ||
           a.index->var != f.var))
        return false;
    return true;
  }

  /// Condition 2c: `%i`, or `%i * W + %j` with %j a loop over W around
  /// the access; W (1 for `%i`) is the same for every access.
  static bool rowIndexed(const Stmt &loop, const Access &a,
                         std::optional<ExprPtr> &width) {
    if (!zeroOffsets(a.buffer))
      return false;
    const Expr &e = *a.index;
    ExprPtr w;
    if (e.kind == Expr::Kind::LoopVar && e.var == loop.var) {
      w = index(1);
    } else if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Add &&
               e.args[1]->kind == Expr::Kind::LoopVar) {
      const Expr &mul = *e.args[0];
      unsigned j = e.args[1]->var;
      if (mul.kind != Expr::Kind::Prim || mul.op != PrimOp::Mul ||
          mul.args[0]->kind != Expr::Kind::LoopVar ||
          mul.args[0]->var != loop.var || usesVar(*mul.args[1], loop.var))
        return false;
      const Stmt *around = nullptr;
      for (const Stmt *l : a.loops)
        if (l->var == j)
          around = l;
      if (!around || !sameExpr(*around->extent, *mul.args[1]))
        return false;
      w = mul.args[1]->clone();
    } else {
      return false;
    }
    if (!width) {
      width = std::move(w);
      return true;
    }
    return sameExpr(**width, *w);
  }

  /// Four rows at a time when the loop has at most half of
  /// jamMaxStatements statements (four copies are no more code than two
  /// of the largest loop that is jammed) and the rows are not known to be
  /// fewer than four, else two. Four rows read and write each column sum once
  /// per four rows (K5's dgamma and dbeta, f64 elements: a load and a
  /// store per row pair before) and give the core more independent work
  /// per element: K5's gradient -3% (C++) and -6% (LLVM) against two.
  static int64_t jamFactor(const Expr &rows, unsigned statements) {
    std::optional<int64_t> n = constIndex(rows);
    if ((n && *n < 4) || statements > jamMaxStatements / 2)
      return 2;
    return 4;
  }

  bool jammable(const Stmt &loop) {
    privates.clear();
    columnSums.clear();
    columnOrder.clear();
    footprint = nullptr;
    widens = false;
    if (std::optional<int64_t> n = constIndex(*loop.extent); n && *n < 2)
      return false;
    std::vector<Access> accesses;
    unsigned statements = 0;
    llvm::DenseSet<const Buffer *> cheapLanes;
    if (!collect(loop, accesses, statements, cheapLanes) ||
        cheapLanes.empty() || statements > jamMaxStatements)
      return false;
    factor = jamFactor(*loop.extent, statements);
    // The buffers written in the loop, in order of first access.
    llvm::SmallVector<Buffer *, 16> written;
    llvm::DenseSet<const Buffer *> seen;
    for (const Access &a : accesses)
      if (a.write && seen.insert(a.buffer->root()).second)
        written.push_back(a.buffer->root());
    for (Buffer *b : written) {
      bool direct = !viewed.count(b), loaded = false, onlyAdds = true;
      llvm::DenseSet<size_t> tops;
      for (const Access &a : accesses) {
        if (a.buffer->root() != b)
          continue;
        direct &= a.buffer == b;
        loaded |= !a.write;
        onlyAdds &= a.write && a.write->kind == Stmt::Kind::Accumulate;
        tops.insert(a.top);
      }
      const User *user = users.find(b);
      bool onlyHere = user && user->top == &loop && !user->many;
      bool kindOk = b->kind == Buffer::Kind::Local ||
                    b->kind == Buffer::Kind::Stack ||
                    (b->kind == Buffer::Kind::Scratch && !b->count);
      if (kindOk && direct && onlyHere &&
          (b->kind == Buffer::Kind::Local ? definedBeforeRead(loop.body, b)
                                          : writtenFirst(loop, b, accesses))) {
        privates.push_back(b);
        continue;
      }
      if (direct && onlyAdds && !loaded && tops.size() == 1 &&
          columnSumPlaced(loop, b, *tops.begin(), accesses)) {
        columnSums[b] = *tops.begin();
        columnOrder.push_back(b);
        continue;
      }
      std::optional<ExprPtr> width;
      for (const Access &a : accesses)
        if (a.buffer->root() == b && !rowIndexed(loop, a, width))
          return false;
    }
    // A sum of each row's own: lanes that each iteration sets.
    if (columnSums.empty() || !llvm::any_of(privates, [&](const Buffer *b) {
          return cheapLanes.count(b);
        }))
      return false;
    // Sums that widen are bound by their conversions, not by the cache:
    // four rows gain at every width (K5's gradient in the default order,
    // C = 1,024: -15% C++, -25% LLVM against one row at a time).
    if (widens)
      return true;
    footprint = rowsFootprint(loop, accesses);
    if (!footprint)
      return true;
    std::optional<int64_t> bytes = foldIndex(*footprint);
    if (!bytes)
      return true;
    footprint = nullptr;
    return *bytes <= jamCacheBytes;
  }

  /// The bytes that the F rows of an iteration touch, an index expression
  /// of the sizes: for each array (not a local) the trip counts of the
  /// loops around its first access in the body times its element size, F
  /// times for an array of the row's own (a private one, or one accessed
  /// at an index of the row) and once for one that the rows share (a
  /// column sum, a parameter read whole). Null when a trip count depends
  /// on a loop variable. More than jamCacheBytes, the F rows' passes evict
  /// one another's data from the L1 cache, and one row at a time is
  /// faster.
  ExprPtr rowsFootprint(const Stmt &loop, const std::vector<Access> &accesses) {
    llvm::DenseMap<const Buffer *, const Access *> first;
    llvm::SmallVector<const Buffer *, 16> order;
    llvm::DenseSet<const Buffer *> own(privates.begin(), privates.end());
    for (const Access &a : accesses) {
      const Buffer *b = a.buffer->root();
      if (b->kind == Buffer::Kind::Local)
        continue;
      if (first.try_emplace(b, &a).second)
        order.push_back(b);
      if (usesVar(*a.index, loop.var))
        own.insert(b);
    }
    // Symbolic terms after one constant each (the stack buffers, arrays
    // of known size), so that the test reads as a sum of rows.
    int64_t ownConst = 0, sharedConst = 0;
    llvm::SmallVector<ExprPtr, 8> ownTerms, sharedTerms;
    for (const Buffer *b : order) {
      ExprPtr bytes = index(int64_t(elementByteSize(b->dtype)));
      for (const Stmt *l : first[b]->loops) {
        if (usesLoopVar(*l->extent))
          return nullptr;
        bytes = prim(PrimOp::Mul, std::move(bytes), l->extent->clone());
      }
      bool mine = own.count(b);
      if (std::optional<int64_t> c = foldIndex(*bytes))
        (mine ? ownConst : sharedConst) += *c;
      else
        (mine ? ownTerms : sharedTerms).push_back(std::move(bytes));
    }
    auto sum = [](int64_t c, llvm::SmallVectorImpl<ExprPtr> &terms) {
      ExprPtr total = index(c);
      for (ExprPtr &t : terms)
        total = prim(PrimOp::Add, std::move(total), std::move(t));
      return total;
    };
    return prim(PrimOp::Add,
                prim(PrimOp::Mul, index(factor), sum(ownConst, ownTerms)),
                sum(sharedConst, sharedTerms));
  }

  /// Condition 2b: in a statement that is jammed, every accumulation of
  /// `b` is at that loop's variable.
  static bool columnSumPlaced(const Stmt &loop, const Buffer *b, size_t top,
                              const std::vector<Access> &accesses) {
    const Stmt &s = *loop.body[top];
    if (s.kind != Stmt::Kind::For || usesVar(*s.extent, loop.var))
      return true;
    unsigned j = s.var;
    for (const Access &a : accesses)
      if (a.buffer == b && (a.index->kind != Expr::Kind::LoopVar ||
                            a.index->var != j || usesVar(*a.index, loop.var)))
        return false;
    return true;
  }

  /// Whether top-level statement `s` of `loop` is a loop whose rows'
  /// copies become one loop: the chunks of a sum (a loop with a lane loop
  /// in its body), whose extent does not depend on the row.
  bool jamsWith(const Stmt &loop, const Stmt &s) const {
    if (s.kind != Stmt::Kind::For || usesVar(*s.extent, loop.var))
      return false;
    if (llvm::any_of(s.body, [](const StmtPtr &b) { return isLaneLoop(*b); }))
      return true;
    bool sums = false;
    for (const StmtPtr &b : s.body)
      sums |= b->kind == Stmt::Kind::Accumulate && columnSums.count(b->buffer);
    return sums;
  }

  std::vector<StmtPtr> jam(Stmt &loop) {
    const Expr &rows = *loop.extent;
    unsigned k = fn.numVars++, r = fn.numVars++;
    // Row F k + f of the F rows of iteration k: a copy of the body each,
    // the first with the loop's own buffers, the others with copies of
    // its private ones.
    std::vector<ExprPtr> rowOf;
    std::vector<std::unique_ptr<Copier>> copies;
    for (int64_t f = 0; f < factor; ++f) {
      ExprPtr row = prim(PrimOp::Mul, loopVar(k), index(factor));
      if (f)
        row = prim(PrimOp::Add, std::move(row), index(f));
      rowOf.push_back(std::move(row));
    }
    for (int64_t f = 0; f < factor; ++f) {
      copies.push_back(std::make_unique<Copier>(fn, loop.var, *rowOf[f]));
      if (f)
        for (Buffer *b : privates)
          copies[f]->buffers[b] =
              fn.addBuffer(b->kind, b->dtype, b->shape, b->name);
    }
    // Iterations of F rows: R / F, or none when the F rows would not fit
    // in the cache (known at run time only); the rows after them run one
    // at a time.
    ExprPtr iterations = split(rows, PrimOp::Div);
    ExprPtr firstRest, restRows;
    if (footprint) {
      iterations =
          select(prim(PrimOp::Le, std::move(footprint), index(jamCacheBytes)),
                 std::move(iterations), index(0));
      firstRest = prim(PrimOp::Mul, iterations->clone(), index(factor));
      restRows = prim(PrimOp::Sub, rows.clone(), firstRest->clone());
    } else {
      firstRest = prim(PrimOp::Sub, rows.clone(),
                       prim(PrimOp::Rem, rows.clone(), index(factor)));
      restRows = split(rows, PrimOp::Rem);
    }
    ExprPtr last = prim(PrimOp::Add, std::move(firstRest), loopVar(r));
    Copier rest(fn, loop.var, *last);

    auto jammed = std::make_unique<Stmt>(Stmt::Kind::For);
    jammed->origin = loop.origin;
    jammed->var = k;
    jammed->extent = std::move(iterations);
    for (const StmtPtr &s : loop.body) {
      StmtPtr a = copies[0]->stmt(*s);
      if (jamsWith(loop, *s)) {
        // Where each row's statements start in the one loop.
        std::vector<size_t> starts = {0};
        for (int64_t f = 1; f < factor; ++f) {
          starts.push_back(a->body.size());
          copies[f]->vars[s->var] = a->var;
          for (const StmtPtr &b : s->body)
            a->body.push_back(copies[f]->stmt(*b));
        }
        carryColumnSums(*a, starts);
        a->independent = independent(*a);
        jammed->body.push_back(std::move(a));
        continue;
      }
      jammed->body.push_back(std::move(a));
      for (int64_t f = 1; f < factor; ++f)
        jammed->body.push_back(copies[f]->stmt(*s));
    }
    auto remainder = std::make_unique<Stmt>(Stmt::Kind::For);
    remainder->origin = loop.origin;
    remainder->var = r;
    remainder->extent = std::move(restRows);
    for (const StmtPtr &s : loop.body)
      remainder->body.push_back(rest.stmt(*s));

    std::vector<StmtPtr> out;
    out.push_back(std::move(jammed));
    std::optional<int64_t> n = constIndex(*remainder->extent);
    if (!n || *n)
      out.push_back(std::move(remainder));
    return out;
  }

  /// In a jammed loop whose rows' statements start at `starts`: when
  /// each row adds to a column sum once, at the loop's variable,
  /// `%acc[j] += a; ...; %acc[j] += b; ...; %acc[j] += c` becomes
  /// `%col = %acc[j] + a; ...; %col = %col + b; ...; %acc[j] = %col + c`:
  /// the same additions in the same order, with the element in a register
  /// between them (a C++ compiler must reload it after any store in
  /// between that it cannot prove apart from it).
  void carryColumnSums(Stmt &jammed, llvm::ArrayRef<size_t> starts) {
    for (Buffer *sum : columnOrder) {
      llvm::SmallVector<Stmt *, 4> adds;
      llvm::SmallVector<unsigned, 4> perRow(starts.size(), 0);
      for (size_t n = 0; n < jammed.body.size(); ++n) {
        Stmt &st = *jammed.body[n];
        if (st.kind != Stmt::Kind::Accumulate || st.buffer != sum)
          continue;
        size_t row = llvm::upper_bound(starts, n) - starts.begin() - 1;
        ++perRow[row];
        adds.push_back(&st);
      }
      if (llvm::any_of(perRow, [](unsigned c) { return c != 1; }) ||
          llvm::any_of(
              adds, [](const Stmt *a) { return a->combiner != Combiner::Add; }))
        continue;
      Buffer *col =
          fn.addBuffer(Buffer::Kind::Local, sum->dtype, {}, sum->name + ".col");
      for (size_t n = 0; n < adds.size(); ++n) {
        Stmt &a = *adds[n];
        ExprPtr before =
            n == 0 ? load(sum, a.index->clone()) : load(col, index(0));
        a.kind = Stmt::Kind::Store;
        a.value = prim(PrimOp::Add, std::move(before), std::move(a.value));
        if (n + 1 < adds.size()) {
          a.buffer = col;
          a.index = index(0);
        }
      }
    }
  }

  /// Whether each buffer (not a local) that `loop` writes is accessed in
  /// it only at `%j`, its variable, directly or through views at 0.
  static bool independent(const Stmt &loop) {
    llvm::DenseSet<const Buffer *> written;
    loops::walk(loop.body, [&](const Stmt &s) {
      if ((s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate) &&
          s.buffer->kind != Buffer::Kind::Local)
        written.insert(s.buffer->root());
    });
    bool ok = true;
    auto atJ = [&](Buffer *b, const Expr &index) {
      if (!written.count(b->root()))
        return;
      ok &= zeroOffsets(b) && index.kind == Expr::Kind::LoopVar &&
            index.var == loop.var;
    };
    loops::walk(loop.body, [&](const Stmt &s) {
      walkExprs(s, [&](const Expr &e) {
        if (e.kind == Expr::Kind::Load)
          atJ(e.buffer, *e.args[0]);
      });
      if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate)
        atJ(s.buffer, *s.index);
      ok &= s.kind != Stmt::Kind::Call && s.kind != Stmt::Kind::KernelCall;
    });
    return ok;
  }

  /// `R / F` or `R % F` (F the factor), folded when R is a constant.
  ExprPtr split(const Expr &rows, PrimOp op) const {
    if (std::optional<int64_t> n = constIndex(rows))
      return index(op == PrimOp::Div ? *n / factor : *n % factor);
    return prim(op, rows.clone(), index(factor));
  }
};

} // namespace

bool loops::jamRows(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    Jammer(*fn).run();
  return true;
}
