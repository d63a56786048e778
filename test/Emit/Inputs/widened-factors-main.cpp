// Calls cpp-widened-factors.grad's two functions (K4 and its 4 x 8 form)
// and their gradients on 1000 inputs each and prints every result's bits
// (%a): the C++ backend compiled by GCC with AVX (widen4's vcvtps2pd,
// GRADC_ROW_LOOP) and without (widen4's loop), by Clang, and the LLVM
// backend's object (the factor widened as one vector) must print the same.
#include "widened.h"

#include <cstdio>

namespace {
unsigned s = 2026;
// Values of mixed sign and magnitude, zeros of both signs among them, so
// that the sums round and tanh takes both of its branches.
float next() {
  s = s * 1103515245u + 12345u;
  int k = static_cast<int>(s >> 9) % 4001 - 2000;
  if (k == 7)
    return -0.0f;
  return static_cast<float>(k) / 1024.0f;
}
void print(const char *name, const float *v, int n) {
  for (int i = 0; i < n; ++i)
    std::printf("%s %a\n", name, v[i]);
}
} // namespace

int main() {
  for (int call = 0; call < 1000; ++call) {
    float x[8], w[32], value, dx[8], dw[32];
    for (float &v : x)
      v = next();
    for (float &v : w)
      v = next();
    if (widened_k4(x, w, &value) != 0 || widened_k4_grad(x, w, dx, dw) != 0)
      return 1;
    print("k4", &value, 1);
    print("k4 dx", dx, 4);
    print("k4 dw", dw, 16);
    if (widened_k8(x, w, &value) != 0 || widened_k8_grad(x, w, dx, dw) != 0)
      return 1;
    print("k8", &value, 1);
    print("k8 dx", dx, 8);
    print("k8 dw", dw, 32);
  }
  return 0;
}
