//===- LiteralTest.cpp - Call literals and tensor printing ----------------===//
//
// The `--call` text of `gradc run` and `gradc-opt`: parsing, conversion to
// tensors of a declared element type, and the printed form of results.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Literal.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace gradc;
using namespace gradc::ir;

namespace {

/// Parses `text` and converts its arguments with `dtypes`; returns the
/// printed tensors joined by " | ", or "error@COL: message".
std::string run(llvm::StringRef text, std::vector<DType> dtypes,
                std::string *callee = nullptr) {
  std::string name, error;
  std::vector<Literal> args;
  size_t column = 0;
  if (!parseCallLiteral(text, name, args, error, column))
    return "error@" + std::to_string(column) + ": " + error;
  if (callee)
    *callee = name;
  if (args.size() != dtypes.size())
    return "count " + std::to_string(args.size());
  std::string s;
  for (size_t i = 0; i < args.size(); ++i) {
    Tensor t;
    if (!literalToTensor(args[i], dtypes[i], t, error, &column))
      return "error@" + std::to_string(column) + ": " + error;
    s += (i ? " | " : "") + tensorToString(t);
  }
  return s;
}

} // namespace

TEST(Literal, ParsesNestedListsAndScalars) {
  std::string callee;
  EXPECT_EQ(run("synth_grad([1, 2], [[3, 4], [6, 8]])",
                {DType::F32, DType::F32}, &callee),
            "[1, 2] | [[3, 4], [6, 8]]");
  EXPECT_EQ(callee, "synth_grad");
  EXPECT_EQ(run("  f ( -1.5 , true )  ", {DType::F64, DType::Bool}),
            "-1.5 | true");
  EXPECT_EQ(run("f()", {}), "");
  EXPECT_EQ(run("f.grad_1(2e-3)", {DType::F64}), "0.002");
}

TEST(Literal, ShapesComeFromNesting) {
  std::string name, error;
  std::vector<Literal> args;
  size_t column;
  ASSERT_TRUE(parseCallLiteral("f([[1, 2, 3], [4, 5, 6]], [], [[], []])", name,
                               args, error, column));
  Tensor t;
  ASSERT_TRUE(literalToTensor(args[0], DType::I32, t, error));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(literalToTensor(args[1], DType::F32, t, error));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{0}));
  EXPECT_EQ(tensorToString(t), "[]");
  ASSERT_TRUE(literalToTensor(args[2], DType::F32, t, error));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(tensorToString(t), "[[], []]");
}

TEST(Literal, F32ReadsTheNearestFloat) {
  // 0.1 is not a float; the nearest float is 0.100000001490116...,
  // which prints back as the shortest round-tripping text "0.1".
  std::string name, error;
  std::vector<Literal> args;
  size_t column;
  ASSERT_TRUE(parseCallLiteral("f(0.1)", name, args, error, column));
  Tensor t;
  ASSERT_TRUE(literalToTensor(args[0], DType::F32, t, error));
  EXPECT_EQ(t.data[0], double(0.1f));
  EXPECT_NE(t.data[0], 0.1);
  EXPECT_EQ(tensorToString(t), "0.1");
  ASSERT_TRUE(literalToTensor(args[0], DType::F64, t, error));
  EXPECT_EQ(t.data[0], 0.1);
}

TEST(Literal, PrintsEachElementType) {
  // Shortest round-tripping text: 1/3 as a float needs 8 digits
  // (0.33333334 -> 0x3eaaaaab), as a double 16.
  Tensor f{DType::F32, {3}, {3, 0.5, double(1.0f / 3.0f)}};
  EXPECT_EQ(tensorToString(f), "[3, 0.5, 0.33333334]");
  Tensor d{DType::F64, {2}, {1.0 / 3.0, -2}};
  EXPECT_EQ(tensorToString(d), "[0.3333333333333333, -2]");
  Tensor big{DType::F32, {4}, {1000, 1e20, -0.0, INFINITY}};
  EXPECT_EQ(tensorToString(big), "[1000, 1e+20, -0, inf]");
  Tensor i{DType::I32, {}, {-7}};
  EXPECT_EQ(tensorToString(i), "-7");
  Tensor b{DType::Bool, {2, 1}, {1, 0}};
  EXPECT_EQ(tensorToString(b), "[[true], [false]]");
}

TEST(Literal, SyntaxErrorsHaveColumns) {
  EXPECT_EQ(run("(1)", {}), "error@0: expected a function name");
  EXPECT_EQ(run("f 1", {}), "error@2: expected '(' after the function name");
  EXPECT_EQ(run("f(1", {}), "error@3: expected ',' or ')' after an argument");
  EXPECT_EQ(run("f([1, 2)", {}), "error@7: expected ',' or ']' in a list");
  EXPECT_EQ(run("f(.5)", {}),
            "error@2: expected a number, 'true', 'false' or a list, got '.'");
  EXPECT_EQ(run("f(1.)", {}), "error@4: expected digits after '.' in a number");
  EXPECT_EQ(run("f(1e)", {}),
            "error@4: expected digits in the exponent of a number");
  EXPECT_EQ(run("f(yes)", {}),
            "error@2: expected a number, 'true', 'false' or a list, got 'yes'");
  EXPECT_EQ(run("f(1) x", {}), "error@5: unexpected text after the call");
  EXPECT_EQ(run("f(", {}),
            "error@2: expected an argument, got the end of the call");
  EXPECT_EQ(run("f(12abc)", {}), "error@4: unexpected character in a number");
  std::string deep = "f(" + std::string(100000, '[');
  EXPECT_EQ(run(deep, {}), "error@66: lists are nested more than 64 deep");
}

TEST(Literal, ConversionErrorsNameTheProblem) {
  EXPECT_EQ(run("f([[1, 2], [3]])", {DType::F32}),
            "error@11: ragged list: expected 2 elements here, got 1");
  EXPECT_EQ(run("f([1, [2]])", {DType::F32}),
            "error@6: ragged list: expected a number here, got a list");
  EXPECT_EQ(run("f([[1], 2])", {DType::F32}),
            "error@8: ragged list: expected a list of 1 elements here, got "
            "'2'");
  EXPECT_EQ(run("f(true)", {DType::F32}),
            "error@2: expected a number for f32, got 'true'");
  EXPECT_EQ(run("f(1)", {DType::Bool}),
            "error@2: expected 'true' or 'false' for bool, got '1'");
  EXPECT_EQ(run("f(1.5)", {DType::I32}),
            "error@2: expected an integer for i32, got '1.5'");
  EXPECT_EQ(run("f(2147483648)", {DType::I32}),
            "error@2: integer '2147483648' is out of range for i32");
  EXPECT_EQ(run("f(-2147483648)", {DType::I32}), "-2147483648");
  EXPECT_EQ(run("f(1e39)", {DType::F32}),
            "error@2: number '1e39' is out of range for f32");
  EXPECT_EQ(run("f(1e39)", {DType::F64}), "1e+39");
}
