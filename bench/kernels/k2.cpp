//===- k2.cpp - K2: an elementwise chain over N elements, summed ----------===//
//
// f = Σ sigmoid(x) tanh(x) + exp(-x²) sin(x), and by the product rule
// df/dx = s(1-s) t + s(1-t²) + e (cos x - 2x sin x) with s = sigmoid(x),
// t = tanh(x), e = exp(-x²): one pass that computes the value and the
// gradient of each element, summed in 16 f32 lanes per block of 4096
// elements and the blocks in double.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"
#include "HandMath.h"
#include "k2_cpp.h"
#include "k2_llvm.h"

namespace {

template <bool Grad>
float chain(const float *GRADC_RESTRICT x, float *GRADC_RESTRICT dx,
            int64_t n) {
  double total = 0;
  for (int64_t b0 = 0; b0 < n; b0 += 4096) {
    int64_t b1 = std::min(n, b0 + 4096);
    float lanes[16] = {};
    int64_t i = b0;
    for (; i + 16 <= b1; i += 16)
      for (int l = 0; l < 16; ++l) {
        float v = x[i + l];
        float s = gradc::sigmoid(v), t = gradc::tanh(v);
        float e = gradc::exp(-v * v), sn, cs;
        hand::sincos(v, sn, cs);
        lanes[l] += s * t + e * sn;
        if (Grad)
          dx[i + l] = s * (1.0f - s) * t + s * (1.0f - t * t) +
                      e * (cs - 2.0f * v * sn);
      }
    for (; i < b1; ++i) {
      float v = x[i];
      float s = gradc::sigmoid(v), t = gradc::tanh(v);
      float e = gradc::exp(-v * v), sn, cs;
      hand::sincos(v, sn, cs);
      lanes[0] += s * t + e * sn;
      if (Grad)
        dx[i] =
            s * (1.0f - s) * t + s * (1.0f - t * t) + e * (cs - 2.0f * v * sn);
    }
    float block = 0;
    for (float l : lanes)
      block += l;
    total += block;
  }
  return static_cast<float>(total);
}

} // namespace

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t N = b.size(0);
  auto x = b.load<float>("x", N);
  auto outs = bench::makeResults({size_t(N)});
  b.add(
      "hand_fwd",
      [&] {
        outs[0].value = chain<false>(x.data(), nullptr, N);
        return 0;
      },
      outs[0].outputs(true, false));
  b.add(
      "hand_vg",
      [&] {
        outs[1].value = chain<true>(x.data(), outs[1][0], N);
        return 0;
      },
      outs[1].outputs(true, true));
#define GRADC_IMPLS(M, base)                                                   \
  b.add(                                                                       \
      #M "_fwd", [&] { return M##_k2(N, x.data(), &outs[base].value); },       \
      outs[base].outputs(true, false));                                        \
  b.add(                                                                       \
      #M "_grad", [&] { return M##_k2_grad(N, x.data(), outs[base + 1][0]); }, \
      outs[base + 1].outputs(false, true));                                    \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        return M##_k2_value_and_grad(N, x.data(), &outs[base + 2].value,       \
                                     outs[base + 2][0]);                       \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(k2_cpp, 2)
  GRADC_IMPLS(k2_llvm, 5)
  return b.run();
}
