//===- PairChunks.cpp - Two chunks of an f64-lane sum in one step ---------===//
//
// The loop pass `pair`. A sum of f32 terms in the default order adds them
// to 8 f64 lanes (docs/IR.md, "Numbers"): chunk c adds element 8c + l to
// lane l. The printers vectorise the lane loop across its 8 lanes, so the
// f32 work of a term (K2's sigmoid, tanh, exp and sin; K3's exp) runs 8
// floats at a time: half a 512-bit register, where the same loop with 16
// f32 lanes (accumulate = "f32") runs 16 and took 0.6x the time (K2's
// forward, LLVM backend: 3.0 against 1.6 ms). In a block
//
//   N:  for %c < X { for %l < 8 { S; %lanes[%l] += V } }
//
// with every element index of S and V written `%c * 8 + %l`, N becomes
//
//   for %p < X / 2 {
//     for %k < 16 { S'; %terms[%k] = V' }          (element %p * 16 + %k)
//     for %a < 8 { %lanes[%a] += %terms[%a] }
//     for %b < 8 { %lanes[%b] += %terms[8 + %b] }
//   }
//   for %c < X % 2 { for %l < 8 { S; %lanes[%l] += V } }   (%c := X/2*2 + %c)
//
// when
//
//  1. N is a loop, not parallel, whose body is one lane loop
//     (loops::isLaneLoop) over 8 lanes, and X, if known, is at least 2;
//  2. the lane loop's body is stores and one addition into a stack buffer
//     of f64 lanes at the lane's index, which nothing in it reads;
//  3. it writes no buffer but locals that it also reads (so that running
//     element 8c + 8 + l before 8c + l + 1 changes nothing it reads);
//  4. %c and %l appear only as `%c * 8 + %l`;
//  5. it computes an f32 math function: a term of loads and arithmetic
//     gains nothing from 16 at a time and costs a second copy of the body.
//
// Lane l still adds the terms of elements 8c + l in increasing c, each the
// f64 value it was (stored in `terms` exactly, an f64 into f64), so every
// sum, and every bit, is the one before. The 16-element loop is a lane
// loop (isLaneLoop: 16 lanes stored as f64), which both printers vectorise
// as 16 floats, the terms widened to two vectors of 8 doubles.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "gradc/IR/Interpreter.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

constexpr int64_t lanes = ir::reductionLanes;
constexpr int64_t paired = 2 * ir::reductionLanes;

/// Whether `e` is `%c * W + %l`.
bool isElement(const Expr &e, unsigned c, int64_t w, unsigned l) {
  return e.kind == Expr::Kind::Prim && e.op == PrimOp::Add &&
         e.args[0]->kind == Expr::Kind::Prim && e.args[0]->op == PrimOp::Mul &&
         e.args[0]->args[0]->kind == Expr::Kind::LoopVar &&
         e.args[0]->args[0]->var == c && isIndexConst(*e.args[0]->args[1], w) &&
         e.args[1]->kind == Expr::Kind::LoopVar && e.args[1]->var == l;
}

/// `e` with each `%c * 8 + %l` replaced by `by`.
ExprPtr replaceElement(const Expr &e, unsigned c, unsigned l, const Expr &by) {
  if (isElement(e, c, lanes, l))
    return by.clone();
  ExprPtr copy = e.cloneNode();
  for (const ExprPtr &a : e.args)
    copy->args.push_back(replaceElement(*a, c, l, by));
  return copy;
}

/// The lanes' addition of condition 2, or null.
const Stmt *laneSum(const Stmt &lane) {
  const Stmt *sum = nullptr;
  for (const StmtPtr &s : lane.body) {
    if (s->kind == Stmt::Kind::Store)
      continue;
    const Buffer *b = s->buffer;
    if (s->kind != Stmt::Kind::Accumulate || sum ||
        s->combiner != Combiner::Add || b->kind != Buffer::Kind::Stack ||
        b->dtype != DType::F64 || s->index->kind != Expr::Kind::LoopVar ||
        s->index->var != lane.var)
      return nullptr;
    sum = s.get();
  }
  return sum;
}

/// Conditions 2 (nothing reads the lanes), 3 and 5.
bool pairable(const Stmt &lane, const Stmt &sum) {
  BufferAccesses a;
  a.add(lane);
  if (a.reads.count(sum.buffer->root()))
    return false;
  for (const Buffer *b : a.writes)
    if (b->kind != Buffer::Kind::Local && b != sum.buffer && a.reads.count(b))
      return false;
  bool math = false;
  for (const StmtPtr &s : lane.body)
    walkExprs(*s, [&](const Expr &e) {
      math |= e.kind == Expr::Kind::Intrinsic && e.type == ScalarType::F32;
    });
  return math;
}

class Pairer {
public:
  explicit Pairer(LoopFunction &fn) : fn(fn) {}

  void run(Block &block) {
    for (StmtPtr &s : block)
      run(s->body);
    for (size_t n = 0; n < block.size(); ++n) {
      StmtPtr pairs = pair(*block[n]);
      if (!pairs)
        continue;
      // The odd chunk, if any, after the pairs; none when X is known even.
      bool none = isIndexConst(*block[n]->extent, 0);
      block.insert(block.begin() + n, std::move(pairs));
      ++n;
      if (none) {
        block.erase(block.begin() + n);
        --n;
      }
    }
  }

private:
  LoopFunction &fn;

  /// The loop of pairs that replaces N's first X / 2 * 2 chunks, N made
  /// the odd chunk; null (N untouched) if the header's conditions fail.
  StmtPtr pair(Stmt &chunk) {
    if (chunk.kind != Stmt::Kind::For || chunk.parallel ||
        chunk.body.size() != 1)
      return nullptr;
    const Expr &x = *chunk.extent;
    if (x.kind == Expr::Kind::Const && x.value < 2)
      return nullptr;
    Stmt &lane = *chunk.body[0];
    if (!isLaneLoop(lane) || !isIndexConst(*lane.extent, lanes))
      return nullptr;
    const Stmt *sum = laneSum(lane);
    if (!sum || !pairable(lane, *sum))
      return nullptr;
    unsigned p = fn.numVars, k = fn.numVars + 1;
    ExprPtr element = prim(
        PrimOp::Add, prim(PrimOp::Mul, loopVar(p), index(paired)), loopVar(k));
    Block terms;
    size_t sumAt = 0;
    for (const StmtPtr &s : lane.body) {
      auto t = std::make_unique<Stmt>(Stmt::Kind::Store);
      t->origin = s->origin;
      t->buffer = s->buffer;
      t->index = replaceElement(*s->index, chunk.var, lane.var, *element);
      t->value = replaceElement(*s->value, chunk.var, lane.var, *element);
      if (s.get() == sum) {
        sumAt = terms.size();
        t->index = loopVar(k);
      }
      // Condition 4.
      if (usesVar(*t->index, chunk.var) || usesVar(*t->value, chunk.var) ||
          usesVar(*t->index, lane.var) || usesVar(*t->value, lane.var))
        return nullptr;
      terms.push_back(std::move(t));
    }
    fn.numVars += 2;
    Buffer *termsBuffer = fn.addBuffer(Buffer::Kind::Stack, DType::F64,
                                       {Dim::known(paired)}, "terms");
    termsBuffer->pairedTerms = true;
    terms[sumAt]->buffer = termsBuffer;

    auto pairs = loop(chunk, half(x, PrimOp::Div), p);
    auto wide = loop(lane, index(paired), k);
    wide->body = std::move(terms);
    pairs->body.push_back(std::move(wide));
    for (int64_t h = 0; h < 2; ++h)
      pairs->body.push_back(addHalf(*sum, termsBuffer, h));

    // N keeps the odd chunk: %c := X / 2 * 2 + %c, X % 2 times.
    ExprPtr first =
        prim(PrimOp::Add, prim(PrimOp::Mul, half(x, PrimOp::Div), index(2)),
             loopVar(chunk.var));
    for (StmtPtr &s : lane.body)
      forEachExprSlot(
          *s, [&](ExprPtr &e) { e = substituteVar(*e, chunk.var, *first); });
    chunk.extent = half(x, PrimOp::Rem);
    return pairs;
  }

  /// X / 2 or X % 2, folded when X is known; (E / W) / 2 is E / 2W
  /// (E, an extent, is not negative).
  static ExprPtr half(const Expr &x, PrimOp op) {
    if (x.kind == Expr::Kind::Const) {
      int64_t n = int64_t(x.value);
      return index(op == PrimOp::Div ? n / 2 : n % 2);
    }
    if (op == PrimOp::Div && x.kind == Expr::Kind::Prim &&
        x.op == PrimOp::Div && x.args[1]->kind == Expr::Kind::Const)
      return prim(op, x.args[0]->clone(), index(2 * int64_t(x.args[1]->value)));
    return prim(op, x.clone(), index(2));
  }

  StmtPtr loop(const Stmt &like, ExprPtr extent, unsigned var) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::For);
    s->origin = like.origin;
    s->var = var;
    s->extent = std::move(extent);
    return s;
  }

  /// `for %a < 8 { %lanes[%a] += %terms[8h + %a] }`.
  StmtPtr addHalf(const Stmt &sum, Buffer *terms, int64_t h) {
    unsigned a = fn.numVars++;
    auto add = std::make_unique<Stmt>(Stmt::Kind::Accumulate);
    add->origin = sum.origin;
    add->combiner = Combiner::Add;
    add->buffer = sum.buffer;
    add->index = loopVar(a);
    add->value = load(terms, prim(PrimOp::Add, index(h * lanes), loopVar(a)));
    auto l = loop(sum, index(lanes), a);
    l->body.push_back(std::move(add));
    return l;
  }
};

} // namespace

bool loops::pairChunks(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    Pairer(*fn).run(fn->body);
  return true;
}
