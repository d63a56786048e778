// shrink.cpp - the kernel of shrink.h. gradc run and gradc check compile
// it in-process because it sits beside the header; gradc_add_module's
// SOURCES links it into the module's library.
#include "shrink.h"

#include <cmath>

extern "C" int soft_threshold(int64_t N, const float *x, float t, float *out) {
  if (N < 0)
    return 1;
  for (int64_t i = 0; i < N; ++i) {
    float magnitude = std::fabs(x[i]) - t;
    out[i] = magnitude > 0 ? std::copysign(magnitude, x[i]) : 0.0f;
  }
  return 0;
}
