//===- k4.cpp - K4: sum(tanh(w @ x)) for 4x4 w, timed per call ------------===//
//
// f = Σ_i tanh(y_i) with y = w x; with g = 1 - tanh(y)², df/dx = wᵀ g and
// df/dw = g xᵀ. Each timed call runs over a pool of P inputs (the driver
// divides by P), so a call's result and inputs are not in registers.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"
#include "HandMath.h"
#include "k4_cpp.h"
#include "k4_llvm.h"

namespace {

template <bool Grad>
void k4(const float *GRADC_RESTRICT x, const float *GRADC_RESTRICT w,
        float *value, float *GRADC_RESTRICT dx, float *GRADC_RESTRICT dw) {
  float t[4], g[4];
  float sum = 0;
  for (int i = 0; i < 4; ++i) {
    float y = w[4 * i] * x[0] + w[4 * i + 1] * x[1] + w[4 * i + 2] * x[2] +
              w[4 * i + 3] * x[3];
    t[i] = gradc::tanh(y);
    g[i] = 1.0f - t[i] * t[i];
  }
  sum = (t[0] + t[1]) + (t[2] + t[3]);
  *value = sum;
  if (!Grad)
    return;
  for (int j = 0; j < 4; ++j)
    dx[j] = w[j] * g[0] + w[4 + j] * g[1] + w[8 + j] * g[2] + w[12 + j] * g[3];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      dw[4 * i + j] = g[i] * x[j];
}

} // namespace

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t P = b.size(0);
  auto x = b.load<float>("x", P * 4);
  auto w = b.load<float>("w", P * 16);
  // Here "grads" are the P values, then the P gradients of x and of w.
  auto outs = bench::makeResults({size_t(P), size_t(P * 4), size_t(P * 16)});
  auto values = [&](int i) {
    return std::vector<std::pair<const float *, size_t>>{
        {outs[i][0], size_t(P)}};
  };
  auto grads = [&](int i) {
    return std::vector<std::pair<const float *, size_t>>{
        {outs[i][1], size_t(P * 4)}, {outs[i][2], size_t(P * 16)}};
  };
  auto both = [&](int i) {
    auto r = values(i);
    for (auto g : grads(i))
      r.push_back(g);
    return r;
  };
  b.add(
      "hand_fwd",
      [&] {
        for (int64_t p = 0; p < P; ++p)
          k4<false>(&x[4 * p], &w[16 * p], outs[0][0] + p, nullptr, nullptr);
        return 0;
      },
      values(0));
  b.add(
      "hand_vg",
      [&] {
        for (int64_t p = 0; p < P; ++p)
          k4<true>(&x[4 * p], &w[16 * p], outs[1][0] + p, outs[1][1] + 4 * p,
                   outs[1][2] + 16 * p);
        return 0;
      },
      both(1));
#define GRADC_IMPLS(M, base)                                                   \
  b.add(                                                                       \
      #M "_fwd",                                                               \
      [&] {                                                                    \
        int status = 0;                                                        \
        for (int64_t p = 0; p < P; ++p)                                        \
          status |= M##_k4(&x[4 * p], &w[16 * p], outs[base][0] + p);          \
        return status;                                                         \
      },                                                                       \
      values(base));                                                           \
  b.add(                                                                       \
      #M "_grad",                                                              \
      [&] {                                                                    \
        int status = 0;                                                        \
        for (int64_t p = 0; p < P; ++p)                                        \
          status |=                                                            \
              M##_k4_grad(&x[4 * p], &w[16 * p], outs[base + 1][1] + 4 * p,    \
                          outs[base + 1][2] + 16 * p);                         \
        return status;                                                         \
      },                                                                       \
      grads(base + 1));                                                        \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        int status = 0;                                                        \
        for (int64_t p = 0; p < P; ++p)                                        \
          status |= M##_k4_value_and_grad(                                     \
              &x[4 * p], &w[16 * p], outs[base + 2][0] + p,                    \
              outs[base + 2][1] + 4 * p, outs[base + 2][2] + 16 * p);          \
        return status;                                                         \
      },                                                                       \
      both(base + 2));
  GRADC_IMPLS(k4_cpp, 2)
  GRADC_IMPLS(k4_llvm, 5)
  return b.run();
}
