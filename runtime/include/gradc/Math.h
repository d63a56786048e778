//===- Math.h - The scalar math of gradc's elementwise ops ------*- C++ -*-===//
//
// The scalar semantics of the elementwise ops, header-only and C++17:
//
//   - exact helpers: wrapping i32 arithmetic, sign, relu, clip and the
//     NaN-propagating maximum/minimum of docs/IR.md, `select` as a blend;
//   - the one implementation of the f32 functions exp, log, tanh, sigmoid,
//     softplus, sin, cos, pow and atan. The C++ backend's code calls them
//     through gradc/Runtime.h, the LLVM backend links this file compiled
//     to LLVM bitcode (compiler/lib/Emit/MathBitcode.cpp) into every
//     module, and the interpreter calls them for f32, so the three agree
//     bit for bit. Each is forced inline, branch-free (every select is a
//     blend of computed values), without tables or libm calls, so a loop
//     around it vectorises with g++ -O3 and clang++ -O2 (docs/Math.md
//     says what stopped GCC; test/Runtime/math-vectorize.cpp checks it).
//     Bounds, measured over every f32 (utils/math-ulp.cpp), are in
//     docs/Math.md.
//
// Contraction: the functions are written for separately rounded `*` and
// `+`. Clang is pinned to that below (no FMA contraction in this file,
// whatever -ffp-contract says, and only here); GCC contracts only when
// the target has FMA (-mfma, -march=haswell or later), and then by default
// (-ffp-contract=fast): for bit-exact agreement with the interpreter and
// the LLVM backend pass -ffp-contract=off to GCC there. (GCC's
// `#pragma GCC optimize` would pin it, but stops these functions from
// inlining into the loops, so that nothing vectorises.)
//
// f64 calls libm.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_MATH_H
#define GRADC_MATH_H

#include "gradc/ABI.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// Every f32 function and its helpers are forced inline: GCC's heuristics
// keep sin, cos and pow (and at -O2 Clang's too) out of line, and a call
// in a loop stops it from vectorising.
#if defined(__GNUC__) || defined(__clang__)
#define GRADC_MATH_INLINE __attribute__((always_inline)) inline
#else
#define GRADC_MATH_INLINE inline
#endif

#ifdef __clang__
#pragma float_control(push)
#pragma clang fp contract(off)
#endif

namespace gradc {

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

GRADC_MATH_INLINE uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
GRADC_MATH_INLINE float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
/// 2^n for an integer n in [-126, 127].
GRADC_MATH_INLINE float pow2(int32_t n) {
  return floatOf(static_cast<uint32_t>(n + 127) << 23);
}

} // namespace detail

/// `cond ? a : b` as a bitwise blend. Under GCC's default -ftrapping-math a
/// ternary whose arms are floating-point arithmetic is not if-converted,
/// which stops the loop around it from vectorising; a blend of values
/// already computed always vectorises. Generated code uses it for `select`.
GRADC_MATH_INLINE float select(bool cond, float a, float b) {
  uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return detail::floatOf((detail::bitsOf(a) & mask) |
                         (detail::bitsOf(b) & ~mask));
}
GRADC_MATH_INLINE double select(bool cond, double a, double b) {
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

namespace detail {

/// e^x for x at most 89 (or NaN) and at least -104: exp's arithmetic, once
/// its argument is clamped. tanh's argument is never negative, and so
/// needs only the upper clamp (K4's gradient: a compare and a blend less
/// per call on its dependent chain).
GRADC_MATH_INLINE float expOfClamped(float clamped) {
  // x = n ln2 + r with |r| <= ln2 / 2; n is found by adding 1.5 * 2^23,
  // which rounds x / ln2 to an integer in the low mantissa bits, without
  // a float-to-int conversion that NaN would make undefined. NaN flows
  // through the arithmetic to the result.
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

} // namespace detail

/// e^x; at most 1.05 ulp (measured over every f32); 0 below -103.97, +inf
/// above 88.72, subnormal results rounded once, NaN propagated.
GRADC_MATH_INLINE float exp(float x) {
  float clamped = gradc::select(x > 89.0f, 89.0f, x);
  clamped = gradc::select(x < -104.0f, -104.0f, clamped);
  return detail::expOfClamped(clamped);
}

/// ln x; at most 0.85 ulp (measured over every f32); -inf at 0, NaN below 0,
/// subnormals handled.
GRADC_MATH_INLINE float log(float x) {
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
GRADC_MATH_INLINE float tanh(float x) {
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
  // e^{2|x|}: 2|x| is never below exp's lower clamp, so only the upper
  // one applies (the same bits as gradc::exp).
  float twice = 2.0f * a;
  float e = detail::expOfClamped(gradc::select(twice > 89.0f, 89.0f, twice));
  float large = 1.0f - 2.0f / (e + 1.0f);
  return gradc::select(a < 0.625f, small, std::copysign(large, x));
}

/// 1 / (1 + e^-x); at most 2.41 ulp (measured over every f32).
GRADC_MATH_INLINE float sigmoid(float x) {
  // With e = e^-|x| in (0, 1] nothing overflows: sigmoid(|x|) = 1 / (1 + e)
  // and sigmoid(-|x|) = e / (1 + e), which keeps tiny results accurate.
  float e = gradc::exp(-std::fabs(x));
  return gradc::select(x < 0.0f, e, 1.0f) / (1.0f + e);
}

/// ln(1 + e^x); at most 2.82 ulp (measured over every f32).
GRADC_MATH_INLINE float softplus(float x) {
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

namespace detail {

GRADC_MATH_INLINE uint64_t bitsOf(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
GRADC_MATH_INLINE double doubleOf(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// The integer nearest to v (ties to even), without a call of rint, which
/// needs SSE4.1 to vectorise: for |v| < 2^52, |v| + 2^52 has no fraction
/// bits left, so the addition rounds |v|; from 2^52 up v is an integer.
GRADC_MATH_INLINE double roundToInt(double v) {
  double a = std::fabs(v);
  double r = std::copysign((a + 4503599627370496.0) - 4503599627370496.0, v);
  return gradc::select(a < 4503599627370496.0, r, v);
}

/// Writes x = (4k + q + f) pi/2 with an integer k, q = `quadrant` in
/// [0, 3] and f = fHi + fLo in [-1/2, 1/2] as a double-double: Payne and
/// Hanek's reduction for every finite f32, without a table or a branch.
/// 2/pi is split into eight 28-bit chunks c_j (down to 2^-224); x has 24
/// significant bits, so each product x c_j is exact in double, and so is
/// its remainder modulo 4, m_j = x c_j - 4 round(x c_j / 4). The m_j add
/// up to x 2/pi modulo 4 within 2^-96 |x| 2^-128; they are summed without
/// error into a double-double (TwoSum), which keeps the ~2^-64 of f that
/// an f32 closest to a multiple of pi/2 needs. Non-finite x must be
/// replaced by 0 before. This is one step: adds x c modulo 4 to hi + lo.
/// `Size` bounds |x c| (|x| < 2^128 and the chunk known): Any, below 2^53
/// (then the 1.5 * 2^52 shifter rounds p / 4 as roundToInt does), or
/// below 2 (then the remainder is p itself). The three compute the same
/// m_j; the cheaper forms save a third of the reduction.
enum class ProductSize { Any, Below2p53, Below2 };
template <ProductSize Size>
GRADC_MATH_INLINE void addReducedProduct(double x, double c, double &hi,
                                         double &lo) {
  double p = x * c;
  double m = p;
  if constexpr (Size == ProductSize::Any)
    m = p - 4.0 * roundToInt(p * 0.25);
  else if constexpr (Size == ProductSize::Below2p53)
    m = p - 4.0 * ((p * 0.25 + 6755399441055744.0) - 6755399441055744.0);
  // TwoSum: hi + m = s + e exactly.
  double s = hi + m;
  double v = s - hi;
  double e = (hi - (s - v)) + (m - v);
  hi = s;
  lo += e;
}

/// The reduction of an f32 x (as a double) by pi/2 (addReducedProduct).
GRADC_MATH_INLINE void reduceHalfPi(double x, uint64_t &quadrant, double &fHi,
                                    double &fLo) {
  // Written out rather than a loop over a table, so that nothing is left
  // for the vectoriser but straight-line code. |x| < 2^128 and c_j <
  // 2^(28 - 28j), so |x c_j| < 2^43 from j = 4 and < 2^-14 from j = 6.
  double hi = 0, lo = 0;
  addReducedProduct<ProductSize::Any>(x, 0xa2f9836p-28, hi, lo);
  addReducedProduct<ProductSize::Any>(x, 0xe4e4415p-56, hi, lo);
  addReducedProduct<ProductSize::Any>(x, 0x29fc275p-84, hi, lo);
  addReducedProduct<ProductSize::Below2p53>(x, 0x7d1f534p-112, hi, lo);
  addReducedProduct<ProductSize::Below2p53>(x, 0xddc0db6p-140, hi, lo);
  addReducedProduct<ProductSize::Below2>(x, 0x295993cp-168, hi, lo);
  addReducedProduct<ProductSize::Below2>(x, 0x439041fp-196, hi, lo);
  addReducedProduct<ProductSize::Below2>(x, 0xe5163abp-224, hi, lo);
  // |hi| <= 16: take out its integer part, then renormalise.
  double n = roundToInt(hi);
  hi -= n;
  double s = hi + lo;
  fLo = lo - (s - hi);
  fHi = s;
  // f may still be just above 1/2 after the renormalisation; that only
  // stretches the polynomials' interval by an ulp.
  // The quadrant from the bits of n + 1.5 * 2^52 (n is an integer in
  // [-16, 16], so its two's complement is in the low bits): no
  // double-to-integer conversion, which few targets have in vectors.
  quadrant = bitsOf(n + 6755399441055744.0) & 3;
}

/// sin and cos of r in [-pi/4 - 2^-50, pi/4 + 2^-50], in double: Taylor
/// polynomials, truncated where the next term is below 2^-36 relative
/// (r^13/13! and r^14/14! at pi/4), well under the 2^-24 an f32 needs.
GRADC_MATH_INLINE double sinPoly(double r) {
  double z = r * r;
  double p = -2.5052108385441720e-08; // -1/11!
  p = p * z + 2.7557319223985893e-06; // 1/9!
  p = p * z - 1.9841269841269841e-04; // -1/7!
  p = p * z + 8.3333333333333333e-03; // 1/5!
  p = p * z - 1.6666666666666667e-01; // -1/3!
  return r + r * z * p;
}
GRADC_MATH_INLINE double cosPoly(double r) {
  double z = r * r;
  double p = 2.0876756987868099e-09;  // 1/12!
  p = p * z - 2.7557319223985891e-07; // -1/10!
  p = p * z + 2.4801587301587302e-05; // 1/8!
  p = p * z - 1.3888888888888889e-03; // -1/6!
  p = p * z + 4.1666666666666667e-02; // 1/4!
  p = p * z - 0.5;
  return 1.0 + z * p;
}

/// sin x (cosine = false) or cos x (true) as a double, from x = (4k + q +
/// f) pi/2 with f = fHi + fLo: sin x is sin r, cos r, -sin r, -cos r for
/// q = 0, 1, 2, 3 with r = f pi/2, and cos x = sin(x + pi/2) shifts q by
/// one.
GRADC_MATH_INLINE double sinCosReduced(uint64_t q, double fHi, double fLo,
                                       bool cosine) {
  // r = f pi/2, pi/2 as a double-double (hi 0x1.921fb54442d18p+0).
  double r = fHi * 1.5707963267948966 +
             (fHi * 6.123233995736766e-17 + fLo * 1.5707963267948966);
  q += cosine ? 1 : 0;
  double s = sinPoly(r), c = cosPoly(r);
  // The quadrant's bits as masks: a bool made of an integer's bit (as in
  // `(q & 1) != 0`) stops GCC's vectoriser ("bit-precision arithmetic not
  // supported"), a comparison of floating-point values does not.
  uint64_t odd = uint64_t(0) - (q & 1);
  double v = doubleOf((bitsOf(c) & odd) | (bitsOf(s) & ~odd));
  return doubleOf(bitsOf(v) ^ ((q & 2) << 62)); // -v in quadrants 2 and 3
}

/// sin x or cos x of any f32 by the exact reduction (sinCosReduced).
GRADC_MATH_INLINE float sinCosAny(float x, bool cosine) {
  float a = std::fabs(x);
  bool finite = a <= std::numeric_limits<float>::max();
  double xd = gradc::select(finite, static_cast<double>(x), 0.0);
  uint64_t q;
  double fHi, fLo;
  reduceHalfPi(xd, q, fHi, fLo);
  float result = static_cast<float>(sinCosReduced(q, fHi, fLo, cosine));
  // NaN for inf and NaN (x - x), and sin(+-0) = +-0.
  result = gradc::select(finite, result, x - x);
  return cosine ? result : gradc::select(x == 0.0f, x, result);
}

/// The magnitude below which sin and cos take sinCosSmall.
constexpr float smallTrigBound = 1048576.0f; // 2^20

/// a - k p rounded once to f32: one step of sinCosSmall's reduction. A
/// fused multiply-add where the target has one (GRADC_MATH_FMA: the LLVM
/// backend's bitcode for such targets); elsewhere the same bits from
/// double, where k p is exact (24 + 24 bits) and the sum, rounded to odd
/// (from its rounding to nearest and the exact error of TwoSum), then
/// rounds to f32 as the exact value would, 53 bits being at least 24 + 2
/// (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums").
GRADC_MATH_INLINE float reduceStep(float a, float k, float p) {
#if defined(__FMA__) || defined(__aarch64__) || defined(GRADC_MATH_FMA)
  return __builtin_fmaf(-k, p, a);
#else
  double ad = a;
  double b = -static_cast<double>(k) * static_cast<double>(p);
  double s = ad + b;
  double bb = s - ad;
  double e = (ad - (s - bb)) + (b - bb);
  // An inexact s rounded away from zero (e has the other sign) steps one
  // ulp back toward zero, then takes an odd last bit: round to odd.
  uint64_t inexact = uint64_t(0) - uint64_t(e != 0.0);
  uint64_t away = inexact & (uint64_t(0) - ((bitsOf(s) ^ bitsOf(e)) >> 63));
  return static_cast<float>(doubleOf((bitsOf(s) + away) | (inexact & 1u)));
#endif
}

/// sin x or cos x for |x| < 2^20 (smallTrigBound), about as fast as exp:
/// x = k pi/2 + r by Cody and Waite in f32 with fused multiply-adds
/// (reduceStep), pi/2 in three f32 parts: the first step is exact (x and
/// k P1 are multiples of 2^-24 whose difference is below 2), the second
/// and third round once each, so r is within about 1 ulp plus k 2^-76
/// (against the 2^-30 or so that an f32 below 2^20 comes to a multiple of
/// pi/2); then the f32 polynomials of Cephes' sinf and cosf on [-pi/4,
/// pi/4], and the quadrant as masks. (Until session 10 the reduction ran
/// in double, r within 2^-64 then rounded: 1.57 ulp at most instead of
/// 1.67, and 22% slower for a loop of sin, cos and exp on AVX2.)
GRADC_MATH_INLINE float sinCosSmall(float x, bool cosine) {
  // k = x 2/pi rounded to an integer by the 1.5 * 2^23 shifter (|k| <
  // 2^20), one rounding; its two's complement is in the low bits of t;
  // cos x = sin(x + pi/2).
  float t = reduceStep(12582912.0f, x, -0x1.45f306p-1f);
  float k = t - 12582912.0f;
  uint32_t q = bitsOf(t) + (cosine ? 1u : 0u);
  float rf = reduceStep(x, k, 0x1.921fb6p+0f);
  rf = reduceStep(rf, k, -0x1.777a5cp-25f);
  rf = reduceStep(rf, k, -0x1.ee59dap-50f);
  float z = rf * rf;
  float ps = -1.9515295891e-4f;
  ps = ps * z + 8.3321608736e-3f;
  ps = ps * z - 1.6666654611e-1f;
  float s = rf + rf * z * ps;
  float pc = 2.443315711809948e-5f;
  pc = pc * z - 1.388731625493765e-3f;
  pc = pc * z + 4.166664568298827e-2f;
  float c = 1.0f - 0.5f * z + z * z * pc;
  // sin r, cos r, -sin r, -cos r in quadrants 0 to 3 (sinCosReduced).
  uint32_t odd = 0u - (q & 1u);
  uint32_t v = (bitsOf(c) & odd) | (bitsOf(s) & ~odd);
  float result = floatOf(v ^ ((q & 2u) << 30));
  return cosine ? result : gradc::select(x == 0.0f, x, result);
}

/// sin x or cos x of an f32: sinCosSmall below 2^20, sinCosAny above
/// (and for inf and NaN).
GRADC_MATH_INLINE float sinCos(float x, bool cosine) {
  return gradc::select(std::fabs(x) < smallTrigBound, sinCosSmall(x, cosine),
                       sinCosAny(x, cosine));
}

/// log2 a in double for a finite a > 0: a = 2^e m with m in [sqrt(1/2),
/// sqrt(2)) and ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716,
/// as the series 2 (s + s^3/3 + ... + s^19/19) (next term below 2^-52).
GRADC_MATH_INLINE double log2Positive(double a) {
  uint64_t offset = bitsOf(a) - 0x3fe6a09e667f3bcdull; // bits of sqrt(1/2)
  // e = offset >> 52 (arithmetic) as a double, from bits: flipping the
  // sign bit makes the shift logical with e + 2048 in [0, 4095], which
  // as the low bits of 2^52 is exact. (AVX2 has neither a 64-bit
  // arithmetic shift nor int64-to-double conversion in vectors.)
  double ed = doubleOf(((offset ^ 0x8000000000000000ull) >> 52) |
                       0x4330000000000000ull) -
              4503599627372544.0; // 2^52 + 2048
  double m = doubleOf((offset & 0x000fffffffffffffull) + 0x3fe6a09e667f3bcdull);
  double s = (m - 1.0) / (m + 1.0);
  double z = s * s;
  double p = 1.0 / 19;
  p = p * z + 1.0 / 17;
  p = p * z + 1.0 / 15;
  p = p * z + 1.0 / 13;
  p = p * z + 1.0 / 11;
  p = p * z + 1.0 / 9;
  p = p * z + 1.0 / 7;
  p = p * z + 1.0 / 5;
  p = p * z + 1.0 / 3;
  double lnM = 2.0 * (s + s * z * p);
  return ed + lnM * 1.4426950408889634; // 1/ln 2
}

/// 2^z in double for z in [-200, 200]: z = n + r, |r| <= 1/2, 2^r =
/// e^(r ln 2) by its Taylor series to degree 12 (next term below 2^-50),
/// scaled by 2^n built from its bits.
GRADC_MATH_INLINE double exp2Bounded(double z) {
  double t = z + 6755399441055744.0; // 1.5 * 2^52
  double n = t - 6755399441055744.0;
  double w = (z - n) * 0.6931471805599453;
  double p = 1.0 / 479001600; // 1/12!
  p = p * w + 1.0 / 39916800;
  p = p * w + 1.0 / 3628800;
  p = p * w + 1.0 / 362880;
  p = p * w + 1.0 / 40320;
  p = p * w + 1.0 / 5040;
  p = p * w + 1.0 / 720;
  p = p * w + 1.0 / 120;
  p = p * w + 1.0 / 24;
  p = p * w + 1.0 / 6;
  p = p * w + 0.5;
  p = p * w + 1.0;
  p = p * w + 1.0;
  // 2^n: n's two's complement is in the low bits of t, and the bits of
  // t - 1.5 * 2^52 + 1023 are n's biased exponent.
  return p * doubleOf((bitsOf(t) - 0x4338000000000000ull + 1023) << 52);
}

} // namespace detail

/// sin x; at most 1.6 ulp below 2^20, 0.5 ulp plus the double rounding
/// of a result computed in double above (measured over every f32:
/// docs/Math.md). NaN for inf and NaN; sin(-0) = -0.
GRADC_MATH_INLINE float sin(float x) { return detail::sinCos(x, false); }

/// cos x; as sin.
GRADC_MATH_INLINE float cos(float x) { return detail::sinCos(x, true); }

/// sin x for |x| < 2^20 (detail::smallTrigBound), bit for bit; sets
/// `outOfRange` to 1 for any other x (inf and NaN too), whose result is
/// then meaningless. The generated code runs a function whose sin and cos
/// all take this path first, and again with sin when one was out of range
/// (docs/Loops.md, "Range versions"): sin computes both paths, this one
/// about a seventh of it.
GRADC_MATH_INLINE float sinSmall(float x, int32_t &outOfRange) {
  outOfRange |= !(std::fabs(x) < detail::smallTrigBound);
  return detail::sinCosSmall(x, false);
}

/// cos x for |x| < 2^20; as sinSmall.
GRADC_MATH_INLINE float cosSmall(float x, int32_t &outOfRange) {
  outOfRange |= !(std::fabs(x) < detail::smallTrigBound);
  return detail::sinCosSmall(x, true);
}

/// atan x, computed in double; as sin (docs/Math.md). atan(+-inf) =
/// +-pi/2 rounded, atan(-0) = -0, NaN propagated.
GRADC_MATH_INLINE float atan(float x) {
  // |x| > 1: atan |x| = pi/2 - atan(1/|x|). t > tan(pi/8): atan t = pi/4 +
  // atan((t - 1) / (t + 1)). Then |u| <= tan(pi/8) = 0.4142 and atan u =
  // u - u^3/3 + ... - u^31/31 (next term below 2^-42 relative).
  double a = std::fabs(static_cast<double>(x));
  bool invert = a > 1.0;
  double t = gradc::select(invert, 1.0 / a, a);
  bool shift = t > 0.41421356237309503;
  double u = gradc::select(shift, (t - 1.0) / (t + 1.0), t);
  double z = u * u;
  double p = -1.0 / 31;
  p = p * z + 1.0 / 29;
  p = p * z - 1.0 / 27;
  p = p * z + 1.0 / 25;
  p = p * z - 1.0 / 23;
  p = p * z + 1.0 / 21;
  p = p * z - 1.0 / 19;
  p = p * z + 1.0 / 17;
  p = p * z - 1.0 / 15;
  p = p * z + 1.0 / 13;
  p = p * z - 1.0 / 11;
  p = p * z + 1.0 / 9;
  p = p * z - 1.0 / 7;
  p = p * z + 1.0 / 5;
  p = p * z - 1.0 / 3;
  double v = u + u * z * p;
  v = v + gradc::select(shift, 0.78539816339744831, 0.0);
  v = gradc::select(invert, 1.5707963267948966 - v, v);
  float result = static_cast<float>(v);
  // The sign of x (-0 stays -0); NaN flows through as NaN.
  return std::copysign(result, x);
}

/// x^y, computed as 2^(y log2 |x|) in double; at most 0.5 ulp plus the
/// double rounding (measured on a dense sample of pairs: docs/Math.md).
/// The special values of C99's pow: x^0 = 1 and 1^y = 1 even for NaN,
/// (-1)^(+-inf) = 1, a negative finite x with a non-integer y is NaN, the
/// sign of an odd integer power of a negative x (or -0) is kept.
GRADC_MATH_INLINE float pow(float x, float y) {
  float ax = std::fabs(x);
  double yd = static_cast<double>(y);
  // log2 |x|: -inf at 0, +inf at inf, NaN for NaN.
  double axd = static_cast<double>(ax);
  bool normal = (ax > 0.0f) & (ax <= std::numeric_limits<float>::max());
  double l = detail::log2Positive(gradc::select(normal, axd, 1.0));
  const double inf = std::numeric_limits<double>::infinity();
  l = gradc::select(ax == 0.0f, -inf, l);
  l = gradc::select(ax > std::numeric_limits<float>::max(), inf, l);
  l = gradc::select(ax != ax, axd, l);
  double z = yd * l;
  // Clamped, 2^z is 0 or inf in f32 beyond the bounds; NaN is kept apart
  // so that the conversion to an integer in exp2Bounded sees a number.
  double zc = gradc::select(z > 200.0, 200.0, z);
  zc = gradc::select(z < -200.0, -200.0, zc);
  zc = gradc::select(z != z, 0.0, zc);
  double magnitude = detail::exp2Bounded(zc);
  magnitude = gradc::select(z != z, z, magnitude);
  // Odd integer y: it has no fraction and half of it has one (every f32
  // from 2^24 up, and inf, is even).
  bool integer = detail::roundToInt(yd) == yd;
  double half = yd * 0.5;
  bool odd = integer & (detail::roundToInt(half) != half);
  bool negative = static_cast<int32_t>(detail::bitsOf(x)) < 0;
  double v = gradc::select(negative & odd, -magnitude, magnitude);
  float result = static_cast<float>(v);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  result =
      gradc::select((x < 0.0f) & (ax <= std::numeric_limits<float>::max()) &
                        !integer & (y == y),
                    nan, result);
  // x^2 is x * x, rounded once, as generated code computes a constant
  // square (2^(2 log2 |x|) in double can round the other way where x^2 is
  // halfway between two floats).
  result = gradc::select(y == 2.0f, x * x, result);
  bool one =
      (y == 0.0f) | (x == 1.0f) |
      ((ax == 1.0f) & (std::fabs(y) == std::numeric_limits<float>::infinity()));
  return gradc::select(one, 1.0f, result);
}

inline double exp(double x) { return std::exp(x); }
inline double log(double x) { return std::log(x); }
inline double tanh(double x) { return std::tanh(x); }
/// As the interpreter and the LLVM backend: e / (1 + e) or 1 / (1 + e).
inline double sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  return (x < 0.0 ? e : 1.0) / (1.0 + e);
}
inline double softplus(double x) {
  return (x > 0.0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x)));
}
inline double sin(double x) { return std::sin(x); }
inline double cos(double x) { return std::cos(x); }
inline double atan(double x) { return std::atan(x); }
inline double pow(double x, double y) { return std::pow(x, y); }

} // namespace gradc

#ifdef __clang__
#pragma float_control(pop)
#endif

#endif // GRADC_MATH_H
