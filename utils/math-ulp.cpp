//===- math-ulp.cpp - Measures the error of gradc/Math.h's f32 functions --===//
//
// The program behind the bounds in docs/Math.md, run by hand (hours of CPU
// for the exhaustive runs; CI checks a fixed sample in
// test/Runtime/cpp-kernels.test):
//
//   g++ -std=c++17 -O2 -pthread -I runtime/include utils/math-ulp.cpp
//       -o /tmp/math-ulp   (one line)
//   /tmp/math-ulp sin [THREADS]          every one of the 2^32 f32 inputs
//   /tmp/math-ulp pow [THREADS] [STRIDE] the dense 2-D sample of pow
//   /tmp/math-ulp small-trig [THREADS]   sinSmall/cosSmall against sin/cos
//   /tmp/math-ulp reduce-step [THREADS]  sin/cos's reduction against std::fma
//
// The reference is double-precision libm (glibc's is correctly rounded in
// practice for these), the error is in ulp of the correctly rounded f32
// result, and a result that differs at a special value (NaN, inf, a zero
// of the wrong sign) counts as an error of 1e9. Prints the largest error
// and the input where it occurs.
//
// small-trig compares the small-argument sin and cos (the fast path of the
// generated code) with sin and cos bit for bit, for every f32 below
// detail::smallTrigBound in magnitude, and checks that they flag every
// other f32; prints the number of mismatches (0: the paths agree).
//
// reduce-step checks that detail::reduceStep rounds each step of the
// reduction of sin and cos once, as std::fma does, for every f32 below
// smallTrigBound. Build it without FMA (the default x86-64): reduceStep is
// then the emulation in double that the interpreter uses, std::fma is
// libm's fmaf, and 0 mismatches means that every backend's sin and cos
// agree (with FMA, reduceStep is std::fma itself). Minutes per thread.
//
// pow's sample: x runs over every STRIDE-th f32 bit pattern (default
// 4093, about a million x, both signs, subnormals to inf and NaN) and y
// over 2,000 values: the integers -64..64, the halves and quarters of
// -16..16, 0.5-spaced and random values in [-200, 200] and the specials.
//
//===----------------------------------------------------------------------===//

#include "gradc/Math.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

double ulps(float got, double want) {
  if (std::isnan(want))
    return std::isnan(got) ? 0 : 1e9;
  float rounded = static_cast<float>(want);
  if (std::isinf(rounded) || std::isinf(got))
    return rounded == got ? 0 : 1e9;
  if (want == 0)
    return got == 0 && std::signbit(got) == std::signbit(want)
               ? 0
               : (got == 0 ? 1e9 : std::fabs(got) / std::ldexp(1.0, -149));
  int e;
  std::frexp(rounded == 0 ? 1e-45f : rounded, &e);
  double ulp = std::max(std::ldexp(1.0, e - 24), std::ldexp(1.0, -149));
  return std::fabs(double(got) - want) / ulp;
}

float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

struct Worst {
  double error = 0;
  float x = 0, y = 0;
  void update(double e, float xv, float yv = 0) {
    if (e > error) {
      error = e;
      x = xv;
      y = yv;
    }
  }
};

using Unary = float (*)(float);
using Reference = double (*)(double);

struct UnaryFunction {
  const char *name;
  Unary f;
  Reference ref;
};

double sigmoidRef(double x) { return 1 / (1 + std::exp(-x)); }
double softplusRef(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

const UnaryFunction unaryFunctions[] = {
    {"exp", [](float x) { return gradc::exp(x); },
     [](double x) { return std::exp(x); }},
    {"log", [](float x) { return gradc::log(x); },
     [](double x) { return std::log(x); }},
    {"tanh", [](float x) { return gradc::tanh(x); },
     [](double x) { return std::tanh(x); }},
    {"sigmoid", [](float x) { return gradc::sigmoid(x); }, sigmoidRef},
    {"softplus", [](float x) { return gradc::softplus(x); }, softplusRef},
    {"sin", [](float x) { return gradc::sin(x); },
     [](double x) { return std::sin(x); }},
    {"cos", [](float x) { return gradc::cos(x); },
     [](double x) { return std::cos(x); }},
    {"atan", [](float x) { return gradc::atan(x); },
     [](double x) { return std::atan(x); }},
};

Worst exhaustive(const UnaryFunction &fn, int threads) {
  std::vector<Worst> worst(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (uint64_t u = t; u < (uint64_t(1) << 32); u += threads) {
        float x = floatOf(static_cast<uint32_t>(u));
        worst[t].update(ulps(fn.f(x), fn.ref(double(x))), x);
      }
    });
  for (std::thread &th : pool)
    th.join();
  Worst all;
  for (const Worst &w : worst)
    all.update(w.error, w.x);
  return all;
}

std::vector<float> powExponents() {
  std::vector<float> ys;
  for (int i = -64; i <= 64; ++i)
    ys.push_back(float(i));
  for (int i = -64; i <= 64; ++i)
    ys.push_back(i / 4.0f);
  for (int i = -400; i <= 400; ++i)
    ys.push_back(i / 2.0f + 0.25f);
  unsigned seed = 12345;
  while (ys.size() < 1990) {
    seed = seed * 1664525u + 1013904223u;
    ys.push_back(((seed >> 8) / 16777216.0f - 0.5f) * 400.0f);
  }
  for (float y : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3e38f, -3e38f,
                  16777215.0f, 16777216.0f})
    ys.push_back(y);
  return ys;
}

Worst powSample(int threads, uint32_t stride) {
  std::vector<float> ys = powExponents();
  std::vector<Worst> worst(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (uint64_t u = uint64_t(t) * stride; u < (uint64_t(1) << 32);
           u += uint64_t(threads) * stride) {
        float x = floatOf(static_cast<uint32_t>(u));
        for (float y : ys)
          worst[t].update(
              ulps(gradc::pow(x, y), std::pow(double(x), double(y))), x, y);
      }
    });
  for (std::thread &th : pool)
    th.join();
  Worst all;
  for (const Worst &w : worst)
    all.update(w.error, w.x, w.y);
  return all;
}

/// How many of the bit patterns [0, end) `fails` is true for, on
/// `threads` threads.
template <typename F>
uint64_t countFailures(int threads, uint64_t end, F fails) {
  std::vector<uint64_t> bad(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (uint64_t u = t; u < end; u += threads)
        bad[t] += fails(static_cast<uint32_t>(u));
    });
  for (std::thread &th : pool)
    th.join();
  uint64_t all = 0;
  for (uint64_t b : bad)
    all += b;
  return all;
}

/// Mismatches between the small-argument and the general sin and cos.
uint64_t smallTrigMismatches(int threads) {
  return countFailures(threads, uint64_t(1) << 32, [](uint32_t u) {
    float x = floatOf(u);
    int32_t flag = 0;
    float s = gradc::sinSmall(x, flag), c = gradc::cosSmall(x, flag);
    bool small = std::fabs(x) < gradc::detail::smallTrigBound;
    using gradc::detail::bitsOf;
    return flag != !small || (small && (bitsOf(s) != bitsOf(gradc::sin(x)) ||
                                        bitsOf(c) != bitsOf(gradc::cos(x))));
  });
}

/// Mismatches between detail::reduceStep as this program was compiled
/// (an FMA with -mfma or -march=haswell and later; without, the emulation
/// in double) and std::fma, which is correctly rounded either way (libm's
/// fmaf where the target has no FMA): every step of sinCosSmall's
/// reduction, for every f32 below smallTrigBound in magnitude.
uint64_t reduceStepMismatches(int threads) {
  using gradc::detail::bitsOf;
  using gradc::detail::reduceStep;
  // The parts of pi/2 and the shifter of sinCosSmall.
  const float shifter = 12582912.0f, twoOverPi = -0x1.45f306p-1f;
  const float parts[3] = {0x1.921fb6p+0f, -0x1.777a5cp-25f, -0x1.ee59dap-50f};
  auto exact = [](float a, float k, float p) { return std::fma(-k, p, a); };
  auto stepsDiffer = [&](float x) {
    float t = reduceStep(shifter, x, twoOverPi);
    bool differ = bitsOf(t) != bitsOf(exact(shifter, x, twoOverPi));
    float k = t - shifter, r = x;
    for (float p : parts) {
      float next = reduceStep(r, k, p);
      differ |= bitsOf(next) != bitsOf(exact(r, k, p));
      r = next;
    }
    return differ;
  };
  // Both signs of every magnitude below the bound.
  return countFailures(
      threads, bitsOf(gradc::detail::smallTrigBound), [&](uint32_t u) {
        return stepsDiffer(floatOf(u)) + stepsDiffer(floatOf(u | 0x80000000u));
      });
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: math-ulp FUNCTION [THREADS] [STRIDE]\n");
    return 2;
  }
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  if (std::strcmp(argv[1], "pow") == 0) {
    uint32_t stride = argc > 3 ? std::atoi(argv[3]) : 4093;
    Worst w = powSample(threads, stride);
    std::printf("pow: max %.4f ulp at x = %a, y = %a\n", w.error, w.x, w.y);
    return 0;
  }
  if (std::strcmp(argv[1], "reduce-step") == 0) {
    uint64_t bad = reduceStepMismatches(threads);
    std::printf("reduce-step: %llu mismatches\n", (unsigned long long)bad);
    return bad != 0;
  }
  if (std::strcmp(argv[1], "small-trig") == 0) {
    uint64_t bad = smallTrigMismatches(threads);
    std::printf("small-trig: %llu mismatches\n", (unsigned long long)bad);
    return bad != 0;
  }
  for (const UnaryFunction &fn : unaryFunctions)
    if (std::strcmp(argv[1], fn.name) == 0) {
      Worst w = exhaustive(fn, threads);
      std::printf("%s: max %.4f ulp at x = %a\n", fn.name, w.error, w.x);
      return 0;
    }
  std::fprintf(stderr, "math-ulp: unknown function '%s'\n", argv[1]);
  return 2;
}
