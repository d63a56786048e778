//===- ExpandMatMul.cpp - Small matmuls as loops --------------------------===//
//
// The loop pass `expand`: a matrix-vector product whose sizes are known
// and small (K4's `w @ x` of 4 x 4, its gradient's `transpose(w) @ dy`),
// and an outer product (K = 1: the gradient's `dy @ x^T`), becomes the
// loops of the kernel's own definition, so that a printer prints
// straight-line code that its compiler vectorises, instead of a call into
// a kernel written for large matrices, adding the terms in the contract's
// order and type (docs/IR.md, "Summation order": in increasing p, in an
// f64 accumulator that starts at +0, rounded once):
//
//   z[zOff + i] = T(sum_p f64(a[aOff + i*K + p]) * f64(b[bOff + p]))
//
//  1. A kernel call (at any depth: batch loops) with N = 1, constant M
//     and K, K <= maxExpandDepth, M * K <= maxExpandWork and a float
//     accumulator becomes
//
//       for %i < M {
//         %acc = 0:f64
//         for %p < K {
//           %acc += f64(%a[aOff + %i * K + %p]) * f64(%b[bOff + %p])
//         }
//         %z[zOff + %i] = T(%acc)
//       }
//
//     (a loop of extent 1 without its loop). The loop over i is a loop of
//     dot products (loops::isDotLoop): the LLVM printer has it vectorised
//     across i, each lane adding its own terms in order.
//  2. A product with K = 1 (the gradient's outer product `dy @ x^T`) of
//     known sizes, any M and N, becomes one product per element:
//
//       for %i < M { for %j < N { %z[zOff + %i * N + %j] =
//           %a[aOff + %i] * %b[bOff + %j] + 0 } }
//
//     in the data type T: T(+0 + f64(a) * f64(b)) is T's product (exact
//     in f64, rounded once) except that a -0 product becomes +0, which is
//     what the + 0 does. A call of the kernel would cost more than the 16
//     products of K4's d_w.
//  3. A matrix that a nest only transposes just before (`for r < R {
//     for c < C { %t[r * C + c] = %x[c * R + r] } }`, %t read by nothing
//     else, %x written by nothing in between) is read where it came from,
//     `%x[%p * M + %i]`, and the nest and %t go: the gradient's
//     `transpose(w) @ dy` reads w, contiguous in i, instead of a copy. So
//     is a vector that a loop only copies (`for c < C { %t[c] = %x[c] }`,
//     the transpose of a vector: K4's x^T).
//
//  4. Any other product with a short constant K, 1 <= K <= maxShortK (a
//     layer of two inputs, `x @ w1` of the spiral MLP, and its gradient's
//     `dz @ w2^T`), of any sizes M and N, known or not, becomes one sum
//     per element, its terms written out:
//
//       for %i < M { for %j < N { %z[zOff + %i * N + %j] =
//           T(+0 + acc(a[i, 0]) * acc(b[0, j]) + ... + acc(a[i, K-1]) *
//           acc(b[K-1, j])) } }
//
//     added left to right from +0 in the accumulator type, the kernel's
//     order. The loop over j reads rows of b and vectorises; the kernel
//     would spend more on zeroing, reloading and storing c than on its K
//     products, and a loop nest can merge with the elementwise nest that
//     reads it (`tanh(x @ w1 + b1)` in one pass).
//
// Other products stay kernel calls.
//
// The products are exact in f64 (an f32 has 24 significant bits), so
// every term and sum is the kernel's and the evaluator's: bit for bit
// (test/Loops/expand-matmul.grad).
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <cstdint>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// Expanded only up to these sizes: the inner loop of a dot product is
/// unrolled by the compilers (LLVM's full unroll runs before its loop
/// vectoriser), and the whole product stays a few dozen instructions.
constexpr int64_t maxExpandDepth = 8;
constexpr int64_t maxExpandWork = 256;
/// Products with at most this many terms per element are written out as
/// sums (case 4).
constexpr int64_t maxShortK = 8;

bool constIndex(const Expr &e, int64_t &v) {
  if (e.kind != Expr::Kind::Const || e.type != ScalarType::Index)
    return false;
  v = int64_t(e.value);
  return true;
}

ExprPtr add(ExprPtr a, ExprPtr b) {
  return prim(PrimOp::Add, std::move(a), std::move(b));
}

ExprPtr mul(ExprPtr a, ExprPtr b) {
  return prim(PrimOp::Mul, std::move(a), std::move(b));
}

bool isVar(const Expr &e, unsigned v) {
  return e.kind == Expr::Kind::LoopVar && e.var == v;
}

/// `row * stride + col` with a constant stride.
bool matchIndex(const Expr &e, unsigned row, unsigned col, int64_t &stride) {
  if (e.kind != Expr::Kind::Prim || e.op != PrimOp::Add ||
      !isVar(*e.args[1], col))
    return false;
  const Expr &m = *e.args[0];
  return m.kind == Expr::Kind::Prim && m.op == PrimOp::Mul &&
         isVar(*m.args[0], row) && constIndex(*m.args[1], stride);
}

/// A transpose nest: `for r < R { for c < C { t[r * C + c] = x[c * R + r] } }`;
/// or, for a vector (R or C is 1, the transpose lowered without its loop
/// of one), a copy `for c < C { t[c] = x[c] }`.
struct Transpose {
  Buffer *t = nullptr, *x = nullptr;
  int64_t rows = 0, cols = 0;
  bool copy = false;
};

bool matchCopy(const Stmt &loop, Transpose &tr) {
  if (loop.kind != Stmt::Kind::For || loop.parallel || loop.body.size() != 1)
    return false;
  const Stmt &store = *loop.body[0];
  int64_t size;
  if (store.kind != Stmt::Kind::Store || !constIndex(*loop.extent, size) ||
      !isVar(*store.index, loop.var))
    return false;
  const Expr &v = *store.value;
  Buffer *t = store.buffer;
  if ((t->kind != Buffer::Kind::Scratch && t->kind != Buffer::Kind::Stack) ||
      v.kind != Expr::Kind::Load || v.buffer->dtype != t->dtype ||
      v.buffer == t || v.buffer->kind == Buffer::Kind::Local ||
      !isVar(*v.args[0], loop.var))
    return false;
  tr = {t, v.buffer, size, 1, true};
  return true;
}

bool matchTranspose(const Stmt &outer, Transpose &tr) {
  if (matchCopy(outer, tr))
    return true;
  if (outer.kind != Stmt::Kind::For || outer.parallel || outer.body.size() != 1)
    return false;
  const Stmt &inner = *outer.body[0];
  if (inner.kind != Stmt::Kind::For || inner.body.size() != 1)
    return false;
  const Stmt &store = *inner.body[0];
  if (store.kind != Stmt::Kind::Store)
    return false;
  const Expr &v = *store.value;
  Buffer *t = store.buffer;
  if ((t->kind != Buffer::Kind::Scratch && t->kind != Buffer::Kind::Stack) ||
      v.kind != Expr::Kind::Load || v.buffer->dtype != t->dtype ||
      v.buffer == t || v.buffer->kind == Buffer::Kind::Local)
    return false;
  int64_t rows, cols, tStride, xStride;
  if (!constIndex(*outer.extent, rows) || !constIndex(*inner.extent, cols) ||
      !matchIndex(*store.index, outer.var, inner.var, tStride) ||
      !matchIndex(*v.args[0], inner.var, outer.var, xStride) ||
      tStride != cols || xStride != rows)
    return false;
  tr = {t, v.buffer, rows, cols, false};
  return true;
}

class Expander {
public:
  explicit Expander(LoopFunction &fn) : fn(fn) {}

  void run() {
    uses = loops::countUses(fn);
    expandBlock(fn.body);
    if (dead.empty())
      return;
    for (Buffer *b : dead)
      fn.bufferNames.erase(b->name);
    std::erase_if(fn.buffers, [&](const std::unique_ptr<Buffer> &b) {
      return dead.count(b.get());
    });
  }

private:
  LoopFunction &fn;
  /// How many statements (and views) refer to each buffer.
  BufferTable<unsigned> uses;
  llvm::DenseSet<Buffer *> dead;

  static bool writes(const Stmt &s, const Buffer *x) {
    bool hit = false;
    auto visit = [&](const Stmt &w) {
      if (w.buffer &&
          (w.kind == Stmt::Kind::Store || w.kind == Stmt::Kind::Accumulate))
        hit = hit || w.buffer->root() == x->root();
      for (const Buffer *o : w.outputs)
        hit = hit || o->root() == x->root();
      // A call may write through views of its outputs only, but an
      // extern one is opaque: count it as writing.
      hit = hit || w.kind == Stmt::Kind::Call;
    };
    visit(s);
    walk(s.body, visit);
    return hit;
  }

  void expandBlock(Block &block) {
    for (size_t i = 0; i < block.size(); ++i) {
      Stmt &s = *block[i];
      if (s.kind == Stmt::Kind::For) {
        expandBlock(s.body);
        continue;
      }
      if (s.kind != Stmt::Kind::KernelCall || s.kernel != Kernel::MatMul)
        continue;
      int64_t m, k, n;
      if (!constIndex(*s.operands[4], k) || k < 1 || !isFloatType(s.accType))
        continue;
      if (!constIndex(*s.operands[3], m) || !constIndex(*s.operands[5], n) ||
          m < 1 || n < 1) {
        if (k <= maxShortK && !readsCopy(block, i))
          block[i] = expandShortK(s, k);
        continue;
      }
      bool outer = k == 1 && n > 1;
      bool dotRows = n == 1 && k <= maxExpandDepth && m * k <= maxExpandWork;
      if (!outer && !dotRows) {
        if (k <= maxShortK && !readsCopy(block, i))
          block[i] = expandShortK(s, k);
        continue;
      }
      // Transposed operands, found before the kernel is replaced.
      Transpose from[2];
      size_t nestAt[2] = {SIZE_MAX, SIZE_MAX};
      for (unsigned op = 0; op < 2; ++op)
        findTransposed(block, i, op, m, k, n, from[op], nestAt[op]);
      block[i] = expand(s, m, k, n, from);
      // The nests go last, the later first, so that indices stay valid.
      for (size_t at :
           {std::max(nestAt[0], nestAt[1]), std::min(nestAt[0], nestAt[1])})
        if (at != SIZE_MAX) {
          const Stmt &nest = *block[at]->body[0];
          dead.insert(nest.kind == Stmt::Kind::For ? nest.body[0]->buffer
                                                   : nest.buffer);
          block.erase(block.begin() + at);
          --i;
        }
    }
  }

  /// Whether an operand of the kernel at `block[at]` is a scratch buffer
  /// that a nest earlier in `block` only copies into (a transpose, such as
  /// the gradient's `dz @ transpose(w)`). Case 4 keeps such a product a
  /// kernel call: the C++ printer reads the operand in place through the
  /// kernel's transposed flag, and written out, the copy stays and its
  /// loop merges with the product's into one that LLVM did not vectorise
  /// (the spiral MLP's gradient: 39 -> 46 us).
  bool readsCopy(const Block &block, size_t at) const {
    const Stmt &s = *block[at];
    for (unsigned op = 0; op < 2; ++op) {
      const Buffer *t = s.inputs[op];
      if (t->kind != Buffer::Kind::Scratch && t->kind != Buffer::Kind::Stack)
        continue;
      for (size_t j = 0; j < at; ++j) {
        const Stmt *nest = block[j].get();
        while (nest->kind == Stmt::Kind::For && nest->body.size() == 1)
          nest = nest->body[0].get();
        if (nest->kind == Stmt::Kind::Store && nest->buffer == t &&
            nest->value->kind == Expr::Kind::Load)
          return true;
      }
    }
    return false;
  }

  /// Whether operand `op` of the kernel at `block[at]` is a buffer that a
  /// transpose nest earlier in `block` wrote and nothing else reads.
  void findTransposed(Block &block, size_t at, unsigned op, int64_t m,
                      int64_t k, int64_t n, Transpose &tr, size_t &nestAt) {
    const Stmt &s = *block[at];
    Buffer *t = s.inputs[op];
    if (s.inputs[1 - op] == t || uses.lookup(t) != 2 ||
        !isIndexConst(*s.operands[op + 1], 0))
      return;
    for (size_t j = at; j-- > 0;) {
      Transpose candidate;
      if (matchTranspose(*block[j], candidate) && candidate.t == t) {
        // a is M x K, b is K x N.
        int64_t rows = op == 0 ? m : k, cols = op == 0 ? k : n;
        bool fits = candidate.copy
                        ? candidate.rows == rows * cols
                        : candidate.rows == rows && candidate.cols == cols;
        if (!fits || candidate.x->root() == s.outputs[0]->root())
          return;
        for (size_t between = j + 1; between < at; ++between)
          if (writes(*block[between], candidate.x))
            return;
        tr = candidate;
        nestAt = j;
        return;
      }
      // Anything else that touches t first: not this pattern.
      bool touches = writes(*block[j], t);
      walk(block[j]->body, [&](const Stmt &w) {
        walkExprs(w, [&](const Expr &e) {
          touches |= e.kind == Expr::Kind::Load && e.buffer == t;
        });
      });
      walkExprs(*block[j], [&](const Expr &e) {
        touches |= e.kind == Expr::Kind::Load && e.buffer == t;
      });
      if (touches)
        return;
    }
  }

  StmtPtr newLoop(ExprPtr extent, const Origin &origin) {
    auto loop = std::make_unique<Stmt>(Stmt::Kind::For);
    loop->origin = origin;
    loop->var = fn.numVars++;
    loop->extent = std::move(extent);
    return loop;
  }
  StmtPtr newLoop(int64_t extent, const Origin &origin) {
    return newLoop(index(extent), origin);
  }

  StmtPtr expand(const Stmt &s, int64_t m, int64_t k, int64_t n,
                 const Transpose from[2]) {
    const Origin &origin = s.origin;
    StmtPtr iLoop = m > 1 ? newLoop(m, origin) : nullptr;
    StmtPtr jLoop = n > 1 ? newLoop(n, origin) : nullptr;
    StmtPtr pLoop = k > 1 ? newLoop(k, origin) : nullptr;
    auto var = [](const StmtPtr &loop) {
      return loop ? loopVar(loop->var) : index(0);
    };
    // a[i, p], b[p, j], each as stored or where its transpose came from.
    auto element = [&](unsigned op, const StmtPtr &row, const StmtPtr &col,
                       int64_t cols) {
      if (const Transpose &tr = from[op]; tr.t && tr.copy)
        return load(tr.x, add(mul(var(row), index(cols)), var(col)));
      if (const Transpose &tr = from[op]; tr.t)
        return load(tr.x, add(mul(var(col), index(tr.rows)), var(row)));
      return load(s.inputs[op], add(s.operands[op + 1]->clone(),
                                    add(mul(var(row), index(cols)), var(col))));
    };
    Buffer *z = s.outputs[0];
    ExprPtr at =
        add(s.operands[0]->clone(), add(mul(var(iLoop), index(n)), var(jLoop)));
    ExprPtr a = element(0, iLoop, pLoop, k), b = element(1, pLoop, jLoop, n);
    Block around;
    if (k == 1) {
      // One term: T(+0 + f64(a) * f64(b)) is the product in T plus +0 (the
      // product of two floats is exact in f64, so rounding it once to f32
      // is f32's product; the +0 turns a -0 product into the +0 that the
      // sum from +0 gives).
      ScalarType t = fromDType(z->dtype);
      auto result = std::make_unique<Stmt>(Stmt::Kind::Store);
      result->origin = origin;
      result->buffer = z;
      result->index = std::move(at);
      result->value = add(mul(std::move(a), std::move(b)), constant(t, 0));
      around.push_back(std::move(result));
    } else {
      around = dotProduct(s, std::move(at), std::move(a), std::move(b),
                          std::move(pLoop));
    }
    for (StmtPtr *loop : {&jLoop, &iLoop}) {
      if (!*loop)
        continue;
      (*loop)->body = std::move(around);
      around.clear();
      around.push_back(std::move(*loop));
    }
    if (around.size() == 1)
      return std::move(around[0]);
    // M = N = 1: one dot product, in a loop of one iteration.
    StmtPtr once = newLoop(1, origin);
    once->body = std::move(around);
    return once;
  }

  /// Case 4: `for %i < M { for %j < N { z[zOff + i * N + j] = T(+0 +
  /// a[i, 0] * b[0, j] + ...) } }`, each operand read as stored (the
  /// transposes of case 3 need known sizes) and cast to the accumulator
  /// type, the terms added left to right; a loop of extent 1 is left out.
  StmtPtr expandShortK(const Stmt &s, int64_t k) {
    const Origin &origin = s.origin;
    const Expr &m = *s.operands[3], &n = *s.operands[5];
    auto loopOver = [&](const Expr &extent) -> StmtPtr {
      return isIndexConst(extent, 1) ? nullptr
                                     : newLoop(extent.clone(), origin);
    };
    StmtPtr iLoop = loopOver(m), jLoop = loopOver(n);
    ExprPtr i = iLoop ? loopVar(iLoop->var) : index(0);
    ExprPtr j = jLoop ? loopVar(jLoop->var) : index(0);
    ScalarType acc = s.accType;
    ExprPtr sum = constant(acc, 0);
    for (int64_t p = 0; p < k; ++p) {
      ExprPtr a =
          load(s.inputs[0], add(s.operands[1]->clone(),
                                add(mul(i->clone(), index(k)), index(p))));
      ExprPtr b =
          load(s.inputs[1], add(s.operands[2]->clone(),
                                add(mul(index(p), n.clone()), j->clone())));
      sum = add(std::move(sum),
                mul(cast(acc, std::move(a)), cast(acc, std::move(b))));
    }
    Buffer *z = s.outputs[0];
    auto result = std::make_unique<Stmt>(Stmt::Kind::Store);
    result->origin = origin;
    result->buffer = z;
    result->index = add(s.operands[0]->clone(),
                        add(mul(std::move(i), n.clone()), std::move(j)));
    result->value = cast(fromDType(z->dtype), std::move(sum));
    StmtPtr nest = std::move(result);
    for (StmtPtr *loop : {&jLoop, &iLoop})
      if (*loop) {
        (*loop)->body.push_back(std::move(nest));
        nest = std::move(*loop);
      }
    if (nest->kind == Stmt::Kind::For)
      return nest;
    // M = N = 1: one sum, in a loop of one iteration.
    StmtPtr once = newLoop(1, origin);
    once->body.push_back(std::move(nest));
    return once;
  }

  /// `%acc = 0; for %p < K { %acc += f64(a) * f64(b) }; z[at] = T(%acc)`
  /// (without the loop over p when K = 1).
  Block dotProduct(const Stmt &s, ExprPtr at, ExprPtr a, ExprPtr b,
                   StmtPtr pLoop) {
    const Origin &origin = s.origin;
    ScalarType acc = s.accType;
    // A float accumulator (the only kind expanded) is f64 or f32.
    Buffer *local = fn.addBuffer(
        Buffer::Kind::Local, acc == ScalarType::F64 ? DType::F64 : DType::F32,
        {}, "acc");
    auto zero = std::make_unique<Stmt>(Stmt::Kind::Store);
    zero->origin = origin;
    zero->buffer = local;
    zero->index = index(0);
    zero->value = constant(acc, 0);
    auto term = std::make_unique<Stmt>(Stmt::Kind::Accumulate);
    term->origin = origin;
    term->buffer = local;
    term->index = index(0);
    term->combiner = Combiner::Add;
    term->value =
        prim(PrimOp::Mul, cast(acc, std::move(a)), cast(acc, std::move(b)));
    Buffer *z = s.outputs[0];
    auto result = std::make_unique<Stmt>(Stmt::Kind::Store);
    result->origin = origin;
    result->buffer = z;
    result->index = std::move(at);
    result->value = cast(fromDType(z->dtype), load(local, index(0)));
    // Innermost first.
    Block dot;
    dot.push_back(std::move(zero));
    if (pLoop) {
      pLoop->body.push_back(std::move(term));
      dot.push_back(std::move(pLoop));
    } else {
      dot.push_back(std::move(term));
    }
    dot.push_back(std::move(result));
    return dot;
  }
};

} // namespace

bool loops::expandMatMuls(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    Expander(*fn).run();
  return true;
}
