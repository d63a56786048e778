//===- Evaluator.cpp - Runs the loop IR -----------------------------------===//
//
// Executes a lowered function statement by statement with the numerics of
// the reference interpreter (lib/IR/Interpreter.cpp), so that the lowering
// is proven numerically before any printer uses it:
//
//  - Every value is held in a double. A store, a cast and every primitive
//    or intrinsic round their result to their type (ir::roundToDType):
//    f32 results to the nearest float, i32 arithmetic wraps, index
//    arithmetic is int64.
//  - An accumulation combines in its buffer's type (an f64 accumulator
//    adds f32 values exactly as the interpreter's double sum does).
//  - Every load and store is bounds-checked: an out-of-bounds access is
//    an error that names the buffer, never undefined behaviour.
//  - A failed check, a called function's error or an extern function's
//    non-zero status stops the run with a message naming the op.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"
#include "gradc/Math.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

using namespace gradc;
using namespace gradc::loops;
using ir::Tensor;

namespace {

double wrap32(uint64_t v) { return double(int32_t(uint32_t(v))); }
uint64_t asU64(double v) { return uint64_t(int64_t(v)); }

double roundTo(ScalarType t, double v) { return roundToScalar(t, v); }

constexpr unsigned maxDepth = ir::maxInterpreterCallDepth;

class Evaluator {
public:
  explicit Evaluator(const LoopModule &module) : module(module) {}
  std::string message;

  bool call(const LoopFunction &fn, llvm::ArrayRef<Tensor> args,
            std::vector<Tensor> &results, unsigned depth);

private:
  const LoopModule &module;

  struct Frame {
    const LoopFunction *fn = nullptr;
    std::map<std::string, int64_t> sizes;
    /// The memory of each buffer that is not a view; buffers that buffer
    /// planning put in one slot share it.
    llvm::DenseMap<const Buffer *, std::vector<double> *> storage;
    std::vector<std::unique_ptr<std::vector<double>>> owned;
    std::map<std::pair<int, int>, std::vector<double> *> slots;

    std::vector<double> *own(std::vector<double> data) {
      owned.push_back(std::make_unique<std::vector<double>>(std::move(data)));
      return owned.back().get();
    }
    std::vector<int64_t> vars;
    const Stmt *stmt = nullptr; ///< for messages
  };
  Frame *frame = nullptr;
  bool failed = false;
  unsigned depth = 0;

  bool fail(const std::string &text) {
    if (!failed) {
      failed = true;
      std::string where = "in function '" + frame->fn->name + "'";
      if (frame->stmt && !frame->stmt->origin.opName().empty())
        where += ": '" + frame->stmt->origin.opName().str() + "' (" +
                 frame->stmt->origin.result().str() + ")";
      message = where + ": " + text;
    }
    return false;
  }

  int64_t sizeOf(const Dim &d) {
    if (d.isKnown())
      return d.getSize();
    auto it = frame->sizes.find(d.getName().str());
    return it == frame->sizes.end() ? 0 : it->second;
  }

  std::vector<int64_t> shapeOf(const Buffer *b) {
    std::vector<int64_t> s;
    for (const Dim &d : b->shape)
      s.push_back(sizeOf(d));
    return s;
  }

  /// The storage that holds `b` and the offset of its first element.
  std::vector<double> *resolve(const Buffer *b, int64_t &offset) {
    offset = 0;
    while (b->kind == Buffer::Kind::Alias) {
      offset += int64_t(eval(*b->offset));
      b = b->base;
    }
    auto it = frame->storage.find(b);
    return it == frame->storage.end() ? nullptr : it->second;
  }

  double *element(const Buffer *b, int64_t i) {
    int64_t offset = 0;
    std::vector<double> *data = resolve(b, offset);
    int64_t n = 1;
    for (int64_t d : shapeOf(b))
      n *= d;
    if (b->count)
      n = int64_t(eval(*b->count));
    if (!data || i < 0 || i >= n || offset + i >= int64_t(data->size())) {
      fail("access out of bounds: %" + b->name + "[" + std::to_string(i) +
           "] of " + std::to_string(n) + " element(s)");
      return nullptr;
    }
    return &(*data)[offset + i];
  }

  double eval(const Expr &e);
  double evalPrim(const Expr &e);
  bool exec(const Block &block);
  bool exec(const Stmt &s);
  bool runKernel(const Stmt &s);
  bool runCall(const Stmt &s);
  bool runExtern(const Stmt &s, std::vector<Tensor> &ins,
                 std::vector<Tensor> &outs);
  bool bindArguments(const LoopFunction &fn, llvm::ArrayRef<Tensor> args);
};

/// The primitives' semantics are the op table's (gradc/Ops/Scalar.h),
/// which the interpreter uses too.
double Evaluator::evalPrim(const Expr &e) {
  double a = eval(*e.args[0]);
  double b = e.args.size() > 1 ? eval(*e.args[1]) : 0;
  bool divByZero = false;
  double v = gradc::evalPrim(e.op, e.args[0]->type, a, b, divByZero);
  if (divByZero)
    fail("integer division by zero");
  return v;
}

double Evaluator::eval(const Expr &e) {
  if (failed)
    return 0;
  switch (e.kind) {
  case Expr::Kind::Const:
    return e.value;
  case Expr::Kind::Size: {
    auto it = frame->sizes.find(e.name.str());
    if (it == frame->sizes.end()) {
      fail("size '" + e.name.str() + "' is not bound");
      return 0;
    }
    return double(it->second);
  }
  case Expr::Kind::LoopVar:
    return double(frame->vars[e.var]);
  case Expr::Kind::Load: {
    double *p = element(e.buffer, int64_t(eval(*e.args[0])));
    return p ? *p : 0;
  }
  case Expr::Kind::Prim:
    return evalPrim(e);
  case Expr::Kind::Intrinsic: {
    // gradc/Math.h's functions, as in the interpreter and both backends
    // (docs/Math.md), so that the evaluator agrees with them bit for bit.
    double a = eval(*e.args[0]);
    double b = e.args.size() > 1 ? eval(*e.args[1]) : 0;
    return evalIntrinsic(e.fn, e.type, a, b);
  }
  case Expr::Kind::Select: {
    // Both arms are evaluated, as a vectorised printer would.
    double c = eval(*e.args[0]), a = eval(*e.args[1]), b = eval(*e.args[2]);
    return c != 0 ? a : b;
  }
  case Expr::Kind::Cast:
    return roundTo(e.type, eval(*e.args[0]));
  }
  return 0;
}

bool Evaluator::exec(const Block &block) {
  for (const StmtPtr &s : block)
    if (!exec(*s))
      return false;
  return true;
}

bool Evaluator::exec(const Stmt &s) {
  const Stmt *saved = frame->stmt;
  frame->stmt = &s;
  bool ok = true;
  switch (s.kind) {
  case Stmt::Kind::For: {
    int64_t n = int64_t(eval(*s.extent));
    if (frame->vars.size() <= s.var)
      frame->vars.resize(s.var + 1, 0);
    for (int64_t i = 0; ok && !failed && i < n; ++i) {
      frame->vars[s.var] = i;
      ok = exec(s.body);
    }
    break;
  }
  case Stmt::Kind::Store:
  case Stmt::Kind::Accumulate: {
    double v = eval(*s.value);
    double *p = element(s.buffer, int64_t(eval(*s.index)));
    if (!p || failed)
      break;
    ScalarType t = fromDType(s.buffer->dtype);
    if (s.kind == Stmt::Kind::Accumulate) {
      switch (s.combiner) {
      case Combiner::Add:
        v = t == ScalarType::I32 ? wrap32(asU64(*p) + asU64(v)) : *p + v;
        break;
      // max= and min= are the primitives, with docs/IR.md's NaN policy
      // defined once (gradc/Ops/Scalar.h).
      case Combiner::Max:
      case Combiner::Min: {
        bool unused = false;
        PrimOp op = s.combiner == Combiner::Max ? PrimOp::Max : PrimOp::Min;
        v = gradc::evalPrim(op, t, *p, v, unused);
        break;
      }
      }
    }
    *p = roundTo(t, v);
    break;
  }
  case Stmt::Kind::Check:
    if (eval(*s.cond) == 0)
      fail(s.message);
    break;
  case Stmt::Kind::KernelCall:
    ok = runKernel(s);
    break;
  case Stmt::Kind::Call:
    ok = runCall(s);
    break;
  }
  frame->stmt = saved;
  return ok && !failed;
}

// z[zOff + i*N + j] = sum_p a[aOff + i*K + p] * b[bOff + p*N + j], in
// increasing p, in the accumulator type.
bool Evaluator::runKernel(const Stmt &s) {
  int64_t zOff = int64_t(eval(*s.operands[0]));
  int64_t aOff = int64_t(eval(*s.operands[1]));
  int64_t bOff = int64_t(eval(*s.operands[2]));
  int64_t m = int64_t(eval(*s.operands[3]));
  int64_t k = int64_t(eval(*s.operands[4]));
  int64_t n = int64_t(eval(*s.operands[5]));
  bool isInt = s.accType == ScalarType::I32;
  ScalarType zt = fromDType(s.outputs[0]->dtype);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      uint64_t intSum = 0;
      for (int64_t p = 0; p < k; ++p) {
        double *x = element(s.inputs[0], aOff + i * k + p);
        double *y = element(s.inputs[1], bOff + p * n + j);
        if (!x || !y)
          return false;
        if (isInt)
          intSum += asU64(*x) * asU64(*y);
        else if (s.accType == ScalarType::F32) // f32 product, f32 add
          sum = double(float(sum) + float(*x * *y));
        else
          sum += *x * *y;
      }
      double *z = element(s.outputs[0], zOff + i * n + j);
      if (!z)
        return false;
      *z = roundTo(zt, isInt ? wrap32(intSum) : sum);
    }
  return true;
}

/// Copies a buffer into a tensor (its shape, its elements).
static Tensor toTensor(DType dtype, std::vector<int64_t> shape,
                       const double *data) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(data, data + t.numElements());
  return t;
}

/// The number of elements of a tensor of `shape`.
static int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool Evaluator::runCall(const Stmt &s) {
  std::vector<Tensor> ins, outs;
  for (const Buffer *b : s.inputs) {
    std::vector<int64_t> shape = shapeOf(b);
    int64_t n = numElements(shape);
    int64_t offset = 0;
    std::vector<double> *data = resolve(b, offset);
    if (!data || offset + n > int64_t(data->size()))
      return fail("an argument of '" + s.callee + "' is out of bounds");
    ins.push_back(toTensor(b->dtype, shape, data->data() + offset));
  }
  if (s.isExtern) {
    if (!runExtern(s, ins, outs))
      return false;
  } else {
    const LoopFunction *callee = module.lookup(s.callee);
    if (!callee)
      return fail("calls unknown function '" + s.callee + "'");
    Evaluator inner(module);
    inner.depth = depth + 1;
    if (depth + 1 > maxDepth)
      return fail("calls are nested more than " + std::to_string(maxDepth) +
                  " deep (is '" + s.callee + "' recursive?)");
    if (!inner.call(*callee, ins, outs, depth + 1)) {
      failed = true;
      message = inner.message;
      return false;
    }
  }
  if (outs.size() != s.outputs.size())
    return fail("'" + s.callee + "' returned the wrong number of results");
  for (size_t i = 0; i < outs.size(); ++i) {
    // Buffers are flat: a call may write a result into a view of another
    // shape (a returned reshape of the result is computed in the output
    // itself, Lower.cpp), so only the number of elements must agree; a
    // result with an offset fills that many elements from it (a step's
    // place in a stacked buffer), each access checked.
    const Buffer *b = s.outputs[i];
    int64_t offset = s.operands.empty() ? 0 : int64_t(eval(*s.operands[i]));
    if (s.operands.empty() &&
        int64_t(outs[i].data.size()) != numElements(shapeOf(b)))
      return fail("a result of '" + s.callee + "' has the wrong size");
    for (size_t j = 0; j < outs[i].data.size(); ++j) {
      double *p = element(b, offset + int64_t(j));
      if (!p)
        return false;
      *p = roundTo(fromDType(b->dtype), outs[i].data[j]);
    }
  }
  return true;
}

/// The C element type of `dtype` (docs/ABI.md), one buffer per tensor.
static std::vector<char> toCBuffer(DType dtype, const std::vector<double> &d) {
  size_t size = elementByteSize(dtype);
  std::vector<char> buffer(std::max<size_t>(d.size(), 1) * size);
  for (size_t i = 0; i < d.size(); ++i) {
    char *at = buffer.data() + i * size;
    if (dtype == DType::F32) {
      float f = float(d[i]);
      std::memcpy(at, &f, sizeof f);
    } else if (dtype == DType::F64) {
      std::memcpy(at, &d[i], sizeof(double));
    } else if (dtype == DType::I32) {
      int32_t k = int32_t(d[i]);
      std::memcpy(at, &k, sizeof k);
    } else {
      *at = d[i] != 0;
    }
  }
  return buffer;
}

static double fromC(DType dtype, const char *at) {
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, at, sizeof f);
    return f;
  }
  if (dtype == DType::F64) {
    double v;
    std::memcpy(&v, at, sizeof v);
    return v;
  }
  if (dtype == DType::I32) {
    int32_t k;
    std::memcpy(&k, at, sizeof k);
    return k;
  }
  return *at != 0;
}

bool Evaluator::runExtern(const Stmt &s, std::vector<Tensor> &ins,
                          std::vector<Tensor> &outs) {
  const ir::LoadedExtern *code = ir::lookupLoadedExtern(s.callee);
  if (!code || !code->trampoline)
    return fail("the code of extern function '" + s.callee +
                "' is not loaded (docs/Extern.md: its .cpp beside its "
                "header, or --load)");
  std::vector<int64_t> sizes;
  for (const auto &[name, e] : s.sizeArgs)
    sizes.push_back(int64_t(eval(*e)));
  std::vector<std::vector<char>> inBufs, outBufs;
  std::vector<void *> argPtrs, outPtrs;
  for (const Tensor &t : ins)
    inBufs.push_back(toCBuffer(t.dtype, t.data));
  for (std::vector<char> &b : inBufs)
    argPtrs.push_back(b.data());
  for (const Buffer *b : s.outputs) {
    Tensor t;
    t.dtype = b->dtype;
    t.shape = shapeOf(b);
    t.data.assign(t.numElements(), 0);
    outBufs.emplace_back(std::max<size_t>(t.data.size(), 1) *
                         elementByteSize(b->dtype));
    outs.push_back(std::move(t));
  }
  for (std::vector<char> &b : outBufs)
    outPtrs.push_back(b.data());
  int32_t status =
      code->trampoline(sizes.data(), argPtrs.data(), outPtrs.data());
  if (s.checksStatus && status != 0)
    return fail("extern function '" + s.callee + "' returned status " +
                std::to_string(status));
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t j = 0; j < outs[i].data.size(); ++j)
      outs[i].data[j] =
          fromC(outs[i].dtype,
                outBufs[i].data() + j * elementByteSize(outs[i].dtype));
  return true;
}

bool Evaluator::bindArguments(const LoopFunction &fn,
                              llvm::ArrayRef<Tensor> args) {
  if (args.size() != fn.params.size())
    return fail("'" + fn.name + "' takes " + std::to_string(fn.params.size()) +
                " argument(s), got " + std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer *p = fn.params[i];
    const Tensor &arg = args[i];
    std::string where = "argument '" + p->name + "' of '" + fn.name + "'";
    TensorType type(p->dtype, p->shape);
    if (arg.dtype != p->dtype || arg.shape.size() != p->shape.size())
      return fail(where + " does not have type " + type.str());
    if (int64_t(arg.data.size()) != arg.numElements())
      return fail(where + " has the wrong number of values");
    for (size_t d = 0; d < arg.shape.size(); ++d) {
      const Dim &dim = p->shape[d];
      if (arg.shape[d] < 0)
        return fail(where + " has an invalid shape");
      if (dim.isKnown()) {
        if (dim.getSize() != arg.shape[d])
          return fail(where + " does not have type " + type.str());
        continue;
      }
      auto [it, inserted] =
          frame->sizes.emplace(dim.getName().str(), arg.shape[d]);
      if (!inserted && it->second != arg.shape[d])
        return fail("size '" + dim.getName().str() + "' is bound to " +
                    std::to_string(it->second) + " and " +
                    std::to_string(arg.shape[d]));
    }
    std::vector<double> data = arg.data;
    for (double &v : data)
      v = ir::roundToDType(arg.dtype, v);
    frame->storage[p] = frame->own(std::move(data));
  }
  return true;
}

bool Evaluator::call(const LoopFunction &fn, llvm::ArrayRef<Tensor> args,
                     std::vector<Tensor> &results, unsigned d) {
  depth = d;
  Frame f;
  f.fn = &fn;
  f.vars.assign(fn.numVars, 0);
  frame = &f;
  if (!bindArguments(fn, args))
    return false;
  // Memory for every buffer that is not a parameter or a view.
  for (const auto &b : fn.buffers) {
    if (b->kind == Buffer::Kind::Param || b->kind == Buffer::Kind::Alias)
      continue;
    if (b->kind == Buffer::Kind::Constant) {
      f.storage[b.get()] = f.own(b->data);
      continue;
    }
    int64_t n = 1;
    for (int64_t dim : shapeOf(b.get())) {
      if (dim != 0 && n > ir::maxInterpreterElements / dim)
        return fail("buffer '" + b->name + "' is too large");
      n *= dim;
    }
    if (b->count)
      n = int64_t(eval(*b->count));
    if (n > ir::maxInterpreterElements)
      return fail("buffer '" + b->name + "' is too large");
    // Scratch starts as NaN, so that a read before a write shows.
    double init = b->kind == Buffer::Kind::Output ||
                          b->kind == Buffer::Kind::Scratch ||
                          b->kind == Buffer::Kind::Stack
                      ? NAN
                      : 0;
    if (b->slot < 0) {
      f.storage[b.get()] = f.own(std::vector<double>(n, init));
      continue;
    }
    std::vector<double> *&shared = f.slots[{int(b->kind), b->slot}];
    if (!shared)
      shared = f.own(std::vector<double>(n, init));
    if (int64_t(shared->size()) < n)
      shared->resize(n, init);
    f.storage[b.get()] = shared;
  }
  if (!exec(fn.body))
    return false;
  results.clear();
  for (const Buffer *out : fn.outputs)
    results.push_back(
        toTensor(out->dtype, shapeOf(out), f.storage[out]->data()));
  return true;
}

} // namespace

bool loops::evaluateLoops(const LoopModule &module, llvm::StringRef fnName,
                          llvm::ArrayRef<Tensor> args,
                          std::vector<Tensor> &results, std::string &error) {
  const LoopFunction *fn = module.lookup(fnName);
  if (!fn) {
    error = "no function '" + fnName.str() + "'";
    return false;
  }
  Evaluator e(module);
  if (!e.call(*fn, args, results, 0)) {
    error = e.message;
    return false;
  }
  return true;
}
