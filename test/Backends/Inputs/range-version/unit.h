// unit.h - an extern for test/Backends/range-version.grad: a C function
// that fails on a value outside [-1, 1], as a user's kernel may.
#ifndef RANGE_VERSION_UNIT_H
#define RANGE_VERSION_UNIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// out = x when every |x[i]| <= 1; otherwise returns 2 (GRADC_ERROR_INDEX),
/// also for NaN.
int unit_only(int64_t N, const float *x, float *out);

#ifdef __cplusplus
}
#endif

#endif // RANGE_VERSION_UNIT_H
