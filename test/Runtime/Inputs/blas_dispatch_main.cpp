// Which products the C++ runtime sends to CBLAS with -DGRADC_USE_BLAS
// (Kernels.h): this program defines cblas_sgemm itself, counting its
// calls, and checks that matmulF32 keeps b-as-stored products of 9 to 15
// columns inline at any size (matmulRowVectors, the f32 order bit for
// bit: GMM's N x D x D and D x D x N products, D = 10), while other large
// products, and gradc::matmul's in the default order, still call CBLAS.
// Prints one line per case; used by blas-dispatch.test.
#include "gradc/Kernels.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace {
int sgemmCalls = 0;
} // namespace

// OpenBLAS's declaration (cblas.h). The product itself is not checked.
extern "C" void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER,
                            OPENBLAS_CONST enum CBLAS_TRANSPOSE,
                            OPENBLAS_CONST enum CBLAS_TRANSPOSE,
                            OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n,
                            OPENBLAS_CONST blasint, OPENBLAS_CONST float,
                            OPENBLAS_CONST float *, OPENBLAS_CONST blasint,
                            OPENBLAS_CONST float *, OPENBLAS_CONST blasint,
                            OPENBLAS_CONST float, float *c,
                            OPENBLAS_CONST blasint) {
  ++sgemmCalls;
  std::fill(c, c + int64_t(m) * n, 0.0f);
}

namespace {

unsigned seed = 12345;
float next() {
  seed = seed * 1664525u + 1013904223u;
  return static_cast<float>((seed >> 8) / 16777216.0 - 0.5);
}

/// One product; prints the CBLAS calls and, for the f32 order, whether
/// every element equals one f32 accumulator per element in increasing p.
void check(const char *name, bool f32Order, int64_t m, int64_t n, int64_t k,
           gradc::Transpose ta, gradc::Transpose tb) {
  std::vector<float> a(m * k), b(k * n), c(m * n + 1, 3.0f), want(m * n + 1);
  for (float &v : a)
    v = next();
  for (float &v : b)
    v = next();
  c[m * n] = want[m * n] = 7.0f; // a canary after the end
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (ta ? a[p * m + i] : a[i * k + p]) *
             (tb ? b[j * k + p] : b[p * n + j]);
      want[i * n + j] = s;
    }
  sgemmCalls = 0;
  if (f32Order)
    gradc::matmulF32(a.data(), ta, b.data(), tb, c.data(), m, n, k);
  else
    gradc::matmul(a.data(), ta, b.data(), tb, c.data(), m, n, k);
  std::printf("%s: cblas_sgemm %d", name, sgemmCalls);
  if (f32Order && sgemmCalls == 0)
    std::printf(", %s",
                std::memcmp(c.data(), want.data(), sizeof(float) * (m * n + 1))
                    ? "FAIL"
                    : "exact");
  std::printf("\n");
}

} // namespace

int main() {
  using gradc::NoTranspose;
  using gradc::Transposed;
  check("f32 order 1000x10x10", true, 1000, 10, 10, NoTranspose, NoTranspose);
  check("f32 order 10x10x1000 ta", true, 10, 10, 1000, Transposed,
        NoTranspose);
  check("f32 order 300x15x40", true, 300, 15, 40, NoTranspose, NoTranspose);
  check("f32 order 1000x10x10 tb", true, 1000, 10, 10, NoTranspose,
        Transposed);
  check("f32 order 1000x8x10", true, 1000, 8, 10, NoTranspose, NoTranspose);
  check("f32 order 64x16x64", true, 64, 16, 64, NoTranspose, NoTranspose);
  check("default order 1000x10x10", false, 1000, 10, 10, NoTranspose,
        NoTranspose);
  return 0;
}
