#include <stdint.h>
extern "C" int twice(int64_t N, const float *x, float *out);
