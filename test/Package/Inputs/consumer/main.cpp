// The consumer of the package test: evaluates model.grad's loss and its
// gradient at one point, once through the C ABI and once through the C++
// layer of the generated header, and prints both.
#include "model.h"

#include <cmath>
#include <cstdio>

int main() {
  const float w[2] = {0.0f, std::log(3.0f)};
  const float t[2] = {1.0f, -2.0f};

  // The C ABI: the size N first, then the inputs, then the outputs.
  float loss = 0;
  float dw[2] = {0, 0};
  if (model_loss(2, w, t, &loss) != GRADC_OK ||
      model_loss_grad(2, w, t, dw) != GRADC_OK)
    return 1;
  std::printf("loss %.4f\n", loss);
  std::printf("C ABI   d_w [%.4f, %.4f]\n", dw[0], dw[1]);

  // The C++ layer: views carry the shapes, and N is bound from them.
  float dw2[2] = {0, 0};
  int status = model::loss_grad({w, {2}}, {t, {2}}, {dw2, {2}});
  std::printf("C++     d_w [%.4f, %.4f] status %d\n", dw2[0], dw2[1], status);

  // A view whose size disagrees with N is refused before any work.
  status = model::loss_grad({w, {2}}, {t, {2}}, {dw2, {3}});
  std::printf("bad shape status %d\n", status);
  return 0;
}
