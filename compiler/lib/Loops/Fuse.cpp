//===- Fuse.cpp - Fusion of elementwise producers into their consumer -----===//
//
// The loop pass `fuse` (Halide's compute_inline): a scratch buffer that one
// elementwise nest writes and exactly one statement reads is not stored at
// all; its element is computed where it is read.
//
//  1. A producer is a top-level perfect loop nest whose innermost body is
//     one store `%p[I] = V` into a scratch buffer `%p` that nothing else
//     writes, that no call, kernel or view uses, and whose value V reads
//     no local and not `%p`.
//  2. Exactly one statement R (anywhere after it) reads `%p`, and every
//     load of `%p` in R has one index J that matches I once the nest's
//     loop variables are bound to sub-expressions of J (unification: the
//     same flat, affine index in another loop nest, transposed or not).
//     Reading `%p` in one statement only means nothing is computed twice.
//  3. Before R, a local `%p = V[loop variables := their bindings]` is
//     inserted, R reads that local instead, and the producer nest and the
//     buffer are deleted. Repeat until nothing changes, so chains fuse.
//
// The value stored is the value computed, rounding included (V carries the
// cast to `%p`'s type), so the result is bit for bit the unfused one.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <map>
#include <set>

using namespace gradc;
using namespace gradc::loops;

namespace {

using Binding = std::map<unsigned, const Expr *>;

bool sameExpr(const Expr &a, const Expr &b);

/// Whether `e` matches `pattern`, binding the pattern's loop variables in
/// `vars` to sub-expressions of `e` consistently.
bool unify(const Expr &pattern, const Expr &e, const std::set<unsigned> &vars,
           Binding &binding) {
  if (pattern.kind == Expr::Kind::LoopVar && vars.count(pattern.var)) {
    if (e.type != ScalarType::Index)
      return false;
    auto [it, inserted] = binding.emplace(pattern.var, &e);
    return inserted || sameExpr(*it->second, e);
  }
  if (pattern.kind != e.kind || pattern.type != e.type ||
      pattern.args.size() != e.args.size())
    return false;
  switch (pattern.kind) {
  case Expr::Kind::Const:
    if (!(pattern.value == e.value ||
          (std::isnan(pattern.value) && std::isnan(e.value))))
      return false;
    break;
  case Expr::Kind::Size:
    if (pattern.name != e.name)
      return false;
    break;
  case Expr::Kind::LoopVar:
    if (pattern.var != e.var)
      return false;
    break;
  case Expr::Kind::Load:
    if (pattern.buffer != e.buffer)
      return false;
    break;
  case Expr::Kind::Prim:
    if (pattern.op != e.op)
      return false;
    break;
  case Expr::Kind::Intrinsic:
    if (pattern.fn != e.fn)
      return false;
    break;
  case Expr::Kind::Select:
  case Expr::Kind::Cast:
    break;
  }
  for (size_t i = 0; i < pattern.args.size(); ++i)
    if (!unify(*pattern.args[i], *e.args[i], vars, binding))
      return false;
  return true;
}

bool sameExpr(const Expr &a, const Expr &b) {
  Binding none;
  return unify(a, b, {}, none);
}

/// `e` with each bound loop variable replaced by (a copy of) its binding.
ExprPtr substitute(const Expr &e, const Binding &binding) {
  if (e.kind == Expr::Kind::LoopVar) {
    auto it = binding.find(e.var);
    if (it != binding.end())
      return it->second->clone();
  }
  ExprPtr copy = e.clone();
  for (size_t i = 0; i < e.args.size(); ++i)
    copy->args[i] = substitute(*e.args[i], binding);
  return copy;
}

bool readsBuffer(const Expr &e, const Buffer *b) {
  if (e.kind == Expr::Kind::Load && e.buffer == b)
    return true;
  for (const ExprPtr &a : e.args)
    if (readsBuffer(*a, b))
      return true;
  return false;
}

/// Replaces each load of `from` in `e` by a load of local `to`.
void replaceLoads(ExprPtr &e, const Buffer *from, Buffer *to) {
  if (e->kind == Expr::Kind::Load && e->buffer == from) {
    e = load(to, index(0));
    return;
  }
  for (ExprPtr &a : e->args)
    replaceLoads(a, from, to);
}

/// Every expression slot of a statement (not of nested ones).
std::vector<ExprPtr *> exprSlots(Stmt &s) {
  std::vector<ExprPtr *> slots;
  for (ExprPtr *e : {&s.extent, &s.index, &s.value, &s.cond})
    if (*e)
      slots.push_back(e);
  for (ExprPtr &e : s.operands)
    slots.push_back(&e);
  for (auto &[name, e] : s.sizeArgs)
    slots.push_back(&e);
  return slots;
}

class Fuser {
public:
  explicit Fuser(LoopFunction &fn) : fn(fn) {}

  /// One sweep from the last top-level statement to the first, fusing
  /// every producer it can; false when nothing fused. Going backwards, a
  /// producer's reader has already taken in whatever fused into it, and
  /// erasing a statement moves none that is still to be visited. The
  /// uses of every buffer are indexed once per sweep and kept up to date,
  /// so that a sweep is linear in the function rather than cubic (a chain
  /// of 10,000 lets, test/Emit/compile-time-10k.test).
  bool sweep() {
    indexUses();
    bool any = false;
    for (size_t i = fn.body.size(); i-- > 0;)
      any |= tryProducer(i);
    return any;
  }

private:
  LoopFunction &fn;

  /// Where each statement sits: its block and its top-level statement.
  struct Place {
    Block *block;
    const Stmt *top;
  };
  llvm::DenseMap<const Stmt *, Place> places;
  /// The order of the top-level statements (erasing keeps it).
  llvm::DenseMap<const Stmt *, size_t> order;
  /// The statements whose own expressions read each buffer.
  llvm::DenseMap<const Buffer *, llvm::SmallVector<const Stmt *, 2>> readers;
  /// Buffers written by more than one statement, or used by a call, a
  /// kernel or a view.
  llvm::DenseSet<const Buffer *> otherwise;
  llvm::DenseSet<const Stmt *> dead;
  std::vector<StmtPtr> erased;

  void noteReads(const Stmt &s) {
    llvm::SmallVector<const Buffer *, 4> read;
    for (ExprPtr *e : exprSlots(const_cast<Stmt &>(s)))
      collectLoads(**e, read);
    for (const Buffer *b : read) {
      auto &list = readers[b];
      if (list.empty() || list.back() != &s)
        list.push_back(&s);
    }
  }

  static void collectLoads(const Expr &e,
                           llvm::SmallVectorImpl<const Buffer *> &out) {
    if (e.kind == Expr::Kind::Load && !llvm::is_contained(out, e.buffer))
      out.push_back(e.buffer);
    for (const ExprPtr &a : e.args)
      collectLoads(*a, out);
  }

  void indexBlock(Block &block, const Stmt *top,
                  llvm::DenseMap<const Buffer *, unsigned> &writes) {
    for (StmtPtr &sp : block) {
      Stmt &s = *sp;
      const Stmt *t = top ? top : &s;
      places[&s] = {&block, t};
      noteReads(s);
      if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate)
        if (++writes[s.buffer] > 1)
          otherwise.insert(s.buffer);
      for (const Buffer *b : s.inputs)
        otherwise.insert(b);
      for (const Buffer *b : s.outputs)
        otherwise.insert(b);
      indexBlock(s.body, t, writes);
    }
  }

  void indexUses() {
    places.clear();
    order.clear();
    readers.clear();
    otherwise.clear();
    dead.clear();
    for (size_t i = 0; i < fn.body.size(); ++i)
      order[fn.body[i].get()] = i;
    llvm::DenseMap<const Buffer *, unsigned> writes;
    indexBlock(fn.body, nullptr, writes);
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        otherwise.insert(b->base);
  }

  /// The live statements that read `p`.
  llvm::SmallVector<const Stmt *, 2> liveReaders(const Buffer *p) {
    llvm::SmallVector<const Stmt *, 2> live;
    auto it = readers.find(p);
    if (it != readers.end())
      for (const Stmt *s : it->second)
        if (!dead.count(s))
          live.push_back(s);
    return live;
  }

  static void markDead(const Stmt &s, llvm::DenseSet<const Stmt *> &dead) {
    dead.insert(&s);
    for (const StmtPtr &c : s.body)
      markDead(*c, dead);
  }

  /// The innermost block of a perfect nest and its loop variables, when
  /// that block is local definitions (made by earlier fusions) followed by
  /// one store; null otherwise.
  static Block *nestBody(Stmt &s, std::set<unsigned> &vars) {
    if (s.kind != Stmt::Kind::For)
      return nullptr;
    Stmt *at = &s;
    while (at->body.size() == 1 && at->body.front()->kind == Stmt::Kind::For) {
      vars.insert(at->var);
      at = at->body.front().get();
    }
    vars.insert(at->var);
    Block &body = at->body;
    if (body.empty() || body.back()->kind != Stmt::Kind::Store)
      return nullptr;
    std::set<const Buffer *> defined;
    for (const StmtPtr &def : body) {
      if (def->kind != Stmt::Kind::Store ||
          readsOtherLocal(*def->value, defined))
        return nullptr;
      if (def != body.back()) {
        if (def->buffer->kind != Buffer::Kind::Local)
          return nullptr;
        defined.insert(def->buffer);
      }
    }
    return &body;
  }

  /// Whether `e` reads a local other than those in `defined`.
  static bool readsOtherLocal(const Expr &e,
                              const std::set<const Buffer *> &defined) {
    if (e.kind == Expr::Kind::Load && e.buffer->kind == Buffer::Kind::Local &&
        !defined.count(e.buffer))
      return true;
    for (const ExprPtr &a : e.args)
      if (readsOtherLocal(*a, defined))
        return true;
    return false;
  }

  bool tryProducer(size_t at) {
    Stmt &nest = *fn.body[at];
    std::set<unsigned> vars;
    Block *body = nestBody(nest, vars);
    if (!body)
      return false;
    Stmt *store = body->back().get();
    Buffer *p = store->buffer;
    if (p->kind != Buffer::Kind::Scratch || otherwise.count(p))
      return false;
    for (const StmtPtr &def : *body)
      if (readsBuffer(*def->value, p))
        return false;
    llvm::SmallVector<const Stmt *, 2> found = liveReaders(p);
    if (found.size() != 1)
      return false;
    Place place = places.lookup(found[0]);
    if (order.lookup(place.top) <= order.lookup(&nest))
      return false;
    Stmt &reader = const_cast<Stmt &>(*found[0]);
    // Every load of p in the reader at one index, matching the store's.
    const Expr *readIndex = nullptr;
    bool consistent = true;
    for (ExprPtr *slot : exprSlots(reader))
      walkLoads(**slot, p, [&](const Expr &load) {
        if (!readIndex)
          readIndex = load.args[0].get();
        else if (!sameExpr(*readIndex, *load.args[0]))
          consistent = false;
      });
    Binding binding;
    if (!readIndex || !consistent ||
        !unify(*store->index, *readIndex, vars, binding) ||
        binding.size() != vars.size())
      return false;

    // Fuse. The substituted definitions are built first: the binding
    // points into the reader's loads, which are replaced next. The local
    // takes the buffer's name once the buffer is gone.
    std::vector<StmtPtr> defs;
    for (StmtPtr &old : *body) {
      auto def = std::make_unique<Stmt>(Stmt::Kind::Store);
      def->origin = old->origin;
      def->buffer = old->buffer;
      def->index = index(0);
      def->value = substitute(*old->value, binding);
      defs.push_back(std::move(def));
    }
    DType dtype = p->dtype;
    std::string name = p->name;
    Block &block = *place.block;
    size_t position = 0;
    while (block[position].get() != &reader)
      ++position;
    eraseBuffer(p);
    Buffer *local = fn.addBuffer(Buffer::Kind::Local, dtype, {}, name);
    defs.back()->buffer = local;
    for (ExprPtr *slot : exprSlots(reader))
      replaceLoads(*slot, p, local);
    markDead(nest, dead);
    for (StmtPtr &def : defs) {
      places[def.get()] = place;
      noteReads(*def);
      block.insert(block.begin() + position++, std::move(def));
    }
    // Kept until the sweep ends, so that no new statement takes the
    // address of a dead one.
    erased.push_back(std::move(fn.body[at]));
    fn.body.erase(fn.body.begin() + at);
    return true;
  }

  static void walkLoads(const Expr &e, const Buffer *p,
                        llvm::function_ref<void(const Expr &)> f) {
    if (e.kind == Expr::Kind::Load && e.buffer == p)
      f(e);
    for (const ExprPtr &a : e.args)
      walkLoads(*a, p, f);
  }

  void eraseBuffer(const Buffer *p) {
    for (auto it = fn.buffers.begin(); it != fn.buffers.end(); ++it)
      if (it->get() == p) {
        // Keep the pointer alive until the loads are replaced: move it
        // to the graveyard.
        fn.bufferNames.erase(p->name);
        graveyard.push_back(std::move(*it));
        fn.buffers.erase(it);
        return;
      }
  }

public:
  std::vector<std::unique_ptr<Buffer>> graveyard;
};

} // namespace

bool loops::fuseElementwise(LoopModule &module, std::string &) {
  for (auto &fn : module.functions) {
    Fuser fuser(*fn);
    while (fuser.sweep()) {
    }
  }
  return true;
}
