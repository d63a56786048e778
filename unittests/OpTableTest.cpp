//===- OpTableTest.cpp - Shape inference of the op table ------------------===//

#include "gradc/Ops/OpTable.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace gradc;

namespace {
TensorType f32(std::initializer_list<Dim> dims) {
  return TensorType(DType::F32, llvm::ArrayRef<Dim>(dims.begin(), dims.size()));
}
Dim n(llvm::StringRef name) { return Dim::named(name); }
Dim k(int64_t size) { return Dim::known(size); }

std::string infer(OpKind op, std::vector<TensorType> operands,
                  AttrList attrs = {}) {
  llvm::SmallVector<TensorType, 1> results;
  OpTypeError error;
  if (!inferOpTypes(op, operands, attrs, results, error))
    return "error: " + DiagnosticEngine::formatMessage(error.id, error.args);
  std::string s;
  for (const TensorType &t : results)
    s += (s.empty() ? "" : ", ") + t.str();
  return s;
}
} // namespace

TEST(OpTable, EveryOpHasARowInOrder) {
  for (size_t i = 0; i < getAllOps().size(); ++i)
    EXPECT_EQ(size_t(getAllOps()[i].kind), i) << getAllOps()[i].name;
}

TEST(OpTable, Broadcasting) {
  EXPECT_EQ(infer(OpKind::Add, {f32({k(2), k(3)}), f32({k(3)})}), "f32[2, 3]");
  EXPECT_EQ(infer(OpKind::Add, {f32({n("N"), k(1)}), f32({k(4)})}),
            "f32[N, 4]");
  EXPECT_EQ(infer(OpKind::Add, {f32({n("N")}), f32({n("M")})}),
            "error: cannot broadcast shapes [N] and [M] in 'add'");
}

TEST(OpTable, MatMulFollowsNumPy) {
  EXPECT_EQ(infer(OpKind::MatMul, {f32({k(2), k(3)}), f32({k(3)})}), "f32[2]");
  EXPECT_EQ(infer(OpKind::MatMul, {f32({k(3)}), f32({k(3), k(4)})}), "f32[4]");
  EXPECT_EQ(infer(OpKind::MatMul, {f32({k(3)}), f32({k(3)})}), "f32");
  EXPECT_EQ(
      infer(OpKind::MatMul, {f32({k(5), k(2), k(3)}), f32({k(3), n("N")})}),
      "f32[5, 2, N]");
  EXPECT_EQ(infer(OpKind::MatMul, {f32({k(2), k(3)}), f32({k(4), k(3)})}),
            "error: cannot matmul tensors of shape [2, 3] and [4, 3]");
}

TEST(OpTable, ReductionsNormaliseAxes) {
  AttrList attrs;
  attrs.set("axis", int64_t(-1));
  EXPECT_EQ(infer(OpKind::Sum, {f32({k(2), k(3)})}, attrs), "f32[2]");
  attrs.set("keepdims", true);
  EXPECT_EQ(infer(OpKind::Mean, {f32({k(2), k(3)})}, attrs), "f32[2, 1]");
  EXPECT_EQ(infer(OpKind::Max, {f32({k(2), k(3)})}), "f32");
  attrs.set("axis", int64_t(2));
  EXPECT_EQ(infer(OpKind::Sum, {f32({k(2), k(3)})}, attrs),
            "error: axis 2 is out of range for 'sum' on a tensor of rank 2");
}

TEST(OpTable, ReshapeWithSizeNames) {
  AttrList attrs;
  attrs.set("shape", Shape{n("N"), k(-1)});
  EXPECT_EQ(infer(OpKind::Reshape, {f32({n("N"), k(28), k(28)})}, attrs),
            "f32[N, 784]");
  attrs.set("shape", Shape{k(-1)});
  EXPECT_EQ(infer(OpKind::Reshape, {f32({n("N"), k(2)})}, attrs),
            "error: cannot infer the -1 dimension in a reshape of f32[N, 2] "
            "to [-1]");
  attrs.set("shape", Shape{k(5)});
  EXPECT_EQ(infer(OpKind::Reshape, {f32({k(2), k(3)})}, attrs),
            "error: cannot reshape f32[2, 3] to [5]: the element counts "
            "differ");
}

TEST(OpTable, StackAndUnstack) {
  EXPECT_EQ(infer(OpKind::Stack, {f32({k(2)}), f32({k(2)})}), "f32[2, 2]");
  AttrList attrs;
  attrs.set("axis", int64_t(1));
  EXPECT_EQ(infer(OpKind::Stack, {f32({k(2)}), f32({k(2)})}, attrs),
            "f32[2, 2]");
  EXPECT_EQ(infer(OpKind::Unstack, {f32({k(3), k(2)})}),
            "f32[2], f32[2], f32[2]");
  EXPECT_EQ(infer(OpKind::Unstack, {f32({n("N"), k(2)})}),
            "error: cannot unstack along axis 0 of size 'N': the number of "
            "results must be known");
}

TEST(OpTable, TensorFlowNamesAndSuggestions) {
  EXPECT_EQ(mapTensorFlowOpName("Pack"), "stack");
  EXPECT_EQ(mapTensorFlowOpName("MatMul"), "matmul");
  EXPECT_EQ(suggestOpName("stak"), "stack");
  EXPECT_EQ(suggestOpName("Tanh"), "tanh");
  EXPECT_EQ(suggestOpName("zzzzzzzz"), "");
  EXPECT_EQ(lookupOp("constant"), nullptr); // IR-only
}

TEST(OpTable, ElementwiseArithmetic) {
  EXPECT_TRUE(isElementwiseArithmetic(OpKind::Tanh));
  EXPECT_TRUE(isElementwiseArithmetic(OpKind::Add));
  EXPECT_TRUE(isElementwiseArithmetic(OpKind::Less));
  EXPECT_TRUE(isElementwiseArithmetic(OpKind::Clip));
  // Copies, fills, layout and reductions are not arithmetic per element.
  EXPECT_FALSE(isElementwiseArithmetic(OpKind::Identity));
  EXPECT_FALSE(isElementwiseArithmetic(OpKind::ZerosLike));
  EXPECT_FALSE(isElementwiseArithmetic(OpKind::BroadcastTo));
  EXPECT_FALSE(isElementwiseArithmetic(OpKind::Sum));
  EXPECT_FALSE(isElementwiseArithmetic(OpKind::MatMul));
}

TEST(OpTable, TraitsAreConsistent) {
  for (const OpInfo &info : getAllOps()) {
    SCOPED_TRACE(info.name);
    // An op is elementwise exactly when it has a scalar expansion.
    EXPECT_EQ(info.has(Elementwise), info.expand != nullptr);
    // Arithmetic refines Elementwise; an index map preserves splats.
    if (info.has(Arithmetic)) {
      EXPECT_TRUE(info.has(Elementwise));
    }
    if (info.has(IndexMap) && info.kind != OpKind::StopGradient) {
      EXPECT_TRUE(info.has(SplatPreserving));
    }
  }
  EXPECT_EQ(getOpInfo(OpKind::Mul).zeroWhen, ZeroWhen::Any);
  EXPECT_EQ(getOpInfo(OpKind::Add).zeroWhen, ZeroWhen::All);
  EXPECT_EQ(getOpInfo(OpKind::Select).zeroWhen, ZeroWhen::Values);
  EXPECT_EQ(getOpInfo(OpKind::Exp).zeroWhen, ZeroWhen::Never); // e^0 = 1
  EXPECT_TRUE(getOpInfo(OpKind::Div).has(IntDivision));
  EXPECT_TRUE(getOpInfo(OpKind::Max).has(SplatPreserving));
  EXPECT_FALSE(getOpInfo(OpKind::Sum).has(SplatPreserving));
}

namespace {
// The scalar expansions evaluated on single elements, against values by
// hand (docs/IR.md, "Ops").
double element(OpKind op, ScalarType t, std::vector<double> operands) {
  ScalarNodePtr f = getOpInfo(op).expand(t);
  bool divByZero = false;
  double v = evalScalar(*f, operands, divByZero);
  EXPECT_FALSE(divByZero);
  return v;
}
} // namespace

TEST(OpTable, ScalarExpansions) {
  const ScalarType f64 = ScalarType::F64, f32 = ScalarType::F32;
  const ScalarType i32 = ScalarType::I32;
  // atan(1) = pi/4; atan(-inf) = -pi/2; f32 rounds pi/4 to 0x1.921fb6p-1.
  EXPECT_EQ(element(OpKind::Atan, f64, {1.0}), 0.78539816339744830962);
  EXPECT_EQ(element(OpKind::Atan, f64, {-INFINITY}), -1.5707963267948966);
  EXPECT_EQ(element(OpKind::Atan, f32, {1.0}), double(0x1.921fb6p-1f));
  EXPECT_TRUE(std::signbit(element(OpKind::Atan, f32, {-0.0})));
  // The NaN policy: relu and sign keep NaN, maximum propagates it, relu
  // of -0 is +0.
  EXPECT_TRUE(std::isnan(element(OpKind::Relu, f32, {NAN})));
  EXPECT_TRUE(std::isnan(element(OpKind::Sign, f64, {NAN})));
  EXPECT_TRUE(std::isnan(element(OpKind::Maximum, f64, {1.0, NAN})));
  EXPECT_FALSE(std::signbit(element(OpKind::Relu, f64, {-0.0})));
  // i32 wraps: 2^31 - 1 + 1 = -2^31, 65536^2 = 0; pow truncates.
  EXPECT_EQ(element(OpKind::Add, i32, {2147483647.0, 1.0}), -2147483648.0);
  EXPECT_EQ(element(OpKind::Square, i32, {65536.0}), 0.0);
  EXPECT_EQ(element(OpKind::Pow, i32, {2.0, 10.0}), 1024.0);
  // f64 sigmoid(0) = 1/2, softplus(0) = ln 2; clip(5, 0, 1) = 1.
  EXPECT_EQ(element(OpKind::Sigmoid, f64, {0.0}), 0.5);
  EXPECT_EQ(element(OpKind::Softplus, f64, {0.0}), 0.69314718055994530942);
  EXPECT_EQ(element(OpKind::Clip, f64, {5.0, 0.0, 1.0}), 1.0);
  EXPECT_EQ(element(OpKind::Select, f64, {0.0, 2.0, 3.0}), 3.0);
  // An i32 division by zero is reported, not computed.
  bool divByZero = false;
  evalScalar(*getOpInfo(OpKind::Div).expand(i32), {1.0, 0.0}, divByZero);
  EXPECT_TRUE(divByZero);
}
