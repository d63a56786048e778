//===- main.cpp - Domain-adversarial training of dann.grad ----------------===//
//
// Trains the DANN model of dann.grad on a toy domain shift: the source
// domain is two interleaved half moons with labels, the target domain the
// same moons rotated by 35 degrees, without labels. Each SGD step passes
// the gradient reversal strength lambda = 2 / (1 + exp(-10 p)) - 1 (p the
// fraction of training done) to the generated `dann::loss_grad` as an
// ordinary scalar argument. The program prints, every `reportEvery` steps,
// the label accuracy on both domains (the target labels are used only to
// measure) and the accuracy of the domain head, then trains the same model
// again with lambda = 0 (the domain head still learns, but the features
// never see its gradient) to show what the reversal buys.
//
//===----------------------------------------------------------------------===//

#include "dann.h"

#include "Rng.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr int pointsPerClass = 100;
constexpr int numPoints = 2 * pointsPerClass; // per domain
constexpr int hidden = 64;                    // H: features
constexpr int domainHidden = 16;              // D: the domain head's layer
constexpr int batch = 32;                     // B: rows per domain and step
constexpr int steps = 4000;
constexpr int reportEvery = 500;
constexpr float learningRate = 0.1f;
constexpr double rotationDegrees = 35.0;

const double pi = 3.14159265358979323846;

/// One domain: points (row-major [numPoints, 2]) and their labels.
struct Domain {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

/// Two half moons with Gaussian noise of 0.1, centred on the origin and
/// rotated by `degrees`.
Domain makeMoons(examples::Rng &rng, double degrees) {
  Domain d;
  double c = std::cos(degrees * pi / 180), s = std::sin(degrees * pi / 180);
  for (int label = 0; label < 2; ++label) {
    for (int i = 0; i < pointsPerClass; ++i) {
      double t = pi * i / (pointsPerClass - 1);
      double px = label == 0 ? std::cos(t) : 1.0 - std::cos(t);
      double py = label == 0 ? std::sin(t) : 0.5 - std::sin(t);
      px += 0.1 * rng.normal() - 0.5;
      py += 0.1 * rng.normal() - 0.25;
      d.x.push_back(static_cast<float>(c * px - s * py));
      d.x.push_back(static_cast<float>(s * px + c * py));
      d.labels.push_back(label);
    }
  }
  return d;
}

/// Every weight of dann.grad's loss, in its signature's order.
struct Weights {
  std::vector<float> wf = std::vector<float>(2 * hidden);
  std::vector<float> bf = std::vector<float>(hidden);
  std::vector<float> wy = std::vector<float>(hidden * 2);
  std::vector<float> by = std::vector<float>(2);
  std::vector<float> wd = std::vector<float>(hidden * domainHidden);
  std::vector<float> bd = std::vector<float>(domainHidden);
  std::vector<float> vd = std::vector<float>(domainHidden);
  float cd = 0;
};

void initialise(examples::Rng &rng, Weights &w) {
  auto fill = [&](std::vector<float> &v, double scale) {
    for (float &e : v)
      e = static_cast<float>(rng.uniform(-scale, scale));
  };
  fill(w.wf, 1.0);
  fill(w.wy, std::sqrt(6.0 / (hidden + 2)));
  fill(w.wd, std::sqrt(6.0 / (hidden + domainHidden)));
  fill(w.vd, std::sqrt(6.0 / (domainHidden + 1)));
}

/// A random batch of `batch` rows of a domain.
void sample(examples::Rng &rng, const Domain &d, std::vector<float> &x,
            std::vector<int32_t> &labels) {
  for (int j = 0; j < batch; ++j) {
    uint64_t i = rng.below(numPoints);
    x[2 * j] = d.x[2 * i];
    x[2 * j + 1] = d.x[2 * i + 1];
    labels[j] = d.labels[i];
  }
}

/// The share of a domain's points whose label the label head predicts.
double labelAccuracy(const Weights &w, const Domain &d) {
  std::vector<float> h(numPoints * hidden), z(numPoints * 2);
  dann::features({d.x.data(), {numPoints, 2}}, {w.wf.data(), {2, hidden}},
                 {w.bf.data(), {hidden}}, {h.data(), {numPoints, hidden}});
  dann::label_logits({h.data(), {numPoints, hidden}},
                     {w.wy.data(), {hidden, 2}}, {w.by.data(), {2}},
                     {z.data(), {numPoints, 2}});
  int correct = 0;
  for (int i = 0; i < numPoints; ++i)
    correct += (z[2 * i + 1] > z[2 * i]) == (d.labels[i] == 1);
  return static_cast<double>(correct) / numPoints;
}

/// The share of both domains' points whose domain the domain head tells.
double domainAccuracy(const Weights &w, const Domain &source,
                      const Domain &target) {
  int correct = 0;
  for (const Domain *d : {&source, &target}) {
    std::vector<float> h(numPoints * hidden), logit(numPoints);
    dann::features({d->x.data(), {numPoints, 2}}, {w.wf.data(), {2, hidden}},
                   {w.bf.data(), {hidden}}, {h.data(), {numPoints, hidden}});
    dann::domain_logit(
        {h.data(), {numPoints, hidden}}, {w.wd.data(), {hidden, domainHidden}},
        {w.bd.data(), {domainHidden}}, {w.vd.data(), {domainHidden}}, w.cd,
        {logit.data(), {numPoints}});
    bool isTarget = d == &target;
    for (float l : logit)
      correct += (l > 0) == isTarget;
  }
  return static_cast<double>(correct) / (2 * numPoints);
}

/// p -= lr * dp, elementwise.
void descend(std::vector<float> &p, const std::vector<float> &dp) {
  for (size_t i = 0; i < p.size(); ++i)
    p[i] -= learningRate * dp[i];
}

/// Accuracies after training.
struct Outcome {
  double source, target, domain;
};

/// Trains from the same initial weights and batches; `adapt` switches the
/// reversal schedule on (otherwise lambda stays 0).
Outcome train(const Domain &source, const Domain &target, bool adapt,
              bool verbose) {
  examples::Rng rng(7);
  Weights w, g;
  initialise(rng, w);
  std::vector<float> xs(batch * 2), xt(batch * 2);
  std::vector<int32_t> ys(batch), unused(batch);

  for (int s = 0; s <= steps; ++s) {
    double p = static_cast<double>(s) / steps;
    float lambda =
        adapt ? static_cast<float>(2.0 / (1.0 + std::exp(-10.0 * p)) - 1.0)
              : 0.0f;
    if (verbose && s % reportEvery == 0)
      std::printf("step %4d  lambda %.3f  source acc %.3f  target acc %.3f  "
                  "domain acc %.3f\n",
                  s, lambda, labelAccuracy(w, source), labelAccuracy(w, target),
                  domainAccuracy(w, source, target));
    if (s == steps)
      break;

    sample(rng, source, xs, ys);
    sample(rng, target, xt, unused); // target labels stay unseen
    int status = dann::loss_grad(
        {xs.data(), {batch, 2}}, {ys.data(), {batch}}, {xt.data(), {batch, 2}},
        lambda, {w.wf.data(), {2, hidden}}, {w.bf.data(), {hidden}},
        {w.wy.data(), {hidden, 2}}, {w.by.data(), {2}},
        {w.wd.data(), {hidden, domainHidden}}, {w.bd.data(), {domainHidden}},
        {w.vd.data(), {domainHidden}}, w.cd, {g.wf.data(), {2, hidden}},
        {g.bf.data(), {hidden}}, {g.wy.data(), {hidden, 2}}, {g.by.data(), {2}},
        {g.wd.data(), {hidden, domainHidden}}, {g.bd.data(), {domainHidden}},
        {g.vd.data(), {domainHidden}}, g.cd);
    if (status != GRADC_OK) {
      std::printf("loss_grad failed with status %d\n", status);
      return {0, 0, 0};
    }
    descend(w.wf, g.wf);
    descend(w.bf, g.bf);
    descend(w.wy, g.wy);
    descend(w.by, g.by);
    descend(w.wd, g.wd);
    descend(w.bd, g.bd);
    descend(w.vd, g.vd);
    w.cd -= learningRate * g.cd;
  }
  return {labelAccuracy(w, source), labelAccuracy(w, target),
          domainAccuracy(w, source, target)};
}

} // namespace

int main() {
  examples::Rng rng(2015);
  Domain source = makeMoons(rng, 0.0);
  Domain target = makeMoons(rng, rotationDegrees);

  std::printf("DANN: lambda = 2 / (1 + exp(-10 p)) - 1\n");
  Outcome adapted = train(source, target, /*adapt=*/true, /*verbose=*/true);
  Outcome sourceOnly =
      train(source, target, /*adapt=*/false, /*verbose=*/false);
  std::printf(
      "DANN         source acc %.3f  target acc %.3f  domain acc %.3f\n",
      adapted.source, adapted.target, adapted.domain);
  std::printf(
      "source only  source acc %.3f  target acc %.3f  domain acc %.3f\n",
      sourceOnly.source, sourceOnly.target, sourceOnly.domain);
  return 0;
}
