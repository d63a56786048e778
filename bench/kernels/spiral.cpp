//===- spiral.cpp - spiral: the spiral MLP training step
//-----------------------===//

#include "Bench.h"
#include "HandMLP.h"
#include "spiral_cpp.h"
#include "spiral_llvm.h"

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t B = b.size(0), I = 2, H = b.size(1), O = 2;
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
        return M##_spiral(B, H, x.data(), w1.data(), b1.data(), w2.data(),     \
                          b2.data(), labels.data(), &outs[base].value);        \
      },                                                                       \
      outs[base].outputs(true, false));                                        \
  b.add(                                                                       \
      #M "_grad",                                                              \
      [&] {                                                                    \
        bench::Result &o = outs[base + 1];                                     \
        return M##_spiral_grad(B, H, x.data(), w1.data(), b1.data(),           \
                               w2.data(), b2.data(), labels.data(), o[0],      \
                               o[1], o[2], o[3]);                              \
      },                                                                       \
      outs[base + 1].outputs(false, true));                                    \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        bench::Result &o = outs[base + 2];                                     \
        return M##_spiral_value_and_grad(B, H, x.data(), w1.data(), b1.data(), \
                                         w2.data(), b2.data(), labels.data(),  \
                                         &o.value, o[0], o[1], o[2], o[3]);    \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(spiral_cpp, 2)
  GRADC_IMPLS(spiral_llvm, 5)
  return b.run();
}
