// tridiag.cpp - the kernels of tridiag.h. gradc run and gradc check
// compile it in-process because it sits beside the header;
// gradc_add_module's SOURCES links it into the module's library.
#include "tridiag.h"

#include <vector>

namespace {

/// The Thomas algorithm for sub-diagonal `lower` (lower[i] multiplies
/// x[i-1] in row i), diagonal `diag` and super-diagonal `upper` (upper[i]
/// multiplies x[i+1] in row i).
void thomas(int64_t n, const float *lower, const float *diag,
            const float *upper, const float *rhs, float *x) {
  if (n == 0)
    return;
  std::vector<double> cp(n), dp(n);
  cp[0] = n > 1 ? upper[0] / double(diag[0]) : 0.0;
  dp[0] = rhs[0] / double(diag[0]);
  for (int64_t i = 1; i < n; ++i) {
    double m = diag[i] - lower[i] * cp[i - 1];
    cp[i] = i + 1 < n ? upper[i] / m : 0.0;
    dp[i] = (rhs[i] - lower[i] * dp[i - 1]) / m;
  }
  x[n - 1] = float(dp[n - 1]);
  double next = dp[n - 1];
  for (int64_t i = n - 2; i >= 0; --i) {
    next = dp[i] - cp[i] * next;
    x[i] = float(next);
  }
}

} // namespace

extern "C" int tridiag_solve(int64_t N, const float *a, const float *b,
                             const float *c, const float *d, float *x) {
  if (N < 0)
    return 1;
  thomas(N, a, b, c, d, x);
  return 0;
}

extern "C" int tridiag_solve_adjoint(int64_t N, const float *a, const float *b,
                                     const float *c, const float *x,
                                     const float *dx, float *da, float *db,
                                     float *dc, float *dd) {
  if (N < 0)
    return 1;
  // A^T has sub-diagonal c[i-1] and super-diagonal a[i+1].
  std::vector<float> lower(N, 0.0f), upper(N, 0.0f);
  for (int64_t i = 1; i < N; ++i)
    lower[i] = c[i - 1];
  for (int64_t i = 0; i + 1 < N; ++i)
    upper[i] = a[i + 1];
  thomas(N, lower.data(), b, upper.data(), dx, dd);
  // x = A^-1 d, so dA = -dd x^T: each diagonal takes its band.
  for (int64_t i = 0; i < N; ++i) {
    db[i] = -dd[i] * x[i];
    da[i] = i > 0 ? -dd[i] * x[i - 1] : 0.0f;
    dc[i] = i + 1 < N ? -dd[i] * x[i + 1] : 0.0f;
  }
  return 0;
}
