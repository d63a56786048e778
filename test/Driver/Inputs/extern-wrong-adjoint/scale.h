#include <stdint.h>
extern "C" {
// out = x * x
int square_it(int64_t N, const float *x, float *out);
// The adjoint, deliberately wrong: dx = dy * x, missing the factor 2.
int square_it_adjoint(int64_t N, const float *x, const float *dy, float *dx);
}
