// Calls cpp-widened-lanes.grad's K5 gradient on 9 rows of 19 (two groups
// of four jammed rows and one row alone; two chunks of 8 and a rest of 3)
// and prints every result's bits (%a): the C++ backend compiled by GCC
// (Lanes8, widen8), by GCC without vector extensions, and by Clang, and the
// LLVM backend's object, must print the same.
#include "widened.h"

#include <cstdio>

int main() {
  constexpr int R = 9, C = 19;
  float x[R * C], c[R * C], gamma[C], beta[C];
  // Terms of mixed sign and magnitude, so that f32 sums would round.
  unsigned s = 12345;
  auto next = [&] {
    s = s * 1103515245u + 12345u;
    return static_cast<float>(static_cast<int>(s >> 9) % 20001 - 10000) /
           1024.0f;
  };
  for (float &v : x)
    v = next() * (1.0f + static_cast<float>(s % 7) * 0.37f);
  for (float &v : c)
    v = next();
  for (float &v : gamma)
    v = 1.0f + next() / 64.0f;
  for (float &v : beta)
    v = next() / 16.0f;
  float dx[R * C], dgamma[C], dbeta[C];
  if (widened_k5_grad(R, C, x, gamma, beta, c, dx, dgamma, dbeta) != 0)
    return 1;
  for (float v : dx)
    std::printf("dx %a\n", v);
  for (float v : dgamma)
    std::printf("dgamma %a\n", v);
  for (float v : dbeta)
    std::printf("dbeta %a\n", v);
  return 0;
}
