//===- k3.cpp - K3: the logsumexp of every row, summed --------------------===//
//
// f = Σ_i logsumexp(x_i) and df/dx_i = softmax(x_i): per row (in L1) a max
// pass, a pass that stores e^(x - max) into the gradient and sums it in
// 16 lanes, and a scaling pass.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"
#include "HandMath.h"
#include "k3_cpp.h"
#include "k3_llvm.h"

namespace {

float rowMax(const float *GRADC_RESTRICT x, int64_t c) {
  float lanes[16];
  for (int l = 0; l < 16; ++l)
    lanes[l] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + 16 <= c; j += 16)
    for (int l = 0; l < 16; ++l)
      lanes[l] = std::max(lanes[l], x[j + l]);
  for (; j < c; ++j)
    lanes[0] = std::max(lanes[0], x[j]);
  float m = lanes[0];
  for (float l : lanes)
    m = std::max(m, l);
  return m;
}

/// Σ e^(x - m), storing each term in e when it is not null.
template <bool Store>
float sumExp(const float *GRADC_RESTRICT x, float *GRADC_RESTRICT e, float m,
             int64_t c) {
  float lanes[16] = {};
  int64_t j = 0;
  for (; j + 16 <= c; j += 16)
    for (int l = 0; l < 16; ++l) {
      float v = gradc::exp(x[j + l] - m);
      if (Store)
        e[j + l] = v;
      lanes[l] += v;
    }
  for (; j < c; ++j) {
    float v = gradc::exp(x[j] - m);
    if (Store)
      e[j] = v;
    lanes[0] += v;
  }
  float s = 0;
  for (float l : lanes)
    s += l;
  return s;
}

template <bool Grad>
float rows(const float *x, float *dx, int64_t r, int64_t c) {
  double total = 0;
  for (int64_t i = 0; i < r; ++i) {
    const float *xi = x + i * c;
    float m = rowMax(xi, c);
    float s = sumExp<Grad>(xi, Grad ? dx + i * c : nullptr, m, c);
    total += m + gradc::log(s);
    if (Grad) {
      float inv = 1.0f / s;
      float *GRADC_RESTRICT di = dx + i * c;
      for (int64_t j = 0; j < c; ++j)
        di[j] *= inv;
    }
  }
  return static_cast<float>(total);
}

} // namespace

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t R = b.size(0), C = b.size(1);
  auto x = b.load<float>("x", R * C);
  auto outs = bench::makeResults({size_t(R * C)});
  b.add(
      "hand_fwd",
      [&] {
        outs[0].value = rows<false>(x.data(), nullptr, R, C);
        return 0;
      },
      outs[0].outputs(true, false));
  b.add(
      "hand_vg",
      [&] {
        outs[1].value = rows<true>(x.data(), outs[1][0], R, C);
        return 0;
      },
      outs[1].outputs(true, true));
#define GRADC_IMPLS(M, base)                                                   \
  b.add(                                                                       \
      #M "_fwd", [&] { return M##_k3(R, C, x.data(), &outs[base].value); },    \
      outs[base].outputs(true, false));                                        \
  b.add(                                                                       \
      #M "_grad",                                                              \
      [&] { return M##_k3_grad(R, C, x.data(), outs[base + 1][0]); },          \
      outs[base + 1].outputs(false, true));                                    \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        return M##_k3_value_and_grad(R, C, x.data(), &outs[base + 2].value,    \
                                     outs[base + 2][0]);                       \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(k3_cpp, 2)
  GRADC_IMPLS(k3_llvm, 5)
  return b.run();
}
