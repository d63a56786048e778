// Calls cpp-dot-columns.grad's K4 gradient (and its value) on one input
// and prints every result with 9 significant digits, which tell two f32
// apart: compiled by GCC (the columns) and by Clang (the rows), it must
// print the interpreter's digits.
#include "dot-columns.h"

#include <cstdio>

int main() {
  const float x[4] = {0.5f, -1.0f, 2.0f, -0.0f};
  const float w[16] = {1, 2, 3, 4, 0, -1, 0, 1, 0.5f, 0.25f, 1, 2, -3, 1, 1,
                       0.1f};
  float value = 0, dx[4], dw[16];
  if (dot_columns_k4(x, w, &value) != 0 ||
      dot_columns_k4_grad(x, w, dx, dw) != 0)
    return 1;
  std::printf("value %.9g\n", value);
  for (float v : dx)
    std::printf("dx %.9g\n", v);
  for (float v : dw)
    std::printf("dw %.9g\n", v);
  return 0;
}
