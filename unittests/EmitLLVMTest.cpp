//===- EmitLLVMTest.cpp - The LLVM backend on hand-built IR ---------------===//
//
// Builds small IR functions with ir::Builder, runs them through the LLVM
// JIT (EmitLLVM + LLVMJIT) and compares the results with values derived by
// hand in the comments. These tests exercise every family of ops without
// the front end; the lit tests in test/Runtime compare the JIT with the
// interpreter on whole programs.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitLLVM.h"
#include "gradc/Emit/LLVMJIT.h"
#include "gradc/IR/Builder.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace gradc;
using namespace gradc::ir;

namespace {

Tensor tensor(DType t, std::vector<int64_t> shape, std::vector<double> data) {
  Tensor x;
  x.dtype = t;
  x.shape = std::move(shape);
  x.data = std::move(data);
  return x;
}

Tensor f32(std::vector<int64_t> shape, std::vector<double> data) {
  return tensor(DType::F32, std::move(shape), std::move(data));
}

Tensor i32(std::vector<int64_t> shape, std::vector<double> data) {
  return tensor(DType::I32, std::move(shape), std::move(data));
}

TensorType type(DType t, std::vector<Dim> shape) {
  return TensorType(t, shape);
}

Dim k(int64_t n) { return Dim::known(n); }
Dim n(llvm::StringRef name) { return Dim::named(name); }

/// Runs `fn` of `module` in the JIT at -O2 (and -O0: both must agree).
std::vector<Tensor> run(const Module &module, llvm::StringRef fn,
                        std::vector<Tensor> args,
                        std::string *error = nullptr) {
  std::vector<Tensor> results[2];
  for (unsigned opt : {0u, 2u}) {
    std::string e;
    auto jit = emit::JITModule::create(module, opt, e);
    EXPECT_TRUE(jit) << e;
    if (!jit)
      return {};
    bool ok = jit->call(fn, args, results[opt != 0], e);
    if (error)
      *error = e;
    if (!ok)
      return {};
  }
  EXPECT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i)
    EXPECT_EQ(results[0][i].data, results[1][i].data) << "-O0 and -O2 differ";
  return results[1];
}

void expectTensor(const Tensor &t, std::vector<int64_t> shape,
                  std::vector<double> data, double tol = 1e-6) {
  EXPECT_EQ(t.shape, shape);
  ASSERT_EQ(t.data.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (std::isnan(data[i]))
      EXPECT_TRUE(std::isnan(t.data[i])) << "element " << i;
    else if (std::isinf(data[i]))
      EXPECT_EQ(t.data[i], data[i]) << "element " << i;
    else
      EXPECT_NEAR(t.data[i], data[i], tol * std::max(1.0, std::fabs(data[i])))
          << "element " << i;
  }
}

AttrList axisAttrs(std::vector<int64_t> axes, bool keepdims) {
  AttrList a;
  a.set("axis", axes);
  a.set("keepdims", keepdims);
  return a;
}

AttrList intAttr(llvm::StringRef name, int64_t v) {
  AttrList a;
  a.set(name, v);
  return a;
}

TEST(EmitLLVMTest, FusedElementwiseChain) {
  // f(x: f32[N], y: f32[N]) = exp(x) * y + 1
  Module m;
  Function *f = m.addFunction("f");
  Value *x = f->addParam(type(DType::F32, {n("N")}), "x");
  Value *y = f->addParam(type(DType::F32, {n("N")}), "y");
  Builder b(*f);
  Value *one = b.scalar(DType::F32, 1);
  f->setReturns({b.add(b.mul(b.unary(OpKind::Exp, x), y), one)});
  auto r = run(m, "f", {f32({3}, {0, 1, -1}), f32({3}, {2, 3, 4})});
  ASSERT_EQ(r.size(), 1u);
  // [1*2+1, e*3+1, 4/e+1]
  expectTensor(r[0], {3}, {3, 3 * M_E + 1, 4 / M_E + 1});
}

TEST(EmitLLVMTest, BroadcastingAndCompare) {
  // g(a: f32[2, 3], b: f32[3]) = (select(a > b, a, b) , a - b)
  Module m;
  Function *f = m.addFunction("g");
  Value *a = f->addParam(type(DType::F32, {k(2), k(3)}), "a");
  Value *bb = f->addParam(type(DType::F32, {k(3)}), "b");
  Builder b(*f);
  Value *gt = b.binary(OpKind::Greater, a, bb);
  f->setReturns({b.select(gt, a, bb), b.sub(a, bb), gt});
  auto r = run(m, "g", {f32({2, 3}, {1, 5, 3, 0, 0, 9}), f32({3}, {2, 2, 2})});
  ASSERT_EQ(r.size(), 3u);
  expectTensor(r[0], {2, 3}, {2, 5, 3, 2, 2, 9});
  expectTensor(r[1], {2, 3}, {-1, 3, 1, -2, -2, 7});
  expectTensor(r[2], {2, 3}, {0, 1, 1, 0, 0, 1});
}

TEST(EmitLLVMTest, Reductions) {
  // x = [[1, 2, 3], [4, 5, 6]]
  Module m;
  Function *f = m.addFunction("r");
  Value *x = f->addParam(type(DType::F32, {n("B"), k(3)}), "x");
  Builder b(*f);
  Value *s0 = b.create1(OpKind::Sum, {x}, axisAttrs({0}, false));
  Value *s1 = b.create1(OpKind::Sum, {x}, axisAttrs({1}, true));
  Value *all = b.create1(OpKind::Mean, {x}, axisAttrs({0, 1}, false));
  Value *mx = b.create1(OpKind::Max, {x}, axisAttrs({1}, false));
  // sum(x * x) fuses the square into the reduction.
  Value *sq = b.create1(OpKind::Sum, {b.mul(x, b.scalar(DType::F32, 2))},
                        axisAttrs({0, 1}, false));
  Value *lse = b.create1(OpKind::LogSumExp, {x}, axisAttrs({1}, false));
  f->setReturns({s0, s1, all, mx, sq, lse});
  auto r = run(m, "r", {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(r.size(), 6u);
  expectTensor(r[0], {3}, {5, 7, 9});
  expectTensor(r[1], {2, 1}, {6, 15});
  expectTensor(r[2], {}, {3.5});
  expectTensor(r[3], {2}, {3, 6});
  expectTensor(r[4], {}, {42});
  // ln(e + e^2 + e^3) = 3 + ln(1 + e^-1 + e^-2)
  double l = 3 + std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  expectTensor(r[5], {2}, {l, l + 3});
}

TEST(EmitLLVMTest, SoftmaxFamily) {
  Module m;
  Function *f = m.addFunction("s");
  Value *x = f->addParam(type(DType::F64, {k(2), k(2)}), "x");
  Builder b(*f);
  Value *sm = b.create1(OpKind::Softmax, {x}, intAttr("axis", 1));
  Value *lsm = b.create1(OpKind::LogSoftmax, {x}, intAttr("axis", 0));
  f->setReturns({sm, lsm});
  // Large values must not overflow: [[1000, 1000], [0, ln 3]].
  auto r =
      run(m, "s", {tensor(DType::F64, {2, 2}, {1000, 1000, 0, std::log(3.0)})});
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], {2, 2}, {0.5, 0.5, 0.25, 0.75}, 1e-12);
  // Column 0: [1000, 0] -> [0, -1000]; column 1: [1000, ln 3] likewise.
  expectTensor(r[1], {2, 2}, {0, 0, -1000, std::log(3.0) - 1000}, 1e-12);
}

TEST(EmitLLVMTest, MatMulShapes) {
  Module m;
  Function *f = m.addFunction("mm");
  Value *a = f->addParam(type(DType::F32, {k(2), k(3)}), "a");
  Value *bm = f->addParam(type(DType::F32, {k(3), k(2)}), "b");
  Value *v = f->addParam(type(DType::F32, {k(3)}), "v");
  Value *batch = f->addParam(type(DType::F32, {k(2), k(1), k(3)}), "c");
  Builder b(*f);
  f->setReturns({b.matmul(a, bm), b.matmul(a, v), b.matmul(v, bm),
                 b.matmul(v, v), b.matmul(batch, bm)});
  // a = [[1, 2, 3], [4, 5, 6]], b = [[1, 0], [0, 1], [1, 1]], v = [1, 1, 2]
  auto r =
      run(m, "mm",
          {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {1, 0, 0, 1, 1, 1}),
           f32({3}, {1, 1, 2}), f32({2, 1, 3}, {1, 0, 0, 0, 0, 1})});
  ASSERT_EQ(r.size(), 5u);
  expectTensor(r[0], {2, 2}, {4, 5, 10, 11});
  expectTensor(r[1], {2}, {9, 21});
  expectTensor(r[2], {2}, {3, 3});
  expectTensor(r[3], {}, {6});
  expectTensor(r[4], {2, 1, 2}, {1, 0, 1, 1});
}

TEST(EmitLLVMTest, Layout) {
  Module m;
  Function *f = m.addFunction("lay");
  Value *x = f->addParam(type(DType::F32, {k(2), k(3)}), "x");
  Builder b(*f);
  Value *t = b.transpose(x, {1, 0});
  Value *rs = b.reshape(x, {k(3), k(2)});
  Value *bc =
      b.broadcastTo(b.reshape(x, {k(2), k(1), k(3)}), {k(2), k(2), k(3)});
  Value *st = b.create1(OpKind::Stack, {x, x}, intAttr("axis", 1));
  auto parts = b.create(OpKind::Unstack, {x}, intAttr("axis", 1));
  Value *cat1 = b.create1(OpKind::Concat, {x, x}, intAttr("axis", 1));
  AttrList split;
  split.set("axis", int64_t(1));
  split.set("sizes", Shape{k(1), k(2)});
  auto halves = b.create(OpKind::Split, {x}, split);
  f->setReturns({t, rs, bc, st, parts[2], cat1, halves[1]});
  auto r = run(m, "lay", {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(r.size(), 7u);
  expectTensor(r[0], {3, 2}, {1, 4, 2, 5, 3, 6});
  expectTensor(r[1], {3, 2}, {1, 2, 3, 4, 5, 6});
  expectTensor(r[2], {2, 2, 3}, {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  expectTensor(r[3], {2, 2, 3}, {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  expectTensor(r[4], {2}, {3, 6});
  expectTensor(r[5], {2, 6}, {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  expectTensor(r[6], {2, 2}, {2, 3, 5, 6});
}

TEST(EmitLLVMTest, IntegerArithmetic) {
  Module m;
  Function *f = m.addFunction("idiv");
  Value *x = f->addParam(type(DType::I32, {k(4)}), "x");
  Value *y = f->addParam(type(DType::I32, {k(4)}), "y");
  Builder b(*f);
  f->setReturns({b.div(x, y), b.add(x, y)});
  // Truncating division; INT_MIN / -1 wraps to INT_MIN.
  auto r = run(
      m, "idiv",
      {i32({4}, {7, -7, -2147483648.0, 5}), i32({4}, {2, 2, -1, 2147483647})});
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], {4}, {3, -3, -2147483648.0, 0});
  // INT_MIN + -1 wraps to INT_MAX; 5 + INT_MAX wraps to -2147483644.
  expectTensor(r[1], {4}, {9, -5, 2147483647.0, -2147483644.0});
  std::string error;
  auto bad =
      run(m, "idiv", {i32({4}, {1, 2, 3, 4}), i32({4}, {1, 0, 1, 1})}, &error);
  EXPECT_TRUE(bad.empty());
  EXPECT_NE(error.find("division by zero"), std::string::npos) << error;
}

TEST(EmitLLVMTest, LossesAndIndexErrors) {
  Module m;
  Function *f = m.addFunction("loss");
  Value *logits = f->addParam(type(DType::F32, {n("B"), k(3)}), "logits");
  Value *labels = f->addParam(type(DType::I32, {n("B")}), "labels");
  Builder b(*f);
  AttrList depth;
  depth.set("depth", Shape{k(3)});
  Value *oh = b.create1(OpKind::OneHot, {labels}, depth);
  Value *sce = b.create1(OpKind::SoftmaxCrossEntropy, {logits, labels});
  f->setReturns({oh, sce});
  // Row 0: logits [0, 0, 0], label 2: ln 3. Row 1: [ln 2, 0, 0], label 0:
  // ln(2 + 1 + 1) - ln 2 = ln 2.
  auto r = run(m, "loss",
               {f32({2, 3}, {0, 0, 0, std::log(2.0), 0, 0}), i32({2}, {2, 0})});
  ASSERT_EQ(r.size(), 2u);
  expectTensor(r[0], {2, 3}, {0, 0, 1, 1, 0, 0});
  expectTensor(r[1], {2}, {std::log(3.0), std::log(2.0)});
  std::string error;
  EXPECT_TRUE(
      run(m, "loss", {f32({1, 3}, {0, 0, 0}), i32({1}, {3})}, &error).empty());
  EXPECT_NE(error.find("GRADC_ERROR_INDEX"), std::string::npos) << error;
}

TEST(EmitLLVMTest, CallsAndScalars) {
  Module m;
  // sq(v: f32[N]) -> (f32, f32[N]) = (sum(v * v), v + 1)
  Function *sq = m.addFunction("sq");
  Value *v = sq->addParam(type(DType::F32, {n("N")}), "v");
  {
    Builder b(*sq);
    sq->setReturns(
        {b.create1(OpKind::Sum, {b.mul(v, v)}, axisAttrs({0}, false)),
         b.add(v, b.scalar(DType::F32, 1))});
  }
  // top(s: f32, w: f32[M]) = sq(w * s)
  Function *top = m.addFunction("top");
  Value *s = top->addParam(type(DType::F32, {}), "s");
  Value *w = top->addParam(type(DType::F32, {n("M")}), "w");
  {
    Builder b(*top);
    auto res = b.call("sq", {b.mul(w, s)},
                      {type(DType::F32, {}), type(DType::F32, {n("M")})});
    top->setReturns({res[0], res[1], s});
  }
  auto r = run(m, "top", {f32({}, {2}), f32({3}, {1, 2, 3})});
  ASSERT_EQ(r.size(), 3u);
  // w * s = [2, 4, 6]: sum of squares 56, plus one [3, 5, 7].
  expectTensor(r[0], {}, {56});
  expectTensor(r[1], {3}, {3, 5, 7});
  expectTensor(r[2], {}, {2});
}

TEST(EmitLLVMTest, ModuleShape) {
  // The printed module: the ABI signature, malloc/free for a temporary of
  // run-time size (in the scratch cache's functions: the transpose, stored
  // since the product has 16 columns; a narrower one reads x in place,
  // PrintLLVM's narrow kernel), and no globals but
  // the thread count that a parallel loop reads from GRADC_NUM_THREADS once
  // (docs/ABI.md, "Threads") and the scratch cache's per-thread key
  // and its thread-local cache pointer (MathBitcode.cpp).
  Module m;
  Function *f = m.addFunction("h");
  Value *x = f->addParam(type(DType::F32, {n("N"), k(16)}), "x");
  Builder b(*f);
  Value *t = b.transpose(x, {1, 0});
  f->setReturns({b.matmul(t, x)});
  emit::LLVMOptions options;
  options.moduleName = "mod";
  options.optLevel = 0;
  std::string error;
  auto tm = emit::createTargetMachine(options, error);
  ASSERT_TRUE(tm) << error;
  llvm::LLVMContext ctx;
  auto llvmModule = emit::buildLLVMModule(m, ctx, *tm, options, error);
  ASSERT_TRUE(llvmModule) << error;
  for (const llvm::GlobalVariable &g : llvmModule->globals())
    EXPECT_TRUE(g.getName().starts_with("gradc.threads") ||
                g.getName().starts_with("gradc_scratch_"))
        << g.getName().str();
  llvm::Function *fn = llvmModule->getFunction("mod_h");
  ASSERT_TRUE(fn);
  EXPECT_EQ(fn->arg_size(), 3u);
  EXPECT_TRUE(llvmModule->getFunction("gradc_scratch_take"));
  EXPECT_TRUE(llvmModule->getFunction("gradc_scratch_give"));
  EXPECT_TRUE(llvmModule->getFunction("malloc"));
  EXPECT_TRUE(llvmModule->getFunction("free"));
}

} // namespace
