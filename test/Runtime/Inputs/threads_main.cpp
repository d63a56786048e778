// Generated functions are re-entrant and keep no global state: four
// threads call mlp_loss_grad at once, on different batches, and each must
// get exactly what a single call on its batch gets. Used by
// cpp-threads.test (also under ThreadSanitizer).
#include "mlp.h"

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
  std::vector<float> grads[4];
};

const float w1[12] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f,
                      -0.1f, -0.2f, -0.3f, 0.0f, 0.1f, 0.0f};
const float b1[3] = {0.1f, 0.2f, 0.3f};
const float w2[6] = {1, 2, 3, 4, 5, 6};
const float b2[2] = {0.5f, -0.5f};

int gradient(Batch &b) {
  int64_t rows = static_cast<int64_t>(b.labels.size());
  b.grads[0].assign(12, 0);
  b.grads[1].assign(3, 0);
  b.grads[2].assign(6, 0);
  b.grads[3].assign(2, 0);
  return mlp_loss_grad(rows, b.x.data(), w1, b1, w2, b2, b.labels.data(),
                       b.grads[0].data(), b.grads[1].data(),
                       b.grads[2].data(), b.grads[3].data());
}

} // namespace

int main() {
  std::vector<Batch> batches(4), expected(4);
  for (int t = 0; t < 4; ++t) {
    int rows = 50 + 17 * t;
    for (int i = 0; i < rows * 4; ++i)
      batches[t].x.push_back(static_cast<float>((i * 7 + t) % 11) / 5.0f - 1);
    for (int i = 0; i < rows; ++i)
      batches[t].labels.push_back((i + t) % 2);
    expected[t] = batches[t];
    if (gradient(expected[t]) != GRADC_OK)
      return 1;
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        if (gradient(batches[t]) != GRADC_OK)
          ++failures;
    });
  for (std::thread &th : threads)
    th.join();
  for (int t = 0; t < 4; ++t)
    for (int g = 0; g < 4; ++g)
      if (batches[t].grads[g] != expected[t].grads[g])
        ++failures;
  std::printf("threads %s\n", failures.load() ? "FAIL" : "ok");
  return 0;
}
