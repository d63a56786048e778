//===- EmptyReductionTest.cpp - max and logsumexp of nothing --------------===//
//
// max over an axis of size 0 is the identity of max (-inf, or the lowest
// i32), and logsumexp of nothing is ln 0 = -inf, in the reference
// interpreter and the LLVM JIT alike. The lit tests (test/Backends/
// reduce-empty.grad) reach size 0 through empty call literals, which can
// only make the last axis empty (`[[], []]` is [2, 0]); these tests build
// the tensors directly to empty a leading axis ([0, 3]), so that the
// reduced loop that runs zero times is the outer one.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/LLVMJIT.h"
#include "gradc/IR/Builder.h"
#include "gradc/IR/Interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace gradc;
using namespace gradc::ir;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double lowestI32 = std::numeric_limits<int32_t>::min();

AttrList axes(std::vector<int64_t> axis, bool keepdims) {
  AttrList a;
  a.set("axis", axis);
  a.set("keepdims", keepdims);
  return a;
}

/// One function per case, `x` of type `xType` reduced by `kind` over `axis`.
void addReduction(Module &m, llvm::StringRef name, OpKind kind,
                  const TensorType &xType, std::vector<int64_t> axis) {
  Function *f = m.addFunction(name.str());
  Value *x = f->addParam(xType, "x");
  Builder b(*f);
  f->setReturns({b.create1(kind, {x}, axes(std::move(axis), false))});
}

Module makeModule() {
  Dim n = Dim::named("N");
  Module m;
  // [N, 3] -> [3] over the leading axis.
  addReduction(m, "max_lead", OpKind::Max,
               TensorType(DType::F32, {n, Dim::known(3)}), {0});
  addReduction(m, "max_lead_i32", OpKind::Max,
               TensorType(DType::I32, {n, Dim::known(3)}), {0});
  addReduction(m, "lse_lead", OpKind::LogSumExp,
               TensorType(DType::F64, {n, Dim::known(3)}), {0});
  // [N, 2, 3] -> [2] over axes 0 and 2, which are not adjacent.
  addReduction(m, "lse_gaps", OpKind::LogSumExp,
               TensorType(DType::F32, {n, Dim::known(2), Dim::known(3)}),
               {0, 2});
  return m;
}

Tensor empty(DType dtype, std::vector<int64_t> shape) {
  return Tensor{dtype, std::move(shape), {}};
}

struct Case {
  const char *fn;
  Tensor arg;
  std::vector<int64_t> shape;
  std::vector<double> expected;
};

std::vector<Case> cases() {
  return {
      {"max_lead", empty(DType::F32, {0, 3}), {3}, {-inf, -inf, -inf}},
      {"max_lead_i32",
       empty(DType::I32, {0, 3}),
       {3},
       {lowestI32, lowestI32, lowestI32}},
      {"lse_lead", empty(DType::F64, {0, 3}), {3}, {-inf, -inf, -inf}},
      {"lse_gaps", empty(DType::F32, {0, 2, 3}), {2}, {-inf, -inf}},
  };
}

TEST(EmptyReduction, Interpreter) {
  Module m = makeModule();
  for (const Case &c : cases()) {
    std::vector<Tensor> results;
    std::string error;
    ASSERT_TRUE(interpret(m, c.fn, {c.arg}, results, error))
        << c.fn << ": " << error;
    ASSERT_EQ(results.size(), 1u) << c.fn;
    EXPECT_EQ(results[0].shape, c.shape) << c.fn;
    EXPECT_EQ(results[0].data, c.expected) << c.fn;
  }
}

TEST(EmptyReduction, LLVMJIT) {
  Module m = makeModule();
  std::string error;
  auto jit = emit::JITModule::create(m, 2, error);
  ASSERT_TRUE(jit) << error;
  for (const Case &c : cases()) {
    std::vector<Tensor> results;
    ASSERT_TRUE(jit->call(c.fn, {c.arg}, results, error))
        << c.fn << ": " << error;
    ASSERT_EQ(results.size(), 1u) << c.fn;
    EXPECT_EQ(results[0].shape, c.shape) << c.fn;
    EXPECT_EQ(results[0].data, c.expected) << c.fn;
  }
}

} // namespace
