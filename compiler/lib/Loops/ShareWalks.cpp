//===- ShareWalks.cpp - An elementwise loop in the lanes of a sum ---------===//
//
// The loop pass `share`: a value-and-gradient function walks the same
// elements twice, once for the value's sum and once for the gradient's
// elementwise loop, and computes the same math functions of them in both
// (K2: sigmoid, tanh, exp and sin of each x, which `fuse` recomputes in
// each pass rather than storing four temporaries of 4 MB). In a block
//
//   N:  for %c < E / W { lane loops }         (the chunks of a W-lane sum)
//   T:  for %r < E % W { S' }                 (its rest, after N)
//       ...
//   Q:  for %j < E { B }                      (after T)
//
// Q becomes `B[%j := %c * W + %l]` at the end of the body of N's last lane
// loop (`for %l < W { S }`) and `B[%j := E - E % W + %r]` at the end of
// S', and is deleted, when
//
//  1. Q's body is stores (no loop, check, call or accumulation), each of a
//     local of Q (set in B before B reads it) or of a scratch or output
//     buffer (no view) at exactly `%j`, which B does not read;
//  2. N's body is lane loops (loops::isLaneLoop), T loops over E % W;
//  3. N, T and every statement between T and Q touch no buffer that Q
//     writes, and write nothing that Q reads;
//  4. B computes a math function of an element that the lane loop also
//     computes (the same intrinsic expression once %j is substituted):
//     otherwise nothing is shared, and a math function added to a lane
//     loop has made it slower (K3's exp: SinkProducers.cpp).
//
// Iteration j of Q then runs in the order of j (the chunks, then the
// rest) right after the sum's work on element j; it reads what it read
// before (nothing it reads is written by N, T or the statements it now
// runs before) and writes what none of them touch: every value, and so
// every bit, is the one before, and the sum adds in its own order. The
// lane loop stays a lane loop (isLaneLoop allows stores), which the
// printers vectorise across its lanes, and the C++ compiler or LLVM
// computes each shared function once (gradc's math functions are inline
// and pure: value numbering merges the two calls). The loop Q loses what
// `parallel` would give it, threads; one walk with the functions shared
// is what a hand-written value-and-gradient does (K2, docs/Performance.md).
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

/// The elementwise loop Q of condition 1: what it writes and reads.
struct Follower {
  llvm::DenseSet<const Buffer *> writes, reads;
};

/// How many statements after T a loop Q may be.
constexpr size_t window = 8;

class Sharer {
public:
  explicit Sharer(LoopFunction &fn) {
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias && b->base)
        viewed.insert(b->base->root());
  }

  void run(Block &block) {
    for (size_t n = 0; n < block.size(); ++n)
      shareAfter(block, n);
    for (StmtPtr &s : block)
      run(s->body);
  }

private:
  llvm::DenseSet<const Buffer *> viewed;

  /// Condition 1.
  bool follower(const Stmt &q, Follower &out) const {
    if (q.kind != Stmt::Kind::For || q.parallel || q.body.empty())
      return false;
    llvm::DenseSet<const Buffer *> localsSet;
    bool ok = true;
    for (const StmtPtr &s : q.body) {
      if (s->kind != Stmt::Kind::Store)
        return false;
      walkExprs(*s, [&](const Expr &e) {
        if (e.kind != Expr::Kind::Load)
          return;
        const Buffer *b = e.buffer->root();
        // A local of Q is read only after Q set it.
        if (b->kind == Buffer::Kind::Local && !localsSet.count(b) &&
            llvm::any_of(q.body,
                         [&](const StmtPtr &t) { return t->buffer == b; }))
          ok = false;
        out.reads.insert(b);
      });
      Buffer *b = s->buffer;
      if (b->kind == Buffer::Kind::Local) {
        localsSet.insert(b);
        out.writes.insert(b);
        continue;
      }
      if ((b->kind != Buffer::Kind::Scratch &&
           b->kind != Buffer::Kind::Output) ||
          viewed.count(b) || b->root() != b ||
          s->index->kind != Expr::Kind::LoopVar || s->index->var != q.var)
        return false;
      out.writes.insert(b);
    }
    for (const Buffer *b : out.writes)
      if (b->kind != Buffer::Kind::Local && out.reads.count(b))
        return false;
    return ok;
  }

  /// Condition 3 for the statements `a`.
  static bool clearOf(const BufferAccesses &a, const Follower &q) {
    if (a.calls)
      return false;
    for (const Buffer *b : q.writes)
      if (a.reads.count(b) || a.writes.count(b))
        return false;
    for (const Buffer *b : a.writes)
      if (q.reads.count(b))
        return false;
    return true;
  }

  /// The math functions a statement computes, and those in it.
  static void intrinsics(const Stmt &s, std::vector<const Expr *> &out) {
    walkExprs(s, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Intrinsic)
        out.push_back(&e);
    });
    for (const StmtPtr &c : s.body)
      intrinsics(*c, out);
  }

  /// Condition 4: a math function of `copies` that `lane` computes too.
  static bool sharesMath(const Block &copies, const Stmt &lane) {
    std::vector<const Expr *> inLane, inCopies;
    intrinsics(lane, inLane);
    for (const StmtPtr &c : copies)
      intrinsics(*c, inCopies);
    return llvm::any_of(inCopies, [&](const Expr *e) {
      return llvm::any_of(inLane,
                          [&](const Expr *l) { return sameExpr(*e, *l); });
    });
  }

  /// Moves each elementwise loop after the sum whose chunks are block[n]
  /// into its lane loops, as the header says.
  void shareAfter(Block &block, size_t n) {
    Stmt &chunk = *block[n];
    if (chunk.kind != Stmt::Kind::For || chunk.body.empty() ||
        !llvm::all_of(chunk.body,
                      [](const StmtPtr &s) { return isLaneLoop(*s); }))
      return;
    const Expr &chunks = *chunk.extent;
    if (chunks.kind != Expr::Kind::Prim || chunks.op != PrimOp::Div ||
        chunks.args[1]->kind != Expr::Kind::Const)
      return;
    int64_t w = int64_t(chunks.args[1]->value);
    if (w != ir::reductionLanes && w != ir::reductionLanesF32)
      return;
    const Expr &extent = *chunks.args[0];
    ExprPtr rest = prim(PrimOp::Rem, extent.clone(), index(w));
    Stmt &lane = *chunk.body.back();
    if (!isIndexConst(*lane.extent, w))
      return;
    // T: the first loop over the rest after N.
    size_t t = n + 1;
    while (t < block.size() && !(block[t]->kind == Stmt::Kind::For &&
                                 sameExpr(*block[t]->extent, *rest)))
      ++t;
    if (t == block.size())
      return;
    Stmt &tail = *block[t];
    BufferAccesses sum, between;
    sum.add(chunk);
    for (size_t i = n + 1; i <= t; ++i)
      sum.add(*block[i]);
    // Q among the next few statements (a value's last additions and its
    // store come between): a bounded look, so the pass stays linear.
    for (size_t q = t + 1; q < block.size() && q <= t + window;) {
      Stmt &cand = *block[q];
      Follower f;
      if (cand.kind == Stmt::Kind::For && sameExpr(*cand.extent, extent) &&
          follower(cand, f) && clearOf(sum, f) && clearOf(between, f)) {
        ExprPtr inChunk =
            prim(PrimOp::Add, prim(PrimOp::Mul, loopVar(chunk.var), index(w)),
                 loopVar(lane.var));
        Block copies = substitutedStores(cand.body, cand.var, *inChunk);
        if (sharesMath(copies, lane)) {
          ExprPtr inRest = prim(
              PrimOp::Add, prim(PrimOp::Sub, extent.clone(), rest->clone()),
              loopVar(tail.var));
          Block restCopies = substitutedStores(cand.body, cand.var, *inRest);
          for (StmtPtr &c : copies)
            lane.body.push_back(std::move(c));
          for (StmtPtr &c : restCopies)
            tail.body.push_back(std::move(c));
          // Its accesses now belong to the sum's loops.
          sum.add(cand);
          block.erase(block.begin() + q);
          continue;
        }
      }
      between.add(cand);
      ++q;
    }
  }
};

} // namespace

bool loops::shareWalks(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    Sharer(*fn).run(fn->body);
  return true;
}
