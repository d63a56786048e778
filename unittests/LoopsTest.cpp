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

} // namespace
