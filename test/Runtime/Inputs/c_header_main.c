/* The generated header is plain C outside `#ifdef __cplusplus`. */
#include "mlp.h"

int call_loss(const float *x, const float *w1, const float *b1,
              const float *w2, const float *b2, const int32_t *labels,
              float *loss) {
  int status = mlp_loss(3, x, w1, b1, w2, b2, labels, loss);
  return status == GRADC_OK ? 0 : status;
}
