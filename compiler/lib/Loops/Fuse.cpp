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
//  2. Exactly one statement R (anywhere after it) reads `%p`, or several
//     in one block (one definition before the first serves them; in a
//     block that holds loops only when `recomputable` holds), and
//     every load of `%p` in R has one index J that matches I once the nest's
//     loop variables are bound to sub-expressions of J (unification: the
//     same flat, affine index in another loop nest, transposed or not).
//     Reading `%p` in one block only means nothing is computed twice.
//     One exception: the lane loops of one sum (Lowering's
//     accumulateLanes: the whole chunks, then the rest) are several
//     blocks that each end in an accumulation with `+` into the same
//     stack buffer of lanes; they read disjoint elements, so a producer
//     read once in each of them (by the accumulation or by a local
//     fused there before) is still computed once per element. The other:
//     recompute versus store (`recomputable`), a producer cheap to compute
//     again from the parameters (and from a row's statistic, a broadcast
//     that nothing writes after it: K5's `%d = %x - %mu`), read in
//     several passes, is computed in each.
//  3. Before each R, a local `%p = V[loop variables := their bindings]` is
//     inserted, R reads that local instead, and the producer nest and the
//     buffer are deleted. Repeat until nothing changes, so chains fuse.
//
// The value stored is the value computed, rounding included (V carries the
// cast to `%p`'s type), so the result is bit for bit the unfused one.
//
// One sweep visits the top-level statements from the last to the first
// with an index of every buffer's readers, so that it is linear in the
// function (a chain of 100,000 lets: utils/scaling.sh with EMITS=loops).
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cmath>
#include <set>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// The loop variables of a producer's nest (a few: a small vector beats a
/// set, and fuse looks at every top-level nest of the function).
using LoopVars = llvm::SmallVector<unsigned, 4>;

/// Each of a nest's loop variables bound to a sub-expression of a
/// reader's index, in the order unification binds them.
class Binding {
public:
  /// The binding of `var`; null if it has none.
  const Expr *lookup(unsigned var) const {
    for (const auto &[v, e] : pairs)
      if (v == var)
        return e;
    return nullptr;
  }
  /// Binds `var` to `e`; false if it was bound already (nothing changes).
  bool insert(unsigned var, const Expr *e) {
    if (lookup(var))
      return false;
    pairs.emplace_back(var, e);
    return true;
  }
  size_t size() const { return pairs.size(); }

private:
  llvm::SmallVector<std::pair<unsigned, const Expr *>, 4> pairs;
};

/// Whether `e` matches `pattern`, binding the pattern's loop variables in
/// `vars` to sub-expressions of `e` consistently.
bool unify(const Expr &pattern, const Expr &e, const LoopVars &vars,
           Binding &binding) {
  if (pattern.kind == Expr::Kind::LoopVar &&
      llvm::is_contained(vars, pattern.var)) {
    if (e.type != ScalarType::Index)
      return false;
    if (const Expr *bound = binding.lookup(pattern.var))
      return sameExpr(*bound, e);
    binding.insert(pattern.var, &e);
    return true;
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

/// `e` with each bound loop variable replaced by (a copy of) its binding.
/// Each node is copied once (copying a whole subtree at each level and
/// then replacing its operands costs the square of the depth).
ExprPtr substitute(const Expr &e, const Binding &binding) {
  if (e.kind == Expr::Kind::LoopVar) {
    if (const Expr *bound = binding.lookup(e.var))
      return bound->clone();
  }
  ExprPtr copy = e.cloneNode();
  copy->args.reserve(e.args.size());
  for (const ExprPtr &a : e.args)
    copy->args.push_back(substitute(*a, binding));
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

class Fuser {
public:
  Fuser(LoopFunction &fn, uint64_t &work) : fn(fn), work(work) {}

  /// One sweep from the last top-level statement to the first, fusing
  /// every producer it can; false when nothing fused or nothing is left
  /// that could. Going backwards, a
  /// producer's reader has already taken in whatever fused into it, and a
  /// fused nest leaves an empty slot, so no statement still to be visited
  /// moves. The uses of every buffer are indexed once per sweep and kept
  /// up to date; the empty slots and the dead buffers go at the end.
  bool sweep() {
    indexUses();
    bool any = false;
    for (size_t i = fn.body.size(); i-- > 0;)
      if (fn.body[i])
        any |= tryProducer(i);
    for (Block *block : touchedOrder)
      insertPending(*block);
    touched.clear();
    touchedOrder.clear();
    std::erase_if(fn.body, [](const StmtPtr &s) { return !s; });
    std::erase_if(fn.buffers, [&](std::unique_ptr<Buffer> &b) {
      if (!deadBuffers.count(b.get()))
        return false;
      // Kept alive: a dead statement may still point at it.
      graveyard.push_back(std::move(b));
      return true;
    });
    deadBuffers.clear();
    return any && anyProducerLeft();
  }

private:
  LoopFunction &fn;
  /// Statements indexed, readers and block positions looked at, and
  /// statements moved (`gradc-opt --loop-work`).
  uint64_t &work;

  /// What a sweep knows of each statement: its block, its position there
  /// when the sweep began (a sweep erases only top-level statements,
  /// leaving their slots, and inserts at its end, so positions hold
  /// through it; a top-level statement's position is its order in the
  /// function), its top-level statement, the loops around it (`scopes`)
  /// and whether its top-level statement was fused away. One table, not one per
  /// fact: a gradient of 10,000 steps has half a million statements, and each
  /// lookup of a large table is a cache miss.
  struct Place {
    Block *block;
    uint32_t position;
    /// The innermost loop around the statement (an index into `scopes`).
    uint32_t scope;
    const Stmt *top;
    /// Set on a top-level statement fused away: the statements in it are
    /// dead with it.
    bool dead = false;
  };
  llvm::DenseMap<const Stmt *, Place> places;
  /// The loops around statements, as a tree: each scope is a loop
  /// variable and the scope around that loop; scope 0 is the function.
  struct Scope {
    uint32_t parent;
    unsigned var;
  };
  std::vector<Scope> scopes;
  /// Per root buffer: 1 + the order of the last top-level statement that
  /// writes it (fusing moves only loads and writes of locals, so it
  /// holds through a sweep).
  llvm::DenseMap<const Buffer *, size_t> lastWriter;
  /// The statements whose own expressions read each buffer.
  llvm::DenseMap<const Buffer *, llvm::SmallVector<const Stmt *, 2>> readers;
  /// Buffers written by more than one statement, or used by a call, a
  /// kernel or a view.
  llvm::DenseSet<const Buffer *> otherwise;
  llvm::DenseSet<const Buffer *> deadBuffers;
  /// Where a definition made in this sweep, not yet in its block, will
  /// go: before `anchor` (a statement of the block or another pending
  /// definition), at `index` in `before[anchor]`, `depth` anchors away
  /// from a statement of the block. These form a tree whose order is the
  /// block's order once `insertPending` has run (`precedes`).
  struct Pending {
    const Stmt *anchor;
    unsigned index;
    unsigned depth;
  };
  llvm::DenseMap<const Stmt *, Pending> pendingDefs;
  /// Per block: whether it holds a loop (`sharedAcrossLoops`).
  llvm::DenseMap<const Block *, bool> holdsLoop;
  std::vector<StmtPtr> erased;
  /// The definitions to insert before each statement (themselves perhaps
  /// with definitions to insert before them), and the blocks that have
  /// some. A producer's own nest never has any when it is visited: what
  /// fuses into it comes from earlier statements, visited after it.
  llvm::DenseMap<const Stmt *, std::vector<StmtPtr>> before;
  llvm::DenseSet<Block *> touched;
  std::vector<Block *> touchedOrder;

  /// Rebuilds `block` with the pending definitions in place, each before
  /// its statement, in the order they were fused. An explicit stack: a
  /// chain of 100,000 lets nests 100,000 deep.
  void insertPending(Block &block) {
    Block out;
    out.reserve(block.size());
    std::vector<std::pair<StmtPtr, bool>> stack;
    for (StmtPtr &top : block) {
      if (!top)
        continue;
      stack.emplace_back(std::move(top), false);
      while (!stack.empty()) {
        ++work;
        auto [s, expanded] = std::move(stack.back());
        stack.pop_back();
        auto it = expanded ? before.end() : before.find(s.get());
        if (it == before.end()) {
          out.push_back(std::move(s));
          continue;
        }
        std::vector<StmtPtr> defs = std::move(it->second);
        before.erase(it);
        stack.emplace_back(std::move(s), true);
        for (size_t d = defs.size(); d-- > 0;)
          stack.emplace_back(std::move(defs[d]), false);
      }
    }
    block = std::move(out);
  }

  void noteReads(const Stmt &s) {
    llvm::SmallVector<const Buffer *, 4> read;
    forEachExprSlot(const_cast<Stmt &>(s),
                    [&](ExprPtr &e) { collectLoads(*e, read); });
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

  void indexBlock(Block &block, const Stmt *top, uint32_t scope,
                  llvm::DenseMap<const Buffer *, unsigned> &writes) {
    for (size_t i = 0; i < block.size(); ++i) {
      Stmt &s = *block[i];
      ++work;
      const Stmt *t = top ? top : &s;
      places[&s] = {&block, uint32_t(i), scope, t};
      noteReads(s);
      if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate) {
        if (++writes[s.buffer] > 1)
          otherwise.insert(s.buffer);
        noteWrite(s.buffer, *t);
      }
      for (const Buffer *b : s.inputs)
        otherwise.insert(b);
      for (const Buffer *b : s.outputs) {
        otherwise.insert(b);
        noteWrite(b, *t);
      }
      if (s.body.empty())
        continue;
      uint32_t inner = scope;
      if (s.kind == Stmt::Kind::For) {
        inner = uint32_t(scopes.size());
        scopes.push_back({scope, s.var});
      }
      indexBlock(s.body, t, inner, writes);
    }
  }

  /// The loop variables around `s`, outermost first (a definition waiting
  /// to be inserted: those of its reader).
  llvm::SmallVector<unsigned, 4> enclosing(const Stmt *s) const {
    llvm::SmallVector<unsigned, 4> vars;
    for (uint32_t at = places.lookup(s).scope; at; at = scopes[at].parent)
      vars.push_back(scopes[at].var);
    std::reverse(vars.begin(), vars.end());
    return vars;
  }

  /// A top-level statement's order in the function.
  size_t orderOf(const Stmt *top) const { return position(top); }

  /// The last top-level statement that writes `b` (through any view) is
  /// at least `top`.
  void noteWrite(const Buffer *b, const Stmt &top) {
    size_t &last = lastWriter[b->root()];
    last = std::max(last, orderOf(&top) + 1);
  }

  void indexUses() {
    // As large as the last sweep's table (a sweep fuses statements into
    // others; their count changes little), so that it does not grow
    // step by step.
    size_t expected = places.size();
    places.clear();
    places.reserve(expected);
    scopes.assign(1, {0, 0});
    lastWriter.clear();
    readers.clear();
    otherwise.clear();
    pendingDefs.clear();
    holdsLoop.clear();
    llvm::DenseMap<const Buffer *, unsigned> writes;
    indexBlock(fn.body, nullptr, 0, writes);
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
        if (!places.lookup(places.lookup(s).top).dead)
          live.push_back(s);
    return live;
  }

  /// The innermost block of a perfect nest and its loop variables, when
  /// that block ends in a store into a scratch buffer (only a scratch
  /// buffer's producer fuses; checked before any walk, as the one loop
  /// left of a fused chain has thousands of definitions); null otherwise.
  static Block *storesScratch(Stmt &s, LoopVars &vars) {
    if (s.kind != Stmt::Kind::For)
      return nullptr;
    Stmt *at = &s;
    while (at->body.size() == 1 && at->body.front()->kind == Stmt::Kind::For) {
      vars.push_back(at->var);
      at = at->body.front().get();
    }
    vars.push_back(at->var);
    Block &body = at->body;
    if (body.empty() || body.back()->kind != Stmt::Kind::Store ||
        body.back()->buffer->kind != Buffer::Kind::Scratch)
      return nullptr;
    return &body;
  }

  /// Whether a top-level statement is still shaped as a producer. When
  /// none is, another sweep would fuse nothing, and is not run: indexing
  /// the function for it was a third of fuse's time on a long chain
  /// (which fuses into one loop in one sweep).
  bool anyProducerLeft() const {
    return llvm::any_of(fn.body, [](const StmtPtr &s) {
      LoopVars vars;
      return storesScratch(*s, vars) != nullptr;
    });
  }

  /// The innermost block of a perfect nest and its loop variables, when
  /// that block is local definitions (made by earlier fusions) followed by
  /// one store into a scratch buffer; null otherwise.
  static Block *nestBody(Stmt &s, LoopVars &vars) {
    Block *found = storesScratch(s, vars);
    if (!found)
      return nullptr;
    Block &body = *found;
    llvm::SmallPtrSet<const Buffer *, 8> defined;
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
  static bool
  readsOtherLocal(const Expr &e,
                  const llvm::SmallPtrSetImpl<const Buffer *> &defined) {
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
    LoopVars vars;
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
    if (found.empty())
      return false;
    work += found.size();
    // Every load of p in each reader at one index, matching the store's.
    std::vector<Binding> bindings;
    std::vector<const Expr *> readIndices;
    for (const Stmt *r : found) {
      if (orderOf(places.lookup(r).top) <= at)
        return false;
      Stmt &reader = const_cast<Stmt &>(*r);
      const Expr *readIndex = nullptr;
      bool consistent = true;
      forEachExprSlot(reader, [&](ExprPtr &slot) {
        walkLoads(*slot, p, [&](const Expr &load) {
          if (!readIndex)
            readIndex = load.args[0].get();
          else if (!sameExpr(*readIndex, *load.args[0]))
            consistent = false;
        });
      });
      Binding binding;
      if (!readIndex || !consistent ||
          !unify(*store->index, *readIndex, vars, binding) ||
          binding.size() != vars.size())
        return false;
      bindings.push_back(std::move(binding));
      readIndices.push_back(readIndex);
    }
    std::vector<Group> groups;
    if (!groupReaders(found, readIndices, groups))
      return false;
    // Several readers in a block with loops only for a producer that
    // recomputing would also take (`sharedAcrossLoops`).
    bool shared = llvm::any_of(
        groups, [&](const Group &g) { return sharedAcrossLoops(g); });
    if ((shared || (groups.size() > 1 && !laneLoops(groups))) &&
        !recomputable(nest, *body, groups, found, readIndices, bindings))
      return false;

    // Fuse: one definition per group, before its first reader. The
    // substituted definitions are built first: the bindings point into
    // the readers' loads, which are replaced next. The local takes the
    // buffer's name, which the buffer gives up.
    std::vector<std::vector<StmtPtr>> defs(groups.size());
    for (size_t g = 0; g < groups.size(); ++g)
      for (StmtPtr &old : *body) {
        auto def = std::make_unique<Stmt>(Stmt::Kind::Store);
        def->origin = old->origin;
        def->buffer = old->buffer;
        def->index = index(0);
        def->value = substitute(*old->value, bindings[groups[g].first]);
        defs[g].push_back(std::move(def));
      }
    DType dtype = p->dtype;
    std::string name = p->name;
    fn.bufferNames.erase(name);
    deadBuffers.insert(p);
    // One local per top-level statement that reads it, so that no local
    // lives across two loops (each stays private to its loop: Parallel).
    // The producer's own locals too: the first such statement keeps
    // them, each other one gets copies.
    llvm::SmallDenseMap<const void *, Buffer *, 4> locals;
    llvm::SmallDenseMap<const void *, std::vector<Buffer *>, 4> innerLocals;
    for (size_t g = 0; g < groups.size(); ++g) {
      const void *top = passOf(groups[g]);
      if (top == &groups[g])
        top = places.lookup(found[groups[g].first]).top;
      Buffer *&local = locals[top];
      if (!local) {
        local = fn.addBuffer(Buffer::Kind::Local, dtype, {}, name);
        std::vector<Buffer *> &inner = innerLocals[top];
        for (size_t d = 0; d + 1 < body->size(); ++d) {
          Buffer *old = (*body)[d]->buffer;
          inner.push_back(locals.size() == 1
                              ? old
                              : fn.addBuffer(Buffer::Kind::Local, old->dtype,
                                             {}, old->name));
        }
      }
      const std::vector<Buffer *> &inner = innerLocals[top];
      for (size_t d = 0; d + 1 < body->size(); ++d) {
        Buffer *old = (*body)[d]->buffer;
        if (inner[d] == old)
          continue;
        for (StmtPtr &def : defs[g]) {
          if (def->buffer == old)
            def->buffer = inner[d];
          replaceLoads(def->value, old, inner[d]);
        }
      }
      for (size_t r : groups[g].members) {
        Stmt &reader = const_cast<Stmt &>(*found[r]);
        forEachExprSlot(reader,
                        [&](ExprPtr &slot) { replaceLoads(slot, p, local); });
      }
      const Stmt *first = found[groups[g].first];
      Place place = places.lookup(first);
      defs[g].back()->buffer = local;
      // Inserted when the sweep ends (an insertion now would move the
      // rest of the block each time: quadratic in a long chain).
      std::vector<StmtPtr> &pending = before[first];
      unsigned depth = pendingDepth(first) + 1;
      for (StmtPtr &def : defs[g]) {
        places[def.get()] = {place.block, place.position, place.scope,
                             place.top};
        pendingDefs[def.get()] = {first, unsigned(pending.size()), depth};
        noteReads(*def);
        pending.push_back(std::move(def));
      }
      if (touched.insert(place.block).second)
        touchedOrder.push_back(place.block);
    }
    // Its statements are dead with it (liveReaders looks at their top).
    places[&nest].dead = true;
    // Kept until the sweep ends, so that no new statement takes the
    // address of a dead one; the empty slot goes then.
    erased.push_back(std::move(fn.body[at]));
    return true;
  }

  /// The readers of a producer in one block: they read it at the same
  /// index, and one definition before the first of them serves them all.
  struct Group {
    const Block *block;
    size_t first;
    llvm::SmallVector<size_t, 2> members;
  };

  /// Groups the readers by block. Several readers in one block must read
  /// at one index; the definition goes before the first of them.
  bool groupReaders(llvm::ArrayRef<const Stmt *> found,
                    llvm::ArrayRef<const Expr *> readIndices,
                    std::vector<Group> &groups) {
    for (size_t r = 0; r < found.size(); ++r) {
      const Block *block = places.lookup(found[r]).block;
      auto it = llvm::find_if(groups,
                              [&](const Group &g) { return g.block == block; });
      if (it == groups.end()) {
        groups.push_back({block, r, {r}});
        continue;
      }
      if (!sameExpr(*readIndices[r], *readIndices[it->first]))
        return false;
      it->members.push_back(r);
    }
    for (Group &g : groups)
      for (size_t r : g.members)
        if (r != g.first && precedes(found[r], found[g.first]))
          g.first = r;
    return true;
  }

  unsigned pendingDepth(const Stmt *s) const {
    auto it = pendingDefs.find(s);
    return it == pendingDefs.end() ? 0 : it->second.depth;
  }

  /// Whether `a` comes before `b`, two statements of one block, either of
  /// them perhaps a definition still waiting to be inserted. A definition
  /// goes before its anchor, after the definitions anchored there before
  /// it: so the deeper one walks up to the other's depth (a definition
  /// precedes each of its anchors), and then both walk up until they share
  /// an anchor or reach the block. Reading a value twice in a fused chain
  /// (`v + sin(v)`), the two readers are a few anchors apart: this costs a
  /// few steps, not the chain's length.
  bool precedes(const Stmt *a, const Stmt *b) {
    unsigned depthA = pendingDepth(a), depthB = pendingDepth(b);
    for (; depthA > depthB; --depthA) {
      ++work;
      a = pendingDefs.lookup(a).anchor;
      if (a == b)
        return true;
    }
    for (; depthB > depthA; --depthB) {
      ++work;
      b = pendingDefs.lookup(b).anchor;
      if (b == a)
        return false;
    }
    for (; depthA > 0; --depthA) {
      ++work;
      Pending pa = pendingDefs.lookup(a), pb = pendingDefs.lookup(b);
      if (pa.anchor == pb.anchor)
        return pa.index < pb.index;
      a = pa.anchor;
      b = pb.anchor;
    }
    return position(a) < position(b);
  }

  /// The position of a statement of a block (not a pending definition).
  size_t position(const Stmt *s) const { return places.lookup(s).position; }

  /// Whether a group's definition would be a local live across loops: its
  /// block holds a loop (a row loop's body, say). A local live across
  /// several loops of a row can stop GCC from vectorising them (K5's
  /// gradient: "latch block not empty", 3x slower); in a block of plain
  /// statements (the body of the innermost loop, where a fused chain's
  /// definitions go) it is one more value in straight-line code.
  bool sharedAcrossLoops(const Group &g) {
    if (g.members.size() == 1)
      return false;
    auto [it, inserted] = holdsLoop.try_emplace(g.block, false);
    if (inserted)
      for (const StmtPtr &s : *g.block) {
        ++work;
        if (s && s->kind == Stmt::Kind::For) {
          it->second = true;
          break;
        }
      }
    return it->second;
  }

  /// Recompute versus store (a producer read in several passes over its
  /// elements, say by the value's sum and by the gradient's loop in a
  /// value-and-gradient function): computing the element again in each
  /// pass costs its arithmetic; storing it costs a write and a read of
  /// each element per pass, and for a buffer larger than the caches
  /// that memory traffic costs about what a few arithmetic operations
  /// or one math function do. So the producer is computed in each pass
  /// when
  ///  - its value reads only parameters, constants, its own locals and
  ///    broadcasts that nothing writes from it on (readsOnlyInputs:
  ///    recomputing it anywhere after it gives the same value, and
  ///    computing it in k passes adds no reader to any buffer that could
  ///    be recomputed in turn, so nothing multiplies down a chain), and
  ///    is cheap arithmetic when it reads a broadcast;
  ///  - each reader reads it at an index that every loop around the
  ///    reader moves (no element is computed more than once per pass,
  ///    as in a broadcast would be), its innermost loop along the
  ///    producer's innermost axis (not through a transpose);
  ///  - its cost (8 per math function, 1 per other operation) times the
  ///    extra passes is at most `recomputeBudget`.
  /// The value is the same expression each time: bit for bit the stored
  /// one.
  bool recomputable(const Stmt &nest, const Block &body,
                    llvm::ArrayRef<Group> groups,
                    llvm::ArrayRef<const Stmt *> found,
                    llvm::ArrayRef<const Expr *> readIndices,
                    llvm::ArrayRef<Binding> bindings) {
    const Stmt *innermost = &nest;
    while (innermost->body.size() == 1 &&
           innermost->body.front()->kind == Stmt::Kind::For)
      innermost = innermost->body.front().get();
    Inputs in{orderOf(&nest), innermost->var};
    for (const StmtPtr &def : body)
      if (!readsOnlyInputs(*def->value, in))
        return false;
    if (in.broadcast && in.dear)
      return false;
    unsigned cost = in.cost;
    for (size_t r = 0; r < found.size(); ++r) {
      std::set<unsigned> used;
      collectLoopVars(*readIndices[r], used);
      llvm::SmallVector<unsigned, 4> around = enclosing(found[r]);
      for (unsigned v : around)
        if (!used.count(v))
          return false;
      // Read in the order it is stored (the reader's innermost loop moves
      // along the producer's innermost axis), not through a transpose:
      // a transposed read of a stored buffer is what a matmul takes
      // as it is (PrintCpp's gradc::Transposed).
      if (!around.empty()) {
        std::set<unsigned> inner;
        collectLoopVars(*bindings[r].lookup(innermost->var), inner);
        if (!inner.count(around.back()))
          return false;
      }
    }
    llvm::SmallVector<const void *, 4> passes;
    for (const Group &g : groups)
      if (!llvm::is_contained(passes, passOf(g)))
        passes.push_back(passOf(g));
    return cost * (passes.size() - 1) <= recomputeBudget;
  }

  /// The pass over the elements that a group is in: the lane loops of one
  /// sum are one pass (the key is their stack buffer of lanes); any other
  /// group is a pass of its own (the key is the group).
  static const void *passOf(const Group &g) {
    const Block &block = *g.block;
    if (!block.empty() && block.back()->kind == Stmt::Kind::Accumulate &&
        block.back()->combiner == Combiner::Add &&
        block.back()->buffer->kind == Buffer::Kind::Stack)
      return block.back()->buffer;
    return &g;
  }

  static constexpr unsigned recomputeBudget = 16;

  /// What a producer's value reads, as `readsOnlyInputs` finds it.
  struct Inputs {
    size_t at;              ///< the producer's top-level position
    unsigned innermost;     ///< its innermost loop variable
    unsigned cost = 0;      ///< 8 per math function, 1 per other operation
    bool broadcast = false; ///< reads a row's statistic (below)
    bool dear = false;      ///< has a division or a math function
  };

  /// Whether `e` loads only parameters, constants, locals (the
  /// producer's own: nestBody checked) and *broadcasts*: scratch buffers
  /// read at an index that the producer's innermost loop does not move
  /// (a row's statistic, K5's `%d = %x - %mu`) and that no statement from
  /// the producer on writes, so that each reader after it loads the same
  /// element. A broadcast is no elementwise producer that could in turn
  /// be recomputed in each pass (Fuse reads nothing at an index that a
  /// loop around it does not move), so nothing multiplies down a chain;
  /// reading one, the producer must be cheap arithmetic (no division or
  /// math function: K5's `%d_d`, with a division, stays stored).
  bool readsOnlyInputs(const Expr &e, Inputs &in) const {
    switch (e.kind) {
    case Expr::Kind::Load:
      if (e.buffer->kind == Buffer::Kind::Scratch &&
          lastWriter.lookup(e.buffer) <= in.at &&
          !usesVar(*e.args[0], in.innermost)) {
        in.broadcast = true;
        break;
      }
      if (e.buffer->kind != Buffer::Kind::Param &&
          e.buffer->kind != Buffer::Kind::Constant &&
          e.buffer->kind != Buffer::Kind::Local)
        return false;
      break;
    case Expr::Kind::Intrinsic:
      in.cost += 8;
      in.dear = true;
      break;
    case Expr::Kind::Prim:
      in.dear |= e.op == PrimOp::Div || e.op == PrimOp::Rem;
      in.cost += 1;
      break;
    case Expr::Kind::Select:
    case Expr::Kind::Cast:
      in.cost += 1;
      break;
    default:
      break;
    }
    for (const ExprPtr &a : e.args)
      if (!readsOnlyInputs(*a, in))
        return false;
    return true;
  }

  static void collectLoopVars(const Expr &e, std::set<unsigned> &out) {
    if (e.kind == Expr::Kind::LoopVar)
      out.insert(e.var);
    for (const ExprPtr &a : e.args)
      collectLoopVars(*a, out);
  }

  /// Whether the readers are in the lane loops of one sum: each in a
  /// block of its own that ends in an accumulation with `+` into the
  /// same stack buffer (the lanes). Those blocks read disjoint elements.
  bool laneLoops(llvm::ArrayRef<Group> groups) {
    const Buffer *lanes = nullptr;
    for (const Group &g : groups) {
      const Block *block = g.block;
      if (!block || block->empty())
        return false;
      const Stmt &last = *block->back();
      if (last.kind != Stmt::Kind::Accumulate ||
          last.combiner != Combiner::Add ||
          last.buffer->kind != Buffer::Kind::Stack ||
          (lanes && last.buffer != lanes))
        return false;
      lanes = last.buffer;
    }
    return true;
  }

  static void walkLoads(const Expr &e, const Buffer *p,
                        llvm::function_ref<void(const Expr &)> f) {
    if (e.kind == Expr::Kind::Load && e.buffer == p)
      f(e);
    for (const ExprPtr &a : e.args)
      walkLoads(*a, p, f);
  }

public:
  std::vector<std::unique_ptr<Buffer>> graveyard;
};

} // namespace

static uint64_t lastWork = 0;

uint64_t loops::fuseElementwiseWork() { return lastWork; }

bool loops::fuseElementwise(LoopModule &module, std::string &) {
  lastWork = 0;
  for (auto &fn : module.functions) {
    Fuser fuser(*fn, lastWork);
    while (fuser.sweep()) {
    }
  }
  return true;
}
