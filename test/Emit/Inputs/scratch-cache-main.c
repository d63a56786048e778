/* Calls cache_shift (llvm-scratch-cache.grad) with rows of 32768 floats,
 * 128 KiB of scratch, on this thread and on threads that exit, and counts
 * the blocks of 64 KiB or more that the object mallocs and frees (linked
 * with -Wl,--wrap=malloc,--wrap=free, its calls come here). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t cache_shift(int64_t B, int64_t C, const float *x, const float *w,
                    float *out0, float *out1);

void *__real_malloc(size_t bytes);
void __real_free(void *ptr);
static atomic_int bigMallocs, frees;
void *__wrap_malloc(size_t bytes) {
  if (bytes >= 64 * 1024)
    ++bigMallocs;
  return __real_malloc(bytes);
}
void __wrap_free(void *ptr) {
  if (ptr)
    ++frees;
  __real_free(ptr);
}

enum { B = 2, C = 32768 };
static float x[B * C], w[C], first[B * C + B];

static int call(float *out) {
  return cache_shift(B, C, x, w, out, out + B * C);
}

/* Calls it again: 1 if the results are the first call's. */
static int callAndCompare(void) {
  static __thread float out[B * C + B];
  if (call(out) != 0)
    return 0;
  return memcmp(out, first, sizeof out) == 0;
}

static void *worker(void *arg) {
  int *ok = arg;
  for (int i = 0; i < 3; ++i)
    *ok &= callAndCompare();
  return NULL;
}

int main(void) {
  for (int i = 0; i < B * C; ++i)
    x[i] = (float)((i * 7919) % 1000) / 100.0f;
  for (int i = 0; i < C; ++i)
    w[i] = (float)(i % 13) / 4.0f - 1.0f;
  if (call(first) != 0)
    return 1;
  int same = 1;
  for (int i = 0; i < 3; ++i)
    same &= callAndCompare();
  printf("same results: %d\n", same);
  printf("after four calls: %d malloc, %d free\n", bigMallocs, frees);
  int ok = 1;
  for (int t = 0; t < 4; ++t) {
    pthread_t thread;
    int threadOk = 1;
    if (pthread_create(&thread, NULL, worker, &threadOk) != 0 ||
        pthread_join(thread, NULL) != 0)
      return 1;
    ok &= threadOk;
  }
  ok &= callAndCompare();
  printf("threads: %d\n", ok);
  printf("after four threads: %d malloc, %d free\n", bigMallocs, frees);
  return 0;
}
