//===- Parallel.cpp - Marking loops whose iterations are independent ------===//
//
// The loop pass `parallel`: an outermost loop `for %v < E { S }` of a
// function is marked parallel when running its iterations on several
// threads, in any order, gives bitwise the results of running them in
// increasing %v. That holds when no iteration reads or writes what
// another writes:
//
//  1. S has no check, call or kernel call (a failure path, a callee's or
//     a kernel's own temporaries) and no i32 division (its status is one
//     shared flag).
//  2. A local or stack buffer that S writes is *private*: no statement
//     outside this loop touches it (nor a view of it), and in S its first
//     access, in program order, is a store, so that each iteration sets it
//     before it reads it (lowering initialises every accumulator and every
//     lane it reads). Each thread gets its own copy. A sum's accumulator
//     that lives across iterations (set before the loop, as the lanes of
//     a sum over every axis) is not private, so such a loop stays serial:
//     one reduction is never split across threads.
//  3. Any other buffer that S writes (an output or a scratch buffer, not
//     through a view) is accessed in S only at indices of one *layout*: a
//     sum of terms `u * stride` over distinct loop variables, %v among
//     them, each bound by its loop in S (or %v), whose strides are the
//     mixed-radix strides of their extents (1, E_a, E_a E_b, ...; extents
//     and strides are products of constants and size names). Such an index
//     is a one-to-one function of the variables, so two iterations (two
//     values of %v) touch disjoint elements, and every access of the
//     buffer in an iteration touches only that iteration's elements.
//
// The estimated work of the loop, `E * (work of one iteration)`, counts
// one per expression node of each store (eight for a math function),
// times the extents of the loops around it; a loop whose work is a
// constant below parallelMinWork is not marked, and a printer runs a
// marked loop on threads only when its work at run time reaches it.
//
// The evaluator ignores the marks: they change no number.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// A product of a constant and size names: an extent or a stride.
struct Product {
  int64_t constant = 1;
  std::vector<std::string> names; // sorted

  bool operator==(const Product &o) const {
    return constant == o.constant && names == o.names;
  }
  Product times(const Product &o) const {
    Product p{constant * o.constant, names};
    p.names.insert(p.names.end(), o.names.begin(), o.names.end());
    llvm::sort(p.names);
    return p;
  }
  std::string key() const {
    std::string k = std::to_string(constant);
    for (const std::string &n : names)
      k += "*" + n;
    return k;
  }
};

std::optional<Product> asProduct(const Expr &e) {
  if (e.kind == Expr::Kind::Const && e.type == ScalarType::Index)
    return Product{int64_t(e.value), {}};
  if (e.kind == Expr::Kind::Size)
    return Product{1, {e.name.str()}};
  if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Mul) {
    std::optional<Product> a = asProduct(*e.args[0]);
    std::optional<Product> b = asProduct(*e.args[1]);
    if (a && b)
      return a->times(*b);
  }
  return std::nullopt;
}

/// One term `var * stride` of an index.
struct Term {
  unsigned var;
  Product stride;
};

/// A term: a product of exactly one loop variable and constants or sizes.
bool asTerm(const Expr &e, std::optional<unsigned> &var, Product &stride) {
  if (e.kind == Expr::Kind::LoopVar) {
    if (var)
      return false;
    var = e.var;
    return true;
  }
  if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Mul)
    return asTerm(*e.args[0], var, stride) && asTerm(*e.args[1], var, stride);
  std::optional<Product> p = asProduct(e);
  if (!p)
    return false;
  stride = stride.times(*p);
  return true;
}

bool collectTerms(const Expr &e, std::vector<Term> &terms) {
  if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Add)
    return collectTerms(*e.args[0], terms) && collectTerms(*e.args[1], terms);
  std::optional<unsigned> var;
  Product stride;
  if (!asTerm(e, var, stride) || !var)
    return false;
  terms.push_back({*var, stride});
  return true;
}

/// The analysis of one outermost loop.
class LoopAnalysis {
public:
  LoopAnalysis(const Stmt &loop,
               const llvm::DenseMap<const Buffer *, unsigned> &topUses,
               const llvm::DenseSet<const Buffer *> &viewed)
      : loop(loop), topUses(topUses), viewed(viewed) {}

  /// Whether the loop is parallel; fills `privates`.
  bool run();
  std::vector<Buffer *> privates;

private:
  void visit(const Block &block);
  void access(Buffer *buf, const Expr &index, bool isStore, bool isWrite);
  void loads(const Expr &e);
  /// The layout of an index (rule 3), or "" when it has none.
  std::string layout(const Expr &index) const;

  const Stmt &loop;
  const llvm::DenseMap<const Buffer *, unsigned> &topUses;
  const llvm::DenseSet<const Buffer *> &viewed;
  bool ok = true;
  /// The extents of the loops in scope, by variable.
  llvm::DenseMap<unsigned, std::optional<Product>> extents;
  struct Uses {
    bool written = false;
    bool firstIsStore = false;
    bool seen = false;
    bool throughView = false;
    std::vector<std::string> layouts;
  };
  llvm::DenseMap<Buffer *, Uses> uses;
  std::vector<Buffer *> order;
};

std::string LoopAnalysis::layout(const Expr &index) const {
  std::vector<Term> terms;
  if (!collectTerms(index, terms))
    return "";
  // Distinct variables, each bound here with a product extent.
  llvm::DenseSet<unsigned> vars;
  bool hasLoopVar = false;
  for (const Term &t : terms) {
    auto it = extents.find(t.var);
    if (!vars.insert(t.var).second || it == extents.end() || !it->second)
      return "";
    hasLoopVar |= t.var == loop.var;
  }
  if (!hasLoopVar)
    return "";
  // Mixed radix: strides 1, E_a, E_a E_b, ... in some order.
  Product cur;
  std::vector<std::string> parts;
  while (!terms.empty()) {
    auto it =
        llvm::find_if(terms, [&](const Term &t) { return t.stride == cur; });
    if (it == terms.end())
      return "";
    const Product &extent = *extents.find(it->var)->second;
    parts.push_back((it->var == loop.var ? "v:" : "u:") + cur.key() + "<" +
                    extent.key());
    cur = cur.times(extent);
    terms.erase(it);
  }
  std::string key;
  for (const std::string &p : parts)
    key += p + ";";
  return key;
}

void LoopAnalysis::access(Buffer *buf, const Expr &index, bool isStore,
                          bool isWrite) {
  Buffer *root = buf->root();
  bool view = root != buf;
  auto [it, inserted] = uses.try_emplace(root);
  Uses &u = it->second;
  if (inserted)
    order.push_back(root);
  if (!u.seen) {
    u.seen = true;
    u.firstIsStore = isStore && !view;
  }
  u.written |= isWrite;
  u.throughView |= view;
  if (root->kind != Buffer::Kind::Local && root->kind != Buffer::Kind::Stack)
    u.layouts.push_back(view ? "" : layout(index));
}

void LoopAnalysis::loads(const Expr &e) {
  if (e.kind == Expr::Kind::Load)
    access(e.buffer, *e.args[0], false, false);
  if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Div &&
      e.type == ScalarType::I32)
    ok = false;
  for (const ExprPtr &a : e.args)
    loads(*a);
}

void LoopAnalysis::visit(const Block &block) {
  for (const StmtPtr &sp : block) {
    const Stmt &s = *sp;
    switch (s.kind) {
    case Stmt::Kind::For:
      loads(*s.extent);
      extents[s.var] = asProduct(*s.extent);
      visit(s.body);
      extents.erase(s.var);
      break;
    case Stmt::Kind::Store:
    case Stmt::Kind::Accumulate:
      // The value and the index are read before the element is written.
      loads(*s.value);
      loads(*s.index);
      if (s.kind == Stmt::Kind::Accumulate)
        access(s.buffer, *s.index, false, false);
      access(s.buffer, *s.index, s.kind == Stmt::Kind::Store, true);
      break;
    case Stmt::Kind::Check:
    case Stmt::Kind::KernelCall:
    case Stmt::Kind::Call:
      ok = false;
      break;
    }
  }
}

bool LoopAnalysis::run() {
  extents[loop.var] = asProduct(*loop.extent);
  visit(loop.body);
  if (!ok)
    return false;
  for (Buffer *buf : order) {
    const Uses &u = uses.find(buf)->second;
    if (!u.written)
      continue;
    switch (buf->kind) {
    case Buffer::Kind::Local:
    case Buffer::Kind::Stack:
      // Rule 2: private to this loop.
      if (topUses.lookup(buf) != 1 || viewed.contains(buf) || u.throughView ||
          !u.firstIsStore)
        return false;
      privates.push_back(buf);
      break;
    case Buffer::Kind::Output:
    case Buffer::Kind::Scratch:
      // Rule 3: one layout with %v.
      if (u.throughView || u.layouts.empty() || u.layouts[0].empty() ||
          !llvm::all_equal(u.layouts))
        return false;
      break;
    default:
      return false;
    }
  }
  return true;
}

/// The cost of computing an expression: one per node, eight per math
/// function.
int64_t cost(const Expr &e) {
  int64_t c = e.kind == Expr::Kind::Intrinsic ? 8 : 1;
  for (const ExprPtr &a : e.args)
    c += cost(*a);
  return c;
}

/// Whether `e` reads memory or names a loop variable: a value that exists
/// only inside the loop, so the work estimate, which a printer evaluates
/// before the loop, must not mention it.
bool dependsOnLoop(const Expr &e) {
  if (e.kind == Expr::Kind::Load || e.kind == Expr::Kind::LoopVar)
    return true;
  for (const ExprPtr &a : e.args)
    if (dependsOnLoop(*a))
      return true;
  return false;
}

/// The estimated work of one pass over `block`. An inner loop whose trip
/// count depends on a value computed in the loop (the in-order rerun of a
/// row maximum, whose count is C or 0) counts as one statement.
ExprPtr workOf(const Block &block) {
  ExprPtr total = index(0);
  int64_t flat = 0;
  for (const StmtPtr &s : block) {
    switch (s->kind) {
    case Stmt::Kind::For:
      if (dependsOnLoop(*s->extent)) {
        flat += 1;
        break;
      }
      total = prim(PrimOp::Add, std::move(total),
                   prim(PrimOp::Mul, s->extent->clone(), workOf(s->body)));
      break;
    case Stmt::Kind::Store:
    case Stmt::Kind::Accumulate:
      flat += cost(*s->value) + cost(*s->index);
      break;
    default:
      flat += 1;
    }
  }
  return prim(PrimOp::Add, std::move(total), index(flat));
}

void markFunction(LoopFunction &fn) {
  // The number of top-level statements that touch each buffer (a view
  // counts for its base), and the bases of views.
  llvm::DenseMap<const Buffer *, unsigned> topUses;
  llvm::DenseSet<const Buffer *> viewed;
  for (const auto &b : fn.buffers)
    if (b->kind == Buffer::Kind::Alias && b->base)
      viewed.insert(b->base);
  for (const StmtPtr &top : fn.body) {
    llvm::DenseSet<const Buffer *> seen;
    auto note = [&](const Stmt &s) {
      auto add = [&](const Buffer *b) {
        if (!b)
          return;
        seen.insert(b);
        while (b->kind == Buffer::Kind::Alias && b->base)
          seen.insert(b = b->base);
      };
      walkExprs(s, [&](const Expr &e) {
        if (e.kind == Expr::Kind::Load)
          add(e.buffer);
      });
      add(s.buffer);
      for (const Buffer *b : s.inputs)
        add(b);
      for (const Buffer *b : s.outputs)
        add(b);
    };
    note(*top);
    walk(top->body, note);
    for (const Buffer *b : seen)
      ++topUses[b];
  }
  for (StmtPtr &top : fn.body) {
    if (top->kind != Stmt::Kind::For)
      continue;
    LoopAnalysis analysis(*top, topUses, viewed);
    if (!analysis.run())
      continue;
    ExprPtr work = prim(PrimOp::Mul, top->extent->clone(), workOf(top->body));
    if (work->kind == Expr::Kind::Const && work->value < parallelMinWork)
      continue;
    top->parallel = true;
    top->privates = analysis.privates;
    top->work = std::move(work);
  }
}

} // namespace

bool loops::markParallelLoops(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    markFunction(*fn);
  return true;
}
