// Built into a shared library by test/Driver/extern-run.test; its name
// differs from the header's, so gradc does not compile it by itself.
#include "twice.h"
extern "C" int twice(int64_t N, const float *x, float *out) {
  for (int64_t i = 0; i < N; ++i)
    out[i] = 2 * x[i];
  return 0;
}
