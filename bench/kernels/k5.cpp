//===- k5.cpp - K5: layer norm of every row, projected on c ---------------===//
//
// Per row: μ, σ² = mean((x-μ)²), r = 1/sqrt(σ² + ε), x̂ = (x-μ) r,
// y = x̂ γ + β, f = Σ y c. With g = c γ (the cotangent of x̂):
// dγ = Σ_rows c x̂, dβ = Σ_rows c, dx = r (g - mean(g) - x̂ mean(g x̂)).
// Each sum runs in 16 f32 lanes over a row (4 KB), which stays in L1
// across the passes; dγ, dβ and dx are written in one last pass.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"
#include "HandMath.h"
#include "k5_cpp.h"
#include "k5_llvm.h"

namespace {

/// Σ_j f(j) over [0, n) in 16 f32 lanes, so that the loop vectorises
/// without reassociation.
template <typename F> float laneSum(int64_t n, F f) {
  float lanes[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l)
      lanes[l] += f(j + l);
  for (; j < n; ++j)
    lanes[0] += f(j);
  float s = 0;
  for (float l : lanes)
    s += l;
  return s;
}

template <bool Grad>
float layerNorm(const float *GRADC_RESTRICT x,
                const float *GRADC_RESTRICT gamma,
                const float *GRADC_RESTRICT beta, const float *GRADC_RESTRICT c,
                int64_t R, int64_t C, float *GRADC_RESTRICT dx,
                float *GRADC_RESTRICT dgamma, float *GRADC_RESTRICT dbeta) {
  double total = 0;
  if (Grad) {
    std::memset(dgamma, 0, sizeof(float) * C);
    std::memset(dbeta, 0, sizeof(float) * C);
  }
  const float invC = 1.0f / static_cast<float>(C);
  for (int64_t i = 0; i < R; ++i) {
    const float *GRADC_RESTRICT xi = x + i * C;
    const float *GRADC_RESTRICT ci = c + i * C;
    float mu = laneSum(C, [&](int64_t j) { return xi[j]; }) * invC;
    float v = laneSum(C, [&](int64_t j) {
      float d = xi[j] - mu;
      return d * d;
    });
    float r = 1.0f / std::sqrt(v * invC + 1e-5f);
    total += laneSum(C, [&](int64_t j) {
      return ((xi[j] - mu) * r * gamma[j] + beta[j]) * ci[j];
    });
    if (!Grad)
      continue;
    float mg = laneSum(C, [&](int64_t j) { return ci[j] * gamma[j]; }) * invC;
    float mgx =
        laneSum(
            C, [&](int64_t j) { return ci[j] * gamma[j] * (xi[j] - mu) * r; }) *
        invC;
    float *GRADC_RESTRICT di = dx + i * C;
    for (int64_t j = 0; j < C; ++j) {
      float xh = (xi[j] - mu) * r;
      di[j] = r * (ci[j] * gamma[j] - mg - xh * mgx);
      dgamma[j] += ci[j] * xh;
      dbeta[j] += ci[j];
    }
  }
  return static_cast<float>(total);
}

} // namespace

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t R = b.size(0), C = b.size(1);
  auto x = b.load<float>("x", R * C), gamma = b.load<float>("gamma", C);
  auto beta = b.load<float>("beta", C), c = b.load<float>("c", R * C);
  auto outs = bench::makeResults({size_t(R * C), size_t(C), size_t(C)});
  b.add(
      "hand_fwd",
      [&] {
        outs[0].value =
            layerNorm<false>(x.data(), gamma.data(), beta.data(), c.data(), R,
                             C, nullptr, nullptr, nullptr);
        return 0;
      },
      outs[0].outputs(true, false));
  b.add(
      "hand_vg",
      [&] {
        bench::Result &o = outs[1];
        o.value = layerNorm<true>(x.data(), gamma.data(), beta.data(), c.data(),
                                  R, C, o[0], o[1], o[2]);
        return 0;
      },
      outs[1].outputs(true, true));
#define GRADC_IMPLS(M, base)                                                   \
  b.add(                                                                       \
      #M "_fwd",                                                               \
      [&] {                                                                    \
        return M##_k5(R, C, x.data(), gamma.data(), beta.data(), c.data(),     \
                      &outs[base].value);                                      \
      },                                                                       \
      outs[base].outputs(true, false));                                        \
  b.add(                                                                       \
      #M "_grad",                                                              \
      [&] {                                                                    \
        bench::Result &o = outs[base + 1];                                     \
        return M##_k5_grad(R, C, x.data(), gamma.data(), beta.data(),          \
                           c.data(), o[0], o[1], o[2]);                        \
      },                                                                       \
      outs[base + 1].outputs(false, true));                                    \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        bench::Result &o = outs[base + 2];                                     \
        return M##_k5_value_and_grad(R, C, x.data(), gamma.data(),             \
                                     beta.data(), c.data(), &o.value, o[0],    \
                                     o[1], o[2]);                              \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(k5_cpp, 2)
  GRADC_IMPLS(k5_llvm, 5)
  return b.run();
}
