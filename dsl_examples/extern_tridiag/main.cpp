//===- main.cpp - Fit the right-hand side of a tridiagonal system ---------===//
//
// extern_tridiag.grad solves A x = d with a C++ tridiagonal solver whose
// adjoint is a second C++ function. Gradient descent on d (from 0) of
// loss = |A^-1 d - target|^2, for the matrix with diagonal 4 and -1 on
// both off-diagonals (b = 0 in the loss, which adds 4), finds the d with
// A^-1 d = target, that is d = A target, by hand for target
// [1, 2, 3, 2, 1]:
//   [4 - 2, -1 + 8 - 3, -2 + 12 - 2, -3 + 8 - 1, -2 + 4] = [2, 4, 8, 4, 2].
//
//===----------------------------------------------------------------------===//

#include "extern_tridiag.h"

#include <cstdio>
#include <vector>

int main() {
  const int n = 5;
  const float learningRate = 2.0f;
  std::vector<float> a(n, -1.0f), b(n, 0.0f), c(n, -1.0f), d(n, 0.0f);
  const std::vector<float> target = {1, 2, 3, 2, 1};
  std::vector<float> da(n), db(n), dc(n), dd(n);
  for (int step = 0; step <= 200; ++step) {
    float loss = 0;
    extern_tridiag::loss({a.data(), {n}}, {b.data(), {n}}, {c.data(), {n}},
                         {d.data(), {n}}, {target.data(), {n}}, loss);
    extern_tridiag::loss_grad({a.data(), {n}}, {b.data(), {n}}, {c.data(), {n}},
                              {d.data(), {n}}, {target.data(), {n}},
                              {da.data(), {n}}, {db.data(), {n}},
                              {dc.data(), {n}}, {dd.data(), {n}});
    if (step % 50 == 0)
      std::printf("step %3d  loss %.6g\n", step, loss);
    for (int i = 0; i < n; ++i)
      d[i] -= learningRate * dd[i];
  }
  std::printf("d [%.4g, %.4g, %.4g, %.4g, %.4g]\n", d[0], d[1], d[2], d[3],
              d[4]);
  return 0;
}
