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
// The expert's code is one pass over the points: for each point and each
// component it makes c and z (d floats each, kept in L1 for the point),
// the softmax over components, and then accumulates every gradient from
// the same c and z, walking L in its storage order. No index tables, no
// N x K x D intermediate; value sums in double.
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

struct Gmm {
  int64_t n, d, k, p;
  const float *x, *alphas, *means, *icf;
  float gamma, m, consts;
  hand::Arena arena;

  /// logsumexp of v[0..count).
  static float lse(const float *v, int64_t count) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < count; ++j)
      mx = std::max(mx, v[j]);
    float s = 0;
    for (int64_t j = 0; j < count; ++j)
      s += gradc::exp(v[j] - mx);
    return mx + gradc::log(s);
  }

  /// The value; with Grad also the gradients (overwritten).
  template <bool Grad>
  float run(float *GRADC_RESTRICT da, float *GRADC_RESTRICT dmu,
            float *GRADC_RESTRICT dicf) {
    float *qd = arena.get(0, k * d);      // e^q
    float *sumq = arena.get(1, k);        // Σ q_k + alpha_k
    float *cs = arena.get(2, k * d);      // c of the point, per component
    float *zs = arena.get(3, k * d);      // z of the point, per component
    float *a = arena.get(4, k);           // a_ik of the point
    float *diagAcc = arena.get(5, k * d); // Σ_i dz_r c_r
    std::vector<double> wsum(Grad ? k : 0, 0.0);
    for (int64_t c = 0; c < k; ++c) {
      float s = alphas[c];
      for (int64_t r = 0; r < d; ++r) {
        qd[c * d + r] = gradc::exp(icf[c * p + r]);
        s += icf[c * p + r];
      }
      sumq[c] = s;
    }
    if (Grad) {
      std::memset(dmu, 0, sizeof(float) * k * d);
      std::memset(dicf, 0, sizeof(float) * k * p);
      std::memset(diagAcc, 0, sizeof(float) * k * d);
    }
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float *xi = x + i * d;
      for (int64_t c = 0; c < k; ++c) {
        const float *mu = means + c * d, *q = qd + c * d;
        const float *l = icf + c * p + d;
        float *GRADC_RESTRICT cc = cs + c * d;
        float *GRADC_RESTRICT z = zs + c * d;
        for (int64_t r = 0; r < d; ++r) {
          cc[r] = xi[r] - mu[r];
          z[r] = q[r] * cc[r];
        }
        for (int64_t j = 0; j < d; ++j) {
          float cj = cc[j];
          for (int64_t r = j + 1; r < d; ++r)
            z[r] += *l++ * cj;
        }
        float sq = 0;
        for (int64_t r = 0; r < d; ++r)
          sq += z[r] * z[r];
        a[c] = sumq[c] - 0.5f * sq;
      }
      float lsei = lse(a, k);
      total += lsei;
      if (!Grad)
        continue;
      for (int64_t c = 0; c < k; ++c) {
        float w = gradc::exp(a[c] - lsei);
        wsum[c] += w;
        const float *q = qd + c * d, *cc = cs + c * d, *z = zs + c * d;
        const float *l = icf + c * p + d;
        float *GRADC_RESTRICT dl = dicf + c * p + d;
        float *GRADC_RESTRICT dm = dmu + c * d;
        float *GRADC_RESTRICT dg = diagAcc + c * d;
        float dz[64];
        for (int64_t r = 0; r < d; ++r) {
          dz[r] = -w * z[r];
          dg[r] += dz[r] * cc[r];
          dm[r] -= q[r] * dz[r];
        }
        for (int64_t j = 0; j < d; ++j) {
          float cj = cc[j], back = 0;
          for (int64_t r = j + 1; r < d; ++r, ++l, ++dl) {
            *dl += dz[r] * cj;
            back += *l * dz[r];
          }
          dm[j] -= back;
        }
      }
    }
    // The terms that do not depend on the points.
    float lseAlpha = lse(alphas, k);
    double prior = 0;
    for (int64_t c = 0; c < k; ++c) {
      const float *q = qd + c * d, *l = icf + c * p + d;
      double frob = 0;
      for (int64_t r = 0; r < d; ++r)
        frob += double(q[r]) * q[r];
      for (int64_t j = d; j < p; ++j)
        frob += double(l[j - d]) * l[j - d];
      prior += 0.5 * double(gamma) * gamma * frob -
               double(m) * (sumq[c] - alphas[c]);
      if (!Grad)
        continue;
      float g2 = gamma * gamma;
      da[c] = float(wsum[c] - double(n) * gradc::exp(alphas[c] - lseAlpha));
      float *GRADC_RESTRICT dq = dicf + c * p;
      for (int64_t r = 0; r < d; ++r)
        dq[r] =
            float(wsum[c]) + q[r] * diagAcc[c * d + r] + g2 * q[r] * q[r] - m;
      for (int64_t j = d; j < p; ++j)
        dq[j] += g2 * icf[c * p + j];
    }
    return float(double(consts) + total - double(n) * lseAlpha + prior);
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
