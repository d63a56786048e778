/* The C consumer of the package test: the loss of ../consumer/model.grad
   and its gradient through the C ABI, under the module name `net`. */
#include "model.h"

#include <stdio.h>

int main(void) {
  const float w[2] = {0.0f, 1.0986123f}; /* [0, ln 3] */
  const float t[2] = {1.0f, -2.0f};
  float loss = 0;
  float dw[2] = {0, 0};
  int status = net_loss(2, w, t, &loss);
  if (status == GRADC_OK)
    status = net_loss_grad(2, w, t, dw);
  printf("status %d loss %.4f d_w [%.4f, %.4f]\n", status, loss, dw[0], dw[1]);
  /* A negative size is refused. */
  printf("negative size status %d\n", net_loss(-1, w, t, &loss));
  return 0;
}
