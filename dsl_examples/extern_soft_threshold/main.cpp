//===- main.cpp - Fit through a C++ kernel with a straight-through rule ---===//
//
// extern_soft_threshold.grad calls soft_threshold, a C++ kernel, with a
// straight-through gradient rule. Gradient descent on the shadow weights
// w (from 0) of loss = |shrink(w, t) - target|^2 with t = 0.5 reaches
// shrink(w) = target: w = target + t * sign(target) where the target is
// non-zero, and w = 0 (inside [-t, t]) where it is zero, since there the
// straight-through gradient 2 (shrink(w) - target) is 0 from the start.
//
//===----------------------------------------------------------------------===//

#include "extern_soft_threshold.h"

#include <cstdio>
#include <vector>

int main() {
  const int n = 4;
  const float t = 0.5f, learningRate = 0.25f;
  const std::vector<float> target = {1.0f, -2.0f, 0.25f, 0.0f};
  std::vector<float> w(n, 0.0f), dw(n), s(n);
  for (int step = 0; step <= 40; ++step) {
    float loss = 0;
    extern_soft_threshold::loss({w.data(), {n}}, {target.data(), {n}}, t, loss);
    extern_soft_threshold::loss_grad({w.data(), {n}}, {target.data(), {n}}, t,
                                     {dw.data(), {n}});
    if (step % 10 == 0)
      std::printf("step %2d  loss %g\n", step, loss);
    for (int i = 0; i < n; ++i)
      w[i] -= learningRate * dw[i];
  }
  std::printf("w [%g, %g, %g, %g]\n", w[0], w[1], w[2], w[3]);
  return 0;
}
