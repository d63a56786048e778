//===- Kernels.h - The library kernels of generated C++ ---------*- C++ -*-===//
//
// The parts of the C++ backend's runtime that are not scalar math:
//
//   - `TensorView`, the (data, shape) pair through which C++ callers pass
//     tensors, and the size checks of generated functions;
//   - `Buffer`, the owner of a temporary, returned to a per-thread scratch
//     cache when the generated function returns;
//   - the kernels that are not worth generating inline: a cache-blocked
//     matmul (or, with -DGRADC_USE_BLAS, CBLAS above a size), softmax,
//     log_softmax and logsumexp along one axis, softmax cross-entropy and
//     one_hot.
//
// The one state is per thread: the scratch cache that keeps the large
// temporaries of generated functions for the next call on the same thread
// (detail::ScratchCache). Every function is re-entrant and thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_KERNELS_H
#define GRADC_KERNELS_H

#include "gradc/ABI.h"
#include "gradc/Math.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>

#ifdef GRADC_USE_BLAS
#include <cblas.h>
#endif

#if defined(__AVX__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h> // _mm512_maskz_cvtps_pd (detail::convert8), widen4
#endif

// Generated code marks pointers that never alias (the ABI forbids outputs
// to overlap inputs), which lets compilers vectorise without run-time
// overlap checks.
#if defined(__GNUC__) || defined(__clang__)
#define GRADC_RESTRICT __restrict__
#else
#define GRADC_RESTRICT
#endif

// Forces inlining of a small entry point. gradc::matmul needs it: when a
// loop of generated code fills its operand and the loop may run zero times,
// GCC 12 warns (-Wmaybe-uninitialized) that a possibly uninitialised buffer
// is passed to a `const T *` parameter of a call it does not inline, though
// matmul reads nothing when a size is 0. Inlined, GCC sees that guard.
#if defined(__GNUC__) || defined(__clang__)
#define GRADC_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define GRADC_ALWAYS_INLINE inline
#endif

// The test of a failure in generated code (`return GRADC_ERROR_...`):
// compilers should not take the failure paths for likely. GCC 12 estimates
// each such early return as taken now and then, and after the tests of a
// long function's sizes, scratch buffers and indices it estimated the rest
// of the function cold and optimised it for size, without vectorising.
#if defined(__GNUC__) || defined(__clang__)
#define GRADC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define GRADC_UNLIKELY(x) (x)
#endif

namespace gradc {

//===----------------------------------------------------------------------===//
// Tensor views and size checks
//===----------------------------------------------------------------------===//

/// A tensor that the caller owns: a pointer to its first element
/// (contiguous, row-major) and its shape. `TensorView<const float>` is an
/// input, `TensorView<float>` an output.
template <typename T> class TensorView {
public:
  static constexpr int maxRank = 8;

  TensorView() = default;
  /// `shape` lists the dimensions; a view with more than maxRank
  /// dimensions or a negative one is invalid (every size check fails).
  TensorView(T *data, std::initializer_list<int64_t> shape) : ptr(data) {
    if (shape.size() > static_cast<size_t>(maxRank)) {
      rankValue = -1;
      return;
    }
    for (int64_t d : shape) {
      if (d < 0)
        rankValue = -1;
      if (rankValue >= 0)
        dims[rankValue++] = d;
    }
  }
  /// A view of mutable data converts to a view of const data.
  template <typename U>
  TensorView(const TensorView<U> &other) : ptr(other.data()) {
    rankValue = other.rank();
    for (int i = 0; i < rankValue; ++i)
      dims[i] = other.dim(i);
  }

  T *data() const { return ptr; }
  /// The number of dimensions, or -1 for an invalid view.
  int rank() const { return rankValue; }
  int64_t dim(int i) const { return dims[i]; }
  int64_t numElements() const {
    int64_t n = 1;
    for (int i = 0; i < rankValue; ++i)
      n *= dims[i];
    return n;
  }

private:
  T *ptr = nullptr;
  int rankValue = 0;
  int64_t dims[maxRank] = {};
};

/// Binds a size name to `dim` the first time (`size` < 0 means unbound)
/// and checks it agrees afterwards.
inline bool bindSize(int64_t &size, int64_t dim) {
  if (size < 0)
    size = dim;
  return size == dim;
}

/// Whether the product of `factors` (non-negative sizes) exceeds INT64_MAX,
/// so that no tensor with those dimensions exists and index arithmetic
/// over it would wrap. A factor 0 makes the product 0, whatever the
/// others. Generated functions check the element count of every tensor
/// they touch with it before anything else (GRADC_ERROR_SIZE).
inline bool countOverflows(std::initializer_list<int64_t> factors) {
  for (int64_t f : factors)
    if (f == 0)
      return false;
  int64_t product = 1;
  for (int64_t f : factors) {
    if (product > std::numeric_limits<int64_t>::max() / f)
      return true;
    product *= f;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Temporaries
//===----------------------------------------------------------------------===//

namespace detail {

/// The blocks of scratch memory that generated functions returned on this
/// thread, kept for the next call (docs/ABI.md, "Temporaries"). Without it
/// every call of a gradient with large temporaries maps fresh pages from
/// the kernel (glibc serves large blocks with mmap) and faults them in:
/// about a quarter of K2's gradient (docs/Performance.md). Blocks below
/// 64 KiB come from glibc's heap, but freeing them all at the end of a
/// call leaves its top free, which glibc gives back to the kernel (trim)
/// and grows again, page faults included, in the next call: 6 us of the
/// spiral MLP's 45 us gradient. So blocks of at least `minBytes` (4 KiB)
/// are kept (smaller ones cost little either way), at most `slots` of
/// them and `maxBytes` in all; the thread's exit frees them. Define
/// GRADC_NO_SCRATCH_CACHE to allocate and free every time.
class ScratchCache {
public:
  static constexpr size_t minBytes = size_t(4) << 10;
  static constexpr size_t maxBytes = size_t(512) << 20;
  static constexpr int slots = 16;

  ScratchCache() = default;
  ScratchCache(const ScratchCache &) = delete;
  ScratchCache &operator=(const ScratchCache &) = delete;
  ~ScratchCache() {
    for (int i = 0; i < count; ++i)
      std::free(blocks[i].ptr);
  }

  /// The smallest kept block of at least `bytes` (its size in `capacity`),
  /// or a new one; null when malloc fails.
  void *take(size_t bytes, size_t &capacity) {
    int best = -1;
    for (int i = 0; i < count; ++i)
      if (blocks[i].bytes >= bytes &&
          (best < 0 || blocks[i].bytes < blocks[best].bytes))
        best = i;
    if (best < 0) {
      capacity = bytes;
      return std::malloc(bytes);
    }
    Block b = blocks[best];
    blocks[best] = blocks[--count];
    kept -= b.bytes;
    capacity = b.bytes;
    return b.ptr;
  }

  /// Keeps the block for a later `take`, or frees it when it is small or
  /// there is no room.
  void give(void *ptr, size_t bytes) {
    if (bytes < minBytes || count == slots || kept + bytes > maxBytes) {
      std::free(ptr);
      return;
    }
    blocks[count++] = {ptr, bytes};
    kept += bytes;
  }

  /// The bytes kept now (for tests).
  size_t keptBytes() const { return kept; }

  static ScratchCache &forThisThread() {
    thread_local ScratchCache cache;
    return cache;
  }

private:
  struct Block {
    void *ptr;
    size_t bytes;
  };
  Block blocks[slots] = {};
  int count = 0;
  size_t kept = 0;
};

// Under AddressSanitizer small temporaries come from malloc, so that an
// access past one is reported (the arena below would hide it).
#if defined(__SANITIZE_ADDRESS__)
#define GRADC_SCRATCH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRADC_SCRATCH_ASAN 1
#endif
#endif

/// The small blocks of scratch memory (below ScratchCache::minBytes) of
/// this thread's generated functions: one block of `arenaBytes`, handed
/// out from its top and taken back last in, first out. A function's
/// temporaries are automatic objects, destroyed in the reverse order of
/// their construction, and the functions it calls return theirs before it
/// returns, so the order is always that; a block given back out of order
/// (never by generated code) stays taken until the thread exits, which is
/// safe. A loop's body function that runs once per step (the LSTM's: 8
/// rows of 14 floats, 2,048 calls per gradient) spent 14% of its time in
/// malloc and free. When the arena is full, blocks come from malloc.
class ScratchArena {
public:
  static constexpr size_t arenaBytes = size_t(256) << 10;
  static constexpr size_t align = 64;

  ScratchArena() = default;
  ScratchArena(const ScratchArena &) = delete;
  ScratchArena &operator=(const ScratchArena &) = delete;
  ~ScratchArena() { std::free(base); }

  /// A block of `bytes` from the arena, or null when it has no room.
  void *take(size_t bytes) {
    size_t need = (bytes + align - 1) / align * align;
    if (!base) {
      base = static_cast<char *>(std::aligned_alloc(align, arenaBytes));
      if (!base)
        return nullptr;
    }
    if (need > arenaBytes - top)
      return nullptr;
    void *p = base + top;
    top += need;
    return p;
  }

  /// Takes back a block of `bytes` if it is the arena's (false otherwise):
  /// the last one taken frees its room.
  bool give(void *ptr, size_t bytes) {
    char *p = static_cast<char *>(ptr);
    if (!base || p < base || p >= base + arenaBytes)
      return false;
    size_t need = (bytes + align - 1) / align * align;
    if (static_cast<size_t>(p - base) + need == top)
      top = static_cast<size_t>(p - base);
    return true;
  }

  /// The bytes handed out now (for tests).
  size_t usedBytes() const { return top; }

  static ScratchArena &forThisThread() {
    thread_local ScratchArena arena;
    return arena;
  }

private:
  char *base = nullptr;
  size_t top = 0;
};

inline void *scratchTake(size_t bytes, size_t &capacity) {
#ifdef GRADC_NO_SCRATCH_CACHE
  capacity = bytes;
  return std::malloc(bytes);
#else
  capacity = bytes;
  if (bytes < ScratchCache::minBytes) {
#ifndef GRADC_SCRATCH_ASAN
    if (void *p = ScratchArena::forThisThread().take(bytes))
      return p;
#endif
    return std::malloc(bytes);
  }
  return ScratchCache::forThisThread().take(bytes, capacity);
#endif
}

inline void scratchGive(void *ptr, size_t capacity) {
#ifdef GRADC_NO_SCRATCH_CACHE
  (void)capacity;
  std::free(ptr);
#else
  if (!ptr)
    return;
  if (capacity < ScratchCache::minBytes) {
#ifndef GRADC_SCRATCH_ASAN
    if (ScratchArena::forThisThread().give(ptr, capacity))
      return;
#endif
    std::free(ptr);
    return;
  }
  ScratchCache::forThisThread().give(ptr, capacity);
#endif
}

} // namespace detail

/// Memory for `count` elements, returned by the destructor to this
/// thread's scratch cache (detail::ScratchCache), which keeps large blocks
/// for the next call. A Buffer of zero elements holds no memory and is
/// valid. Check `operator bool` after construction: it is false when the
/// allocation failed.
template <typename T> class Buffer {
public:
  explicit Buffer(int64_t count) {
    if (count <= 0)
      return;
    // Objects larger than PTRDIFF_MAX bytes cannot exist.
    const uint64_t maxCount =
        static_cast<uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) /
        sizeof(T);
    if (static_cast<uint64_t>(count) > maxCount) {
      failed = true;
      return;
    }
    ptr = static_cast<T *>(
        detail::scratchTake(static_cast<size_t>(count) * sizeof(T), capacity));
    failed = ptr == nullptr;
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() { detail::scratchGive(ptr, capacity); }

  explicit operator bool() const { return !failed; }
  T *data() const { return ptr; }

private:
  T *ptr = nullptr;
  size_t capacity = 0;
  bool failed = false;
};

//===----------------------------------------------------------------------===//
// Matrix product
//===----------------------------------------------------------------------===//

// GCC's -O3 loop analysis warns (-Waggressive-loop-optimizations) that
// some iteration of these kernels' loops would overflow an index, for trip
// counts no real tensor reaches; the kernels are otherwise warning-free.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
#endif

/// Whether a matmul operand is read as stored or transposed.
enum Transpose : bool { NoTranspose = false, Transposed = true };

namespace detail {

// The summation order of docs/IR.md: each element adds its terms in
// increasing p into one accumulator, f64 for floats (f32 included: an f32
// product is exact in f64, and the sum rounds once, at the end), wrapping
// for i32 (in uint32_t, where overflow is defined).
template <typename T> struct Accumulator {
  using type = T;
};
template <> struct Accumulator<float> {
  using type = double;
};
template <> struct Accumulator<int32_t> {
  using type = uint32_t;
};

/// A kernel's temporary of `count` elements: on the stack up to
/// Capacity, else from malloc (aborting when that fails, as the kernels'
/// other temporaries do), freed with the object.
template <typename T, int64_t Capacity> class StackOrHeap {
public:
  explicit StackOrHeap(int64_t count) {
    if (count > Capacity) {
      heap = static_cast<T *>(std::malloc(sizeof(T) * count));
      if (!heap)
        std::abort();
    }
  }
  StackOrHeap(const StackOrHeap &) = delete;
  StackOrHeap &operator=(const StackOrHeap &) = delete;
  ~StackOrHeap() { std::free(heap); }
  T *data() { return heap ? heap : local; }

private:
  T local[Capacity];
  T *heap = nullptr;
};

// The kernels below use GCC's and Clang's vector extensions where the
// compiler has them (GCC 12 and later, Clang), and plain loops elsewhere
// or with -DGRADC_NO_VECTOR_EXTENSIONS (test/Runtime/cpp-kernels.test
// runs both): the same bits either way.
#if defined(__has_builtin) && !defined(GRADC_NO_VECTOR_EXTENSIONS)
#if __has_builtin(__builtin_shufflevector) &&                                  \
    __has_builtin(__builtin_convertvector)
#define GRADC_VECTOR_EXTENSIONS 1
#endif
#endif

#ifdef GRADC_VECTOR_EXTENSIONS
/// Eight elements of E, one vector of GCC's and Clang's vector extensions
/// (of registers of AVX-512 or AVX2, or split by the compiler where the
/// target has narrower ones).
template <typename E> struct Lanes8 {
  typedef E type __attribute__((vector_size(8 * sizeof(E))));
};
template <typename E> using Vec8 = typename Lanes8<E>::type;

/// v = t converted element by element (exactly: f32 to f64, or not at
/// all). Vectors are passed by reference: by value, GCC warns that their
/// ABI depends on the target's vector registers (-Wpsabi).
template <typename V, typename VT>
GRADC_ALWAYS_INLINE void convert8(V &v, const VT &t) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
  using T = std::remove_cv_t<std::remove_reference_t<decltype(t[0])>>;
  // One vcvtps2pd of all 8: GCC 12 converts the two halves and joins
  // them, four instructions that were most of the narrow kernel's time in
  // the default order (the spiral's 200 x 64 x 2 went from 3.5 to 2.7 us,
  // its 200 x 2 x 64 in the short-K kernel from 4.6 to 3.2 us).
  if constexpr (std::is_same_v<T, float> && sizeof(V) == 64) {
    __m256 f;
    std::memcpy(&f, &t, sizeof(f));
    // (The maskz form: _mm512_cvtps_pd starts from _mm512_undefined_pd,
    // which GCC 12 reports as maybe uninitialized.)
    __m512d d = _mm512_maskz_cvtps_pd(static_cast<__mmask8>(0xFF), f);
    std::memcpy(&v, &d, sizeof(v));
    return;
  }
#endif
  v = __builtin_convertvector(t, V);
}

/// v = the 8 elements at p, converted as convert8 converts them.
template <typename V, typename T>
GRADC_ALWAYS_INLINE void load8(V &v, const T *GRADC_RESTRICT p) {
  Vec8<T> t;
  std::memcpy(&t, p, sizeof(t));
  convert8(v, t);
}

/// Stores v at p, each element rounded to T as static_cast rounds it.
template <typename T, typename V>
GRADC_ALWAYS_INLINE void store8(T *GRADC_RESTRICT p, const V &v) {
  Vec8<T> t = __builtin_convertvector(v, Vec8<T>);
  std::memcpy(p, &t, sizeof(t));
}
#endif

/// A row of 16 accumulators of Acc that stay in registers: two vectors
/// with vector extensions, else an array whose constant-trip loops
/// compilers unroll (GCC vectorised them in part, with the rest scalar,
/// and spilled them to the stack between the adds). Each element adds its
/// terms one at a time, as a scalar accumulator would.
template <typename Acc> struct Accumulators16 {
#ifdef GRADC_VECTOR_EXTENSIONS
  using V = Vec8<Acc>;
  V lo = {}, hi = {};
  template <typename T> GRADC_ALWAYS_INLINE void load(const T *p) {
    load8(lo, p);
    load8(hi, p + 8);
  }
  /// += s * p[q], the product and the sum in Acc.
  template <typename T> GRADC_ALWAYS_INLINE void addScaled(Acc s, const T *p) {
    V x, y;
    load8(x, p);
    load8(y, p + 8);
    lo += s * x;
    hi += s * y;
  }
  template <typename T> GRADC_ALWAYS_INLINE void store(T *p) const {
    store8(p, lo);
    store8(p + 8, hi);
  }
  /// p[q] = p[q] + this[q], the sum in Acc.
  template <typename T> GRADC_ALWAYS_INLINE void addTo(T *p) const {
    V x, y;
    load8(x, p);
    load8(y, p + 8);
    store8(p, V(x + lo));
    store8(p + 8, V(y + hi));
  }
#else
  Acc v[16] = {};
  template <typename T> GRADC_ALWAYS_INLINE void load(const T *p) {
    for (int q = 0; q < 16; ++q)
      v[q] = static_cast<Acc>(p[q]);
  }
  template <typename T> GRADC_ALWAYS_INLINE void addScaled(Acc s, const T *p) {
    for (int q = 0; q < 16; ++q)
      v[q] += s * static_cast<Acc>(p[q]);
  }
  template <typename T> GRADC_ALWAYS_INLINE void store(T *p) const {
    for (int q = 0; q < 16; ++q)
      p[q] = static_cast<T>(v[q]);
  }
  template <typename T> GRADC_ALWAYS_INLINE void addTo(T *p) const {
    for (int q = 0; q < 16; ++q)
      p[q] = static_cast<T>(static_cast<Acc>(p[q]) + v[q]);
  }
#endif
};

/// c[i, j0 + j] += sum_p op(a)[i, p0 + p] panel[p, j] for rows [i0, i1)
/// and columns [j, jEnd) of a panel: the simple loop for the edges, with
/// a row of at most 64 accumulators, each adding its terms in increasing
/// p, so that the inner loop over j vectorises.
template <typename T, typename Acc, typename P>
void panelRows(const T *GRADC_RESTRICT a, Transpose ta,
               const P *GRADC_RESTRICT panel, T *GRADC_RESTRICT c, int64_t m,
               int64_t n, int64_t k, int64_t i0, int64_t i1, int64_t j0,
               int64_t jBegin, int64_t jEnd, int64_t p0, int64_t kb,
               int64_t nb) {
  constexpr int64_t chunk = 64;
  for (int64_t i = i0; i < i1; ++i) {
    T *GRADC_RESTRICT ci = c + i * n + j0;
    for (int64_t jc = jBegin; jc < jEnd; jc += chunk) {
      int64_t width = std::min(chunk, jEnd - jc);
      Acc acc[chunk];
      for (int64_t j = 0; j < width; ++j)
        acc[j] = static_cast<Acc>(ci[jc + j]);
      for (int64_t p = 0; p < kb; ++p) {
        Acc aip =
            static_cast<Acc>(ta ? a[(p0 + p) * m + i] : a[i * k + p0 + p]);
        const P *GRADC_RESTRICT bp = panel + p * nb + jc;
        for (int64_t j = 0; j < width; ++j)
          acc[j] += aip * static_cast<Acc>(bp[j]);
      }
      for (int64_t j = 0; j < width; ++j)
        ci[jc + j] = static_cast<T>(acc[j]);
    }
  }
}

/// c[m, n] += op(a)[m, k] op(b)[k, n] for fewer than 16 columns, one
/// element at a time, for the rows [i0, m): the rows narrowRows leaves
/// (fewer than 8), and every narrow product of a compiler without vector
/// extensions or of integers. With fromZero, every element starts from +0
/// instead of its value in c (which is not read: matmul's zeroing).
template <typename T, typename Acc>
void narrowScalar(const T *GRADC_RESTRICT a, Transpose ta,
                  const T *GRADC_RESTRICT b, Transpose tb, T *GRADC_RESTRICT c,
                  int64_t m, int64_t n, int64_t k, int64_t i0, bool fromZero) {
  for (int64_t i = i0; i < m; ++i)
    for (int64_t q = 0; q < n; ++q) {
      Acc sum = fromZero ? Acc(0) : static_cast<Acc>(c[i * n + q]);
      for (int64_t p = 0; p < k; ++p)
        sum += static_cast<Acc>(ta ? a[p * m + i] : a[i * k + p]) *
               static_cast<Acc>(tb ? b[q * k + p] : b[p * n + q]);
      c[i * n + q] = static_cast<T>(sum);
    }
}

#ifdef GRADC_VECTOR_EXTENSIONS
/// Transposes the 8 x 8 block `v` (v[r][c] becomes v[c][r]) in registers:
/// three rounds of eight two-input shuffles, each swapping bit s of the
/// row index with bit s of the column index (the LLVM backend's
/// narrowKernel does the same).
template <typename V> GRADC_ALWAYS_INLINE void transpose8x8(V (&v)[8]) {
  V t[8];
  for (int r = 0; r < 8; r += 2) {
    t[r] = __builtin_shufflevector(v[r], v[r + 1], 0, 8, 2, 10, 4, 12, 6, 14);
    t[r + 1] =
        __builtin_shufflevector(v[r], v[r + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  }
  for (int r : {0, 1, 4, 5}) {
    v[r] = __builtin_shufflevector(t[r], t[r + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    v[r + 2] =
        __builtin_shufflevector(t[r], t[r + 2], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int r = 0; r < 4; ++r) {
    t[r] = __builtin_shufflevector(v[r], v[r + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    t[r + 4] =
        __builtin_shufflevector(v[r], v[r + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
  for (int r = 0; r < 8; ++r)
    v[r] = t[r];
}

/// Rows [i, i + 8 RV) and columns [0, cols) of c (row stride ldc) +=
/// op(a) bp, where bp holds op(b) in Acc, [k, ldb], and N >= cols
/// columns of it are computed (the ones past cols are bp's padding, and
/// are not stored): the rows are the lanes of RV vectors per column, RV N
/// accumulator vectors in registers. Each p adds column p of a (8 contiguous
/// elements of a transposed a; of an untransposed a, a column of an 8 x 8 block
/// transposed in registers, one p at a time for the last k % 8) times
/// b[p, q] to column q's accumulators: every element adds its terms one
/// by one in increasing p, from its value in c (from +0 with fromZero), as
/// narrowScalar does.
template <int N, int RV, bool TA, typename T, typename Acc>
GRADC_ALWAYS_INLINE void
narrowRows(const T *GRADC_RESTRICT a, const Acc *GRADC_RESTRICT bp, int64_t ldb,
           T *GRADC_RESTRICT c, int64_t ldc, int64_t m, int64_t k, int64_t i,
           int cols, bool fromZero) {
  using V = Vec8<Acc>;
  using VT = Vec8<T>;
  V acc[RV][N] = {};
  if (!fromZero)
    for (int rv = 0; rv < RV; ++rv)
      for (int q = 0; q < N && q < cols; ++q) {
        Acc lanes[8];
        for (int r = 0; r < 8; ++r)
          lanes[r] = static_cast<Acc>(c[(i + 8 * rv + r) * ldc + q]);
        std::memcpy(&acc[rv][q], lanes, sizeof(V));
      }
  int64_t p = 0;
  if (!TA) {
    for (; p + 8 <= k; p += 8)
      for (int rv = 0; rv < RV; ++rv) {
        VT block[8];
        for (int r = 0; r < 8; ++r)
          std::memcpy(&block[r], a + (i + 8 * rv + r) * k + p, sizeof(VT));
        transpose8x8(block);
        for (int pp = 0; pp < 8; ++pp) {
          V column;
          convert8(column, block[pp]);
          const Acc *GRADC_RESTRICT bq = bp + (p + pp) * ldb;
          for (int q = 0; q < N; ++q)
            acc[rv][q] += column * bq[q];
        }
      }
  }
  for (; p < k; ++p) {
    const Acc *GRADC_RESTRICT bq = bp + p * ldb;
    for (int rv = 0; rv < RV; ++rv) {
      VT lanes;
      if (TA) {
        std::memcpy(&lanes, a + p * m + i + 8 * rv, sizeof(VT));
      } else {
        T gathered[8];
        for (int r = 0; r < 8; ++r)
          gathered[r] = a[(i + 8 * rv + r) * k + p];
        std::memcpy(&lanes, gathered, sizeof(VT));
      }
      V column;
      convert8(column, lanes);
      for (int q = 0; q < N; ++q)
        acc[rv][q] += column * bq[q];
    }
  }
  for (int rv = 0; rv < RV; ++rv)
    for (int q = 0; q < N && q < cols; ++q) {
      Acc lanes[8];
      std::memcpy(lanes, &acc[rv][q], sizeof(V));
      for (int r = 0; r < 8; ++r)
        c[(i + 8 * rv + r) * ldc + q] = static_cast<T>(lanes[r]);
    }
}

/// The columns a narrow product computes for `cols` of its own: 1, 2, 4
/// or 8, so that there are four instances of narrowColumns per operand
/// layout and not eight (each one added 0.1 s to GCC's -O3 of a module
/// that multiplies matrices; the spiral's took 1.5 s before this kernel).
constexpr int narrowWidth(int64_t cols) {
  return cols <= 1 ? 1 : cols <= 2 ? 2 : cols <= 4 ? 4 : 8;
}

/// The rows [0, m - m % 8) of columns [0, cols) of matmulNarrow's
/// product, N = narrowWidth(cols) of them computed: blocks of as many
/// vectors of 8 rows as make up to 8 accumulator vectors (independent
/// sums that hide an add's latency; the LLVM backend's narrowBlockRows),
/// then single vectors.
template <int N, bool TA, typename T, typename Acc>
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
void narrowColumns(const T *GRADC_RESTRICT a, const Acc *GRADC_RESTRICT bp,
                   int64_t ldb, T *GRADC_RESTRICT c, int64_t ldc, int64_t m,
                   int64_t k, int cols, bool fromZero) {
  constexpr int RV = N == 1 ? 8 : N == 2 ? 4 : N == 4 ? 2 : 1;
  int64_t i = 0;
  for (; i + 8 * RV <= m; i += 8 * RV)
    narrowRows<N, RV, TA>(a, bp, ldb, c, ldc, m, k, i, cols, fromZero);
  for (; i + 8 <= m; i += 8)
    narrowRows<N, 1, TA>(a, bp, ldb, c, ldc, m, k, i, cols, fromZero);
}

template <bool TA, typename T, typename Acc>
void narrowColumnsOf(int cols, const T *GRADC_RESTRICT a,
                     const Acc *GRADC_RESTRICT bp, int64_t ldb,
                     T *GRADC_RESTRICT c, int64_t ldc, int64_t m, int64_t k,
                     bool fromZero) {
  switch (narrowWidth(cols)) {
  case 1:
    return narrowColumns<1, TA>(a, bp, ldb, c, ldc, m, k, cols, fromZero);
  case 2:
    return narrowColumns<2, TA>(a, bp, ldb, c, ldc, m, k, cols, fromZero);
  case 4:
    return narrowColumns<4, TA>(a, bp, ldb, c, ldc, m, k, cols, fromZero);
  default:
    return narrowColumns<8, TA>(a, bp, ldb, c, ldc, m, k, cols, fromZero);
  }
}
#endif

/// c[m, n] += op(a)[m, k] op(b)[k, n] for fewer than 16 columns (the
/// logits of a classifier, a weight's gradient of a layer with two
/// outputs), where the blocks of 16 columns below would leave every
/// element to panelRows' scalar loop. With vector extensions the rows are
/// the vector lanes (narrowRows), as in the LLVM backend's narrow kernel:
/// op(b) is copied into Acc, [k, ldb], and the columns are taken 8 at a
/// time, then the rest, each group padded with columns of zeros to 1, 2,
/// 4 or 8 (narrowWidth) that are computed and not stored; the last m % 8
/// rows, and every row without vector
/// extensions or of integers, one element at a time. Each element starts
/// from its value in c (from +0 with fromZero) and adds its terms one by
/// one in increasing p, in Acc: the same bits as panelRows.
template <typename T, typename Acc = typename Accumulator<T>::type>
void matmulNarrow(const T *GRADC_RESTRICT a, Transpose ta,
                  const T *GRADC_RESTRICT b, Transpose tb, T *GRADC_RESTRICT c,
                  int64_t m, int64_t n, int64_t k, bool fromZero) {
  int64_t i = 0;
#ifdef GRADC_VECTOR_EXTENSIONS
  if constexpr (std::is_floating_point_v<Acc>) {
    // b on the stack up to 8 KiB for f64 (the spiral's 200 x 2 and
    // 64 x 2), else on the heap.
    constexpr int64_t stackElements = 1024;
    if (m >= 8) {
      // The padded columns: n <= 8 rounded up, or 8 and the rest rounded.
      const int64_t ldb = n <= 8 ? narrowWidth(n) : 8 + narrowWidth(n - 8);
      StackOrHeap<Acc, stackElements> buffer(k * ldb);
      Acc *GRADC_RESTRICT bp = buffer.data();
      for (int64_t p = 0; p < k; ++p)
        for (int64_t q = 0; q < ldb; ++q)
          bp[p * ldb + q] =
              q >= n ? Acc(0)
                     : static_cast<Acc>(tb ? b[q * k + p] : b[p * n + q]);
      for (int64_t q0 = 0; q0 < n; q0 += 8) {
        int cols = static_cast<int>(std::min<int64_t>(8, n - q0));
        if (ta)
          narrowColumnsOf<true>(cols, a, bp + q0, ldb, c + q0, n, m, k,
                                fromZero);
        else
          narrowColumnsOf<false>(cols, a, bp + q0, ldb, c + q0, n, m, k,
                                 fromZero);
      }
      i = m - m % 8;
    }
  }
#endif
  narrowScalar<T, Acc>(a, ta, b, tb, c, m, n, k, i, fromZero);
}

#ifdef GRADC_VECTOR_EXTENSIONS
/// 16 f32 lanes (one AVX-512 register; two where registers are narrower).
typedef float Vec16f __attribute__((vector_size(16 * sizeof(float))));

/// c[m, n] = op(a)[m, k] b[k, n] for 9 to 15 columns, in f32 sums, in
/// blocks of R rows: each row of c is one vector of 16 sums in a register,
/// to which each p adds A(i, p) times row p of b. Rows past m - 1 repeat
/// row m - 1 (computed, not stored). b's rows are read in place as whole
/// vectors, whose lanes past n hold the next row's elements (computed, not
/// stored), but for the last (16 - n < n), which would end past b: it
/// comes from a copy padded with zeros. While a block's last row ends
/// within c, its rows are stored as whole vectors, whose lanes past n land
/// in the next rows, written after; the other blocks' rows are stored one
/// element at a time.
template <int R, bool TA>
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
void rowVectorRows(const float *GRADC_RESTRICT a, const float *GRADC_RESTRICT b,
                   float *GRADC_RESTRICT c, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t width = 16;
  int64_t kIn = k;
  while (kIn > 0 && (kIn - 1) * n + width > k * n)
    --kIn;
  float restB[width]; // k - kIn <= 1
  for (int64_t p = kIn; p < k; ++p)
    for (int64_t q = 0; q < width; ++q)
      restB[(p - kIn) * width + q] = q < n ? b[p * n + q] : 0.0f;
  for (int64_t i0 = 0; i0 < m; i0 += R) {
    int64_t rowOfA[R]; // A(i0 + r, p) = a[rowOfA[r] + p * (TA ? m : 1)]
    for (int r = 0; r < R; ++r) {
      const int64_t i = std::min<int64_t>(i0 + r, m - 1);
      rowOfA[r] = TA ? i : i * k;
    }
    Vec16f acc[R];
    for (int r = 0; r < R; ++r)
      acc[r] = Vec16f{};
    for (int64_t p = 0; p < k; ++p) {
      Vec16f bp;
      std::memcpy(&bp, p < kIn ? b + p * n : restB + (p - kIn) * width,
                  sizeof(bp));
      for (int r = 0; r < R; ++r)
        acc[r] += a[rowOfA[r] + (TA ? p * m : p)] * bp;
    }
    if (i0 + R <= m && (i0 + R - 1) * n + width <= m * n) {
      for (int r = 0; r < R; ++r)
        std::memcpy(c + (i0 + r) * n, &acc[r], sizeof(acc[r]));
      continue;
    }
    float rowsOfC[R][width];
    std::memcpy(rowsOfC, acc, sizeof(rowsOfC));
    for (int64_t r = 0; r < R && i0 + r < m; ++r)
      for (int64_t q = 0; q < n; ++q)
        c[(i0 + r) * n + q] = rowsOfC[r][q];
  }
}
#endif

/// Whether matmulRowVectors computes a product: f32 sums (the f32 order),
/// b as stored, 9 to 15 columns (more than half a vector of 16 lanes;
/// matmulNarrow, whose lanes are rows, wastes none on fewer).
template <typename Acc> constexpr bool rowVectorsFit(int64_t n, Transpose tb) {
#ifdef GRADC_VECTOR_EXTENSIONS
  if constexpr (std::is_same_v<Acc, float>)
    return !tb && n > 8 && n < 16;
#endif
  (void)n;
  (void)tb;
  return false;
}

/// c[m, n] = op(a)[m, k] b[k, n] in f32 sums for the products of
/// rowVectorsFit (the GMM's N x D by D x D products and their gradient
/// D x D x N, D = 10), in blocks of 8 rows, or 12 for 9 to 12 rows (one
/// block; 12 sums hide an add's latency better than two blocks of 8 over
/// a long k): each element starts from +0 and adds its terms one by one in
/// increasing p, the same bits as narrowScalar.
inline void matmulRowVectors(const float *GRADC_RESTRICT a, Transpose ta,
                             const float *GRADC_RESTRICT b,
                             float *GRADC_RESTRICT c, int64_t m, int64_t n,
                             int64_t k) {
#ifdef GRADC_VECTOR_EXTENSIONS
  if (m > 8 && m <= 12)
    return ta ? rowVectorRows<12, true>(a, b, c, m, n, k)
              : rowVectorRows<12, false>(a, b, c, m, n, k);
  return ta ? rowVectorRows<8, true>(a, b, c, m, n, k)
            : rowVectorRows<8, false>(a, b, c, m, n, k);
#else
  narrowScalar<float, float>(a, ta, b, NoTranspose, c, m, n, k, 0, true);
#endif
}

/// c[m, n] += op(a)[m, k] op(b)[k, n] for a short k (at most
/// shortKMax terms: the gradient of a layer with two inputs): per row of
/// c, a row of accumulators to which each p adds a[i, p] times the row p
/// of b, vectorised over j; every element adds its terms in increasing p
/// in Acc, as the other kernels do. A transposed b is first copied, a
/// chunk of columns at a time, into rows (read in place, its k-strided
/// elements were gathered one by one). The register blocks below spend
/// more on their setup than on k products, and GCC's clone of them for
/// untransposed operands (ipa-cp) is slower still: 200 x 64 x 2 took
/// 12.3 us there (27.8 us with f64 sums), 4.0 us (6.6 us) here, and 1.5
/// us (3.2 us) since its sums are kept 16 at a time in vectors and c is
/// not zeroed first. Not inlined, so that the blocked kernel stays the
/// size it was. With fromZero the elements start from +0 and c is only
/// written.
constexpr int64_t shortKMax = 8;
template <typename T, typename Acc>
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
void matmulShortK(const T *GRADC_RESTRICT a, Transpose ta,
                  const T *GRADC_RESTRICT b, Transpose tb, T *GRADC_RESTRICT c,
                  int64_t m, int64_t n, int64_t k, bool fromZero) {
  constexpr int64_t chunk = 256;
  T rowsOfB[shortKMax * chunk];
  for (int64_t j0 = 0; j0 < n; j0 += chunk) {
    int64_t width = std::min(chunk, n - j0);
    // Row p of the chunk starts at bRows + p * ldb.
    const T *bRows = b + j0;
    int64_t ldb = n;
    if (tb) {
      for (int64_t j = 0; j < width; ++j)
        for (int64_t p = 0; p < k; ++p)
          rowsOfB[p * chunk + j] = b[(j0 + j) * k + p];
      bRows = rowsOfB;
      ldb = chunk;
    }
    for (int64_t i = 0; i < m; ++i) {
      T *GRADC_RESTRICT ci = c + i * n + j0;
      // Blocks of 16 accumulators in registers (a row of them went
      // through memory: for f32 sums GCC made its loads and stores memcpy
      // calls, two per row), then the last width % 16.
      int64_t j = 0;
      for (; j + 16 <= width; j += 16) {
        Accumulators16<Acc> block;
        if (!fromZero)
          block.load(ci + j);
        for (int64_t p = 0; p < k; ++p)
          block.addScaled(static_cast<Acc>(ta ? a[p * m + i] : a[i * k + p]),
                          bRows + p * ldb + j);
        block.store(ci + j);
      }
      for (; j < width; ++j) {
        Acc sum = fromZero ? Acc(0) : static_cast<Acc>(ci[j]);
        for (int64_t p = 0; p < k; ++p)
          sum += static_cast<Acc>(ta ? a[p * m + i] : a[i * k + p]) *
                 static_cast<Acc>(bRows[p * ldb + j]);
        ci[j] = static_cast<T>(sum);
      }
    }
  }
}

/// c[i..i+Rows, j0+j..j0+j+16] += op(a)[rows, p0..p0+kb] panel[.., j..j+16]:
/// a block of Rows x 16 elements of c that accumulate in registers over
/// the panel (of Acc, or of T as stored), each from +0 with its terms in
/// increasing p, and are added to c at the end (c is +0 there: the
/// kernels overwrite).
template <int64_t Rows, typename T, typename Acc, typename P>
GRADC_ALWAYS_INLINE void panelBlock(const T *GRADC_RESTRICT a, Transpose ta,
                                    const P *GRADC_RESTRICT panel, int64_t ldp,
                                    T *GRADC_RESTRICT c, int64_t m, int64_t n,
                                    int64_t k, int64_t i, int64_t j0, int64_t j,
                                    int64_t p0, int64_t kb) {
  Accumulators16<Acc> acc[Rows];
  for (int64_t p = 0; p < kb; ++p) {
    const P *bp = panel + p * ldp + j;
    for (int64_t r = 0; r < Rows; ++r)
      acc[r].addScaled(static_cast<Acc>(ta ? a[(p0 + p) * m + i + r]
                                           : a[(i + r) * k + p0 + p]),
                       bp);
  }
  for (int64_t r = 0; r < Rows; ++r)
    acc[r].addTo(c + (i + r) * n + j0 + j);
}

/// The rows [i, m) of a panel, fewer than 4: blocks of as many rows for
/// the columns that fill blocks of 16 (a weight's gradient of a layer with
/// two inputs, 2 x 64 x 200, was all scalar code in panelRows: 13 us of
/// the spiral MLP's gradient), then panelRows for the columns left.
template <typename T, typename Acc, typename P>
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
void panelLastRows(const T *GRADC_RESTRICT a, Transpose ta,
                   const P *GRADC_RESTRICT panel, int64_t ldp,
                   T *GRADC_RESTRICT c, int64_t m, int64_t n, int64_t k,
                   int64_t i, int64_t j0, int64_t nbFull, int64_t nb,
                   int64_t p0, int64_t kb) {
  for (int64_t j = 0; j < nbFull; j += 16) {
    switch (m - i) {
    case 3:
      panelBlock<3, T, Acc>(a, ta, panel, ldp, c, m, n, k, i, j0, j, p0, kb);
      break;
    case 2:
      panelBlock<2, T, Acc>(a, ta, panel, ldp, c, m, n, k, i, j0, j, p0, kb);
      break;
    case 1:
      panelBlock<1, T, Acc>(a, ta, panel, ldp, c, m, n, k, i, j0, j, p0, kb);
      break;
    default:
      break;
    }
  }
  panelRows<T, Acc>(a, ta, panel, c, m, n, k, i, m, j0, nbFull, nb, p0, kb,
                    ldp);
}

/// The portable kernel, c[m, n] += op(a)[m, k] op(b)[k, n]. b is copied a
/// panel (kBlock x nBlock) at a time into row-major order (transposing it
/// if asked), which keeps it in cache; then blocks of 4 rows x 16 columns
/// of c accumulate in registers over the whole panel (the innermost loops
/// have constant trip counts, so compilers unroll and vectorise them).
/// For floats each element adds all its terms in one accumulator, in
/// order, and is rounded once (c of f32 cannot hold an f64 partial sum,
/// and c + (a block's sum) would be another order), so the panel spans all
/// of k (on the heap when it does not fit the stack); i32 sums wrap, in
/// any order, so they keep blocks of 64. With fromZero c is taken as +0
/// (matmul's zeroing): the narrow and short-k kernels then start their
/// sums from +0 and only write c (a [200, 64] result was zeroed, read
/// back and converted for nothing); the others zero it first.
template <typename T, typename Acc = typename Accumulator<T>::type>
void matmulPortable(const T *GRADC_RESTRICT a, Transpose ta,
                    const T *GRADC_RESTRICT b, Transpose tb,
                    T *GRADC_RESTRICT c, int64_t m, int64_t n, int64_t k,
                    bool fromZero) {
  constexpr int64_t rows = 4, cols = 16, stackPanel = 64 * 128;
  constexpr bool whole = std::is_floating_point_v<Acc>;
  if (n < cols) {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<Acc, float>) {
      if (fromZero && rowVectorsFit<Acc>(n, tb)) {
        matmulRowVectors(a, ta, b, c, m, n, k);
        return;
      }
    }
    matmulNarrow<T, Acc>(a, ta, b, tb, c, m, n, k, fromZero);
    return;
  }
  if (k <= shortKMax) {
    matmulShortK<T, Acc>(a, ta, b, tb, c, m, n, k, fromZero);
    return;
  }
  if (fromZero)
    std::fill(c, c + m * n, T(0));
  if (m < rows && !tb) {
    // A few rows (a weight's gradient of a layer with two inputs): b's
    // rows are the panel as stored, and copying them would cost as much
    // as the product (into f64 for f32 data, 1.1 us of the spiral's
    // 2 x 200 x 64). Blocks of all of k and 256 columns.
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
      int64_t nb = std::min<int64_t>(256, n - j0);
      panelLastRows<T, Acc>(a, ta, b + j0, n, c, m, n, k, 0, j0, nb - nb % cols,
                            nb, 0, k);
    }
    return;
  }
  // A whole panel: all of k, and as many columns (a multiple of 16) as
  // keep it within 256 KiB.
  const int64_t kBlock = whole ? k : 64;
  const int64_t nBlock =
      whole ? std::max<int64_t>(cols, (32768 / k) / cols * cols) : 128;
  StackOrHeap<Acc, stackPanel> buffer(kBlock * nBlock);
  Acc *GRADC_RESTRICT panel = buffer.data();
  for (int64_t j0 = 0; j0 < n; j0 += nBlock) {
    int64_t nb = std::min(nBlock, n - j0);
    int64_t nbFull = nb - nb % cols;
    for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
      int64_t kb = std::min(kBlock, k - p0);
      for (int64_t p = 0; p < kb; ++p)
        for (int64_t j = 0; j < nb; ++j)
          panel[p * nb + j] = static_cast<Acc>(tb ? b[(j0 + j) * k + p0 + p]
                                                  : b[(p0 + p) * n + j0 + j]);
      int64_t i = 0;
      for (; i + rows <= m; i += rows) {
        // panelBlock<rows> computes the same block. It is written out here
        // because calling it measured up to 10% slower on K1's 784 x 256 x
        // 64 product in one harness (equal in another: GCC's layout of
        // this function's stack panel), and this path is every large
        // product's.
        for (int64_t j = 0; j < nbFull; j += cols) {
          Acc acc[rows][cols] = {};
          for (int64_t p = 0; p < kb; ++p) {
            const Acc *bp = panel + p * nb + j;
            for (int64_t r = 0; r < rows; ++r) {
              Acc air = static_cast<Acc>(ta ? a[(p0 + p) * m + i + r]
                                            : a[(i + r) * k + p0 + p]);
              for (int64_t q = 0; q < cols; ++q)
                acc[r][q] += air * bp[q];
            }
          }
          for (int64_t r = 0; r < rows; ++r) {
            T *GRADC_RESTRICT cr = c + (i + r) * n + j0 + j;
            for (int64_t q = 0; q < cols; ++q)
              cr[q] = static_cast<T>(static_cast<Acc>(cr[q]) + acc[r][q]);
          }
        }
        panelRows<T, Acc>(a, ta, panel, c, m, n, k, i, i + rows, j0, nbFull, nb,
                          p0, kb, nb);
      }
      if (i < m)
        panelLastRows<T, Acc>(a, ta, panel, nb, c, m, n, k, i, j0, nbFull, nb,
                              p0, kb);
    }
  }
}

/// c[m] (+)= a[m, k] b[k]: one dot product per row, its terms added in
/// increasing p into one accumulator (docs/IR.md); four rows at a time,
/// so that four independent sums hide the latency of one.
template <typename T, typename Acc = typename Accumulator<T>::type>
void matvec(const T *GRADC_RESTRICT a, const T *GRADC_RESTRICT b,
            T *GRADC_RESTRICT c, int64_t m, int64_t k) {
  constexpr int64_t rows = 4;
  int64_t i = 0;
  for (; i + rows <= m; i += rows) {
    Acc sum[rows];
    for (int64_t r = 0; r < rows; ++r)
      sum[r] = static_cast<Acc>(c[i + r]);
    for (int64_t p = 0; p < k; ++p) {
      Acc bp = static_cast<Acc>(b[p]);
      for (int64_t r = 0; r < rows; ++r)
        sum[r] += static_cast<Acc>(a[(i + r) * k + p]) * bp;
    }
    for (int64_t r = 0; r < rows; ++r)
      c[i + r] = static_cast<T>(sum[r]);
  }
  for (; i < m; ++i) {
    Acc sum = static_cast<Acc>(c[i]);
    for (int64_t p = 0; p < k; ++p)
      sum += static_cast<Acc>(a[i * k + p]) * static_cast<Acc>(b[p]);
    c[i] = static_cast<T>(sum);
  }
}

} // namespace detail

/// c[m, n] = op(a)[m, k] @ op(b)[k, n], row-major, where op transposes
/// when asked: a transposed `a` is stored [k, m], a transposed `b` [n, k].
/// With `accumulate`, adds to c instead of overwriting it.
template <typename T>
GRADC_ALWAYS_INLINE void matmul(const T *a, Transpose ta, const T *b,
                                Transpose tb, T *c, int64_t m, int64_t n,
                                int64_t k, bool accumulate = false) {
  if (m == 0 || n == 0 || k == 0 || (n == 1 && !ta)) {
    if (!accumulate)
      std::fill(c, c + m * n, T(0));
    // A matrix-vector product; b is k contiguous elements either way.
    if (m != 0 && n != 0 && k != 0)
      detail::matvec(a, b, c, m, k);
    return;
  }
  detail::matmulPortable(a, ta, b, tb, c, m, n, k, !accumulate);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

//===----------------------------------------------------------------------===//
// Threads (docs/ABI.md, "Threads")
//===----------------------------------------------------------------------===//

#ifdef GRADC_USE_BLAS
// OpenBLAS's thread count, when the CBLAS is OpenBLAS (weak: null when
// the library has no such function).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));
#endif

/// The threads of the loops that the `parallel` loop pass marks
/// (docs/Loops.md): GRADC_NUM_THREADS, read once; 1 (today's single
/// thread) when it is unset or not a positive decimal integer, at most
/// 256. When it is set and the CBLAS is OpenBLAS, OpenBLAS uses as many.
inline int numThreads() {
  static const int threads = [] {
    const char *text = std::getenv("GRADC_NUM_THREADS");
    if (!text)
      return 1;
    char *end = nullptr;
    long n = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || n < 1)
      n = 1;
    n = std::min(n, 256L);
#ifdef GRADC_USE_BLAS
    if (openblas_set_num_threads)
      openblas_set_num_threads(static_cast<int>(n));
#endif
    return static_cast<int>(n);
  }();
  return threads;
}

// A loop marked parallel is printed after GRADC_PARALLEL_FOR(condition):
// compiled with OpenMP (-fopenmp) it runs on numThreads() threads when the
// condition holds (several threads, enough work), in static chunks;
// without OpenMP it is an ordinary loop, and nothing links libgomp. In
// the first copy of a range version (docs/Loops.md) the loop sets the
// out-of-range flag, and the lane loops in it one flag per lane: each
// thread sets its own copies, or-ed together when the team joins
// (GRADC_PARALLEL_FOR_FLAG(flag, condition) and
// GRADC_PARALLEL_FOR_FLAGS(flag, laneFlags, condition)).
#ifdef _OPENMP
#define GRADC_PRAGMA(x) _Pragma(#x)
#define GRADC_PARALLEL_FOR(...)                                                \
  GRADC_PRAGMA(omp parallel for schedule(static) if (__VA_ARGS__)              \
                   num_threads(gradc::numThreads()))
#define GRADC_PARALLEL_FOR_FLAG(flag, ...)                                     \
  GRADC_PRAGMA(omp parallel for schedule(static) if (__VA_ARGS__)              \
                   num_threads(gradc::numThreads()) reduction(| : flag))
#define GRADC_PARALLEL_FOR_FLAGS(flag, laneFlags, ...)                         \
  GRADC_PRAGMA(omp parallel for schedule(static) if (__VA_ARGS__)              \
                   num_threads(gradc::numThreads()) reduction(| : flag)        \
                       reduction(| : laneFlags[:8]))
// The same for 16 lanes (f32 sums with accumulate = "f32").
#define GRADC_PARALLEL_FOR_FLAGS16(flag, laneFlags, ...)                       \
  GRADC_PRAGMA(omp parallel for schedule(static) if (__VA_ARGS__)              \
                   num_threads(gradc::numThreads()) reduction(| : flag)        \
                       reduction(| : laneFlags[:16]))
#else
#define GRADC_PARALLEL_FOR(...)
#define GRADC_PARALLEL_FOR_FLAG(flag, ...)
#define GRADC_PARALLEL_FOR_FLAGS(flag, laneFlags, ...)
#define GRADC_PARALLEL_FOR_FLAGS16(flag, laneFlags, ...)
#endif

// A loop over the lanes of a reduction (loops::isLaneLoop: `lanes[k] +=
// x[j * 8 + k]` for k < 8) is printed after GRADC_LANE_LOOP: kept rolled,
// so that GCC vectorises it across its lanes. Left alone, GCC unrolls it
// fully and then runs the 8 lanes as scalar code (K3's gradient: 1.2-1.7
// ms, 0.7-0.9 ms rolled; the same bits). Not for Clang, which vectorises
// the unrolled lanes as one <8 x double> (test/Loops/vectorize-sum.grad)
// and, kept rolled, would add them two at a time through memory.
#if defined(__GNUC__) && !defined(__clang__)
#define GRADC_LANE_LOOP _Pragma("GCC unroll 1")
#else
#define GRADC_LANE_LOOP
#endif

/// The 8 f64 lanes of a sum (docs/IR.md, "Numbers") while a chunk loop
/// adds f32 terms to them (PrintCpp's beginLaneVectors): one <8 x double>
/// in a register where the compiler has vector extensions, the 8 terms
/// converted in one instruction (convert8). Lane k adds term k: the same
/// bits as `lanes[k] += f64(terms[k])`.
class Lanes8 {
public:
  explicit Lanes8(const double *GRADC_RESTRICT lanes) {
    std::memcpy(&v, lanes, sizeof(v));
  }
  GRADC_ALWAYS_INLINE void add(const float *GRADC_RESTRICT terms) {
#ifdef GRADC_VECTOR_EXTENSIONS
    detail::Vec8<double> t;
    detail::load8(t, terms);
    v += t;
#else
    for (int k = 0; k < 8; ++k)
      v[k] += static_cast<double>(terms[k]);
#endif
  }
  void store(double *GRADC_RESTRICT lanes) const {
    std::memcpy(lanes, &v, sizeof(v));
  }

private:
#ifdef GRADC_VECTOR_EXTENSIONS
  detail::Vec8<double> v;
#else
  double v[8];
#endif
};

// A lane loop that also adds f32 terms to f64 sums other than its lanes
// (K5's column sums) is printed twice (PrintCpp's widenedLanes): for GCC
// as two loops with the terms converted between them by widen8 (K5's
// gradient: 298 to 257 us, with Lanes8), as one loop for the rest (Clang:
// 546 us as one, 621 as two). Both add the same terms in the same order.
#if defined(__GNUC__) && !defined(__clang__)
#define GRADC_WIDEN_COLUMNS 1
#else
#define GRADC_WIDEN_COLUMNS 0
#endif

/// to[k] = f64(from[k]) for k < 8: a lane loop's f32 terms of f64 sums
/// (PrintCpp's widenedLanes), converted in one instruction where GCC's
/// vectorised lane loop converts them four at a time (Vec8 and convert8,
/// above); exact either way.
GRADC_ALWAYS_INLINE void widen8(double *GRADC_RESTRICT to,
                                const float *GRADC_RESTRICT from) {
#ifdef GRADC_VECTOR_EXTENSIONS
  detail::Vec8<double> v;
  detail::load8(v, from);
  std::memcpy(to, &v, sizeof(v));
#else
  for (int k = 0; k < 8; ++k)
    to[k] = static_cast<double>(from[k]);
#endif
}

// A loop that writes one row of a nest elementwise (loops::isRowStoreLoop:
// K4's outer product `d_w[i * 4 + j] = g[i] * x[j] + 0` for j < 4) is
// printed after GRADC_ROW_LOOP: kept rolled until GCC vectorises it, one
// vector per row. Left alone, GCC unrolls it first and then vectorises
// the loop around it, the rows' loop, as columns, transposed into rows
// by shuffles (K4's gradient: 26.5 to 24.6 ns, the same bits). Clang
// vectorises the rows as they are.
#if defined(__GNUC__) && !defined(__clang__)
#define GRADC_ROW_LOOP _Pragma("GCC unroll 1")
#else
#define GRADC_ROW_LOOP
#endif

/// to[k] = f64(from[k]) for k < 4, in one vcvtps2pd where the target has
/// AVX: the factors that the columns of a dot loop share (PrintCpp's
/// dotColumns), widened at once rather than each alone, and broadcast
/// from that vector. (GCC 12 widens a loop of 4, or a vector by
/// __builtin_convertvector, two at a time and joins the halves.) Exact
/// either way.
GRADC_ALWAYS_INLINE void widen4(double *GRADC_RESTRICT to,
                                const float *GRADC_RESTRICT from) {
#if defined(__AVX__) && (defined(__GNUC__) || defined(__clang__))
  _mm256_storeu_pd(to, _mm256_cvtps_pd(_mm_loadu_ps(from)));
#else
  for (int k = 0; k < 4; ++k)
    to[k] = static_cast<double>(from[k]);
#endif
}

// A small loop of f64 dot products (loops::isDotLoop: K4's `w @ x`) is
// printed twice: as columns, one step adding a product to every row's
// sum, for GCC, which vectorises the rows' own sums two lanes at a time
// (K4's gradient, g++ -O3 -march=native: 22.0 ns as rows, 19.4 as
// columns), and as rows for the rest (Clang: 17.6 ns as rows, 20.3 as
// columns). Both add each sum's terms in the same order: the same bits.
#if defined(__GNUC__) && !defined(__clang__)
#define GRADC_DOT_COLUMNS 1
#else
#define GRADC_DOT_COLUMNS 0
#endif

// A loop whose iterations touch disjoint memory (loops::Stmt::independent:
// the two rows of a jammed row loop, JamRows.cpp) is printed after
// GRADC_IVDEP, so that GCC vectorises it without checking at run time
// whether its pointers overlap: it checks at most 10 pairs, and K5's
// jammed gradient has 18 (left scalar, its gradient took 440 us, not
// 270). Clang checks them all at run time.
#if defined(__GNUC__) && !defined(__clang__)
#define GRADC_IVDEP _Pragma("GCC ivdep")
#else
#define GRADC_IVDEP
#endif

#ifdef GRADC_USE_BLAS
/// Below this many multiply-adds (m n k) a CBLAS call costs more than the
/// product itself (a 4x4 matrix-vector product takes about 6x longer
/// through cblas_sgemm than inline), so the inline kernel runs instead.
constexpr int64_t blasMinWork = 32 * 32 * 32;

// Always inlined, like the portable entry point: with the sizes known at
// the call (K4's 4x4), the size test folds and the inline kernel is
// specialised to them; a call through here would cost 5x the product.
GRADC_ALWAYS_INLINE void matmul(const float *a, Transpose ta, const float *b,
                                Transpose tb, float *c, int64_t m, int64_t n,
                                int64_t k, bool accumulate = false) {
  if (m * n * k < blasMinWork) {
    matmul<float>(a, ta, b, tb, c, m, n, k, accumulate);
    return;
  }
  numThreads(); // OpenBLAS's threads, once
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n),
              accumulate ? 1.0f : 0.0f, c, static_cast<int>(n));
}
GRADC_ALWAYS_INLINE void matmul(const double *a, Transpose ta, const double *b,
                                Transpose tb, double *c, int64_t m, int64_t n,
                                int64_t k, bool accumulate = false) {
  if (m * n * k < blasMinWork) {
    matmul<double>(a, ta, b, tb, c, m, n, k, accumulate);
    return;
  }
  numThreads(); // OpenBLAS's threads, once
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n),
              accumulate ? 1.0 : 0.0, c, static_cast<int>(n));
}
#endif

/// The same product of f32 matrices in the second order of docs/IR.md
/// (`accumulate = "f32"`): each element adds its f32 products in
/// increasing p into one f32 accumulator, every multiply and add rounded
/// to f32 (the printers call it for a matmul kernel whose accumulator
/// type is f32).
GRADC_ALWAYS_INLINE void matmulF32(const float *a, Transpose ta, const float *b,
                                   Transpose tb, float *c, int64_t m, int64_t n,
                                   int64_t k) {
  if (m == 0 || n == 0 || k == 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
#ifdef GRADC_USE_BLAS
  // b as stored with 9 to 15 columns stays inline at any size:
  // matmulRowVectors is as fast as OpenBLAS's AVX-512 sgemm on GMM's
  // products (twice its SSE3 kernels) and keeps this order's bits.
  if (m * n * k >= blasMinWork && !detail::rowVectorsFit<float>(n, tb)) {
    numThreads(); // OpenBLAS's threads, once
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), 1.0f, a,
                static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n),
                0.0f, c, static_cast<int>(n));
    return;
  }
#endif
  if (n == 1 && !ta) {
    std::fill(c, c + m, 0.0f);
    detail::matvec<float, float>(a, b, c, m, k);
    return;
  }
  detail::matmulPortable<float, float>(a, ta, b, tb, c, m, n, k, true);
}

//===----------------------------------------------------------------------===//
// Normalisations along one axis
//
// A tensor seen as [outer, n, inner] with the axis in the middle: element
// (o, a, i) is at (o * n + a) * inner + i.
//===----------------------------------------------------------------------===//

namespace detail {
/// f32 sums accumulate in double (a float accumulator stops growing at
/// 2^24); f64 in double.
template <typename T> struct SumOf {
  using type = T;
};
template <> struct SumOf<float> {
  using type = double;
};
} // namespace detail

/// y = x - logsumexp(x) along the axis, computed stably (max subtracted).
template <typename T>
void logSoftmax(const T *GRADC_RESTRICT x, T *GRADC_RESTRICT y, int64_t outer,
                int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T *xs = x + o * n * inner + i;
      T *ys = y + o * n * inner + i;
      T top = -std::numeric_limits<T>::infinity();
      for (int64_t a = 0; a < n; ++a)
        top = gradc::maximum(top, xs[a * inner]);
      if (top == -std::numeric_limits<T>::infinity())
        top = T(0); // every entry -inf: keep -inf - (-inf) from being NaN
      typename detail::SumOf<T>::type sum = 0;
      for (int64_t a = 0; a < n; ++a)
        sum += gradc::exp(xs[a * inner] - top);
      T shift = top + gradc::log(static_cast<T>(sum));
      for (int64_t a = 0; a < n; ++a)
        ys[a * inner] = xs[a * inner] - shift;
    }
  }
}

/// y = e^x / sum(e^x) along the axis, computed stably.
template <typename T>
void softmax(const T *GRADC_RESTRICT x, T *GRADC_RESTRICT y, int64_t outer,
             int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T *xs = x + o * n * inner + i;
      T *ys = y + o * n * inner + i;
      T top = -std::numeric_limits<T>::infinity();
      for (int64_t a = 0; a < n; ++a)
        top = gradc::maximum(top, xs[a * inner]);
      if (top == -std::numeric_limits<T>::infinity())
        top = T(0);
      typename detail::SumOf<T>::type sum = 0;
      for (int64_t a = 0; a < n; ++a) {
        ys[a * inner] = gradc::exp(xs[a * inner] - top);
        sum += ys[a * inner];
      }
      T scale = static_cast<T>(1 / sum);
      for (int64_t a = 0; a < n; ++a)
        ys[a * inner] *= scale;
    }
  }
}

/// y[o, i] = ln sum_a e^x[o, a, i], computed stably.
template <typename T>
void logSumExp(const T *GRADC_RESTRICT x, T *GRADC_RESTRICT y, int64_t outer,
               int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T *xs = x + o * n * inner + i;
      T top = -std::numeric_limits<T>::infinity();
      for (int64_t a = 0; a < n; ++a)
        top = gradc::maximum(top, xs[a * inner]);
      if (top == std::numeric_limits<T>::infinity() ||
          top == -std::numeric_limits<T>::infinity()) {
        y[o * inner + i] = top;
        continue;
      }
      typename detail::SumOf<T>::type sum = 0;
      for (int64_t a = 0; a < n; ++a)
        sum += gradc::exp(xs[a * inner] - top);
      y[o * inner + i] = top + gradc::log(static_cast<T>(sum));
    }
  }
}

/// loss[r] = logsumexp(logits[r, :]) - logits[r, labels[r]] for `rows`
/// rows of `classes` logits. A label outside [0, classes) is
/// GRADC_ERROR_INDEX.
template <typename T>
int softmaxCrossEntropy(const T *GRADC_RESTRICT logits,
                        const int32_t *GRADC_RESTRICT labels,
                        T *GRADC_RESTRICT loss, int64_t rows, int64_t classes) {
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] < 0 || labels[r] >= classes)
      return GRADC_ERROR_INDEX;
  logSumExp(logits, loss, rows, classes, 1);
  for (int64_t r = 0; r < rows; ++r)
    loss[r] -= logits[r * classes + labels[r]];
  return GRADC_OK;
}

/// out[r, :] = the one-hot row of indices[r] with `depth` classes; an index
/// outside [0, depth) gives a row of zeros (as TensorFlow's one_hot).
template <typename T>
void oneHot(const int32_t *GRADC_RESTRICT indices, T *GRADC_RESTRICT out,
            int64_t rows, int64_t depth) {
  std::fill(out, out + rows * depth, T(0));
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0 && indices[r] < depth)
      out[r * depth + indices[r]] = T(1);
}

} // namespace gradc

#endif // GRADC_KERNELS_H
