//===- LoopsTest.cpp - The loop IR's verifier and evaluator ---------------===//
//
// What textual tests cannot reach: loop IR built by hand as a buggy pass
// would build it (a loop variable outside its loop, a store of the wrong
// type, a write into a parameter, an unwritten output, an unknown size
// name), each of which the verifier must name; and the evaluator's
// bounds check, which turns an out-of-bounds access into an error.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <thread>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// f(x: f32[N]) -> f32[N] with y[i] = x[i] for i < N: valid.
struct Copy {
  LoopModule module;
  LoopFunction *fn;
  Buffer *x, *y;

  Copy() {
    module.functions.push_back(std::make_unique<LoopFunction>());
    fn = module.functions.back().get();
    fn->name = "f";
    fn->sizeNames = {"N"};
    x = fn->addBuffer(Buffer::Kind::Param, DType::F32, {Dim::named("N")}, "x");
    y = fn->addBuffer(Buffer::Kind::Output, DType::F32, {Dim::named("N")}, "y");
    fn->params.push_back(x);
    fn->outputs.push_back(y);
  }

  /// for %i0 < extent { target[index] = value }
  void addLoop(ExprPtr extent, Buffer *target, ExprPtr idx, ExprPtr value) {
    auto loop = std::make_unique<Stmt>(Stmt::Kind::For);
    loop->var = fn->numVars++;
    loop->extent = std::move(extent);
    auto store = std::make_unique<Stmt>(Stmt::Kind::Store);
    store->buffer = target;
    store->index = std::move(idx);
    store->value = std::move(value);
    loop->body.push_back(std::move(store));
    fn->body.push_back(std::move(loop));
  }

  std::string verify() {
    std::string error;
    return verifyLoops(module, error) ? "" : error;
  }
};

TEST(LoopsVerifier, AcceptsAValidCopy) {
  Copy c;
  c.addLoop(sizeRef("N"), c.y, loopVar(0), load(c.x, loopVar(0)));
  EXPECT_EQ(c.verify(), "");
  EXPECT_TRUE(c.fn->isParamRead(0));
}

TEST(LoopsVerifier, RejectsALoopVariableOutsideItsLoop) {
  Copy c;
  c.addLoop(sizeRef("N"), c.y, loopVar(0), load(c.x, loopVar(0)));
  auto store = std::make_unique<Stmt>(Stmt::Kind::Store);
  store->buffer = c.y;
  store->index = loopVar(0);
  store->value = constant(ScalarType::F32, 1);
  c.fn->body.push_back(std::move(store));
  EXPECT_EQ(c.verify(), "in function 'f': %i0 is used outside its loop");
}

TEST(LoopsVerifier, RejectsAStoreOfTheWrongType) {
  Copy c;
  c.addLoop(sizeRef("N"), c.y, loopVar(0), constant(ScalarType::F64, 1));
  EXPECT_EQ(c.verify(), "in function 'f': a store of f64 into 'y' of f32");
}

TEST(LoopsVerifier, RejectsAWriteIntoAParameter) {
  Copy c;
  c.addLoop(sizeRef("N"), c.x, loopVar(0), constant(ScalarType::F32, 0));
  c.addLoop(sizeRef("N"), c.y, loopVar(1), load(c.x, loopVar(1)));
  EXPECT_EQ(c.verify(), "in function 'f': a store into read-only buffer 'x'");
}

TEST(LoopsVerifier, RejectsAnUnwrittenOutput) {
  Copy c;
  EXPECT_EQ(c.verify(), "in function 'f': output 'y' is never written");
}

TEST(LoopsVerifier, RejectsAnUnknownSizeAndMixedTypes) {
  Copy c;
  c.addLoop(sizeRef("M"), c.y, loopVar(0), load(c.x, loopVar(0)));
  EXPECT_EQ(c.verify(),
            "in function 'f': size 'M' is not a size of the function");
  Copy d;
  d.addLoop(
      sizeRef("N"), d.y, loopVar(0),
      prim(PrimOp::Add, load(d.x, loopVar(0)), constant(ScalarType::F64, 1)));
  EXPECT_EQ(d.verify(),
            "in function 'f': operands of '+' have types f32 and f64");
}

/// A call of f from g whose output has an offset: the per-step output of a
/// loop (LowerControl.cpp) must have one offset per output, of type index.
TEST(LoopsVerifier, RejectsOutputOffsetsThatDoNotFitTheOutputs) {
  Copy c;
  c.addLoop(sizeRef("N"), c.y, loopVar(0), load(c.x, loopVar(0)));
  auto &g = *c.module.functions.emplace_back(std::make_unique<LoopFunction>());
  g.name = "g";
  g.sizeNames = {"N"};
  Buffer *x =
      g.addBuffer(Buffer::Kind::Param, DType::F32, {Dim::named("N")}, "x");
  Buffer *z = g.addBuffer(Buffer::Kind::Output, DType::F32,
                          {Dim::known(2), Dim::named("N")}, "z");
  g.params.push_back(x);
  g.outputs.push_back(z);
  auto call = [&](ExprPtr offset) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::Call);
    s->callee = "f";
    s->inputs.push_back(x);
    s->outputs.push_back(z);
    if (offset)
      s->operands.push_back(std::move(offset));
    s->sizeArgs.emplace_back("N", sizeRef("N"));
    return s;
  };
  g.body.push_back(call(nullptr));
  g.body.push_back(call(sizeRef("N")));
  EXPECT_EQ(c.verify(), "");
  g.body.back()->operands.push_back(index(0));
  EXPECT_EQ(c.verify(), "in function 'g': a call of 'f' has 2 output offsets "
                        "for 1 outputs");
  g.body.back() = call(constant(ScalarType::I32, 1));
  EXPECT_NE(c.verify(), "");
}

TEST(LoopsEvaluator, ReportsAnOutOfBoundsAccess) {
  Copy c;
  // y[i] = x[i + 1] reads one past the end.
  c.addLoop(sizeRef("N"), c.y, loopVar(0),
            load(c.x, prim(PrimOp::Add, loopVar(0), index(1))));
  ASSERT_EQ(c.verify(), "");
  ir::Tensor x;
  x.dtype = DType::F32;
  x.shape = {2};
  x.data = {1, 2};
  std::vector<ir::Tensor> results;
  std::string error;
  EXPECT_FALSE(evaluateLoops(c.module, "f", {x}, results, error));
  EXPECT_EQ(error, "in function 'f': access out of bounds: %x[2] of 2 "
                   "element(s)");
}

TEST(LoopsEvaluator, RunsTheCopyAndBindsSizes) {
  Copy c;
  c.addLoop(sizeRef("N"), c.y, loopVar(0), load(c.x, loopVar(0)));
  ir::Tensor x;
  x.dtype = DType::F32;
  x.shape = {3};
  x.data = {1, -0.0, 2};
  std::vector<ir::Tensor> results;
  std::string error;
  ASSERT_TRUE(evaluateLoops(c.module, "f", {x}, results, error)) << error;
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].shape, std::vector<int64_t>({3}));
  EXPECT_EQ(results[0].data[0], 1);
  EXPECT_TRUE(std::signbit(results[0].data[1]));
}

TEST(LoopsIR, IndexArithmeticFolds) {
  ExprPtr e =
      prim(PrimOp::Add, prim(PrimOp::Mul, loopVar(0), index(1)), index(0));
  EXPECT_EQ(e->kind, Expr::Kind::LoopVar);
  ExprPtr k = prim(PrimOp::Mul, index(3), index(4));
  EXPECT_TRUE(isIndexConst(*k, 12));
  Shape s = {Dim::known(3), Dim::named("N"), Dim::known(2)};
  ExprPtr n = extentOf(s);
  ASSERT_EQ(n->kind, Expr::Kind::Prim);
  EXPECT_TRUE(isIndexConst(*n->args[0], 6));
  EXPECT_TRUE(isIndexConst(*extentOf({Dim::known(0), Dim::named("N")}), 0));
}

// Expressions, statements and buffers come from free lists of each thread
// (LoopIR.cpp): a node made on a thread that has ended stays valid, and
// once freed on another thread, that thread reuses it.
// Passes keep a table per buffer in a BufferTable: each buffer its own
// entry, found again by its id, also for buffers made after the table.
TEST(LoopsIR, BufferTableKeepsOneEntryPerBuffer) {
  Copy c;
  EXPECT_NE(c.x->id, c.y->id);
  BufferTable<int> table(*c.fn);
  EXPECT_EQ(table.find(c.x), nullptr);
  auto [entry, made] = table.insert(c.x);
  EXPECT_TRUE(made);
  entry = 7;
  EXPECT_FALSE(table.insert(c.x).second);
  EXPECT_EQ(table[c.x], 7);
  EXPECT_EQ(table.find(c.y), nullptr);
  Buffer *later =
      c.fn->addBuffer(Buffer::Kind::Scratch, DType::F32, {Dim::known(4)}, "t");
  EXPECT_EQ(later->id + 1, c.fn->bufferIds);
  EXPECT_EQ(table.find(later), nullptr);
  table[later] = 3;
  EXPECT_EQ(*table.find(later), 3);
  EXPECT_EQ(*table.find(c.x), 7);
}

TEST(LoopsIR, NodesOutliveTheirThreadAndAreReused) {
  ExprPtr made;
  StmtPtr stmt;
  std::thread([&] {
    made = prim(PrimOp::Add, constant(ScalarType::F32, 1),
                constant(ScalarType::F32, 2));
    stmt = std::make_unique<Stmt>(Stmt::Kind::For);
    stmt->extent = index(7);
  }).join();
  ASSERT_EQ(made->args.size(), 2u);
  EXPECT_EQ(made->args[1]->value, 2.0);
  EXPECT_TRUE(isIndexConst(*stmt->extent, 7));
  // The root is freed last (after its operands), so it is reused first.
  auto root = reinterpret_cast<uintptr_t>(made.get());
  made.reset();
  ExprPtr again = index(5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again.get()), root);
  EXPECT_TRUE(isIndexConst(*again, 5));
  stmt.reset();
  // Aligned and distinct across slabs (4,096 nodes each).
  std::vector<ExprPtr> many;
  for (unsigned i = 0; i < 10000; ++i) {
    many.push_back(loopVar(i));
    ASSERT_EQ(reinterpret_cast<uintptr_t>(many.back().get()) %
                  alignof(std::max_align_t),
              0u);
  }
  for (unsigned i = 0; i < many.size(); ++i)
    ASSERT_EQ(many[i]->var, i);
}

} // namespace

//===--- The `parallel` pass on loops that no lowering makes today -------===//

/// Runs the pass on `c` and returns whether its first statement is marked.
bool marked(Copy &c) {
  std::string error;
  EXPECT_TRUE(markParallelLoops(c.module, error)) << error;
  EXPECT_EQ(c.verify(), "");
  return c.fn->body.front()->parallel;
}

TEST(LoopsParallel, MarksAnElementwiseLoopWithItsWork) {
  Copy c;
  c.addLoop(sizeRef("N"), c.y, loopVar(0), load(c.x, loopVar(0)));
  EXPECT_TRUE(marked(c));
  // One store: its value (a load and its index) and its index, 3 nodes.
  const Expr &work = *c.fn->body.front()->work;
  ASSERT_EQ(work.kind, Expr::Kind::Prim);
  EXPECT_EQ(work.op, PrimOp::Mul);
  EXPECT_TRUE(isIndexConst(*work.args[1], 3));
}

TEST(LoopsParallel, KeepsAWriteThatEveryIterationShares) {
  // y[0] = x[i]: every iteration writes one element (the last wins).
  Copy c;
  c.addLoop(sizeRef("N"), c.y, index(0), load(c.x, loopVar(0)));
  EXPECT_FALSE(marked(c));
}

TEST(LoopsParallel, KeepsAWriteAtAnIndexOfAnotherLayout) {
  // y[N - 1 - i] = x[i] is one-to-one too, but not of the mixed-radix
  // form that the pass proves; and y[i] = y[i] * 2 after y[N-1-i] would
  // read another iteration's element.
  Copy c;
  c.addLoop(
      sizeRef("N"), c.y,
      prim(PrimOp::Sub, prim(PrimOp::Sub, sizeRef("N"), index(1)), loopVar(0)),
      load(c.x, loopVar(0)));
  EXPECT_FALSE(marked(c));
}

TEST(LoopsParallel, KeepsAnAccumulatorThatLivesAcrossIterations) {
  // acc += x[i]; a local read before it is written in the iteration.
  Copy c;
  Buffer *acc = c.fn->addBuffer(Buffer::Kind::Local, DType::F32, {}, "acc");
  c.addLoop(sizeRef("N"), c.y, loopVar(0), load(c.x, loopVar(0)));
  auto add = std::make_unique<Stmt>(Stmt::Kind::Accumulate);
  add->buffer = acc;
  add->index = index(0);
  add->value = load(c.x, loopVar(0));
  c.fn->body.front()->body.push_back(std::move(add));
  EXPECT_FALSE(marked(c));
}

TEST(LoopsParallel, KeepsASmallConstantLoop) {
  // 4 iterations of 3 nodes: far below parallelMinWork.
  Copy c;
  c.addLoop(index(4), c.y, loopVar(0), load(c.x, loopVar(0)));
  EXPECT_FALSE(marked(c));
}
