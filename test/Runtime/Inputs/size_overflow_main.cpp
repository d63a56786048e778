// Calls the functions of size_overflow.grad through the C ABI with sizes
// whose products overflow int64_t (the tensors have no elements or the
// pointers are never read): each must return GRADC_ERROR_SIZE (1) before
// touching memory, and ordinary sizes must still work.
#include "size_overflow.h"

#include <cstdint>
#include <cstdio>

int main() {
  float out = -1;
  float none[1] = {0};
  // B = 2^62, K = 0, M = 4: a and b are empty, but the [B, M] product has
  // 2^64 elements (it once wrapped to 0 and malloc'ed 4 bytes).
  std::printf("mm 2^62 0 4: %d\n",
              size_overflow_mm(int64_t(1) << 62, 0, 4, none, none, &out));
  // B * 5 = 2^64 + 4 wraps to 4: summing 4 elements and returning OK.
  std::printf("rows 3689348814741910324: %d\n",
              size_overflow_rows(3689348814741910324, none, &out));
  std::printf("outer 2^32 2^31: %d\n",
              size_overflow_outer(int64_t(1) << 32, int64_t(1) << 31, none,
                                  none, &out));
  // K = 0 with the other sizes small: a real product of empty matrices.
  float c = -1;
  int s = size_overflow_mm(1, 0, 1, none, none, &c);
  std::printf("mm 1 0 1: %d %g\n", s, c);
  // A zero size with a huge one: no elements, no overflow.
  std::printf("outer 0 2^62: %d\n",
              size_overflow_outer(0, int64_t(1) << 62, none, none, &out));
  float x[2] = {1, 2}, y[3] = {3, 4, 5}, o[6];
  s = size_overflow_outer(2, 3, x, y, o);
  std::printf("outer 2 3: %d %g %g\n", s, o[0], o[5]);
  float r[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  s = size_overflow_rows(2, r, &out);
  std::printf("rows 2: %d %g\n", s, out);
  return 0;
}
