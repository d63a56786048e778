#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
void shift(int64_t N, const float *x, float *out);
#ifdef __cplusplus
}
#endif
