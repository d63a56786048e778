// Checks the runtime's kernels against naive references: matmul for every
// transpose combination and sizes that hit the register-blocked path, its
// edges, the narrow path (n < 16) and several cache panels (f32, f64, wrapping i32),
// bit for bit against one accumulator per element in increasing p, and the f32
// math functions against libm in double at sampled points and at special
// values. Prints one line per family; used by cpp-kernels.test.
#include "gradc/Runtime.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

unsigned seed = 12345;
double next() {
  seed = seed * 1664525u + 1013904223u;
  return (seed >> 8) / 16777216.0 - 0.5;
}

template <typename T> T value() {
  if constexpr (std::is_same_v<T, int32_t>)
    return static_cast<int32_t>(next() * 2e9); // products wrap
  else
    return static_cast<T>(next());
}

/// The kernels in one order: gradc::matmul (f64 sums of f32 products) or,
/// with F32Order, gradc::matmulF32 (f32 sums, docs/IR.md "The second
/// order"). With `accumulate` (gradc::matmul only), c starts with values
/// that each element's sum starts from; without, c starts with garbage
/// that the product overwrites.
template <typename T, bool F32Order = false>
bool checkMatmul(int64_t m, int64_t n, int64_t k, bool accumulate = false) {
  bool ok = true;
  for (int t = 0; t < 4; ++t) {
    gradc::Transpose ta = gradc::Transpose(t & 1), tb = gradc::Transpose(t >> 1);
    std::vector<T> a(m * k), b(k * n), c(m * n + 1), want(m * n + 1);
    for (T &v : a)
      v = value<T>();
    for (T &v : b)
      v = value<T>();
    for (int64_t e = 0; e < m * n; ++e)
      c[e] = value<T>();
    c[m * n] = want[m * n] = T(7); // a canary after the end
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        using Acc =
            std::conditional_t<F32Order, float,
                               typename gradc::detail::Accumulator<T>::type>;
        Acc s = accumulate ? static_cast<Acc>(c[i * n + j]) : Acc(0);
        for (int64_t p = 0; p < k; ++p)
          s += static_cast<Acc>(ta ? a[p * m + i] : a[i * k + p]) *
               static_cast<Acc>(tb ? b[j * k + p] : b[p * n + j]);
        want[i * n + j] = static_cast<T>(s);
      }
    if constexpr (F32Order)
      gradc::matmulF32(a.data(), ta, b.data(), tb, c.data(), m, n, k);
    else
      gradc::matmul(a.data(), ta, b.data(), tb, c.data(), m, n, k,
                    accumulate);
    // Bit for bit: each element adds its terms in increasing p in one
    // accumulator (f64 for f32 data) and rounds once (docs/IR.md).
    for (int64_t i = 0; i <= m * n; ++i)
      if (std::memcmp(&c[i], &want[i], sizeof(T)) != 0)
        ok = false;
  }
  return ok;
}

template <typename T, bool F32Order = false> bool checkAllSizes() {
  const int64_t sizes[][3] = {{0, 3, 2},  {3, 0, 2},   {2, 3, 0},
                              {1, 1, 1},  {4, 16, 1},  {5, 17, 3},
                              {8, 32, 64}, {9, 130, 70}, {33, 1, 65},
                              {1, 40, 129}, {70, 20, 5},
                              // fewer than 16 columns (matmulNarrow): blocks
                              // of 16 rows, leftover rows, several k panels
                              {200, 2, 64}, {64, 2, 200}, {35, 15, 130},
                              // fewer than 4 rows (register blocks of 1 to
                              // 3 rows, then the column edge)
                              {2, 64, 200}, {3, 37, 20}, {1, 17, 9},
                              // a short k (matmulShortK), rows longer than
                              // its chunk of 256
                              {200, 64, 2}, {5, 300, 3}, {3, 16, 8},
                              // 9 to 15 columns of b as stored, in f32
                              // sums (matmulRowVectors): GMM's products
                              // (N x D x D, and D x D x N transposed: one
                              // block of 12 rows), blocks of 8 rows and
                              // the last rows stored one by one
                              {1000, 10, 10}, {10, 10, 1000}, {40, 12, 300},
                              {27, 9, 260}, {3, 15, 500}, {16, 11, 150}};
  bool ok = true;
  for (const auto &s : sizes)
    ok &= checkMatmul<T, F32Order>(s[0], s[1], s[2]);
  // The narrow kernel's paths: 1 to 15 columns (and the first two that are
  // not narrow), taken 8 at a time; blocks of 64, 32, 16 and 8 rows and
  // the rows after the last 8; k below, at and past the 8 x 8 transposes,
  // with a tail. In f32 sums, b as stored with 9 to 15 columns takes
  // matmulRowVectors: one block of 12 rows for 9 to 12, else blocks of 8,
  // the last rows stored one by one, b's last row from a padded copy.
  for (int64_t n = 1; n <= 17; ++n)
    for (int64_t m : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 130})
      for (int64_t k : {1, 5, 8, 9, 17, 70}) {
        ok &= checkMatmul<T, F32Order>(m, n, k);
        // Sums that start from c's values (gradc::matmul's accumulate).
        if (!F32Order && (m + n + k) % 3 == 0)
          ok &= checkMatmul<T>(m, n, k, true);
      }
  // A short k (matmulShortK's blocks of 16 columns and their rest) and a
  // few rows (panelLastRows on b as stored).
  for (int64_t m : {1, 2, 3, 5})
    for (int64_t n : {16, 17, 33, 64})
      for (int64_t k : {1, 2, 8, 9, 40}) {
        ok &= checkMatmul<T, F32Order>(m, n, k);
        if (!F32Order)
          ok &= checkMatmul<T>(m, n, k, true);
      }
  return ok;
}

double ulps(float got, double want) {
  float rounded = static_cast<float>(want);
  if (std::isnan(want))
    return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(rounded) || std::isinf(got))
    return rounded == got ? 0 : 1e9;
  int e;
  std::frexp(rounded == 0 ? 1e-45f : rounded, &e);
  double ulp = std::max(std::ldexp(1.0, e - 24), std::ldexp(1.0, -149));
  return std::fabs(double(got) - want) / ulp;
}

template <typename F, typename R>
void checkMath(const char *name, F f, R ref, double bound) {
  const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, -1e-30f,
                           1e-45f, 88.7f, 89.0f, -103.0f, -104.5f, 1e30f,
                           -1e30f, INFINITY, -INFINITY, NAN};
  double worst = 0;
  for (float x : special)
    worst = std::max(worst, ulps(f(x), ref(double(x))));
  for (int i = 0; i < 200000; ++i) {
    float x = static_cast<float>(next() * 60.0);
    worst = std::max(worst, ulps(f(x), ref(double(x))));
  }
  std::printf("%s %s\n", name, worst <= bound ? "ok" : "FAIL");
  if (worst > bound)
    std::printf("  worst %.3f ulp\n", worst);
}

/// pow on a grid of bases (both signs, tiny to huge) and exponents
/// (integers, halves, random), within its bound, and C99's special cases.
void checkPow() {
  double worst = 0;
  const float ys[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, 3.0f, -3.0f, 0.5f,
                      -0.5f, 1.5f, 10.0f, -17.0f, 100.0f, 0.1f, 1e-45f,
                      16777216.0f, INFINITY, -INFINITY, NAN};
  for (int i = 0; i < 20000; ++i) {
    float x = static_cast<float>(std::ldexp(next() + 0.5, int(next() * 200)));
    float y = static_cast<float>(next() * 80.0);
    worst = std::max(worst, ulps(gradc::pow(x, y), std::pow(double(x), double(y))));
    for (float yy : ys)
      for (float xx : {x, -x})
        worst = std::max(worst, ulps(gradc::pow(xx, yy),
                                     std::pow(double(xx), double(yy))));
  }
  const float xs[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f,
                      1e-45f, -1e-45f, 3e38f, INFINITY, -INFINITY, NAN};
  for (float x : xs)
    for (float y : ys)
      worst = std::max(worst, ulps(gradc::pow(x, y),
                                   std::pow(double(x), double(y))));
  std::printf("pow %s\n", worst <= 0.501 ? "ok" : "FAIL");
  if (worst > 0.501)
    std::printf("  worst %.3f ulp\n", worst);
}

/// Signs of zeros and results at inf and NaN, which ulps() does not see.
void checkSpecialValues() {
  auto same = [](float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b);
  };
  bool ok = same(gradc::sin(-0.0f), -0.0f) && same(gradc::sin(0.0f), 0.0f) &&
            same(gradc::cos(-0.0f), 1.0f) && std::isnan(gradc::sin(INFINITY)) &&
            std::isnan(gradc::cos(-INFINITY)) && std::isnan(gradc::sin(NAN)) &&
            same(gradc::sin(1e-45f), 1e-45f) && same(gradc::atan(-0.0f), -0.0f) &&
            same(gradc::atan(INFINITY), float(M_PI / 2)) &&
            same(gradc::atan(-INFINITY), -float(M_PI / 2)) &&
            std::isnan(gradc::atan(NAN)) && same(gradc::pow(-0.0f, 3.0f), -0.0f) &&
            same(gradc::pow(-0.0f, -3.0f), -INFINITY) &&
            same(gradc::pow(0.0f, -2.0f), INFINITY) &&
            same(gradc::pow(-INFINITY, -3.0f), -0.0f) &&
            same(gradc::pow(-INFINITY, 0.5f), INFINITY) &&
            std::isnan(gradc::pow(-2.0f, 0.5f)) && same(gradc::pow(1.0f, NAN), 1.0f) &&
            same(gradc::pow(NAN, 0.0f), 1.0f) && same(gradc::pow(-1.0f, INFINITY), 1.0f) &&
            same(gradc::pow(10.0f, 39.0f), INFINITY) &&
            same(gradc::pow(10.0f, -46.0f), 0.0f) &&
            same(gradc::pow(2.0f, -149.0f), 1e-45f) && same(gradc::pow(3.0f, 2.0f), 9.0f);
  std::printf("special values %s\n", ok ? "ok" : "FAIL");
}

} // namespace

int main() {
  std::printf("matmul f32 %s\n", checkAllSizes<float>() ? "ok" : "FAIL");
  std::printf("matmul f32 in f32 %s\n",
              checkAllSizes<float, true>() ? "ok" : "FAIL");
  std::printf("matmul f64 %s\n", checkAllSizes<double>() ? "ok" : "FAIL");
  std::printf("matmul i32 %s\n", checkAllSizes<int32_t>() ? "ok" : "FAIL");
  auto positive = [](double x) { return x < 0 ? NAN : std::log(x); };
  checkMath("exp", [](float x) { return gradc::exp(x); },
            [](double x) { return std::exp(x); }, 1.1);
  checkMath("log", [](float x) { return gradc::log(std::fabs(x)); },
            [&](double x) { return positive(std::fabs(x)); }, 1.0);
  checkMath("log-negative", [](float x) { return gradc::log(-std::fabs(x) - 1); },
            [](double) { return double(NAN); }, 0);
  checkMath("tanh", [](float x) { return gradc::tanh(x); },
            [](double x) { return std::tanh(x); }, 1.5);
  checkMath("sigmoid", [](float x) { return gradc::sigmoid(x); },
            [](double x) { return 1 / (1 + std::exp(-x)); }, 2.5);
  checkMath("softplus", [](float x) { return gradc::softplus(x); },
            [](double x) {
              return x > 0 ? x + std::log1p(std::exp(-x))
                           : std::log1p(std::exp(x));
            },
            3.0);
  // Bounds of docs/Math.md (measured over every f32) rounded up; the
  // points reach the large-argument reduction (|x| up to 2^127).
  // sin and cos: 1.59 below 2^20 (the Cody-Waite path), 0.501 above (the
  // exact reduction: the -large checks).
  checkMath("sin", [](float x) { return gradc::sin(x); },
            [](double x) { return std::sin(x); }, 1.59);
  checkMath("cos", [](float x) { return gradc::cos(x); },
            [](double x) { return std::cos(x); }, 1.59);
  checkMath("sin-large", [](float x) { return gradc::sin(std::ldexp(x, 100)); },
            [](double x) { return std::sin(std::ldexp(double(float(x)), 100)); },
            0.501);
  checkMath("cos-large", [](float x) { return gradc::cos(std::ldexp(x, 60)); },
            [](double x) { return std::cos(std::ldexp(double(float(x)), 60)); },
            0.501);
  checkMath("atan", [](float x) { return gradc::atan(x); },
            [](double x) { return std::atan(x); }, 0.501);
  checkPow();
  checkSpecialValues();
  return 0;
}
