//===- LoopIR.h - The loop IR below the tensor IR ---------------*- C++ -*-===//
//
// The loop IR is what every tensor op becomes before a backend sees it:
// buffers, loop nests over symbolic extents, affine (flat) indexing,
// scalar expressions over a small set of primitives and math intrinsics,
// accumulations with an explicit combiner, calls of library kernels and of
// other functions, and run-time checks. Every statement keeps its origin
// (the tensor op, its source location and the rule it came from), so that
// a printer can keep the comments of today's generated code.
//
// It is designed to be *printed*: a C++ printer writes one `for` per loop
// and one assignment per store; an LLVM printer builds the same loops with
// an IRBuilder. No printer needs to know what a "softmax" is: lowering
// (lib/Loops/Lower*.cpp) made every op primitive. docs/Loops.md describes
// the model, the textual form and the numerical rules.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_LOOPS_LOOPIR_H
#define GRADC_LOOPS_LOOPIR_H

#include "gradc/Basic/Interned.h"
#include "gradc/Basic/SourceManager.h"
#include "gradc/Ops/Scalar.h"
#include "gradc/Ops/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Allocator.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gradc::ir {
class Op;
enum class Provenance : uint8_t;
} // namespace gradc::ir

namespace gradc::loops {

// The scalar vocabulary (types, primitives, intrinsics) is the op table's
// (gradc/Ops/Scalar.h): elementwise ops expand into it there, and the
// interpreter evaluates it with the same functions as the loop evaluator.
using gradc::fromDType;
using gradc::Intrinsic;
using gradc::intrinsicArity;
using gradc::intrinsicName;
using gradc::isComparison;
using gradc::isFloatType;
using gradc::isUnaryPrim;
using gradc::PrimOp;
using gradc::primOpName;
using gradc::ScalarType;
using gradc::scalarTypeName;

struct Buffer;

/// A scalar (or index) expression. Trees, not DAGs: a printer may print
/// an expression wherever it is used.
struct Expr {
  enum class Kind : uint8_t {
    Const,     ///< `value` of `type`
    Size,      ///< the size name `name` (index)
    LoopVar,   ///< loop variable number `var` (index)
    Load,      ///< `buffer[args[0]]`
    Prim,      ///< `op(args...)`
    Intrinsic, ///< `fn(args...)`
    Select,    ///< `args[0] ? args[1] : args[2]`
    Cast,      ///< `args[0]` converted to `type`
  };
  // Small fields first, so that a node is 64 bytes.
  Kind kind;
  ScalarType type;
  PrimOp op = PrimOp::Add;
  Intrinsic fn = Intrinsic::Exp;
  unsigned var = 0;
  double value = 0;
  /// Interned: a chain of 100,000 steps has millions of size nodes.
  InternedString name;
  Buffer *buffer = nullptr;
  /// The operands, kept in the node up to two (no allocation of their
  /// own: a chain of 100,000 steps has millions of nodes).
  llvm::SmallVector<std::unique_ptr<Expr>, 2> args;

  Expr(Kind kind, ScalarType type) : kind(kind), type(type) {}
  // Nodes come from a free list of their own (LoopIR.cpp): passes clone
  // and free millions of them, and glibc's malloc, which coalesces each
  // freed chunk with its neighbours, then touches memory all over a heap
  // of gigabytes (100,000 steps of a gradient).
  static void *operator new(std::size_t size);
  static void operator delete(void *p, std::size_t size);
  std::unique_ptr<Expr> clone() const;
  /// A copy of this node without its operands.
  std::unique_ptr<Expr> cloneNode() const;
};

using ExprPtr = std::unique_ptr<Expr>;

/// Builders; they fold constants of index arithmetic (`i * 1`, `0 + j`)
/// so that affine indices print as a person would write them.
ExprPtr constant(ScalarType type, double value);
ExprPtr index(int64_t value);
ExprPtr sizeRef(llvm::StringRef name);
ExprPtr loopVar(unsigned var);
ExprPtr load(Buffer *buffer, ExprPtr index);
ExprPtr prim(PrimOp op, ExprPtr a, ExprPtr b = nullptr);
ExprPtr intrinsic(Intrinsic fn, ExprPtr a, ExprPtr b = nullptr);
ExprPtr select(ExprPtr cond, ExprPtr a, ExprPtr b);
ExprPtr cast(ScalarType to, ExprPtr a);
/// Whether `e` is the index constant `v`.
bool isIndexConst(const Expr &e, int64_t v);

/// A symbolic extent or stride: the product of a known factor and size
/// names, e.g. `3 * N * M`.
ExprPtr extentOf(llvm::ArrayRef<Dim> dims);

/// A memory region of one element type.
struct Buffer {
  enum class Kind : uint8_t {
    Param,    ///< a parameter of the function (read-only)
    Output,   ///< a result of the function, written by it
    Scratch,  ///< temporary memory of the function (heap or planned slot)
    Stack,    ///< temporary memory small enough for the stack
    Local,    ///< one scalar, a register in printed code (accumulators)
    Constant, ///< read-only data known at compile time (`data`)
    Alias,    ///< a view of `base` starting at element `offset`
  };
  Kind kind;
  DType dtype;
  /// Dense and unique within its function (LoopFunction::addBuffer counts
  /// them; an erased buffer's number is not reused): a pass's table per
  /// buffer can be a vector of LoopFunction::bufferIds entries rather than
  /// a hash map (a chain of 10,000 steps has 60,000 buffers).
  unsigned id = 0;
  /// The shape as the tensor IR typed it (empty for a local).
  Shape shape;
  /// A unique printable name, the user's where there is one (`h`, `d_x`).
  std::string name;
  /// For Param/Output: the position in the signature.
  unsigned position = 0;
  /// For Alias.
  Buffer *base = nullptr;
  ExprPtr offset;
  /// For Constant: the values, row-major.
  std::vector<double> data;
  /// For Scratch/Stack: the slot that buffer planning assigned (-1: none).
  int slot = -1;
  /// For the lanes of a float maximum (Lowering::maxLanes), whose result
  /// is computed again in order when the lanes give 0 or NaN: a `max=`
  /// into them may keep either zero of two equal zeros (every other value
  /// has one representation, and NaN still gives NaN). The LLVM printer
  /// keeps `old` unless the new value is greater or NaN there
  /// (laneExtremum): one vmaxps merge-masked into the new value.
  bool zeroSignFree = false;
  /// For the terms of two chunks of a sum in 8 f64 lanes (`pair`,
  /// PairChunks.cpp): the loop over 16 that stores them is a lane loop
  /// (isLaneLoop), which the printers vectorise as 16 floats.
  bool pairedTerms = false;
  /// For Scratch whose length no tensor type gives (the snapshots of a
  /// checkpointed loop): its element count, an index expression of the
  /// function's size names only, and `shape` is empty. Such a buffer is
  /// always heap scratch and is indexed flat.
  ExprPtr count;

  /// The number of elements, symbolic.
  // From a free list, as Expr (a chain of 100,000 steps has a million).
  static void *operator new(std::size_t size);
  static void operator delete(void *p, std::size_t size);

  ExprPtr numElements() const {
    return count ? count->clone() : extentOf(shape);
  }
  /// The buffer that a view (an alias, or an alias of one) stands for:
  /// this buffer itself when it is not a view.
  Buffer *root() {
    Buffer *b = this;
    while (b->kind == Kind::Alias && b->base)
      b = b->base;
    return b;
  }
  const Buffer *root() const { return const_cast<Buffer *>(this)->root(); }
  bool isReadOnly() const {
    return kind == Kind::Param || kind == Kind::Constant ||
           (kind == Kind::Alias && base && base->isReadOnly());
  }
};

llvm::StringRef bufferKindName(Buffer::Kind k);

/// Why a statement exists: the tensor op it lowers, where that op came
/// from in the source, and the gradient rule (or other provenance note)
/// that made the op. A printer keeps these as comments.
struct Origin {
  /// The texts of one op, kept once in its function (LoopFunction::
  /// saveOrigin) and pointed to by each of its statements, which are
  /// many (a gradient of 100,000 steps has millions).
  struct Text {
    /// `exp` (the op table's name), or "" when no op (a copy to an output).
    llvm::StringRef opName;
    /// The op's first result as printed, `%h`.
    llvm::StringRef result;
    /// The op's provenance note, "" for a source op.
    llvm::StringRef rule;
  };

  const ir::Op *op = nullptr;
  /// Null: no text (every field "").
  const Text *text = nullptr;
  SourceLoc loc;
  /// Which gradient mechanism made the op (ir::Provenance::Source, 0, for
  /// forward code); the field a printer or pass asks, `rule` is the text.
  ir::Provenance provenance{};

  llvm::StringRef opName() const { return text ? text->opName : ""; }
  llvm::StringRef result() const { return text ? text->result : ""; }
  llvm::StringRef rule() const { return text ? text->rule : ""; }
};

/// How an accumulation combines.
enum class Combiner : uint8_t { Add, Max, Min };
llvm::StringRef combinerName(Combiner c);

/// The status of docs/ABI.md that a failed `check` returns from generated
/// code (the evaluator reports its message instead).
enum class CheckStatus : uint8_t { DivZero, Index };
/// `GRADC_ERROR_DIV_ZERO`, `GRADC_ERROR_INDEX`: the ABI's spelling.
llvm::StringRef checkStatusName(CheckStatus s);

/// Library kernels.
enum class Kernel : uint8_t { MatMul };
llvm::StringRef kernelName(Kernel k);

/// A std::vector that most statements leave empty (a call's buffers, a
/// kernel's operands, a parallel loop's privates): one pointer, and a
/// vector of its own only once it has elements, so that a statement of
/// another kind does not carry 24 bytes for it. Iterators are pointers.
template <typename T> class RareVector {
public:
  RareVector() = default;
  RareVector(const RareVector &o) { *this = o; }
  RareVector(RareVector &&) = default;
  RareVector &operator=(const RareVector &o) {
    if (this != &o)
      *this = std::vector<T>(o.begin(), o.end());
    return *this;
  }
  RareVector &operator=(RareVector &&) = default;
  RareVector &operator=(std::vector<T> v) {
    items =
        v.empty() ? nullptr : std::make_unique<std::vector<T>>(std::move(v));
    return *this;
  }

  T *begin() { return items ? items->data() : nullptr; }
  T *end() { return items ? items->data() + items->size() : nullptr; }
  const T *begin() const { return items ? items->data() : nullptr; }
  const T *end() const {
    return items ? items->data() + items->size() : nullptr;
  }
  size_t size() const { return items ? items->size() : 0; }
  bool empty() const { return !items || items->empty(); }
  T &operator[](size_t i) { return (*items)[i]; }
  const T &operator[](size_t i) const { return (*items)[i]; }
  operator llvm::ArrayRef<T>() const { return {begin(), end()}; }

  void push_back(T x) { vector().push_back(std::move(x)); }
  template <typename... Args> T &emplace_back(Args &&...args) {
    return vector().emplace_back(std::forward<Args>(args)...);
  }
  template <typename It> void assign(It first, It last) {
    *this = std::vector<T>(first, last);
  }
  template <typename It> void insert(const T *at, It first, It last) {
    size_t i = at - begin();
    vector().insert(vector().begin() + i, first, last);
  }
  void clear() { items.reset(); }

private:
  std::vector<T> &vector() {
    if (!items)
      items = std::make_unique<std::vector<T>>();
    return *items;
  }
  std::unique_ptr<std::vector<T>> items;
};

struct Stmt {
  enum class Kind : uint8_t {
    For,        ///< for var in [0, extent): body
    Store,      ///< buffer[index] = value (value has the buffer's type)
    Accumulate, ///< buffer[index] = combiner(buffer[index], value)
    Check,      ///< if !cond: fail with `message`, status `status`
    KernelCall, ///< a library kernel (operands below)
    Call,       ///< a function of the module or an extern function
  };
  // The small fields of every kind first, together, the fields of the
  // rare kinds in RareVectors and the origin's texts once per op: a
  // statement is 216 bytes (a gradient of 100,000 steps has millions).
  Kind kind;

  // For.
  /// Set by the `parallel` pass (Parallel.cpp) on an outermost loop whose
  /// iterations are independent: a printer may run them on several
  /// threads, in any order, with bitwise the same results.
  bool parallel = false;
  /// Set by the `jam` pass (JamRows.cpp) on a loop that it made of two
  /// rows' loops and whose iterations touch disjoint memory: each buffer
  /// that it writes (other than a local) it accesses only at its own
  /// variable. A printer may say so to the C++ compiler (PrintCpp:
  /// GRADC_IVDEP), which otherwise checks every pair of pointers at run
  /// time before it vectorises (GCC gives up beyond 10 pairs).
  bool independent = false;
  // Accumulate.
  Combiner combiner = Combiner::Add;
  // Check.
  CheckStatus status = CheckStatus::Index;
  // KernelCall MatMul: z[zOff + i*N + j] = sum_p a[aOff + i*K + p] *
  // b[bOff + p*N + j], accumulated in `accType` in increasing p.
  Kernel kernel = Kernel::MatMul;
  ScalarType accType = ScalarType::F64;
  // Call.
  bool isExtern = false;
  /// The callee returns an ABI status that is checked.
  bool checksStatus = false;
  // For.
  unsigned var = 0;

  Origin origin;

  // For.
  ExprPtr extent;
  std::vector<std::unique_ptr<Stmt>> body;
  /// For a parallel loop: the locals and stack buffers that only this
  /// loop touches and that each iteration writes before it reads them;
  /// every thread (every iteration) has its own copy.
  RareVector<Buffer *> privates;
  /// For a parallel loop: the estimated operations of the whole loop (an
  /// index expression of the sizes); threads are used only when it is at
  /// least parallelMinWork.
  std::unique_ptr<Expr> work;

  // Store, Accumulate.
  Buffer *buffer = nullptr;
  ExprPtr index;
  ExprPtr value;

  // Check.
  ExprPtr cond;
  std::string message;

  // KernelCall, Call.
  /// Call: the outputs, then the inputs. KernelCall: z, a, b.
  RareVector<Buffer *> outputs, inputs;
  /// KernelCall: zOff, aOff, bOff, M, K, N. Call: empty, or one element
  /// offset per output, from which the callee's result is written into
  /// that buffer (a loop's per-step output, written in place at the
  /// step's position in its stacked buffer: LowerControl.cpp).
  RareVector<ExprPtr> operands;

  // Call.
  std::string callee;
  /// The callee's size names, each with its value here.
  RareVector<std::pair<std::string, ExprPtr>> sizeArgs;

  explicit Stmt(Kind kind) : kind(kind) {}
  // From a free list, as Expr.
  static void *operator new(std::size_t size);
  static void operator delete(void *p, std::size_t size);
};

using StmtPtr = std::unique_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

/// One function of the tensor IR, lowered.
struct LoopFunction {
  std::string name;
  /// The size names that the parameters bind, in signature order.
  std::vector<std::string> sizeNames;
  std::vector<Buffer *> params, outputs;
  /// Every buffer, in creation order (params first).
  std::vector<std::unique_ptr<Buffer>> buffers;
  /// One more than the largest Buffer::id given out.
  unsigned bufferIds = 0;
  Block body;
  /// Number of loop variables used (they are numbered 0..numVars-1).
  unsigned numVars = 0;
  /// The names of `buffers` (a pass that erases a buffer erases its name
  /// too), and for each base name the first suffix not yet tried, so that
  /// naming a buffer is not a walk over all of them (a 100,000-op chain).
  llvm::StringMap<unsigned> bufferNames, nextSuffix;

  /// A copy of `text` that lives as long as the function. Copied here, not
  /// by llvm::StringSaver: its `save` is compiled into libLLVM, and under
  /// AddressSanitizer the allocator's inline code in gradc poisons the
  /// slabs it makes while libLLVM's copy does not unpoison what it hands
  /// out (FuzzABI: use-after-poison).
  llvm::StringRef saveText(llvm::StringRef text) {
    char *p = textStorage.Allocate<char>(text.size() + 1);
    std::copy(text.begin(), text.end(), p);
    p[text.size()] = '\0';
    return {p, text.size()};
  }
  /// Texts for statements' Origin::text, saved as long as the function
  /// lives.
  const Origin::Text *saveOrigin(llvm::StringRef opName, llvm::StringRef result,
                                 llvm::StringRef rule) {
    return new (textStorage.Allocate<Origin::Text>())
        Origin::Text{opName, saveText(result), saveText(rule)};
  }

  Buffer *addBuffer(Buffer::Kind kind, DType dtype, llvm::ArrayRef<Dim> shape,
                    llvm::StringRef name);
  /// Whether parameter `i` is read anywhere (a signature can leave out
  /// the ones that are not, instead of guessing from printed text).
  bool isParamRead(unsigned i) const;

private:
  llvm::BumpPtrAllocator textStorage;
};

/// A table from the buffers of one function to `T`: a slot per Buffer::id
/// and the entries of the buffers it holds, in the order they came. No
/// hashing, and memory for the buffers held only (a pass over a long chain
/// notes a few sites of each of 60,000 buffers).
template <typename T> class BufferTable {
public:
  BufferTable() = default;
  explicit BufferTable(const LoopFunction &fn) : slots(fn.bufferIds, none) {}

  /// The entry of `b`, and whether this call made it. (A buffer added to
  /// the function after the table was made is welcome too.)
  std::pair<T &, bool> insert(const Buffer *b) {
    if (b->id >= slots.size())
      slots.resize(b->id + 1, none);
    unsigned &slot = slots[b->id];
    bool made = slot == none;
    if (made) {
      slot = entries.size();
      entries.emplace_back();
    }
    return {entries[slot], made};
  }
  T &operator[](const Buffer *b) { return insert(b).first; }
  /// The entry of `b`, or null.
  T *find(const Buffer *b) {
    unsigned slot = b->id < slots.size() ? slots[b->id] : none;
    return slot == none ? nullptr : &entries[slot];
  }
  /// The entry of `b`, or T() when it has none.
  T lookup(const Buffer *b) const {
    unsigned slot = b->id < slots.size() ? slots[b->id] : none;
    return slot == none ? T() : entries[slot];
  }

private:
  static constexpr unsigned none = ~0u;
  std::vector<unsigned> slots;
  std::vector<T> entries;
};

struct LoopModule {
  std::vector<std::unique_ptr<LoopFunction>> functions;
  std::string sourceName;
  const LoopFunction *lookup(llvm::StringRef name) const;
  /// Each name's function as lookup finds it (the first of that name), for
  /// a caller that looks up many: lookup walks the functions (a chain of
  /// 10,000 functions, each calling the one before).
  llvm::StringMap<const LoopFunction *> functionsByName() const;
};

/// Whether `s` is a loop over the lanes of a reduction (docs/IR.md: f32
/// sums in 8 f64 lanes, or in 16 f32 lanes with accumulate = "f32"; the
/// lane max): a loop over exactly ir::reductionLanes (or
/// ir::reductionLanesF32, into an f32 buffer or storing paired terms,
/// Buffer::pairedTerms), with no loop, call or check
/// inside, that stores or accumulates into a stack buffer at its own index,
/// `lanes[i] += f64(x[... + i])` (the fused producers of the summand in
/// locals before it), and reads memory (not the loop that sets the lanes
/// to 0 or -inf), and adds to nothing at an index that is the same for
/// every lane (a sum carried across the lanes, which a forced
/// vectorisation could reorder). Both printers keep
/// it rolled and ask for it to be vectorised across its lanes (PrintLLVM:
/// loop metadata; PrintCpp: GRADC_LANE_LOOP): unrolled first, GCC and LLVM
/// vectorise the loop around it instead and run each lane alone. A loop
/// that is constant only because a size is known (the `C % 8` rest of a
/// row of 10) is not one: it does not vectorise so, and LLVM warns when a
/// forced vectorisation fails.
bool isLaneLoop(const Stmt &s);

/// Whether two expressions are the same tree (NaN constants equal).
bool sameExpr(const Expr &a, const Expr &b);

/// Whether `e` reads loop variable `var`.
bool usesVar(const Expr &e, unsigned var);

/// Whether a function gets a range version (docs/Loops.md): its f32 sin
/// and cos cost a seventh when their arguments are below 2^20 in magnitude
/// (gradc::sinSmall), so the printers print the body twice: first with
/// the small-argument functions, serially, which note any argument out of
/// range, and then, only when one was (or when threads would run it), as
/// it is. Both compute the same bits. True when the body calls f32 sin or
/// cos.
bool hasRangeVersion(const LoopFunction &fn);

/// Whether `e` is a call that a range version's first copy makes with a
/// small-argument function: f32 sin or cos.
bool hasSmallArgumentVersion(const Expr &e);

/// Whether a statement's expressions, or those of the statements in it,
/// make such a call.
bool callsSmallArgumentVersion(const Stmt &s);

/// Whether `s` is a loop of dot products of the `expand` pass
/// (ExpandMatMul.cpp), as the `merge` pass may leave it: a loop over 4, 8
/// or 16 iterations, not parallel, whose body is stores and accumulations
/// (no math function of f64, a libm call) and loops of at most 8 constant
/// iterations of such statements, one of which only adds to a local set
/// earlier in the same iteration (no sum carried across iterations):
/// `for i < 4 { %acc = 0; for p < 4 { %acc += f64(a[i * 4 + p]) *
/// f64(b[p]) }; z[i] = f32(%acc) }`. The LLVM printer asks for it to be
/// vectorised across its iterations (its inner loops unrolled first):
/// each lane keeps its own sum in order, so the bits are the scalar
/// loop's.
bool isDotLoop(const Stmt &s);

/// Whether `s` is a loop that writes one row, elementwise: a loop over 4,
/// 8 or 16 iterations, not parallel, whose body is one store at the
/// loop's own position (`%b[%i]` or `%b[E + %i]`, E free of %i) of a value
/// that reads memory (a loop that only sets lanes to 0 vectorises anyway),
/// but nothing of the buffer it writes, and calls no math function of f64
/// (a libm call): K4's outer product `for j < 4 { %d_w[%i * 4 + %j]
/// = %g[%i] * %x[%j] + 0 }`. The LLVM printer asks for it to be
/// vectorised (LLVM's SLP vectoriser is off, and the loop vectoriser
/// leaves so short a loop alone unless asked): each element is computed
/// as before, so the bits are the scalar loop's.
bool isRowStoreLoop(const Stmt &s);

/// In a dot loop (isDotLoop) whose second statement is its loop of terms,
/// `for i < M { %acc = c; for p < K { %acc += a * b }; ... }` with K a
/// constant of 4, 8 or 16: the factor of the product that widens f32
/// elements contiguous in p and free of i, `f64(%x[E + %p])` (K4's
/// gradient `d_x = wᵀ g`: `f64(%g[%p])`), when nothing in the loop
/// writes %x; else null. Every row multiplies by the same K widened
/// values, so the printers widen them once, K at a time (one vcvtps2pd
/// per 4 where the rows' loops would widen each alone), exactly.
const Expr *sharedWidenedFactor(const Stmt &s);

/// How many statements refer to each buffer of `fn` (a load, a store, a
/// call's or kernel's operand each count once; a view counts twice for
/// its base, so that a buffer seen through a view is never taken for one
/// that a single statement uses).
BufferTable<unsigned> countUses(const LoopFunction &fn);

/// `e` with loop variable `var` replaced by (a copy of) `by`.
ExprPtr substituteVar(const Expr &e, unsigned var, const Expr &by);
/// Copies of `stores` (Store statements) with loop variable `var` replaced
/// by `by`: the body of a loop moved into another loop (`sink`, `share`).
Block substitutedStores(const Block &stores, unsigned var, const Expr &by);

/// The buffers (by root) that statements, and the statements in them,
/// read and write, and whether one calls a function or kernel or checks.
struct BufferAccesses {
  llvm::DenseSet<const Buffer *> reads, writes;
  bool calls = false;

  void add(const Stmt &s);
  bool touches(const Buffer *b) const {
    return reads.count(b) || writes.count(b);
  }
};

/// Walks every statement of a block, nested ones included, in order.
void walk(const Block &block, llvm::function_ref<void(const Stmt &)> f);
/// Walks every expression of a statement (not of nested statements),
/// sub-expressions included.
void walkExprs(const Stmt &s, llvm::function_ref<void(const Expr &)> f);
/// Calls `f` on each expression slot of a statement (extent, index, value,
/// condition, operands, size arguments; not of nested statements), so
/// that a pass can rewrite or record where an expression lives.
void forEachExprSlot(Stmt &s, llvm::function_ref<void(ExprPtr &)> f);

} // namespace gradc::loops

#endif // GRADC_LOOPS_LOOPIR_H
