#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
int scale(int64_t N, const float *x, float t, float *out);
#ifdef __cplusplus
}
#endif
