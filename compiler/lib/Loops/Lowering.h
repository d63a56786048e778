//===- Lowering.h - Shared state of the lowering to loops -------*- C++ -*-===//
//
// Private to lib/Loops. The lowering of one function keeps a map from
// tensor values to buffers and appends statements to a block; each op
// family (LowerElementwise.cpp, LowerReduce.cpp, ...) lowers its ops
// through the helpers here, so index algebra is written once.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_LIB_LOOPS_LOWERING_H
#define GRADC_LIB_LOOPS_LOWERING_H

#include "gradc/IR/IR.h"
#include "gradc/IR/Printer.h"
#include "gradc/Loops/LoopIR.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>

#include <string>
#include <vector>

namespace gradc::loops {

/// The indices of one loop nest, one per dimension of its shape (a loop
/// variable, or the constant 0 for a dimension of known size 1, which
/// gets no loop).
struct Nest {
  Block *body = nullptr;
  std::vector<ExprPtr> idx;
  /// Copies of the indices of dimensions [from, to).
  std::vector<ExprPtr> indices(size_t from = 0, size_t to = ~size_t(0)) const;
};

class Lowering {
public:
  Lowering(const ir::Module &module, const ir::Function &src, LoopFunction &fn);

  const ir::Module &module;
  const ir::Function &src;
  LoopFunction &fn;
  std::string error;

  /// The buffer that holds `v` (made when its op lowered; for a splat
  /// constant, made and filled here, on first use as a buffer).
  Buffer *bufferOf(const ir::Value *v);
  /// Records that `v` is the constant `value` everywhere: elementwise
  /// readers use the number itself, and no buffer exists unless a call,
  /// a kernel or a layout op needs one.
  void setSplat(const ir::Value *v, double value) { splats[v] = value; }
  /// The number that `v` is everywhere, when it is a splat with no buffer.
  std::optional<double> splatValue(const ir::Value *v) const {
    auto it = splats.find(v);
    if (it == splats.end() || buffers.count(v))
      return std::nullopt;
    return it->second;
  }
  /// The buffer for result `i` of `op`: the function's output when the
  /// value is returned and owns one, else new scratch memory.
  Buffer *resultBuffer(const ir::Op &op, unsigned i = 0);
  /// Declares that `v` lives in `b` (an alias made by a layout op).
  void bind(const ir::Value *v, Buffer *b) { buffers[v] = b; }
  /// A new local scalar (an accumulator).
  Buffer *local(ScalarType type, llvm::StringRef name);
  /// Whether `op`'s result `i` may be a view of an operand instead of a
  /// copy (it is not given the function's output).
  bool mayAlias(const ir::Op &op, unsigned i = 0) const;

  /// Appends to the current block, with the current origin.
  void add(Block &block, StmtPtr s);
  void store(Block &block, Buffer *b, ExprPtr index, ExprPtr value);
  void accumulate(Block &block, Buffer *b, ExprPtr index, Combiner c,
                  ExprPtr value);
  void check(Block &block, ExprPtr cond, CheckStatus status,
             llvm::StringRef message);
  /// The outermost block of the function.
  Block &top() { return fn.body; }

  /// Opens one loop per dimension of `shape` (none for a known 1) inside
  /// `block`.
  Nest openNest(Block &block, llvm::ArrayRef<Dim> shape);
  /// Opens `for %v < extent` inside `block` and returns its body and `%v`;
  /// a known extent of 1 opens no loop (the index is 0), a known 0 gives
  /// no body (null).
  std::pair<Block *, ExprPtr> openLoop(Block &block, ExprPtr extent);

  /// A float sum along a contiguous axis in the order of docs/IR.md
  /// ("Summation order"), in three steps:
  ///   openLanes:       `lanes[l] = 0` for l < W (W = reductionLanes), a
  ///                    stack buffer of W f64 accumulators
  ///   accumulateLanes: term k of an axis of extent n adds into lane k % W:
  ///                    `for c < n / W { for l < W { lanes[l] += t(c*W+l) } }`
  ///                    then `for l < n % W { lanes[l] += t(n - n%W + l) }`
  ///                    (called once per position of any outer reduced axes)
  ///   combineLanes:    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ...
  /// The inner loop over a fixed W with independent accumulators is what a
  /// compiler vectorises; the interpreter's LaneSum adds the same terms.
  /// With `inF32` (an op with `accumulate = "f32"`), the second order:
  /// W = reductionLanesF32 f32 lanes. The other steps read W and the
  /// type from the lanes buffer.
  Buffer *openLanes(Block &block, bool inF32 = false);
  void accumulateLanes(Block &block, Buffer *lanes, const Dim &n,
                       llvm::function_ref<ExprPtr(const ExprPtr &k)> term);
  /// The same, where the term may first append statements to the body of
  /// the lane loop it is added in (softmax stores e^(x_k - m) there).
  void accumulateLanes(
      Block &block, Buffer *lanes, const Dim &n,
      llvm::function_ref<ExprPtr(Block &body, const ExprPtr &k)> term,
      Combiner combiner = Combiner::Add);
  /// `m` = the maximum of at(k) over k < n (m has at(k)'s type), in W
  /// lanes that vectorise; bit for bit docs/IR.md's one accumulator in
  /// increasing k, because max is exact: only which of -0 and +0, or
  /// which NaN, comes out can depend on the order, so when the lanes give
  /// 0 or NaN the one accumulator runs again (`for k < (redo ? n : 0)`).
  /// An axis of known extent n <= W (a classifier's few logits) is that
  /// one accumulator alone: the lanes would cost more than the n terms.
  void maxLanes(Block &block, Buffer *m, const Dim &n,
                llvm::function_ref<ExprPtr(const ExprPtr &k)> at);
  static ExprPtr combineLanes(Buffer *lanes);
  /// The lanes' sum of n <= W terms, each alone in its lane, without the
  /// lanes: `for k < n { terms[k] = t(k) }` into a stack buffer of n f64,
  /// and the value is the pairwise tree of combineLanes with the lanes
  /// that hold nothing left out, plus +0 (see Lower.cpp: bit for bit).
  ExprPtr sumFewTerms(Block &block, int64_t n,
                      llvm::function_ref<ExprPtr(const ExprPtr &k)> term,
                      bool inF32 = false);
  /// The same, where the term may first append statements to the body of
  /// the loop it is computed in (softmax stores e^(x_k - m) there).
  ExprPtr
  sumFewTerms(Block &block, int64_t n,
              llvm::function_ref<ExprPtr(Block &body, const ExprPtr &k)> term,
              bool inF32);

  /// Row-major flat index of `idx` in `shape`: i0 * (d1 * d2) + i1 * d2 + i2.
  static ExprPtr flatIndex(llvm::ArrayRef<Dim> shape,
                           llvm::ArrayRef<ExprPtr> idx);
  /// The flat index into an operand of shape `in` read at index `idx` of
  /// the broadcast shape (right-aligned; known-1 axes of `in` are read at
  /// 0: NumPy broadcasting).
  static ExprPtr broadcastIndex(llvm::ArrayRef<Dim> in,
                                llvm::ArrayRef<ExprPtr> idx);
  /// `v` read at index `idx` of the (broadcast) shape of the current op.
  ExprPtr read(const ir::Value *v, llvm::ArrayRef<ExprPtr> idx);

  /// Whether `op` sums its (f32) data in f32: `accumulate = "f32"`.
  static bool accumulatesInF32(const ir::Op &op) {
    return op.getAttrs().has("accumulate");
  }
  /// The accumulator type of a sum of `t` data: f32 when `inF32`, else
  /// computeType(t).
  static ScalarType sumType(DType t, bool inF32) {
    return inF32 ? ScalarType::F32 : computeType(t);
  }

  /// The type that composite ops compute in: f64 for floats (so that
  /// rounding happens once, as in the interpreter), the type itself else.
  static ScalarType computeType(DType t) {
    return isFloat(t) ? ScalarType::F64 : fromDType(t);
  }

  bool outputForHas(const ir::Value *v) const { return outputFor.count(v); }
  void setOutputFor(const ir::Value *v, Buffer *b) { outputFor[v] = b; }
  /// Plans each operand of a `stack` or `concat` along the first axis that
  /// the op alone uses and an op computes to be computed in place, into a
  /// view of its part of the result (Lower.cpp).
  void planPartsInPlace();
  /// Whether operand `v` of `op` was computed in its part of op's result,
  /// so that `op` need not copy it.
  bool isPartInPlace(const ir::Value *v) const {
    auto it = partViews.find(v);
    return it != partViews.end() && buffers.lookup(v) == it->second;
  }

  /// Sets the origin of the statements that follow.
  void setOrigin(const ir::Op *op);
  Origin origin;

  bool fail(const std::string &message) {
    error = "in function '" + src.getName().str() + "': " + message;
    return false;
  }

  /// The names of the function's values as the IR printer gives them.
  const ir::ValueNamer &valueNames() const { return names; }

private:
  llvm::DenseMap<const ir::Value *, Buffer *> buffers;
  llvm::DenseMap<const ir::Value *, Buffer *> outputFor;
  /// The views planned by planPartsInPlace, by value.
  llvm::DenseMap<const ir::Value *, Buffer *> partViews;
  llvm::DenseMap<const ir::Value *, double> splats;
  /// Where the statements of the op being lowered start in top().
  size_t opStart = 0;
  ir::ValueNamer names;
};

/// The op families, one file each. Each returns false only after
/// Lowering::fail.
bool lowerElementwise(Lowering &l, const ir::Op &op);
bool lowerReduce(Lowering &l, const ir::Op &op);
bool lowerSoftmax(Lowering &l, const ir::Op &op);
bool lowerMatMul(Lowering &l, const ir::Op &op);
bool lowerLayout(Lowering &l, const ir::Op &op);
bool lowerConstantOrCall(Lowering &l, const ir::Op &op);
bool lowerControl(Lowering &l, const ir::Op &op);
/// LowerCheckpoint.cpp: a `for` with `recompute`, a checkpointed reverse
/// loop (the every-K and binomial schedules).
bool lowerCheckpointedFor(Lowering &l, const ir::Op &op);

/// LowerControl.cpp: passes each size name of `callee` to `call`, read off
/// the operand that binds it (parameter firstParam + i of the callee is
/// operand firstOperand + i of `op`).
bool bindSizes(Lowering &l, const ir::Op &op, const ir::Function &callee,
               unsigned firstParam, unsigned firstOperand, Stmt &call);

/// Legalize.cpp: the scalar expansion of every elementwise op into
/// primitives and intrinsics, with the one NaN policy of docs/IR.md.
/// `operands` are already loaded; the result has type `fromDType(result)`.
/// Returns null for an op that is not elementwise.
ExprPtr legalizeScalar(OpKind kind, std::vector<ExprPtr> operands,
                       DType operandType, DType resultType);

/// Reads an integer-list attribute (`axis`: one int or a list).
std::vector<int64_t> intListAttr(const ir::Op &op, llvm::StringRef name);

} // namespace gradc::loops

#endif // GRADC_LIB_LOOPS_LOWERING_H
