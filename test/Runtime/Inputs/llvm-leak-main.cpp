// For llvm-object-leaks.test: calls the object file of dsl_examples/mlp.grad
// (temporaries of run-time size B) on good arguments and on arguments that
// fail after temporaries exist, under AddressSanitizer and LeakSanitizer:
// every path must free what it allocated.
#include "mlp.h"

#include <cstdio>
#include <vector>

int main() {
  const int64_t B = 64;
  std::vector<float> x(B * 4, 0.5f), w1(4 * 3, 0.1f), b1(3, 0.f),
      w2(3 * 2, 0.2f), b2(2, 0.f), z(B * 2);
  std::vector<int32_t> labels(B, 1);
  std::vector<float> dw1(4 * 3), db1(3), dw2(3 * 2), db2(2);
  float loss = 0;
  std::printf("logits %d\n", mlp_logits(B, x.data(), w1.data(), b1.data(),
                                        w2.data(), b2.data(), z.data()));
  std::printf("loss %d\n", mlp_loss(B, x.data(), w1.data(), b1.data(),
                                    w2.data(), b2.data(), labels.data(),
                                    &loss));
  std::printf("loss_grad %d\n",
              mlp_loss_grad(B, x.data(), w1.data(), b1.data(), w2.data(),
                            b2.data(), labels.data(), dw1.data(), db1.data(),
                            dw2.data(), db2.data()));
  // The last label is out of range: the loss fails after its temporaries
  // (the hidden layer, the logits) are allocated.
  labels[B - 1] = 7;
  std::printf("bad label %d\n", mlp_loss(B, x.data(), w1.data(), b1.data(),
                                         w2.data(), b2.data(), labels.data(),
                                         &loss));
  std::printf("negative size %d\n",
              mlp_loss(-1, x.data(), w1.data(), b1.data(), w2.data(),
                       b2.data(), labels.data(), &loss));
  // Zero rows: no element is read, null pointers are allowed.
  std::printf("empty batch %d\n",
              mlp_logits(0, nullptr, w1.data(), b1.data(), w2.data(),
                         b2.data(), nullptr));
  return 0;
}
