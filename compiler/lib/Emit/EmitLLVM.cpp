//===- EmitLLVM.cpp - Lowering the IR to LLVM IR --------------------------===//
//
// Lowers each IR function to one LLVM function with the C ABI of
// docs/ABI.md. Every IR value lives in one of three forms:
//
//   - a scalar (rank 0): an SSA value, never memory;
//   - memory: a pointer to its row-major elements (an argument, an output
//     buffer, a temporary, or a view into another value's memory);
//   - inline: not computed on its own, but element by element inside the
//     loop of the op that consumes it (loop fusion).
//
// Elementwise ops and the sum/mean/max reductions are the fusion consumers:
// an elementwise op whose only use is such a consumer (at the same shape)
// is evaluated inside the consumer's loop, so `exp(x) * y + z` is one loop
// and no temporary. zeros, ones and filled constants are inlined into every
// elementwise use and never stored. Every other op reads memory.
//
// Errors (negative sizes, bad labels, integer division by zero, failed
// allocations) store a status and branch to one exit block that frees
// every temporary and returns the status.
//
// The arithmetic is the reference interpreter's, so that both agree bit for
// bit: no fast-math flags, f32 libm functions and f32 sums computed in
// double and rounded once, additions in the interpreter's order
// (docs/LLVMBackend.md explains each choice).
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitLLVM.h"

#include "LLVMABI.h"

#include "gradc/ABI.h"
#include "gradc/Basic/Timing.h"
#include "gradc/Emit/FusionDepth.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/Emit/PrintLLVM.h"
#include "gradc/Emit/SizeChecks.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/thread.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"

#include <cmath>
#include <functional>
#include <limits>
#include <mutex>

using namespace gradc;
using namespace gradc::emit;

namespace {

/// The status codes of docs/ABI.md (gradc/ABI.h).
enum Status : int32_t {
  StatusOk = GRADC_OK,
  StatusSize = GRADC_ERROR_SIZE,
  StatusIndex = GRADC_ERROR_INDEX,
  StatusDivZero = GRADC_ERROR_DIV_ZERO,
  StatusAlloc = GRADC_ERROR_ALLOC,
};

/// Temporaries of at most this many bytes, with a size known at compile
/// time, live on the stack instead of the heap.
constexpr int64_t maxStackTemporary = 256;

bool isElementwise(OpKind kind) {
  // Copies, fills and broadcasts are index maps the loops absorb too.
  switch (kind) {
  case OpKind::Identity:
  case OpKind::StopGradient:
  case OpKind::ZerosLike:
  case OpKind::OnesLike:
  case OpKind::BroadcastTo:
    return true;
  default:
    return isElementwiseArithmetic(kind);
  }
}

/// A constant whose elements are all one value (a fill).
bool isFillConstant(const ir::Op &op) {
  if (op.getKind() != OpKind::Constant)
    return false;
  const std::vector<double> &values = op.getAttrs().getFloats("value");
  return !values.empty() && llvm::all_of(values, [&](double v) {
    return v == values[0] && std::signbit(v) == std::signbit(values[0]);
  });
}

/// Ops whose elements cost nothing: inlined into every elementwise use.
bool isFree(const ir::Op &op) {
  return op.getKind() == OpKind::ZerosLike ||
         op.getKind() == OpKind::OnesLike || isFillConstant(op);
}

/// Elementwise ops and fills: ops computed by scalarOp().
bool isScalarComputable(const ir::Op &op) {
  return isElementwise(op.getKind()) || isFillConstant(op);
}

/// Reductions that read each element of their operand once, in order.
bool isFusingReduction(OpKind kind) {
  return kind == OpKind::Sum || kind == OpKind::Mean || kind == OpKind::Max;
}

/// The f32 function of gradc/Math.h behind an elementwise op, as named in
/// MathBitcode.cpp (gradc_math_NAME_f32), or null.
const char *mathLibraryName(OpKind kind) {
  switch (kind) {
  case OpKind::Exp:
    return "exp";
  case OpKind::Log:
    return "log";
  case OpKind::Sin:
    return "sin";
  case OpKind::Cos:
    return "cos";
  case OpKind::Atan:
    return "atan";
  case OpKind::Tanh:
    return "tanh";
  case OpKind::Sigmoid:
    return "sigmoid";
  case OpKind::Softplus:
    return "softplus";
  case OpKind::Pow:
    return "pow";
  default:
    return nullptr;
  }
}

bool sameShape(const TensorType &a, const TensorType &b) {
  return a.shape == b.shape;
}

//===----------------------------------------------------------------------===//
// ModuleLowering: state shared by the functions of one module
//===----------------------------------------------------------------------===//

class ModuleLowering {
public:
  ModuleLowering(const ir::Module &module, llvm::Module &llvmModule,
                 const LLVMOptions &options)
      : module(module), llvmModule(llvmModule), ctx(llvmModule.getContext()),
        options(options) {}

  void run();

  llvm::LLVMContext &getContext() { return ctx; }
  const ir::Module &getIRModule() { return module; }
  llvm::Module &getLLVMModule() { return llvmModule; }
  llvm::Function *getFunction(llvm::StringRef irName) {
    return functions.lookup(irName);
  }
  /// The declaration of an extern function's C symbol.
  llvm::Function *getExternFunction(const ir::ExternDecl &decl);
  llvm::FunctionCallee getMalloc();
  llvm::FunctionCallee getFree();
  /// A libm function of one argument (`tanhf`, `log1p`).
  llvm::FunctionCallee getLibm(llvm::StringRef name, llvm::Type *type);
  /// A libm function of two arguments (`pow`).
  llvm::FunctionCallee getLibm2(llvm::StringRef name, llvm::Type *type);
  /// gradc_math_NAME_f32 of the math library, f32 to f32 with `arity`
  /// arguments; linkMathLibrary supplies its body.
  llvm::FunctionCallee getMathFunction(llvm::StringRef name, unsigned arity);
  /// cblas_sgemm (f32) or cblas_dgemm (f64), row-major, LP64 (`int`
  /// sizes), as OpenBLAS declares them.
  llvm::FunctionCallee getGemm(DType t);
  const LLVMOptions &getOptions() const { return options; }

private:
  void declareFunction(const ir::Function &fn);
  void emitWrapper(const ir::Function &fn, llvm::Function *target);
  /// Output names: `out`, `out0`...; `d_<param>` for a gradient.

  const ir::Module &module;
  llvm::Module &llvmModule;
  llvm::LLVMContext &ctx;
  const LLVMOptions &options;
  llvm::StringMap<llvm::Function *> functions;
};

//===----------------------------------------------------------------------===//
// FunctionLowering: one IR function
//===----------------------------------------------------------------------===//

/// An element position inside a loop: either a multi-index over the
/// value's own shape, or (in a flat loop over a value of the same shape as
/// every memory operand) a linear index.
struct Index {
  llvm::SmallVector<llvm::Value *, 4> multi;
  llvm::Value *linear = nullptr;
};

class FunctionLowering {
public:
  FunctionLowering(ModuleLowering &ml, const ir::Function &fn,
                   llvm::Function *llfn)
      : ml(ml), fn(fn), llfn(llfn), ctx(ml.getContext()), b(ctx) {}

  void run();

private:
  /// How one IR value exists in the generated code.
  struct Slot {
    enum class Kind { Scalar, Memory, Inline } kind = Kind::Inline;
    llvm::Value *scalar = nullptr; // Scalar
    llvm::Value *ptr = nullptr;    // Memory
  };

  // Planning.
  void plan();
  bool canInlineInto(const ir::Value *v, const ir::Op &user) const;

  // Types and shapes.
  llvm::Type *elementType(DType t);
  llvm::Value *dim(const Dim &d);
  llvm::SmallVector<llvm::Value *, 4> dims(const TensorType &t);
  llvm::Value *product(llvm::ArrayRef<llvm::Value *> values);
  llvm::Value *product(llvm::ArrayRef<llvm::Value *> values,
                       llvm::IRBuilder<> &at);
  llvm::Value *numElements(const TensorType &t) { return product(dims(t)); }
  llvm::Value *linearIndex(llvm::ArrayRef<llvm::Value *> dimValues,
                           llvm::ArrayRef<llvm::Value *> idx);
  llvm::Value *i64(int64_t v) { return b.getInt64(v); }
  /// Index arithmetic (never wraps), folding multiplications by 0 and 1
  /// and additions of 0 so the unoptimised IR stays readable.
  llvm::Value *mulIdx(llvm::Value *x, llvm::Value *y);
  llvm::Value *addIdx(llvm::Value *x, llvm::Value *y);

  // Control flow.
  void forLoop(llvm::Value *n, const llvm::Twine &name,
               llvm::function_ref<void(llvm::Value *)> body);
  /// Loops named `<prefix>0`, `<prefix>1`, ... over `extents`.
  void forNest(llvm::ArrayRef<llvm::Value *> extents,
               llvm::function_ref<void(llvm::ArrayRef<llvm::Value *>)> body,
               llvm::StringRef prefix = "i");
  void failIf(llvm::Value *cond, Status status);
  void checkElementCounts();

  // Memory.
  llvm::Value *allocTemp(const TensorType &type, const llvm::Twine &name,
                         const ir::Value *owner = nullptr);
  void computeLiveness();
  void releaseDeadSlots(int pos);
  llvm::Value *resultBuffer(const ir::Value *v);
  llvm::Value *elementPtr(DType t, llvm::Value *base, llvm::Value *index);
  llvm::Value *loadElement(DType t, llvm::Value *base, llvm::Value *index);
  llvm::Value *normalizeBool(llvm::Value *v);
  void storeElement(DType t, llvm::Value *value, llvm::Value *base,
                    llvm::Value *index);
  llvm::Value *memoryOf(const ir::Value *v);
  llvm::Value *scalarOf(const ir::Value *v);
  void setScalar(const ir::Value *v, llvm::Value *s);
  void setMemory(const ir::Value *v, llvm::Value *ptr);
  void copyElements(DType t, llvm::Value *dst, llvm::Value *dstStride,
                    llvm::Value *dstOffset, llvm::Value *src,
                    llvm::Value *srcStride, llvm::Value *srcOffset,
                    llvm::Value *rows, llvm::Value *cols);

  // Elements.
  bool isFlat(const ir::Op &op) const;
  llvm::Value *elementOf(const ir::Value *v, const Index &idx);
  Index operandIndex(const ir::Value *operand, const TensorType &resultType,
                     const Index &idx);
  /// The index into a broadcast operand of shape `operand` of the element
  /// `idx` of the result: aligned from the right, 0 where the operand has
  /// size 1 and the result does not.
  llvm::SmallVector<llvm::Value *, 4>
  broadcastIndex(llvm::ArrayRef<Dim> operand, llvm::ArrayRef<Dim> result,
                 llvm::ArrayRef<llvm::Value *> idx);
  llvm::Value *computeElement(const ir::Op &op, const Index &idx);
  llvm::Value *constantElement(DType t, double v);
  llvm::Value *scalarOp(const ir::Op &op, llvm::ArrayRef<llvm::Value *> args);
  llvm::Value *floatOp(OpKind kind, DType t,
                       llvm::ArrayRef<llvm::Value *> args);
  llvm::Value *intOp(OpKind kind, llvm::ArrayRef<llvm::Value *> args);
  llvm::Value *callUnary(llvm::Intrinsic::ID id, llvm::Value *x);
  llvm::Value *callLibm(llvm::StringRef name, llvm::Value *x);
  /// f32 values are accumulated, and passed to libm, in double.
  llvm::Type *wideType(DType t);
  llvm::Value *widen(DType t, llvm::Value *v);
  llvm::Value *narrow(DType t, llvm::Value *v);
  llvm::Value *isFinite(llvm::Value *x);
  llvm::Value *maximumOf(llvm::Value *a, llvm::Value *c);
  llvm::Value *minimumOf(llvm::Value *a, llvm::Value *c);
  llvm::Value *maxOf(DType t, llvm::Value *a, llvm::Value *x);

  // Ops.
  void lowerOp(const ir::Op &op);
  void lowerElementwise(const ir::Op &op);
  void lowerConstant(const ir::Op &op);
  void lowerReduce(const ir::Op &op);
  void lowerLogSumExp(const ir::Op &op);
  llvm::Value *logSumExp(
      DType t, llvm::ArrayRef<llvm::Value *> extents,
      llvm::function_ref<llvm::Value *(llvm::ArrayRef<llvm::Value *>)> load);
  void lowerSoftmax(const ir::Op &op);
  void lowerMatMul(const ir::Op &op);
  llvm::BasicBlock *branchToBlas(const ir::Op &op, llvm::Value *aMem,
                                 llvm::Value *bMem, llvm::Value *out,
                                 llvm::Value *m, llvm::Value *n,
                                 llvm::Value *k);
  void lowerTranspose(const ir::Op &op);
  void lowerReshape(const ir::Op &op);
  void lowerStack(const ir::Op &op);
  void lowerUnstackOrSplit(const ir::Op &op);
  void lowerConcat(const ir::Op &op);
  void lowerOneHot(const ir::Op &op);
  void lowerSoftmaxCrossEntropy(const ir::Op &op);
  void lowerCall(const ir::Op &op);
  void writeOutputs();

  /// Row-major extents [outer, extent, inner] around `axis` of `t`.
  struct AxisSplit {
    llvm::Value *outer, *extent, *inner;
  };
  AxisSplit splitAt(const TensorType &t, unsigned axis);

  ModuleLowering &ml;
  const ir::Function &fn;
  llvm::Function *llfn;
  llvm::LLVMContext &ctx;
  llvm::IRBuilder<> b;

  llvm::BasicBlock *allocaBlock = nullptr;
  llvm::BasicBlock *exitBlock = nullptr;
  llvm::AllocaInst *statusSlot = nullptr;
  llvm::AllocaInst *divZeroFlag = nullptr;
  bool pendingDivCheck = false;
  /// Heap buffers shared by temporaries whose lives do not overlap, as
  /// the C++ backend's scratch buffers: a chain of n temporaries needs a
  /// few buffers, not n mallocs, n null checks and n frees (whose n^2
  /// paths to the exit block made LLVM's optimiser slow).
  struct HeapSlot {
    DType dtype;
    /// The element count it was allocated for: constant times names.
    SizeProduct size;
    /// Its buffer, malloc'ed in the `heap` block.
    llvm::Value *ptr;
    bool busy;
  };
  std::vector<HeapSlot> heapSlots;
  /// Every heap slot is malloc'ed in one block, `heap`, between the size
  /// checks and the ops, and freed in `cleanup`, which every failure after
  /// that point and the normal end go through on their way to `exit`.
  /// The byte counts are computed (and checked for overflow) in
  /// `heap.sizes` as slots appear; one null check follows the mallocs. So
  /// the buffers are SSA values that dominate every use and every free:
  /// no stack slot per buffer and no path to the exit per buffer, which
  /// had made LLVM's optimiser quadratic in the number of temporaries.
  llvm::BasicBlock *heapSizes = nullptr, *heapBlock = nullptr;
  llvm::BasicBlock *opsBlock = nullptr, *cleanupBlock = nullptr;
  /// Where failIf goes: `exit` before the heap exists, `cleanup` after.
  llvm::BasicBlock *failTarget = nullptr;
  llvm::Value *heapOverflow = nullptr, *heapNull = nullptr;
  void finishHeap();
  /// The heap slot of each value that owns one, and the helper buffers
  /// (accumulator rows) of the op being lowered.
  llvm::DenseMap<const ir::Value *, unsigned> slotOf;
  llvm::SmallVector<unsigned, 2> opScratch;
  /// For each op position, the values whose last reader it is.
  std::vector<llvm::SmallVector<const ir::Value *, 2>> deadAfter;
  llvm::StringMap<llvm::Value *> sizes;
  llvm::SmallVector<llvm::Value *, 4> outputs;

  llvm::DenseMap<const ir::Value *, Slot> slots;
  llvm::DenseMap<const ir::Value *, unsigned> useCount;
  llvm::DenseSet<const ir::Value *> inlined;
  /// Values written straight into an output buffer, and where.
  llvm::DenseMap<const ir::Value *, llvm::Value *> outputFor;
  llvm::DenseSet<const ir::Value *> writtenToOutput;
};

//===----------------------------------------------------------------------===//
// Planning
//===----------------------------------------------------------------------===//

/// Whether `v` may be computed inside the loop of `user`: `user` must be an
/// elementwise op reading `v` at `v`'s own shape, or a sum/mean/max.
bool FunctionLowering::canInlineInto(const ir::Value *v,
                                     const ir::Op &user) const {
  if (isFusingReduction(user.getKind()))
    return true;
  if (!isScalarComputable(user))
    return false;
  return sameShape(v->getType(), user.getResult()->getType());
}

void FunctionLowering::plan() {
  llvm::DenseMap<const ir::Value *, llvm::SmallVector<const ir::Op *, 2>> users;
  for (const auto &op : fn.getOps())
    for (const ir::Value *v : op->getOperands()) {
      ++useCount[v];
      users[v].push_back(op.get());
    }
  llvm::DenseSet<const ir::Value *> returned;
  for (const ir::Value *v : fn.getReturns()) {
    ++useCount[v];
    returned.insert(v);
  }
  // Inline a value computed elementwise whose every use can compute it in
  // its own loop; only free values may be computed more than once.
  for (const auto &op : fn.getOps()) {
    if (!isScalarComputable(*op) || op->getResult()->getType().isScalar())
      continue;
    const ir::Value *v = op->getResult();
    if (returned.contains(v) || users[v].empty())
      continue;
    if (!isFree(*op) && useCount[v] != 1)
      continue;
    if (llvm::all_of(users[v], [&](const ir::Op *user) {
          return canInlineInto(v, *user);
        }))
      inlined.insert(v);
  }
  // No fused expression deeper than FusionDepth.h allows.
  for (const ir::Value *v : valuesToMaterialize(
           fn, [&](const ir::Value *v) { return inlined.contains(v); }))
    inlined.erase(v);
  // A returned value computed by an op that writes memory is written
  // straight into its (first) output buffer.
  for (auto [i, v] : llvm::enumerate(fn.getReturns())) {
    if (v->isParam() || v->getType().isScalar() || outputFor.count(v))
      continue;
    outputFor[v] = outputs[i];
  }
}

//===----------------------------------------------------------------------===//
// Types, shapes and control flow
//===----------------------------------------------------------------------===//

llvm::Type *FunctionLowering::elementType(DType t) {
  switch (t) {
  case DType::F32:
    return b.getFloatTy();
  case DType::F64:
    return b.getDoubleTy();
  case DType::I32:
    return b.getInt32Ty();
  case DType::Bool:
    return b.getInt8Ty();
  }
  llvm_unreachable("unknown dtype");
}

llvm::Value *FunctionLowering::dim(const Dim &d) {
  if (d.isKnown())
    return i64(d.getSize());
  llvm::Value *v = sizes.lookup(d.getName());
  assert(v && "a size name that no parameter binds");
  return v;
}

llvm::SmallVector<llvm::Value *, 4>
FunctionLowering::dims(const TensorType &t) {
  llvm::SmallVector<llvm::Value *, 4> result;
  for (const Dim &d : t.shape)
    result.push_back(dim(d));
  return result;
}

static bool isConstant(llvm::Value *v, uint64_t c);

/// The product of sizes, computed at `at` (in the arena's blocks).
llvm::Value *FunctionLowering::product(llvm::ArrayRef<llvm::Value *> values,
                                       llvm::IRBuilder<> &at) {
  llvm::Value *p = nullptr;
  for (llvm::Value *v : values)
    p = !p                 ? v
        : isConstant(v, 1) ? p
        : isConstant(p, 1) ? v
                           : at.CreateNUWMul(p, v);
  return p ? p : i64(1);
}

llvm::Value *FunctionLowering::product(llvm::ArrayRef<llvm::Value *> values) {
  llvm::Value *p = nullptr;
  for (llvm::Value *v : values)
    p = p ? mulIdx(p, v) : v;
  return p ? p : i64(1);
}

static bool isConstant(llvm::Value *v, uint64_t c) {
  auto *k = llvm::dyn_cast<llvm::ConstantInt>(v);
  return k && k->getZExtValue() == c;
}

llvm::Value *FunctionLowering::mulIdx(llvm::Value *x, llvm::Value *y) {
  if (isConstant(x, 1) || isConstant(y, 0))
    return y;
  if (isConstant(y, 1) || isConstant(x, 0))
    return x;
  return b.CreateNUWMul(x, y);
}

llvm::Value *FunctionLowering::addIdx(llvm::Value *x, llvm::Value *y) {
  if (isConstant(x, 0))
    return y;
  if (isConstant(y, 0))
    return x;
  return b.CreateNUWAdd(x, y);
}

/// ((i0 * d1 + i1) * d2 + i2) ...: the row-major offset of `idx`.
llvm::Value *
FunctionLowering::linearIndex(llvm::ArrayRef<llvm::Value *> dimValues,
                              llvm::ArrayRef<llvm::Value *> idx) {
  assert(dimValues.size() == idx.size() && "index rank mismatch");
  llvm::Value *offset = i64(0);
  for (size_t i = 0; i < idx.size(); ++i)
    offset = addIdx(mulIdx(offset, dimValues[i]), idx[i]);
  return offset;
}

/// Emits `for (i = 0; i < n; ++i) body(i)` and leaves the builder after it.
void FunctionLowering::forLoop(llvm::Value *n, const llvm::Twine &name,
                               llvm::function_ref<void(llvm::Value *)> body) {
  llvm::BasicBlock *pre = b.GetInsertBlock();
  auto *header = llvm::BasicBlock::Create(ctx, name + ".header", llfn);
  auto *bodyBlock = llvm::BasicBlock::Create(ctx, name + ".body", llfn);
  auto *exit = llvm::BasicBlock::Create(ctx, name + ".exit");
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, name);
  i->addIncoming(i64(0), pre);
  b.CreateCondBr(b.CreateICmpSLT(i, n), bodyBlock, exit);
  b.SetInsertPoint(bodyBlock);
  body(i);
  llvm::Value *next = b.CreateNUWAdd(i, i64(1), name + ".next");
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateBr(header);
  exit->insertInto(llfn);
  b.SetInsertPoint(exit);
}

void FunctionLowering::forNest(
    llvm::ArrayRef<llvm::Value *> extents,
    llvm::function_ref<void(llvm::ArrayRef<llvm::Value *>)> body,
    llvm::StringRef prefix) {
  llvm::SmallVector<llvm::Value *, 4> idx;
  std::function<void(size_t)> level = [&](size_t d) {
    if (d == extents.size()) {
      body(idx);
      return;
    }
    forLoop(extents[d], prefix + llvm::Twine(d), [&](llvm::Value *i) {
      idx.push_back(i);
      level(d + 1);
      idx.pop_back();
    });
  };
  level(0);
}

/// Returns `status` from the function when `cond` holds.
void FunctionLowering::failIf(llvm::Value *cond, Status status) {
  auto *fail = llvm::BasicBlock::Create(ctx, "fail", llfn);
  auto *cont = llvm::BasicBlock::Create(ctx, "ok", llfn);
  b.CreateCondBr(cond, fail, cont);
  b.SetInsertPoint(fail);
  b.CreateStore(b.getInt32(status), statusSlot);
  b.CreateBr(failTarget);
  b.SetInsertPoint(cont);
}

/// Returns GRADC_ERROR_SIZE when the element count of a tensor of the
/// function exceeds INT64_MAX (SizeChecks.h): the product of the factors,
/// unless one is 0, computed with llvm.umul.with.overflow. Every later
/// index (nuw arithmetic) is below one of these counts.
void FunctionLowering::checkElementCounts() {
  for (const SizeProduct &p : sizeProductsToCheck(fn))
    failIf(elementCountOverflows(b, p, sizes), StatusSize);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// The element count of `shape` as a constant times size names.
static SizeProduct countOf(const Shape &shape) {
  SizeProduct p;
  for (const Dim &d : shape) {
    if (d.isNamed())
      p.names.push_back(d.getName().str());
    else
      p.constant *= d.getSize();
  }
  std::sort(p.names.begin(), p.names.end());
  return p;
}

/// A temporary for a value of `type`: on the stack when small and of known
/// size, otherwise a heap buffer. A heap buffer is reused from an idle slot
/// of the same element type that is large enough (the same product of
/// size names, or known sizes with room); a new slot mallocs where first
/// needed (size overflow or a null result returns GRADC_ERROR_ALLOC) and
/// is freed at the exit block. `owner` keeps the slot until its last
/// reader has been lowered; without an owner (a helper buffer) the slot is
/// free again after the current op.
llvm::Value *FunctionLowering::allocTemp(const TensorType &type,
                                         const llvm::Twine &twine,
                                         const ir::Value *owner) {
  // Unnamed IR values become `t`, `t1`, ... in the LLVM IR.
  std::string name = twine.str();
  if (name.empty())
    name = "t";
  llvm::Type *elt = elementType(type.dtype);
  int64_t eltSize = llfn->getDataLayout().getTypeAllocSize(elt);
  std::optional<int64_t> known = knownNumElements(type.shape);
  if (known && *known * eltSize <= maxStackTemporary) {
    llvm::IRBuilder<> ab(allocaBlock->getTerminator());
    return ab.CreateAlloca(elt, i64(std::max<int64_t>(*known, 1)), name);
  }
  SizeProduct count = countOf(type.shape);
  auto fits = [&](const HeapSlot &slot) {
    if (slot.busy || slot.dtype != type.dtype || slot.size.names != count.names)
      return false;
    return count.names.empty() ? slot.size.constant >= count.constant
                               : slot.size.constant == count.constant;
  };
  unsigned index = 0;
  while (index < heapSlots.size() && !fits(heapSlots[index]))
    ++index;
  if (owner)
    slotOf[owner] = index;
  else
    opScratch.push_back(index);
  if (index < heapSlots.size()) {
    heapSlots[index].busy = true;
    return heapSlots[index].ptr;
  }

  // A new slot: max(n, 1) * eltSize bytes (overflow is GRADC_ERROR_ALLOC;
  // malloc(0) may return null, which must not read as a failure), computed
  // in heap.sizes and malloc'ed in heap.
  llvm::IRBuilder<> sb(heapSizes);
  llvm::Value *n = product(dims(type), sb);
  n = sb.CreateSelect(sb.CreateICmpEQ(n, i64(0)), i64(1), n);
  llvm::Value *mul = sb.CreateBinaryIntrinsic(
      llvm::Intrinsic::umul_with_overflow, n, i64(eltSize));
  llvm::Value *over = sb.CreateExtractValue(mul, 1);
  heapOverflow = heapOverflow ? sb.CreateOr(heapOverflow, over) : over;
  llvm::IRBuilder<> hb(heapBlock);
  llvm::Value *ptr =
      hb.CreateCall(ml.getMalloc(), {sb.CreateExtractValue(mul, 0)}, name);
  llvm::Value *null = hb.CreateIsNull(ptr);
  heapNull = heapNull ? hb.CreateOr(heapNull, null) : null;
  heapSlots.push_back({type.dtype, count, ptr, true});
  return ptr;
}

/// The last op (position) that reads each value: directly, through the
/// inlined values computed in its loop, or through a view (reshape,
/// identity, unstack and split may share their operand's memory, so the
/// operand lives as long as the view). One backward pass.
void FunctionLowering::computeLiveness() {
  const auto &ops = fn.getOps();
  int end = int(ops.size());
  llvm::DenseMap<const ir::Value *, int> lastUse;
  for (const ir::Value *v : fn.getReturns())
    lastUse[v] = end;
  // Where each op's reads happen: its own position, or for an inlined
  // value the position of the latest op that computes it in its loop.
  llvm::DenseMap<const ir::Op *, int> readsAt;
  for (int pos = end - 1; pos >= 0; --pos) {
    const ir::Op &op = *ops[pos];
    int at = pos;
    if (op.getNumResults() == 1 && inlined.contains(op.getResult()))
      at = std::max(pos, lastUse.lookup(op.getResult()));
    OpKind k = op.getKind();
    bool mayView = k == OpKind::Reshape || k == OpKind::Identity ||
                   k == OpKind::StopGradient || k == OpKind::Unstack ||
                   k == OpKind::Split;
    if (mayView)
      for (const ir::Value *r : op.getResults())
        at = std::max(at, lastUse.lookup(r));
    for (const ir::Value *v : op.getOperands()) {
      auto [it, inserted] = lastUse.try_emplace(v, at);
      if (!inserted)
        it->second = std::max(it->second, at);
    }
  }
  deadAfter.assign(ops.size(), {});
  for (int pos = 0; pos < end; ++pos)
    for (const ir::Value *r : ops[pos]->getResults()) {
      int last = std::max(pos, lastUse.lookup(r));
      if (last < end)
        deadAfter[last].push_back(r);
    }
}

/// After the op at `pos`: the slots of the values it was the last reader
/// of, and its helper buffers, are idle again.
void FunctionLowering::releaseDeadSlots(int pos) {
  for (const ir::Value *v : deadAfter[pos]) {
    auto it = slotOf.find(v);
    if (it != slotOf.end())
      heapSlots[it->second].busy = false;
  }
  for (unsigned index : opScratch)
    heapSlots[index].busy = false;
  opScratch.clear();
}

/// Memory for the result `v` of the op being lowered: its output buffer
/// when `v` is returned, a temporary otherwise.
llvm::Value *FunctionLowering::resultBuffer(const ir::Value *v) {
  if (llvm::Value *out = outputFor.lookup(v)) {
    writtenToOutput.insert(v);
    return out;
  }
  return allocTemp(v->getType(), v->getName(), v);
}

llvm::Value *FunctionLowering::elementPtr(DType t, llvm::Value *base,
                                          llvm::Value *index) {
  return b.CreateInBoundsGEP(elementType(t), base, index);
}

/// Loads one element. A bool input byte other than 0 reads as true
/// (docs/ABI.md), so bools are normalised to 0 or 1 as they are read.
llvm::Value *FunctionLowering::loadElement(DType t, llvm::Value *base,
                                           llvm::Value *index) {
  llvm::Value *v = b.CreateLoad(elementType(t), elementPtr(t, base, index));
  return t == DType::Bool ? normalizeBool(v) : v;
}

llvm::Value *FunctionLowering::normalizeBool(llvm::Value *v) {
  return b.CreateZExt(b.CreateICmpNE(v, b.getInt8(0)), b.getInt8Ty());
}

void FunctionLowering::storeElement(DType t, llvm::Value *value,
                                    llvm::Value *base, llvm::Value *index) {
  b.CreateStore(value, elementPtr(t, base, index));
}

void FunctionLowering::setScalar(const ir::Value *v, llvm::Value *s) {
  Slot &slot = slots[v];
  slot.kind = Slot::Kind::Scalar;
  slot.scalar = s;
}

void FunctionLowering::setMemory(const ir::Value *v, llvm::Value *ptr) {
  Slot &slot = slots[v];
  slot.kind = Slot::Kind::Memory;
  slot.ptr = ptr;
}

/// The memory of a value; a scalar is spilled to a stack slot of one
/// element (reshape [] -> [1], say).
llvm::Value *FunctionLowering::memoryOf(const ir::Value *v) {
  Slot &slot = slots[v];
  if (slot.kind == Slot::Kind::Memory)
    return slot.ptr;
  assert(slot.kind == Slot::Kind::Scalar && "an inline value has no memory");
  llvm::Value *mem = allocTemp(v->getType(), v->getName(), v);
  b.CreateStore(slot.scalar, mem);
  return mem;
}

/// The SSA value of a rank-0 value.
llvm::Value *FunctionLowering::scalarOf(const ir::Value *v) {
  const Slot &slot = slots.find(v)->second;
  if (slot.kind == Slot::Kind::Scalar)
    return slot.scalar;
  return elementOf(v, Index());
}

/// for r < rows, j < cols: dst[dstOffset + r*dstStride + j] =
///                          src[srcOffset + r*srcStride + j]
void FunctionLowering::copyElements(DType t, llvm::Value *dst,
                                    llvm::Value *dstStride,
                                    llvm::Value *dstOffset, llvm::Value *src,
                                    llvm::Value *srcStride,
                                    llvm::Value *srcOffset, llvm::Value *rows,
                                    llvm::Value *cols) {
  forLoop(rows, "r", [&](llvm::Value *r) {
    llvm::Value *dstRow = addIdx(dstOffset, mulIdx(r, dstStride));
    llvm::Value *srcRow = addIdx(srcOffset, mulIdx(r, srcStride));
    forLoop(cols, "j", [&](llvm::Value *j) {
      llvm::Value *x = loadElement(t, src, addIdx(srcRow, j));
      storeElement(t, x, dst, addIdx(dstRow, j));
    });
  });
}

//===----------------------------------------------------------------------===//
// Elements
//===----------------------------------------------------------------------===//

/// Whether `op` can be computed in one flat loop over its elements: every
/// memory operand reachable through inline operands has the result's
/// shape (or is a scalar), so one linear index addresses all of them.
bool FunctionLowering::isFlat(const ir::Op &op) const {
  const TensorType &type = op.getResult()->getType();
  if (op.getKind() == OpKind::ZerosLike || op.getKind() == OpKind::OnesLike ||
      op.getKind() == OpKind::Constant)
    return true;
  for (const ir::Value *v : op.getOperands()) {
    if (v->getType().isScalar())
      continue;
    if (!sameShape(v->getType(), type))
      return false;
    if (inlined.contains(v) && !isFlat(*v->getDefiningOp()))
      return false;
  }
  return true;
}

/// The index of `operand` when the element `idx` of a broadcast result of
/// type `resultType` is computed: aligned from the right, 0 on the axes
/// where the operand has size 1 and the result does not.
Index FunctionLowering::operandIndex(const ir::Value *operand,
                                     const TensorType &resultType,
                                     const Index &idx) {
  const TensorType &type = operand->getType();
  if (type.isScalar())
    return Index();
  if (idx.linear)
    return idx;
  Index result;
  result.multi = broadcastIndex(type.shape, resultType.shape, idx.multi);
  return result;
}

llvm::SmallVector<llvm::Value *, 4>
FunctionLowering::broadcastIndex(llvm::ArrayRef<Dim> operand,
                                 llvm::ArrayRef<Dim> result,
                                 llvm::ArrayRef<llvm::Value *> idx) {
  llvm::SmallVector<llvm::Value *, 4> mapped;
  size_t offset = result.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i)
    mapped.push_back(operand[i] == result[offset + i] ? idx[offset + i]
                                                      : i64(0));
  return mapped;
}

/// The element of `v` at `idx`.
llvm::Value *FunctionLowering::elementOf(const ir::Value *v, const Index &idx) {
  const Slot &slot = slots.find(v)->second;
  DType t = v->getType().dtype;
  switch (slot.kind) {
  case Slot::Kind::Scalar:
    return slot.scalar;
  case Slot::Kind::Memory: {
    if (v->getType().isScalar())
      return loadElement(t, slot.ptr, i64(0));
    llvm::Value *offset =
        idx.linear ? idx.linear : linearIndex(dims(v->getType()), idx.multi);
    return loadElement(t, slot.ptr, offset);
  }
  case Slot::Kind::Inline:
    return computeElement(*v->getDefiningOp(), idx);
  }
  llvm_unreachable("unknown slot kind");
}

/// The element at `idx` of the result of the elementwise op `op`.
llvm::Value *FunctionLowering::computeElement(const ir::Op &op,
                                              const Index &idx) {
  const TensorType &type = op.getResult()->getType();
  llvm::SmallVector<llvm::Value *, 3> args;
  // zeros_like and ones_like never read their operand.
  if (op.getKind() != OpKind::ZerosLike && op.getKind() != OpKind::OnesLike)
    for (const ir::Value *v : op.getOperands())
      args.push_back(elementOf(v, operandIndex(v, type, idx)));
  return scalarOp(op, args);
}

llvm::Value *FunctionLowering::constantElement(DType t, double v) {
  if (isFloat(t))
    return llvm::ConstantFP::get(elementType(t), v);
  return llvm::ConstantInt::get(elementType(t), int64_t(v), /*signed=*/true);
}

llvm::Value *FunctionLowering::callUnary(llvm::Intrinsic::ID id,
                                         llvm::Value *x) {
  return b.CreateUnaryIntrinsic(id, x);
}

/// A double libm function without an LLVM intrinsic (`tanh`, `log1p`).
llvm::Value *FunctionLowering::callLibm(llvm::StringRef name, llvm::Value *x) {
  return b.CreateCall(ml.getLibm(name, x->getType()), {x});
}

llvm::Type *FunctionLowering::wideType(DType t) {
  return t == DType::F32 ? b.getDoubleTy() : elementType(t);
}

llvm::Value *FunctionLowering::widen(DType t, llvm::Value *v) {
  return t == DType::F32 ? b.CreateFPExt(v, b.getDoubleTy()) : v;
}

llvm::Value *FunctionLowering::narrow(DType t, llvm::Value *v) {
  return t == DType::F32 ? b.CreateFPTrunc(v, b.getFloatTy()) : v;
}

/// |x| < inf (false for NaN).
llvm::Value *FunctionLowering::isFinite(llvm::Value *x) {
  return b.CreateFCmpOLT(callUnary(llvm::Intrinsic::fabs, x),
                         llvm::ConstantFP::getInfinity(x->getType()));
}

/// NaN if either is NaN, else std::max(a, b) (a < b ? b : a), as NumPy's
/// maximum and the interpreter.
llvm::Value *FunctionLowering::maximumOf(llvm::Value *a, llvm::Value *c) {
  llvm::Value *m = b.CreateSelect(b.CreateFCmpOLT(a, c), c, a);
  return b.CreateSelect(b.CreateFCmpUNO(a, c),
                        llvm::ConstantFP::getNaN(a->getType()), m);
}

/// NaN if either is NaN, else std::min(a, b) (b < a ? b : a).
llvm::Value *FunctionLowering::minimumOf(llvm::Value *a, llvm::Value *c) {
  llvm::Value *m = b.CreateSelect(b.CreateFCmpOLT(c, a), c, a);
  return b.CreateSelect(b.CreateFCmpUNO(a, c),
                        llvm::ConstantFP::getNaN(a->getType()), m);
}

/// The running maximum of a reduction: NaN wins, as in NumPy.
llvm::Value *FunctionLowering::maxOf(DType t, llvm::Value *acc,
                                     llvm::Value *x) {
  if (!isFloat(t))
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, acc, x);
  return maximumOf(acc, x);
}

llvm::Value *FunctionLowering::scalarOp(const ir::Op &op,
                                        llvm::ArrayRef<llvm::Value *> args) {
  DType t = op.getResult()->getType().dtype;
  switch (op.getKind()) {
  case OpKind::Identity:
  case OpKind::StopGradient:
  case OpKind::BroadcastTo:
    return args[0];
  case OpKind::ZerosLike:
    return constantElement(t, 0);
  case OpKind::OnesLike:
    return constantElement(t, 1);
  case OpKind::Constant:
    return constantElement(t, op.getAttrs().getFloats("value")[0]);
  case OpKind::Select:
    return b.CreateSelect(b.CreateICmpNE(args[0], b.getInt8(0)), args[1],
                          args[2]);
  case OpKind::Less:
  case OpKind::LessEqual:
  case OpKind::Greater:
  case OpKind::GreaterEqual:
  case OpKind::Equal:
  case OpKind::NotEqual: {
    static const llvm::CmpInst::Predicate fp[] = {
        llvm::CmpInst::FCMP_OLT, llvm::CmpInst::FCMP_OLE,
        llvm::CmpInst::FCMP_OGT, llvm::CmpInst::FCMP_OGE,
        llvm::CmpInst::FCMP_OEQ, llvm::CmpInst::FCMP_UNE};
    static const llvm::CmpInst::Predicate in[] = {
        llvm::CmpInst::ICMP_SLT, llvm::CmpInst::ICMP_SLE,
        llvm::CmpInst::ICMP_SGT, llvm::CmpInst::ICMP_SGE,
        llvm::CmpInst::ICMP_EQ,  llvm::CmpInst::ICMP_NE};
    unsigned k = unsigned(op.getKind()) - unsigned(OpKind::Less);
    DType operandType = op.getOperand(0)->getType().dtype;
    llvm::Value *c = isFloat(operandType)
                         ? b.CreateFCmp(fp[k], args[0], args[1])
                         : b.CreateICmp(in[k], args[0], args[1]);
    return b.CreateZExt(c, b.getInt8Ty());
  }
  default:
    break;
  }
  if (isFloat(t))
    return floatOp(op.getKind(), t, args);
  return intOp(op.getKind(), args);
}

/// Float elementwise ops with the interpreter's arithmetic: + - * /, sqrt
/// and comparisons are exact in float, so they run in float; the f32
/// functions exp, log, sin, cos, tanh, sigmoid, softplus and pow call
/// gradc/Math.h's, linked as bitcode (linkMathLibrary), which the
/// interpreter and the C++ backend call too; f64 calls libm as the
/// interpreter does. So the three agree bit for bit.
llvm::Value *FunctionLowering::floatOp(OpKind kind, DType t,
                                       llvm::ArrayRef<llvm::Value *> args) {
  llvm::Value *x = args[0];
  if (t == DType::F32) {
    if (const char *name = mathLibraryName(kind))
      return b.CreateCall(ml.getMathFunction(name, unsigned(args.size())),
                          args);
  }
  llvm::Value *zero = constantElement(t, 0), *one = constantElement(t, 1);
  switch (kind) {
  case OpKind::Neg:
    return b.CreateFNeg(x);
  case OpKind::Sqrt:
    return callUnary(llvm::Intrinsic::sqrt, x);
  case OpKind::Abs:
    return callUnary(llvm::Intrinsic::fabs, x);
  case OpKind::Sign: {
    // -1, 0 or 1; NaN stays NaN.
    llvm::Value *s = b.CreateSelect(
        b.CreateFCmpOGT(x, zero), one,
        b.CreateSelect(b.CreateFCmpOLT(x, zero), constantElement(t, -1), zero));
    return b.CreateSelect(b.CreateFCmpUNO(x, x), x, s);
  }
  case OpKind::Relu:
    // x > 0 ? x : 0 (so relu(-0) is +0); NaN stays NaN.
    return b.CreateSelect(
        b.CreateOr(b.CreateFCmpOGT(x, zero), b.CreateFCmpUNO(x, x)), x, zero);
  case OpKind::Square:
    return b.CreateFMul(x, x);
  case OpKind::Add:
    return b.CreateFAdd(x, args[1]);
  case OpKind::Sub:
    return b.CreateFSub(x, args[1]);
  case OpKind::Mul:
    return b.CreateFMul(x, args[1]);
  case OpKind::Div:
    return b.CreateFDiv(x, args[1]);
  case OpKind::Maximum:
    return maximumOf(x, args[1]);
  case OpKind::Minimum:
    return minimumOf(x, args[1]);
  case OpKind::Clip:
    return minimumOf(maximumOf(x, args[1]), args[2]);
  default:
    break;
  }
  llvm::Value *w = widen(t, x);
  llvm::Value *wideZero = llvm::ConstantFP::get(w->getType(), 0.0);
  llvm::Value *wideOne = llvm::ConstantFP::get(w->getType(), 1.0);
  llvm::Value *r = nullptr;
  switch (kind) {
  case OpKind::Exp:
    r = callUnary(llvm::Intrinsic::exp, w);
    break;
  case OpKind::Log:
    r = callUnary(llvm::Intrinsic::log, w);
    break;
  case OpKind::Sin:
    r = callUnary(llvm::Intrinsic::sin, w);
    break;
  case OpKind::Cos:
    r = callUnary(llvm::Intrinsic::cos, w);
    break;
  case OpKind::Atan:
    r = callLibm("atan", w);
    break;
  case OpKind::Tanh:
    r = callLibm("tanh", w);
    break;
  case OpKind::Sigmoid: {
    // With e = e^-|x|: 1 / (1 + e) for x >= 0 and e / (1 + e) otherwise;
    // never exponentiates a large positive number.
    llvm::Value *e =
        callUnary(llvm::Intrinsic::exp,
                  b.CreateFNeg(callUnary(llvm::Intrinsic::fabs, w)));
    llvm::Value *d = b.CreateFAdd(wideOne, e);
    r = b.CreateSelect(b.CreateFCmpOGE(w, wideZero), b.CreateFDiv(wideOne, d),
                       b.CreateFDiv(e, d));
    break;
  }
  case OpKind::Softplus: {
    // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): never overflows.
    llvm::Value *pos =
        b.CreateSelect(b.CreateFCmpOLT(w, wideZero), wideZero, w);
    llvm::Value *e =
        callUnary(llvm::Intrinsic::exp,
                  b.CreateFNeg(callUnary(llvm::Intrinsic::fabs, w)));
    r = b.CreateFAdd(pos, callLibm("log1p", e));
    break;
  }
  case OpKind::Pow: {
    // libm's pow itself, marked nobuiltin: LLVM's library-call simplifier
    // would otherwise rewrite pow(2.0, y) as exp2(y) and pow(x, 0.5) as
    // sqrt, whose results differ from pow's in the last bit, and the
    // interpreter calls pow (docs/LLVMBackend.md: bit for bit).
    llvm::CallInst *call =
        b.CreateCall(ml.getLibm2("pow", w->getType()), {w, widen(t, args[1])});
    call->addFnAttr(llvm::Attribute::NoBuiltin);
    r = call;
    break;
  }
  default:
    llvm_unreachable("not a float elementwise op");
  }
  return narrow(t, r);
}

/// i32 elementwise ops: two's complement wrapping, truncating division.
llvm::Value *FunctionLowering::intOp(OpKind kind,
                                     llvm::ArrayRef<llvm::Value *> args) {
  llvm::Value *x = args[0];
  llvm::Value *zero = b.getInt32(0);
  switch (kind) {
  case OpKind::Neg:
    return b.CreateSub(zero, x);
  case OpKind::Abs:
    return b.CreateSelect(b.CreateICmpSLT(x, zero), b.CreateSub(zero, x), x);
  case OpKind::Sign:
    return b.CreateSub(b.CreateZExt(b.CreateICmpSGT(x, zero), b.getInt32Ty()),
                       b.CreateZExt(b.CreateICmpSLT(x, zero), b.getInt32Ty()));
  case OpKind::Relu:
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, zero);
  case OpKind::Square:
    return b.CreateMul(x, x);
  case OpKind::Add:
    return b.CreateAdd(x, args[1]);
  case OpKind::Sub:
    return b.CreateSub(x, args[1]);
  case OpKind::Mul:
    return b.CreateMul(x, args[1]);
  case OpKind::Div: {
    // Truncating division. y == 0 raises GRADC_ERROR_DIV_ZERO after the
    // loop; y == -1 is a wrapping negation (INT_MIN / -1 == INT_MIN), which
    // sdiv would make undefined. Both divide by 1 instead.
    llvm::Value *y = args[1];
    llvm::Value *isZero = b.CreateICmpEQ(y, zero);
    llvm::Value *isMinusOne = b.CreateICmpEQ(y, b.getInt32(-1));
    if (!divZeroFlag) {
      llvm::IRBuilder<> ab(allocaBlock->getTerminator());
      divZeroFlag = ab.CreateAlloca(b.getInt1Ty(), nullptr, "div.by.zero");
      ab.CreateStore(ab.getFalse(), divZeroFlag);
    }
    llvm::Value *flag = b.CreateLoad(b.getInt1Ty(), divZeroFlag);
    b.CreateStore(b.CreateOr(flag, isZero), divZeroFlag);
    pendingDivCheck = true;
    llvm::Value *safe =
        b.CreateSelect(b.CreateOr(isZero, isMinusOne), b.getInt32(1), y);
    return b.CreateSelect(isMinusOne, b.CreateSub(zero, x),
                          b.CreateSDiv(x, safe));
  }
  case OpKind::Maximum:
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, args[1]);
  case OpKind::Minimum:
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, args[1]);
  case OpKind::Clip:
    return b.CreateBinaryIntrinsic(
        llvm::Intrinsic::smin,
        b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, args[1]), args[2]);
  default:
    llvm_unreachable("not an integer elementwise op");
  }
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

FunctionLowering::AxisSplit FunctionLowering::splitAt(const TensorType &t,
                                                      unsigned axis) {
  llvm::SmallVector<llvm::Value *, 4> d = dims(t);
  return {product(llvm::ArrayRef(d).take_front(axis)), d[axis],
          product(llvm::ArrayRef(d).drop_front(axis + 1))};
}

void FunctionLowering::lowerOp(const ir::Op &op) {
  if (op.getNumResults() == 1 && inlined.contains(op.getResult())) {
    slots[op.getResult()].kind = Slot::Kind::Inline;
    return;
  }
  switch (op.getKind()) {
  case OpKind::Constant:
    if (!isFillConstant(op))
      return lowerConstant(op);
    return lowerElementwise(op);
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max:
    return lowerReduce(op);
  case OpKind::LogSumExp:
    return lowerLogSumExp(op);
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return lowerSoftmax(op);
  case OpKind::MatMul:
    return lowerMatMul(op);
  case OpKind::Transpose:
    return lowerTranspose(op);
  case OpKind::Reshape:
    return lowerReshape(op);
  case OpKind::Stack:
    return lowerStack(op);
  case OpKind::Unstack:
  case OpKind::Split:
    return lowerUnstackOrSplit(op);
  case OpKind::Concat:
    return lowerConcat(op);
  case OpKind::OneHot:
    return lowerOneHot(op);
  case OpKind::SoftmaxCrossEntropy:
    return lowerSoftmaxCrossEntropy(op);
  case OpKind::Call:
  case OpKind::ExternCall:
    return lowerCall(op);
  default:
    assert(isElementwise(op.getKind()) && "unhandled op");
    return lowerElementwise(op);
  }
}

/// An elementwise op that is not inlined: a scalar, an alias (identity of
/// memory), or one loop (nest) storing every element.
void FunctionLowering::lowerElementwise(const ir::Op &op) {
  const ir::Value *result = op.getResult();
  const TensorType &type = result->getType();
  if (type.isScalar()) {
    llvm::SmallVector<llvm::Value *, 3> args;
    if (op.getKind() != OpKind::ZerosLike && op.getKind() != OpKind::OnesLike)
      for (const ir::Value *v : op.getOperands())
        args.push_back(scalarOf(v));
    setScalar(result, scalarOp(op, args));
    return;
  }
  // identity and stop_gradient of memory share it, unless the result is an
  // output, which must be written.
  bool isCopy =
      op.getKind() == OpKind::Identity || op.getKind() == OpKind::StopGradient;
  if (isCopy && !outputFor.count(result) &&
      slots[op.getOperand(0)].kind == Slot::Kind::Memory) {
    setMemory(result, slots[op.getOperand(0)].ptr);
    return;
  }
  llvm::Value *out = resultBuffer(result);
  DType t = type.dtype;
  if (isFlat(op)) {
    forLoop(numElements(type), "i", [&](llvm::Value *i) {
      Index idx;
      idx.linear = i;
      storeElement(t, computeElement(op, idx), out, i);
    });
  } else {
    llvm::SmallVector<llvm::Value *, 4> d = dims(type);
    forNest(d, [&](llvm::ArrayRef<llvm::Value *> multi) {
      Index idx;
      idx.multi.assign(multi.begin(), multi.end());
      storeElement(t, computeElement(op, idx), out, linearIndex(d, multi));
    });
  }
  setMemory(result, out);
}

/// A constant of distinct values: one store per element (there are no
/// globals to copy from).
void FunctionLowering::lowerConstant(const ir::Op &op) {
  const ir::Value *result = op.getResult();
  const std::vector<double> &values = op.getAttrs().getFloats("value");
  DType t = result->getType().dtype;
  if (result->getType().isScalar()) {
    setScalar(result, constantElement(t, values[0]));
    return;
  }
  llvm::Value *out = resultBuffer(result);
  for (auto [i, v] : llvm::enumerate(values))
    storeElement(t, constantElement(t, v), out, i64(i));
  setMemory(result, out);
}

/// sum, mean, max: every output combines its inputs in increasing flat
/// index (the interpreter's order); f32 sums accumulate in double and
/// round once at the end. Three loop shapes:
///   1. every axis reduced: one accumulator in a register;
///   2. the reduced axes are the last ones: for each output position, one
///      accumulator in a register over a contiguous run of inputs;
///   3. otherwise one pass over the operand in row-major order into a row
///      of accumulators; the inner loop runs over independent accumulators
///      along the kept last axis, so it vectorises.
void FunctionLowering::lowerReduce(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *result = op.getResult();
  const TensorType &xType = x->getType();
  DType t = result->getType().dtype;
  const std::vector<int64_t> &axes = op.getAttrs().getInts("axis");
  OpKind kind = op.getKind();
  bool isMax = kind == OpKind::Max;
  // Maxima are exact in the element type; sums of f32 accumulate in double.
  DType accType = isMax || t != DType::F32 ? t : DType::F64;
  llvm::Type *accTy = elementType(accType);

  llvm::Value *init =
      isMax ? (isFloat(t) ? llvm::ConstantFP::getInfinity(accTy, true)
                          : b.getInt32(std::numeric_limits<int32_t>::min()))
            : constantElement(accType, 0);
  auto combine = [&](llvm::Value *acc, llvm::Value *v) -> llvm::Value * {
    if (isMax)
      return maxOf(t, acc, v);
    if (!isFloat(t))
      return b.CreateAdd(acc, v);
    return b.CreateFAdd(acc, accType == t ? v : widen(t, v));
  };
  // The number of elements each output position combines, for mean.
  llvm::SmallVector<llvm::Value *, 4> xDims = dims(xType);
  llvm::Value *count = i64(1);
  for (int64_t a : axes)
    count = mulIdx(count, xDims[a]);
  auto finish = [&](llvm::Value *acc) -> llvm::Value * {
    if (kind == OpKind::Mean)
      acc = b.CreateFDiv(acc, b.CreateSIToFP(count, accTy));
    return accType == t ? acc : narrow(t, acc);
  };

  if (result->getType().isScalar()) {
    if (xType.isScalar()) {
      setScalar(result, finish(combine(init, scalarOf(x))));
      return;
    }
    // Every axis: one accumulator in a stack slot (promoted to a register).
    llvm::IRBuilder<> ab(allocaBlock->getTerminator());
    llvm::AllocaInst *acc = ab.CreateAlloca(accTy, nullptr, "acc");
    b.CreateStore(init, acc);
    auto step = [&](const Index &idx) {
      llvm::Value *v = elementOf(x, idx);
      b.CreateStore(combine(b.CreateLoad(accTy, acc), v), acc);
    };
    bool flat = !inlined.contains(x) || isFlat(*x->getDefiningOp());
    if (flat) {
      forLoop(numElements(xType), "i", [&](llvm::Value *i) {
        Index idx;
        idx.linear = i;
        step(idx);
      });
    } else {
      forNest(xDims, [&](llvm::ArrayRef<llvm::Value *> multi) {
        Index idx;
        idx.multi.assign(multi.begin(), multi.end());
        step(idx);
      });
    }
    setScalar(result, finish(b.CreateLoad(accTy, acc, "sum")));
    return;
  }

  llvm::Value *out = resultBuffer(result);
  llvm::SmallVector<llvm::Value *, 4> keptDims, reducedDims;
  for (unsigned i = 0; i < xType.getRank(); ++i)
    (llvm::is_contained(axes, int64_t(i)) ? reducedDims : keptDims)
        .push_back(xDims[i]);
  // Reduced axes at the end (axis = -1, say): each output's elements are
  // contiguous, so one accumulator in a register per output position.
  bool trailing = llvm::all_of(axes, [&](int64_t a) {
    return a >= int64_t(xType.getRank() - axes.size());
  });
  if (trailing) {
    llvm::IRBuilder<> ab(allocaBlock->getTerminator());
    llvm::AllocaInst *acc = ab.CreateAlloca(accTy, nullptr, "acc");
    forNest(keptDims, [&](llvm::ArrayRef<llvm::Value *> keptIdx) {
      b.CreateStore(init, acc);
      forNest(
          reducedDims,
          [&](llvm::ArrayRef<llvm::Value *> reducedIdx) {
            Index idx;
            idx.multi.assign(keptIdx.begin(), keptIdx.end());
            idx.multi.append(reducedIdx.begin(), reducedIdx.end());
            llvm::Value *v = elementOf(x, idx);
            b.CreateStore(combine(b.CreateLoad(accTy, acc), v), acc);
          },
          "r");
      storeElement(t, finish(b.CreateLoad(accTy, acc, "sum")), out,
                   linearIndex(keptDims, keptIdx));
    });
    setMemory(result, out);
    return;
  }
  // Otherwise one pass in the operand's order into a row of accumulators.
  TensorType accTensor(accType, result->getType().shape);
  llvm::Value *accMem = accType == t ? out : allocTemp(accTensor, "acc");
  llvm::Value *n = numElements(result->getType());
  forLoop(n, "i",
          [&](llvm::Value *i) { storeElement(accType, init, accMem, i); });
  forNest(xDims, [&](llvm::ArrayRef<llvm::Value *> multi) {
    llvm::SmallVector<llvm::Value *, 4> kept;
    for (unsigned i = 0; i < multi.size(); ++i)
      if (!llvm::is_contained(axes, int64_t(i)))
        kept.push_back(multi[i]);
    llvm::Value *o = linearIndex(keptDims, kept);
    Index idx;
    idx.multi.assign(multi.begin(), multi.end());
    llvm::Value *v = elementOf(x, idx);
    storeElement(accType, combine(loadElement(accType, accMem, o), v), accMem,
                 o);
  });
  if (kind == OpKind::Mean || accMem != out)
    forLoop(n, "i", [&](llvm::Value *i) {
      storeElement(t, finish(loadElement(accType, accMem, i)), out, i);
    });
  setMemory(result, out);
}

/// The stable logsumexp of one group of elements, computed in the wide
/// type: m = max x; m + ln(sum e^(x - m)), or m itself when m is not
/// finite (all -inf, an inf or a NaN). `load(k)` reads element k of the
/// group (widened), for k < `count` given as nested extents.
llvm::Value *FunctionLowering::logSumExp(
    DType t, llvm::ArrayRef<llvm::Value *> extents,
    llvm::function_ref<llvm::Value *(llvm::ArrayRef<llvm::Value *>)> load) {
  llvm::Type *wide = wideType(t);
  llvm::IRBuilder<> ab(allocaBlock->getTerminator());
  llvm::AllocaInst *acc = ab.CreateAlloca(wide, nullptr, "acc");
  b.CreateStore(llvm::ConstantFP::getInfinity(wide, true), acc);
  forNest(
      extents,
      [&](llvm::ArrayRef<llvm::Value *> k) {
        b.CreateStore(maximumOf(b.CreateLoad(wide, acc), load(k)), acc);
      },
      "r");
  llvm::Value *m = b.CreateLoad(wide, acc, "max");
  // e^(x - m) only matters for a finite m; subtracting 0 otherwise keeps
  // the loop free of NaN and branches.
  llvm::Value *finite = isFinite(m);
  llvm::Value *shift =
      b.CreateSelect(finite, m, llvm::ConstantFP::get(wide, 0.0));
  b.CreateStore(llvm::ConstantFP::get(wide, 0.0), acc);
  forNest(
      extents,
      [&](llvm::ArrayRef<llvm::Value *> k) {
        llvm::Value *e =
            callUnary(llvm::Intrinsic::exp, b.CreateFSub(load(k), shift));
        b.CreateStore(b.CreateFAdd(b.CreateLoad(wide, acc), e), acc);
      },
      "r");
  llvm::Value *s = b.CreateLoad(wide, acc, "sum");
  return b.CreateSelect(
      finite, b.CreateFAdd(m, callUnary(llvm::Intrinsic::log, s)), m, "lse");
}

/// logsumexp over axes: the loops run over the kept axes, and for each
/// output position over the reduced axes (twice: max, then the sum).
void FunctionLowering::lowerLogSumExp(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *result = op.getResult();
  const TensorType &xType = x->getType();
  DType t = result->getType().dtype;
  const std::vector<int64_t> &axes = op.getAttrs().getInts("axis");
  if (xType.isScalar()) {
    llvm::Value *v = widen(t, scalarOf(x));
    llvm::Value *r = b.CreateSelect(
        isFinite(v),
        b.CreateFAdd(
            v, callUnary(llvm::Intrinsic::log,
                         callUnary(llvm::Intrinsic::exp, b.CreateFSub(v, v)))),
        v);
    setScalar(result, narrow(t, r));
    return;
  }
  llvm::Value *xMem = memoryOf(x);
  llvm::SmallVector<llvm::Value *, 4> xDims = dims(xType);
  llvm::SmallVector<unsigned, 4> kept, reduced;
  for (unsigned i = 0; i < xType.getRank(); ++i)
    (llvm::is_contained(axes, int64_t(i)) ? reduced : kept).push_back(i);
  llvm::SmallVector<llvm::Value *, 4> keptDims, reducedDims;
  for (unsigned i : kept)
    keptDims.push_back(xDims[i]);
  for (unsigned i : reduced)
    reducedDims.push_back(xDims[i]);

  bool scalarResult = result->getType().isScalar();
  llvm::Value *out = scalarResult ? nullptr : resultBuffer(result);
  llvm::Value *scalar = nullptr;
  forNest(keptDims, [&](llvm::ArrayRef<llvm::Value *> keptIdx) {
    auto load = [&](llvm::ArrayRef<llvm::Value *> reducedIdx) {
      llvm::SmallVector<llvm::Value *, 4> full(xType.getRank());
      for (auto [k, i] : llvm::enumerate(kept))
        full[i] = keptIdx[k];
      for (auto [k, i] : llvm::enumerate(reduced))
        full[i] = reducedIdx[k];
      return widen(t, loadElement(t, xMem, linearIndex(xDims, full)));
    };
    llvm::Value *r = narrow(t, logSumExp(t, reducedDims, load));
    if (scalarResult)
      scalar = r;
    else
      storeElement(t, r, out, linearIndex(keptDims, keptIdx));
  });
  if (scalarResult)
    setScalar(result, scalar);
  else
    setMemory(result, out);
}

/// softmax and log_softmax along one axis, in the wide type, for each
/// position outside the axis: m = max, s = sum e^(x - m) in order;
/// softmax = e^(x - m) / s and log_softmax = x - m - ln s.
void FunctionLowering::lowerSoftmax(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *result = op.getResult();
  DType t = result->getType().dtype;
  llvm::Type *wide = wideType(t);
  bool isLog = op.getKind() == OpKind::LogSoftmax;
  unsigned axis = op.getAttrs().getInt("axis");
  llvm::Value *xMem = memoryOf(x);
  llvm::Value *out = resultBuffer(result);
  AxisSplit s = splitAt(x->getType(), axis);
  llvm::IRBuilder<> ab(allocaBlock->getTerminator());
  llvm::AllocaInst *acc = ab.CreateAlloca(wide, nullptr, "acc");
  forLoop(s.outer, "o", [&](llvm::Value *o) {
    forLoop(s.inner, "n", [&](llvm::Value *n) {
      // x[o, k, n] = xMem[(o * extent + k) * inner + n]
      auto offsetOf = [&](llvm::Value *k) {
        return addIdx(mulIdx(addIdx(mulIdx(o, s.extent), k), s.inner), n);
      };
      auto load = [&](llvm::Value *k) {
        return widen(t, loadElement(t, xMem, offsetOf(k)));
      };
      b.CreateStore(llvm::ConstantFP::getInfinity(wide, true), acc);
      forLoop(s.extent, "k", [&](llvm::Value *k) {
        b.CreateStore(maximumOf(b.CreateLoad(wide, acc), load(k)), acc);
      });
      llvm::Value *m = b.CreateLoad(wide, acc, "max");
      b.CreateStore(llvm::ConstantFP::get(wide, 0.0), acc);
      forLoop(s.extent, "k", [&](llvm::Value *k) {
        llvm::Value *e =
            callUnary(llvm::Intrinsic::exp, b.CreateFSub(load(k), m));
        b.CreateStore(b.CreateFAdd(b.CreateLoad(wide, acc), e), acc);
      });
      llvm::Value *sum = b.CreateLoad(wide, acc, "sum");
      llvm::Value *logSum =
          isLog ? callUnary(llvm::Intrinsic::log, sum) : nullptr;
      forLoop(s.extent, "k", [&](llvm::Value *k) {
        llvm::Value *d = b.CreateFSub(load(k), m);
        llvm::Value *y =
            isLog ? b.CreateFSub(d, logSum)
                  : b.CreateFDiv(callUnary(llvm::Intrinsic::exp, d), sum);
        storeElement(t, narrow(t, y), out, offsetOf(k));
      });
    });
  });
  setMemory(result, out);
}

/// NumPy matmul: a vector operand is promoted to a matrix ([K] -> [1, K]
/// on the left, [K, 1] on the right) and batch axes broadcast. Each
/// matrix product runs i, k, j: acc[j] += a[i, k] * b[k, j] with k in
/// increasing order (the interpreter's order of additions), and the j
/// loop, over contiguous rows of b and of the accumulator row, vectorises.
/// f32 products and sums are computed in double (a product of two floats
/// is exact in double) and rounded once, as the interpreter does; other
/// types accumulate straight into the result.
void FunctionLowering::lowerMatMul(const ir::Op &op) {
  const ir::Value *a = op.getOperand(0), *bv = op.getOperand(1);
  const ir::Value *result = op.getResult();
  DType t = result->getType().dtype;
  const TensorType &aType = a->getType(), &bType = bv->getType();
  const TensorType &cType = result->getType();
  bool aVector = aType.getRank() == 1, bVector = bType.getRank() == 1;
  llvm::SmallVector<llvm::Value *, 4> aDims = dims(aType), bDims = dims(bType);
  if (aVector)
    aDims.insert(aDims.begin(), i64(1));
  if (bVector)
    bDims.push_back(i64(1));
  llvm::Value *m = aDims[aDims.size() - 2], *k = aDims.back();
  llvm::Value *n = bDims.back();
  unsigned batchRank = cType.getRank() - (aVector ? 0 : 1) - (bVector ? 0 : 1);
  Shape cBatch(cType.shape.begin(), cType.shape.begin() + batchRank);
  Shape aBatch(aType.shape.begin(), aType.shape.end() - (aVector ? 1 : 2));
  Shape bBatch(bType.shape.begin(), bType.shape.end() - (bVector ? 1 : 2));

  llvm::Value *aMem = memoryOf(a), *bMem = memoryOf(bv);
  llvm::Value *out = resultBuffer(result);
  // The accumulator row: a separate row of doubles for f32, else the
  // result row itself.
  bool wideAcc = t == DType::F32;
  DType accType = wideAcc ? DType::F64 : t;
  llvm::Value *accRow = nullptr;
  if (wideAcc) {
    Shape row;
    row.push_back(bType.getRank() == 1 ? Dim::known(1) : bType.shape.back());
    accRow = allocTemp(TensorType(DType::F64, row), "acc");
  }
  llvm::Value *mk = mulIdx(m, k), *kn = mulIdx(k, n);
  llvm::Value *mn = mulIdx(m, n);
  // The linear batch index of an operand: broadcast axes read index 0.
  auto batchOffset = [&](const Shape &operand,
                         llvm::ArrayRef<llvm::Value *> idx) {
    return linearIndex(dims(TensorType(t, operand)),
                       broadcastIndex(operand, cBatch, idx));
  };
  bool isF = isFloat(t);
  // Large enough: CBLAS; the loops below run in the other branch.
  llvm::BasicBlock *blasDone =
      batchRank == 0 ? branchToBlas(op, aMem, bMem, out, m, n, k) : nullptr;
  forNest(dims(TensorType(t, cBatch)), [&](llvm::ArrayRef<llvm::Value *> bi) {
    llvm::Value *aOff = mulIdx(batchOffset(aBatch, bi), mk);
    llvm::Value *bOff = mulIdx(batchOffset(bBatch, bi), kn);
    llvm::Value *cOff =
        mulIdx(linearIndex(dims(TensorType(t, cBatch)), bi), mn);
    forLoop(m, "i", [&](llvm::Value *i) {
      llvm::Value *cRow = addIdx(cOff, mulIdx(i, n));
      llvm::Value *acc = wideAcc ? accRow : elementPtr(t, out, cRow);
      forLoop(n, "j", [&](llvm::Value *j) {
        storeElement(accType, constantElement(accType, 0), acc, j);
      });
      forLoop(k, "k", [&](llvm::Value *kk) {
        llvm::Value *aik = widen(
            t, loadElement(t, aMem, addIdx(aOff, addIdx(mulIdx(i, k), kk))));
        llvm::Value *bRow = addIdx(bOff, mulIdx(kk, n));
        forLoop(n, "j", [&](llvm::Value *j) {
          llvm::Value *bkj = widen(t, loadElement(t, bMem, addIdx(bRow, j)));
          llvm::Value *c = elementPtr(accType, acc, j);
          llvm::Value *old = b.CreateLoad(elementType(accType), c);
          llvm::Value *sum = isF ? b.CreateFAdd(old, b.CreateFMul(aik, bkj))
                                 : b.CreateAdd(old, b.CreateMul(aik, bkj));
          b.CreateStore(sum, c);
        });
      });
      if (wideAcc)
        forLoop(n, "j", [&](llvm::Value *j) {
          storeElement(t, narrow(t, loadElement(accType, accRow, j)), out,
                       addIdx(cRow, j));
        });
    });
  });
  if (blasDone) {
    b.CreateBr(blasDone);
    blasDone->insertInto(llfn);
    b.SetInsertPoint(blasDone);
  }
  setMemory(result, out);
}

/// With LLVMOptions::blas, for one f32/f64 matrix product (no batch axes;
/// a vector operand is a 1-row or 1-column matrix, laid out the same):
/// emits `if (m n k >= blasMinWork && m, n, k fit in int) cblas_?gemm(...)`
/// and leaves the builder in the else branch, where the caller emits its
/// loops; returns the block where both meet. Returns null, emitting
/// nothing, when BLAS is off, the type is not f32/f64, or every size is
/// known and the product is small (so K4's 4x4 never branches). CBLAS
/// accumulates in the element type, not in double as the loops do, so its
/// f32 results may differ from the interpreter's in the last bits.
llvm::BasicBlock *
FunctionLowering::branchToBlas(const ir::Op &op, llvm::Value *aMem,
                               llvm::Value *bMem, llvm::Value *out,
                               llvm::Value *m, llvm::Value *n, llvm::Value *k) {
  DType t = op.getResult()->getType().dtype;
  if (!ml.getOptions().blas || (t != DType::F32 && t != DType::F64))
    return nullptr;
  auto *cm = llvm::dyn_cast<llvm::ConstantInt>(m);
  auto *cn = llvm::dyn_cast<llvm::ConstantInt>(n);
  auto *ck = llvm::dyn_cast<llvm::ConstantInt>(k);
  if (cm && cn && ck &&
      cm->getSExtValue() * cn->getSExtValue() * ck->getSExtValue() <
          blasMinWork)
    return nullptr;
  llvm::Value *work = b.CreateMul(b.CreateMul(m, n), k);
  llvm::Value *intMax = i64(std::numeric_limits<int32_t>::max());
  llvm::Value *big = b.CreateICmpSGE(work, i64(blasMinWork));
  llvm::Value *fits = b.CreateAnd(
      b.CreateICmpSLE(m, intMax),
      b.CreateAnd(b.CreateICmpSLE(n, intMax), b.CreateICmpSLE(k, intMax)));
  auto *blasBlock = llvm::BasicBlock::Create(ctx, "matmul.blas", llfn);
  auto *loops = llvm::BasicBlock::Create(ctx, "matmul.loops", llfn);
  auto *done = llvm::BasicBlock::Create(ctx, "matmul.done");
  b.CreateCondBr(b.CreateAnd(big, fits), blasBlock, loops);
  b.SetInsertPoint(blasBlock);
  llvm::Type *i32 = b.getInt32Ty();
  auto toInt = [&](llvm::Value *v) { return b.CreateTrunc(v, i32); };
  llvm::Value *one = constantElement(t, 1), *zero = constantElement(t, 0);
  const int rowMajor = 101, noTrans = 111;
  // c[m, n] = 1 * a[m, k] b[k, n] + 0 * c, leading dimensions k, n, n.
  b.CreateCall(ml.getGemm(t),
               {b.getInt32(rowMajor), b.getInt32(noTrans), b.getInt32(noTrans),
                toInt(m), toInt(n), toInt(k), one, aMem, toInt(k), bMem,
                toInt(n), zero, out, toInt(n)});
  b.CreateBr(done);
  b.SetInsertPoint(loops);
  return done;
}

/// transpose: result[idx] = x[idx permuted back], x read with the strides
/// of its own axes.
void FunctionLowering::lowerTranspose(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *result = op.getResult();
  DType t = result->getType().dtype;
  if (result->getType().isScalar()) {
    setScalar(result, scalarOf(x));
    return;
  }
  const std::vector<int64_t> &perm = op.getAttrs().getInts("perm");
  llvm::Value *xMem = memoryOf(x);
  llvm::SmallVector<llvm::Value *, 4> xDims = dims(x->getType());
  llvm::SmallVector<llvm::Value *, 4> rDims = dims(result->getType());
  llvm::Value *out = resultBuffer(result);
  forNest(rDims, [&](llvm::ArrayRef<llvm::Value *> idx) {
    llvm::SmallVector<llvm::Value *, 4> xIdx(idx.size());
    for (size_t r = 0; r < perm.size(); ++r)
      xIdx[perm[r]] = idx[r];
    storeElement(t, loadElement(t, xMem, linearIndex(xDims, xIdx)), out,
                 linearIndex(rDims, idx));
  });
  setMemory(result, out);
}

/// reshape keeps the row-major elements: the result shares its operand's
/// memory (a scalar result loads the single element).
void FunctionLowering::lowerReshape(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *result = op.getResult();
  if (result->getType().isScalar()) {
    setScalar(result,
              x->getType().isScalar()
                  ? scalarOf(x)
                  : loadElement(x->getType().dtype, memoryOf(x), i64(0)));
    return;
  }
  setMemory(result, memoryOf(x));
}

/// stack: the result is [outer, count, inner]; operand k fills the rows
/// at position k.
void FunctionLowering::lowerStack(const ir::Op &op) {
  const ir::Value *result = op.getResult();
  DType t = result->getType().dtype;
  unsigned axis = op.getAttrs().getInt("axis");
  llvm::Value *out = resultBuffer(result);
  AxisSplit s = splitAt(result->getType(), axis);
  for (auto [k, v] : llvm::enumerate(op.getOperands())) {
    if (v->getType().isScalar()) {
      storeElement(t, scalarOf(v), out, i64(k));
      continue;
    }
    copyElements(t, out, mulIdx(s.extent, s.inner), mulIdx(i64(k), s.inner),
                 memoryOf(v), s.inner, i64(0), s.outer, s.inner);
  }
  setMemory(result, out);
}

/// unstack and split: part k is the slice [offset_k, offset_k + size_k)
/// along the axis. Along axis 0 a slice is contiguous, so the part is a
/// view into the operand; otherwise it is copied.
void FunctionLowering::lowerUnstackOrSplit(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  DType t = x->getType().dtype;
  unsigned axis = op.getAttrs().getInt("axis");
  bool isUnstack = op.getKind() == OpKind::Unstack;
  llvm::Value *xMem = memoryOf(x);
  AxisSplit s = splitAt(x->getType(), axis);
  llvm::Value *offset = i64(0);
  for (const ir::Value *part : op.getResults()) {
    llvm::Value *size = isUnstack ? i64(1) : dim(part->getType().shape[axis]);
    if (part->getType().isScalar()) {
      setScalar(part, loadElement(t, xMem, offset));
    } else if (axis == 0 && !outputFor.count(part)) {
      setMemory(part, elementPtr(t, xMem, mulIdx(offset, s.inner)));
    } else {
      llvm::Value *out = resultBuffer(part);
      llvm::Value *partRow = mulIdx(size, s.inner);
      copyElements(t, out, partRow, i64(0), xMem, mulIdx(s.extent, s.inner),
                   mulIdx(offset, s.inner), s.outer, partRow);
      setMemory(part, out);
    }
    offset = addIdx(offset, size);
  }
}

/// concat: the result is [outer, total, inner]; operand k fills the
/// columns from its offset along the axis.
void FunctionLowering::lowerConcat(const ir::Op &op) {
  const ir::Value *result = op.getResult();
  DType t = result->getType().dtype;
  unsigned axis = op.getAttrs().getInt("axis");
  llvm::Value *out = resultBuffer(result);
  AxisSplit s = splitAt(result->getType(), axis);
  llvm::Value *rowLength = mulIdx(s.extent, s.inner);
  llvm::Value *offset = i64(0);
  for (const ir::Value *v : op.getOperands()) {
    llvm::Value *partRow = mulIdx(dim(v->getType().shape[axis]), s.inner);
    copyElements(t, out, rowLength, offset, memoryOf(v), partRow, i64(0),
                 s.outer, partRow);
    offset = addIdx(offset, partRow);
  }
  setMemory(result, out);
}

/// one_hot: row p is 1 at indices[p] and 0 elsewhere; an index outside
/// [0, depth) gives a row of zeros (as TensorFlow's one_hot and the
/// interpreter).
void FunctionLowering::lowerOneHot(const ir::Op &op) {
  const ir::Value *indices = op.getOperand(0);
  const ir::Value *result = op.getResult();
  DType t = result->getType().dtype;
  llvm::Value *depth = dim(op.getAttrs().getShape("depth")[0]);
  llvm::Value *out = resultBuffer(result);
  auto row = [&](llvm::Value *p, llvm::Value *label) {
    llvm::Value *label64 = b.CreateSExt(label, b.getInt64Ty());
    llvm::Value *rowStart = mulIdx(p, depth);
    forLoop(depth, "j", [&](llvm::Value *j) {
      llvm::Value *v =
          b.CreateSelect(b.CreateICmpEQ(j, label64), constantElement(t, 1),
                         constantElement(t, 0));
      storeElement(t, v, out, addIdx(rowStart, j));
    });
  };
  if (indices->getType().isScalar()) {
    row(i64(0), scalarOf(indices));
  } else {
    llvm::Value *mem = memoryOf(indices);
    forLoop(numElements(indices->getType()), "p",
            [&](llvm::Value *p) { row(p, loadElement(DType::I32, mem, p)); });
  }
  setMemory(result, out);
}

/// softmax_cross_entropy: per row, logsumexp(logits) - logits[label] in
/// the wide type, rounded once. A label outside [0, classes) returns
/// GRADC_ERROR_INDEX.
void FunctionLowering::lowerSoftmaxCrossEntropy(const ir::Op &op) {
  const ir::Value *logits = op.getOperand(0), *labels = op.getOperand(1);
  const ir::Value *result = op.getResult();
  DType t = result->getType().dtype;
  llvm::SmallVector<llvm::Value *, 4> lDims = dims(logits->getType());
  llvm::Value *classes = lDims.back();
  llvm::Value *rows = product(llvm::ArrayRef(lDims).drop_back());
  llvm::Value *xMem = memoryOf(logits);
  bool scalarResult = result->getType().isScalar();
  llvm::Value *labelMem = scalarResult ? nullptr : memoryOf(labels);
  llvm::Value *out = scalarResult ? nullptr : resultBuffer(result);
  llvm::Value *scalar = nullptr;
  auto row = [&](llvm::Value *r) {
    llvm::Value *label =
        scalarResult ? scalarOf(labels) : loadElement(DType::I32, labelMem, r);
    llvm::Value *label64 = b.CreateSExt(label, b.getInt64Ty());
    failIf(b.CreateOr(b.CreateICmpSLT(label64, i64(0)),
                      b.CreateICmpSGE(label64, classes)),
           StatusIndex);
    llvm::Value *rowStart = mulIdx(r, classes);
    auto load = [&](llvm::ArrayRef<llvm::Value *> c) {
      return widen(t, loadElement(t, xMem, addIdx(rowStart, c[0])));
    };
    llvm::Value *lse = logSumExp(t, {classes}, load);
    llvm::Value *picked = load({label64});
    llvm::Value *loss = narrow(t, b.CreateFSub(lse, picked, "loss"));
    if (scalarResult)
      scalar = loss;
    else
      storeElement(t, loss, out, r);
  };
  // One row (logits of rank 1) is straight-line code, so that the scalar
  // loss is defined where later ops use it.
  if (scalarResult) {
    row(i64(0));
    setScalar(result, scalar);
    return;
  }
  forLoop(rows, "r", row);
  setMemory(result, out);
}

/// A call of another function of the module through its C ABI: sizes
/// from the operands' shapes, results into buffers, a non-zero status
/// returned as is.
/// An extern function (docs/Extern.md) is called the same way, by its own
/// symbol, declared in the module; one that returns void has no status.
void FunctionLowering::lowerCall(const ir::Op &op) {
  std::vector<TensorType> paramTypes;
  std::vector<std::string> sizeNames;
  llvm::Function *target = nullptr;
  bool returnsStatus = true;
  if (op.getKind() == OpKind::ExternCall) {
    const ir::ExternDecl *ext = ml.getIRModule().lookupExtern(op.getCallee());
    assert(ext && "call of an unknown extern function");
    paramTypes = ext->paramTypes;
    sizeNames = ext->getSizeNames();
    target = ml.getExternFunction(*ext);
    returnsStatus = ext->returnsStatus;
  } else {
    const ir::Function *callee = ml.getIRModule().lookup(op.getCallee());
    target = ml.getFunction(op.getCallee());
    assert(callee && target && "call of an unknown function");
    for (const ir::Value *p : callee->getParams())
      paramTypes.push_back(p->getType());
    sizeNames = callee->getSizeNames();
  }
  llvm::SmallVector<llvm::Value *, 8> args;
  // The callee binds each size name at the first parameter dimension that
  // names it; our operand has the size at the same dimension.
  for (const std::string &name : sizeNames) {
    llvm::Value *size = nullptr;
    for (auto [p, paramType] : llvm::enumerate(paramTypes)) {
      for (auto [d, calleeDim] : llvm::enumerate(paramType.shape))
        if (calleeDim.isNamed() && calleeDim.getName() == name) {
          size = dim(op.getOperand(p)->getType().shape[d]);
          break;
        }
      if (size)
        break;
    }
    assert(size && "a size name that no parameter binds");
    args.push_back(size);
  }
  for (const ir::Value *v : op.getOperands())
    args.push_back(v->getType().isScalar() ? scalarOf(v) : memoryOf(v));
  llvm::SmallVector<llvm::Value *, 2> resultMem;
  for (const ir::Value *r : op.getResults()) {
    if (r->getType().isScalar()) {
      llvm::IRBuilder<> ab(allocaBlock->getTerminator());
      resultMem.push_back(ab.CreateAlloca(elementType(r->getType().dtype),
                                          nullptr, r->getName()));
    } else {
      resultMem.push_back(resultBuffer(r));
    }
  }
  args.append(resultMem.begin(), resultMem.end());
  llvm::Value *status = b.getInt32(0);
  if (returnsStatus)
    status = b.CreateCall(target, args, "status");
  else
    b.CreateCall(target, args);
  auto *fail = llvm::BasicBlock::Create(ctx, "call.fail", llfn);
  auto *cont = llvm::BasicBlock::Create(ctx, "call.ok", llfn);
  b.CreateCondBr(b.CreateICmpNE(status, b.getInt32(0)), fail, cont);
  b.SetInsertPoint(fail);
  b.CreateStore(status, statusSlot);
  b.CreateBr(failTarget);
  b.SetInsertPoint(cont);
  for (auto [r, mem] : llvm::zip(op.getResults(), resultMem)) {
    if (r->getType().isScalar())
      setScalar(
          r, b.CreateLoad(elementType(r->getType().dtype), mem, r->getName()));
    else
      setMemory(r, mem);
  }
}

/// Copies every returned value that is not in its output buffer yet.
void FunctionLowering::writeOutputs() {
  for (auto [i, v] : llvm::enumerate(fn.getReturns())) {
    llvm::Value *out = outputs[i];
    if (writtenToOutput.contains(v) && outputFor.lookup(v) == out)
      continue;
    DType t = v->getType().dtype;
    if (v->getType().isScalar()) {
      b.CreateStore(scalarOf(v), out);
      continue;
    }
    if (t == DType::Bool) {
      // Element by element, so that the output holds only 0 and 1.
      llvm::Value *in = memoryOf(v);
      forLoop(numElements(v->getType()), "i", [&](llvm::Value *i) {
        storeElement(t, loadElement(t, in, i), out, i);
      });
      continue;
    }
    llvm::Value *bytes =
        mulIdx(numElements(v->getType()),
               i64(llfn->getDataLayout().getTypeAllocSize(elementType(t))));
    b.CreateMemCpy(out, llvm::MaybeAlign(), memoryOf(v), llvm::MaybeAlign(),
                   bytes);
  }
}

/// Completes the heap blocks once every temporary is known: heap.sizes
/// fails on an overflowing byte count (nothing is allocated yet, so it
/// goes straight to `exit`), heap fails when a malloc returned null (to
/// `cleanup`, which frees the others). Without heap temporaries the blocks
/// disappear.
void FunctionLowering::finishHeap() {
  if (heapSlots.empty()) {
    llvm::BranchInst::Create(heapBlock, heapSizes);
    llvm::BranchInst::Create(opsBlock, heapBlock);
    llvm::MergeBlockIntoPredecessor(heapBlock);
    llvm::MergeBlockIntoPredecessor(opsBlock);
    llvm::MergeBlockIntoPredecessor(heapSizes);
    return;
  }
  llvm::IRBuilder<>::InsertPointGuard guard(b);
  llvm::BasicBlock *target = failTarget;
  b.SetInsertPoint(heapSizes);
  failTarget = exitBlock;
  failIf(heapOverflow, StatusAlloc);
  b.CreateBr(heapBlock);
  b.SetInsertPoint(heapBlock);
  failTarget = cleanupBlock;
  failIf(heapNull, StatusAlloc);
  b.CreateBr(opsBlock);
  failTarget = target;
}

void FunctionLowering::run() {
  allocaBlock = llvm::BasicBlock::Create(ctx, "entry", llfn);
  auto *body = llvm::BasicBlock::Create(ctx, "body", llfn);
  exitBlock = llvm::BasicBlock::Create(ctx, "exit");
  failTarget = exitBlock;
  b.SetInsertPoint(allocaBlock);
  statusSlot = b.CreateAlloca(b.getInt32Ty(), nullptr, "status");
  b.CreateBr(body);
  b.SetInsertPoint(body);

  // Arguments: sizes, parameters, outputs (docs/ABI.md).
  auto arg = llfn->arg_begin();
  for (const std::string &name : fn.getSizeNames()) {
    llvm::Value *size = &*arg++;
    sizes[name] = size;
    failIf(b.CreateICmpSLT(size, i64(0)), StatusSize);
  }
  checkElementCounts();
  for (const ir::Value *p : fn.getParams()) {
    llvm::Value *a = &*arg++;
    if (p->getType().isScalar())
      setScalar(p, p->getType().dtype == DType::Bool ? normalizeBool(a) : a);
    else
      setMemory(p, a);
  }
  for (size_t i = 0; i < fn.getReturns().size(); ++i)
    outputs.push_back(&*arg++);

  // The heap's blocks, filled as temporaries appear (finishHeap); every
  // failure from here on goes through cleanup.
  heapSizes = llvm::BasicBlock::Create(ctx, "heap.sizes", llfn);
  heapBlock = llvm::BasicBlock::Create(ctx, "heap", llfn);
  opsBlock = llvm::BasicBlock::Create(ctx, "ops", llfn);
  cleanupBlock = llvm::BasicBlock::Create(ctx, "cleanup");
  b.CreateBr(heapSizes);
  b.SetInsertPoint(opsBlock);
  failTarget = cleanupBlock;

  plan();
  computeLiveness();
  for (auto [pos, op] : llvm::enumerate(fn.getOps())) {
    lowerOp(*op);
    if (pendingDivCheck) {
      failIf(b.CreateLoad(b.getInt1Ty(), divZeroFlag), StatusDivZero);
      pendingDivCheck = false;
    }
    releaseDeadSlots(int(pos));
  }
  writeOutputs();
  b.CreateStore(b.getInt32(StatusOk), statusSlot);
  b.CreateBr(cleanupBlock);
  finishHeap();

  exitBlock->insertInto(llfn);
  b.SetInsertPoint(exitBlock);
  if (heapSlots.empty()) {
    cleanupBlock->replaceAllUsesWith(exitBlock);
    delete cleanupBlock;
  } else {
    cleanupBlock->insertInto(llfn, exitBlock);
    llvm::IRBuilder<> cb(cleanupBlock);
    for (const HeapSlot &slot : heapSlots)
      cb.CreateCall(ml.getFree(), {slot.ptr});
    cb.CreateBr(exitBlock);
  }
  b.CreateRet(b.CreateLoad(b.getInt32Ty(), statusSlot));
}

//===----------------------------------------------------------------------===//
// ModuleLowering
//===----------------------------------------------------------------------===//

llvm::FunctionCallee ModuleLowering::getMalloc() {
  return llvmModule.getOrInsertFunction(
      "malloc", llvm::FunctionType::get(llvm::PointerType::get(ctx, 0),
                                        {llvm::Type::getInt64Ty(ctx)}, false));
}

llvm::FunctionCallee ModuleLowering::getFree() {
  return llvmModule.getOrInsertFunction(
      "free", llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                      {llvm::PointerType::get(ctx, 0)}, false));
}

llvm::FunctionCallee ModuleLowering::getGemm(DType t) {
  return emit::getGemm(llvmModule, t);
}

llvm::FunctionCallee ModuleLowering::getLibm(llvm::StringRef name,
                                             llvm::Type *type) {
  return llvmModule.getOrInsertFunction(
      name, llvm::FunctionType::get(type, {type}, false));
}

llvm::FunctionCallee ModuleLowering::getLibm2(llvm::StringRef name,
                                              llvm::Type *type) {
  return llvmModule.getOrInsertFunction(
      name, llvm::FunctionType::get(type, {type, type}, false));
}

llvm::FunctionCallee ModuleLowering::getMathFunction(llvm::StringRef name,
                                                     unsigned arity) {
  llvm::Type *f32 = llvm::Type::getFloatTy(ctx);
  llvm::SmallVector<llvm::Type *, 2> params(arity, f32);
  return llvmModule.getOrInsertFunction(
      ("gradc_math_" + name + "_f32").str(),
      llvm::FunctionType::get(f32, params, false));
}

llvm::Function *ModuleLowering::getExternFunction(const ir::ExternDecl &decl) {
  return emit::getExternFunction(llvmModule, decl);
}

void ModuleLowering::declareFunction(const ir::Function &fn) {
  functions[fn.getName()] = declareCFunction(llvmModule, module, fn, options);
}

void ModuleLowering::emitWrapper(const ir::Function &fn,
                                 llvm::Function *target) {
  emitJITWrapper(llvmModule, fn, target);
}

void ModuleLowering::run() {
  // Exported functions, and the rule instances that they call.
  std::vector<const ir::Function *> toLower;
  llvm::DenseSet<const ir::Function *> seen;
  for (const auto &fn : module.getFunctions()) {
    bool isRoot = options.roots.empty()
                      ? fn->getRole() != ir::Function::Role::RuleInstance
                      : llvm::is_contained(options.roots, fn->getName());
    if (isRoot) {
      toLower.push_back(fn.get());
      seen.insert(fn.get());
    }
  }
  for (size_t i = 0; i < toLower.size(); ++i)
    for (const auto &op : toLower[i]->getOps())
      if (op->getKind() == OpKind::Call)
        if (const ir::Function *callee = module.lookup(op->getCallee()))
          if (seen.insert(callee).second)
            toLower.push_back(callee);
  // Keep the module order in the output.
  for (const auto &fn : module.getFunctions())
    if (seen.contains(fn.get()))
      declareFunction(*fn);
  for (const auto &fn : module.getFunctions())
    if (seen.contains(fn.get()))
      FunctionLowering(*this, *fn, functions.lookup(fn->getName())).run();
  if (options.jitWrappers)
    for (const auto &fn : module.getFunctions())
      if (seen.contains(fn.get()) &&
          fn->getRole() != ir::Function::Role::RuleInstance)
        emitWrapper(*fn, functions.lookup(fn->getName()));
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::string emit::jitWrapperName(llvm::StringRef symbol) {
  return "__gradc_call_" + symbol.str();
}

static void initializeTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

std::unique_ptr<llvm::TargetMachine>
emit::createTargetMachine(const LLVMOptions &options, std::string &error) {
  initializeTargets();
  bool host = options.triple.empty();
  llvm::Triple triple(host ? llvm::sys::getProcessTriple()
                           : llvm::Triple::normalize(options.triple));
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple.str(), error);
  if (!target) {
    error = "unknown target '" + options.triple + "': " + error;
    return nullptr;
  }
  std::string cpu = options.cpu;
  std::string features;
  if ((host && cpu.empty()) || cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    std::vector<std::string> list;
    for (const auto &f : llvm::sys::getHostCPUFeatures())
      list.push_back((f.second ? "+" : "-") + f.first().str());
    std::sort(list.begin(), list.end());
    features = llvm::join(list, ",");
  } else if (cpu.empty()) {
    cpu = "generic";
  }
  std::unique_ptr<llvm::MCSubtargetInfo> sti(
      target->createMCSubtargetInfo(triple.str(), "", ""));
  if (!sti || (cpu != "generic" && !sti->isCPUStringValid(cpu))) {
    error = "unknown CPU '" + cpu + "' for target '" + triple.str() + "'";
    return nullptr;
  }
  llvm::CodeGenOptLevel level = llvm::CodeGenOptLevel::Default;
  if (options.optLevel == 0)
    level = llvm::CodeGenOptLevel::None;
  else if (options.optLevel >= 3)
    level = llvm::CodeGenOptLevel::Aggressive;
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple.str(), cpu, features, targetOptions,
                                  llvm::Reloc::PIC_, std::nullopt, level));
  if (!tm)
    error = "cannot create a target machine for '" + triple.str() + "'";
  return tm;
}

// gradc/Math.h compiled to bitcode (MathBitcode.cpp, CMakeLists.txt).
#include "MathBitcode.inc"

/// Calls of the math library that one function may inline (see
/// linkMathLibrary).
static constexpr size_t maxInlinedMathCalls = 256;

/// Links the functions of the math library that `module` calls
/// (gradc_math_*) into it, from the embedded bitcode, makes them internal
/// and marks their calls always-inline: the optimiser then inlines them
/// into the loops, which vectorise, and an object file needs nothing
/// beyond libc.
/// The bitcode's CPU attributes are dropped, so that the functions take
/// the module's target (they were compiled for the generic CPU).
static bool linkMathLibrary(llvm::Module &module, std::string &error) {
  bool used = false;
  for (const llvm::Function &fn : module)
    used |= fn.isDeclaration() && fn.getName().starts_with("gradc_math_");
  if (!used)
    return true;
  llvm::MemoryBufferRef buffer(
      llvm::StringRef(reinterpret_cast<const char *>(embeddedMathBitcode),
                      sizeof(embeddedMathBitcode) - 1),
      "gradc-math.bc");
  llvm::Expected<std::unique_ptr<llvm::Module>> math =
      llvm::parseBitcodeFile(buffer, module.getContext());
  if (!math) {
    error = "internal error: the embedded math bitcode does not load: " +
            llvm::toString(math.takeError());
    return false;
  }
  (*math)->setTargetTriple(module.getTargetTriple());
  (*math)->setDataLayout(module.getDataLayout());
  // Every function of the library, the entry points and the gradc::
  // functions that clang left out of line (pow) alike.
  llvm::StringSet<> library;
  for (llvm::Function &fn : **math) {
    fn.removeFnAttr("target-cpu");
    fn.removeFnAttr("target-features");
    fn.removeFnAttr("tune-cpu");
    if (!fn.isDeclaration())
      library.insert(fn.getName());
  }
  if (llvm::Linker::linkModules(module, std::move(*math),
                                llvm::Linker::LinkOnlyNeeded)) {
    error = "internal error: the math bitcode does not link";
    return false;
  }
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration() && library.contains(fn.getName())) {
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
      fn.setComdat(nullptr);
      fn.removeFnAttr(llvm::Attribute::NoInline);
      fn.removeFnAttr(llvm::Attribute::OptimizeNone);
      // The library's own helpers always inline into its entry points;
      // the entry points inline where the calls below say so.
      if (!fn.getName().starts_with("gradc_math_"))
        fn.addFnAttr(llvm::Attribute::AlwaysInline);
    }
  // Each call of an entry point is inlined, unless its function calls the
  // library more than maxInlinedMathCalls times: a fused chain of 10,000
  // sin and tanh inlined is one loop of a million instructions, which
  // took LLVM 78 s to optimise (test/Emit/compile-time-10k.test), so
  // there the calls stay calls and compile time stays linear.
  for (llvm::Function &fn : module) {
    if (library.contains(fn.getName()))
      continue;
    llvm::SmallVector<llvm::CallBase *, 16> calls;
    for (llvm::Instruction &inst : llvm::instructions(fn))
      if (auto *call = llvm::dyn_cast<llvm::CallBase>(&inst))
        if (llvm::Function *callee = call->getCalledFunction())
          if (callee->getName().starts_with("gradc_math_"))
            calls.push_back(call);
    bool inlined = calls.size() <= maxInlinedMathCalls;
    for (llvm::CallBase *call : calls)
      call->addFnAttr(inlined ? llvm::Attribute::AlwaysInline
                              : llvm::Attribute::NoInline);
  }
  return true;
}

std::unique_ptr<llvm::Module> emit::lowerToLLVM(const ir::Module &module,
                                                llvm::LLVMContext &ctx,
                                                llvm::TargetMachine &tm,
                                                const LLVMOptions &options,
                                                std::string &error) {
  auto llvmModule = std::make_unique<llvm::Module>(options.moduleName, ctx);
  llvmModule->setTargetTriple(tm.getTargetTriple().str());
  llvmModule->setDataLayout(tm.createDataLayout());
  if (!module.sourceName.empty())
    llvmModule->setSourceFileName(module.sourceName);
  if (options.viaLoops) {
    if (!printLLVMFromLoops(module, *llvmModule, options, error)) {
      error = "internal error: " + error;
      return nullptr;
    }
  } else {
    ModuleLowering(module, *llvmModule, options).run();
  }
  if (!linkMathLibrary(*llvmModule, error))
    return nullptr;
  llvm::raw_string_ostream os(error);
  if (llvm::verifyModule(*llvmModule, &os)) {
    error =
        "internal error: the LLVM backend produced an invalid module: " + error;
    return nullptr;
  }
  return llvmModule;
}

/// Functions with more top-level loops than this have each loop moved into
/// a function of its own before optimisation.
static constexpr unsigned maxLoopsPerFunction = 64;

/// Makes the uses in `loop` of arguments and of instructions outside it
/// (except allocas, which CodeExtractor inspects) uses of proxies in
/// `preheader`, one per value, recorded in `original` and `proxies`.
static void
proxyOutsideValues(llvm::Loop &loop, llvm::BasicBlock &preheader,
                   llvm::DenseMap<llvm::Value *, llvm::Value *> &original,
                   std::vector<llvm::FreezeInst *> &proxies) {
  llvm::DenseMap<llvm::Value *, llvm::FreezeInst *> proxyOf;
  for (llvm::BasicBlock *block : loop.getBlocks())
    for (llvm::Instruction &inst : *block)
      for (llvm::Use &use : inst.operands()) {
        llvm::Value *value = use.get();
        auto *def = llvm::dyn_cast<llvm::Instruction>(value);
        bool outside = llvm::isa<llvm::Argument>(value) ||
                       (def && !llvm::isa<llvm::AllocaInst>(def) &&
                        !loop.contains(def->getParent()));
        if (!outside || value->getType()->isTokenTy() ||
            value->getType()->isLabelTy())
          continue;
        llvm::FreezeInst *&proxy = proxyOf[value];
        if (!proxy) {
          proxy = new llvm::FreezeInst(value, "", preheader.getTerminator());
          original[proxy] = value;
          proxies.push_back(proxy);
        }
        use.set(proxy);
      }
}

/// Moves every top-level loop of `fn` into an internal noinline function
/// of its own (LLVM's CodeExtractor passes the values it uses as
/// arguments). LLVM 19's loop passes (LoopRotate, LoopDeletion,
/// LoopUnroll) each cost time proportional to the whole function per loop,
/// so a function of n loops (the gradient of an n-step chain) took
/// quadratic time to optimise: 18 s for 3,000 steps. Split, each loop is
/// optimised alone, in linear total time; the call per loop nest costs
/// nothing next to the loop.
static void outlineLoops(llvm::Function &fn) {
  llvm::DominatorTree dt(fn);
  llvm::LoopInfo li(dt);
  std::vector<llvm::Loop *> loops(li.begin(), li.end());
  if (loops.size() <= maxLoopsPerFunction)
    return;
  // One cache for the function (its allocas stay in the entry block, which
  // no extraction touches); one per loop would be quadratic again.
  llvm::CodeExtractorAnalysisCache cache(fn);
  // CodeExtractor walks every use of each value that a loop reads from
  // outside: the size arguments, used by every loop, made the extraction
  // of n loops quadratic (5.7 s of 16 s for the gradient of a 10,000-step
  // chain). Each loop reads such a value through a proxy of its own (a
  // `freeze` in its preheader, used only by that loop) while it is
  // extracted; afterwards each call passes the value itself again, the
  // argument takes the value's name, and the proxies are erased, which
  // leaves exactly the IR that extraction without proxies gives.
  llvm::DenseMap<llvm::Value *, llvm::Value *> original;
  std::vector<llvm::FreezeInst *> proxies;
  std::vector<llvm::CallInst *> calls;
  for (llvm::Loop *loop : loops) {
    llvm::BasicBlock *preheader = loop->getLoopPreheader();
    if (preheader)
      proxyOutsideValues(*loop, *preheader, original, proxies);
    llvm::CodeExtractor extractor(loop->getBlocks(), &dt);
    if (!extractor.isEligible())
      continue;
    if (llvm::Function *outlined = extractor.extractCodeRegion(cache)) {
      outlined->addFnAttr(llvm::Attribute::NoInline);
      outlined->addFnAttr(llvm::Attribute::NoUnwind);
      if (auto *call = llvm::dyn_cast<llvm::CallInst>(outlined->user_back()))
        calls.push_back(call);
    }
  }
  for (llvm::CallInst *call : calls)
    for (unsigned i = 0, e = call->arg_size(); i != e; ++i)
      if (llvm::Value *value = original.lookup(call->getArgOperand(i)))
        call->getCalledFunction()->getArg(i)->setName(value->getName());
  for (llvm::FreezeInst *proxy : proxies) {
    proxy->replaceAllUsesWith(proxy->getOperand(0));
    proxy->eraseFromParent();
  }
}

/// LLVM's option `-force-ordered-reductions` (LoopVectorize.cpp), set to
/// `value` for the life of this object unless the user gave it
/// (`-mllvm`). A loop that accumulates a float in order (`s += f(x[i])`,
/// every sum of the loop IR) is not vectorised without it on x86, since
/// reordering the additions would change the sum; with it, the loop
/// vectoriser computes f on whole vectors and adds the lanes in order
/// (llvm.vector.reduce.fadd with a start value, which keeps the order),
/// so the sum is the same bit for bit: issue 13's
/// `sum(sigmoid(x) * tanh(x) + exp(-x * x) * sin(x))` over 10^6 floats
/// took 298 ms without and 25 ms with it (docs/LLVMBackend.md).
class OrderedReductions {
public:
  explicit OrderedReductions(bool value) {
    llvm::StringMap<llvm::cl::Option *> &options =
        llvm::cl::getRegisteredOptions();
    auto it = options.find("force-ordered-reductions");
    // The loop vectoriser reads the option only when it occurred.
    if (!value || it == options.end() || it->second->getNumOccurrences())
      return;
    option = it->second;
    option->addOccurrence(0, "force-ordered-reductions", "true");
  }
  ~OrderedReductions() {
    if (option)
      option->reset();
  }

private:
  llvm::cl::Option *option = nullptr;
};

// LLVM's passes recurse along use-def chains (JumpThreading's
// computeValueKnownInPredecessors, for one, and code generation's too), as
// deep as the chain of values in a function: the gradient of a 100,000-op
// chain overflowed the main thread's 8 MB stack (utils/scaling.sh;
// test/Emit/llvm-deep-chain-stack.test). 512 MB is address space, of which
// only what the recursion touches is ever mapped.
void emit::runWithLargeStack(llvm::function_ref<void()> work) {
  constexpr unsigned stackBytes = 512u << 20;
  llvm::thread worker(std::optional<unsigned>(stackBytes), [&] { work(); });
  worker.join();
}

void emit::optimizeModule(llvm::Module &module, llvm::TargetMachine &tm,
                          unsigned optLevel, bool orderedReductions) {
  if (optLevel == 0)
    return;
  std::vector<llvm::Function *> defined;
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration())
      defined.push_back(&fn);
  {
    TimeRegion region("outline loops");
    for (llvm::Function *fn : defined)
      outlineLoops(*fn);
  }
  TimeRegion region("LLVM pipeline");
  OrderedReductions ordered(orderedReductions);
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  // No SLP vectorisation: LLVM 19's SLP vectoriser miscompiles the
  // straight-line code that full unrolling makes of small batched matmul
  // chains on AVX-512 targets (test/Backends/batched-matmul-chain.grad:
  // the middle batch came out wrong; -opt-bisect-limit names
  // SLPVectorizerPass, and the input is free of undefined behaviour:
  // ASan and MSan are clean, and dropping every nuw, noalias and inbounds
  // changes nothing). The loops are vectorised by the loop vectoriser,
  // which is where the work is.
  tuning.SLPVectorization = false;
  tuning.LoopInterleaving = true;
  tuning.LoopUnrolling = true;
  llvm::PassBuilder pb(&tm, tuning);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = optLevel == 1   ? llvm::OptimizationLevel::O1
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
  runWithLargeStack([&] { mpm.run(module, mam); });
}

std::unique_ptr<llvm::Module> emit::buildLLVMModule(const ir::Module &module,
                                                    llvm::LLVMContext &ctx,
                                                    llvm::TargetMachine &tm,
                                                    const LLVMOptions &options,
                                                    std::string &error) {
  std::unique_ptr<llvm::Module> llvmModule;
  {
    TimeRegion region("lower to LLVM");
    llvmModule = lowerToLLVM(module, ctx, tm, options, error);
  }
  if (!llvmModule)
    return nullptr;
  TimeRegion region("optimize");
  optimizeModule(*llvmModule, tm, options.optLevel,
                 /*orderedReductions=*/options.viaLoops);
  return llvmModule;
}

bool emit::writeObjectFile(llvm::Module &module, llvm::TargetMachine &tm,
                           llvm::raw_pwrite_stream &os, std::string &error) {
  TimeRegion region("code generation");
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             llvm::CodeGenFileType::ObjectFile)) {
    error =
        "target '" + tm.getTargetTriple().str() + "' cannot emit object files";
    return false;
  }
  runWithLargeStack([&] { pm.run(module); });
  return true;
}
