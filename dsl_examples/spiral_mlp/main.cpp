//===- main.cpp - Train spiral_mlp.grad on two spirals with SGD -----------===//
//
// The worked example of training with gradc: the model and its loss are
// written in spiral_mlp.grad, gradc_add_module (dsl_examples/CMakeLists.txt)
// generates `spiral_mlp.h` and the code behind it, and this host does what
// a training script does: it makes the data (two interleaved spirals from a
// fixed seed), initialises the weights, and runs minibatch SGD, calling the
// generated `spiral_mlp::loss_grad` once per step. Every `reportEvery`
// steps it prints the loss over the whole data set, and it stops when that
// loss falls below `targetLoss` (test/Examples/spiral-mlp.test checks both).
//
//===----------------------------------------------------------------------===//

#include "spiral_mlp.h"

#include "Rng.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr int pointsPerClass = 100;
constexpr int numPoints = 2 * pointsPerClass;
constexpr int hidden = 16;
constexpr int batch = 20;
constexpr float learningRate = 0.5f;
constexpr int maxSteps = 10000;
constexpr int reportEvery = 250;
constexpr float targetLoss = 0.05f;

/// Two spirals: class c's i-th point is at radius r (from 0.1 to 1) and
/// angle 3 pi r + c pi, plus Gaussian noise of 0.02.
void makeSpirals(examples::Rng &rng, std::vector<float> &x,
                 std::vector<int32_t> &labels) {
  const double pi = 3.14159265358979323846;
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < pointsPerClass; ++i) {
      double r = 0.1 + 0.9 * i / (pointsPerClass - 1);
      double angle = 3.0 * pi * r + c * pi;
      x.push_back(
          static_cast<float>(r * std::cos(angle) + 0.02 * rng.normal()));
      x.push_back(
          static_cast<float>(r * std::sin(angle) + 0.02 * rng.normal()));
      labels.push_back(c);
    }
  }
}

/// The weights in the layout the .grad signature gives them.
struct Weights {
  std::vector<float> w1 = std::vector<float>(2 * hidden);
  std::vector<float> b1 = std::vector<float>(hidden);
  std::vector<float> w2 = std::vector<float>(hidden * 2);
  std::vector<float> b2 = std::vector<float>(2);
};

/// Views of a set of weights, in the order of the .grad signature; their
/// shapes bind the size name H.
struct WeightViews {
  gradc::TensorView<float> w1, b1, w2, b2;
};
WeightViews views(Weights &w) {
  return {{w.w1.data(), {2, hidden}},
          {w.b1.data(), {hidden}},
          {w.w2.data(), {hidden, 2}},
          {w.b2.data(), {2}}};
}

/// Uniform initial weights (Glorot-style for the output layer); biases
/// start at zero.
void initialise(examples::Rng &rng, Weights &w) {
  // Wide first-layer weights: the spirals need features that turn fast.
  for (float &v : w.w1)
    v = static_cast<float>(rng.uniform(-3.0, 3.0));
  double scale = std::sqrt(6.0 / (hidden + 2));
  for (float &v : w.w2)
    v = static_cast<float>(rng.uniform(-scale, scale));
}

/// p -= lr * dp, elementwise.
void step(std::vector<float> &p, const std::vector<float> &dp) {
  for (size_t i = 0; i < p.size(); ++i)
    p[i] -= learningRate * dp[i];
}

} // namespace

int main() {
  examples::Rng rng(2026);
  std::vector<float> x;
  std::vector<int32_t> labels;
  makeSpirals(rng, x, labels);
  Weights w;
  initialise(rng, w);
  Weights grad;

  // The loss over the whole data set (B = numPoints).
  auto fullLoss = [&]() {
    WeightViews v = views(w);
    float value = 0;
    int status = spiral_mlp::loss({x.data(), {numPoints, 2}}, v.w1, v.b1, v.w2,
                                  v.b2, {labels.data(), {numPoints}}, value);
    return status == GRADC_OK ? value : NAN;
  };

  std::vector<int> order(numPoints);
  for (int i = 0; i < numPoints; ++i)
    order[i] = i;
  std::vector<float> xb(batch * 2);
  std::vector<int32_t> yb(batch);

  std::printf("step %5d  loss %.4f\n", 0, fullLoss());
  int cursor = numPoints;
  for (int s = 1; s <= maxSteps; ++s) {
    // Minibatches walk a fresh shuffle of the data each epoch.
    if (cursor + batch > numPoints) {
      for (int i = numPoints - 1; i > 0; --i)
        std::swap(order[i], order[rng.below(i + 1)]);
      cursor = 0;
    }
    for (int j = 0; j < batch; ++j, ++cursor) {
      xb[2 * j] = x[2 * order[cursor]];
      xb[2 * j + 1] = x[2 * order[cursor] + 1];
      yb[j] = labels[order[cursor]];
    }

    // One call gives the gradient of the minibatch's mean loss (B = batch).
    WeightViews v = views(w), d = views(grad);
    int status =
        spiral_mlp::loss_grad({xb.data(), {batch, 2}}, v.w1, v.b1, v.w2, v.b2,
                              {yb.data(), {batch}}, d.w1, d.b1, d.w2, d.b2);
    if (status != GRADC_OK) {
      std::printf("loss_grad failed with status %d\n", status);
      return 1;
    }
    step(w.w1, grad.w1);
    step(w.b1, grad.b1);
    step(w.w2, grad.w2);
    step(w.b2, grad.b2);

    if (s % reportEvery != 0)
      continue;
    float loss = fullLoss();
    std::printf("step %5d  loss %.4f\n", s, loss);
    if (loss < targetLoss) {
      std::printf("loss below %.2f after %d steps\n", targetLoss, s);
      break;
    }
  }

  // Accuracy over the whole set: the class with the larger logit.
  std::vector<float> z(numPoints * 2);
  WeightViews v = views(w);
  spiral_mlp::logits({x.data(), {numPoints, 2}}, v.w1, v.b1, v.w2, v.b2,
                     {z.data(), {numPoints, 2}});
  int correct = 0;
  for (int i = 0; i < numPoints; ++i)
    correct += (z[2 * i + 1] > z[2 * i]) == (labels[i] == 1);
  std::printf("accuracy %.3f (%d of %d)\n",
              static_cast<double>(correct) / numPoints, correct, numPoints);
  return 0;
}
