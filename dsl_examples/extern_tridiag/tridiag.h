// tridiag.h - a tridiagonal solver and its adjoint, C++ kernels that
// extern_tridiag.grad calls (docs/Extern.md): the size N first, then the
// inputs as pointers to const, then one pointer per result.
#ifndef TRIDIAG_H
#define TRIDIAG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Solves A x = d for the tridiagonal A with sub-diagonal a (a[0] is not
/// used), diagonal b and super-diagonal c (c[N-1] is not used), by the
/// Thomas algorithm (no pivoting: A should be diagonally dominant).
/// Returns 0, or 1 (GRADC_ERROR_SIZE) for a negative size.
int tridiag_solve(int64_t N, const float *a, const float *b, const float *c,
                  const float *d, float *x);

/// The adjoint of tridiag_solve at its solution x, for the cotangent dx:
/// dd = A^-T dx, and the cotangents of the three diagonals are those of
/// -dd x^T on the tridiagonal band (da[0] = dc[N-1] = 0).
int tridiag_solve_adjoint(int64_t N, const float *a, const float *b,
                          const float *c, const float *x, const float *dx,
                          float *da, float *db, float *dc, float *dd);

#ifdef __cplusplus
}
#endif

#endif // TRIDIAG_H
