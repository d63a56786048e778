//===- k1.cpp - K1: MLP 784-256-10, mean softmax cross-entropy ------------===//

#include "Bench.h"
#include "HandMLP.h"
#include "k1_cpp.h"
#include "k1_llvm.h"

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t B = b.size(0), I = 784, H = 256, O = 10;
  auto x = b.load<float>("x", B * I), w1 = b.load<float>("w1", I * H);
  auto b1 = b.load<float>("b1", H), w2 = b.load<float>("w2", H * O);
  auto b2 = b.load<float>("b2", O);
  auto labels = b.load<int32_t>("labels", B);
  auto outs = bench::makeResults({I * H, H, H * O, O});
  hand::MLP mlp{B, I, H, O, {}};
  b.add(
      "hand_fwd",
      [&] {
        return mlp.value(x.data(), w1.data(), b1.data(), w2.data(), b2.data(),
                         labels.data(), &outs[0].value);
      },
      outs[0].outputs(true, false));
  b.add(
      "hand_vg",
      [&] {
        bench::Result &o = outs[1];
        return mlp.valueAndGrad(x.data(), w1.data(), b1.data(), w2.data(),
                                b2.data(), labels.data(), &o.value, o[0], o[1],
                                o[2], o[3]);
      },
      outs[1].outputs(true, true));
#define GRADC_IMPLS(M, base)                                                   \
  b.add(                                                                       \
      #M "_fwd",                                                               \
      [&] {                                                                    \
        return M##_k1(B, x.data(), w1.data(), b1.data(), w2.data(), b2.data(), \
                      labels.data(), &outs[base].value);                       \
      },                                                                       \
      outs[base].outputs(true, false));                                        \
  b.add(                                                                       \
      #M "_grad",                                                              \
      [&] {                                                                    \
        bench::Result &o = outs[base + 1];                                     \
        return M##_k1_grad(B, x.data(), w1.data(), b1.data(), w2.data(),       \
                           b2.data(), labels.data(), o[0], o[1], o[2], o[3]);  \
      },                                                                       \
      outs[base + 1].outputs(false, true));                                    \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        bench::Result &o = outs[base + 2];                                     \
        return M##_k1_value_and_grad(B, x.data(), w1.data(), b1.data(),        \
                                     w2.data(), b2.data(), labels.data(),      \
                                     &o.value, o[0], o[1], o[2], o[3]);        \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(k1_cpp, 2)
  GRADC_IMPLS(k1_llvm, 5)
  return b.run();
}
