//===- main.cpp - Train the RNN of loops/rnn_echo.grad with Adam ----------===//
//
// Training through a loop: the model (an Elman RNN whose `for` loop carries
// the hidden state) and its loss are in dsl_examples/loops/rnn_echo.grad;
// gradc_add_module (dsl_examples/CMakeLists.txt, with --lower=loops: the
// loop IR's C++ printer) generates `rnn_echo.h` and the code behind it.
// The task is to echo the input three steps late: y_t = x_(t-3). Each step
// draws a fresh batch of random sequences, calls the generated
// `rnn_echo::loss_value_and_grad` once, and moves the weights with Adam.
// Every `reportEvery` steps it prints the loss on a fixed held-out batch;
// at the end, the factor by which that loss fell and one held-out sequence
// beside its prediction (test/Examples/rnn-train.test checks the numbers).
//
//===----------------------------------------------------------------------===//

#include "rnn_echo.h"

#include "Rng.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr int steps = 20;  // T: the sequence length
constexpr int batch = 32;  // B
constexpr int hidden = 16; // H
constexpr int delay = 3;   // y_t = x_(t - delay)
constexpr int trainSteps = 600;
constexpr int reportEvery = 60;
constexpr float learningRate = 0.01f;

/// A batch of sequences: xs[t][b] uniform in [-1, 1], ys the echo.
struct Batch {
  std::vector<float> xs = std::vector<float>(steps * batch);
  std::vector<float> ys = std::vector<float>(steps * batch);

  explicit Batch(examples::Rng &rng) {
    for (float &x : xs)
      x = static_cast<float>(rng.uniform(-1.0, 1.0));
    for (int t = delay; t < steps; ++t)
      for (int b = 0; b < batch; ++b)
        ys[t * batch + b] = xs[(t - delay) * batch + b];
  }
  gradc::TensorView<float> x() { return {xs.data(), {steps, batch, 1}}; }
  gradc::TensorView<float> y() { return {ys.data(), {steps, batch, 1}}; }
};

/// The trained parameters (w, u, b, v, c of the .grad signature), one
/// vector each, in that order.
struct Params {
  std::vector<std::vector<float>> p = {
      std::vector<float>(hidden), std::vector<float>(hidden *hidden),
      std::vector<float>(hidden), std::vector<float>(hidden),
      std::vector<float>(1)};
  gradc::TensorView<float> view(int i) {
    float *d = p[i].data();
    switch (i) {
    case 0:
      return {d, {1, hidden}};
    case 1:
      return {d, {hidden, hidden}};
    case 3:
      return {d, {hidden, 1}};
    default: // b: [H], c: [1]
      return {d, {static_cast<int64_t>(p[i].size())}};
    }
  }
};

/// Adam (Kingma and Ba) with the usual beta1 = 0.9, beta2 = 0.999.
struct Adam {
  Params m, v;
  int t = 0;
  void step(Params &w, Params &g) {
    ++t;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < w.p.size(); ++i)
      for (size_t j = 0; j < w.p[i].size(); ++j) {
        float gij = g.p[i][j];
        m.p[i][j] = b1 * m.p[i][j] + (1 - b1) * gij;
        v.p[i][j] = b2 * v.p[i][j] + (1 - b2) * gij * gij;
        w.p[i][j] -=
            learningRate * (m.p[i][j] / c1) / (std::sqrt(v.p[i][j] / c2) + eps);
      }
  }
};

} // namespace

int main() {
  examples::Rng rng(2026);
  Params w;
  // Uniform in +-1/sqrt(fan-in), as torch.nn.RNN initialises.
  for (int i = 0; i < 5; ++i) {
    double fanIn = i == 0 ? 1 : hidden;
    double scale = 1.0 / std::sqrt(fanIn);
    for (float &x : w.p[i])
      x = static_cast<float>(rng.uniform(-scale, scale));
  }
  std::vector<float> h0(batch * hidden, 0.0f);
  gradc::TensorView<float> h0View{h0.data(), {batch, hidden}};
  Batch heldOut(rng);

  auto heldOutLoss = [&]() {
    float value = NAN;
    int status =
        rnn_echo::loss(heldOut.x(), heldOut.y(), h0View, w.view(0), w.view(1),
                       w.view(2), w.view(3), w.view(4), value);
    return status == GRADC_OK ? value : NAN;
  };

  Params grad;
  Adam adam;
  float first = heldOutLoss();
  std::printf("step %4d  held-out loss %.5f\n", 0, first);
  float last = first;
  for (int s = 1; s <= trainSteps; ++s) {
    Batch data(rng);
    float train = 0;
    int status = rnn_echo::loss_value_and_grad(
        data.x(), data.y(), h0View, w.view(0), w.view(1), w.view(2), w.view(3),
        w.view(4), train, grad.view(0), grad.view(1), grad.view(2),
        grad.view(3), grad.view(4));
    if (status != GRADC_OK) {
      std::printf("loss_value_and_grad failed with status %d\n", status);
      return 1;
    }
    adam.step(w, grad);
    if (s % reportEvery != 0)
      continue;
    last = heldOutLoss();
    std::printf("step %4d  held-out loss %.5f  (batch loss %.5f)\n", s, last,
                train);
  }
  std::printf("held-out loss fell by a factor of %.1f\n", first / last);

  // One held-out sequence, input and echo beside the prediction.
  std::vector<float> pred(steps * batch);
  rnn_echo::predict(heldOut.x(), h0View, w.view(0), w.view(1), w.view(2),
                    w.view(3), w.view(4), {pred.data(), {steps, batch, 1}});
  std::printf("   t      x_t  x_(t-3)  predicted\n");
  for (int t = 0; t < 8; ++t)
    std::printf("%4d  %7.3f  %7.3f  %9.3f\n", t, heldOut.xs[t * batch],
                heldOut.ys[t * batch], pred[t * batch]);
  return 0;
}
