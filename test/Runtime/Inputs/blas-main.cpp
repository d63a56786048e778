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
  {
    // 3 x 4 x 5, below blasMinWork: the loops, which read the transposes
    // of b and a that CBLAS reads in place (the LLVM backend stores them
    // there). a[m, k] = m + 2 k, b[k, n] = k n + 1: d a[m, k] = sum_n
    // b[k, n] = 10 k + 5, d b[k, n] = sum_m a[m, k] = 3 + 6 k.
    const int64_t m = 3, k = 4, n = 5;
    std::vector<float> sa(m * k), sb(k * n), sda(m * k), sdb(k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p)
        sa[i * k + p] = float(i + 2 * p);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        sb[p * n + j] = float(p * j + 1);
    status = blas_big_grad(m, k, n, sa.data(), sb.data(), sda.data(),
                           sdb.data());
    std::printf("small_big_grad %d %.1f %.1f %.1f %.1f\n", status, sda[0],
                sda[2 * k + 3], sdb[0], sdb[3 * n + 4]);
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
