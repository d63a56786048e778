//===- HandMath.h - What the hand-written references share ----------------===//
//
// Vectorisable f32 sine and cosine (gradc::exp, gradc::tanh and
// gradc::log of runtime/include/gradc/Runtime.h serve the rest: they are
// branch-free polynomials that GCC vectorises), a scratch arena that keeps
// its memory across calls as an expert's code would, and a sum of many
// f32 values in vector-friendly partial sums.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_BENCH_HANDMATH_H
#define GRADC_BENCH_HANDMATH_H

#include "gradc/Runtime.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace hand {

/// sin x and cos x for |x| up to a few thousand, within about 2 ulp: x is
/// reduced by pi/2 in three parts (Cody and Waite), both functions are
/// degree-7/8 polynomials on [-pi/4, pi/4] (Cephes' coefficients), and the
/// quadrant picks which and its sign, without a branch.
inline void sincos(float x, float &s, float &c) {
  const float shifter = 12582912.0f;
  float t = x * 0.636619772f + shifter;
  float j = t - shifter;
  uint32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  uint32_t q = bits & 3u;
  float r = x - j * 1.5703125f;
  r = r - j * 4.837512969970703125e-4f;
  r = r - j * 7.54978995489188216e-8f;
  float z = r * r;
  float ps = -1.9515295891e-4f;
  ps = ps * z + 8.3321608736e-3f;
  ps = ps * z - 1.6666654611e-1f;
  float sr = r + r * z * ps;
  float pc = 2.443315711809948e-5f;
  pc = pc * z - 1.388731625493765e-3f;
  pc = pc * z + 4.166664568298827e-2f;
  float cr = 1.0f - 0.5f * z + z * z * pc;
  float sAbs = gradc::select((q & 1u) != 0, cr, sr);
  float cAbs = gradc::select((q & 1u) != 0, sr, cr);
  s = gradc::select((q & 2u) != 0, -sAbs, sAbs);
  c = gradc::select(((q + 1u) & 2u) != 0, -cAbs, cAbs);
}

/// Scratch memory that keeps its pages across calls.
class Arena {
public:
  float *get(size_t slot, size_t count) {
    if (slot >= buffers.size())
      buffers.resize(slot + 1);
    if (buffers[slot].size() < count)
      buffers[slot].resize(count);
    return buffers[slot].data();
  }

private:
  std::vector<std::vector<float>> buffers;
};

/// Column sums of a [rows, cols] matrix into out (overwritten).
inline void columnSums(const float *a, float *out, int64_t rows, int64_t cols) {
  std::memset(out, 0, sizeof(float) * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[j] += a[i * cols + j];
}

} // namespace hand

#endif // GRADC_BENCH_HANDMATH_H
