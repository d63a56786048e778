//===- Runtime.h - What gradc-generated C++ code includes -------*- C++ -*-===//
//
// The whole runtime of the C++ backend, header-only and free of
// dependencies beyond the C++17 standard library (and, optionally, a CBLAS
// header). Generated `.cpp` files include it, and so does the C++ layer of
// generated headers. It holds:
//
//   - the status codes of the C ABI (docs/ABI.md) and `TensorView`, the
//     (data, shape) pair through which C++ callers pass tensors;
//   - `Buffer`, the owner of a temporary, returned to a per-thread scratch
//     cache when the generated function returns;
//   - scalar helpers with exact semantics (wrapping i32 arithmetic, relu,
//     sign, clip);
//   - vectorisable f32 approximations of exp, log, tanh, sigmoid and
//     softplus: libm's scalar functions stop a loop from vectorising
//     unless the caller uses -ffast-math, so these are inline, branch-free
//     and accurate to the bounds stated above each one (docs/CppBackend.md
//     has the measurements). f64 calls libm;
//   - the kernels that are not worth generating inline: a cache-blocked
//     matmul (or, with -DGRADC_USE_BLAS, CBLAS above a size), softmax,
//     log_softmax and logsumexp along one axis, and softmax cross-entropy.
//
// The one state is per thread: the scratch cache that keeps the large
// temporaries of generated functions for the next call on the same thread
// (detail::ScratchCache). Every function is re-entrant and thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_RUNTIME_H
#define GRADC_RUNTIME_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>

#ifdef GRADC_USE_BLAS
#include <cblas.h>
#endif

// The status codes of the C ABI; generated headers define them the same way.
#ifndef GRADC_STATUS_CODES
#define GRADC_STATUS_CODES
#define GRADC_OK 0
#define GRADC_ERROR_SIZE 1
#define GRADC_ERROR_INDEX 2
#define GRADC_ERROR_DIV_ZERO 3
#define GRADC_ERROR_ALLOC 4
#endif

// Generated code marks pointers that never alias (the ABI forbids outputs
// to overlap inputs), which lets compilers vectorise without run-time
// overlap checks.
#if defined(__GNUC__) || defined(__clang__)
#define GRADC_RESTRICT __restrict__
#else
#define GRADC_RESTRICT
#endif

// Forces inlining of a small entry point. gradc::matmul needs it: when a
// loop of generated code fills its operand and the loop may run zero times,
// GCC 12 warns (-Wmaybe-uninitialized) that a possibly uninitialised buffer
// is passed to a `const T *` parameter of a call it does not inline, though
// matmul reads nothing when a size is 0. Inlined, GCC sees that guard.
#if defined(__GNUC__) || defined(__clang__)
#define GRADC_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define GRADC_ALWAYS_INLINE inline
#endif

namespace gradc {

//===----------------------------------------------------------------------===//
// Tensor views and size checks
//===----------------------------------------------------------------------===//

/// A tensor that the caller owns: a pointer to its first element
/// (contiguous, row-major) and its shape. `TensorView<const float>` is an
/// input, `TensorView<float>` an output.
template <typename T> class TensorView {
public:
  static constexpr int maxRank = 8;

  TensorView() = default;
  /// `shape` lists the dimensions; a view with more than maxRank
  /// dimensions or a negative one is invalid (every size check fails).
  TensorView(T *data, std::initializer_list<int64_t> shape) : ptr(data) {
    if (shape.size() > static_cast<size_t>(maxRank)) {
      rankValue = -1;
      return;
    }
    for (int64_t d : shape) {
      if (d < 0)
        rankValue = -1;
      if (rankValue >= 0)
        dims[rankValue++] = d;
    }
  }
  /// A view of mutable data converts to a view of const data.
  template <typename U>
  TensorView(const TensorView<U> &other) : ptr(other.data()) {
    rankValue = other.rank();
    for (int i = 0; i < rankValue; ++i)
      dims[i] = other.dim(i);
  }

  T *data() const { return ptr; }
  /// The number of dimensions, or -1 for an invalid view.
  int rank() const { return rankValue; }
  int64_t dim(int i) const { return dims[i]; }
  int64_t numElements() const {
    int64_t n = 1;
    for (int i = 0; i < rankValue; ++i)
      n *= dims[i];
    return n;
  }

private:
  T *ptr = nullptr;
  int rankValue = 0;
  int64_t dims[maxRank] = {};
};

/// Binds a size name to `dim` the first time (`size` < 0 means unbound)
/// and checks it agrees afterwards.
inline bool bindSize(int64_t &size, int64_t dim) {
  if (size < 0)
    size = dim;
  return size == dim;
}

/// Whether the product of `factors` (non-negative sizes) exceeds INT64_MAX,
/// so that no tensor with those dimensions exists and index arithmetic
/// over it would wrap. A factor 0 makes the product 0, whatever the
/// others. Generated functions check the element count of every tensor
/// they touch with it before anything else (GRADC_ERROR_SIZE).
inline bool countOverflows(std::initializer_list<int64_t> factors) {
  for (int64_t f : factors)
    if (f == 0)
      return false;
  int64_t product = 1;
  for (int64_t f : factors) {
    if (product > std::numeric_limits<int64_t>::max() / f)
      return true;
    product *= f;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Temporaries
//===----------------------------------------------------------------------===//

namespace detail {

/// The blocks of scratch memory that generated functions returned on this
/// thread, kept for the next call (docs/ABI.md, "Temporaries"). Without it
/// every call of a gradient with large temporaries maps fresh pages from
/// the kernel (glibc serves large blocks with mmap) and faults them in:
/// about a quarter of K2's gradient (docs/Performance.md). Only blocks of
/// at least `minBytes` are kept (smaller ones are cheap to malloc), at
/// most `slots` of them and `maxBytes` in all; the thread's exit frees
/// them. Define GRADC_NO_SCRATCH_CACHE to allocate and free every time.
class ScratchCache {
public:
  static constexpr size_t minBytes = size_t(64) << 10;
  static constexpr size_t maxBytes = size_t(512) << 20;
  static constexpr int slots = 16;

  ScratchCache() = default;
  ScratchCache(const ScratchCache &) = delete;
  ScratchCache &operator=(const ScratchCache &) = delete;
  ~ScratchCache() {
    for (int i = 0; i < count; ++i)
      std::free(blocks[i].ptr);
  }

  /// The smallest kept block of at least `bytes` (its size in `capacity`),
  /// or a new one; null when malloc fails.
  void *take(size_t bytes, size_t &capacity) {
    int best = -1;
    for (int i = 0; i < count; ++i)
      if (blocks[i].bytes >= bytes &&
          (best < 0 || blocks[i].bytes < blocks[best].bytes))
        best = i;
    if (best < 0) {
      capacity = bytes;
      return std::malloc(bytes);
    }
    Block b = blocks[best];
    blocks[best] = blocks[--count];
    kept -= b.bytes;
    capacity = b.bytes;
    return b.ptr;
  }

  /// Keeps the block for a later `take`, or frees it when it is small or
  /// there is no room.
  void give(void *ptr, size_t bytes) {
    if (bytes < minBytes || count == slots || kept + bytes > maxBytes) {
      std::free(ptr);
      return;
    }
    blocks[count++] = {ptr, bytes};
    kept += bytes;
  }

  /// The bytes kept now (for tests).
  size_t keptBytes() const { return kept; }

  static ScratchCache &forThisThread() {
    thread_local ScratchCache cache;
    return cache;
  }

private:
  struct Block {
    void *ptr;
    size_t bytes;
  };
  Block blocks[slots] = {};
  int count = 0;
  size_t kept = 0;
};

inline void *scratchTake(size_t bytes, size_t &capacity) {
#ifdef GRADC_NO_SCRATCH_CACHE
  capacity = bytes;
  return std::malloc(bytes);
#else
  if (bytes < ScratchCache::minBytes) {
    capacity = bytes;
    return std::malloc(bytes);
  }
  return ScratchCache::forThisThread().take(bytes, capacity);
#endif
}

inline void scratchGive(void *ptr, size_t capacity) {
#ifdef GRADC_NO_SCRATCH_CACHE
  (void)capacity;
  std::free(ptr);
#else
  if (!ptr)
    return;
  if (capacity < ScratchCache::minBytes) {
    std::free(ptr);
    return;
  }
  ScratchCache::forThisThread().give(ptr, capacity);
#endif
}

} // namespace detail

/// Memory for `count` elements, returned by the destructor to this
/// thread's scratch cache (detail::ScratchCache), which keeps large blocks
/// for the next call. A Buffer of zero elements holds no memory and is
/// valid. Check `operator bool` after construction: it is false when the
/// allocation failed.
template <typename T> class Buffer {
public:
  explicit Buffer(int64_t count) {
    if (count <= 0)
      return;
    // Objects larger than PTRDIFF_MAX bytes cannot exist.
    const uint64_t maxCount =
        static_cast<uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) /
        sizeof(T);
    if (static_cast<uint64_t>(count) > maxCount) {
      failed = true;
      return;
    }
    ptr = static_cast<T *>(
        detail::scratchTake(static_cast<size_t>(count) * sizeof(T), capacity));
    failed = ptr == nullptr;
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() { detail::scratchGive(ptr, capacity); }

  explicit operator bool() const { return !failed; }
  T *data() const { return ptr; }

private:
  T *ptr = nullptr;
  size_t capacity = 0;
  bool failed = false;
};

//===----------------------------------------------------------------------===//
// Scalar helpers
//===----------------------------------------------------------------------===//

// i32 arithmetic wraps around (two's complement), as the language defines
// it; signed overflow in C++ is undefined, so compute in uint32_t.
inline int32_t wrapAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) +
                              static_cast<uint32_t>(b));
}
inline int32_t wrapSub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) -
                              static_cast<uint32_t>(b));
}
inline int32_t wrapMul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) *
                              static_cast<uint32_t>(b));
}
inline int32_t wrapNeg(int32_t a) {
  return static_cast<int32_t>(0u - static_cast<uint32_t>(a));
}
inline int32_t wrapAbs(int32_t a) { return a < 0 ? wrapNeg(a) : a; }
inline int32_t square(int32_t a) { return wrapMul(a, a); }

/// i32 division truncates toward zero; INT32_MIN / -1 wraps to INT32_MIN.
/// Division by zero sets `status` to GRADC_ERROR_DIV_ZERO and gives 0, so
/// that a loop can test the status once when it ends.
inline int32_t divide(int32_t a, int32_t b, int &status) {
  if (b == 0) {
    status = GRADC_ERROR_DIV_ZERO;
    return 0;
  }
  if (b == -1)
    return wrapNeg(a);
  return a / b;
}

template <typename T> inline T square(T x) { return x * x; }
template <typename T> inline T sign(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

// The NaN policy of docs/IR.md, which the interpreter and the LLVM backend
// follow too: maximum, minimum, clip, relu and the max reduction propagate
// NaN (as NumPy); otherwise maximum(a, b) is `a < b ? b : a`, so a tie
// keeps the first operand (this decides the sign of zero). std::max and
// std::min would drop a NaN in the second operand, so generated code never
// calls them on floats. The float forms are written with x != x tests and
// ternaries of values already computed, so that they vectorise (maxps /
// cmpunordps / blends).
inline int32_t maximum(int32_t a, int32_t b) { return a < b ? b : a; }
inline int32_t minimum(int32_t a, int32_t b) { return b < a ? b : a; }
inline float maximum(float a, float b) {
  float m = a < b ? b : a;
  return b != b ? b : m;
}
inline float minimum(float a, float b) {
  float m = b < a ? b : a;
  return b != b ? b : m;
}
inline double maximum(double a, double b) {
  double m = a < b ? b : a;
  return b != b ? b : m;
}
inline double minimum(double a, double b) {
  double m = b < a ? b : a;
  return b != b ? b : m;
}
/// minimum(maximum(x, lo), hi): `hi` when lo > hi; NaN in any operand is
/// NaN.
template <typename T> inline T clip(T x, T lo, T hi) {
  return minimum(maximum(x, lo), hi);
}
/// x > 0 ? x : 0, so relu(-0) is +0; NaN stays NaN.
template <typename T> inline T relu(T x) { return x <= T(0) ? T(0) : x; }

//===----------------------------------------------------------------------===//
// Elementwise math
//
// The f32 functions are branch-free (the ternaries become blends), use no
// table and no libm call, and so vectorise at -O2 with SSE2 or better.
// Bounds are in ulp of the correctly rounded result, measured exhaustively
// over every finite f32 (docs/CppBackend.md); infinities, NaN and
// underflow to subnormals and zero are handled. f64 calls libm.
//===----------------------------------------------------------------------===//

namespace detail {

inline uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
/// 2^n for an integer n in [-126, 127].
inline float pow2(int32_t n) {
  return floatOf(static_cast<uint32_t>(n + 127) << 23);
}

} // namespace detail

/// `cond ? a : b` as a bitwise blend. Under GCC's default -ftrapping-math a
/// ternary whose arms are floating-point arithmetic is not if-converted,
/// which stops the loop around it from vectorising; a blend of values
/// already computed always vectorises. Generated code uses it for `select`.
inline float select(bool cond, float a, float b) {
  uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return detail::floatOf((detail::bitsOf(a) & mask) |
                         (detail::bitsOf(b) & ~mask));
}
inline double select(bool cond, double a, double b) {
  uint64_t mask = uint64_t(0) - static_cast<uint64_t>(cond);
  uint64_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  uint64_t u = (ua & mask) | (ub & ~mask);
  double r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}
inline int32_t select(bool cond, int32_t a, int32_t b) { return cond ? a : b; }
inline uint8_t select(bool cond, uint8_t a, uint8_t b) { return cond ? a : b; }

/// e^x; at most 1.05 ulp (measured over every f32); 0 below -103.97, +inf
/// above 88.72, subnormal results rounded once, NaN propagated.
inline float exp(float x) {
  // x = n ln2 + r with |r| <= ln2 / 2; n is found by adding 1.5 * 2^23,
  // which rounds x / ln2 to an integer in the low mantissa bits, without
  // a float-to-int conversion that NaN would make undefined. NaN flows
  // through the arithmetic to the result.
  float clamped = gradc::select(x > 89.0f, 89.0f, x);
  clamped = gradc::select(x < -104.0f, -104.0f, clamped);
  const float shifter = 12582912.0f;
  float t = clamped * 1.44269502f + shifter;
  float n = t - shifter;
  int32_t ni = static_cast<int32_t>(detail::bitsOf(t) - 0x4b400000u);
  // ln2 in two parts; the first has 16 bits, so n * 0.693145752f is exact.
  float r = clamped - n * 0.693145752f;
  r = r - n * 1.42860677e-6f;
  // e^r = 1 + r + r^2 P(r), P a degree-4 Chebyshev fit (error 6.5e-8).
  float p = 1.39261759e-3f;
  p = p * r + 8.36317312e-3f;
  p = p * r + 4.16665547e-2f;
  p = p * r + 1.66665770e-1f;
  p = p * r + 0.5f;
  float er = 1.0f + (r + r * r * p);
  // Scale by 2^n in two steps so that n down to -150 (subnormal results)
  // and up to 128 (overflow to inf) need no special case.
  int32_t half = ni / 2;
  return er * detail::pow2(half) * detail::pow2(ni - half);
}

/// ln x; at most 0.85 ulp (measured over every f32); -inf at 0, NaN below 0,
/// subnormals handled.
inline float log(float x) {
  // Scale subnormals up by 2^23 so that the exponent field is exact.
  bool tiny = x < 1.17549435e-38f;
  float xs = gradc::select(tiny, x * 8388608.0f, x);
  uint32_t u = detail::bitsOf(xs);
  // Split x = 2^e m with m in [sqrt(1/2), sqrt(2)): offsetting by the bits
  // of sqrt(1/2) makes the exponent field step at sqrt(2). (An arithmetic
  // shift: offset is negative below sqrt(1/2).)
  uint32_t offset = u - 0x3f3504f3u;
  int32_t e = (static_cast<int32_t>(offset) >> 23) - (tiny ? 23 : 0);
  float m = detail::floatOf((offset & 0x007fffffu) + 0x3f3504f3u);
  // With f = m - 1 (exact) and s = f / (2 + f), |s| <= 0.1716:
  // ln m = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R), R = 2z(1/3 + z/5 + ...)
  // for z = s^2, fitted with degree 2 (error 9.5e-8); this is fdlibm's
  // arrangement, which keeps the large terms exact.
  float f = m - 1.0f;
  float s = f / (2.0f + f);
  float z = s * s;
  float rz = 0.147910795f;
  rz = rz * z + 0.199943659f;
  rz = rz * z + 0.333333426f;
  float r = 2.0f * z * rz;
  float hfsq = 0.5f * f * f;
  float ef = static_cast<float>(e);
  float result =
      ef * 0.693145752f - ((hfsq - (s * (hfsq + r) + ef * 1.42860677e-6f)) - f);
  const float inf = std::numeric_limits<float>::infinity();
  result = gradc::select(x == 0.0f, -inf, result);
  result =
      gradc::select(x < 0.0f, std::numeric_limits<float>::quiet_NaN(), result);
  result = gradc::select(x == inf, inf, result);
  return gradc::select(x != x, x, result);
}

/// tanh x; at most 1.34 ulp (measured over every f32).
inline float tanh(float x) {
  float a = std::fabs(x);
  // Small |x|: tanh x = x + x^3 T(x^2), T a degree-5 fit on [0, 0.625^2]
  // (error 1.6e-9).
  float z = x * x;
  float t = 2.29274482e-3f;
  t = t * z - 8.34394552e-3f;
  t = t * z + 2.17689187e-2f;
  t = t * z - 5.39592596e-2f;
  t = t * z + 1.33333036e-1f;
  t = t * z - 3.33333332e-1f;
  float small = x + x * z * t;
  // Large |x|: 1 - 2 / (e^{2|x|} + 1), which goes to 1 as e^{2|x|}
  // overflows to inf.
  float large = 1.0f - 2.0f / (gradc::exp(2.0f * a) + 1.0f);
  return gradc::select(a < 0.625f, small, std::copysign(large, x));
}

/// 1 / (1 + e^-x); at most 2.41 ulp (measured over every f32).
inline float sigmoid(float x) {
  // With e = e^-|x| in (0, 1] nothing overflows: sigmoid(|x|) = 1 / (1 + e)
  // and sigmoid(-|x|) = e / (1 + e), which keeps tiny results accurate.
  float e = gradc::exp(-std::fabs(x));
  return gradc::select(x < 0.0f, e, 1.0f) / (1.0f + e);
}

/// ln(1 + e^x); at most 2.82 ulp (measured over every f32).
inline float softplus(float x) {
  // ln(1 + e^x) = max(x, 0) + log1p(e^-|x|), and log1p(e) is
  // ln(u) * e / (u - 1) with u = 1 + e rounded (Goldberg's trick: exact
  // for the rounded u), or e itself when u rounds to 1.
  float e = gradc::exp(-std::fabs(x));
  float u = 1.0f + e;
  float um1 = u - 1.0f;
  bool exact = um1 == 0.0f;
  float viaLog = gradc::log(u) * (e / gradc::select(exact, 1.0f, um1));
  float log1pE = gradc::select(exact, e, viaLog);
  float result = gradc::select(x > 0.0f, x, 0.0f) + log1pE;
  return gradc::select(x != x, x, result);
}

inline double exp(double x) { return std::exp(x); }
inline double log(double x) { return std::log(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  double r = 1.0 / (1.0 + e);
  return x < 0.0 ? e * r : r;
}
inline double softplus(double x) {
  return (x > 0.0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x)));
}

//===----------------------------------------------------------------------===//
// Matrix product
//===----------------------------------------------------------------------===//

// GCC's -O3 loop analysis warns (-Waggressive-loop-optimizations) that
// some iteration of these kernels' loops would overflow an index, for trip
// counts no real tensor reaches; the kernels are otherwise warning-free.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
#endif

/// Whether a matmul operand is read as stored or transposed.
enum Transpose : bool { NoTranspose = false, Transposed = true };

namespace detail {

template <typename T> struct Accumulator {
  using type = T;
};
// i32 products wrap: accumulate in uint32_t, where overflow is defined.
template <> struct Accumulator<int32_t> {
  using type = uint32_t;
};

/// c[i, j0 + j] += sum_p op(a)[i, p0 + p] panel[p, j] for rows [i0, i1)
/// and columns [j, jEnd) of a panel: the simple loop for the edges.
template <typename T, typename Acc>
void panelRows(const T *GRADC_RESTRICT a, Transpose ta,
               const Acc *GRADC_RESTRICT panel, T *GRADC_RESTRICT c, int64_t m,
               int64_t n, int64_t k, int64_t i0, int64_t i1, int64_t j0,
               int64_t jBegin, int64_t jEnd, int64_t p0, int64_t kb,
               int64_t nb) {
  for (int64_t i = i0; i < i1; ++i) {
    T *GRADC_RESTRICT ci = c + i * n + j0;
    for (int64_t p = 0; p < kb; ++p) {
      Acc aip = static_cast<Acc>(ta ? a[(p0 + p) * m + i] : a[i * k + p0 + p]);
      const Acc *bp = panel + p * nb;
      for (int64_t j = jBegin; j < jEnd; ++j)
        ci[j] = static_cast<T>(static_cast<Acc>(ci[j]) + aip * bp[j]);
    }
  }
}

/// The portable kernel, c[m, n] += op(a)[m, k] op(b)[k, n]. b is copied a
/// panel (kBlock x nBlock) at a time into row-major order (transposing it
/// if asked), which keeps it in cache; then blocks of 4 rows x 16 columns
/// of c accumulate in registers over the whole panel (the innermost loops
/// have constant trip counts, so compilers unroll and vectorise them).
template <typename T>
void matmulPortable(const T *GRADC_RESTRICT a, Transpose ta,
                    const T *GRADC_RESTRICT b, Transpose tb,
                    T *GRADC_RESTRICT c, int64_t m, int64_t n, int64_t k) {
  using Acc = typename Accumulator<T>::type;
  constexpr int64_t kBlock = 64, nBlock = 128, rows = 4, cols = 16;
  Acc panel[kBlock * nBlock];
  for (int64_t j0 = 0; j0 < n; j0 += nBlock) {
    int64_t nb = std::min(nBlock, n - j0);
    int64_t nbFull = nb - nb % cols;
    for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
      int64_t kb = std::min(kBlock, k - p0);
      for (int64_t p = 0; p < kb; ++p)
        for (int64_t j = 0; j < nb; ++j)
          panel[p * nb + j] = static_cast<Acc>(tb ? b[(j0 + j) * k + p0 + p]
                                                  : b[(p0 + p) * n + j0 + j]);
      int64_t i = 0;
      for (; i + rows <= m; i += rows) {
        for (int64_t j = 0; j < nbFull; j += cols) {
          Acc acc[rows][cols] = {};
          for (int64_t p = 0; p < kb; ++p) {
            const Acc *bp = panel + p * nb + j;
            for (int64_t r = 0; r < rows; ++r) {
              Acc air = static_cast<Acc>(ta ? a[(p0 + p) * m + i + r]
                                            : a[(i + r) * k + p0 + p]);
              for (int64_t q = 0; q < cols; ++q)
                acc[r][q] += air * bp[q];
            }
          }
          for (int64_t r = 0; r < rows; ++r) {
            T *GRADC_RESTRICT cr = c + (i + r) * n + j0 + j;
            for (int64_t q = 0; q < cols; ++q)
              cr[q] = static_cast<T>(static_cast<Acc>(cr[q]) + acc[r][q]);
          }
        }
        panelRows(a, ta, panel, c, m, n, k, i, i + rows, j0, nbFull, nb, p0, kb,
                  nb);
      }
      panelRows(a, ta, panel, c, m, n, k, i, m, j0, 0, nb, p0, kb, nb);
    }
  }
}

/// c[m] (+)= a[m, k] b[k]: one dot product per row, with eight partial
/// sums so that the loop vectorises without reassociating.
template <typename T>
void matvec(const T *GRADC_RESTRICT a, const T *GRADC_RESTRICT b,
            T *GRADC_RESTRICT c, int64_t m, int64_t k) {
  using Acc = typename Accumulator<T>::type;
  for (int64_t i = 0; i < m; ++i) {
    const T *ai = a + i * k;
    Acc partial[8] = {};
    int64_t p = 0;
    for (; p + 8 <= k; p += 8)
      for (int q = 0; q < 8; ++q)
        partial[q] += static_cast<Acc>(ai[p + q]) * static_cast<Acc>(b[p + q]);
    for (; p < k; ++p)
      partial[0] += static_cast<Acc>(ai[p]) * static_cast<Acc>(b[p]);
    Acc sum = static_cast<Acc>(c[i]);
    for (int q = 0; q < 8; ++q)
      sum += partial[q];
    c[i] = static_cast<T>(sum);
  }
}

} // namespace detail

/// c[m, n] = op(a)[m, k] @ op(b)[k, n], row-major, where op transposes
/// when asked: a transposed `a` is stored [k, m], a transposed `b` [n, k].
/// With `accumulate`, adds to c instead of overwriting it.
template <typename T>
GRADC_ALWAYS_INLINE void matmul(const T *a, Transpose ta, const T *b,
                                Transpose tb, T *c, int64_t m, int64_t n,
                                int64_t k, bool accumulate = false) {
  if (!accumulate)
    std::fill(c, c + m * n, T(0));
  if (m == 0 || n == 0 || k == 0)
    return;
  if (n == 1 && !ta) {
    // A matrix-vector product; b is k contiguous elements either way.
    detail::matvec(a, b, c, m, k);
    return;
  }
  detail::matmulPortable(a, ta, b, tb, c, m, n, k);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#ifdef GRADC_USE_BLAS
/// Below this many multiply-adds (m n k) a CBLAS call costs more than the
/// product itself (a 4x4 matrix-vector product takes about 6x longer
/// through cblas_sgemm than inline), so the inline kernel runs instead.
constexpr int64_t blasMinWork = 32 * 32 * 32;

// Always inlined, like the portable entry point: with the sizes known at
// the call (K4's 4x4), the size test folds and the inline kernel is
// specialised to them; a call through here would cost 5x the product.
GRADC_ALWAYS_INLINE void matmul(const float *a, Transpose ta, const float *b,
                                Transpose tb, float *c, int64_t m, int64_t n,
                                int64_t k, bool accumulate = false) {
  if (m * n * k < blasMinWork) {
    matmul<float>(a, ta, b, tb, c, m, n, k, accumulate);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n),
              accumulate ? 1.0f : 0.0f, c, static_cast<int>(n));
}
GRADC_ALWAYS_INLINE void matmul(const double *a, Transpose ta, const double *b,
                                Transpose tb, double *c, int64_t m, int64_t n,
                                int64_t k, bool accumulate = false) {
  if (m * n * k < blasMinWork) {
    matmul<double>(a, ta, b, tb, c, m, n, k, accumulate);
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n),
              accumulate ? 1.0 : 0.0, c, static_cast<int>(n));
}
#endif

//===----------------------------------------------------------------------===//
// Normalisations along one axis
//
// A tensor seen as [outer, n, inner] with the axis in the middle: element
// (o, a, i) is at (o * n + a) * inner + i.
//===----------------------------------------------------------------------===//

namespace detail {
/// f32 sums accumulate in double (a float accumulator stops growing at
/// 2^24); f64 in double.
template <typename T> struct SumOf {
  using type = T;
};
template <> struct SumOf<float> {
  using type = double;
};
} // namespace detail

/// y = x - logsumexp(x) along the axis, computed stably (max subtracted).
template <typename T>
void logSoftmax(const T *GRADC_RESTRICT x, T *GRADC_RESTRICT y, int64_t outer,
                int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T *xs = x + o * n * inner + i;
      T *ys = y + o * n * inner + i;
      T top = -std::numeric_limits<T>::infinity();
      for (int64_t a = 0; a < n; ++a)
        top = gradc::maximum(top, xs[a * inner]);
      if (top == -std::numeric_limits<T>::infinity())
        top = T(0); // every entry -inf: keep -inf - (-inf) from being NaN
      typename detail::SumOf<T>::type sum = 0;
      for (int64_t a = 0; a < n; ++a)
        sum += gradc::exp(xs[a * inner] - top);
      T shift = top + gradc::log(static_cast<T>(sum));
      for (int64_t a = 0; a < n; ++a)
        ys[a * inner] = xs[a * inner] - shift;
    }
  }
}

/// y = e^x / sum(e^x) along the axis, computed stably.
template <typename T>
void softmax(const T *GRADC_RESTRICT x, T *GRADC_RESTRICT y, int64_t outer,
             int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T *xs = x + o * n * inner + i;
      T *ys = y + o * n * inner + i;
      T top = -std::numeric_limits<T>::infinity();
      for (int64_t a = 0; a < n; ++a)
        top = gradc::maximum(top, xs[a * inner]);
      if (top == -std::numeric_limits<T>::infinity())
        top = T(0);
      typename detail::SumOf<T>::type sum = 0;
      for (int64_t a = 0; a < n; ++a) {
        ys[a * inner] = gradc::exp(xs[a * inner] - top);
        sum += ys[a * inner];
      }
      T scale = static_cast<T>(1 / sum);
      for (int64_t a = 0; a < n; ++a)
        ys[a * inner] *= scale;
    }
  }
}

/// y[o, i] = ln sum_a e^x[o, a, i], computed stably.
template <typename T>
void logSumExp(const T *GRADC_RESTRICT x, T *GRADC_RESTRICT y, int64_t outer,
               int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T *xs = x + o * n * inner + i;
      T top = -std::numeric_limits<T>::infinity();
      for (int64_t a = 0; a < n; ++a)
        top = gradc::maximum(top, xs[a * inner]);
      if (top == std::numeric_limits<T>::infinity() ||
          top == -std::numeric_limits<T>::infinity()) {
        y[o * inner + i] = top;
        continue;
      }
      typename detail::SumOf<T>::type sum = 0;
      for (int64_t a = 0; a < n; ++a)
        sum += gradc::exp(xs[a * inner] - top);
      y[o * inner + i] = top + gradc::log(static_cast<T>(sum));
    }
  }
}

/// loss[r] = logsumexp(logits[r, :]) - logits[r, labels[r]] for `rows`
/// rows of `classes` logits. A label outside [0, classes) is
/// GRADC_ERROR_INDEX.
template <typename T>
int softmaxCrossEntropy(const T *GRADC_RESTRICT logits,
                        const int32_t *GRADC_RESTRICT labels,
                        T *GRADC_RESTRICT loss, int64_t rows, int64_t classes) {
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] < 0 || labels[r] >= classes)
      return GRADC_ERROR_INDEX;
  logSumExp(logits, loss, rows, classes, 1);
  for (int64_t r = 0; r < rows; ++r)
    loss[r] -= logits[r * classes + labels[r]];
  return GRADC_OK;
}

/// out[r, :] = the one-hot row of indices[r] with `depth` classes; an index
/// outside [0, depth) gives a row of zeros (as TensorFlow's one_hot).
template <typename T>
void oneHot(const int32_t *GRADC_RESTRICT indices, T *GRADC_RESTRICT out,
            int64_t rows, int64_t depth) {
  std::fill(out, out + rows * depth, T(0));
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0 && indices[r] < depth)
      out[r * depth + indices[r]] = T(1);
}

} // namespace gradc

#endif // GRADC_RUNTIME_H
