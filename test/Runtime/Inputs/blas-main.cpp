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
  std::vector<float> w(16), x{1, 2, 3, 4}, y(4);
  for (int i = 0; i < 16; ++i)
    w[i] = float(i);
  status = blas_small(w.data(), x.data(), y.data());
  std::printf("small %d %.1f %.1f\n", status, y[0], y[3]);
  return 0;
}
