// Every f32 function of gradc/Math.h vectorises in a loop, under GCC and
// Clang, where the generated C++ calls it (docs/Math.md, "How the
// functions are written"): one loop per function, and each loop must be
// reported vectorised. Compiled for fixed targets (AVX2 + FMA, AVX-512,
// and Clang's x86-64 default at -O2), so the result does not depend on
// the machine; -ffp-contract=off as docs/Math.md asks of g++.
// REQUIRES: g++-12, clang++-19
// RUN: g++-12 -std=c++17 -O3 -march=haswell -ffp-contract=off -I %runtime -c %s -o /dev/null -fopt-info-vec-optimized 2>&1 | FileCheck %s --check-prefix=GCC
// RUN: g++-12 -std=c++17 -O3 -march=x86-64-v4 -ffp-contract=off -I %runtime -c %s -o /dev/null -fopt-info-vec-optimized 2>&1 | FileCheck %s --check-prefix=GCC
// RUN: g++-12 -std=c++17 -O3 -march=x86-64-v2 -I %runtime -c %s -o /dev/null -fopt-info-vec-optimized 2>&1 | FileCheck %s --check-prefix=GCC
// RUN: clang++-19 -std=c++17 -O3 -march=haswell -I %runtime -c %s -o /dev/null -Rpass=loop-vectorize 2>&1 | FileCheck %s --check-prefix=CLANG
// RUN: clang++-19 -std=c++17 -O3 -march=x86-64-v4 -I %runtime -c %s -o /dev/null -Rpass=loop-vectorize 2>&1 | FileCheck %s --check-prefix=CLANG
// RUN: clang++-19 -std=c++17 -O2 -I %runtime -c %s -o /dev/null -Rpass=loop-vectorize 2>&1 | FileCheck %s --check-prefix=CLANG

#include "gradc/Math.h"

#define R __restrict

void loopExp(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::exp(x[i]);
}

void loopLog(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::log(x[i]);
}

void loopTanh(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::tanh(x[i]);
}

void loopSigmoid(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::sigmoid(x[i]);
}

void loopSoftplus(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::softplus(x[i]);
}

void loopSin(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::sin(x[i]);
}

void loopCos(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::cos(x[i]);
}

void loopAtan(const float *R x, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::atan(x[i]);
}

void loopPow(const float *R x, const float *R z, float *R y, long n) {
  // GCC-DAG: math-vectorize.cpp:[[@LINE+2]]:{{[0-9]+}}: optimized: loop vectorized
  // CLANG-DAG: math-vectorize.cpp:[[@LINE+1]]:{{[0-9]+}}: remark: vectorized loop
  for (long i = 0; i < n; ++i)
    y[i] = gradc::pow(x[i], z[i]);
}
