//===- block.cpp - A transformer-style block: attention and MLP -----------===//
//
// Forward, for T tokens of width D = 64 and an MLP of width F = 256:
//   n1 = LN(x; g1, b1), q = n1 wq, k = n1 wk, v = n1 wv,
//   p = softmax(q kᵀ / 8), h = x + p v, n2 = LN(h; g2, b2),
//   t = tanh(n2 w1), y = h + t w2, f = Σ y c.
// Since Σ (t w2) c = Σ t (c w2ᵀ), the value reads dt = c w2ᵀ, which the
// gradient needs anyway, instead of forming t w2. Backward:
//   dw2 = tᵀ c, du = dt (1 - t²), dw1 = n2ᵀ du, dn2 = du w1ᵀ,
//   dh = c + LN'(dn2), dp = dh vᵀ, dv = pᵀ dh,
//   ds = p (dp - Σ_row dp p) / 8, dq = ds k, dk = dsᵀ q,
//   dw{q,k,v} = n1ᵀ d{q,k,v}, dn1 = dq wqᵀ + dk wkᵀ + dv wvᵀ,
// where LN' of the cotangent dn of n = x̂ g + b is dg = Σ_rows dn x̂,
// db = Σ_rows dn and dx = r (dn g - mean(dn g) - x̂ mean(dn g x̂)). Every
// product is an sgemm; the rest are fused passes over rows.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"
#include "HandMath.h"
#include "block_cpp.h"
#include "block_llvm.h"

#include <cblas.h>

namespace {

constexpr int64_t D = 64, F = 256;

/// n = x̂ g + b per row of x [T, D], keeping x̂ and 1/σ for the backward.
void layerNorm(const float *x, const float *g, const float *b, int64_t T,
               float *n, float *xh, float *rstd) {
  for (int64_t i = 0; i < T; ++i) {
    const float *xi = x + i * D;
    float s = 0, v = 0;
    for (int64_t j = 0; j < D; ++j)
      s += xi[j];
    float mu = s / D;
    for (int64_t j = 0; j < D; ++j)
      v += (xi[j] - mu) * (xi[j] - mu);
    float r = 1.0f / std::sqrt(v / D + 1e-5f);
    rstd[i] = r;
    for (int64_t j = 0; j < D; ++j) {
      xh[i * D + j] = (xi[j] - mu) * r;
      n[i * D + j] = xh[i * D + j] * g[j] + b[j];
    }
  }
}

/// dx (+)= LN'(dn); dg, db overwritten.
void layerNormGrad(const float *dn, const float *xh, const float *rstd,
                   const float *g, int64_t T, float *dx, bool accumulate,
                   float *dg, float *db) {
  std::memset(dg, 0, sizeof(float) * D);
  std::memset(db, 0, sizeof(float) * D);
  for (int64_t i = 0; i < T; ++i) {
    const float *dni = dn + i * D, *xhi = xh + i * D;
    float m1 = 0, m2 = 0;
    for (int64_t j = 0; j < D; ++j) {
      float e = dni[j] * g[j];
      m1 += e;
      m2 += e * xhi[j];
      dg[j] += dni[j] * xhi[j];
      db[j] += dni[j];
    }
    m1 /= D;
    m2 /= D;
    float *dxi = dx + i * D;
    for (int64_t j = 0; j < D; ++j) {
      float v = rstd[i] * (dni[j] * g[j] - m1 - xhi[j] * m2);
      dxi[j] = accumulate ? dxi[j] + v : v;
    }
  }
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float *a, const float *b, float beta, float *c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, ta ? m : k, b,
              tb ? k : n, beta, c, n);
}

struct Block {
  int64_t T;
  hand::Arena arena;

  template <bool Grad>
  int run(const float *x, const float *g1, const float *b1, const float *wq,
          const float *wk, const float *wv, const float *g2, const float *b2,
          const float *w1, const float *w2, const float *c, float *out,
          float **d) {
    size_t slot = 0;
    auto buf = [&](size_t n) { return arena.get(slot++, n); };
    float *n1 = buf(T * D), *xh1 = buf(T * D), *r1 = buf(T);
    float *q = buf(T * D), *k = buf(T * D), *v = buf(T * D);
    float *p = buf(T * T), *h = buf(T * D);
    float *n2 = buf(T * D), *xh2 = buf(T * D), *r2 = buf(T);
    float *t = buf(T * F), *dt = buf(T * F);
    layerNorm(x, g1, b1, T, n1, xh1, r1);
    gemm(false, false, T, D, D, 1, n1, wq, 0, q);
    gemm(false, false, T, D, D, 1, n1, wk, 0, k);
    gemm(false, false, T, D, D, 1, n1, wv, 0, v);
    gemm(false, true, T, T, D, 0.125f, q, k, 0, p);
    for (int64_t i = 0; i < T; ++i) {
      float *pi = p + i * T;
      float m = pi[0];
      for (int64_t j = 1; j < T; ++j)
        m = std::max(m, pi[j]);
      float s = 0;
      for (int64_t j = 0; j < T; ++j) {
        pi[j] = gradc::exp(pi[j] - m);
        s += pi[j];
      }
      float inv = 1.0f / s;
      for (int64_t j = 0; j < T; ++j)
        pi[j] *= inv;
    }
    std::memcpy(h, x, sizeof(float) * T * D);
    gemm(false, false, T, D, T, 1, p, v, 1, h);
    layerNorm(h, g2, b2, T, n2, xh2, r2);
    gemm(false, false, T, F, D, 1, n2, w1, 0, t);
    for (int64_t i = 0; i < T * F; ++i)
      t[i] = gradc::tanh(t[i]);
    gemm(false, true, T, F, D, 1, c, w2, 0, dt);
    float hc = 0, tdt = 0;
    for (int64_t i = 0; i < T * D; ++i)
      hc += h[i] * c[i];
    for (int64_t i = 0; i < T * F; ++i)
      tdt += t[i] * dt[i];
    *out = hc + tdt;
    if (!Grad)
      return 0;
    float *dg1 = d[0], *db1 = d[1], *dwq = d[2], *dwk = d[3], *dwv = d[4];
    float *dg2 = d[5], *db2 = d[6], *dw1 = d[7], *dw2 = d[8];
    float *dn2 = buf(T * D), *dh = buf(T * D), *dp = buf(T * T);
    float *dq = buf(T * D), *dk = buf(T * D), *dv = buf(T * D);
    float *dn1 = buf(T * D);
    gemm(true, false, F, D, T, 1, t, c, 0, dw2);
    for (int64_t i = 0; i < T * F; ++i)
      dt[i] *= 1.0f - t[i] * t[i];
    gemm(true, false, D, F, T, 1, n2, dt, 0, dw1);
    gemm(false, true, T, D, F, 1, dt, w1, 0, dn2);
    std::memcpy(dh, c, sizeof(float) * T * D);
    layerNormGrad(dn2, xh2, r2, g2, T, dh, true, dg2, db2);
    gemm(false, true, T, T, D, 1, dh, v, 0, dp);
    gemm(true, false, T, D, T, 1, p, dh, 0, dv);
    for (int64_t i = 0; i < T; ++i) {
      float *dpi = dp + i * T;
      const float *pi = p + i * T;
      float s = 0;
      for (int64_t j = 0; j < T; ++j)
        s += dpi[j] * pi[j];
      for (int64_t j = 0; j < T; ++j)
        dpi[j] = pi[j] * (dpi[j] - s) * 0.125f;
    }
    gemm(false, false, T, D, T, 1, dp, k, 0, dq);
    gemm(true, false, T, D, T, 1, dp, q, 0, dk);
    gemm(true, false, D, D, T, 1, n1, dq, 0, dwq);
    gemm(true, false, D, D, T, 1, n1, dk, 0, dwk);
    gemm(true, false, D, D, T, 1, n1, dv, 0, dwv);
    gemm(false, true, T, D, D, 1, dq, wq, 0, dn1);
    gemm(false, true, T, D, D, 1, dk, wk, 1, dn1);
    gemm(false, true, T, D, D, 1, dv, wv, 1, dn1);
    float *unused = buf(T * D);
    layerNormGrad(dn1, xh1, r1, g1, T, unused, false, dg1, db1);
    return 0;
  }
};

} // namespace

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t T = b.size(0);
  auto x = b.load<float>("x", T * D), c = b.load<float>("c", T * D);
  auto g1 = b.load<float>("g1", D), b1 = b.load<float>("b1", D);
  auto wq = b.load<float>("wq", D * D), wk = b.load<float>("wk", D * D);
  auto wv = b.load<float>("wv", D * D);
  auto g2 = b.load<float>("g2", D), b2 = b.load<float>("b2", D);
  auto w1 = b.load<float>("w1", D * F), w2 = b.load<float>("w2", F * D);
  auto outs =
      bench::makeResults({D, D, D * D, D * D, D * D, D, D, D * F, F * D});
  Block block{T, {}};
  b.add(
      "hand_fwd",
      [&] {
        return block.run<false>(x.data(), g1.data(), b1.data(), wq.data(),
                                wk.data(), wv.data(), g2.data(), b2.data(),
                                w1.data(), w2.data(), c.data(), &outs[0].value,
                                nullptr);
      },
      outs[0].outputs(true, false));
  float *handGrads[9];
  for (int i = 0; i < 9; ++i)
    handGrads[i] = outs[1][i];
  b.add(
      "hand_vg",
      [&] {
        return block.run<true>(x.data(), g1.data(), b1.data(), wq.data(),
                               wk.data(), wv.data(), g2.data(), b2.data(),
                               w1.data(), w2.data(), c.data(), &outs[1].value,
                               handGrads);
      },
      outs[1].outputs(true, true));
#define INPUTS                                                                 \
  T, x.data(), g1.data(), b1.data(), wq.data(), wk.data(), wv.data(),          \
      g2.data(), b2.data(), w1.data(), w2.data(), c.data()
#define GRADS(o) o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8]
#define GRADC_IMPLS(M, base)                                                   \
  b.add(                                                                       \
      #M "_fwd", [&] { return M##_block(INPUTS, &outs[base].value); },         \
      outs[base].outputs(true, false));                                        \
  b.add(                                                                       \
      #M "_grad",                                                              \
      [&] { return M##_block_grad(INPUTS, GRADS(outs[base + 1])); },           \
      outs[base + 1].outputs(false, true));                                    \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        return M##_block_value_and_grad(INPUTS, &outs[base + 2].value,         \
                                        GRADS(outs[base + 2]));                \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(block_cpp, 2)
  GRADC_IMPLS(block_llvm, 5)
  return b.run();
}
