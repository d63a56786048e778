//===- Rng.h - Deterministic random numbers for the example hosts -*- C++
//-*-===//
//
// The example programs make their data and initial weights from a fixed
// seed, and the tests check what they print, so the numbers must be the
// same with every compiler and standard library. std::mt19937 is, but the
// std:: distributions are not specified exactly; this is SplitMix64 with
// its own uniform and Gaussian (Box-Muller) draws, which are.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EXAMPLES_RNG_H
#define GRADC_EXAMPLES_RNG_H

#include <cmath>
#include <cstdint>

namespace examples {

class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed) {}

  /// The next 64 random bits (SplitMix64).
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1), from the top 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
  /// Standard normal (Box-Muller; 1 - uniform() is never 0).
  double normal() {
    const double pi = 3.14159265358979323846;
    double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * pi * v);
  }

private:
  uint64_t state;
};

} // namespace examples

#endif // GRADC_EXAMPLES_RNG_H
