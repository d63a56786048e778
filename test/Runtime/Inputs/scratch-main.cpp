// Calls scratch.grad's gradient twice with N = 100000: four temporaries of
// 400000 bytes each, which the per-thread scratch cache keeps after the
// first call (1600000 bytes) and reuses, without growing, in the second.
// Prints the bytes kept, or 0 everywhere with GRADC_NO_SCRATCH_CACHE;
// then the small blocks' arena (detail::ScratchArena).
#include "scratch.h"

#include <cstdio>
#include <vector>

int main() {
  const int64_t N = 100000;
  std::vector<float> x(N, 0.5f), dx(N);
  auto &cache = gradc::detail::ScratchCache::forThisThread();
  std::printf("before %zu\n", cache.keptBytes());
  int status = scratch_k2_grad(N, x.data(), dx.data());
  std::printf("first %d %zu\n", status, cache.keptBytes());
  status = scratch_k2_grad(N, x.data(), dx.data());
  std::printf("second %d %zu\n", status, cache.keptBytes());
  // Small temporaries (below 4 KiB) are not kept: N = 1000 needs
  // 4000-byte buffers.
  status = scratch_k2_grad(1000, x.data(), dx.data());
  std::printf("small %d %zu\n", status, cache.keptBytes());
  // ... they come from the thread's arena, taken last in, first out: all
  // given back when the call returns.
  auto &arena = gradc::detail::ScratchArena::forThisThread();
  std::printf("arena after the calls %zu\n", arena.usedBytes());
  // In 64-byte steps; a block given back out of order stays taken, the
  // last one taken frees its room.
  void *a = arena.take(100), *b = arena.take(10);
  std::printf("arena %zu", arena.usedBytes());
  arena.give(a, 100);
  std::printf(" %zu", arena.usedBytes());
  arena.give(b, 10);
  std::printf(" %zu", arena.usedBytes());
  int outside = 0;
  std::printf(" not its own %d\n", arena.give(&outside, 4) ? 1 : 0);
  return 0;
}
