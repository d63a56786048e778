// Calls blas.grad's functions, built with the BLAS paths, on inputs whose
// results are known exactly: a = 1 everywhere and b[k, n] = k + 1 give
// (a @ b)[m, n] = K (K + 1) / 2, and d a = ones @ bᵀ, d b = aᵀ @ ones.
#include "blas.h"

#include <cstdio>
#include <vector>

int main() {
  const int64_t M = 40, K = 50, N = 60; // 120000 multiply-adds: CBLAS
  std::vector<float> a(M * K, 1.0f), b(K * N);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      b[k * N + n] = float(k + 1);
  float out = 0;
  int status = blas_big(M, K, N, a.data(), b.data(), &out);
  std::printf("big %d %.1f\n", status, out);
  std::vector<float> da(M * K), db(K * N);
  status = blas_big_grad(M, K, N, a.data(), b.data(), da.data(), db.data());
  // d a[m, k] = sum_n b[k, n] = N (k + 1); d b[k, n] = M.
  std::printf("big_grad %d %.1f %.1f %.1f\n", status, da[0], da[K - 1], db[7]);
  // wide: x[b, i] = i + b, w[i, j] = j + 1: d x[b, i] = sum_j w[i, j] =
  // 528, d w[i, j] = sum_b x[b, i] = B i + B (B - 1) / 2. B = 100 calls
  // CBLAS (153600 multiply-adds), B = 3 the loops (4608), which read the
  // transposes that CBLAS reads in place (the LLVM backend stores them
  // there).
  for (int64_t wb : {100, 3}) {
    std::vector<float> x(wb * 48), ww(48 * 32), dx(wb * 48), dw(48 * 32);
    for (int64_t r = 0; r < wb; ++r)
      for (int64_t i = 0; i < 48; ++i)
        x[r * 48 + i] = float(i + r);
    for (int64_t i = 0; i < 48; ++i)
      for (int64_t j = 0; j < 32; ++j)
        ww[i * 32 + j] = float(j + 1);
    status = blas_wide_grad(wb, x.data(), ww.data(), dx.data(), dw.data());
    std::printf("wide_grad %d %.1f %.1f %.1f %.1f\n", status, dx[0],
                dx[(wb - 1) * 48 + 47], dw[0], dw[47 * 32 + 5]);
  }
  // h[b, i] = i + 1, w = 1: sum(h @ w) = 2 B H (H + 1) / 2, and
  // d w[i, j] = sum_b h[b, i] = B (i + 1).
  const int64_t B = 1000, H = 50; // 100000 multiply-adds: CBLAS
  std::vector<float> h(B * H), w2(H * 2, 1.0f), dw2(H * 2);
  for (int64_t i = 0; i < B * H; ++i)
    h[i] = float(i % H + 1);
  status = blas_narrow(B, H, h.data(), w2.data(), &out);
  std::printf("narrow %d %.1f\n", status, out);
  status = blas_narrow_grad(B, H, h.data(), w2.data(), dw2.data());
  std::printf("narrow_grad %d %.1f %.1f %.1f\n", status, dw2[0], dw2[1],
              dw2[2 * H - 1]);
  std::vector<float> w(16), x{1, 2, 3, 4}, y(4);
  for (int i = 0; i < 16; ++i)
    w[i] = float(i);
  status = blas_small(w.data(), x.data(), y.data());
  std::printf("small %d %.1f %.1f\n", status, y[0], y[3]);
  return 0;
}
