//===- Interpreter.h - The reference interpreter ----------------*- C++ -*-===//
//
// Executes IR op by op, exactly as docs/IR.md defines each op, in the
// declared element type: every op computes in double and rounds its result
// to the element type (f32 results are rounded to float, i32 arithmetic
// wraps to 32 bits, bools are 0/1). It is the oracle that both emitters
// and the constant folder are tested against, so it is written for
// clarity, not speed; its summation order is fixed (docs/IR.md).
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_INTERPRETER_H
#define GRADC_IR_INTERPRETER_H

#include "gradc/IR/IR.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradc::ir {

/// A concrete tensor: row-major values held as doubles but always exactly
/// representable in `dtype` (floats rounded, ints integral, bools 0/1).
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;

  /// The product of the shape (1 for a scalar).
  int64_t numElements() const;
};

/// The interpreter refuses to make a tensor with more elements than this
/// (a run-time error, not an allocation failure).
constexpr int64_t maxInterpreterElements = int64_t(1) << 26;

/// The number of lanes of a floating-point sum along the input's last
/// (contiguous) axis, the summation order of docs/IR.md that every
/// implementation follows: the term at index k of that axis adds into
/// lane k % reductionLanes (in f64, in increasing flat index), and the
/// lanes combine pairwise, ((0+1)+(2+3))+((4+5)+(6+7)), before the one
/// rounding. lib/Loops lowers every such sum to exactly this. (An op with
/// accumulate = "f32" has reductionLanesF32 f32 lanes instead.)
constexpr int64_t reductionLanes = 8;

/// The lanes of an f32 sum in the second order, `accumulate = "f32"`
/// (`gradc --accumulate=f32`): the term at index k of the last axis adds
/// in f32 into lane k % reductionLanesF32, and the lanes combine pairwise
/// in f32, (((0+1)+(2+3))+((4+5)+(6+7)))+(((8+9)+...)+...).
constexpr int64_t reductionLanesF32 = 16;

/// The pairwise combination of `n` (a power of two) lane sums in T:
/// combinePairwise(l, 8) is ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
template <typename T> T combinePairwise(const T *lanes, int64_t n) {
  if (n == 1)
    return lanes[0];
  return combinePairwise(lanes, n / 2) + combinePairwise(lanes + n / 2, n / 2);
}

/// The pairwise combination of `reductionLanes` lane sums.
inline double combineLanes(const double *lanes) {
  return combinePairwise(lanes, reductionLanes);
}

/// Calls nested deeper than this are a run-time error.
constexpr unsigned maxInterpreterCallDepth = 100;

/// Runs `fnName` on `args`. On a run-time error (an argument whose count,
/// element type or shape contradicts the signature, a size name bound to
/// two sizes, an integer division by zero, an out-of-range label, ...)
/// returns false with `error` set to a message that names the function
/// and, for an op, the op.
bool interpret(const Module &module, llvm::StringRef fnName,
               llvm::ArrayRef<Tensor> args, std::vector<Tensor> &results,
               std::string &error);

/// What the last call of interpret() held in memory (`gradc run --stats`,
/// docs/Gradients.md, "Checkpointing"). Bytes count each tensor at its C
/// ABI size (elementByteSize) while a frame holds it: from the op that
/// makes it (or the call that binds it) to its last use, plus the stacked
/// results a `for` is building and the carries a checkpointed reverse loop
/// keeps.
struct InterpreterStats {
  /// The most tensor bytes held at once.
  int64_t peakLiveBytes = 0;
  /// The most sets of loop carries that checkpointed reverse loops kept
  /// at once (their snapshots and the segment they are reversing).
  int64_t peakCheckpointCarries = 0;
  /// The body steps that checkpointed reverse loops ran again.
  int64_t recomputedSteps = 0;
  /// The bytes of tensors copied to pass them: the outermost call's
  /// arguments, a loop's initial carries, a value returned twice or a
  /// parameter returned. A callee reads its caller's tensors in place, so
  /// this does not grow with what a loop's body captures times its trip.
  int64_t copiedBytes = 0;
};

/// The statistics of the last call of interpret() in this process (reset
/// by each call; not thread-safe, like registerLoadedExtern).
const InterpreterStats &lastInterpreterStats();

/// How the interpreter and the JIT backends reach an extern function once
/// the user's code is loaded (lib/ClangJIT, docs/Extern.md): `address` is
/// the C function itself, and `trampoline` a function compiled beside it
/// that unpacks three arrays (the size names, a pointer to each input,
/// scalars included, and a pointer to each output) and calls it, returning
/// its status (0 for a `void` function).
using ExternTrampoline = int32_t (*)(const int64_t *sizes, void **args,
                                     void **outs);
struct LoadedExtern {
  void *address = nullptr;
  ExternTrampoline trampoline = nullptr;
};

/// Makes the code of extern function `name` callable for the rest of the
/// process (like a symbol of llvm::sys::DynamicLibrary). Not thread-safe:
/// the driver loads before it runs anything.
void registerLoadedExtern(llvm::StringRef name, LoadedExtern code);
/// The code of extern function `name`, or null when it was never loaded.
const LoadedExtern *lookupLoadedExtern(llvm::StringRef name);
/// Every loaded extern function, in the order they were registered.
std::vector<std::pair<std::string, LoadedExtern>> getLoadedExterns();

/// Rounds `v` to a value of element type `dtype`: f32 to the nearest
/// float, i32 truncated toward zero and wrapped to 32 bits (NaN and
/// infinities become 0), bool to 0 or 1 (nonzero is true).
double roundToDType(DType dtype, double v);

} // namespace gradc::ir

#endif // GRADC_IR_INTERPRETER_H
