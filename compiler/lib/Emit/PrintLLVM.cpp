//===- PrintLLVM.cpp - The LLVM printer of the loop IR --------------------===//
//
// Builds a lowered module (after the loop passes) as LLVM IR, one
// statement of the loop IR at a time, as PrintCpp.cpp prints it as C++:
//
//   - `for`: a canonical counted loop (a header with the induction
//     variable's phi, `i < extent`, the body, `i + 1` nuw), which LLVM's
//     loop passes rotate and its loop vectoriser vectorises;
//   - store and accumulation: a load (for an accumulation), the combiner
//     and a store through an inbounds GEP of the buffer's element type;
//   - check: a branch to the function's failure path with the ABI status;
//   - the matmul kernel: EmitLLVM's loops (i, p, j with a row of
//     accumulators in the kernel's accumulator type, so that the j loop
//     over contiguous rows vectorises), or CBLAS with LLVMOptions::blas;
//   - call and extern_call: a call through the C ABI, its status checked.
//
// Memory: parameters and outputs are the noalias arguments; each planned
// scratch slot is one block of the scratch cache (gradc_scratch_take,
// MathBitcode.cpp; malloc in the JIT), allocated after the size checks,
// checked once, returned on every way out; each stack slot one alloca; a
// view is a GEP of its base; a constant is a private global. A local is
// an SSA value (a phi at the header of each loop that writes it), not an
// alloca for mem2reg: see FunctionPrinter::localValues.
//
// Arithmetic is the loop IR's (docs/Loops.md), as the evaluator computes
// it: no fast-math flags; i32 wraps; the NaN-propagating max/min are
// gradc/Math.h's `maximum`/`minimum` (compare and blend); the f32
// intrinsics call gradc/Math.h's functions, linked as bitcode by
// EmitLLVM.cpp's linkMathLibrary and inlined; f64 ones are libm's. The
// ABI (signature, trampoline, size checks) is LLVMABI.h's, shared with
// EmitLLVM.cpp. Nothing here knows what an op was.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/PrintLLVM.h"

#include "LLVMABI.h"

#include "gradc/ABI.h"
#include "gradc/Basic/Timing.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/Emit/SizeChecks.h"
#include "gradc/Emit/TransposedOperands.h"
#include "gradc/Loops/Loops.h"
#include "gradc/Math.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/InstructionSimplify.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"

#include <limits>
#include <map>

using namespace gradc;
using namespace gradc::emit;
using namespace gradc::loops;

namespace {

/// The status of docs/ABI.md that a failed check returns.
int32_t statusOfCheck(loops::CheckStatus status) {
  switch (status) {
  case loops::CheckStatus::DivZero:
    return GRADC_ERROR_DIV_ZERO;
  case loops::CheckStatus::Index:
    return GRADC_ERROR_INDEX;
  }
  llvm_unreachable("unknown check status");
}

/// A kernel's accumulator row of at most this many bytes, with a known
/// length, is an alloca; a longer one is allocated with the scratch.
constexpr int64_t maxStackRowBytes = 4096;

/// A matmul of fewer columns than this (known) is a narrow one
/// (FunctionPrinter::narrowKernel), as the C++ runtime's matmulNarrow
/// takes products of fewer than 16.
constexpr int64_t narrowColumnsBelow = 16;
/// The rows of one vector of a narrow kernel, and the side of the blocks
/// of an operand that it transposes in registers.
constexpr int64_t narrowLanes = 8;

/// The columns of a narrow kernel `s` (f32 or f64 data, a float
/// accumulator, a known number of columns below narrowColumnsBelow), or 0.
int64_t narrowColumns(const Stmt &s) {
  const Expr &n = *s.operands[5];
  auto isFloatData = [](const Buffer *buf) {
    return buf->dtype == DType::F32 || buf->dtype == DType::F64;
  };
  if (s.kind != Stmt::Kind::KernelCall || n.kind != Expr::Kind::Const ||
      n.value < 1 || n.value >= narrowColumnsBelow || !isFloatType(s.accType) ||
      !isFloatData(s.outputs[0]) || !isFloatData(s.inputs[0]) ||
      !isFloatData(s.inputs[1]))
    return 0;
  return int64_t(n.value);
}

/// The rows a narrow kernel of `n` columns computes at a time: vectors of
/// narrowLanes rows, as many as make up to 8 vectors of accumulators (8
/// independent sums hide an add's latency), at most 64 rows.
int64_t narrowBlockRows(int64_t n) {
  int64_t rows = narrowLanes;
  while (rows < 64 && n * 2 * rows / narrowLanes <= 8)
    rows *= 2;
  return rows;
}

/// The state shared by the functions of one module.
struct ModuleState {
  const ir::Module &module;
  llvm::Module &llvmModule;
  const LLVMOptions &options;
  llvm::StringMap<llvm::Function *> functions;
  /// Whether scratch blocks come from the scratch cache: when asked, and
  /// on Linux, whose C library the cache's pthread calls were compiled
  /// against (MathBitcode.cpp); elsewhere malloc and free.
  bool scratchCache = options.scratchCache &&
                      llvm::Triple(llvmModule.getTargetTriple()).isOSLinux();

  llvm::FunctionCallee mathFunction(llvm::StringRef name, unsigned arity) {
    llvm::Type *f32 = llvm::Type::getFloatTy(llvmModule.getContext());
    llvm::SmallVector<llvm::Type *, 2> params(arity, f32);
    return llvmModule.getOrInsertFunction(
        ("gradc_math_" + name + "_f32").str(),
        llvm::FunctionType::get(f32, params, false));
  }
  /// gradc_math_sinSmall_f32(x): a range version's sin and cos, the
  /// small path alone (FunctionPrinter::smallTrigCall sets the flag).
  llvm::FunctionCallee smallTrigFunction(llvm::StringRef name) {
    return mathFunction((name + "Small").str(), 1);
  }
  llvm::FunctionCallee libm(llvm::StringRef name, unsigned arity) {
    llvm::Type *f64 = llvm::Type::getDoubleTy(llvmModule.getContext());
    llvm::SmallVector<llvm::Type *, 2> params(arity, f64);
    return llvmModule.getOrInsertFunction(
        name, llvm::FunctionType::get(f64, params, false));
  }
  llvm::FunctionCallee malloc() {
    llvm::LLVMContext &ctx = llvmModule.getContext();
    return llvmModule.getOrInsertFunction(
        "malloc",
        llvm::FunctionType::get(llvm::PointerType::get(ctx, 0),
                                {llvm::Type::getInt64Ty(ctx)}, false));
  }
  /// The module's `gradc.num_threads()` (threadCount below).
  llvm::Function *numThreads = nullptr;
  llvm::Function *threadCount();
  /// A function that the program may lack (libgomp's, OpenBLAS's): a null
  /// address then, so that nothing new must be linked.
  llvm::Function *weakFunction(llvm::StringRef name, llvm::FunctionType *type) {
    llvm::Function *f = llvmModule.getFunction(name);
    if (!f)
      f = llvm::Function::Create(type, llvm::GlobalValue::ExternalWeakLinkage,
                                 name, llvmModule);
    return f;
  }
  /// The scratch cache's `ptr gradc_scratch_take(i64 bytes, ptr capacity)`
  /// and `void gradc_scratch_give(ptr, i64 capacity)` (MathBitcode.cpp).
  llvm::FunctionCallee scratchTake() {
    llvm::LLVMContext &ctx = llvmModule.getContext();
    llvm::Type *ptr = llvm::PointerType::get(ctx, 0);
    return llvmModule.getOrInsertFunction(
        "gradc_scratch_take",
        llvm::FunctionType::get(ptr, {llvm::Type::getInt64Ty(ctx), ptr},
                                false));
  }
  llvm::FunctionCallee scratchGive() {
    llvm::LLVMContext &ctx = llvmModule.getContext();
    return llvmModule.getOrInsertFunction(
        "gradc_scratch_give",
        llvm::FunctionType::get(
            llvm::Type::getVoidTy(ctx),
            {llvm::PointerType::get(ctx, 0), llvm::Type::getInt64Ty(ctx)},
            false));
  }
  llvm::FunctionCallee free() {
    llvm::LLVMContext &ctx = llvmModule.getContext();
    return llvmModule.getOrInsertFunction(
        "free",
        llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                {llvm::PointerType::get(ctx, 0)}, false));
  }
};

/// The builder of one function.
class FunctionPrinter {
public:
  FunctionPrinter(ModuleState &ms, const LoopFunction &fn,
                  const ir::Function &irFn, llvm::Function *llfn)
      : ms(ms), fn(fn), irFn(irFn), llfn(llfn), ctx(llfn->getContext()),
        b(ctx) {}

  void run();

private:
  // Types.
  llvm::Type *memoryType(DType t);
  llvm::Type *valueType(ScalarType t);
  int64_t byteSize(DType t) {
    return dataLayout().getTypeAllocSize(memoryType(t));
  }
  const llvm::DataLayout &dataLayout() { return llfn->getDataLayout(); }
  llvm::Value *i64(int64_t v) { return b.getInt64(v); }

  // Control flow.
  void failIf(llvm::Value *cond, int32_t status, llvm::BasicBlock *target);
  llvm::BranchInst *forLoop(llvm::Value *n, const llvm::Twine &name,
                            llvm::function_ref<void(llvm::Value *)> body,
                            llvm::Value *start = nullptr,
                            const Block *carrying = nullptr);
  llvm::Metadata *loopHint(const char *name, llvm::Constant *value = nullptr);
  void setLoopHints(llvm::BranchInst *latch,
                    llvm::ArrayRef<llvm::Metadata *> hints);
  void markLaneLoop(llvm::BranchInst *latch, int64_t lanes);
  bool hasMaskedTail(const Stmt &s) const;
  void markMaskedTail(llvm::BranchInst *latch);
  void innermostLoop(const Stmt &s, llvm::Value *start, llvm::Value *end);
  void keepScalar(llvm::BranchInst *latch);
  void parallelLoop(const Stmt &s);
  void privatesHere(const Stmt &s);
  void rangeVersion();

  // Memory.
  void prologue();
  void storage();
  llvm::Value *pointerOf(const Buffer *buf);
  bool isScalarParam(const Buffer *buf) const {
    return buf->kind == Buffer::Kind::Param && buf->shape.empty();
  }
  bool isValueLocal(const Buffer *buf) const {
    return buf->kind == Buffer::Kind::Local && !addressedLocals.contains(buf);
  }
  void findAddressedLocals();
  llvm::Value *localValue(const Buffer *buf);
  void simplifyLocalPhis();
  llvm::Value *loadElement(const Buffer *buf, llvm::Value *idx);
  const Expr *widenSharedFactor(const Stmt &s);
  void storeElement(const Buffer *buf, llvm::Value *idx, llvm::Value *v);
  llvm::Value *toMemory(DType t, llvm::Value *v);
  llvm::Value *fromMemory(DType t, llvm::Value *v);

  // Expressions.
  llvm::Value *expr(const Expr &e);
  llvm::Value *prim(const Expr &e);
  llvm::Value *intrinsic(const Expr &e);
  llvm::Value *smallTrigCall(Intrinsic fn, llvm::Value *x);
  llvm::Value *castTo(ScalarType to, ScalarType from, llvm::Value *v);
  llvm::Value *constant(ScalarType t, double v);
  llvm::Value *maximum(llvm::Value *a, llvm::Value *c);
  llvm::Value *minimum(llvm::Value *a, llvm::Value *c);
  llvm::Value *laneExtremum(Combiner c, llvm::Value *old, llvm::Value *v);
  llvm::Value *combine(Combiner c, ScalarType t, llvm::Value *old,
                       llvm::Value *v);

  // Statements.
  void block(const Block &blk);
  void stmt(const Stmt &s);
  void nestedStmt(const Stmt &s);
  void kernel(const Stmt &s);
  /// A kernel's operand: `buf[off + row * ld + col]`, or, for a source
  /// read in place (TransposedOperands.h), `buf[col * ld + row]`.
  struct Operand {
    const Buffer *buf;
    llvm::Value *off;
    bool transposed;
  };
  Operand kernelOperand(const Stmt &s, unsigned i);
  Operand blasOperand(const Stmt &s, unsigned i, Operand loopsOperand);
  bool blasMayTake(const Stmt &s) const;
  llvm::BasicBlock *narrowKernel(const Stmt &s, int64_t n, Operand a,
                                 Operand bm, llvm::Value *zOff, llvm::Value *m,
                                 llvm::Value *k);
  void narrowRows(const Stmt &s, int64_t n, int64_t rows, Operand a, Operand bm,
                  llvm::Value *zOff, llvm::Value *m, llvm::Value *k,
                  llvm::Value *i0);
  llvm::Value *convertVector(llvm::Value *v, llvm::Type *to);
  llvm::BasicBlock *branchToBlas(const Stmt &s, Operand a, Operand bm,
                                 llvm::Value *z, llvm::Value *m, llvm::Value *k,
                                 llvm::Value *n);
  void call(const Stmt &s);

  ModuleState &ms;
  const LoopFunction &fn;
  const ir::Function &irFn;
  llvm::Function *llfn;
  llvm::LLVMContext &ctx;
  llvm::IRBuilder<> b;

  llvm::BasicBlock *entry = nullptr, *cleanup = nullptr, *exit = nullptr;
  /// Where a failure goes: `exit` before the heap exists, `cleanup` after.
  llvm::BasicBlock *failTarget = nullptr;
  llvm::AllocaInst *statusSlot = nullptr;
  /// A range version's flag (loops::hasRangeVersion), and whether the
  /// first copy, with the small-argument sin and cos, is being printed.
  llvm::AllocaInst *rangeFlag = nullptr;
  bool smallTrig = false;
  llvm::StringMap<llvm::Value *> sizes;
  /// Each buffer's first element (a scalar parameter: its value).
  llvm::DenseMap<const Buffer *, llvm::Value *> pointers;
  llvm::DenseMap<const Buffer *, llvm::Value *> scalarParams;
  /// The accumulator row of each kernel call that needs one.
  llvm::DenseMap<const Stmt *, llvm::Value *> rows;
  /// The transposes that narrow kernels read from their sources.
  TransposedOperands transposed;
  /// The transposes of the other kernels that CBLAS may take: CBLAS reads
  /// their sources transposed; the kernel's loops, run below blasMinWork,
  /// store them first (their nests are printed there, not in place).
  TransposedOperands blasTransposed;
  /// The accumulators of the narrow kernels, by function and vector
  /// type: allocas that every such kernel of the function shares.
  std::map<std::pair<llvm::Function *, llvm::Type *>,
           std::vector<llvm::AllocaInst *>>
      narrowAccumulators;
  llvm::DenseMap<unsigned, llvm::Value *> loopVars;
  /// The factor of a dot loop widened once for all its steps
  /// (widenSharedFactor): the <K x double> vector and the step's loop
  /// variable, which picks its element.
  llvm::DenseMap<const Expr *, std::pair<llvm::Value *, unsigned>>
      widenedFactors;
  std::vector<llvm::Value *> heap;
  /// With the scratch cache, each heap block's capacity (an i64 alloca).
  std::vector<llvm::Value *> capacities;
  /// The value (in its memory type) of each local at the builder's
  /// point; none yet: undef, as a load of an alloca never stored. Locals
  /// are SSA values, not allocas, because a gradient's merged loop has
  /// thousands of them, and LLVM's mem2reg walks a block's instructions
  /// from its start for each alloca that is both read and written in it:
  /// quadratic, 87% of `--emit=llvm` of a 10,000-step gradient.
  llvm::DenseMap<const Buffer *, llvm::Value *> localValues;
  /// The locals whose address a call or kernel takes: allocas still.
  llvm::DenseSet<const Buffer *> addressedLocals;
  /// Each buffer's position in the function's list.
  llvm::DenseMap<const Buffer *, unsigned> bufferOrder;
  /// The reads of locals that held a constant (placeholders).
  std::vector<llvm::Instruction *> constantLoads;
  /// The phis of locals at loop headers, pruned by simplifyLocalPhis.
  std::vector<std::pair<llvm::PHINode *, const Buffer *>> localPhis;
};

/// A buffer's name in the IR: the user's (`h`, `d_x`), or `t3` for a
/// numbered temporary, as PrintCpp names it.
std::string valueName(const Buffer *buf) {
  if (buf->name.empty() || llvm::isDigit(buf->name[0]))
    return "t" + buf->name;
  return buf->name;
}

//===--- Types ------------------------------------------------------------===//

/// In memory a bool is a byte holding 0 or 1 (docs/ABI.md).
llvm::Type *FunctionPrinter::memoryType(DType t) {
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

/// In an expression a bool is an i1, an index an i64.
llvm::Type *FunctionPrinter::valueType(ScalarType t) {
  switch (t) {
  case ScalarType::F32:
    return b.getFloatTy();
  case ScalarType::F64:
    return b.getDoubleTy();
  case ScalarType::I32:
    return b.getInt32Ty();
  case ScalarType::Bool:
    return b.getInt1Ty();
  case ScalarType::Index:
    return b.getInt64Ty();
  }
  llvm_unreachable("unknown scalar type");
}

//===--- Control flow -----------------------------------------------------===//

/// Returns `status` from the function (through `target`) when `cond`
/// holds.
void FunctionPrinter::failIf(llvm::Value *cond, int32_t status,
                             llvm::BasicBlock *target) {
  auto *fail = llvm::BasicBlock::Create(ctx, "fail", llfn);
  auto *cont = llvm::BasicBlock::Create(ctx, "ok", llfn);
  b.CreateCondBr(cond, fail, cont);
  b.SetInsertPoint(fail);
  b.CreateStore(b.getInt32(status), statusSlot);
  b.CreateBr(target);
  b.SetInsertPoint(cont);
}

/// `for (i = start; i < n; ++i) body(i)` (start 0 by default), leaving
/// the builder after it; returns the loop's back edge. Each local that a
/// statement of `carrying` (the loop IR's body) writes gets a phi in the
/// header, its value in the body's first iteration and after the loop.
llvm::BranchInst *
FunctionPrinter::forLoop(llvm::Value *n, const llvm::Twine &name,
                         llvm::function_ref<void(llvm::Value *)> body,
                         llvm::Value *start, const Block *carrying) {
  llvm::BasicBlock *pre = b.GetInsertBlock();
  auto *header = llvm::BasicBlock::Create(ctx, name + ".header", llfn);
  auto *bodyBlock = llvm::BasicBlock::Create(ctx, name + ".body", llfn);
  auto *after = llvm::BasicBlock::Create(ctx, name + ".exit");
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, name);
  i->addIncoming(start ? start : i64(0), pre);
  llvm::SmallVector<std::pair<const Buffer *, llvm::PHINode *>, 8> carried;
  if (carrying) {
    // Each local written, with its position among the function's buffers
    // (a gradient's merged loop writes tens of thousands).
    llvm::SmallVector<std::pair<unsigned, const Buffer *>, 8> written;
    llvm::SmallDenseSet<const Buffer *, 8> seen;
    walk(*carrying, [&](const Stmt &s) {
      if ((s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate) &&
          isValueLocal(s.buffer) && seen.insert(s.buffer).second)
        written.push_back({bufferOrder.lookup(s.buffer), s.buffer});
    });
    // In the order mem2reg gave the allocas' phis (each one inserted
    // first in the header, in the order of the function's buffers), so
    // that the optimised code is the same.
    llvm::sort(written, llvm::less_first());
    llvm::IRBuilder<> hb(header, header->begin());
    for (auto [position, buf] : written) {
      hb.SetInsertPoint(header, header->begin());
      // Named once it has survived simplifyLocalPhis, so that the names
      // of the phis removed take no numbers from other values.
      llvm::PHINode *phi = hb.CreatePHI(memoryType(buf->dtype), 2);
      phi->addIncoming(localValue(buf), pre);
      carried.push_back({buf, phi});
      localPhis.push_back({phi, buf});
    }
    for (auto [buf, phi] : carried)
      localValues[buf] = phi;
  }
  b.CreateCondBr(b.CreateICmpSLT(i, n), bodyBlock, after);
  b.SetInsertPoint(bodyBlock);
  body(i);
  llvm::Value *next = b.CreateNUWAdd(i, i64(1), name + ".next");
  i->addIncoming(next, b.GetInsertBlock());
  for (auto [buf, phi] : carried) {
    phi->addIncoming(localValue(buf), b.GetInsertBlock());
    localValues[buf] = phi;
  }
  llvm::BranchInst *latch = b.CreateBr(header);
  after->insertInto(llfn);
  b.SetInsertPoint(after);
  return latch;
}

/// Asks LLVM to vectorise the lane loop that ends with `latch` across its
/// lanes, and not to unroll it first. LLVM's pipeline fully unrolls a
/// loop of 8 iterations before the loop vectoriser runs, which then
/// vectorises the loop around it: each lane becomes an in-order reduction
/// of its own (8 reductions of 4 elements per step, one element at a time)
/// and without the SLP vectoriser (off, see EmitLLVM.cpp) nothing puts the
/// 8 lanes back into one vector. Vectorised across the lanes instead, the
/// step is one vector load, convert and add, and each lane still adds its
/// elements in order, so the sums are the same bit for bit. (The loop
/// vectoriser leaves loops of fewer than 16 iterations alone unless
/// vectorisation is forced, hence `vectorize.enable`.)
/// One entry of a loop's `llvm.loop` metadata: `!{!"name", value}`, or
/// `!{!"name"}` without a value.
llvm::Metadata *FunctionPrinter::loopHint(const char *name,
                                          llvm::Constant *value) {
  llvm::MDString *key = llvm::MDString::get(ctx, name);
  if (!value)
    return llvm::MDNode::get(ctx, {key});
  return llvm::MDNode::get(ctx, {key, llvm::ConstantAsMetadata::get(value)});
}

/// Gives the loop that ends with `latch` its `llvm.loop` metadata: a
/// distinct node that names itself first, then `hints`.
void FunctionPrinter::setLoopHints(llvm::BranchInst *latch,
                                   llvm::ArrayRef<llvm::Metadata *> hints) {
  llvm::SmallVector<llvm::Metadata *, 4> ops{nullptr};
  ops.append(hints.begin(), hints.end());
  llvm::MDNode *self = llvm::MDNode::getDistinct(ctx, ops);
  self->replaceOperandWith(0, self);
  latch->setMetadata(llvm::LLVMContext::MD_loop, self);
}

void FunctionPrinter::markLaneLoop(llvm::BranchInst *latch, int64_t lanes) {
  // All the lanes in one vector (two or more registers where they are
  // wider than the target's), so that the loop runs once and is gone; a
  // narrower width leaves a loop of a few iterations inside every step.
  // (isLaneLoop: ir::reductionLanes f64 or ir::reductionLanesF32 f32
  // lanes, a power of two: 16 floats are one <16 x float>.)
  setLoopHints(latch,
               {loopHint("llvm.loop.vectorize.enable", b.getTrue()),
                loopHint("llvm.loop.unroll.disable"),
                loopHint("llvm.loop.vectorize.width", b.getInt32(lanes))});
}

/// The most iterations an innermost loop of unknown extent runs as masked
/// vector iterations (innermostLoop).
static constexpr int64_t maskedTripMax = 32;

/// Whether `s` is an innermost loop whose body is stores, which LLVM can
/// run as masked vector iterations. Not accumulations: a row accumulated
/// in a loop nest is loaded again right after its masked store, which
/// the processor cannot forward to the load (GMM's column sums over
/// D = 10: the gradient 13% slower); nor the in-order additions of a
/// reduction, which would add the masked-off lanes one by one too.
static bool isPlainInnermost(const Stmt &s) {
  return llvm::all_of(
      s.body, [&](const StmtPtr &c) { return c->kind == Stmt::Kind::Store; });
}

/// Asks LLVM to fold the loop's remainder into masked vector iterations
/// (`vectorize.predicate.enable`): with 512-bit vectors LLVM vectorises 16
/// floats per step, then 8, then runs what is left one at a time, so that
/// an LSTM's rows of 14 ran 8 elements in a vector and 6 alone. Masked,
/// they are one step. Each element is computed as before: the same bits.
void FunctionPrinter::markMaskedTail(llvm::BranchInst *latch) {
  setLoopHints(latch,
               {loopHint("llvm.loop.vectorize.predicate.enable", b.getTrue())});
}

/// Whether the loop `s` gets a masked copy (innermostLoop): where the
/// vectors are 512 bits wide, an innermost loop of stores whose extent is
/// a size name (the loops markLaneLoop marks all have known extents).
bool FunctionPrinter::hasMaskedTail(const Stmt &s) const {
  return ms.options.maskedTails && s.extent->kind != Expr::Kind::Const &&
         isPlainInnermost(s);
}

/// Whether `s` is the rest of a sum or max in lanes (Lower.cpp,
/// accumulateLanes): `for %r < E % W { ...; %lanes[%r] += t }` with E a
/// size known only at run time, a stack buffer of lanes. LLVM vectorises
/// such a loop of at most W - 1 iterations with masked loads and stores
/// (it folds the tail), and the lanes' tree right after it then loads each
/// lane from a masked store, which the processor cannot forward: the load
/// waits until the store has retired. GMM's gradient, rows of D = 10 in 16
/// lanes, lost a fifth of its time in that wait; kept scalar, the rest's
/// at most W - 1 adds are stores that the tree's loads read at once.
static bool isLaneRestLoop(const Stmt &s) {
  const Expr &e = *s.extent;
  if (e.kind != Expr::Kind::Prim || e.op != PrimOp::Rem ||
      e.args[1]->kind != Expr::Kind::Const)
    return false;
  for (const auto &st : s.body)
    if (st->kind == Stmt::Kind::Accumulate &&
        st->buffer->kind == Buffer::Kind::Stack &&
        st->index->kind == Expr::Kind::LoopVar && st->index->var == s.var)
      return true;
  return false;
}

/// Asks LLVM not to vectorise the loop that ends with `latch`.
void FunctionPrinter::keepScalar(llvm::BranchInst *latch) {
  setLoopHints(latch, {loopHint("llvm.loop.vectorize.enable", b.getFalse())});
}

/// An innermost loop of plain statements, of an extent unknown until run
/// time, over [start, end). Masked steps pay for short loops and cost
/// long ones (each step computes its mask, and LLVM does not interleave
/// them: K3's rows of 1,000, 7% slower), so the loop is printed twice,
/// the masked copy for a run of at most maskedTripMax iterations and the
/// plain one for a longer run; each runs all the iterations or none, so
/// they are the one loop. A loop of known extent is left to LLVM, which
/// knows its trip count (the spiral's loops over 2 classes, masked, were
/// 3-5% slower).
void FunctionPrinter::innermostLoop(const Stmt &s, llvm::Value *start,
                                    llvm::Value *end) {
  auto body = [&](llvm::Value *i) {
    loopVars[s.var] = i;
    block(s.body);
    loopVars.erase(s.var);
  };
  std::string name = "i" + std::to_string(s.var);
  llvm::Value *isShort =
      b.CreateICmpSLE(b.CreateSub(end, start), i64(maskedTripMax));
  markMaskedTail(forLoop(b.CreateSelect(isShort, end, start), name + ".short",
                         body, start, &s.body));
  forLoop(b.CreateSelect(isShort, start, end), name, body, start, &s.body);
}

//===--- Memory -----------------------------------------------------------===//

/// The arguments (docs/ABI.md: sizes, inputs, outputs), the negative-size
/// and element-count checks, as EmitLLVM makes them.
void FunctionPrinter::prologue() {
  NameScope scope;
  std::vector<CParam> cparams = getCParams(ms.module, irFn, scope);
  unsigned input = 0;
  for (auto [i, p] : llvm::enumerate(cparams)) {
    llvm::Argument *arg = llfn->getArg(i);
    switch (p.kind) {
    case CParamKind::Size:
      sizes[p.sourceName] = arg;
      failIf(b.CreateICmpSLT(arg, i64(0)), GRADC_ERROR_SIZE, exit);
      break;
    case CParamKind::Input:
      for (const Buffer *buf : fn.params)
        if (buf->position == input) {
          if (isScalarParam(buf))
            scalarParams[buf] = arg;
          else
            pointers[buf] = arg;
        }
      ++input;
      break;
    case CParamKind::Output:
      for (const Buffer *buf : fn.outputs)
        if (buf->position == p.resultIndex)
          pointers[buf] = arg;
      break;
    }
  }
  for (const SizeProduct &p : sizeProductsToCheck(irFn))
    failIf(elementCountOverflows(b, p, sizes), GRADC_ERROR_SIZE, exit);
}

/// Storage for every buffer that is not an argument: one alloca per stack
/// slot and per local, one malloc per scratch slot (its byte count checked
/// for overflow, every block checked for null once), a global per
/// constant, a GEP per view; and the accumulator rows of the kernels.
void FunctionPrinter::storage() {
  llvm::IRBuilder<> ab(entry, entry->begin());
  // A slot of buffer planning: its alloca, or its heap block's number.
  struct Slot {
    Buffer::Kind kind;
    int slot;
    llvm::Value *ptr;
    size_t heapIndex;
  };
  std::vector<Slot> slots;
  llvm::Value *overflow = b.getFalse();
  // Heap blocks: their byte counts (overflow or more than PTRDIFF_MAX is
  // an allocation failure), malloc'ed once every count is known.
  std::vector<std::pair<llvm::Value *, llvm::Value *>> heapBlocks;
  auto heapBlock = [&](llvm::Value *count, int64_t size) {
    llvm::Value *mul = b.CreateBinaryIntrinsic(
        llvm::Intrinsic::umul_with_overflow, count, i64(size));
    llvm::Value *bytes = b.CreateExtractValue(mul, 0);
    overflow = b.CreateOr(overflow, b.CreateExtractValue(mul, 1));
    overflow = b.CreateOr(overflow, b.CreateICmpSLT(bytes, i64(0)));
    heapBlocks.push_back({bytes, nullptr});
    return heapBlocks.size() - 1;
  };
  std::vector<std::pair<const Buffer *, size_t>> onHeap;
  std::vector<std::pair<const Stmt *, size_t>> rowsOnHeap;
  for (const auto &bp : fn.buffers) {
    const Buffer *buf = bp.get();
    // A transpose that a kernel reads from its source is not stored.
    if (transposed.from.contains(buf))
      continue;
    llvm::Type *type = memoryType(buf->dtype);
    switch (buf->kind) {
    case Buffer::Kind::Param:
    case Buffer::Kind::Output:
    case Buffer::Kind::Alias:
      break;
    case Buffer::Kind::Local:
      if (addressedLocals.contains(buf))
        pointers[buf] = ab.CreateAlloca(type, nullptr, valueName(buf));
      break;
    case Buffer::Kind::Constant: {
      std::vector<llvm::Constant *> items;
      for (double d : buf->data)
        items.push_back(llvm::cast<llvm::Constant>(
            toMemory(buf->dtype, constant(fromDType(buf->dtype), d))));
      auto *arrayType = llvm::ArrayType::get(type, items.size());
      auto *global = new llvm::GlobalVariable(
          ms.llvmModule, arrayType, /*isConstant=*/true,
          llvm::GlobalValue::PrivateLinkage,
          llvm::ConstantArray::get(arrayType, items), valueName(buf));
      global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
      pointers[buf] = global;
      break;
    }
    case Buffer::Kind::Stack:
    case Buffer::Kind::Scratch: {
      // Buffers of one planned slot share it; an unplanned buffer has a
      // slot of its own.
      auto it = llvm::find_if(slots, [&](const Slot &s) {
        return buf->slot >= 0 && s.kind == buf->kind && s.slot == buf->slot;
      });
      if (it != slots.end()) {
        if (buf->kind == Buffer::Kind::Stack)
          pointers[buf] = it->ptr;
        else
          onHeap.push_back({buf, it->heapIndex});
        break;
      }
      if (buf->kind == Buffer::Kind::Scratch) {
        size_t index =
            heapBlock(expr(*buf->numElements()), byteSize(buf->dtype));
        onHeap.push_back({buf, index});
        slots.push_back({buf->kind, buf->slot, nullptr, index});
        break;
      }
      int64_t n = 1;
      for (const Dim &d : buf->shape) {
        assert(d.isKnown() && "a stack buffer has a known size");
        n *= d.getSize();
      }
      llvm::AllocaInst *a =
          ab.CreateAlloca(llvm::ArrayType::get(type, std::max<int64_t>(n, 1)),
                          nullptr, valueName(buf));
      a->setAlignment(llvm::Align(16));
      pointers[buf] = a;
      slots.push_back({buf->kind, buf->slot, a, 0});
      break;
    }
    }
  }
  // Kernel rows: a matmul whose accumulator type is not its result's.
  walk(fn.body, [&](const Stmt &s) {
    if (s.kind != Stmt::Kind::KernelCall ||
        s.accType == fromDType(s.outputs[0]->dtype))
      return;
    llvm::Type *accType = valueType(s.accType);
    int64_t accBytes = dataLayout().getTypeAllocSize(accType);
    const Expr &n = *s.operands[5];
    if (n.kind == Expr::Kind::Const &&
        int64_t(n.value) * accBytes <= maxStackRowBytes) {
      llvm::AllocaInst *a = ab.CreateAlloca(
          llvm::ArrayType::get(accType, std::max<int64_t>(int64_t(n.value), 1)),
          nullptr, "acc");
      a->setAlignment(llvm::Align(16));
      rows[&s] = a;
      return;
    }
    rowsOnHeap.push_back({&s, heapBlock(expr(n), accBytes)});
  });
  if (heapBlocks.empty())
    return;
  failIf(overflow, GRADC_ERROR_ALLOC, exit);
  llvm::Value *null = b.getFalse();
  for (auto &[bytes, ptr] : heapBlocks) {
    if (ms.scratchCache) {
      llvm::AllocaInst *capacity =
          ab.CreateAlloca(b.getInt64Ty(), nullptr, "capacity");
      llvm::CallInst *take =
          b.CreateCall(ms.scratchTake(), {bytes, capacity}, "scratch");
      // Like malloc's, the block is reachable through no other pointer.
      take->addRetAttr(llvm::Attribute::NoAlias);
      capacities.push_back(capacity);
      ptr = take;
    } else {
      ptr = b.CreateCall(ms.malloc(), {bytes}, "scratch");
    }
    heap.push_back(ptr);
    // malloc(0) may return null: that is no failure.
    null = b.CreateOr(
        null, b.CreateAnd(b.CreateIsNull(ptr), b.CreateICmpNE(bytes, i64(0))));
  }
  // From here on every failure frees the blocks.
  failTarget = cleanup;
  failIf(null, GRADC_ERROR_ALLOC, cleanup);
  for (auto [buf, index] : onHeap)
    pointers[buf] = heapBlocks[index].second;
  for (auto [s, index] : rowsOnHeap)
    rows[s] = heapBlocks[index].second;
}

/// The first element of `buf`; a view is a GEP of its base (run() makes
/// them all before the first statement).
llvm::Value *FunctionPrinter::pointerOf(const Buffer *buf) {
  if (llvm::Value *p = pointers.lookup(buf))
    return p;
  if (isScalarParam(buf)) {
    // Its address: a copy in an alloca (a view of a scalar, a kernel).
    llvm::IRBuilder<> ab(entry, entry->begin());
    llvm::AllocaInst *a = ab.CreateAlloca(memoryType(buf->dtype), nullptr,
                                          valueName(buf) + ".addr");
    llvm::IRBuilder<> sb(entry->getTerminator());
    sb.CreateStore(scalarParams.lookup(buf), a);
    pointers[buf] = a;
    return a;
  }
  assert(buf->kind == Buffer::Kind::Alias && "every other buffer has storage");
  assert(!isValueLocal(buf->base) && "findAddressedLocals");
  llvm::Value *base = pointerOf(buf->base);
  llvm::Value *p = b.CreateInBoundsGEP(memoryType(buf->dtype), base,
                                       expr(*buf->offset), valueName(buf));
  pointers[buf] = p;
  return p;
}

/// The locals that need an address: an output of a call or an operand
/// of a kernel (the printer passes pointers), or the base of a view. (And
/// the order of the buffers, for forLoop.)
void FunctionPrinter::findAddressedLocals() {
  auto note = [&](const Buffer *buf) {
    if (buf && buf->kind == Buffer::Kind::Local)
      addressedLocals.insert(buf);
  };
  unsigned position = 0;
  for (const auto &buf : fn.buffers) {
    bufferOrder[buf.get()] = position++;
    if (buf->kind == Buffer::Kind::Alias)
      note(buf->base);
  }
  walk(fn.body, [&](const Stmt &s) {
    if (s.kind == Stmt::Kind::KernelCall)
      for (const Buffer *buf : s.inputs)
        note(buf);
    if (s.kind == Stmt::Kind::KernelCall || s.kind == Stmt::Kind::Call)
      for (const Buffer *buf : s.outputs)
        note(buf);
  });
}

/// A local's value here: its last store, or undef before the first.
llvm::Value *FunctionPrinter::localValue(const Buffer *buf) {
  if (llvm::Value *v = localValues.lookup(buf))
    return v;
  return llvm::UndefValue::get(memoryType(buf->dtype));
}

/// Leaves the locals' SSA form as mem2reg would have made it. The
/// placeholders of constants read from locals become the constants.
/// forLoop gives a loop a phi for each local its body writes, whether or
/// not the value is read across iterations or after the loop: the phis
/// that nothing but such phis reads are removed (mem2reg places phis only
/// where the value is live), then those that merge one value.
void FunctionPrinter::simplifyLocalPhis() {
  for (llvm::Instruction *load : constantLoads) {
    load->replaceAllUsesWith(load->getOperand(0));
    load->eraseFromParent();
  }
  llvm::DenseSet<llvm::PHINode *> ours;
  for (auto [phi, buf] : localPhis)
    ours.insert(phi);
  auto isOurs = [&](llvm::Value *v) {
    auto *phi = llvm::dyn_cast<llvm::PHINode>(v);
    return phi && ours.contains(phi) ? phi : nullptr;
  };
  llvm::DenseSet<llvm::PHINode *> live;
  std::vector<llvm::PHINode *> work;
  for (auto [phi, buf] : localPhis)
    if (llvm::any_of(phi->users(), [&](llvm::User *u) { return !isOurs(u); }))
      if (live.insert(phi).second)
        work.push_back(phi);
  while (!work.empty()) {
    llvm::PHINode *phi = work.back();
    work.pop_back();
    for (llvm::Value *v : phi->incoming_values())
      if (llvm::PHINode *in = isOurs(v))
        if (live.insert(in).second)
          work.push_back(in);
  }
  for (auto [phi, buf] : localPhis)
    if (!live.contains(phi))
      phi->dropAllReferences();
  for (auto [phi, buf] : localPhis)
    if (!live.contains(phi)) {
      ours.erase(phi);
      phi->eraseFromParent();
    }
  // Then, as mem2reg does, each phi that merges one value (and itself,
  // or undef where the value dominates it), until none is left: a local
  // that only a nested parallel loop's body writes, or a loop that writes
  // a local the value it had. Dominance is per function (the parallel
  // loops' bodies are functions of their own).
  llvm::DenseMap<llvm::Function *, std::unique_ptr<llvm::DominatorTree>> trees;
  for (bool changed = true; changed;) {
    changed = false;
    for (auto [phi, buf] : localPhis) {
      if (!ours.contains(phi))
        continue;
      std::unique_ptr<llvm::DominatorTree> &dt = trees[phi->getFunction()];
      if (!dt)
        dt = std::make_unique<llvm::DominatorTree>(*phi->getFunction());
      llvm::Value *v = llvm::simplifyInstruction(
          phi, llvm::SimplifyQuery(dataLayout(), dt.get()));
      if (!v)
        continue;
      phi->replaceAllUsesWith(v);
      ours.erase(phi);
      phi->eraseFromParent();
      changed = true;
    }
  }
  for (auto [phi, buf] : localPhis)
    if (ours.contains(phi))
      phi->setName(valueName(buf));
}

llvm::Value *FunctionPrinter::toMemory(DType t, llvm::Value *v) {
  return t == DType::Bool ? b.CreateZExt(v, b.getInt8Ty()) : v;
}

llvm::Value *FunctionPrinter::fromMemory(DType t, llvm::Value *v) {
  return t == DType::Bool ? b.CreateICmpNE(v, b.getInt8(0)) : v;
}

llvm::Value *FunctionPrinter::loadElement(const Buffer *buf, llvm::Value *idx) {
  if (isScalarParam(buf))
    return fromMemory(buf->dtype, scalarParams.lookup(buf));
  if (isValueLocal(buf)) {
    llvm::Value *v = localValue(buf);
    if (auto *c = llvm::dyn_cast<llvm::Constant>(v)) {
      // The load of an alloca that holds a constant is no constant, so
      // IRBuilder folded nothing that used it: a placeholder keeps it so
      // (simplifyLocalPhis puts the constant in its place), so that the
      // code is what mem2reg made of the alloca, and so is the optimised
      // code.
      auto *load =
          llvm::CastInst::Create(llvm::Instruction::BitCast, c, c->getType());
      b.Insert(load);
      constantLoads.push_back(load);
      v = load;
    }
    return fromMemory(buf->dtype, v);
  }
  llvm::Type *type = memoryType(buf->dtype);
  llvm::Value *p = pointerOf(buf);
  if (buf->kind != Buffer::Kind::Local)
    p = b.CreateInBoundsGEP(type, p, idx);
  return fromMemory(buf->dtype, b.CreateLoad(type, p));
}

/// Before dot loop `s`: the factor its rows share, `f64(%x[E + %p])` for
/// p < K (loops::sharedWidenedFactor), loaded as one <K x float> and
/// widened once, which the loop's steps take their element of. Vectorised
/// across rows, the loop widened each step's factor alone and broadcast
/// it (K4's gradient `d_x = wᵀ g`: four vcvtss2sd and vbroadcastsd, where
/// now one vcvtps2pd and three vpermpd: 24.1 to 20.6 ns). The same
/// values: widening is exact. Returns the factor, or null.
const Expr *FunctionPrinter::widenSharedFactor(const Stmt &s) {
  const Expr *factor = loops::sharedWidenedFactor(s);
  if (!factor)
    return nullptr;
  const Expr &load = *factor->args[0];
  const Expr &index = *load.args[0];
  llvm::Value *p = pointerOf(load.buffer);
  if (index.kind != Expr::Kind::LoopVar)
    p = b.CreateInBoundsGEP(memoryType(load.buffer->dtype), p,
                            expr(*index.args[0]));
  const Stmt &steps = *s.body[1];
  auto *type =
      llvm::FixedVectorType::get(b.getFloatTy(), unsigned(steps.extent->value));
  llvm::Value *v = b.CreateAlignedLoad(type, p, llvm::Align(4));
  llvm::Value *wide = convertVector(v, b.getDoubleTy());
  widenedFactors[factor] = {b.CreateArithmeticFence(wide, wide->getType()),
                            steps.var};
  return factor;
}

void FunctionPrinter::storeElement(const Buffer *buf, llvm::Value *idx,
                                   llvm::Value *v) {
  if (isValueLocal(buf)) {
    localValues[buf] = toMemory(buf->dtype, v);
    return;
  }
  llvm::Value *p = pointerOf(buf);
  if (buf->kind != Buffer::Kind::Local)
    p = b.CreateInBoundsGEP(memoryType(buf->dtype), p, idx);
  b.CreateStore(toMemory(buf->dtype, v), p);
}

//===--- Expressions ------------------------------------------------------===//

llvm::Value *FunctionPrinter::constant(ScalarType t, double v) {
  switch (t) {
  case ScalarType::F32:
  case ScalarType::F64:
    return llvm::ConstantFP::get(valueType(t), v);
  case ScalarType::Bool:
    return b.getInt1(v != 0);
  case ScalarType::I32:
  case ScalarType::Index:
    return llvm::ConstantInt::get(valueType(t), int64_t(v), /*signed=*/true);
  }
  llvm_unreachable("unknown scalar type");
}

/// gradc/Math.h's maximum: `b` if it is NaN, else `a < b ? b : a` (so NaN
/// in `a` stays too); two compares, an `or` and one blend, which
/// vectorise. Not Math.h's two nested selects: LLVM 19's InstCombine
/// miscompiles `select(uno b, b, select(a < b, b, a))` when b is a fabs
/// (maximum(0, abs(-0.5)) became 0; test/Backends/llvm-instcombine-fabs.grad).
llvm::Value *FunctionPrinter::maximum(llvm::Value *a, llvm::Value *c) {
  llvm::Value *takeC = b.CreateOr(b.CreateFCmpOLT(a, c), b.CreateFCmpUNO(c, c));
  return b.CreateSelect(takeC, c, a);
}

/// gradc/Math.h's minimum: `b` if it is NaN, else `b < a ? b : a`.
llvm::Value *FunctionPrinter::minimum(llvm::Value *a, llvm::Value *c) {
  llvm::Value *takeC = b.CreateOr(b.CreateFCmpOLT(c, a), b.CreateFCmpUNO(c, c));
  return b.CreateSelect(takeC, c, a);
}

/// A `max=` (`min=`) into the lanes of a maximum redone in order for 0
/// and NaN (Buffer::zeroSignFree): `v` if it is NaN, else `v > old ? v :
/// old`, so NaN in either stays NaN and of two equal zeros `old` stays
/// (either may). The outer select keeps `v` where `v` is NaN: x86 makes
/// it a vmaxps (maxps is exactly the inner select) merge-masked by
/// `ord v` into `v`, so the chain through `old` is that vmaxps alone.
/// llvm.maximum nsz, lowered as vmaxps and then a blend of `v` where it
/// is NaN, puts the blend on the chain too: 5 cycles a step, not 4 (K3's
/// row maximum 1.3x the C++ backend's, docs/Performance.md, session 18).
llvm::Value *FunctionPrinter::laneExtremum(Combiner c, llvm::Value *old,
                                           llvm::Value *v) {
  llvm::Value *better =
      c == Combiner::Max ? b.CreateFCmpOGT(v, old) : b.CreateFCmpOLT(v, old);
  llvm::Value *m = b.CreateSelect(better, v, old);
  return b.CreateSelect(b.CreateFCmpORD(v, v), m, v);
}

llvm::Value *FunctionPrinter::combine(Combiner c, ScalarType t,
                                      llvm::Value *old, llvm::Value *v) {
  bool isFloat = isFloatType(t);
  switch (c) {
  case Combiner::Add:
    return isFloat ? b.CreateFAdd(old, v) : b.CreateAdd(old, v);
  case Combiner::Max:
    return isFloat ? maximum(old, v)
                   : b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, old, v);
  case Combiner::Min:
    return isFloat ? minimum(old, v)
                   : b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, old, v);
  }
  llvm_unreachable("unknown combiner");
}

/// Conversions with the evaluator's rounding (ir::roundToDType): float to
/// float rounds to nearest; float to i32 truncates and wraps modulo 2^32,
/// to index truncates, NaN and infinities giving 0; to bool is `!= 0` (so
/// NaN is true); bool to a number is 0 or 1.
llvm::Value *FunctionPrinter::castTo(ScalarType to, ScalarType from,
                                     llvm::Value *v) {
  if (to == from)
    return v;
  llvm::Type *type = valueType(to);
  if (to == ScalarType::Bool)
    return isFloatType(from)
               ? b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
               : b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  if (from == ScalarType::Bool)
    return isFloatType(to) ? b.CreateUIToFP(v, type) : b.CreateZExt(v, type);
  if (isFloatType(from) && isFloatType(to))
    return b.CreateFPCast(v, type);
  if (isFloatType(to))
    return b.CreateSIToFP(v, type);
  if (!isFloatType(from))
    return b.CreateSExtOrTrunc(v, type);
  // Float to integer: saturating conversion to i64 (NaN gives 0), then
  // the low bits; an infinity gives 0.
  llvm::Value *wide = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat,
                                        {b.getInt64Ty(), v->getType()}, {v});
  llvm::Value *finite =
      b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v),
                      llvm::ConstantFP::getInfinity(v->getType()));
  return b.CreateTrunc(b.CreateSelect(finite, wide, i64(0)), type);
}

llvm::Value *FunctionPrinter::expr(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Const:
    return constant(e.type, e.value);
  case Expr::Kind::Size: {
    llvm::Value *size = sizes.lookup(e.name);
    assert(size && "the verifier checks size names");
    return size;
  }
  case Expr::Kind::LoopVar:
    return loopVars.lookup(e.var);
  case Expr::Kind::Load:
    return loadElement(e.buffer, expr(*e.args[0]));
  case Expr::Kind::Prim:
    return prim(e);
  case Expr::Kind::Intrinsic:
    return intrinsic(e);
  case Expr::Kind::Select: {
    llvm::Value *c = expr(*e.args[0]);
    llvm::Value *x = expr(*e.args[1]);
    return b.CreateSelect(c, x, expr(*e.args[2]));
  }
  case Expr::Kind::Cast:
    if (auto it = widenedFactors.find(&e); it != widenedFactors.end())
      return b.CreateExtractElement(it->second.first,
                                    loopVars.lookup(it->second.second));
    return castTo(e.type, e.args[0]->type, expr(*e.args[0]));
  }
  llvm_unreachable("unknown expression kind");
}

llvm::Value *FunctionPrinter::prim(const Expr &e) {
  ScalarType t = e.args[0]->type;
  bool isFloat = isFloatType(t), isIndex = t == ScalarType::Index;
  llvm::Value *x = expr(*e.args[0]);
  llvm::Value *y = e.args.size() > 1 ? expr(*e.args[1]) : nullptr;
  // Index arithmetic never overflows (the element counts are checked).
  auto noWrap = [&](llvm::Value *v) {
    if (auto *inst = llvm::dyn_cast<llvm::BinaryOperator>(v))
      if (isIndex)
        inst->setHasNoSignedWrap();
    return v;
  };
  static const llvm::CmpInst::Predicate floatCmp[] = {
      llvm::CmpInst::FCMP_OLT, llvm::CmpInst::FCMP_OLE,
      llvm::CmpInst::FCMP_OGT, llvm::CmpInst::FCMP_OGE,
      llvm::CmpInst::FCMP_OEQ, llvm::CmpInst::FCMP_UNE};
  static const llvm::CmpInst::Predicate intCmp[] = {
      llvm::CmpInst::ICMP_SLT, llvm::CmpInst::ICMP_SLE, llvm::CmpInst::ICMP_SGT,
      llvm::CmpInst::ICMP_SGE, llvm::CmpInst::ICMP_EQ,  llvm::CmpInst::ICMP_NE};
  static const llvm::CmpInst::Predicate boolCmp[] = {
      llvm::CmpInst::ICMP_ULT, llvm::CmpInst::ICMP_ULE, llvm::CmpInst::ICMP_UGT,
      llvm::CmpInst::ICMP_UGE, llvm::CmpInst::ICMP_EQ,  llvm::CmpInst::ICMP_NE};
  switch (e.op) {
  case PrimOp::Neg:
    return isFloat ? b.CreateFNeg(x) : b.CreateNeg(x);
  case PrimOp::Abs:
    if (isFloat)
      return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    // abs(INT32_MIN) wraps to INT32_MIN.
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b.getFalse());
  case PrimOp::Not:
    return b.CreateNot(x);
  case PrimOp::IsNaN:
    return b.CreateFCmpUNO(x, x);
  case PrimOp::IsFinite:
    return b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                           llvm::ConstantFP::getInfinity(x->getType()));
  case PrimOp::Add:
    return isFloat ? b.CreateFAdd(x, y) : noWrap(b.CreateAdd(x, y));
  case PrimOp::Sub:
    return isFloat ? b.CreateFSub(x, y) : noWrap(b.CreateSub(x, y));
  case PrimOp::Mul:
    return isFloat ? b.CreateFMul(x, y) : noWrap(b.CreateMul(x, y));
  case PrimOp::Div: {
    if (isFloat)
      return b.CreateFDiv(x, y);
    if (isIndex)
      return b.CreateSDiv(x, y);
    // i32: a check before rules out a zero divisor; INT32_MIN / -1 wraps
    // to INT32_MIN. The divisor is made safe so that the division is
    // defined whatever LLVM speculates.
    llvm::Value *zero = llvm::ConstantInt::get(y->getType(), 0);
    llvm::Value *minusOne = llvm::ConstantInt::get(y->getType(), -1, true);
    llvm::Value *isMinusOne = b.CreateICmpEQ(y, minusOne);
    llvm::Value *safe =
        b.CreateSelect(b.CreateOr(isMinusOne, b.CreateICmpEQ(y, zero)),
                       llvm::ConstantInt::get(y->getType(), 1), y);
    return b.CreateSelect(isMinusOne, b.CreateSub(zero, x),
                          b.CreateSDiv(x, safe));
  }
  case PrimOp::Rem:
    return b.CreateSRem(x, y);
  case PrimOp::Max:
    return combine(Combiner::Max, t, x, y);
  case PrimOp::Min:
    return combine(Combiner::Min, t, x, y);
  case PrimOp::Lt:
  case PrimOp::Le:
  case PrimOp::Gt:
  case PrimOp::Ge:
  case PrimOp::Eq:
  case PrimOp::Ne: {
    unsigned k = unsigned(e.op) - unsigned(PrimOp::Lt);
    if (isFloat)
      return b.CreateFCmp(floatCmp[k], x, y);
    return b.CreateICmp(t == ScalarType::Bool ? boolCmp[k] : intCmp[k], x, y);
  }
  case PrimOp::And:
    return b.CreateAnd(x, y);
  case PrimOp::Or:
    return b.CreateOr(x, y);
  }
  llvm_unreachable("unknown primitive");
}

/// A range version's sin or cos of an f32 (docs/Loops.md): the small
/// path alone, gradc_math_sinSmall_f32, and the range flag or-ed with
/// whether `x` is outside it, as gradc::sinSmall sets it (|x| < 2^20
/// false, NaN included). The call is pure, so that a loop around it may
/// vectorise it also where it stays out of line (EmitLLVM.cpp,
/// addVectorVariants); the flag is a reduction in a register once SROA has
/// promoted it.
llvm::Value *FunctionPrinter::smallTrigCall(Intrinsic fn, llvm::Value *x) {
  llvm::Value *magnitude = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value *outside = b.CreateFCmpUGE(
      magnitude,
      llvm::ConstantFP::get(b.getFloatTy(), gradc::detail::smallTrigBound));
  llvm::Value *flag = b.CreateLoad(b.getInt32Ty(), rangeFlag);
  b.CreateStore(b.CreateOr(flag, b.CreateZExt(outside, b.getInt32Ty())),
                rangeFlag);
  return b.CreateCall(ms.smallTrigFunction(intrinsicName(fn)), {x});
}

/// f32: gradc/Math.h's function (gradc_math_NAME_f32 of the linked
/// bitcode); sqrt is exact (llvm.sqrt); log1p is f64's, rounded. f64:
/// libm's, as the evaluator calls them; pow is marked nobuiltin, since
/// LLVM would rewrite pow(x, 0.5) as sqrt, whose last bit may differ.
llvm::Value *FunctionPrinter::intrinsic(const Expr &e) {
  llvm::SmallVector<llvm::Value *, 2> args;
  for (const ExprPtr &a : e.args)
    args.push_back(expr(*a));
  if (e.fn == Intrinsic::Sqrt)
    return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, args[0]);
  if (smallTrig && loops::hasSmallArgumentVersion(e))
    return smallTrigCall(e.fn, args[0]);
  if (e.type == ScalarType::F32 && e.fn != Intrinsic::Log1p)
    return b.CreateCall(ms.mathFunction(intrinsicName(e.fn), args.size()),
                        args);
  for (llvm::Value *&a : args)
    a = b.CreateFPExt(a, b.getDoubleTy());
  llvm::Value *r = nullptr;
  switch (e.fn) {
  case Intrinsic::Exp:
    r = b.CreateUnaryIntrinsic(llvm::Intrinsic::exp, args[0]);
    break;
  case Intrinsic::Log:
    r = b.CreateUnaryIntrinsic(llvm::Intrinsic::log, args[0]);
    break;
  case Intrinsic::Sin:
    r = b.CreateUnaryIntrinsic(llvm::Intrinsic::sin, args[0]);
    break;
  case Intrinsic::Cos:
    r = b.CreateUnaryIntrinsic(llvm::Intrinsic::cos, args[0]);
    break;
  case Intrinsic::Log1p:
  case Intrinsic::Tanh:
  case Intrinsic::Atan:
    r = b.CreateCall(ms.libm(intrinsicName(e.fn), 1), args);
    break;
  case Intrinsic::Pow: {
    llvm::CallInst *c = b.CreateCall(ms.libm("pow", 2), args);
    c->addFnAttr(llvm::Attribute::NoBuiltin);
    r = c;
    break;
  }
  case Intrinsic::Sqrt:
  case Intrinsic::Sigmoid:
  case Intrinsic::Softplus:
    llvm_unreachable("f32 only, or handled above");
  }
  return b.CreateFPCast(r, valueType(e.type));
}

//===--- Statements -------------------------------------------------------===//

void FunctionPrinter::block(const Block &blk) {
  for (const StmtPtr &s : blk)
    stmt(*s);
}

void FunctionPrinter::stmt(const Stmt &s) {
  if (transposed.elided.contains(&s) || blasTransposed.elided.contains(&s))
    return;
  nestedStmt(s);
}

/// `s`, even a nest that `stmt` leaves out.
void FunctionPrinter::nestedStmt(const Stmt &s) {
  switch (s.kind) {
  case Stmt::Kind::For:
    if (s.parallel) {
      parallelLoop(s);
      return;
    }
    if (hasMaskedTail(s)) {
      innermostLoop(s, i64(0), expr(*s.extent));
      return;
    }
    {
      const Expr *widened = widenSharedFactor(s);
      llvm::BranchInst *latch = forLoop(
          expr(*s.extent), "i" + llvm::Twine(s.var),
          [&](llvm::Value *i) {
            loopVars[s.var] = i;
            block(s.body);
            loopVars.erase(s.var);
          },
          nullptr, &s.body);
      widenedFactors.erase(widened);
      if (loops::isLaneLoop(s) || loops::isDotLoop(s) ||
          loops::isRowStoreLoop(s))
        markLaneLoop(latch, int64_t(s.extent->value));
      else if (isLaneRestLoop(s))
        keepScalar(latch);
    }
    return;
  case Stmt::Kind::Store: {
    llvm::Value *v = expr(*s.value);
    storeElement(s.buffer, expr(*s.index), v);
    return;
  }
  case Stmt::Kind::Accumulate: {
    llvm::Value *v = expr(*s.value);
    llvm::Value *idx = expr(*s.index);
    llvm::Value *old = loadElement(s.buffer, idx);
    if (s.buffer->zeroSignFree && s.combiner != Combiner::Add) {
      // The lanes of a maximum redone for 0 and NaN (LoopIR.h).
      storeElement(s.buffer, idx, laneExtremum(s.combiner, old, v));
      return;
    }
    storeElement(s.buffer, idx,
                 combine(s.combiner, fromDType(s.buffer->dtype), old, v));
    return;
  }
  case Stmt::Kind::Check:
    failIf(b.CreateNot(expr(*s.cond)), statusOfCheck(s.status), failTarget);
    return;
  case Stmt::Kind::KernelCall:
    kernel(s);
    return;
  case Stmt::Kind::Call:
    call(s);
    return;
  }
}

/// Operand `i` (0: a, 1: b) of kernel `s`, read in place when a transpose
/// of it was left out.
FunctionPrinter::Operand FunctionPrinter::kernelOperand(const Stmt &s,
                                                        unsigned i) {
  if (const Buffer *from = transposed.from.lookup(s.inputs[i]))
    return {from, i64(0), true};
  return {s.inputs[i], expr(*s.operands[i + 1]), false};
}

/// Operand `i` of kernel `s` for CBLAS: its source, transposed, when the
/// transpose is one of blasTransposed's, else the loops' operand.
FunctionPrinter::Operand FunctionPrinter::blasOperand(const Stmt &s, unsigned i,
                                                      Operand loopsOperand) {
  if (const Buffer *from = blasTransposed.from.lookup(s.inputs[i]))
    return {from, i64(0), true};
  return loopsOperand;
}

/// Whether branchToBlas will likely call CBLAS for kernel `s`: BLAS on,
/// f32/f64 data and result, and the known sizes' product at least
/// blasMinWork / 64, so that the unknown ones reach blasMinWork from 64
/// (K1's `transpose(x) @ d_z`, 784 x 256 x B, and `d_logits @
/// transpose(w2)`, B x 10 x 256). Not the spiral's products of two rows or
/// columns (B x 2 x H, 2 x B x H, under blasMinWork at B = 200, H = 64):
/// their transposes stored in the branch of the loops made its gradient
/// 7% slower in the f32 order (A/B, session 18).
bool FunctionPrinter::blasMayTake(const Stmt &s) const {
  DType t = s.outputs[0]->dtype;
  if (!ms.options.blas || (t != DType::F32 && t != DType::F64) ||
      s.inputs[0]->dtype != t || s.inputs[1]->dtype != t)
    return false;
  int64_t knownWork = 1;
  for (unsigned i = 3; i < 6; ++i)
    if (const Expr &size = *s.operands[i]; size.kind == Expr::Kind::Const)
      knownWork *= int64_t(size.value);
  return knownWork >= blasMinWork / 64;
}

/// z[zOff + i*N + j] = sum_p a[aOff + i*K + p] * b[bOff + p*N + j], summed
/// in increasing p in the accumulator type, as EmitLLVM's matmul: for each
/// row i, a row of accumulators (the result row itself when the types
/// agree) is zeroed, then for each p the j loop adds a[i, p] * b[p, j];
/// the j loop reads contiguous rows and vectorises. An f32 product widened
/// to f64 is exact, so the sums are the evaluator's. A narrow product
/// (fewer than 16 known columns) runs narrowKernel where it can.
void FunctionPrinter::kernel(const Stmt &s) {
  const Buffer *z = s.outputs[0];
  llvm::Value *zOff = expr(*s.operands[0]);
  Operand a = kernelOperand(s, 0), bm = kernelOperand(s, 1);
  llvm::Value *m = expr(*s.operands[3]), *k = expr(*s.operands[4]);
  llvm::Value *n = expr(*s.operands[5]);
  ScalarType zType = fromDType(z->dtype), accType = s.accType;
  llvm::Type *acc = valueType(accType);
  llvm::Value *row = rows.lookup(&s);
  bool isFloat = isFloatType(accType);
  auto nsw = [&](llvm::Value *x, llvm::Value *y, bool add) {
    return add ? b.CreateNSWAdd(x, y) : b.CreateNSWMul(x, y);
  };
  llvm::BasicBlock *blasDone = branchToBlas(
      s, blasOperand(s, 0, a), blasOperand(s, 1, bm),
      b.CreateInBoundsGEP(memoryType(z->dtype), pointerOf(z), zOff), m, k, n);
  // The loops read the transposes that CBLAS reads in place.
  for (const Buffer *t : s.inputs)
    if (const Stmt *nest = blasTransposed.nestOf.lookup(t))
      nestedStmt(*nest);
  llvm::BasicBlock *narrowDone = nullptr;
  if (int64_t columns = narrowColumns(s))
    narrowDone = narrowKernel(s, columns, a, bm, zOff, m, k);
  forLoop(m, "mm.i", [&](llvm::Value *i) {
    llvm::Value *zRow = nsw(zOff, nsw(i, n, false), true);
    llvm::Value *accRow =
        row ? row
            : b.CreateInBoundsGEP(memoryType(z->dtype), pointerOf(z), zRow);
    forLoop(n, "mm.j", [&](llvm::Value *j) {
      b.CreateStore(constant(accType, 0), b.CreateInBoundsGEP(acc, accRow, j));
    });
    forLoop(k, "mm.p", [&](llvm::Value *p) {
      llvm::Value *aip = castTo(
          accType, fromDType(a.buf->dtype),
          loadElement(a.buf,
                      a.transposed
                          ? nsw(nsw(p, m, false), i, true)
                          : nsw(a.off, nsw(nsw(i, k, false), p, true), true)));
      llvm::Value *bRow = nsw(bm.off, nsw(p, n, false), true);
      forLoop(n, "mm.j", [&](llvm::Value *j) {
        llvm::Value *bpj = castTo(
            accType, fromDType(bm.buf->dtype),
            loadElement(bm.buf, bm.transposed ? nsw(nsw(j, k, false), p, true)
                                              : nsw(bRow, j, true)));
        llvm::Value *c = b.CreateInBoundsGEP(acc, accRow, j);
        llvm::Value *old = b.CreateLoad(acc, c);
        llvm::Value *sum = isFloat ? b.CreateFAdd(old, b.CreateFMul(aip, bpj))
                                   : b.CreateAdd(old, b.CreateMul(aip, bpj));
        b.CreateStore(sum, c);
      });
    });
    if (row)
      forLoop(n, "mm.j", [&](llvm::Value *j) {
        llvm::Value *v = b.CreateLoad(acc, b.CreateInBoundsGEP(acc, row, j));
        storeElement(z, nsw(zRow, j, true), castTo(zType, accType, v));
      });
  });
  for (llvm::BasicBlock *done : {narrowDone, blasDone}) {
    if (!done)
      continue;
    b.CreateBr(done);
    done->insertInto(llfn);
    b.SetInsertPoint(done);
  }
}

/// `v` (a vector of f32 or f64) converted to vectors of `to`.
llvm::Value *FunctionPrinter::convertVector(llvm::Value *v, llvm::Type *to) {
  auto *type = llvm::cast<llvm::FixedVectorType>(v->getType());
  if (type->getElementType() == to)
    return v;
  return b.CreateFPCast(v,
                        llvm::FixedVectorType::get(to, type->getNumElements()));
}

/// A product of n < 16 columns (the logits of a classifier, a weight's
/// gradient of a layer with two outputs), whose column loop is too short
/// to vectorise: the rows are the vector lanes instead, as in the C++
/// runtime's matmulNarrow. Blocks of narrowBlockRows(n) rows (or of
/// narrowLanes where M is less) keep n vectors of accumulators per
/// narrowLanes rows in registers; each p adds a column of a (narrowLanes
/// rows) times the splat b[p, q] to the accumulators of column q. A
/// transposed source of a is read in place, a vector of contiguous
/// elements per p; an untransposed a is loaded a narrowLanes x
/// narrowLanes block at a time and transposed in registers (then one p
/// at a time for the last K % narrowLanes). The last block starts at M -
/// rows, overlapping the one before it, whose elements it computes again
/// with the same bits. Every element starts at +0 and adds its products
/// in increasing p in the accumulator type: the evaluator's sums. Leaves
/// the builder where products too short for a block (M < narrowLanes, or
/// K < narrowLanes for an untransposed a) take the loops of `kernel`;
/// returns the block where both meet.
llvm::BasicBlock *FunctionPrinter::narrowKernel(const Stmt &s, int64_t n,
                                                Operand a, Operand bm,
                                                llvm::Value *zOff,
                                                llvm::Value *m,
                                                llvm::Value *k) {
  auto *done = llvm::BasicBlock::Create(ctx, "narrow.done");
  llvm::Value *kFits =
      a.transposed ? b.getTrue() : b.CreateICmpSGE(k, i64(narrowLanes));
  // Blocks of `rows` when M has as many.
  auto tryRows = [&](int64_t rows) {
    auto *blocks = llvm::BasicBlock::Create(ctx, "narrow.rows", llfn);
    auto *other = llvm::BasicBlock::Create(ctx, "narrow.other", llfn);
    b.CreateCondBr(b.CreateAnd(b.CreateICmpSGE(m, i64(rows)), kFits), blocks,
                   other);
    b.SetInsertPoint(blocks);
    llvm::Value *count =
        b.CreateSDiv(b.CreateNSWAdd(m, i64(rows - 1)), i64(rows));
    forLoop(count, "narrow.i", [&](llvm::Value *block) {
      llvm::Value *start = b.CreateNSWMul(block, i64(rows));
      llvm::Value *last = b.CreateNSWSub(m, i64(rows));
      llvm::Value *i0 =
          b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, start, last);
      narrowRows(s, n, rows, a, bm, zOff, m, k, i0);
    });
    b.CreateBr(done);
    b.SetInsertPoint(other);
  };
  int64_t rows = narrowBlockRows(n);
  tryRows(rows);
  if (rows > narrowLanes)
    tryRows(narrowLanes);
  return done;
}

/// Rows [i0, i0 + rows) of narrowKernel's product.
void FunctionPrinter::narrowRows(const Stmt &s, int64_t n, int64_t rows,
                                 Operand a, Operand bm, llvm::Value *zOff,
                                 llvm::Value *m, llvm::Value *k,
                                 llvm::Value *i0) {
  const Buffer *z = s.outputs[0];
  const int64_t lanes = narrowLanes, vectors = rows / lanes;
  llvm::Type *accType = valueType(s.accType);
  llvm::Type *aType = memoryType(a.buf->dtype);
  llvm::Type *zType = memoryType(z->dtype);
  auto *accVector = llvm::FixedVectorType::get(accType, lanes);
  auto *aVector = llvm::FixedVectorType::get(aType, lanes);
  auto nswAdd = [&](llvm::Value *x, llvm::Value *y) {
    return b.CreateNSWAdd(x, y);
  };
  auto nswMul = [&](llvm::Value *x, llvm::Value *y) {
    return b.CreateNSWMul(x, y);
  };
  auto elementPtr = [&](const Buffer *buf, llvm::Value *idx) {
    return b.CreateInBoundsGEP(memoryType(buf->dtype), pointerOf(buf), idx);
  };
  auto loadVector = [&](const Buffer *buf, llvm::Value *idx) {
    return b.CreateAlignedLoad(aVector, elementPtr(buf, idx),
                               llvm::Align(byteSize(buf->dtype)));
  };
  // acc[q][v]: column q of rows i0 + v * lanes + [0, lanes), in allocas
  // that SROA makes registers.
  std::vector<llvm::AllocaInst *> &pool = narrowAccumulators[{llfn, accVector}];
  std::vector<std::vector<llvm::AllocaInst *>> acc(n);
  llvm::IRBuilder<> ab(entry, entry->begin());
  for (auto &column : acc)
    for (int64_t v = 0; v < vectors; ++v) {
      size_t index = &column - acc.data() + v * n;
      while (pool.size() <= index)
        pool.push_back(ab.CreateAlloca(accVector, nullptr, "narrow.acc"));
      column.push_back(pool[index]);
      b.CreateStore(llvm::Constant::getNullValue(accVector), column.back());
    }
  // Adds column p of a (one vector per `lanes` rows) times b[p, q].
  auto multiplyAdd = [&](llvm::Value *p, llvm::ArrayRef<llvm::Value *> cols) {
    llvm::SmallVector<llvm::Value *, 8> x;
    for (llvm::Value *col : cols)
      x.push_back(convertVector(col, accType));
    for (int64_t q = 0; q < n; ++q) {
      llvm::Value *idx =
          bm.transposed ? nswAdd(nswMul(i64(q), k), p)
                        : nswAdd(bm.off, nswAdd(nswMul(p, i64(n)), i64(q)));
      llvm::Value *bpq =
          castTo(s.accType, fromDType(bm.buf->dtype), loadElement(bm.buf, idx));
      llvm::Value *splat = b.CreateVectorSplat(lanes, bpq);
      for (int64_t v = 0; v < vectors; ++v) {
        llvm::Value *old = b.CreateLoad(accVector, acc[q][v]);
        b.CreateStore(b.CreateFAdd(old, b.CreateFMul(x[v], splat)), acc[q][v]);
      }
    }
  };
  // Row r of the block.
  auto row = [&](int64_t r) { return r ? nswAdd(i0, i64(r)) : i0; };
  if (a.transposed) {
    forLoop(k, "narrow.p", [&](llvm::Value *p) {
      llvm::SmallVector<llvm::Value *, 8> cols;
      llvm::Value *column = nswMul(p, m);
      for (int64_t v = 0; v < vectors; ++v)
        cols.push_back(loadVector(a.buf, nswAdd(column, row(v * lanes))));
      multiplyAdd(p, cols);
    });
  } else {
    // a[i, p0 .. p0 + lanes) for `lanes` rows, transposed: swapping bit
    // `bit` of the row with bit `bit` of the column, for each bit, takes
    // element [r][c] to [c][r].
    auto transpose = [&](llvm::SmallVectorImpl<llvm::Value *> &t) {
      for (int64_t bit = 1; bit < lanes; bit <<= 1)
        for (int64_t j = 0; j < lanes; ++j) {
          if (j & bit)
            continue;
          llvm::SmallVector<int, 16> low, high;
          for (int64_t e = 0; e < lanes; ++e) {
            low.push_back(e & bit ? lanes + (e ^ bit) : e);
            high.push_back(e & bit ? lanes + e : e ^ bit);
          }
          llvm::Value *x = t[j], *y = t[j | bit];
          t[j] = b.CreateShuffleVector(x, y, low);
          t[j | bit] = b.CreateShuffleVector(x, y, high);
        }
    };
    llvm::Value *chunks = b.CreateUDiv(k, i64(lanes));
    forLoop(chunks, "narrow.p", [&](llvm::Value *chunk) {
      llvm::Value *p0 = nswMul(chunk, i64(lanes));
      // cols[c][v]: column p0 + c of the rows of vector v.
      std::vector<llvm::SmallVector<llvm::Value *, 8>> cols(lanes);
      for (int64_t v = 0; v < vectors; ++v) {
        llvm::SmallVector<llvm::Value *, 8> t;
        for (int64_t r = 0; r < lanes; ++r)
          t.push_back(loadVector(
              a.buf, nswAdd(a.off, nswAdd(nswMul(row(v * lanes + r), k), p0))));
        transpose(t);
        for (int64_t c = 0; c < lanes; ++c)
          cols[c].push_back(t[c]);
      }
      for (int64_t c = 0; c < lanes; ++c)
        multiplyAdd(nswAdd(p0, i64(c)), cols[c]);
    });
    forLoop(
        k, "narrow.p",
        [&](llvm::Value *p) {
          llvm::SmallVector<llvm::Value *, 8> cols;
          for (int64_t v = 0; v < vectors; ++v) {
            llvm::Value *col = llvm::PoisonValue::get(aVector);
            for (int64_t r = 0; r < lanes; ++r)
              col = b.CreateInsertElement(
                  col,
                  loadElement(
                      a.buf,
                      nswAdd(a.off, nswAdd(nswMul(row(v * lanes + r), k), p))),
                  r);
            cols.push_back(col);
          }
          multiplyAdd(p, cols);
        },
        nswMul(chunks, i64(lanes)));
  }
  // Row i of z is z[zOff + i * n, + n): the n columns of `lanes` rows,
  // interleaved, are one vector.
  for (int64_t v = 0; v < vectors; ++v) {
    llvm::SmallVector<llvm::Value *, 16> parts;
    for (int64_t q = 0; q < n; ++q)
      parts.push_back(convertVector(b.CreateLoad(accVector, acc[q][v]), zType));
    auto *partType = llvm::cast<llvm::FixedVectorType>(parts[0]->getType());
    while (!llvm::isPowerOf2_64(parts.size()))
      parts.push_back(llvm::PoisonValue::get(partType));
    while (parts.size() > 1) {
      llvm::SmallVector<llvm::Value *, 16> joined;
      for (size_t j = 0; j < parts.size(); j += 2) {
        unsigned width = llvm::cast<llvm::FixedVectorType>(parts[j]->getType())
                             ->getNumElements();
        llvm::SmallVector<int, 64> both;
        for (unsigned e = 0; e < 2 * width; ++e)
          both.push_back(e);
        joined.push_back(b.CreateShuffleVector(parts[j], parts[j + 1], both));
      }
      parts = joined;
    }
    llvm::SmallVector<int, 128> interleave;
    for (int64_t r = 0; r < lanes; ++r)
      for (int64_t q = 0; q < n; ++q)
        interleave.push_back(q * lanes + r);
    llvm::Value *out = b.CreateShuffleVector(parts[0], interleave);
    b.CreateAlignedStore(
        out, elementPtr(z, nswAdd(zOff, nswMul(row(v * lanes), i64(n)))),
        llvm::Align(byteSize(z->dtype)));
  }
}

/// With LLVMOptions::blas, for an f32/f64 kernel: `if (m n k >=
/// blasMinWork && m, n, k fit in int) cblas_?gemm(...)`, leaving the
/// builder in the else branch for the loops; returns the block where both
/// meet, or null (emitting nothing) when BLAS is off, the type is not
/// f32/f64, or the sizes are known and the product small. As in EmitLLVM,
/// CBLAS accumulates in the element type, so its f32 results may differ
/// from the loops' in the last bits. An operand read in place is passed
/// transposed.
llvm::BasicBlock *FunctionPrinter::branchToBlas(const Stmt &s, Operand a,
                                                Operand bm, llvm::Value *z,
                                                llvm::Value *m, llvm::Value *k,
                                                llvm::Value *n) {
  DType t = s.outputs[0]->dtype;
  if (!ms.options.blas || (t != DType::F32 && t != DType::F64) ||
      a.buf->dtype != t || bm.buf->dtype != t)
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
  // GRADC_NUM_THREADS, once, sets OpenBLAS's threads (docs/ABI.md).
  b.CreateCall(ms.threadCount());
  llvm::Type *i32 = b.getInt32Ty();
  auto toInt = [&](llvm::Value *v) { return b.CreateTrunc(v, i32); };
  ScalarType st = fromDType(t);
  const int rowMajor = 101, noTrans = 111, trans = 112;
  auto pointer = [&](Operand x) {
    return b.CreateInBoundsGEP(memoryType(t), pointerOf(x.buf), x.off);
  };
  // c[m, n] = 1 * op(a)[m, k] op(b)[k, n] + 0 * c, leading dimensions k
  // (m transposed), n (k transposed), n.
  b.CreateCall(getGemm(ms.llvmModule, t),
               {b.getInt32(rowMajor),
                b.getInt32(a.transposed ? trans : noTrans),
                b.getInt32(bm.transposed ? trans : noTrans), toInt(m), toInt(n),
                toInt(k), constant(st, 1), pointer(a),
                toInt(a.transposed ? m : k), pointer(bm),
                toInt(bm.transposed ? k : n), constant(st, 0), z, toInt(n)});
  b.CreateBr(done);
  b.SetInsertPoint(loops);
  return done;
}

//===--- Threads ----------------------------------------------------------===//

/// `i32 gradc.num_threads()`, one per module, as Kernels.h's
/// gradc::numThreads: GRADC_NUM_THREADS read once (strtol; 1 when unset or
/// not a positive decimal integer, at most 256), and when it is set and
/// the program has OpenBLAS, openblas_set_num_threads of it.
llvm::Function *ModuleState::threadCount() {
  if (numThreads)
    return numThreads;
  llvm::LLVMContext &ctx = llvmModule.getContext();
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type *ptr = llvm::PointerType::get(ctx, 0);
  auto *cache = new llvm::GlobalVariable(
      llvmModule, i32, false, llvm::GlobalValue::InternalLinkage,
      llvm::ConstantInt::get(i32, 0), "gradc.threads");
  numThreads = llvm::Function::Create(llvm::FunctionType::get(i32, false),
                                      llvm::GlobalValue::InternalLinkage,
                                      "gradc.num_threads", llvmModule);
  numThreads->addFnAttr(llvm::Attribute::NoUnwind);
  auto block = [&](const char *name) {
    return llvm::BasicBlock::Create(ctx, name, numThreads);
  };
  llvm::BasicBlock *entry = block("entry"), *known = block("known"),
                   *read = block("read"), *parse = block("parse"),
                   *done = block("done");
  llvm::IRBuilder<> b(entry);
  llvm::AllocaInst *end = b.CreateAlloca(ptr, nullptr, "end");
  llvm::LoadInst *cached = b.CreateLoad(i32, cache, "cached");
  cached->setAtomic(llvm::AtomicOrdering::Monotonic);
  cached->setAlignment(llvm::Align(4));
  b.CreateCondBr(b.CreateICmpNE(cached, b.getInt32(0)), known, read);
  b.SetInsertPoint(known);
  b.CreateRet(cached);
  b.SetInsertPoint(read);
  llvm::Value *text = b.CreateCall(
      llvmModule.getOrInsertFunction(
          "getenv", llvm::FunctionType::get(ptr, {ptr}, false)),
      {b.CreateGlobalStringPtr("GRADC_NUM_THREADS", "gradc.threads.env")});
  b.CreateCondBr(b.CreateIsNull(text), done, parse);
  b.SetInsertPoint(parse);
  llvm::Value *n = b.CreateCall(
      llvmModule.getOrInsertFunction(
          "strtol", llvm::FunctionType::get(i64, {ptr, ptr, i32}, false)),
      {text, end, b.getInt32(10)});
  llvm::Value *stop = b.CreateLoad(ptr, end);
  llvm::Value *bad =
      b.CreateOr(b.CreateICmpEQ(stop, text),
                 b.CreateOr(b.CreateICmpNE(b.CreateLoad(b.getInt8Ty(), stop),
                                           b.getInt8(0)),
                            b.CreateICmpSLT(n, b.getInt64(1))));
  n = b.CreateSelect(bad, b.getInt64(1), n);
  n = b.CreateTrunc(
      b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, n, b.getInt64(256)), i32);
  if (options.blas) {
    llvm::Function *set =
        weakFunction("openblas_set_num_threads",
                     llvm::FunctionType::get(b.getVoidTy(), {i32}, false));
    llvm::BasicBlock *call = block("openblas"), *after = block("set");
    b.CreateCondBr(b.CreateIsNotNull(set), call, after);
    b.SetInsertPoint(call);
    b.CreateCall(set, {n});
    b.CreateBr(after);
    b.SetInsertPoint(after);
  }
  llvm::BasicBlock *parsed = b.GetInsertBlock();
  b.CreateBr(done);
  b.SetInsertPoint(done);
  llvm::PHINode *result = b.CreatePHI(i32, 2, "threads");
  result->addIncoming(b.getInt32(1), read);
  result->addIncoming(n, parsed);
  llvm::StoreInst *store = b.CreateStore(result, cache);
  store->setAtomic(llvm::AtomicOrdering::Monotonic);
  store->setAlignment(llvm::Align(4));
  b.CreateRet(result);
  return numThreads;
}

/// A loop that the `parallel` pass marked, outlined over a context (the
/// buffers, scalar parameters and sizes it uses, and its extent):
///
///   - `F.parN(ctx, lo, hi)` runs iterations [lo, hi), with its own copy of
///     each private buffer (always inlined);
///   - `F.parN.omp(ctx)` runs thread t's static chunk of the n iterations
///     (the first n mod T threads one more), the body of an OpenMP team;
///   - the loop itself calls `GOMP_parallel(F.parN.omp, ctx, T, 0)` when
///     gradc.num_threads() T > 1, libgomp is linked (GOMP_parallel is a
///     weak reference: null without it) and the work reaches
///     loops::parallelMinWork; otherwise `F.parN(ctx, 0, n)`, which is
///     inlined, so that one thread runs the loop as before.
///
/// Every iteration computes what it computes on one thread, so the
/// results are bitwise the same.
void FunctionPrinter::parallelLoop(const Stmt &s) {
  // What the body uses from here.
  llvm::SetVector<const Buffer *> buffers;
  llvm::SetVector<llvm::StringRef> sizeNames;
  llvm::DenseSet<const Buffer *> privates(s.privates.begin(), s.privates.end());
  auto note = [&](const Stmt &st) {
    if (st.buffer && !privates.contains(st.buffer))
      buffers.insert(st.buffer);
    walkExprs(st, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Load && !privates.contains(e.buffer))
        buffers.insert(e.buffer);
      if (e.kind == Expr::Kind::Size)
        sizeNames.insert(e.name);
    });
  };
  walk(s.body, note);
  // The context: the extent, the sizes, then each buffer's pointer (or a
  // scalar parameter's value).
  llvm::Value *extent = expr(*s.extent);
  std::vector<llvm::Value *> captured{extent};
  for (llvm::StringRef name : sizeNames)
    captured.push_back(sizes.lookup(name));
  for (const Buffer *buf : buffers) {
    if (isScalarParam(buf))
      captured.push_back(scalarParams.lookup(buf));
    else if (isValueLocal(buf))
      captured.push_back(localValue(buf));
    else if (!llvm::isa<llvm::GlobalValue>(pointerOf(buf)))
      captured.push_back(pointerOf(buf));
  }
  // In a range version's first copy, the flag last: each chunk sets its
  // own and ors it into this one when it ends.
  bool setsFlag = smallTrig && loops::callsSmallArgumentVersion(s);
  if (setsFlag)
    captured.push_back(rangeFlag);
  std::vector<llvm::Type *> types;
  for (llvm::Value *v : captured)
    types.push_back(v->getType());
  llvm::StructType *contextType = llvm::StructType::get(ctx, types);
  // One context for the team and one for the serial call, which does not
  // escape: once the call is inlined, SROA turns it back into the values
  // themselves (the noalias arguments among them).
  auto makeContext = [&](const char *name) {
    llvm::IRBuilder<> ab(entry, entry->begin());
    llvm::AllocaInst *context = ab.CreateAlloca(contextType, nullptr, name);
    for (auto [i, v] : llvm::enumerate(captured))
      b.CreateStore(v, b.CreateStructGEP(contextType, context, i));
    return context;
  };

  // F.parN(ctx, lo, hi).
  llvm::Type *ptr = b.getPtrTy();
  std::string name = llfn->getName().str() + ".par" + std::to_string(s.var);
  llvm::Function *range = llvm::Function::Create(
      llvm::FunctionType::get(b.getVoidTy(),
                              {ptr, b.getInt64Ty(), b.getInt64Ty()}, false),
      llvm::GlobalValue::InternalLinkage, name, ms.llvmModule);
  range->addFnAttr(llvm::Attribute::AlwaysInline);
  range->addFnAttr(llvm::Attribute::NoUnwind);
  range->addParamAttr(0, llvm::Attribute::NoAlias);
  {
    // Build it with this printer, its maps pointing at the context.
    llvm::Function *outer = llfn;
    llvm::BasicBlock *outerEntry = entry;
    llvm::IRBuilderBase::InsertPoint ip = b.saveIP();
    auto savedPointers = pointers;
    auto savedScalars = scalarParams;
    auto savedSizes = sizes;
    auto savedLocals = std::move(localValues);
    localValues.clear();
    llfn = range;
    entry = llvm::BasicBlock::Create(ctx, "entry", range);
    auto *bodyBlock = llvm::BasicBlock::Create(ctx, "body", range);
    b.SetInsertPoint(entry);
    b.CreateBr(bodyBlock);
    b.SetInsertPoint(bodyBlock);
    llvm::Value *ctxArg = range->getArg(0);
    auto field = [&](unsigned i) {
      return b.CreateLoad(types[i], b.CreateStructGEP(contextType, ctxArg, i));
    };
    unsigned next = 1; // field 0 is the extent
    for (llvm::StringRef sizeName : sizeNames)
      sizes[sizeName] = field(next++);
    for (const Buffer *buf : buffers) {
      if (isScalarParam(buf))
        scalarParams[buf] = field(next++);
      else if (isValueLocal(buf))
        localValues[buf] = field(next++);
      else if (!llvm::isa<llvm::GlobalValue>(pointers.lookup(buf)))
        pointers[buf] = field(next++);
    }
    privatesHere(s);
    llvm::AllocaInst *sharedFlag = rangeFlag;
    if (setsFlag) {
      llvm::IRBuilder<> ab(entry, entry->begin());
      rangeFlag = ab.CreateAlloca(b.getInt32Ty(), nullptr, "outOfRange");
      b.CreateStore(b.getInt32(0), rangeFlag);
    }
    if (hasMaskedTail(s))
      innermostLoop(s, range->getArg(1), range->getArg(2));
    else
      forLoop(
          range->getArg(2), "i" + llvm::Twine(s.var),
          [&](llvm::Value *i) {
            loopVars[s.var] = i;
            block(s.body);
            loopVars.erase(s.var);
          },
          range->getArg(1), &s.body);
    if (setsFlag) {
      b.CreateAtomicRMW(llvm::AtomicRMWInst::Or, field(next++),
                        b.CreateLoad(b.getInt32Ty(), rangeFlag),
                        llvm::MaybeAlign(4), llvm::AtomicOrdering::Monotonic);
      rangeFlag = sharedFlag;
    }
    b.CreateRetVoid();
    pointers = std::move(savedPointers);
    scalarParams = std::move(savedScalars);
    sizes = std::move(savedSizes);
    localValues = std::move(savedLocals);
    llfn = outer;
    entry = outerEntry;
    b.restoreIP(ip);
  }

  // F.parN.omp(ctx): this thread's chunk.
  llvm::Type *i32 = b.getInt32Ty();
  llvm::Function *team = llvm::Function::Create(
      llvm::FunctionType::get(b.getVoidTy(), {ptr}, false),
      llvm::GlobalValue::InternalLinkage, name + ".omp", ms.llvmModule);
  team->addFnAttr(llvm::Attribute::NoUnwind);
  {
    llvm::IRBuilder<> tb(llvm::BasicBlock::Create(ctx, "entry", team));
    llvm::FunctionType *query = llvm::FunctionType::get(i32, false);
    llvm::Value *threads = tb.CreateSExt(
        tb.CreateCall(ms.weakFunction("omp_get_num_threads", query)),
        tb.getInt64Ty());
    llvm::Value *t = tb.CreateSExt(
        tb.CreateCall(ms.weakFunction("omp_get_thread_num", query)),
        tb.getInt64Ty());
    llvm::Value *n = tb.CreateLoad(
        types[0], tb.CreateStructGEP(contextType, team->getArg(0), 0));
    llvm::Value *q = tb.CreateSDiv(n, threads);
    llvm::Value *r = tb.CreateSRem(n, threads);
    llvm::Value *lo =
        tb.CreateAdd(tb.CreateMul(t, q),
                     tb.CreateBinaryIntrinsic(llvm::Intrinsic::smin, t, r));
    llvm::Value *hi =
        tb.CreateAdd(tb.CreateAdd(lo, q),
                     tb.CreateZExt(tb.CreateICmpSLT(t, r), tb.getInt64Ty()));
    tb.CreateCall(range, {team->getArg(0), lo, hi});
    tb.CreateRetVoid();
  }

  // The loop: on a team, or here.
  llvm::Function *gomp = ms.weakFunction(
      "GOMP_parallel",
      llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i32, i32}, false));
  llvm::Value *threads = b.CreateCall(ms.threadCount());
  llvm::Value *useTeam = b.CreateAnd(b.CreateICmpSGT(threads, b.getInt32(1)),
                                     b.CreateIsNotNull(gomp));
  if (s.work->kind != Expr::Kind::Const)
    useTeam = b.CreateAnd(useTeam,
                          b.CreateICmpSGE(expr(*s.work), i64(parallelMinWork)));
  auto *onTeam = llvm::BasicBlock::Create(ctx, "par.team", llfn);
  auto *here = llvm::BasicBlock::Create(ctx, "par.serial", llfn);
  auto *after = llvm::BasicBlock::Create(ctx, "par.done", llfn);
  b.CreateCondBr(useTeam, onTeam, here);
  b.SetInsertPoint(onTeam);
  b.CreateCall(gomp, {team, makeContext("par.ctx"), threads, b.getInt32(0)});
  b.CreateBr(after);
  b.SetInsertPoint(here);
  b.CreateCall(range, {makeContext("par.serial.ctx"), i64(0), extent});
  b.CreateBr(after);
  b.SetInsertPoint(after);
}

/// A parallel loop's private buffers in the frame of the function being
/// printed: its outlined body's, or this one's when it runs here (in a
/// range version's first copy).
void FunctionPrinter::privatesHere(const Stmt &s) {
  llvm::IRBuilder<> ab(entry, entry->begin());
  for (const Buffer *buf : s.privates) {
    if (isValueLocal(buf))
      continue;
    int64_t count = 1;
    for (const Dim &d : buf->shape)
      count *= d.getSize();
    llvm::Type *type = memoryType(buf->dtype);
    if (buf->kind == Buffer::Kind::Stack)
      type = llvm::ArrayType::get(type, std::max<int64_t>(count, 1));
    llvm::AllocaInst *a = ab.CreateAlloca(type, nullptr, valueName(buf));
    a->setAlignment(llvm::Align(16));
    pointers[buf] = a;
  }
}

/// The first copy of a function with a range version (docs/Loops.md;
/// PrintCpp's rangeVersion prints the same): the body with the
/// small-argument sin and cos, which set the flag for an argument of 2^20
/// or more (or inf or NaN); it returns when none was out of
/// range, and otherwise (also when a failure may come from such an
/// argument) the body runs again as it is. Its parallel loops run on
/// threads too: each chunk has its own flag, or-ed into this one.
void FunctionPrinter::rangeVersion() {
  {
    llvm::IRBuilder<> ab(entry, entry->begin());
    rangeFlag = ab.CreateAlloca(b.getInt32Ty(), nullptr, "outOfRange");
  }
  b.CreateStore(b.getInt32(0), rangeFlag);
  auto *fast = llvm::BasicBlock::Create(ctx, "range.small", llfn);
  auto *general = llvm::BasicBlock::Create(ctx, "range.general");
  auto *fastFail = llvm::BasicBlock::Create(ctx, "range.fail");
  b.CreateBr(fast);
  b.SetInsertPoint(fast);
  llvm::BasicBlock *failed = failTarget;
  failTarget = fastFail;
  smallTrig = true;
  block(fn.body);
  smallTrig = false;
  failTarget = failed;
  llvm::Value *none =
      b.CreateICmpEQ(b.CreateLoad(b.getInt32Ty(), rangeFlag), b.getInt32(0));
  b.CreateStore(b.getInt32(GRADC_OK), statusSlot);
  b.CreateCondBr(none, heap.empty() ? exit : cleanup, general);
  fastFail->insertInto(llfn);
  b.SetInsertPoint(fastFail);
  llvm::Value *out =
      b.CreateICmpNE(b.CreateLoad(b.getInt32Ty(), rangeFlag), b.getInt32(0));
  b.CreateCondBr(out, general, failed);
  general->insertInto(llfn);
  b.SetInsertPoint(general);
  // The body again from its start: every local is written before it is
  // read (an alloca's value would be the first copy's), so none is known.
  localValues.clear();
}

/// A call through the C ABI (sizes, inputs, outputs); a scalar input goes
/// by value. A non-zero status is returned as is.
void FunctionPrinter::call(const Stmt &s) {
  llvm::Function *target = nullptr;
  bool checked = true;
  if (s.isExtern) {
    const ir::ExternDecl *decl = ms.module.lookupExtern(s.callee);
    assert(decl && "the verifier checks callees");
    target = getExternFunction(ms.llvmModule, *decl);
    checked = s.checksStatus;
  } else {
    target = ms.functions.lookup(s.callee);
    assert(target && "the verifier checks callees");
  }
  llvm::SmallVector<llvm::Value *, 8> args;
  for (const auto &[name, value] : s.sizeArgs)
    args.push_back(expr(*value));
  for (const Buffer *in : s.inputs)
    args.push_back(in->shape.empty()
                       ? toMemory(in->dtype, loadElement(in, i64(0)))
                       : pointerOf(in));
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    const Buffer *o = s.outputs[i];
    llvm::Value *p = pointerOf(o);
    if (!s.operands.empty() && !isIndexConst(*s.operands[i], 0))
      p = b.CreateInBoundsGEP(memoryType(o->dtype), p, expr(*s.operands[i]));
    args.push_back(p);
  }
  llvm::CallInst *c = b.CreateCall(target, args);
  if (!checked)
    return;
  auto *fail = llvm::BasicBlock::Create(ctx, "call.fail", llfn);
  auto *cont = llvm::BasicBlock::Create(ctx, "call.ok", llfn);
  b.CreateCondBr(b.CreateICmpNE(c, b.getInt32(0)), fail, cont);
  b.SetInsertPoint(fail);
  b.CreateStore(c, statusSlot);
  b.CreateBr(failTarget);
  b.SetInsertPoint(cont);
}

void FunctionPrinter::run() {
  entry = llvm::BasicBlock::Create(ctx, "entry", llfn);
  auto *body = llvm::BasicBlock::Create(ctx, "body", llfn);
  cleanup = llvm::BasicBlock::Create(ctx, "cleanup");
  exit = llvm::BasicBlock::Create(ctx, "exit");
  failTarget = exit;
  b.SetInsertPoint(entry);
  statusSlot = b.CreateAlloca(b.getInt32Ty(), nullptr, "status");
  b.CreateBr(body);
  b.SetInsertPoint(body);
  findAddressedLocals();
  transposed = findTransposedOperands(
      fn, [](const Stmt &kernel) { return narrowColumns(kernel) != 0; });
  blasTransposed = findTransposedOperands(fn, [&](const Stmt &kernel) {
    return narrowColumns(kernel) == 0 && blasMayTake(kernel);
  });
  prologue();
  storage();
  for (const auto &buf : fn.buffers)
    if (buf->kind == Buffer::Kind::Alias)
      pointerOf(buf.get());
  if (loops::hasRangeVersion(fn))
    rangeVersion();
  block(fn.body);
  b.CreateStore(b.getInt32(GRADC_OK), statusSlot);
  b.CreateBr(heap.empty() ? exit : cleanup);
  if (!heap.empty()) {
    cleanup->insertInto(llfn);
    b.SetInsertPoint(cleanup);
    // Last taken, first given: the scratch cache hands small blocks out
    // of a stack (MathBitcode.cpp).
    for (size_t i = heap.size(); i-- > 0;)
      if (capacities.empty())
        b.CreateCall(ms.free(), {heap[i]});
      else
        b.CreateCall(ms.scratchGive(),
                     {heap[i], b.CreateLoad(b.getInt64Ty(), capacities[i])});
    b.CreateBr(exit);
  } else {
    delete cleanup;
  }
  exit->insertInto(llfn);
  b.SetInsertPoint(exit);
  b.CreateRet(b.CreateLoad(b.getInt32Ty(), statusSlot));
  simplifyLocalPhis();
}

} // namespace

bool emit::printLLVMFromLoops(const ir::Module &module,
                              llvm::Module &llvmModule,
                              const LLVMOptions &options, std::string &error) {
  std::unique_ptr<LoopModule> lowered = lowerForBackend(module, error);
  if (!lowered)
    return false;
  // The roots and what they call, or every function.
  llvm::DenseSet<const LoopFunction *> wanted;
  std::vector<const LoopFunction *> work;
  for (const auto &f : lowered->functions)
    if (options.roots.empty() || llvm::is_contained(options.roots, f->name))
      if (wanted.insert(f.get()).second)
        work.push_back(f.get());
  llvm::StringMap<const LoopFunction *> byName = lowered->functionsByName();
  while (!work.empty()) {
    const LoopFunction *f = work.back();
    work.pop_back();
    walk(f->body, [&](const Stmt &s) {
      if (s.kind == Stmt::Kind::Call && !s.isExtern)
        if (const LoopFunction *callee = byName.lookup(s.callee))
          if (wanted.insert(callee).second)
            work.push_back(callee);
    });
  }
  ModuleState ms{module, llvmModule, options, {}};
  std::vector<std::pair<const LoopFunction *, const ir::Function *>> fns;
  for (const auto &f : lowered->functions) {
    if (!wanted.contains(f.get()))
      continue;
    const ir::Function *irFn = module.lookup(f->name);
    if (!irFn) {
      error = "no function '" + f->name + "' for its loops";
      return false;
    }
    fns.push_back({f.get(), irFn});
    ms.functions[f->name] =
        declareCFunction(llvmModule, module, *irFn, options);
  }
  TimeRegion region("build LLVM IR");
  for (const auto &[f, irFn] : fns)
    FunctionPrinter(ms, *f, *irFn, ms.functions.lookup(f->name)).run();
  if (options.jitWrappers)
    for (const auto &[f, irFn] : fns)
      if (irFn->getRole() != ir::Function::Role::RuleInstance)
        emitJITWrapper(llvmModule, *irFn, ms.functions.lookup(f->name));
  return true;
}
