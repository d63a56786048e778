#include <stdint.h>
extern "C" {
int k(int64_t N, const float *x, float *out);
int k2(int64_t N, const float *x, float *out);
int k3(int64_t N, const float *x, float *out);
int k_adjoint(int64_t N, const float *x, const float *dy, float *out);
}
