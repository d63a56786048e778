//===- Bench.h - The benchmark harness: inputs, interleaved timing --------===//
//
// Each kernel's harness (bench/kernels/NAME.cpp) links the hand-written
// reference and the gradc C++ and LLVM backends' code of one kernel into
// one process, registers every implementation with a Bench, and calls
// Bench::main. The driver (bench/run.py) has written the inputs as raw
// little-endian arrays beside a manifest; the harness reads them, runs
// every implementation once and writes its value and gradients (for the
// driver to check against PyTorch's f64 ones), then times them all
// round-robin: round r times implementation 1, 2, ..., n in turn, each over
// a batch of calls long enough to time, so that the noise of a shared
// machine falls on all of them alike. It prints one line per
// implementation: its name, then the median and the least time per call
// over the rounds, in nanoseconds.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_BENCH_BENCH_H
#define GRADC_BENCH_BENCH_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace bench {

/// One input array of the kernel, as the driver wrote it.
template <typename T>
std::vector<T> load(const std::string &dir, const std::string &name,
                    size_t count) {
  std::vector<T> data(count);
  std::string path = dir + "/" + name + ".bin";
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f || std::fread(data.data(), sizeof(T), count, f) != count) {
    std::fprintf(stderr, "bench: cannot read %zu values from %s\n", count,
                 path.c_str());
    std::exit(2);
  }
  std::fclose(f);
  return data;
}

/// An implementation to time: `call` runs it once and returns its status
/// (0 for success); `outputs` lists, after one call, the value and then
/// every gradient, in the order of the driver's reference.
struct Impl {
  std::string name;
  std::function<int()> call;
  std::vector<std::pair<const float *, size_t>> outputs;
};

/// What one implementation writes: the value and one array per gradient.
struct Result {
  float value = 0;
  std::vector<std::vector<float>> grads;

  explicit Result(std::vector<size_t> sizes) {
    for (size_t n : sizes)
      grads.emplace_back(n);
  }
  float *operator[](size_t i) { return grads[i].data(); }
  /// The arrays the driver checks: the value if `value`, then the
  /// gradients if `gradients`.
  std::vector<std::pair<const float *, size_t>> outputs(bool value,
                                                        bool gradients) const {
    std::vector<std::pair<const float *, size_t>> r;
    if (value)
      r.push_back({&this->value, 1});
    if (gradients)
      for (const auto &g : grads)
        r.push_back({g.data(), g.size()});
    return r;
  }
};

/// Eight results: hand forward and value+grad, then forward, gradient and
/// value+grad of the C++ backend and of the LLVM backend, in the order the
/// harnesses register them.
inline std::vector<Result> makeResults(std::vector<size_t> sizes) {
  return std::vector<Result>(8, Result(std::move(sizes)));
}

class Bench {
public:
  Bench(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--quick")
        quick = true;
      else if (arg.rfind("--dir=", 0) == 0)
        dir = arg.substr(6);
      else if (arg.rfind("--rounds=", 0) == 0)
        rounds = std::atoi(arg.c_str() + 9);
      else if (arg.rfind("--size=", 0) == 0)
        sizes.push_back(std::atoll(arg.c_str() + 7));
    }
    if (quick)
      rounds = 3;
  }

  /// The i-th `--size=` argument (the kernel's size names, in the order
  /// the driver gives them).
  int64_t size(size_t i) const {
    if (i >= sizes.size()) {
      std::fprintf(stderr, "bench: missing --size=\n");
      std::exit(2);
    }
    return sizes[i];
  }
  const std::string &inputDir() const { return dir; }
  template <typename T> std::vector<T> load(const char *name, size_t count) {
    return bench::load<T>(dir, name, count);
  }

  void add(std::string name, std::function<int()> call,
           std::vector<std::pair<const float *, size_t>> outputs) {
    impls.push_back({std::move(name), std::move(call), std::move(outputs)});
  }

  /// Runs, writes and times every implementation; returns the exit code.
  int run() {
    for (const Impl &impl : impls) {
      if (int status = impl.call()) {
        std::fprintf(stderr, "bench: %s returned status %d\n",
                     impl.name.c_str(), status);
        return 1;
      }
      if (impl.outputs.empty())
        continue;
      std::string path = dir + "/out_" + impl.name + ".bin";
      FILE *f = std::fopen(path.c_str(), "wb");
      if (!f)
        return 1;
      for (auto [data, count] : impl.outputs)
        std::fwrite(data, sizeof(float), count, f);
      std::fclose(f);
    }
    // Calls per sample: enough for about 2 ms (1 call in --quick).
    std::vector<int64_t> calls(impls.size(), 1);
    if (!quick)
      for (size_t i = 0; i < impls.size(); ++i) {
        double once = timeCalls(impls[i], 1);
        for (int warm = 0; warm < 3; ++warm)
          once = std::min(once, timeCalls(impls[i], 1));
        calls[i] = std::max<int64_t>(1, static_cast<int64_t>(2e6 / once));
      }
    std::vector<std::vector<double>> samples(impls.size());
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < impls.size(); ++i)
        samples[i].push_back(timeCalls(impls[i], calls[i]) / calls[i]);
    for (size_t i = 0; i < impls.size(); ++i) {
      std::vector<double> &s = samples[i];
      std::sort(s.begin(), s.end());
      std::printf("%s %.3f %.3f\n", impls[i].name.c_str(), s[s.size() / 2],
                  s[0]);
    }
    return 0;
  }

private:
  /// Nanoseconds for `n` calls.
  static double timeCalls(const Impl &impl, int64_t n) {
    auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i)
      impl.call();
    auto end = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(end - start).count();
  }

  bool quick = false;
  int rounds = 31;
  std::string dir = ".";
  std::vector<int64_t> sizes;
  std::vector<Impl> impls;
};

} // namespace bench

#endif // GRADC_BENCH_BENCH_H
