//===- Interpreter.cpp - The reference interpreter ------------------------===//
//
// Runs a function of a module on concrete tensors, one op at a time, with
// the semantics docs/IR.md gives each op of Ops.def. The rules that make it
// an oracle:
//
//  - Values are held in double and each result element is rounded to its
//    element type (roundToDType). An elementwise op evaluates its scalar
//    expansion from the op table (gradc/Ops/Scalar.h), whose primitives
//    round to their type: for f32 `+ - * /` and sqrt this is exactly IEEE
//    float arithmetic, since double carries more than twice float's
//    precision. The math functions (exp, log, sin, cos, tanh, sigmoid,
//    softplus, pow, ...) are gradc/Math.h's, which both backends call, so
//    that all three agree bit for bit (docs/Math.md).
//  - i32 arithmetic is done in 64-bit unsigned integers and wrapped to 32
//    bits, so it never overflows in C++; division truncates toward zero and
//    dividing by zero is a run-time error.
//  - Reductions, matmul and softmax add in a fixed order (docs/IR.md,
//    "Summation order"), accumulating in double (in 64-bit integers for
//    i32), and round once at the end: a float sum that runs along the
//    input's last axis adds into reductionLanes lanes by that axis's
//    index and combines them pairwise (LaneSum); any other sum, and
//    matmul's, adds in increasing flat index. An op with accumulate =
//    "f32" (f32 data only) adds in f32 instead, in reductionLanesF32
//    lanes (the second order of docs/IR.md).
//  - Every size name is bound from the arguments' shapes; attributes that
//    hold size names (reshape, broadcast_to, one_hot, split) resolve
//    through those bindings.
//
// Shapes are re-checked at run time (the verifier proved them statically),
// and each result is compared with its declared type, so an interpreter
// bug or an unverified module gives an error rather than a wrong answer.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Interpreter.h"

#include "gradc/IR/Printer.h"
#include "gradc/Math.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

using namespace gradc;
using namespace gradc::ir;

int64_t Tensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

double ir::roundToDType(DType dtype, double v) {
  return roundToScalar(fromDType(dtype), v);
}

namespace {

//===----------------------------------------------------------------------===//
// Element arithmetic
//===----------------------------------------------------------------------===//

/// Wraps a 64-bit two's complement value to i32.
double wrap32(uint64_t v) { return double(int32_t(uint32_t(v))); }
uint64_t asU64(double v) { return uint64_t(int64_t(v)); }

bool anyNaN(double a, double b) { return std::isnan(a) || std::isnan(b); }

/// max propagates NaN, as NumPy's does.
double maxValue(double a, double b) {
  return anyNaN(a, b) ? NAN : std::max(a, b);
}
/// A float sum in the order of docs/IR.md along a contiguous axis: term k
/// of the axis adds into lane k % reductionLanes; total() combines the
/// lanes pairwise. The loop IR's lowering (lib/Loops/LowerReduce.cpp)
/// emits the same additions.
/// With `inF32` (the op's `accumulate = "f32"`), the second order: term k
/// adds in f32 into lane k % reductionLanesF32 (every term is an f32
/// value, so the float add is exactly IEEE f32), combined pairwise in f32.
struct LaneSum {
  explicit LaneSum(bool inF32 = false) : inF32(inF32) {}
  bool inF32;
  double lanes[reductionLanes] = {};
  float lanesF32[reductionLanesF32] = {};
  void add(int64_t k, double v) {
    if (inF32)
      lanesF32[k % reductionLanesF32] += float(v);
    else
      lanes[k % reductionLanes] += v;
  }
  double total() const {
    return inF32 ? double(combinePairwise(lanesF32, reductionLanesF32))
                 : combineLanes(lanes);
  }
};

/// Whether `op` sums its f32 data in f32 (the accumulate-f32 pass; the
/// verifier allows it on f32 data only).
bool accumulatesInF32(const Op &op) { return op.getAttrs().has("accumulate"); }

/// acc + v, in f32 when `inF32` (v an f32 value), else in f64.
double addTerm(bool inF32, double acc, double v) {
  return inF32 ? double(float(acc) + float(v)) : acc + v;
}

//===----------------------------------------------------------------------===//
// Shapes and index loops
//===----------------------------------------------------------------------===//

using IntShape = std::vector<int64_t>;

std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// NumPy broadcasting of concrete shapes.
bool broadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                    IntShape &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

/// Calls `f(outIndex, offsets)` for every index of `outShape` in row-major
/// order; `offsets[k]` is the flat index into operand k, whose stride for
/// each output axis is `strides[k][axis]`.
void stridedLoop(llvm::ArrayRef<int64_t> outShape,
                 const std::vector<IntShape> &strides,
                 llvm::function_ref<void(int64_t, llvm::ArrayRef<int64_t>)> f) {
  int64_t total = product(outShape);
  if (total == 0)
    return;
  size_t rank = outShape.size(), n = strides.size();
  IntShape index(rank, 0), offsets(n, 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    f(flat, offsets);
    for (size_t d = rank; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < n; ++k)
        offsets[k] += strides[k][d];
      if (index[d] < outShape[d])
        break;
      for (size_t k = 0; k < n; ++k)
        offsets[k] -= strides[k][d] * outShape[d];
      index[d] = 0;
    }
  }
}

/// The strides that read an operand of shape `in` broadcast to `out`
/// (right-aligned; 0 along broadcast axes).
IntShape broadcastStrides(llvm::ArrayRef<int64_t> in,
                          llvm::ArrayRef<int64_t> out) {
  IntShape strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    size_t o = out.size() - in.size() + i;
    strides[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return strides;
}

/// Row-major strides of a shape.
IntShape rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  IntShape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

/// Resolves a possibly negative axis; false when out of range.
bool resolveAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

//===----------------------------------------------------------------------===//
// The interpreter
//===----------------------------------------------------------------------===//

/// Thrown-free error plumbing: every evaluation step returns false after
/// setting `message`.
class Interpreter {
public:
  explicit Interpreter(const Module &module) : module(module) {}

  std::string message;

  bool callFunction(const Function &fn, llvm::ArrayRef<Tensor> args,
                    std::vector<Tensor> &results, unsigned depth) {
    std::vector<const Tensor *> pointers;
    for (const Tensor &t : args)
      pointers.push_back(&t);
    return callFunction(fn, pointers, results, depth);
  }

  /// Runs `fn` on `args`, which outlive the call. A callee (depth > 0)
  /// reads its caller's tensors in place, as generated code passes
  /// pointers: a loop's body does not copy the tensors it captures at each
  /// step (which made a loop over `xs[t]` cost `trip` times the size of
  /// `xs`). The outermost call copies its arguments, rounded to their
  /// element types.
  bool callFunction(const Function &fn, llvm::ArrayRef<const Tensor *> args,
                    std::vector<Tensor> &results, unsigned depth) {
    if (depth > maxInterpreterCallDepth)
      return fail("calls are nested more than " +
                  std::to_string(maxInterpreterCallDepth) + " deep (is '" +
                  fn.getName().str() + "' recursive?)");
    Frame frame(fn);
    // A callee's arguments are its caller's tensors (generated code passes
    // pointers), so only the outermost call's count as held.
    frame.countsParams = depth == 0;
    if (!bindArguments(frame, args))
      return false;
    const std::vector<std::vector<const Value *>> &dying = lastUses(fn);
    size_t index = 0;
    for (const auto &op : fn.getOps()) {
      if (!runOp(frame, *op, depth))
        return false;
      // Values whose last use this op was are freed (the accounting of
      // InterpreterStats: what a frame holds is what is still needed).
      for (const Value *v : dying[index++])
        release(frame, v);
    }
    results.clear();
    llvm::ArrayRef<Value *> returns = fn.getReturns();
    for (size_t i = 0; i < returns.size(); ++i) {
      const Value *v = returns[i];
      const Tensor *t = frame.lookup(v);
      if (!t)
        return fail("in function '" + fn.getName().str() +
                    "': a returned value is not defined");
      // The frame's own tensor moves out unless it is returned again; a
      // borrowed argument is copied.
      auto it = frame.values.find(v);
      if (it != frame.values.end() &&
          !llvm::is_contained(returns.drop_front(i + 1), v)) {
        results.push_back(std::move(it->second));
      } else {
        stats.copiedBytes += bytesOf(*t);
        results.push_back(*t);
      }
    }
    account(-frame.bytes);
    return true;
  }

  InterpreterStats stats;

private:
  const Module &module;
  int64_t liveBytes = 0;
  llvm::DenseMap<const Function *, std::vector<std::vector<const Value *>>>
      lastUseCache;

  static int64_t bytesOf(const Tensor &t) {
    return int64_t(t.data.size()) * int64_t(elementByteSize(t.dtype));
  }

  void account(int64_t bytes) {
    liveBytes += bytes;
    stats.peakLiveBytes = std::max(stats.peakLiveBytes, liveBytes);
  }

  /// For each op of `fn`, the values whose last use it is (returned values
  /// are used by the return, so never among them).
  const std::vector<std::vector<const Value *>> &lastUses(const Function &fn) {
    auto [it, inserted] = lastUseCache.try_emplace(&fn);
    if (!inserted)
      return it->second;
    llvm::DenseMap<const Value *, size_t> last;
    size_t index = 0;
    for (const auto &op : fn.getOps()) {
      for (const Value *v : op->getOperands())
        last[v] = index;
      ++index;
    }
    for (const Value *v : fn.getReturns())
      last.erase(v);
    std::vector<std::vector<const Value *>> dying(fn.getOps().size());
    index = 0;
    for (const auto &op : fn.getOps()) {
      for (const Value *v : op->getOperands())
        if (last.count(v) && last[v] == index &&
            !llvm::is_contained(dying[index], v))
          dying[index].push_back(v);
      ++index;
    }
    return it->second = std::move(dying);
  }

  struct Frame {
    explicit Frame(const Function &fn) : fn(fn), names(fn) {}
    const Function &fn;
    ValueNamer names;
    llvm::DenseMap<const Value *, Tensor> values;
    /// Parameters that read the caller's tensors in place.
    llvm::DenseMap<const Value *, const Tensor *> borrowed;
    std::map<std::string, int64_t> sizes;
    /// The bytes of `values`, for InterpreterStats.
    int64_t bytes = 0;
    /// Whether the parameters' tensors count in `bytes`.
    bool countsParams = false;

    const Tensor *lookup(const Value *v) const {
      auto it = values.find(v);
      if (it != values.end())
        return &it->second;
      auto b = borrowed.find(v);
      return b == borrowed.end() ? nullptr : b->second;
    }
  };

  bool fail(std::string text) {
    message = std::move(text);
    return false;
  }

  /// Stores `t` as the value of `v` in `frame`, counting its bytes.
  void hold(Frame &frame, const Value *v, Tensor t) {
    if (v->isParam() && !frame.countsParams) {
      frame.values[v] = std::move(t);
      return;
    }
    int64_t bytes = bytesOf(t);
    Tensor &slot = frame.values[v];
    int64_t before = bytesOf(slot);
    slot = std::move(t);
    frame.bytes += bytes - before;
    account(bytes - before);
  }

  /// Frees the value of `v` in `frame` after its last use.
  void release(Frame &frame, const Value *v) {
    frame.borrowed.erase(v);
    auto it = frame.values.find(v);
    if (it == frame.values.end())
      return;
    int64_t bytes =
        v->isParam() && !frame.countsParams ? 0 : bytesOf(it->second);
    frame.values.erase(it);
    frame.bytes -= bytes;
    account(-bytes);
  }

  //===--------------------------------------------------------------------===//
  // Arguments and size names
  //===--------------------------------------------------------------------===//

  static std::string paramName(const Value *p) {
    if (!p->getName().empty())
      return p->getName().str();
    return "#" + std::to_string(p->getResultIndex());
  }

  bool bindArguments(Frame &frame, llvm::ArrayRef<const Tensor *> args) {
    const Function &fn = frame.fn;
    std::string fnName = fn.getName().str();
    if (args.size() != fn.getParams().size())
      return fail("'" + fnName + "' takes " +
                  std::to_string(fn.getParams().size()) + " argument(s), got " +
                  std::to_string(args.size()));
    std::map<std::string, std::string> boundBy; // size name -> argument
    for (size_t i = 0; i < args.size(); ++i) {
      const Value *param = fn.getParam(i);
      const TensorType &type = param->getType();
      const Tensor &arg = *args[i];
      std::string name = paramName(param);
      std::string where = "argument '" + name + "' of '" + fnName + "'";
      if (arg.dtype != type.dtype)
        return fail(where + " has element type " + dtypeName(arg.dtype).str() +
                    ", but its type is " + type.str());
      if (arg.shape.size() != type.getRank())
        return fail(where + " has shape " + shapeText(arg.shape) +
                    ", but its type " + type.str() + " has rank " +
                    std::to_string(type.getRank()));
      for (int64_t d : arg.shape)
        if (d < 0)
          return fail(where + " has the invalid shape " + shapeText(arg.shape));
      if (!checkSize(arg.shape) ||
          int64_t(arg.data.size()) != arg.numElements())
        return fail(where + " has " + std::to_string(arg.data.size()) +
                    " value(s) for shape " + shapeText(arg.shape));
      for (unsigned d = 0; d < type.getRank(); ++d) {
        const Dim &dim = type.shape[d];
        int64_t size = arg.shape[d];
        if (dim.isKnown()) {
          if (dim.getSize() != size)
            return fail(where + " has shape " + shapeText(arg.shape) +
                        ", but its type is " + type.str());
          continue;
        }
        std::string sizeName = dim.getName().str();
        auto [it, inserted] = frame.sizes.emplace(sizeName, size);
        if (inserted) {
          boundBy[sizeName] = name;
        } else if (it->second != size) {
          return fail("size '" + sizeName + "' is " +
                      std::to_string(it->second) + " in argument '" +
                      boundBy[sizeName] + "' but " + std::to_string(size) +
                      " in argument '" + name + "'");
        }
      }
      // A caller's tensors were made by ops, so they are rounded already.
      if (!frame.countsParams) {
        frame.borrowed[param] = &arg;
        continue;
      }
      stats.copiedBytes += bytesOf(arg);
      Tensor t = arg;
      for (double &v : t.data)
        v = roundToDType(t.dtype, v);
      hold(frame, param, std::move(t));
    }
    return true;
  }

  /// Whether a tensor of this shape is small enough to make.
  bool checkSize(llvm::ArrayRef<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0)
        return false;
      if (d != 0 && n > maxInterpreterElements / d)
        return false;
      n *= d;
    }
    return n <= maxInterpreterElements;
  }

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  /// Context for the messages of one op.
  struct OpContext {
    Frame &frame;
    const Op &op;
    std::vector<const Tensor *> operands;
  };

  std::string opPrefix(const OpContext &c) const {
    std::string s = "in function '" + c.frame.fn.getName().str() + "': '" +
                    c.op.getName().str() + "'";
    if (c.op.getNumResults())
      s += " (" + c.frame.names.get(c.op.getResult(0)) + ")";
    return s + ": ";
  }

  bool opFail(const OpContext &c, const std::string &text) {
    return fail(opPrefix(c) + text);
  }

  /// Makes an empty tensor of a shape, refusing huge ones.
  bool make(const OpContext &c, DType dtype, IntShape shape, Tensor &out) {
    if (!checkSize(shape))
      return opFail(c, "a result of shape " + shapeText(shape) +
                           " exceeds the interpreter's limit of " +
                           std::to_string(maxInterpreterElements) +
                           " elements");
    out.dtype = dtype;
    out.data.assign(product(shape), 0.0);
    out.shape = std::move(shape);
    return true;
  }

  bool resolveDim(const OpContext &c, const Dim &d, int64_t &size) {
    if (d.isKnown()) {
      size = d.getSize();
      return true;
    }
    auto it = c.frame.sizes.find(d.getName().str());
    if (it == c.frame.sizes.end())
      return opFail(c, "size '" + d.getName().str() + "' is not bound");
    size = it->second;
    return true;
  }

  bool resolveShape(const OpContext &c, llvm::ArrayRef<Dim> dims,
                    IntShape &out) {
    out.clear();
    for (const Dim &d : dims) {
      int64_t size = 0;
      if (!resolveDim(c, d, size))
        return false;
      out.push_back(size);
    }
    return true;
  }

  bool runOp(Frame &frame, const Op &op, unsigned depth) {
    OpContext c{frame, op, {}};
    for (const Value *v : op.getOperands()) {
      const Tensor *t = frame.lookup(v);
      if (!t)
        return opFail(c, "an operand is not defined before the op");
      c.operands.push_back(t);
    }
    std::vector<Tensor> results;
    if (!evaluate(c, results, depth))
      return false;
    if (results.size() != op.getNumResults())
      return opFail(c, "produced " + std::to_string(results.size()) +
                           " result(s), but the op has " +
                           std::to_string(op.getNumResults()));
    for (size_t i = 0; i < results.size(); ++i) {
      if (!checkResult(c, i, results[i]))
        return false;
      hold(frame, op.getResult(i), std::move(results[i]));
    }
    return true;
  }

  /// A computed result must have its declared type (with the size names
  /// bound in this call).
  bool checkResult(const OpContext &c, size_t index, const Tensor &t) {
    const TensorType &type = c.op.getResult(index)->getType();
    bool fits = t.dtype == type.dtype && t.shape.size() == type.getRank();
    for (size_t d = 0; fits && d < t.shape.size(); ++d) {
      const Dim &dim = type.shape[d];
      if (dim.isKnown()) {
        fits = dim.getSize() == t.shape[d];
        continue;
      }
      auto it = c.frame.sizes.find(dim.getName().str());
      fits = it == c.frame.sizes.end() || it->second == t.shape[d];
    }
    if (fits)
      return true;
    return opFail(c, "result " + std::to_string(index) + " has shape " +
                         shapeText(t.shape) + " and element type " +
                         dtypeName(t.dtype).str() +
                         ", but its declared type is " + type.str());
  }

  bool evaluate(OpContext &c, std::vector<Tensor> &out, unsigned depth) {
    OpKind kind = c.op.getKind();
    if (c.op.getInfo().has(Elementwise))
      return evalElementwise(c, out);
    switch (kind) {
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max:
    case OpKind::LogSumExp:
      return evalReduce(c, out);
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
      return evalSoftmax(c, out);
    case OpKind::MatMul:
      return evalMatMul(c, out);
    case OpKind::Transpose:
      return evalTranspose(c, out);
    case OpKind::Reshape:
      return evalReshape(c, out);
    case OpKind::BroadcastTo:
      return evalBroadcastTo(c, out);
    case OpKind::Stack:
      return evalStack(c, out);
    case OpKind::Unstack:
      return evalUnstack(c, out);
    case OpKind::Concat:
      return evalConcat(c, out);
    case OpKind::Split:
      return evalSplit(c, out);
    case OpKind::Slice:
    case OpKind::Pad:
      return evalSliceOrPad(c, out);
    case OpKind::OneHot:
      return evalOneHot(c, out);
    case OpKind::Take:
      return evalTake(c, out);
    case OpKind::ScatterAdd:
      return evalScatterAdd(c, out);
    case OpKind::For:
      return evalFor(c, out, depth);
    case OpKind::If:
      return evalIf(c, out, depth);
    case OpKind::SoftmaxCrossEntropy:
      return evalSoftmaxCrossEntropy(c, out);
    case OpKind::Constant:
      return evalConstant(c, out);
    case OpKind::Call:
      return evalCall(c, out, depth);
    case OpKind::ExternCall:
      return evalExternCall(c, out);
    default:
      break;
    }
    return opFail(c, "the interpreter does not know this op");
  }

  bool checkArity(const OpContext &c, size_t n) {
    if (c.operands.size() == n)
      return true;
    return opFail(c, "expected " + std::to_string(n) + " operand(s), got " +
                         std::to_string(c.operands.size()));
  }

  /// The element type of result `i` as declared.
  DType resultDType(const OpContext &c, unsigned i = 0) {
    return c.op.getResult(i)->getType().dtype;
  }

  bool checkResultCount(const OpContext &c, size_t n) {
    if (c.op.getNumResults() == n)
      return true;
    return opFail(c, "expected " + std::to_string(n) + " result(s), has " +
                         std::to_string(c.op.getNumResults()));
  }

  // z[i] = f(x[i'], y[i''], ...) with NumPy broadcasting, where f is the
  // op's scalar expansion in the op table (gradc/Ops/Scalar.h): the same
  // tree the loop IR's legalisation translates, evaluated with the same
  // primitives and gradc/Math.h functions as the loop evaluator. The
  // expansion computes in the type of the last operand (select's values).
  bool evalElementwise(OpContext &c, std::vector<Tensor> &out) {
    const OpInfo &info = c.op.getInfo();
    if (!info.expand)
      return opFail(c, "the op table has no scalar expansion for this op");
    if (c.operands.empty() || !checkResultCount(c, 1))
      return false;
    IntShape shape;
    for (const Tensor *t : c.operands) {
      IntShape next;
      if (!broadcastShape(shape, t->shape, next)) {
        std::string shapes;
        for (size_t i = 0; i < c.operands.size(); ++i)
          shapes += (i == 0                       ? ""
                     : i + 1 == c.operands.size() ? " and "
                                                  : ", ") +
                    shapeText(c.operands[i]->shape);
        return opFail(c, "cannot broadcast shapes " + shapes);
      }
      shape = std::move(next);
    }
    out.resize(1);
    Tensor &z = out[0];
    if (!make(c, resultDType(c), shape, z))
      return false;
    ScalarNodePtr f = info.expand(fromDType(c.operands.back()->dtype));
    std::vector<IntShape> strides;
    for (const Tensor *t : c.operands)
      strides.push_back(broadcastStrides(t->shape, shape));
    llvm::SmallVector<double, 3> elements(c.operands.size());
    bool divByZero = false;
    stridedLoop(shape, strides, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
      for (size_t k = 0; k < elements.size(); ++k)
        elements[k] = c.operands[k]->data[at[k]];
      z.data[i] = roundToDType(z.dtype, evalScalar(*f, elements, divByZero));
    });
    if (divByZero)
      return opFail(c, "integer division by zero");
    return true;
  }

  /// The reduced axes of a reduction, sorted, resolved and checked.
  bool reductionAxes(const OpContext &c, int64_t rank,
                     std::vector<bool> &reduced) {
    reduced.assign(rank, false);
    const AttrValue *attr = c.op.getAttrs().find("axis");
    std::vector<int64_t> axes;
    if (!attr) {
      reduced.assign(rank, true);
      return true;
    }
    if (const int64_t *one = std::get_if<int64_t>(attr))
      axes.push_back(*one);
    else if (const auto *many = std::get_if<std::vector<int64_t>>(attr))
      axes = *many;
    for (int64_t axis : axes) {
      int64_t a = axis;
      if (!resolveAxis(a, rank))
        return opFail(c, "axis " + std::to_string(axis) +
                             " is out of range for rank " +
                             std::to_string(rank));
      reduced[a] = true;
    }
    return true;
  }

  static bool keepDims(const OpContext &c) {
    const AttrValue *attr = c.op.getAttrs().find("keepdims");
    const bool *b = attr ? std::get_if<bool>(attr) : nullptr;
    return b && *b;
  }

  // sum, mean, max, logsumexp over `axis` (all axes when absent). The
  // input is walked once in row-major order, so each output adds its
  // inputs in increasing flat index: into one accumulator, or, for a
  // float sum when the last axis is reduced, into the lanes of a LaneSum
  // by the index along that axis (docs/IR.md, "Summation order").
  //   mean      = sum / (number of reduced elements)
  //   max       = the largest element; NaN if any is NaN. The max of
  //               nothing is its identity: -inf, or the lowest i32
  //               (TensorFlow's reduce_max does the same)
  //   logsumexp = m + log(sum(exp(x - m))) with m = max; -inf when empty
  //               (log 0), consistent with max
  bool evalReduce(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1) || !checkResultCount(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    int64_t rank = x.shape.size();
    std::vector<bool> reduced;
    if (!reductionAxes(c, rank, reduced))
      return false;
    IntShape kept(rank), shape;
    int64_t count = 1;
    for (int64_t i = 0; i < rank; ++i) {
      kept[i] = reduced[i] ? 1 : x.shape[i];
      if (reduced[i])
        count *= x.shape[i];
      if (!reduced[i] || keepDims(c))
        shape.push_back(kept[i]);
    }
    int64_t n = product(kept);
    OpKind kind = c.op.getKind();
    std::vector<IntShape> strides = {broadcastStrides(kept, x.shape)};
    bool isInt = x.dtype == DType::I32;
    std::vector<double> acc(n, 0.0);
    std::vector<uint64_t> intAcc(n, 0);
    bool lanes = !isInt && rank > 0 && reduced[rank - 1];
    bool inF32 = accumulatesInF32(c.op);
    std::vector<LaneSum> laneAcc(lanes ? n : 0, LaneSum(inF32));
    int64_t last = rank > 0 ? x.shape[rank - 1] : 1;
    // The identity of max, which is also what reducing nothing gives.
    double lowest =
        isInt ? double(std::numeric_limits<int32_t>::min()) : -INFINITY;
    std::vector<double> maxima(n, lowest);
    bool needsMax = kind == OpKind::Max || kind == OpKind::LogSumExp;
    if (needsMax)
      stridedLoop(x.shape, strides, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
        maxima[at[0]] = maxValue(maxima[at[0]], x.data[i]);
      });
    if (kind == OpKind::Sum || kind == OpKind::Mean) {
      stridedLoop(x.shape, strides, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
        if (isInt)
          intAcc[at[0]] += asU64(x.data[i]);
        else if (lanes)
          laneAcc[at[0]].add(i % last, x.data[i]);
        else
          acc[at[0]] = addTerm(inF32, acc[at[0]], x.data[i]);
      });
    }
    if (kind == OpKind::LogSumExp) {
      stridedLoop(x.shape, strides, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
        double m = maxima[at[0]];
        if (!std::isfinite(m))
          return;
        double e = expShifted(x.dtype, x.data[i], m);
        if (lanes)
          laneAcc[at[0]].add(i % last, e);
        else
          acc[at[0]] = addTerm(inF32, acc[at[0]], e);
      });
    }
    if (lanes)
      for (int64_t j = 0; j < n; ++j)
        acc[j] = laneAcc[j].total();
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    for (int64_t j = 0; j < n; ++j) {
      double v = 0;
      switch (kind) {
      case OpKind::Sum:
        v = isInt ? wrap32(intAcc[j]) : acc[j];
        break;
      case OpKind::Mean:
        v = acc[j] / double(count);
        break;
      case OpKind::Max:
        v = maxima[j];
        break;
      default: {
        // logsumexp: an infinite or NaN maximum is the answer itself.
        double m = maxima[j];
        v = std::isfinite(m) ? m + std::log(acc[j]) : m;
        break;
      }
      }
      y.data[j] = roundToDType(y.dtype, v);
    }
    return true;
  }

  bool singleAxis(const OpContext &c, int64_t rank, int64_t deflt,
                  int64_t &axis) {
    const AttrValue *attr = c.op.getAttrs().find("axis");
    const int64_t *v = attr ? std::get_if<int64_t>(attr) : nullptr;
    axis = v ? *v : deflt;
    int64_t original = axis;
    if (!resolveAxis(axis, rank))
      return opFail(c, "axis " + std::to_string(original) +
                           " is out of range for rank " + std::to_string(rank));
    return true;
  }

  /// e^(x - m), the term of a row's sum (docs/IR.md, "Rows"): for f32
  /// data the f32 difference and gradc/Math.h's f32 exp, as the loop IR
  /// computes it (vectorised); for f64 data in f64.
  static double expShifted(DType dtype, double x, double m) {
    if (dtype == DType::F32)
      return double(gradc::exp(float(x) - float(m)));
    return std::exp(x - m);
  }

  // Along `axis`, for each lane x[0..n): m = max, e_k = exp(x_k - m)
  // (expShifted), s = sum e_k (a LaneSum along the last axis, else in k
  // order); softmax = e_k / s, log_softmax = x_k - m - log(s).
  bool evalSoftmax(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1) || !checkResultCount(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    int64_t rank = x.shape.size(), axis = 0;
    if (!singleAxis(c, rank, -1, axis))
      return false;
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), x.shape, y))
      return false;
    int64_t n = x.shape[axis];
    int64_t outer = product(llvm::ArrayRef(x.shape).take_front(axis));
    int64_t inner = product(llvm::ArrayRef(x.shape).drop_front(axis + 1));
    bool isLog = c.op.getKind() == OpKind::LogSoftmax;
    bool inF32 = accumulatesInF32(c.op);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t base = o * n * inner + i;
        double m = -INFINITY;
        for (int64_t k = 0; k < n; ++k)
          m = maxValue(m, x.data[base + k * inner]);
        double s = 0;
        if (axis == rank - 1) {
          LaneSum lanes(inF32);
          for (int64_t k = 0; k < n; ++k)
            lanes.add(k, expShifted(x.dtype, x.data[base + k], m));
          s = lanes.total();
        } else {
          for (int64_t k = 0; k < n; ++k)
            s = addTerm(inF32, s,
                        expShifted(x.dtype, x.data[base + k * inner], m));
        }
        for (int64_t k = 0; k < n; ++k) {
          double xk = x.data[base + k * inner];
          double v =
              isLog ? xk - m - std::log(s) : expShifted(x.dtype, xk, m) / s;
          y.data[base + k * inner] = roundToDType(y.dtype, v);
        }
      }
    }
    return true;
  }

  // NumPy matmul: a vector operand is promoted to a matrix ([K] -> [1, K]
  // on the left, [K, 1] on the right) and the added axis is removed from
  // the result; leading (batch) axes broadcast. Each element is
  // sum_k a[m, k] * b[k, n], added in increasing k.
  bool evalMatMul(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 2) || !checkResultCount(c, 1))
      return false;
    const Tensor &a = *c.operands[0], &b = *c.operands[1];
    if (a.shape.empty() || b.shape.empty())
      return opFail(c, "needs operands of rank at least 1");
    IntShape as = a.shape, bs = b.shape;
    bool aVector = as.size() == 1, bVector = bs.size() == 1;
    if (aVector)
      as.insert(as.begin(), 1);
    if (bVector)
      bs.push_back(1);
    int64_t m = as[as.size() - 2], k = as.back();
    int64_t k2 = bs[bs.size() - 2], n = bs.back();
    IntShape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
    IntShape batch;
    if (k != k2 || !broadcastShape(aBatch, bBatch, batch))
      return opFail(c, "cannot matmul tensors of shape " + shapeText(a.shape) +
                           " and " + shapeText(b.shape));
    IntShape shape = batch;
    if (!aVector)
      shape.push_back(m);
    if (!bVector)
      shape.push_back(n);
    out.resize(1);
    Tensor &z = out[0];
    if (!make(c, resultDType(c), shape, z))
      return false;
    bool isInt = a.dtype == DType::I32;
    bool inF32 = accumulatesInF32(c.op);
    int64_t aMatrix = m * k, bMatrix = k * n, zMatrix = m * n;
    // Batch offsets count whole matrices.
    std::vector<IntShape> strides = {broadcastStrides(aBatch, batch),
                                     broadcastStrides(bBatch, batch)};
    stridedLoop(batch, strides, [&](int64_t bi, llvm::ArrayRef<int64_t> at) {
      const double *pa = a.data.data() + at[0] * aMatrix;
      const double *pb = b.data.data() + at[1] * bMatrix;
      double *pz = z.data.data() + bi * zMatrix;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          uint64_t intSum = 0;
          for (int64_t p = 0; p < k; ++p) {
            if (isInt)
              intSum += asU64(pa[i * k + p]) * asU64(pb[p * n + j]);
            else if (inF32) // the f32 product (exact in f64, rounded)
              sum = addTerm(true, sum, float(pa[i * k + p] * pb[p * n + j]));
            else
              sum += pa[i * k + p] * pb[p * n + j];
          }
          pz[i * n + j] = roundToDType(z.dtype, isInt ? wrap32(intSum) : sum);
        }
      }
    });
    return true;
  }

  // y[i_0, ..., i_r] = x[j] with j[perm[d]] = i_d (y.shape[d] =
  // x.shape[perm[d]]); no perm reverses the axes.
  bool evalTranspose(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1) || !checkResultCount(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    int64_t rank = x.shape.size();
    std::vector<int64_t> perm;
    const AttrValue *attr = c.op.getAttrs().find("perm");
    if (const auto *p =
            attr ? std::get_if<std::vector<int64_t>>(attr) : nullptr)
      perm = *p;
    else
      for (int64_t i = rank - 1; i >= 0; --i)
        perm.push_back(i);
    std::vector<bool> seen(rank, false);
    bool valid = int64_t(perm.size()) == rank;
    for (int64_t &p : perm) {
      valid = valid && resolveAxis(p, rank) && !seen[p];
      if (valid)
        seen[p] = true;
    }
    if (!valid)
      return opFail(c, "'perm' is not a permutation of the axes of shape " +
                           shapeText(x.shape));
    IntShape shape, inStrides = rowMajorStrides(x.shape), strides;
    for (int64_t p : perm) {
      shape.push_back(x.shape[p]);
      strides.push_back(inStrides[p]);
    }
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    stridedLoop(shape, {strides}, [&](int64_t i, llvm::ArrayRef<int64_t> at) {
      y.data[i] = x.data[at[0]];
    });
    return true;
  }

  // Same elements in the same row-major order, new shape; one -1 is
  // inferred.
  bool evalReshape(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1) || !checkResultCount(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    const AttrValue *attr = c.op.getAttrs().find("shape");
    const Shape *target = attr ? std::get_if<Shape>(attr) : nullptr;
    if (!target)
      return opFail(c, "has no 'shape'");
    IntShape shape;
    if (!resolveShape(c, *target, shape))
      return false;
    int64_t known = 1, inferred = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == -1 && inferred == -1)
        inferred = i;
      else if (shape[i] < 0)
        return opFail(c, "invalid target shape " + shapeText(shape));
      else
        known *= shape[i];
    }
    if (inferred != -1) {
      if (known == 0 || x.numElements() % known != 0)
        return opFail(c, "cannot infer the -1 in a reshape of " +
                             shapeText(x.shape) + " to " + shapeText(shape));
      shape[inferred] = x.numElements() / known;
    }
    if (product(shape) != x.numElements())
      return opFail(c, "cannot reshape " + shapeText(x.shape) + " to " +
                           shapeText(shape));
    out.resize(1);
    out[0] = x;
    out[0].shape = shape;
    out[0].dtype = resultDType(c);
    return true;
  }

  // NumPy broadcast of x to `shape`.
  bool evalBroadcastTo(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1) || !checkResultCount(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    const AttrValue *attr = c.op.getAttrs().find("shape");
    const Shape *target = attr ? std::get_if<Shape>(attr) : nullptr;
    IntShape shape, check;
    if (!target)
      return opFail(c, "has no 'shape'");
    if (!resolveShape(c, *target, shape))
      return false;
    if (!broadcastShape(x.shape, shape, check) || check != shape)
      return opFail(c, "cannot broadcast " + shapeText(x.shape) + " to shape " +
                           shapeText(shape));
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    stridedLoop(shape, {broadcastStrides(x.shape, shape)},
                [&](int64_t i, llvm::ArrayRef<int64_t> at) {
                  y.data[i] = x.data[at[0]];
                });
    return true;
  }

  /// outer = product of the axes before `axis`, inner = after it.
  static void splitAround(llvm::ArrayRef<int64_t> shape, int64_t axis,
                          int64_t &outer, int64_t &inner) {
    outer = product(shape.take_front(axis));
    inner = product(shape.drop_front(axis + 1));
  }

  // y[..., k, ...] = xs[k] with the new axis at `axis`.
  bool evalStack(OpContext &c, std::vector<Tensor> &out) {
    if (!checkResultCount(c, 1))
      return false;
    if (c.operands.empty())
      return opFail(c, "needs at least one operand");
    const Tensor &first = *c.operands[0];
    for (const Tensor *t : c.operands)
      if (t->shape != first.shape)
        return opFail(c, "operands have shapes " + shapeText(first.shape) +
                             " and " + shapeText(t->shape));
    int64_t axis = 0;
    if (!singleAxis(c, first.shape.size() + 1, 0, axis))
      return false;
    IntShape shape = first.shape;
    int64_t n = c.operands.size();
    shape.insert(shape.begin() + axis, n);
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    int64_t outer, inner;
    splitAround(shape, axis, outer, inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < n; ++k)
        std::copy_n(c.operands[k]->data.begin() + o * inner, inner,
                    y.data.begin() + (o * n + k) * inner);
    return true;
  }

  // ys[k] = x[..., k, ...] along `axis`.
  bool evalUnstack(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    if (x.shape.empty())
      return opFail(c, "needs a tensor of rank at least 1");
    int64_t axis = 0;
    if (!singleAxis(c, x.shape.size(), 0, axis))
      return false;
    int64_t n = x.shape[axis];
    if (!checkResultCount(c, n))
      return false;
    IntShape part = x.shape;
    part.erase(part.begin() + axis);
    int64_t outer, inner;
    splitAround(x.shape, axis, outer, inner);
    out.resize(n);
    for (int64_t k = 0; k < n; ++k) {
      if (!make(c, resultDType(c, k), part, out[k]))
        return false;
      for (int64_t o = 0; o < outer; ++o)
        std::copy_n(x.data.begin() + (o * n + k) * inner, inner,
                    out[k].data.begin() + o * inner);
    }
    return true;
  }

  // Joins the operands along an existing axis, in order.
  bool evalConcat(OpContext &c, std::vector<Tensor> &out) {
    if (!checkResultCount(c, 1))
      return false;
    if (c.operands.empty())
      return opFail(c, "needs at least one operand");
    const Tensor &first = *c.operands[0];
    if (first.shape.empty())
      return opFail(c, "needs tensors of rank at least 1");
    int64_t axis = 0;
    if (!singleAxis(c, first.shape.size(), 0, axis))
      return false;
    IntShape shape = first.shape;
    shape[axis] = 0;
    for (const Tensor *t : c.operands) {
      bool fits = t->shape.size() == first.shape.size();
      for (size_t d = 0; fits && d < shape.size(); ++d)
        fits = int64_t(d) == axis || t->shape[d] == first.shape[d];
      if (!fits)
        return opFail(c, "cannot concat shapes " + shapeText(first.shape) +
                             " and " + shapeText(t->shape) + " along axis " +
                             std::to_string(axis));
      shape[axis] += t->shape[axis];
    }
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    int64_t outer, inner;
    splitAround(shape, axis, outer, inner);
    int64_t rowLength = shape[axis] * inner, offset = 0;
    for (const Tensor *t : c.operands) {
      int64_t block = t->shape[axis] * inner;
      for (int64_t o = 0; o < outer; ++o)
        std::copy_n(t->data.begin() + o * block, block,
                    y.data.begin() + o * rowLength + offset);
      offset += block;
    }
    return true;
  }

  // Cuts x along `axis` into consecutive parts of the given sizes.
  bool evalSplit(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    if (x.shape.empty())
      return opFail(c, "needs a tensor of rank at least 1");
    int64_t axis = 0;
    if (!singleAxis(c, x.shape.size(), 0, axis))
      return false;
    const AttrValue *attr = c.op.getAttrs().find("sizes");
    const Shape *sizeDims = attr ? std::get_if<Shape>(attr) : nullptr;
    IntShape sizes;
    if (!sizeDims)
      return opFail(c, "has no 'sizes'");
    if (!resolveShape(c, *sizeDims, sizes))
      return false;
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0)
        return opFail(c, "invalid sizes " + shapeText(sizes));
      total += s;
    }
    if (total != x.shape[axis])
      return opFail(c, "sizes " + shapeText(sizes) + " do not add up to " +
                           std::to_string(x.shape[axis]));
    if (!checkResultCount(c, sizes.size()))
      return false;
    int64_t outer, inner;
    splitAround(x.shape, axis, outer, inner);
    int64_t rowLength = x.shape[axis] * inner, offset = 0;
    out.resize(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      IntShape part = x.shape;
      part[axis] = sizes[k];
      if (!make(c, resultDType(c, k), part, out[k]))
        return false;
      int64_t block = sizes[k] * inner;
      for (int64_t o = 0; o < outer; ++o)
        std::copy_n(x.data.begin() + o * rowLength + offset, block,
                    out[k].data.begin() + o * block);
      offset += block;
    }
    return true;
  }

  // y[..., j] = (indices[...] == j) as f32; an index outside [0, depth)
  // gives a row of zeros.
  /// Splits `shape` at `axis` into the elements before it, its size and
  /// the elements after it.
  static void splitAt(llvm::ArrayRef<int64_t> shape, int64_t axis,
                      int64_t &outer, int64_t &inner) {
    outer = product(shape.take_front(axis));
    inner = product(shape.drop_front(axis + 1));
  }

  /// An index must lie in [0, n): anything else is the status
  /// GRADC_ERROR_INDEX of docs/ABI.md, never a read out of bounds.
  bool checkIndex(const OpContext &c, double index, int64_t n, int64_t axis) {
    if (index >= 0 && index < double(n))
      return true;
    return opFail(c, "index " + std::to_string(int64_t(index)) +
                         " is out of range [0, " + std::to_string(n) +
                         ") for axis " + std::to_string(axis) +
                         " (GRADC_ERROR_INDEX)");
  }

  // slice(x, axis, start, size): y[p, i, q] = x[p, start + i, q] for i <
  // size; pad(x, axis, start, size): zeros of `size` along axis with
  // z[p, start + i, q] = x[p, i, q]. A part that does not fit its whole
  // (a slice bound past a size name's value) is GRADC_ERROR_INDEX.
  bool evalSliceOrPad(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1) || !checkResultCount(c, 1))
      return false;
    const Tensor &x = *c.operands[0];
    const AttrList &attrs = c.op.getAttrs();
    int64_t axis = attrs.getInt("axis"), start = attrs.getInt("start"), n = 0;
    if (axis < 0 || axis >= int64_t(x.shape.size()))
      return opFail(c, "axis out of range");
    if (!resolveDim(c, attrs.getShape("size").front(), n))
      return false;
    bool isSlice = c.op.getKind() == OpKind::Slice;
    int64_t part = isSlice ? n : x.shape[axis];
    int64_t whole = isSlice ? x.shape[axis] : n;
    if (start < 0 || part < 0 || start > whole || part > whole - start)
      return opFail(c, "elements [" + std::to_string(start) + ", " +
                           std::to_string(start + part) +
                           ") are out of range [0, " + std::to_string(whole) +
                           ") for axis " + std::to_string(axis) +
                           " (GRADC_ERROR_INDEX)");
    IntShape shape = x.shape;
    shape[axis] = n;
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    int64_t outer, inner;
    splitAt(x.shape, axis, outer, inner);
    int64_t block = part * inner;
    for (int64_t o = 0; o < outer; ++o) {
      int64_t wholeAt = (o * whole + start) * inner, partAt = o * block;
      if (isSlice)
        std::copy_n(x.data.begin() + wholeAt, block, y.data.begin() + partAt);
      else
        std::copy_n(x.data.begin() + partAt, block, y.data.begin() + wholeAt);
    }
    return true;
  }

  // take(table, idx, axis): y[p, i, q] = table[p, idx[i], q], where p runs
  // over the axes before `axis`, i over idx's shape and q over the rest.
  bool evalTake(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 2) || !checkResultCount(c, 1))
      return false;
    const Tensor &table = *c.operands[0], &idx = *c.operands[1];
    int64_t axis = c.op.getAttrs().getInt("axis");
    if (axis < 0 || axis >= int64_t(table.shape.size()))
      return opFail(c, "axis out of range");
    int64_t outer, inner, n = table.shape[axis];
    splitAt(table.shape, axis, outer, inner);
    IntShape shape(table.shape.begin(), table.shape.begin() + axis);
    shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
    shape.insert(shape.end(), table.shape.begin() + axis + 1,
                 table.shape.end());
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    int64_t count = idx.numElements();
    for (int64_t i = 0; i < count; ++i)
      if (!checkIndex(c, idx.data[i], n, axis))
        return false;
    for (int64_t p = 0; p < outer; ++p)
      for (int64_t i = 0; i < count; ++i) {
        int64_t row = int64_t(idx.data[i]);
        const double *from = table.data.data() + (p * n + row) * inner;
        double *to = y.data.data() + (p * count + i) * inner;
        std::copy(from, from + inner, to);
      }
    return true;
  }

  // scatter_add(src, idx, axis, size) = z with z[p, idx[i], q] += src[p, i,
  // q], zeros elsewhere: the adjoint of take.
  bool evalScatterAdd(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 2) || !checkResultCount(c, 1))
      return false;
    const Tensor &src = *c.operands[0], &idx = *c.operands[1];
    const AttrList &attrs = c.op.getAttrs();
    int64_t axis = attrs.getInt("axis"), n = 0;
    if (!resolveDim(c, attrs.getShape("size").front(), n))
      return false;
    int64_t rank = idx.shape.size();
    if (axis < 0 || axis + rank > int64_t(src.shape.size()))
      return opFail(c, "axis out of range");
    IntShape shape(src.shape.begin(), src.shape.begin() + axis);
    shape.push_back(n);
    shape.insert(shape.end(), src.shape.begin() + axis + rank, src.shape.end());
    out.resize(1);
    Tensor &z = out[0];
    if (!make(c, resultDType(c), shape, z))
      return false;
    int64_t count = idx.numElements();
    int64_t outer =
        product(llvm::ArrayRef<int64_t>(src.shape).take_front(axis));
    int64_t inner =
        product(llvm::ArrayRef<int64_t>(src.shape).drop_front(axis + rank));
    for (int64_t i = 0; i < count; ++i)
      if (!checkIndex(c, idx.data[i], n, axis))
        return false;
    for (int64_t p = 0; p < outer; ++p)
      for (int64_t i = 0; i < count; ++i) {
        int64_t row = int64_t(idx.data[i]);
        const double *from = src.data.data() + (p * count + i) * inner;
        double *to = z.data.data() + (p * n + row) * inner;
        for (int64_t q = 0; q < inner; ++q)
          to[q] = roundToDType(z.dtype, to[q] + from[q]);
      }
    return true;
  }

  // for: carries = operands[0, k); for each index t of the range (upwards,
  // or downwards when `reverse`), (carries, ys) = body(t, carries,
  // invariants); the results are the last carries and each y stacked at
  // position t - start.
  bool evalFor(OpContext &c, std::vector<Tensor> &out, unsigned depth) {
    const AttrList &attrs = c.op.getAttrs();
    if (attrs.has("recompute"))
      return evalCheckpointedFor(c, out, depth);
    const Function *body = module.lookup(attrs.getString("body"));
    if (!body)
      return opFail(c, "runs unknown body function '" +
                           attrs.getString("body") + "'");
    int64_t start = attrs.getInt("start"), trip = 0;
    if (!resolveDim(c, attrs.getShape("trip").front(), trip))
      return false;
    size_t k = attrs.getInt("carries");
    bool reverse = attrs.has("reverse") && attrs.getBool("reverse");
    size_t numOutputs = c.op.getNumResults() - k;
    // The body reads the index, the carries and the other operands in
    // place; only the carries are the loop's own.
    Tensor index;
    index.dtype = DType::I32;
    index.data = {0};
    std::vector<Tensor> carries(k);
    std::vector<const Tensor *> args(1 + c.operands.size());
    args[0] = &index;
    for (size_t i = 0; i < c.operands.size(); ++i) {
      if (i < k) {
        carries[i] = *c.operands[i];
        stats.copiedBytes += bytesOf(carries[i]);
      }
      args[i + 1] = i < k ? &carries[i] : c.operands[i];
    }
    out.assign(c.op.getNumResults(), Tensor());
    std::vector<Tensor> step;
    // The stacked results being built count until runOp holds them.
    int64_t stackedBytes = 0;
    for (int64_t i = 0; i < trip; ++i) {
      int64_t pos = reverse ? trip - 1 - i : i;
      index.data[0] = double(start + pos);
      if (!callFunction(*body, args, step, depth + 1))
        return false;
      for (size_t j = 0; j < k; ++j)
        carries[j] = std::move(step[j]);
      for (size_t o = 0; o < numOutputs; ++o) {
        const Tensor &y = step[k + o];
        Tensor &stacked = out[k + o];
        if (stacked.data.empty() && stacked.shape.empty()) {
          IntShape shape = y.shape;
          shape.insert(shape.begin(), trip);
          if (!make(c, y.dtype, shape, stacked))
            return false;
          stackedBytes += bytesOf(stacked);
          account(bytesOf(stacked));
        }
        std::copy(y.data.begin(), y.data.end(),
                  stacked.data.begin() + pos * y.numElements());
      }
    }
    for (size_t j = 0; j < k; ++j)
      out[j] = std::move(carries[j]);
    account(-stackedBytes);
    // A loop that never runs stacks nothing: the outputs' declared types
    // give their shapes.
    for (size_t o = 0; o < numOutputs && trip == 0; ++o) {
      const TensorType &type = c.op.getResult(k + o)->getType();
      IntShape shape;
      for (const Dim &d : type.shape) {
        int64_t size = 0;
        if (!resolveDim(c, d, size))
          return false;
        shape.push_back(size);
      }
      if (!make(c, type.dtype, shape, out[k + o]))
        return false;
    }
    return true;
  }

  // if: the function `then` (operand 0 is true) or `else` on the other
  // operands; only that branch runs.
  bool evalIf(OpContext &c, std::vector<Tensor> &out, unsigned depth) {
    if (c.operands.empty() || c.operands[0]->data.size() != 1)
      return opFail(c, "needs a bool scalar as its first operand");
    const std::string &name = c.op.getAttrs().getString(
        c.operands[0]->data[0] != 0 ? "then" : "else");
    const Function *branch = module.lookup(name);
    if (!branch)
      return opFail(c, "runs unknown branch function '" + name + "'");
    llvm::ArrayRef<const Tensor *> args(c.operands);
    return callFunction(*branch, args.drop_front(), out, depth + 1);
  }

  /// The state of one checkpointed reverse loop (evalCheckpointedFor).
  struct Checkpointed {
    const Function *forward = nullptr, *reverse = nullptr;
    int64_t start = 0, trip = 0;
    /// Whether the loop differentiated ran its indices downwards.
    bool forwardDown = false;
    size_t carried = 0, k = 0;
    /// (t, carries, invariants) for the forward body; (t, adjoints, the
    /// step's carries, invariants, cotangents) for the reverse body.
    std::vector<Tensor> fwdArgs, revArgs;
    unsigned depth = 0;
    int64_t held = 0;
  };
  using Carries = std::vector<Tensor>;

  /// The index at which the differentiated loop ran its step `i`.
  static double stepIndex(const Checkpointed &x, int64_t i) {
    return double(x.start + (x.forwardDown ? x.trip - 1 - i : i));
  }

  /// Counts a set of carries kept (`sign` 1) or dropped (-1).
  void keep(Checkpointed &x, const Carries &carries, int sign) {
    x.held += sign;
    stats.peakCheckpointCarries = std::max(stats.peakCheckpointCarries, x.held);
    int64_t bytes = 0;
    for (const Tensor &t : carries)
      bytes += bytesOf(t);
    account(sign * bytes);
  }

  /// Runs forward step `i` on `carries`, replacing them by the next ones.
  bool advance(Checkpointed &x, Carries &carries, int64_t i) {
    x.fwdArgs[0].data[0] = stepIndex(x, i);
    for (size_t j = 0; j < x.k; ++j)
      x.fwdArgs[1 + j] = std::move(carries[j]);
    std::vector<Tensor> step;
    if (!callFunction(*x.forward, x.fwdArgs, step, x.depth))
      return false;
    for (size_t j = 0; j < x.k; ++j)
      carries[j] = std::move(step[j]);
    ++stats.recomputedSteps;
    return true;
  }

  /// Runs the reverse body for step `i`, whose carries are `carries`.
  bool adjoint(Checkpointed &x, const Carries &carries, int64_t i) {
    x.revArgs[0].data[0] = stepIndex(x, i);
    for (size_t j = 0; j < x.k; ++j)
      x.revArgs[1 + x.carried + j] = carries[j];
    std::vector<Tensor> step;
    if (!callFunction(*x.reverse, x.revArgs, step, x.depth))
      return false;
    for (size_t j = 0; j < x.carried; ++j)
      x.revArgs[1 + j] = std::move(step[j]);
    return true;
  }

  /// Every K-th step: the forward sweep keeps the carries at steps 0, K,
  /// 2K, ...; the reverse sweep reruns each segment from its snapshot,
  /// keeping its (at most K) carries, and reverses it. Peak: ceil(T/K) + K
  /// sets of carries; 2·sqrt(T) for K = ceil(sqrt(T)).
  bool reverseEvery(Checkpointed &x, const Carries &initial, int64_t every) {
    int64_t segments = (x.trip + every - 1) / every;
    std::vector<Carries> snapshots;
    Carries carries = initial;
    for (int64_t s = 0; s < segments; ++s) {
      snapshots.push_back(carries);
      keep(x, carries, 1);
      for (int64_t i = s * every; s + 1 < segments && i < (s + 1) * every; ++i)
        if (!advance(x, carries, i))
          return false;
    }
    for (int64_t s = segments - 1; s >= 0; --s) {
      int64_t first = s * every, end = std::min(x.trip, first + every);
      std::vector<Carries> segment;
      segment.push_back(std::move(snapshots.back()));
      snapshots.pop_back();
      for (int64_t i = first; i + 1 < end; ++i) {
        Carries next = segment.back();
        if (!advance(x, next, i))
          return false;
        keep(x, next, 1);
        segment.push_back(std::move(next));
      }
      for (int64_t i = end - 1; i >= first; --i) {
        if (!adjoint(x, segment.back(), i))
          return false;
        keep(x, segment.back(), -1);
        segment.pop_back();
      }
    }
    return true;
  }

  /// C(s + r, s), the most steps that s snapshots reverse when each step
  /// runs forward at most r + 1 times (Griewank's beta), saturated.
  static int64_t binomialSteps(int64_t s, int64_t r) {
    const int64_t cap = int64_t(1) << 40;
    int64_t c = 1;
    for (int64_t i = 1; i <= s; ++i) {
      c = c * (r + i) / i; // C(r + i, i), exact at each step
      if (c >= cap)
        return cap;
    }
    return c;
  }

  /// Binomial checkpointing (Griewank and Walther's revolve, written as a
  /// recursion): reverses steps [i, i + n) from `carries`, the carries at
  /// step i, with `free` more snapshots. With r the fewest repetitions for
  /// which C(free + r, free) >= n, it advances to step i + m, where
  /// m = n - C(free - 1 + r, free - 1) (at least 1), keeps that snapshot,
  /// reverses the right part with one snapshot fewer, drops it, and then
  /// reverses the left part [i, i + m) the same way. Without snapshots it
  /// reruns each step from step i. Peak: free + 2 sets of carries.
  bool reverseBinomial(Checkpointed &x, const Carries &carries, int64_t i,
                       int64_t n, int64_t free) {
    while (n > 0) {
      if (n == 1)
        return adjoint(x, carries, i);
      if (free == 0) {
        for (int64_t j = n - 1; j >= 0; --j) {
          Carries now = carries;
          keep(x, now, 1);
          for (int64_t q = 0; q < j; ++q)
            if (!advance(x, now, i + q))
              return false;
          if (!adjoint(x, now, i + j))
            return false;
          keep(x, now, -1);
        }
        return true;
      }
      int64_t r = 1;
      while (binomialSteps(free, r) < n)
        ++r;
      int64_t m = std::max<int64_t>(1, n - binomialSteps(free - 1, r));
      Carries middle = carries;
      keep(x, middle, 1);
      for (int64_t q = 0; q < m; ++q)
        if (!advance(x, middle, i + q))
          return false;
      if (!reverseBinomial(x, middle, i + m, n - m, free - 1))
        return false;
      keep(x, middle, -1);
      n = m;
    }
    return true;
  }

  // A checkpointed reverse loop (docs/IR.md): like any `for`, but the
  // operands after the carried ones start with the initial carries of the
  // differentiated loop, whose body `recompute` names, and at each step the
  // body receives in their place the carries that loop had at that step.
  // They are recomputed from snapshots: every K-th step (`checkpoint =
  // "every"`) or Griewank's binomial schedule (`"binomial"`, `snapshots`).
  bool evalCheckpointedFor(OpContext &c, std::vector<Tensor> &out,
                           unsigned depth) {
    const AttrList &attrs = c.op.getAttrs();
    Checkpointed x;
    x.forward = module.lookup(attrs.getString("recompute"));
    x.reverse = module.lookup(attrs.getString("body"));
    if (!x.forward || !x.reverse)
      return opFail(c, "runs unknown body function '" +
                           attrs.getString(x.forward ? "body" : "recompute") +
                           "'");
    x.start = attrs.getInt("start");
    if (!resolveDim(c, attrs.getShape("trip").front(), x.trip))
      return false;
    x.forwardDown = !(attrs.has("reverse") && attrs.getBool("reverse"));
    x.carried = attrs.getInt("carries");
    x.k = attrs.getInt("recompute_carries");
    x.depth = depth + 1;
    size_t numFwd = x.forward->getParams().size() - 1; // carries, invariants
    x.revArgs.resize(1 + c.operands.size());
    x.revArgs[0].dtype = DType::I32;
    x.revArgs[0].data = {0};
    for (size_t i = 0; i < c.operands.size(); ++i)
      x.revArgs[i + 1] = *c.operands[i];
    x.fwdArgs.assign(x.revArgs.begin(), x.revArgs.begin() + 1);
    for (size_t i = 0; i < numFwd; ++i)
      x.fwdArgs.push_back(*c.operands[x.carried + i]);
    Carries initial(x.fwdArgs.begin() + 1, x.fwdArgs.begin() + 1 + x.k);

    // The default size: ceil(sqrt(trip)).
    int64_t root = int64_t(std::ceil(std::sqrt(double(x.trip))));
    bool ok = true;
    if (x.trip > 0 && attrs.getString("checkpoint") == "binomial") {
      int64_t snapshots =
          attrs.has("snapshots") ? attrs.getInt("snapshots") : root;
      keep(x, initial, 1);
      // Each snapshot is one level of recursion: at most 10000.
      ok = reverseBinomial(x, initial, 0, x.trip,
                           std::min<int64_t>({snapshots, x.trip, 10000}));
      keep(x, initial, -1);
    } else if (x.trip > 0) {
      int64_t every = attrs.has("every") ? attrs.getInt("every") : root;
      ok = reverseEvery(x, initial, std::max<int64_t>(every, 1));
    }
    if (!ok)
      return false;
    out.assign(x.revArgs.begin() + 1, x.revArgs.begin() + 1 + x.carried);
    return true;
  }

  bool evalOneHot(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 1) || !checkResultCount(c, 1))
      return false;
    const Tensor &indices = *c.operands[0];
    const AttrValue *attr = c.op.getAttrs().find("depth");
    const Shape *depthDims = attr ? std::get_if<Shape>(attr) : nullptr;
    if (!depthDims || depthDims->size() != 1)
      return opFail(c, "needs one 'depth'");
    int64_t depth = 0;
    if (!resolveDim(c, depthDims->front(), depth))
      return false;
    if (depth < 0)
      return opFail(c, "invalid depth " + std::to_string(depth));
    IntShape shape = indices.shape;
    shape.push_back(depth);
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), shape, y))
      return false;
    for (size_t i = 0; i < indices.data.size(); ++i) {
      double index = indices.data[i];
      if (index >= 0 && index < double(depth))
        y.data[i * depth + int64_t(index)] = 1;
    }
    return true;
  }

  // loss[r] = logsumexp(logits[r, :]) - logits[r, labels[r]] for every
  // row r (its sum a LaneSum); a label outside [0, C) is a run-time error.
  bool evalSoftmaxCrossEntropy(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 2) || !checkResultCount(c, 1))
      return false;
    const Tensor &logits = *c.operands[0], &labels = *c.operands[1];
    if (logits.shape.empty())
      return opFail(c, "needs logits of rank at least 1");
    IntShape rows(logits.shape.begin(), logits.shape.end() - 1);
    if (labels.shape != rows)
      return opFail(c, "labels of shape " + shapeText(labels.shape) +
                           " do not fit logits of shape " +
                           shapeText(logits.shape));
    int64_t classes = logits.shape.back();
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, resultDType(c), rows, y))
      return false;
    for (size_t r = 0; r < labels.data.size(); ++r) {
      double label = labels.data[r];
      if (!(label >= 0 && label < double(classes)))
        return opFail(c, "label " + std::to_string(int64_t(label)) +
                             " in row " + std::to_string(r) +
                             " is out of range for " + std::to_string(classes) +
                             " classes");
      const double *row = logits.data.data() + r * classes;
      double m = -INFINITY;
      for (int64_t k = 0; k < classes; ++k)
        m = maxValue(m, row[k]);
      LaneSum s(accumulatesInF32(c.op));
      for (int64_t k = 0; k < classes; ++k)
        s.add(k, expShifted(logits.dtype, row[k], m));
      double lse = std::isfinite(m) ? m + std::log(s.total()) : m;
      y.data[r] = roundToDType(y.dtype, lse - row[int64_t(label)]);
    }
    return true;
  }

  // One value fills the tensor; otherwise one value per element in
  // row-major order. Each is rounded to the element type.
  bool evalConstant(OpContext &c, std::vector<Tensor> &out) {
    if (!checkArity(c, 0) || !checkResultCount(c, 1))
      return false;
    const AttrValue *attr = c.op.getAttrs().find("value");
    const auto *values =
        attr ? std::get_if<std::vector<double>>(attr) : nullptr;
    if (!values)
      return opFail(c, "has no 'value'");
    const TensorType &type = c.op.getResult()->getType();
    IntShape shape;
    if (!resolveShape(c, type.shape, shape))
      return false;
    out.resize(1);
    Tensor &y = out[0];
    if (!make(c, type.dtype, shape, y))
      return false;
    if (values->size() != 1 && values->size() != y.data.size())
      return opFail(c, "has " + std::to_string(values->size()) +
                           " value(s) for shape " + shapeText(shape));
    for (size_t i = 0; i < y.data.size(); ++i)
      y.data[i] = roundToDType(y.dtype, (*values)[values->size() == 1 ? 0 : i]);
    return true;
  }

  // Runs the callee on the operands; its size names bind afresh.
  bool evalCall(OpContext &c, std::vector<Tensor> &out, unsigned depth) {
    const AttrValue *attr = c.op.getAttrs().find("callee");
    const std::string *name = attr ? std::get_if<std::string>(attr) : nullptr;
    const Function *callee = name ? module.lookup(*name) : nullptr;
    if (!callee)
      return opFail(c, "calls unknown function '" + (name ? *name : "") + "'");
    return callFunction(*callee, llvm::ArrayRef<const Tensor *>(c.operands),
                        out, depth + 1);
  }

  // An extern function runs the user's compiled code through its
  // trampoline: the size names bound from the operand shapes, each input
  // in a buffer of the element type its declaration says (so a module
  // that `gradc check` promoted to f64 still calls an f32 kernel with
  // floats), one output buffer per result.
  bool evalExternCall(OpContext &c, std::vector<Tensor> &out) {
    llvm::StringRef name = c.op.getCallee();
    const ExternDecl *decl = module.lookupExtern(name);
    if (!decl)
      return opFail(c, "calls unknown extern function '" + name.str() + "'");
    const LoadedExtern *code = lookupLoadedExtern(name);
    if (!code || !code->trampoline)
      return opFail(c, "the code of extern function '" + name.str() +
                           "' is not loaded (docs/Extern.md: its .cpp "
                           "beside its header, or --load)");
    if (c.operands.size() != decl->paramTypes.size())
      return opFail(c, "expected " + std::to_string(decl->paramTypes.size()) +
                           " operand(s)");
    llvm::StringMap<int64_t> bound;
    for (auto [type, t] : llvm::zip(decl->paramTypes, c.operands)) {
      if (type.getRank() != t->shape.size())
        return opFail(c, "an operand's rank contradicts '" + name.str() + "'");
      for (auto [d, size] : llvm::zip(type.shape, t->shape)) {
        int64_t known =
            d.isKnown() ? d.getSize()
                        : bound.try_emplace(d.getName(), size).first->second;
        if (known != size)
          return opFail(c,
                        "an operand's shape contradicts '" + name.str() + "'");
      }
    }
    std::vector<int64_t> sizes;
    for (const std::string &s : decl->getSizeNames())
      sizes.push_back(bound.lookup(s));

    std::vector<std::vector<char>> inputs, outputs;
    std::vector<void *> argPtrs, outPtrs;
    for (auto [type, t] : llvm::zip(decl->paramTypes, c.operands))
      inputs.push_back(toCBuffer(type.dtype, t->data));
    for (std::vector<char> &b : inputs)
      argPtrs.push_back(b.data());
    out.resize(decl->resultTypes.size());
    for (unsigned i = 0; i < decl->resultTypes.size(); ++i) {
      IntShape shape;
      for (const Dim &d : decl->resultTypes[i].shape)
        shape.push_back(d.isKnown() ? d.getSize() : bound.lookup(d.getName()));
      if (!make(c, resultDType(c, i), shape, out[i]))
        return false;
      outputs.emplace_back(std::max<size_t>(out[i].data.size(), 1) *
                           elementByteSize(decl->resultTypes[i].dtype));
    }
    for (std::vector<char> &b : outputs)
      outPtrs.push_back(b.data());
    int32_t status =
        code->trampoline(sizes.data(), argPtrs.data(), outPtrs.data());
    if (status != 0)
      return opFail(c, "extern function '" + name.str() + "' returned status " +
                           std::to_string(status));
    for (unsigned i = 0; i < out.size(); ++i)
      fromCBuffer(decl->resultTypes[i].dtype, outputs[i], out[i]);
    return true;
  }

  /// Values in the C element type of `dtype` (docs/ABI.md).
  static std::vector<char> toCBuffer(DType dtype,
                                     const std::vector<double> &data) {
    std::vector<char> buffer(std::max<size_t>(data.size(), 1) *
                             elementByteSize(dtype));
    for (size_t i = 0; i < data.size(); ++i) {
      char *at = buffer.data() + i * elementByteSize(dtype);
      if (dtype == DType::F32) {
        float f = static_cast<float>(data[i]);
        std::memcpy(at, &f, sizeof f);
      } else if (dtype == DType::F64) {
        std::memcpy(at, &data[i], sizeof(double));
      } else if (dtype == DType::I32) {
        int32_t k = static_cast<int32_t>(data[i]);
        std::memcpy(at, &k, sizeof k);
      } else {
        *at = data[i] != 0 ? 1 : 0;
      }
    }
    return buffer;
  }

  /// Reads a C buffer back, rounded to the result's own element type.
  static void fromCBuffer(DType dtype, const std::vector<char> &buffer,
                          Tensor &t) {
    for (size_t i = 0; i < t.data.size(); ++i) {
      const char *at = buffer.data() + i * elementByteSize(dtype);
      double v = 0;
      if (dtype == DType::F32) {
        float f;
        std::memcpy(&f, at, sizeof f);
        v = f;
      } else if (dtype == DType::F64) {
        std::memcpy(&v, at, sizeof v);
      } else if (dtype == DType::I32) {
        int32_t k;
        std::memcpy(&k, at, sizeof k);
        v = k;
      } else {
        v = *at != 0;
      }
      t.data[i] = roundToDType(t.dtype, v);
    }
  }
};

} // namespace

namespace {
InterpreterStats &lastStats() {
  static InterpreterStats stats;
  return stats;
}

std::vector<std::pair<std::string, LoadedExtern>> &loadedExterns() {
  static std::vector<std::pair<std::string, LoadedExtern>> table;
  return table;
}
} // namespace

void ir::registerLoadedExtern(llvm::StringRef name, LoadedExtern code) {
  for (auto &[n, c] : loadedExterns())
    if (n == name) {
      c = code;
      return;
    }
  loadedExterns().push_back({name.str(), code});
}

const LoadedExtern *ir::lookupLoadedExtern(llvm::StringRef name) {
  for (const auto &[n, c] : loadedExterns())
    if (n == name)
      return &c;
  return nullptr;
}

std::vector<std::pair<std::string, LoadedExtern>> ir::getLoadedExterns() {
  return loadedExterns();
}

bool ir::interpret(const Module &module, llvm::StringRef fnName,
                   llvm::ArrayRef<Tensor> args, std::vector<Tensor> &results,
                   std::string &error) {
  const Function *fn = module.lookup(fnName);
  if (!fn) {
    error = "no function named '" + fnName.str() + "'";
    return false;
  }
  Interpreter interpreter(module);
  bool ok = interpreter.callFunction(*fn, args, results, 0);
  lastStats() = interpreter.stats;
  if (ok)
    return true;
  error = interpreter.message;
  return false;
}

const InterpreterStats &ir::lastInterpreterStats() { return lastStats(); }
