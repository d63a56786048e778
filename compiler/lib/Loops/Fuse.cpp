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
//     The one exception: the lane loops of one sum (Lowering's
//     accumulateLanes: the whole chunks, then the rest) are several
//     statements R that accumulate into the same stack buffer of lanes;
//     they read disjoint elements, so each is still computed once.
//  3. Before each R, a local `%p = V[loop variables := their bindings]` is
//     inserted, R reads that local instead, and the producer nest and the
//     buffer are deleted. Repeat until nothing changes, so chains fuse.
//
// The value stored is the value computed, rounding included (V carries the
// cast to `%p`'s type), so the result is bit for bit the unfused one.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

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

/// A statement that reads a buffer, and where it sits.
struct Reader {
  Block *block;
  size_t position;
  size_t top; ///< the index of its top-level statement
};

class Fuser {
public:
  explicit Fuser(LoopFunction &fn) : fn(fn) {}

  /// Fuses one producer; false when there is none left.
  bool fuseOne() {
    for (size_t i = 0; i < fn.body.size(); ++i)
      if (tryProducer(i))
        return true;
    return false;
  }

private:
  LoopFunction &fn;

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

  /// Whether anything but `store` writes `p`, or a call, kernel or view
  /// uses it.
  bool usedOtherwise(const Buffer *p, const Stmt *store) {
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base == p)
        return true;
    bool other = false;
    walk(fn.body, [&](const Stmt &s) {
      if ((s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate) &&
          s.buffer == p && &s != store)
        other = true;
      for (const Buffer *b : s.inputs)
        other = other || b == p;
      for (const Buffer *b : s.outputs)
        other = other || b == p;
    });
    return other;
  }

  void findReaders(Block &block, const Buffer *p, std::vector<Reader> &out,
                   size_t top = ~size_t(0)) {
    for (size_t i = 0; i < block.size(); ++i) {
      Stmt &s = *block[i];
      size_t at = &block == &fn.body ? i : top;
      bool reads = false;
      for (ExprPtr *e : exprSlots(s))
        reads = reads || readsBuffer(**e, p);
      if (reads)
        out.push_back({&block, i, at});
      findReaders(s.body, p, out, at);
    }
  }

  bool tryProducer(size_t at) {
    Stmt &nest = *fn.body[at];
    std::set<unsigned> vars;
    Block *body = nestBody(nest, vars);
    if (!body)
      return false;
    Stmt *store = body->back().get();
    Buffer *p = store->buffer;
    if (p->kind != Buffer::Kind::Scratch || usedOtherwise(p, store))
      return false;
    for (const StmtPtr &def : *body)
      if (readsBuffer(*def->value, p))
        return false;
    std::vector<Reader> readers;
    findReaders(fn.body, p, readers);
    if (readers.empty() || (readers.size() > 1 && !laneLoops(readers)))
      return false;
    // Every load of p in each reader at one index, matching the store's.
    std::vector<Binding> bindings;
    for (const Reader &r : readers) {
      if (r.top <= at)
        return false;
      Stmt &reader = *(*r.block)[r.position];
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
      bindings.push_back(std::move(binding));
    }

    // Fuse. The substituted definitions are built first: the binding
    // points into the reader's loads, which are replaced next. The local
    // takes the buffer's name once the buffer is gone.
    std::vector<std::vector<StmtPtr>> defs(readers.size());
    for (size_t r = 0; r < readers.size(); ++r)
      for (StmtPtr &old : *body) {
        auto def = std::make_unique<Stmt>(Stmt::Kind::Store);
        def->origin = old->origin;
        def->buffer = old->buffer;
        def->index = index(0);
        def->value = substitute(*old->value, bindings[r]);
        defs[r].push_back(std::move(def));
      }
    DType dtype = p->dtype;
    std::string name = p->name;
    eraseBuffer(p);
    Buffer *local = fn.addBuffer(Buffer::Kind::Local, dtype, {}, name);
    // Later readers first, so that an insertion moves no reader still to
    // come.
    for (size_t r = readers.size(); r-- > 0;) {
      Block &block = *readers[r].block;
      size_t position = readers[r].position;
      Stmt &reader = *block[position];
      defs[r].back()->buffer = local;
      for (ExprPtr *slot : exprSlots(reader))
        replaceLoads(*slot, p, local);
      for (StmtPtr &def : defs[r])
        block.insert(block.begin() + position++, std::move(def));
    }
    fn.body.erase(fn.body.begin() + at);
    return true;
  }

  /// Whether the readers are the lane loops of one sum: accumulations
  /// with `+` into one stack buffer, which read disjoint elements.
  static bool laneLoops(const std::vector<Reader> &readers) {
    const Buffer *lanes = nullptr;
    for (const Reader &r : readers) {
      const Stmt &s = *(*r.block)[r.position];
      if (s.kind != Stmt::Kind::Accumulate || s.combiner != Combiner::Add ||
          s.buffer->kind != Buffer::Kind::Stack || (lanes && s.buffer != lanes))
        return false;
      lanes = s.buffer;
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

  void eraseBuffer(const Buffer *p) {
    for (auto it = fn.buffers.begin(); it != fn.buffers.end(); ++it)
      if (it->get() == p) {
        // Keep the pointer alive until the loads are replaced: move it
        // to the graveyard.
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
    while (fuser.fuseOne()) {
    }
  }
  return true;
}
