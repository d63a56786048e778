//===- main.cpp - logsumexp three ways, at inputs that overflow -----------===//
//
// Evaluates the three logsumexp functions of stable_logsumexp.grad (the
// naive formula, the built-in op, and the shifted formula with its own
// @custom_grad rule) and their gradients on small inputs, where they
// agree, and on [1000, 1000] and [-1000, -1000], where exp overflows or
// underflows in f32 and only the naive formula fails.
//
//===----------------------------------------------------------------------===//

#include "stable_logsumexp.h"

#include <cstdio>
#include <vector>

namespace {

using Fn = int (*)(gradc::TensorView<const float>, float &);
using GradFn = int (*)(gradc::TensorView<const float>,
                       gradc::TensorView<float>);

void row(const char *name, Fn f, GradFn g, const std::vector<float> &x) {
  float value = 0;
  std::vector<float> dx(x.size());
  int64_t n = static_cast<int64_t>(x.size());
  if (f({x.data(), {n}}, value) != GRADC_OK ||
      g({x.data(), {n}}, {dx.data(), {n}}) != GRADC_OK) {
    std::printf("%s failed\n", name);
    return;
  }
  std::printf("  %-8s %12.4f   grad [", name, value);
  for (size_t i = 0; i < dx.size(); ++i)
    std::printf(i ? ", %.7f" : "%.7f", dx[i]);
  std::printf("]\n");
}

} // namespace

int main() {
  const std::vector<std::vector<float>> inputs = {
      {1.0f, 2.0f, 3.0f}, {1000.0f, 1000.0f}, {-1000.0f, -1000.0f}};
  for (const std::vector<float> &x : inputs) {
    std::printf("x = [");
    for (size_t i = 0; i < x.size(); ++i)
      std::printf(i ? ", %g" : "%g", x[i]);
    std::printf("]\n");
    row("naive", stable_logsumexp::naive, stable_logsumexp::naive_grad, x);
    row("builtin", stable_logsumexp::builtin, stable_logsumexp::builtin_grad,
        x);
    row("stable", stable_logsumexp::stable, stable_logsumexp::stable_grad, x);
  }
  return 0;
}
