//===- HandMLP.h - Hand-written tanh MLP with softmax cross-entropy -------===//
//
// The reference for K1 and the spiral step:
//
//   h = tanh(x @ w1 + b1),  z = h @ w2 + b2,
//   loss = mean_i (logsumexp(z_i) - z_i[label_i])
//
// and its gradient: dz = (softmax(z) - onehot(labels)) / B, dw2 = hᵀ dz,
// db2 = Σ_i dz, dh = dz w2ᵀ, da = dh (1 - h²), db1 = Σ_i da, dw1 = xᵀ da.
// Matrix products go through OpenBLAS's sgemm; the bias, tanh and softmax
// each run in one fused pass over rows that are still in cache.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_BENCH_HANDMLP_H
#define GRADC_BENCH_HANDMLP_H

#include "HandMath.h"

#include <cblas.h>

namespace hand {

struct MLP {
  int64_t B, I, H, O;
  Arena arena;

  /// h = tanh(x w1 + b1) and z = h w2 + b2 into the arena; returns the loss
  /// and leaves softmax(z) - onehot in dz when `wantDz`.
  float forward(const float *x, const float *w1, const float *b1,
                const float *w2, const float *b2, const int32_t *labels,
                float *h, float *z, float *dz) {
    for (int64_t i = 0; i < B; ++i)
      std::memcpy(h + i * H, b1, sizeof(float) * H);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, I, 1.0f, x, I,
                w1, H, 1.0f, h, H);
    for (int64_t n = 0; n < B * H; ++n)
      h[n] = gradc::tanh(h[n]);
    for (int64_t i = 0; i < B; ++i)
      std::memcpy(z + i * O, b2, sizeof(float) * O);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, O, H, 1.0f, h, H,
                w2, O, 1.0f, z, O);
    double loss = 0;
    float invB = 1.0f / static_cast<float>(B);
    for (int64_t i = 0; i < B; ++i) {
      const float *zi = z + i * O;
      float m = zi[0];
      for (int64_t j = 1; j < O; ++j)
        m = std::max(m, zi[j]);
      float s = 0;
      for (int64_t j = 0; j < O; ++j)
        s += gradc::exp(zi[j] - m);
      float lse = m + gradc::log(s);
      loss += lse - zi[labels[i]];
      if (dz) {
        float *dzi = dz + i * O;
        float scale = invB / s;
        for (int64_t j = 0; j < O; ++j)
          dzi[j] = gradc::exp(zi[j] - m) * scale;
        dzi[labels[i]] -= invB;
      }
    }
    return static_cast<float>(loss / B);
  }

  int value(const float *x, const float *w1, const float *b1, const float *w2,
            const float *b2, const int32_t *labels, float *out) {
    float *h = arena.get(0, B * H), *z = arena.get(1, B * O);
    *out = forward(x, w1, b1, w2, b2, labels, h, z, nullptr);
    return 0;
  }

  int valueAndGrad(const float *x, const float *w1, const float *b1,
                   const float *w2, const float *b2, const int32_t *labels,
                   float *out, float *dw1, float *db1, float *dw2, float *db2) {
    float *h = arena.get(0, B * H), *z = arena.get(1, B * O);
    float *dz = arena.get(2, B * O), *da = arena.get(3, B * H);
    *out = forward(x, w1, b1, w2, b2, labels, h, z, dz);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, O, B, 1.0f, h, H,
                dz, O, 0.0f, dw2, O);
    columnSums(dz, db2, B, O);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, H, O, 1.0f, dz, O,
                w2, O, 0.0f, da, H);
    for (int64_t n = 0; n < B * H; ++n)
      da[n] *= 1.0f - h[n] * h[n];
    columnSums(da, db1, B, H);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I, H, B, 1.0f, x, I,
                da, H, 0.0f, dw1, H);
    return 0;
  }
};

} // namespace hand

#endif // GRADC_BENCH_HANDMLP_H
