//===- gmm.cpp - GMM: ADBench's Gaussian mixture objective ----------------===//
//
// Component k has the weight alpha_k, the mean mu_k and the inverse
// covariance factor Q_k = diag(e^q_k) + L_k, stored in row k of icf as q_k
// then the strict lower triangle of L_k column by column. With
// c = x_i - mu_k and z = Q_k c:
//
//   f = consts + Σ_i lse_k(a_ik) - n lse(alpha)
//       + Σ_k (γ²/2 (|e^q_k|² + |L_k|²) - m Σ q_k),
//   a_ik = alpha_k + Σ q_k - |z|²/2.
//
// With w_ik = softmax_k(a_ik) and dz = -w_ik z: dalpha_k = Σ_i w_ik -
// n softmax(alpha)_k; dq_kr = Σ_i w_ik + e^q_kr Σ_i dz_r c_r + γ² e^2q_kr
// - m; dL_k[r, j] = Σ_i dz_r c_j + γ² L_k[r, j]; dmu_k = -Σ_i Q_kᵀ dz.
//
// The expert's code runs every loop over the points, contiguous (x is
// transposed once per call), so that each vectorises: for each component,
// c and z of all points (K x D x N floats kept for the gradient), the
// logsumexp over components for all points at once, then per component
// the weights w, dz = -w z in place, and every gradient as a sum or a dot
// product over the points in 16 f32 lanes, walking L in its storage
// order. No index tables; the value sums in double.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"
#include "HandMath.h"
#include "gmm_cpp.h"
#ifndef BENCH_NO_LLVM
#include "gmm_llvm.h"
#endif

#include <cmath>
#include <limits>

namespace {

/// Σ a_i b_i and Σ a_i in 16 f32 lanes (vectorised; the lanes are added at
/// the end).
float dot(const float *GRADC_RESTRICT a, const float *GRADC_RESTRICT b,
          int64_t n) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l)
      lanes[l] += a[i + l] * b[i + l];
  for (; i < n; ++i)
    lanes[0] += a[i] * b[i];
  float s = 0;
  for (float l : lanes)
    s += l;
  return s;
}
float sum(const float *GRADC_RESTRICT a, int64_t n) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l)
      lanes[l] += a[i + l];
  for (; i < n; ++i)
    lanes[0] += a[i];
  float s = 0;
  for (float l : lanes)
    s += l;
  return s;
}

struct Gmm {
  int64_t n, d, k, p;
  const float *x, *alphas, *means, *icf;
  float gamma, m, consts;
  hand::Arena arena;

  /// The value; with Grad also the gradients (overwritten).
  template <bool Grad>
  float run(float *GRADC_RESTRICT da, float *GRADC_RESTRICT dmu,
            float *GRADC_RESTRICT dicf) {
    float *xt = arena.get(0, d * n);     // x transposed: [D, N]
    float *cs = arena.get(1, k * d * n); // c per component: [K, D, N]
    float *zs = arena.get(2, k * d * n); // z, then dz: [K, D, N]
    float *a = arena.get(3, k * n);      // a_ik, then w_ik: [K, N]
    float *lse = arena.get(4, n);        // lse_k(a_ik) per point
    float *work = arena.get(5, n);
    float *qd = arena.get(6, k * d); // e^q
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < d; ++r)
        xt[r * n + i] = x[i * d + r];
    for (int64_t c = 0; c < k; ++c) {
      const float *mu = means + c * d, *q = icf + c * p, *l = q + d;
      float *GRADC_RESTRICT qe = qd + c * d;
      float sumq = alphas[c];
      for (int64_t r = 0; r < d; ++r) {
        qe[r] = gradc::exp(q[r]);
        sumq += q[r];
      }
      float *cc = cs + c * d * n, *z = zs + c * d * n;
      for (int64_t r = 0; r < d; ++r) {
        const float *GRADC_RESTRICT xr = xt + r * n;
        float *GRADC_RESTRICT cr = cc + r * n, *GRADC_RESTRICT zr = z + r * n;
        for (int64_t i = 0; i < n; ++i) {
          cr[i] = xr[i] - mu[r];
          zr[i] = qe[r] * cr[i];
        }
      }
      // z_r += L[r, j] c_j, walking L in its storage order.
      for (int64_t j = 0; j < d; ++j)
        for (int64_t r = j + 1; r < d; ++r) {
          float lrj = *l++;
          const float *GRADC_RESTRICT cj = cc + j * n;
          float *GRADC_RESTRICT zr = z + r * n;
          for (int64_t i = 0; i < n; ++i)
            zr[i] += lrj * cj[i];
        }
      float *GRADC_RESTRICT ac = a + c * n;
      for (int64_t i = 0; i < n; ++i)
        ac[i] = 0;
      for (int64_t r = 0; r < d; ++r) {
        const float *GRADC_RESTRICT zr = z + r * n;
        for (int64_t i = 0; i < n; ++i)
          ac[i] += zr[i] * zr[i];
      }
      for (int64_t i = 0; i < n; ++i)
        ac[i] = sumq - 0.5f * ac[i];
    }
    // lse over the components, for all points at once.
    for (int64_t i = 0; i < n; ++i)
      lse[i] = a[i];
    for (int64_t c = 1; c < k; ++c)
      for (int64_t i = 0; i < n; ++i)
        lse[i] = std::max(lse[i], a[c * n + i]);
    for (int64_t i = 0; i < n; ++i)
      work[i] = 0;
    for (int64_t c = 0; c < k; ++c)
      for (int64_t i = 0; i < n; ++i)
        work[i] += gradc::exp(a[c * n + i] - lse[i]);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      lse[i] += gradc::log(work[i]);
      total += lse[i];
    }
    // The terms that do not depend on the points.
    float lseAlpha = alphas[0];
    for (int64_t c = 1; c < k; ++c)
      lseAlpha = std::max(lseAlpha, alphas[c]);
    float se = 0;
    for (int64_t c = 0; c < k; ++c)
      se += gradc::exp(alphas[c] - lseAlpha);
    lseAlpha += gradc::log(se);
    double prior = 0;
    for (int64_t c = 0; c < k; ++c) {
      const float *q = icf + c * p;
      double frob = 0, sq = 0;
      for (int64_t r = 0; r < d; ++r) {
        frob += double(qd[c * d + r]) * qd[c * d + r];
        sq += q[r];
      }
      for (int64_t j = d; j < p; ++j)
        frob += double(q[j]) * q[j];
      prior += 0.5 * double(gamma) * gamma * frob - double(m) * sq;
    }
    float value = float(double(consts) + total - double(n) * lseAlpha + prior);
    if (!Grad)
      return value;

    const float g2 = gamma * gamma;
    for (int64_t c = 0; c < k; ++c) {
      const float *q = icf + c * p, *l = q + d, *qe = qd + c * d;
      float *GRADC_RESTRICT w = a + c * n;
      for (int64_t i = 0; i < n; ++i)
        w[i] = gradc::exp(w[i] - lse[i]);
      float wsum = sum(w, n);
      da[c] = wsum - float(n) * gradc::exp(alphas[c] - lseAlpha);
      const float *cc = cs + c * d * n;
      float *z = zs + c * d * n;
      float colSum[64];
      float *GRADC_RESTRICT dq = dicf + c * p;
      for (int64_t r = 0; r < d; ++r) {
        float *GRADC_RESTRICT zr = z + r * n;
        for (int64_t i = 0; i < n; ++i)
          zr[i] = -w[i] * zr[i]; // dz
        colSum[r] = sum(zr, n);
        dq[r] = wsum + qe[r] * dot(zr, cc + r * n, n) + g2 * qe[r] * qe[r] - m;
      }
      // dL[r, j] = Σ_i dz_r c_j; dmu_j = -(e^q_j S_j + Σ_r>j L[r, j] S_r).
      float *GRADC_RESTRICT dl = dq + d;
      float *GRADC_RESTRICT dm = dmu + c * d;
      for (int64_t j = 0; j < d; ++j) {
        float back = qe[j] * colSum[j];
        for (int64_t r = j + 1; r < d; ++r, ++l, ++dl) {
          *dl = dot(z + r * n, cc + j * n, n) + g2 * *l;
          back += *l * colSum[r];
        }
        dm[j] = -back;
      }
    }
    return value;
  }
};

} // namespace

int main(int argc, char **argv) {
  bench::Bench b(argc, argv);
  const int64_t N = b.size(0), D = b.size(1), K = b.size(2);
  const int64_t P = D + D * (D - 1) / 2;
  if (D > 64) {
    std::fprintf(stderr, "gmm: D above 64\n");
    return 2;
  }
  auto x = b.load<float>("x", N * D);
  auto alphas = b.load<float>("alphas", K);
  auto means = b.load<float>("means", K * D);
  auto icf = b.load<float>("icf", K * P);
  auto diag = b.load<int32_t>("diag", D);
  auto tri = b.load<int32_t>("tri", D * D);
  auto mask = b.load<float>("mask", D * D);
  auto eye = b.load<float>("eye", D * D);
  const float gamma = b.load<float>("gamma", 1)[0];
  const float m = b.load<float>("m", 1)[0];
  const float consts = b.load<float>("consts", 1)[0];
  Gmm hand{N,          D,     K, P,      x.data(), alphas.data(), means.data(),
           icf.data(), gamma, m, consts, {}};
  auto outs = bench::makeResults({size_t(K), size_t(K * D), size_t(K * P)});
  b.add(
      "hand_fwd",
      [&] {
        outs[0].value = hand.run<false>(nullptr, nullptr, nullptr);
        return 0;
      },
      outs[0].outputs(true, false));
  b.add(
      "hand_vg",
      [&] {
        outs[1].value = hand.run<true>(outs[1][0], outs[1][1], outs[1][2]);
        return 0;
      },
      outs[1].outputs(true, true));
#define GMM_ARGS                                                               \
  N, D, K, P, x.data(), alphas.data(), means.data(), icf.data(), diag.data(),  \
      tri.data(), mask.data(), eye.data(), gamma, m, consts
#define GRADC_IMPLS(M, base)                                                   \
  b.add(                                                                       \
      #M "_fwd", [&] { return M##_gmm(GMM_ARGS, &outs[base].value); },         \
      outs[base].outputs(true, false));                                        \
  b.add(                                                                       \
      #M "_grad",                                                              \
      [&] {                                                                    \
        return M##_gmm_grad(GMM_ARGS, outs[base + 1][0], outs[base + 1][1],    \
                            outs[base + 1][2]);                                \
      },                                                                       \
      outs[base + 1].outputs(false, true));                                    \
  b.add(                                                                       \
      #M "_vg",                                                                \
      [&] {                                                                    \
        return M##_gmm_value_and_grad(GMM_ARGS, &outs[base + 2].value,         \
                                      outs[base + 2][0], outs[base + 2][1],    \
                                      outs[base + 2][2]);                      \
      },                                                                       \
      outs[base + 2].outputs(true, true));
  GRADC_IMPLS(gmm_cpp, 2)
#ifndef BENCH_NO_LLVM
  GRADC_IMPLS(gmm_llvm, 5)
#endif
  return b.run();
}
