//===- main.cpp - A gradc block as one node of a host's autodiff tape -----===//
//
// How gradc code fits into another autodiff system. This host has its own
// reverse-mode tape, the way PyTorch's autograd or a game engine's
// training code would: each node records, during the forward pass, a
// closure that later turns the cotangent of its output into cotangents of
// its inputs. Two nodes are written here by hand (a bias added to the
// block's output, and the squared-error loss); the third is `block` from
// split_layer.grad, through its split form:
//
//   forward:  block_fwd(x, w1, b1, w2) -> out, h   (h: the residual)
//   backward: block_bwd(x, w1, b1, w2, out, h, d_out) -> d_w1, d_b1, d_w2
//
// The residual lives in the node between the two passes; d_out comes from
// the host's own backward pass. The program trains the whole model with
// SGD on a small regression problem, printing the loss until it falls
// below `targetLoss`, and first checks that block_bwd gives what
// block_grad (forward and backward in one call) gives
// (test/Examples/split-layer.test checks both).
//
//===----------------------------------------------------------------------===//

#include "split_layer.h"

#include "Rng.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

namespace {

constexpr int64_t batch = 64, inputs = 3, hidden = 16, outputs = 1;
constexpr float learningRate = 0.1f;
constexpr int maxSteps = 4000;
constexpr int reportEvery = 200;
constexpr float targetLoss = 0.002f;

using Vec = std::vector<float>;

/// The host's tape: the backward closures of the forward pass, run in
/// reverse order by backward().
class Tape {
public:
  void record(std::function<void()> backward) {
    nodes.push_back(std::move(backward));
  }
  void backward() {
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
      (*it)();
    nodes.clear();
  }

private:
  std::vector<std::function<void()>> nodes;
};

/// The model's parameters and their gradients.
struct Params {
  Vec w1 = Vec(inputs * hidden), b1 = Vec(hidden), w2 = Vec(hidden * outputs);
  float bias = 0;
};
struct Grads {
  Vec w1 = Vec(inputs * hidden), b1 = Vec(hidden), w2 = Vec(hidden * outputs);
  float bias = 0;
};

/// The gradc node. Its forward keeps the block's output and residual for
/// the backward closure, which adds the weights' gradients to `g`.
Vec blockNode(Tape &tape, const Vec &x, const Params &p, Grads &g,
              const Vec &dOut, int &status) {
  Vec out(batch * outputs), h(batch * hidden);
  status = split_layer::block_fwd(
      {x.data(), {batch, inputs}}, {p.w1.data(), {inputs, hidden}},
      {p.b1.data(), {hidden}}, {p.w2.data(), {hidden, outputs}},
      {out.data(), {batch, outputs}}, {h.data(), {batch, hidden}});
  // The closure owns copies of what the backward reads: the residual h
  // and the output; x and the weights are alive until the step ends.
  tape.record([&x, &p, &g, &dOut, &status, out, h] {
    Grads local;
    int s = split_layer::block_bwd(
        {x.data(), {batch, inputs}}, {p.w1.data(), {inputs, hidden}},
        {p.b1.data(), {hidden}}, {p.w2.data(), {hidden, outputs}},
        {out.data(), {batch, outputs}}, {h.data(), {batch, hidden}},
        {dOut.data(), {batch, outputs}}, {local.w1.data(), {inputs, hidden}},
        {local.b1.data(), {hidden}}, {local.w2.data(), {hidden, outputs}});
    if (s != GRADC_OK)
      status = s;
    g.w1 = local.w1;
    g.b1 = local.b1;
    g.w2 = local.w2;
  });
  return out;
}

/// A hand-written node: y = out + bias. Its backward passes the cotangent
/// through to `dOut` (the block's cotangent) and sums it for the bias.
Vec biasNode(Tape &tape, const Vec &out, const Params &p, Grads &g,
             const Vec &dy, Vec &dOut) {
  Vec y(out.size());
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = out[i] + p.bias;
  tape.record([&g, &dy, &dOut] {
    dOut = dy;
    g.bias = 0;
    for (float v : dy)
      g.bias += v;
  });
  return y;
}

/// A hand-written node: loss = mean((y - t)^2) / 2, whose cotangent is 1.
float lossNode(Tape &tape, const Vec &y, const Vec &t, Vec &dy) {
  float loss = 0;
  for (size_t i = 0; i < y.size(); ++i)
    loss += (y[i] - t[i]) * (y[i] - t[i]);
  loss /= 2.0f * static_cast<float>(y.size());
  tape.record([y, &t, &dy] {
    for (size_t i = 0; i < y.size(); ++i)
      dy[i] = (y[i] - t[i]) / static_cast<float>(y.size());
  });
  return loss;
}

/// t = sin(2 x0) + x1 x2 / 2: smooth, and not linear in x.
void makeData(examples::Rng &rng, Vec &x, Vec &t) {
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t c = 0; c < inputs; ++c)
      x[r * inputs + c] = static_cast<float>(rng.uniform(-1, 1));
    const float *row = &x[r * inputs];
    t[r] = std::sin(2.0f * row[0]) + 0.5f * row[1] * row[2];
  }
}

float maxDifference(const Vec &a, const Vec &b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

} // namespace

int main() {
  examples::Rng rng(7);
  Vec x(batch * inputs), t(batch);
  makeData(rng, x, t);
  Params p;
  for (float &v : p.w1)
    v = static_cast<float>(rng.uniform(-1, 1));
  for (float &v : p.w2)
    v = static_cast<float>(rng.uniform(-0.5, 0.5));

  Tape tape;
  Grads g;
  Vec dy(batch), dOut(batch * outputs);
  int status = GRADC_OK;
  auto forward = [&] {
    Vec out = blockNode(tape, x, p, g, dOut, status);
    Vec y = biasNode(tape, out, p, g, dy, dOut);
    return lossNode(tape, y, t, dy);
  };

  // The split form against the fused gradient: the same cotangent d_out
  // through block_bwd (on the tape) and through block_grad.
  forward();
  tape.backward();
  Grads fused;
  status |= split_layer::block_grad(
      {x.data(), {batch, inputs}}, {p.w1.data(), {inputs, hidden}},
      {p.b1.data(), {hidden}}, {p.w2.data(), {hidden, outputs}},
      {dOut.data(), {batch, outputs}}, {fused.w1.data(), {inputs, hidden}},
      {fused.b1.data(), {hidden}}, {fused.w2.data(), {hidden, outputs}});
  if (status != GRADC_OK) {
    std::printf("gradc call failed with status %d\n", status);
    return 1;
  }
  float difference =
      std::max({maxDifference(g.w1, fused.w1), maxDifference(g.b1, fused.b1),
                maxDifference(g.w2, fused.w2)});
  std::printf("block_bwd against block_grad: max difference %g\n", difference);

  for (int s = 0; s <= maxSteps; ++s) {
    float loss = forward();
    tape.backward();
    if (status != GRADC_OK) {
      std::printf("gradc call failed with status %d\n", status);
      return 1;
    }
    if (s % reportEvery == 0 || loss < targetLoss)
      std::printf("step %5d  loss %.6f\n", s, loss);
    if (loss < targetLoss) {
      std::printf("loss below %g after %d steps\n", targetLoss, s);
      return 0;
    }
    for (size_t i = 0; i < p.w1.size(); ++i)
      p.w1[i] -= learningRate * g.w1[i];
    for (size_t i = 0; i < p.b1.size(); ++i)
      p.b1[i] -= learningRate * g.b1[i];
    for (size_t i = 0; i < p.w2.size(); ++i)
      p.w2[i] -= learningRate * g.w2[i];
    p.bias -= learningRate * g.bias;
  }
  std::printf("loss still above %g after %d steps\n", targetLoss, maxSteps);
  return 1;
}
