// shrink.h - soft thresholding, a C++ kernel that extern_soft_threshold.grad
// calls (docs/Extern.md): the size N, then the inputs (a tensor as a
// pointer to const, a scalar by value), then the output; an int status.
#ifndef SHRINK_H
#define SHRINK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// out[i] = sign(x[i]) * max(|x[i]| - t, 0): the proximal operator of
/// t * |x|_1. Returns 0, or 1 (GRADC_ERROR_SIZE) for a negative size.
int soft_threshold(int64_t N, const float *x, float t, float *out);

#ifdef __cplusplus
}
#endif

#endif // SHRINK_H
