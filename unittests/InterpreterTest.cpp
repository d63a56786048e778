//===- InterpreterTest.cpp - The reference interpreter through its API ----===//
//
// Checks that read better in C++ than as lit tests: rounding to each
// element type, argument checking of the API, ops with attributes that the
// verifier would reject as not normalised (negative axes), and the limits
// that turn runaway IR into errors instead of crashes. Expected values by
// hand.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Interpreter.h"
#include "gradc/IR/Builder.h"
#include "gradc/IR/Literal.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

using namespace gradc;
using namespace gradc::ir;

namespace {

TensorType typeOf(DType dtype, std::initializer_list<Dim> dims) {
  return TensorType(dtype, llvm::ArrayRef<Dim>(dims.begin(), dims.size()));
}
Dim k(int64_t size) { return Dim::known(size); }

/// Runs `fn` on `args`; returns the printed results joined by " | ", or
/// "error: ..." .
std::string run(const Module &m, llvm::StringRef fn, std::vector<Tensor> args) {
  std::vector<Tensor> results;
  std::string error;
  if (!interpret(m, fn, args, results, error))
    return "error: " + error;
  std::string s;
  for (size_t i = 0; i < results.size(); ++i)
    s += (i ? " | " : "") + tensorToString(results[i]);
  return s;
}

Tensor f32Matrix() { return Tensor{DType::F32, {2, 2}, {1, 2, 3, 4}}; }

} // namespace

TEST(Interpreter, RoundsToEachElementType) {
  // The float nearest 0.1 is 0.100000001490116119384765625.
  EXPECT_EQ(roundToDType(DType::F32, 0.1), double(0.1f));
  EXPECT_EQ(roundToDType(DType::F32, 0.1), 0.100000001490116119384765625);
  EXPECT_EQ(roundToDType(DType::F64, 0.1), 0.1);
  // FLT_MAX + half an ulp (2^103) rounds to infinity, just below it does not.
  EXPECT_EQ(roundToDType(DType::F32, 0x1.ffffffp+127), INFINITY);
  EXPECT_EQ(roundToDType(DType::F32, 0x1.fffffefp+127), double(FLT_MAX));
  EXPECT_EQ(roundToDType(DType::F32, -1e39), -INFINITY);
  // i32: truncation toward zero, then wrap modulo 2^32.
  EXPECT_EQ(roundToDType(DType::I32, -1.5), -1);
  EXPECT_EQ(roundToDType(DType::I32, 4294967301.0), 5);
  EXPECT_EQ(roundToDType(DType::I32, 2147483648.0), -2147483648.0);
  EXPECT_EQ(roundToDType(DType::I32, NAN), 0);
  EXPECT_EQ(roundToDType(DType::Bool, -3), 1);
  EXPECT_EQ(roundToDType(DType::Bool, 0), 0);
}

TEST(Interpreter, ResolvesNegativeAxesOfUnnormalisedOps) {
  // The verifier requires normalised axes; the interpreter still reads the
  // raw forms, since the constant folder runs it on ops it builds.
  Module m;
  Function *fn = m.addFunction("f");
  Value *x = fn->addParam(typeOf(DType::F32, {k(2), k(2)}), "x");
  AttrList sumAttrs;
  sumAttrs.set("axis", std::vector<int64_t>{-1});
  Op *sum = fn->createOp(OpKind::Sum, {x}, {typeOf(DType::F32, {k(2)})},
                         sumAttrs, SourceLoc(), {"s"});
  AttrList lastAxis;
  lastAxis.set("axis", int64_t(-1));
  Op *unstack =
      fn->createOp(OpKind::Unstack, {x},
                   {typeOf(DType::F32, {k(2)}), typeOf(DType::F32, {k(2)})},
                   lastAxis, SourceLoc(), {"c0", "c1"});
  Op *stack = fn->createOp(OpKind::Stack, {x, x},
                           {typeOf(DType::F32, {k(2), k(2), k(2)})}, lastAxis,
                           SourceLoc(), {"st"});
  // No perm: reverse the axes.
  Op *transpose =
      fn->createOp(OpKind::Transpose, {x}, {typeOf(DType::F32, {k(2), k(2)})},
                   {}, SourceLoc(), {"t"});
  fn->setReturns({sum->getResult(), unstack->getResult(1), stack->getResult(),
                  transpose->getResult()});
  // Row sums [1 + 2, 3 + 4]; column 1 is [2, 4]; stacking along the last
  // axis pairs each element with itself; the transpose swaps 2 and 3.
  EXPECT_EQ(run(m, "f", {f32Matrix()}),
            "[3, 7] | [2, 4] | [[[1, 1], [2, 2]], [[3, 3], [4, 4]]] | "
            "[[1, 3], [2, 4]]");
}

TEST(Interpreter, ChecksArgumentsAgainstTheSignature) {
  Module m;
  Function *fn = m.addFunction("f");
  Value *x = fn->addParam(typeOf(DType::F32, {Dim::named("N")}), "x");
  Value *y = fn->addParam(typeOf(DType::F32, {Dim::named("N")}), "y");
  Builder b(*fn);
  fn->setReturns({b.add(x, y)});
  Tensor two{DType::F32, {2}, {1, 2}};
  Tensor three{DType::F32, {3}, {1, 2, 3}};
  EXPECT_EQ(run(m, "f", {two, two}), "[2, 4]");
  EXPECT_EQ(run(m, "f", {two, three}),
            "error: size 'N' is 2 in argument 'x' but 3 in argument 'y'");
  EXPECT_EQ(run(m, "f", {two}), "error: 'f' takes 2 argument(s), got 1");
  Tensor ints{DType::I32, {2}, {1, 2}};
  EXPECT_EQ(run(m, "f", {two, ints}),
            "error: argument 'y' of 'f' has element type i32, but its type "
            "is f32[N]");
  Tensor ragged{DType::F32, {2}, {1, 2, 3}};
  EXPECT_EQ(run(m, "f", {ragged, two}),
            "error: argument 'x' of 'f' has 3 value(s) for shape [2]");
  EXPECT_EQ(run(m, "g", {}), "error: no function named 'g'");
  // Argument values are rounded to the element type on entry.
  Tensor tenth{DType::F32, {2}, {0.1, 0.1}};
  std::vector<Tensor> results;
  std::string error;
  ASSERT_TRUE(interpret(m, "f", {tenth, tenth}, results, error));
  EXPECT_EQ(results[0].data[0], double(0.1f + 0.1f));
}

TEST(Interpreter, RefusesHugeTensorsAndDeepRecursion) {
  Module m;
  Function *big = m.addFunction("big");
  Builder b(*big);
  big->setReturns(
      {b.constant(typeOf(DType::F32, {k(100000), k(100000)}), {0})});
  EXPECT_EQ(run(m, "big", {}),
            "error: in function 'big': 'constant' (%0): a result of shape "
            "[100000, 100000] exceeds the interpreter's limit of 67108864 "
            "elements");

  // A function that calls itself (the verifier rejects it; the interpreter
  // must still stop).
  Function *loop = m.addFunction("loop");
  Value *x = loop->addParam(typeOf(DType::F32, {}), "x");
  Builder lb(*loop);
  loop->setReturns(lb.call("loop", {x}, {typeOf(DType::F32, {})}));
  EXPECT_EQ(run(m, "loop", {Tensor{DType::F32, {}, {1}}}),
            "error: calls are nested more than 100 deep (is 'loop' "
            "recursive?)");
}

TEST(Interpreter, IsDeterministic) {
  // The same call twice gives bit-identical results (fixed summation
  // order), here for a softmax whose sum has rounding.
  Module m;
  Function *fn = m.addFunction("f");
  Value *x = fn->addParam(typeOf(DType::F32, {k(5)}), "x");
  AttrList axis;
  axis.set("axis", int64_t(0));
  Builder b(*fn);
  fn->setReturns({b.create1(OpKind::Softmax, {x}, axis)});
  Tensor t{DType::F32, {5}, {0.1f, 0.7f, -3.2f, 2.5f, 1e-3f}};
  std::vector<Tensor> first, second;
  std::string error;
  ASSERT_TRUE(interpret(m, "f", {t}, first, error));
  ASSERT_TRUE(interpret(m, "f", {t}, second, error));
  EXPECT_EQ(first[0].data, second[0].data);
  double total = 0;
  for (double v : first[0].data)
    total += v;
  EXPECT_NEAR(total, 1.0, 1e-6);
}
