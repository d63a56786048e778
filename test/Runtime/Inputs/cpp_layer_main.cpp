// The C++ layer of generated headers: two modules' headers in one
// translation unit, TensorView calls, and the status codes for sizes that
// disagree, labels out of range and negative sizes. Used by
// cpp-header-layer.test.
#include "mlp.h"
#include "stack_override.h"

#include <cstdio>
#include <vector>

int main() {
  const int64_t B = 3;
  // All weights zero: every logit is 0, so each row's softmax is [1/2, 1/2]
  // and each loss is ln 2.
  std::vector<float> x(B * 4, 1.0f), w1(4 * 3), b1(3), w2(3 * 2), b2(2);
  std::vector<int32_t> labels = {0, 1, 1};
  float loss = -1.0f;
  std::printf("ok %d\n", mlp::loss({x.data(), {B, 4}}, {w1.data(), {4, 3}},
                                   {b1.data(), {3}}, {w2.data(), {3, 2}},
                                   {b2.data(), {2}}, {labels.data(), {B}},
                                   loss));
  std::printf("loss %.6f\n", loss);

  std::vector<float> dw1(12), db1(3), dw2(6), db2(2);
  std::printf("grad %d\n",
              mlp::loss_grad({x.data(), {B, 4}}, {w1.data(), {4, 3}},
                             {b1.data(), {3}}, {w2.data(), {3, 2}},
                             {b2.data(), {2}}, {labels.data(), {B}},
                             {dw1.data(), {4, 3}}, {db1.data(), {3}},
                             {dw2.data(), {3, 2}}, {db2.data(), {2}}));
  std::printf("d_b2 %.6f %.6f\n", db2[0], db2[1]);

  // B is 3 in x but 2 in labels.
  std::printf("size %d\n", mlp::loss({x.data(), {B, 4}}, {w1.data(), {4, 3}},
                                     {b1.data(), {3}}, {w2.data(), {3, 2}},
                                     {b2.data(), {2}}, {labels.data(), {2}},
                                     loss));
  // w1 has the wrong rank.
  std::printf("rank %d\n", mlp::loss({x.data(), {B, 4}}, {w1.data(), {12}},
                                     {b1.data(), {3}}, {w2.data(), {3, 2}},
                                     {b2.data(), {2}}, {labels.data(), {B}},
                                     loss));
  // A label outside [0, 2).
  labels[1] = 7;
  std::printf("index %d\n", mlp::loss({x.data(), {B, 4}}, {w1.data(), {4, 3}},
                                      {b1.data(), {3}}, {w2.data(), {3, 2}},
                                      {b2.data(), {2}}, {labels.data(), {B}},
                                      loss));
  // Through the C ABI directly: a negative size.
  std::printf("negative %d\n", mlp_loss(-1, x.data(), w1.data(), b1.data(),
                                        w2.data(), b2.data(), labels.data(),
                                        &loss));

  // An empty batch: every loop runs zero times; the weight gradients are
  // sums over no rows, so zero.
  dw1.assign(12, 5.0f);
  std::printf("empty %d\n",
              mlp_loss_grad(0, nullptr, w1.data(), b1.data(), w2.data(),
                            b2.data(), nullptr, dw1.data(), db1.data(),
                            dw2.data(), db2.data()));
  std::printf("empty d_w1 %g %g\n", dw1[0], dw1[11]);

  // The second module, fixed sizes.
  float in[2] = {1, 2}, out[4] = {};
  int status = stack_override::synth({in, {2}}, {out, {2, 2}});
  std::printf("stack %d %g %g %g %g\n", status, out[0], out[1], out[2],
              out[3]);
  return 0;
}
