//===- MathBitcode.cpp - gradc/Math.h for the LLVM backend ----------------===//
//
// Not compiled into gradc: CMake compiles it with clang++-19 -O2
// -emit-llvm to bitcode, which gradc embeds and links into every module
// the LLVM backend makes (EmitLLVM.cpp, linkMathLibrary), so that the
// generated loops call the same f32 functions as the C++ backend and the
// interpreter and inline and vectorise them. One entry point per function
// that EmitLLVM calls, named gradc_math_NAME_f32, and the scratch cache's
// gradc_scratch_take/give (below); the linker takes only those a module
// uses and makes them internal.
//
//===----------------------------------------------------------------------===//

#include "gradc/Math.h"

extern "C" {
float gradc_math_exp_f32(float x) { return gradc::exp(x); }
float gradc_math_log_f32(float x) { return gradc::log(x); }
float gradc_math_tanh_f32(float x) { return gradc::tanh(x); }
float gradc_math_sigmoid_f32(float x) { return gradc::sigmoid(x); }
float gradc_math_softplus_f32(float x) { return gradc::softplus(x); }
float gradc_math_sin_f32(float x) { return gradc::sin(x); }
float gradc_math_cos_f32(float x) { return gradc::cos(x); }
// gradc::sinSmall and cosSmall without their flag, which the generated
// code sets itself (PrintLLVM.cpp, smallTrig): a pure function can be
// vectorised where it is not inlined.
float gradc_math_sinSmall_f32(float x) {
  return gradc::detail::sinCosSmall(x, false);
}
float gradc_math_cosSmall_f32(float x) {
  return gradc::detail::sinCosSmall(x, true);
}
float gradc_math_atan_f32(float x) { return gradc::atan(x); }
float gradc_math_pow_f32(float x, float y) { return gradc::pow(x, y); }
}

//===----------------------------------------------------------------------===//
// Scratch memory kept across calls
//===----------------------------------------------------------------------===//
//
// The LLVM backend's twin of gradc/Kernels.h's detail::ScratchCache (the
// C++ backend's): the scratch blocks of at least minBytes that a function
// returns are kept, per thread, for the next call, so that a gradient with
// large temporaries does not map fresh pages from the kernel and fault
// them in on every call (glibc serves such blocks with mmap): K5's
// gradient spent more than half its time there. Smaller blocks, down to
// 4 KiB, are kept too: freed at the end of every call they leave the top
// of glibc's heap free, which it trims and grows again in the next call
// (Kernels.h). At most `slots` blocks and
// maxBytes in all are kept; the thread's exit frees them (a pthread key's
// destructor, so that an object file needs only libc). The printer calls
// gradc_scratch_take for each block and gradc_scratch_give on every way
// out (PrintLLVM.cpp, storage), except in JIT-compiled modules, whose code
// may be freed before a thread exits: they malloc and free.

#include <pthread.h>
#include <stdlib.h>

// The cache's state, with C names so that its globals are gradc_scratch_*
// in a module (EmitLLVM.cpp's linkMathLibrary makes them internal).
extern "C" {
pthread_once_t gradc_scratch_once = PTHREAD_ONCE_INIT;
pthread_key_t gradc_scratch_key;
bool gradc_scratch_have_key = false;
}

namespace {

constexpr size_t minBytes = size_t(4) << 10;
constexpr size_t maxBytes = size_t(512) << 20;
constexpr int slots = 16;

struct Block {
  void *ptr;
  size_t bytes;
};

// Blocks below minBytes come from an arena of arenaBytes, handed out from
// its top and given back last in, first out (Kernels.h's ScratchArena, and
// why): the printer gives a function's blocks back in the reverse order
// of their taking, and a callee's before its caller's.
constexpr size_t arenaBytes = size_t(256) << 10;
constexpr size_t arenaAlign = 64;

struct Cache {
  Block blocks[slots];
  int count;
  size_t kept;
  char *arena; // null until the first small block
  size_t top;
};

// This thread's cache once made: the key's pthread_once and
// pthread_getspecific on every take and give cost as much as the malloc
// and free of a small block that the arena saves. The key stays, for its
// destructor (an object file needs no C++ runtime for thread exit).
// (C name: gradc_scratch_*, made internal in a module like the others.)
extern "C" __thread void *gradc_scratch_cache = nullptr;

void freeCache(void *p) {
  Cache *cache = static_cast<Cache *>(p);
  gradc_scratch_cache = nullptr;
  for (int i = 0; i < cache->count; ++i)
    free(cache->blocks[i].ptr);
  free(cache->arena);
  free(cache);
}

Cache *threadCache(bool create);

size_t arenaRoom(size_t bytes) {
  return (bytes + arenaAlign - 1) / arenaAlign * arenaAlign;
}

/// A small block from the thread's arena, or null when it has no room.
void *arenaTake(size_t bytes) {
  Cache *cache = threadCache(true);
  if (!cache)
    return nullptr;
  if (!cache->arena) {
    cache->arena = static_cast<char *>(aligned_alloc(arenaAlign, arenaBytes));
    if (!cache->arena)
      return nullptr;
  }
  size_t need = arenaRoom(bytes);
  if (need > arenaBytes - cache->top)
    return nullptr;
  void *p = cache->arena + cache->top;
  cache->top += need;
  return p;
}

/// Takes back a small block if it is the arena's; the last one taken frees
/// its room (one given back out of order stays taken: safe).
bool arenaGive(void *ptr, size_t bytes) {
  Cache *cache = threadCache(false);
  char *p = static_cast<char *>(ptr);
  if (!cache || !cache->arena || p < cache->arena ||
      p >= cache->arena + arenaBytes)
    return false;
  if (static_cast<size_t>(p - cache->arena) + arenaRoom(bytes) == cache->top)
    cache->top = static_cast<size_t>(p - cache->arena);
  return true;
}

void createKey() {
  gradc_scratch_have_key =
      pthread_key_create(&gradc_scratch_key, freeCache) == 0;
}

/// This thread's cache; made when `create` (null when that fails).
Cache *threadCache(bool create) {
  if (gradc_scratch_cache)
    return static_cast<Cache *>(gradc_scratch_cache);
  pthread_once(&gradc_scratch_once, createKey);
  if (!gradc_scratch_have_key)
    return nullptr;
  Cache *cache = static_cast<Cache *>(pthread_getspecific(gradc_scratch_key));
  if (cache || !create)
    return cache;
  cache = static_cast<Cache *>(calloc(1, sizeof(Cache)));
  if (cache && pthread_setspecific(gradc_scratch_key, cache) != 0) {
    free(cache);
    cache = nullptr;
  }
  gradc_scratch_cache = cache;
  return cache;
}

} // namespace

extern "C" {

/// A block of at least `bytes` (its size in `*capacity`): the smallest kept
/// one that fits, or a new one; null when malloc fails. Noinline, and
/// `malloc` (a noalias result), so that the loops see each block as an
/// object of its own, as a call of malloc.
__attribute__((malloc, noinline)) void *gradc_scratch_take(size_t bytes,
                                                           size_t *capacity) {
  *capacity = bytes;
  if (bytes < minBytes) {
    if (void *p = arenaTake(bytes))
      return p;
    return malloc(bytes);
  }
  Cache *cache = threadCache(false);
  int best = -1;
  for (int i = 0; cache && i < cache->count; ++i)
    if (cache->blocks[i].bytes >= bytes &&
        (best < 0 || cache->blocks[i].bytes < cache->blocks[best].bytes))
      best = i;
  if (best < 0)
    return malloc(bytes);
  Block b = cache->blocks[best];
  cache->blocks[best] = cache->blocks[--cache->count];
  cache->kept -= b.bytes;
  *capacity = b.bytes;
  return b.ptr;
}

/// Keeps a block of gradc_scratch_take for a later call, or frees it when
/// it is small or there is no room.
__attribute__((noinline)) void gradc_scratch_give(void *ptr, size_t capacity) {
  if (!ptr)
    return;
  if (capacity < minBytes && arenaGive(ptr, capacity))
    return;
  Cache *cache = capacity < minBytes ? nullptr : threadCache(true);
  if (!cache || cache->count == slots || cache->kept + capacity > maxBytes) {
    free(ptr);
    return;
  }
  cache->blocks[cache->count++] = {ptr, capacity};
  cache->kept += capacity;
}
}
