//===- main.cpp - Fit quantised weights with a straight-through estimator -===//
//
// Quantisation-aware training with quantize_ste.grad: recover the weights
// w* = [0.75, -1.25, 0.5, 2] of a linear model, which lie on the grid of
// spacing 0.25, from exact data y = X w*, when the model may only use
// weights on that grid. The design X is the first four columns of the
// 8 x 8 Hadamard matrix, so Xᵀ X = 8 I and the loss
//   mean((X q - y)^2) = |q - w*|^2,   q = quantize(w, 0.25),
// is easy to check by hand, and so is its straight-through gradient
// 2 (q - w*).
//
// The program trains the shadow weights w (from 0) by gradient descent
// three times: through plain rounding, whose gradient is zero so w never
// moves, and through the two straight-through forms of the .grad file, a
// stop_gradient identity and a @custom_grad rule, which reach q = w*.
//
//===----------------------------------------------------------------------===//

#include "quantize_ste.h"

#include <cstdio>
#include <vector>

namespace {

constexpr int rows = 8, features = 4;
constexpr float gridStep = 0.25f;
constexpr float learningRate = 0.1f;
constexpr int steps = 20;
constexpr int reportEvery = 5;

/// Any of the three losses' gradient functions (their C++ layer).
using LossGrad = int (*)(gradc::TensorView<const float>,
                         gradc::TensorView<const float>,
                         gradc::TensorView<const float>, float,
                         gradc::TensorView<float>);

void print(const char *what, const std::vector<float> &v) {
  std::printf("%s [", what);
  for (size_t i = 0; i < v.size(); ++i)
    std::printf(i ? ", %g" : "%g", v[i]);
  std::printf("]");
}

/// Gradient descent on the shadow weights w; prints the loss of the
/// quantised model and its weights every `reportEvery` steps.
void train(const char *name, LossGrad lossGrad, const std::vector<float> &x,
           const std::vector<float> &y) {
  std::printf("== %s\n", name);
  std::vector<float> w(features, 0.0f), dw(features), q(features);
  for (int s = 0; s <= steps; ++s) {
    float loss = 0;
    quantize_ste::loss_round({x.data(), {rows, features}}, {y.data(), {rows}},
                             {w.data(), {features}}, gridStep, loss);
    lossGrad({x.data(), {rows, features}}, {y.data(), {rows}},
             {w.data(), {features}}, gridStep, {dw.data(), {features}});
    if (s % reportEvery == 0) {
      quantize_ste::quantize({w.data(), {features}}, gridStep,
                             {q.data(), {features}});
      std::printf("step %2d  loss %-8g", s, loss);
      print(" q", q);
      print("  grad", dw);
      std::printf("\n");
    }
    for (int i = 0; i < features; ++i)
      w[i] -= learningRate * dw[i];
  }
}

} // namespace

int main() {
  // The first four columns of the Sylvester-Hadamard matrix H8.
  std::vector<float> x(rows * features);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < features; ++c)
      x[r * features + c] = __builtin_popcount(r & c) % 2 ? -1.0f : 1.0f;
  const std::vector<float> target = {0.75f, -1.25f, 0.5f, 2.0f};
  std::vector<float> y(rows, 0.0f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < features; ++c)
      y[r] += x[r * features + c] * target[c];

  train("plain rounding", quantize_ste::loss_round_grad, x, y);
  train("straight-through (stop_gradient)", quantize_ste::loss_ste_grad, x, y);
  train("straight-through (@custom_grad rule)",
        quantize_ste::loss_ste_rule_grad, x, y);
  return 0;
}
