#include "kernel.h"
extern "C" int negate(int64_t N, const KERNEL_FLOAT *x, KERNEL_FLOAT *out) {
  for (int64_t i = 0; i < N; ++i)
    out[i] = -x[i];
  return KERNEL_CONFIG_OK - 1;
}
