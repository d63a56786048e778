// Calls par_grad of test/Runtime/Inputs/parallel.grad, printed by both
// loop-IR printers (modules par_cpp and par_llvm), on fixed pseudo-random
// inputs, and prints every gradient element's bits, so that two runs (one
// thread, two threads: GRADC_NUM_THREADS) compare bit for bit. This
// program defines GOMP_parallel itself, counting the teams of more than
// one thread before it calls libgomp's, and prints the count of each
// module's call (stderr), so that a test sees that threads ran
// (test/Runtime/parallel-bitwise.test).
#include "par_cpp.h"
#include "par_llvm.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#ifndef GRADC_SERIAL_TEST
#include <dlfcn.h>
#endif
#include <vector>

static int teams = 0;

// GRADC_SERIAL_TEST: a program without OpenMP, whose GOMP_parallel the
// LLVM module finds null.
#ifndef GRADC_SERIAL_TEST
extern "C" void GOMP_parallel(void (*fn)(void *), void *data,
                              unsigned threads, unsigned flags) {
  using Real = void (*)(void (*)(void *), void *, unsigned, unsigned);
  static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "GOMP_parallel"));
  if (threads > 1)
    ++teams;
  real(fn, data, threads, flags);
}
#endif

namespace {

uint64_t state = 20261202;
float next() {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return static_cast<float>((state >> 40) % 4001) / 1000.0f - 2.0f;
}

void print(const char *name, const std::vector<float> &v) {
  std::printf("%s", name);
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    std::printf(" %08" PRIx32, bits);
  }
  std::printf("\n");
}

} // namespace

int main() {
  const int64_t R = 203, C = 301;
  std::vector<float> x(R * C), gamma(C), w(C * R);
  for (float &f : x)
    f = next();
  for (float &f : gamma)
    f = 1.0f + next() / 4;
  for (float &f : w)
    f = next();
  using Fn = int (*)(int64_t, int64_t, const float *, const float *,
                     const float *, float *, float *, float *);
  const Fn fns[] = {par_cpp_par_grad, par_llvm_par_grad};
  const char *names[] = {"cpp", "llvm"};
  // The second time one element near the end, in the last thread's chunk,
  // is beyond the small sin's range: that thread's flag must send the
  // call to the second copy, whose bits are those of one thread.
  for (int m = 0; m < 4; ++m) {
    if (m == 2)
      x[(R - 3) * C + 7] = 3.0e6f;
    std::vector<float> dx(R * C), dgamma(C), dw(C * R);
    teams = 0;
    int status = fns[m % 2](R, C, x.data(), gamma.data(), w.data(), dx.data(),
                            dgamma.data(), dw.data());
    std::printf("%s status %d\n", names[m % 2], status);
    std::fprintf(stderr, "%s teams %d\n", names[m % 2], teams);
    print("dx", dx);
    print("dgamma", dgamma);
    print("dw", dw);
    using Waves = int (*)(int64_t, int64_t, const float *, float *);
    const Waves waves[] = {par_cpp_waves_grad, par_llvm_waves_grad};
    teams = 0;
    status = waves[m % 2](R, C, x.data(), dx.data());
    std::printf("%s waves status %d\n", names[m % 2], status);
    std::fprintf(stderr, "%s waves teams %d\n", names[m % 2], teams);
    print("waves dx", dx);
  }
}
