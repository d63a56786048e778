#include "scale.h"
extern "C" int square_it(int64_t N, const float *x, float *out) {
  for (int64_t i = 0; i < N; ++i)
    out[i] = x[i] * x[i];
  return 0;
}
extern "C" int square_it_adjoint(int64_t N, const float *x, const float *dy,
                                 float *dx) {
  for (int64_t i = 0; i < N; ++i)
    dx[i] = dy[i] * x[i]; // wrong on purpose: the derivative is 2 x
  return 0;
}
