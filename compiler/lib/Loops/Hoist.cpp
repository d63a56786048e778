//===- Hoist.cpp - Loop-invariant local definitions out of inner loops ----===//
//
// The loop pass `hoist` (loop-invariant code motion): fusion computes a
// producer where it is read, so a value of the row (layer norm's
// `sqrt(var + eps)`, a gradient's `d_var / n`) is computed again for
// every element of the row, inside the inner loop; a C++ compiler may not
// move it out (std::sqrt sets errno; a load of a scratch buffer may alias
// the stores of the loop), and K5's `vsqrtps` per element took 40% of its
// forward. A definition `%l = V` of a local, directly in the body of a
// loop L that is not at top level, moves to just before L when
//
//  1. V uses neither L's variable nor an integer division or remainder
//     (which could trap where L runs no iteration);
//  2. each buffer V loads is written nowhere in L, and is a local or is
//     stored at the same index by a statement of the block that L is in,
//     before L (so the element exists: the load stays in bounds when L
//     runs no iteration);
//  3. this definition is the only statement in L that writes %l, and
//     every read of %l in the function follows a definition of %l in
//     program order (a fused local: it holds no value across loops, so
//     that L running no iteration changes nothing that is read).
//
// Then every read of %l in L sees V as before, computed from the same
// values. Inner loops first, so a value moves out of several levels
// (`for %c < C / 8 { for %l < 8 { ... } }`); statements after a moved one
// may follow it (`%3 = sqrt(%2)` after `%2 = %var + 1e-05`). Top-level
// loops keep their definitions: a local set outside a loop is shared by
// its iterations, which would keep the `parallel` pass from running it on
// threads. Only statements move: bit for bit the same results.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>

using namespace gradc;
using namespace gradc::loops;

namespace {

bool integerDivision(const Expr &e) {
  if (e.kind == Expr::Kind::Prim &&
      (e.op == PrimOp::Div || e.op == PrimOp::Rem) &&
      (e.type == ScalarType::I32 || e.type == ScalarType::Index))
    return true;
  for (const ExprPtr &a : e.args)
    if (integerDivision(*a))
      return true;
  return false;
}

class Hoister {
public:
  explicit Hoister(LoopFunction &fn) : fn(fn) {}

  void run() {
    findFusedLocals();
    for (StmtPtr &s : fn.body)
      if (s->kind == Stmt::Kind::For)
        hoistInto(s->body);
  }

private:
  LoopFunction &fn;
  /// The locals each of whose reads follows a definition (condition 3).
  llvm::DenseSet<const Buffer *> fused;

  /// Walks the function in program order: a read of a local with no
  /// definition before it (in its block or one around it) disqualifies
  /// the local. A definition in a loop does not count after the loop.
  void findFusedLocals() {
    llvm::DenseSet<const Buffer *> bad;
    llvm::DenseSet<const Buffer *> defined;
    std::function<void(const Block &)> visit = [&](const Block &block) {
      llvm::SmallVector<const Buffer *, 8> here;
      for (const StmtPtr &s : block) {
        walkExprs(*s, [&](const Expr &e) {
          if (e.kind == Expr::Kind::Load &&
              e.buffer->kind == Buffer::Kind::Local && !defined.count(e.buffer))
            bad.insert(e.buffer);
        });
        if (s->kind == Stmt::Kind::Accumulate && s->buffer &&
            s->buffer->kind == Buffer::Kind::Local && !defined.count(s->buffer))
          bad.insert(s->buffer);
        for (const Buffer *b : s->outputs)
          if (b->kind == Buffer::Kind::Local)
            bad.insert(b);
        for (const Buffer *b : s->inputs)
          if (b->kind == Buffer::Kind::Local)
            bad.insert(b);
        visit(s->body);
        if (s->kind == Stmt::Kind::Store &&
            s->buffer->kind == Buffer::Kind::Local &&
            defined.insert(s->buffer).second)
          here.push_back(s->buffer);
      }
      for (const Buffer *b : here)
        defined.erase(b);
    };
    visit(fn.body);
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Local && !bad.count(b.get()))
        fused.insert(b.get());
  }

  /// The indices at which the statements of a block before the current
  /// one store into each buffer (by root; views at offset 0 only).
  using Stored =
      llvm::DenseMap<const Buffer *, llvm::SmallVector<const Expr *, 2>>;

  /// Moves the invariant definitions of each loop of `block` (after those
  /// of the loops inside it) to just before that loop.
  void hoistInto(Block &block) {
    Stored stored;
    for (size_t i = 0; i < block.size(); ++i) {
      Stmt &s = *block[i];
      if (s.kind == Stmt::Kind::Store && zeroOffsets(s.buffer))
        stored[s.buffer->root()].push_back(s.index.get());
      if (s.kind != Stmt::Kind::For)
        continue;
      hoistInto(s.body);
      std::vector<StmtPtr> moved = invariants(s, stored);
      size_t n = moved.size();
      block.insert(block.begin() + i, std::make_move_iterator(moved.begin()),
                   std::make_move_iterator(moved.end()));
      i += n;
    }
  }

  static bool zeroOffsets(const Buffer *b) {
    for (; b->kind == Buffer::Kind::Alias && b->base; b = b->base)
      if (!b->offset || !isIndexConst(*b->offset, 0))
        return false;
    return true;
  }

  /// Takes the definitions that may leave `loop` out of it.
  std::vector<StmtPtr> invariants(Stmt &loop, const Stored &stored) {
    llvm::DenseMap<const Buffer *, unsigned> writes;
    walk(loop.body, [&](const Stmt &s) {
      if (s.buffer &&
          (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate))
        ++writes[s.buffer->root()];
      for (const Buffer *b : s.outputs)
        ++writes[b->root()];
    });
    std::vector<StmtPtr> moved;
    for (size_t k = 0; k < loop.body.size();) {
      Stmt &d = *loop.body[k];
      if (!movable(d, loop, writes, stored)) {
        ++k;
        continue;
      }
      writes.erase(d.buffer);
      moved.push_back(std::move(loop.body[k]));
      loop.body.erase(loop.body.begin() + k);
    }
    return moved;
  }

  bool movable(const Stmt &d, const Stmt &loop,
               const llvm::DenseMap<const Buffer *, unsigned> &writes,
               const Stored &stored) {
    if (d.kind != Stmt::Kind::Store || d.buffer->kind != Buffer::Kind::Local ||
        !fused.count(d.buffer) || writes.lookup(d.buffer) != 1 ||
        usesVar(*d.value, loop.var) || integerDivision(*d.value))
      return false;
    bool ok = true;
    walkExprs(d, [&](const Expr &e) {
      if (!ok || e.kind != Expr::Kind::Load)
        return;
      const Buffer *root = e.buffer->root();
      if (writes.count(root)) {
        ok = false;
        return;
      }
      if (e.buffer->kind == Buffer::Kind::Local)
        return;
      // The element was stored before the loop, in this block.
      auto it = stored.find(root);
      ok = zeroOffsets(e.buffer) && it != stored.end() &&
           llvm::any_of(it->second, [&](const Expr *index) {
             return sameExpr(*index, *e.args[0]);
           });
    });
    return ok;
  }
};

} // namespace

bool loops::hoistInvariants(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    Hoister(*fn).run();
  return true;
}
