//===- Simplify.cpp - Exact algebraic identities and zero propagation -----===//
//
// Differentiation writes the reverse sweep op by op, without looking at
// what it produces: a rule returns `zeros_like(dy)` for an operand that
// gets no gradient, the seed of a scalar loss is multiplied by the
// cotangent, and layout rules transpose what an earlier rule transposed.
// This pass removes that noise with rewrites of two kinds:
//
//  - Identities that hold bit for bit in IEEE arithmetic, for every input
//    including NaN, infinities and signed zeros: `x * 1`, `x / 1`,
//    `x + (-0.0)`, `x - (+0.0)`, `neg(neg(x))`, transposes, reshapes and
//    broadcasts that compose or do nothing. `x + 0.0` is NOT one of them
//    (-0.0 + 0.0 is +0.0), so a literal 0.0 is left alone.
//
//  - Zero propagation over *structural* zeros: values that are zero by
//    construction (`zeros_like`, integer constants 0, and what the rules
//    below derive from them). As in TensorFlow, where a missing gradient
//    is `None` rather than a tensor of zeros, a structural zero is "no
//    contribution": `a + 0` is `a` and `a * 0` is 0 even where IEEE would
//    give -0.0 + 0.0 = +0.0 or inf * 0 = NaN. For integer and bool zeros
//    every one of these rules is exact anyway.
//
// See docs/Passes.md for the full list of rewrites.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "Rewriter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <numeric>
#include <optional>

using namespace gradc;
using namespace gradc::ir;
using namespace gradc::transforms;

namespace {

/// How a constant is zero, if it is: the sign of a zero decides which
/// float identities are exact.
enum class ConstantZero { None, AllPositive, AllNegative, Mixed };

ConstantZero classifyConstantZero(const Value *v) {
  const std::vector<double> *values = getConstantValues(v);
  if (!values || values->empty() || hasCustomGradient(*v->getDefiningOp()))
    return ConstantZero::None;
  bool positive = false, negative = false;
  for (double d : *values) {
    if (d != 0.0)
      return ConstantZero::None;
    (std::signbit(d) ? negative : positive) = true;
  }
  if (positive && negative)
    return ConstantZero::Mixed;
  return positive ? ConstantZero::AllPositive : ConstantZero::AllNegative;
}

/// Whether `v` is exactly one everywhere: a constant of ones or
/// `ones_like`, without an annotation's gradient rule.
bool isOne(const Value *v) {
  const Op *def = v->getDefiningOp();
  if (!def || hasCustomGradient(*def))
    return false;
  if (def->getKind() == OpKind::OnesLike)
    return true;
  const std::vector<double> *values = getConstantValues(v);
  return values && !values->empty() &&
         llvm::all_of(*values, [](double d) { return d == 1.0; });
}

/// The op that defines `v` when it is of `kind` and has no annotation's
/// gradient rule (looking through it would drop that rule), else null.
const Op *plainDef(const Value *v, OpKind kind) {
  const Op *def = v->getDefiningOp();
  if (!def || def->getKind() != kind || hasCustomGradient(*def))
    return nullptr;
  return def;
}

bool isIdentityPerm(llvm::ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return false;
  return true;
}

/// A value known row by row along `axis`: row r is `rows[r]`, or a
/// structural zero where that is null. `index` is the constant index of a
/// scatter_add that has the one nonzero row (null for a stack).
struct KnownRows {
  int64_t axis = 0;
  llvm::SmallVector<Value *, 8> rows;
  Value *index = nullptr;
};

/// The most rows simplifyRowAdd builds a stack of: beyond it, the stack's
/// operand list outgrows what the zero rows cost.
constexpr int64_t maxKnownRows = 64;

class Simplifier {
public:
  explicit Simplifier(Function &fn) : fn(fn), rewriter(fn) {}

  /// One walk over the function; true if it changed anything.
  bool runOnce();

private:
  bool visit(Op &op);

  // Zero propagation.
  bool resultIsZero(const Op &op) const;
  bool replaceByZeros(Op &op);
  Value *exactZeroOp(Op &op);
  Value *findZeroOfType(const Op &op, const TensorType &type);
  bool simplifyZerosLike(Op &op);

  // Identities, one family per function.
  bool simplifyAdd(Op &op);
  bool simplifyRowAdd(Op &op);
  std::optional<KnownRows> knownRows(Value *v) const;
  bool simplifySub(Op &op);
  bool simplifyMulDiv(Op &op);
  bool simplifyStopGradient(Op &op);
  bool simplifyNeg(Op &op);
  bool simplifyTranspose(Op &op);
  bool simplifyReshapeOrBroadcast(Op &op);
  bool simplifySingleOperandList(Op &op);
  bool reanchor(Op &op);

  /// `v` as a value of `type`: itself, or broadcast_to it. Null when `v`
  /// does not broadcast to `type`.
  Value *broadcastTo(Value *v, const TensorType &type, const Op &like);
  bool replaceWith(Op &op, Value *v) { return v && rewriter.replaceOp(op, v); }

  bool isZero(const Value *v) const { return zeros.contains(v); }

  Function &fn;
  FunctionRewriter rewriter;
  /// Structural zeros found so far in this walk.
  llvm::DenseSet<const Value *> zeros;
  /// The first value of each type in the function, with its op index (-1
  /// for a parameter): where a new `zeros_like` can take its type from.
  llvm::DenseMap<TensorType, std::pair<int64_t, Value *>> firstOfType;
  int64_t currentIndex = 0;
};

bool Simplifier::runOnce() {
  zeros.clear();
  firstOfType.clear();
  for (Value *p : fn.getParams())
    firstOfType.try_emplace(p->getType(), -1, p);
  for (const auto &[index, op] : llvm::enumerate(fn.getOps()))
    for (Value *r : op->getResults())
      firstOfType.try_emplace(r->getType(), int64_t(index), r);
  currentIndex = 0;
  return rewriter.run([&](Op &op) {
    bool replaced = visit(op);
    ++currentIndex;
    return replaced;
  });
}

bool Simplifier::visit(Op &op) {
  if (op.getKind() == OpKind::Constant) {
    // An integer or bool zero is exact under every rule below.
    if (!isFloat(op.getResult()->getType().dtype) &&
        classifyConstantZero(op.getResult()) != ConstantZero::None)
      zeros.insert(op.getResult());
    return false;
  }
  // A loop's body is another function: left alone, like a call.
  if (op.getKind() == OpKind::Call || op.getKind() == OpKind::ExternCall ||
      op.getKind() == OpKind::For || op.getKind() == OpKind::If ||
      hasCustomGradient(op))
    return false;
  if (op.getKind() == OpKind::ZerosLike)
    return simplifyZerosLike(op);
  if (op.getKind() == OpKind::Identity)
    return replaceWith(op, op.getOperand(0));
  if (resultIsZero(op))
    return replaceByZeros(op);

  switch (op.getKind()) {
  case OpKind::OnesLike:
    return reanchor(op);
  case OpKind::StopGradient:
    return simplifyStopGradient(op);
  case OpKind::Neg:
    return simplifyNeg(op);
  case OpKind::Add:
    return simplifyAdd(op);
  case OpKind::Sub:
    return simplifySub(op);
  case OpKind::Mul:
  case OpKind::Div:
    return simplifyMulDiv(op);
  case OpKind::Select:
    // select(c, x, x) is x (broadcast to the condition's shape).
    if (op.getOperand(1) == op.getOperand(2))
      return replaceWith(
          op, broadcastTo(op.getOperand(1), op.getResult()->getType(), op));
    return false;
  case OpKind::Transpose:
    return simplifyTranspose(op);
  case OpKind::Reshape:
  case OpKind::BroadcastTo:
    return simplifyReshapeOrBroadcast(op);
  case OpKind::Concat:
  case OpKind::Split:
    return simplifySingleOperandList(op);
  default:
    return false;
  }
}

//===----------------------------------------------------------------------===//
// Zero propagation
//===----------------------------------------------------------------------===//

/// Whether every result of `op` is a structural zero because of which of
/// its operands are: the op table's `zeroWhen` says when an op maps zero
/// inputs to zero outputs, exactly (sum, transpose, relu, ... of +0.0 are
/// +0.0) or structurally (a * 0, matmul(0, a), neg(0), mean(0) are "no
/// contribution" whatever `a` holds).
bool Simplifier::resultIsZero(const Op &op) const {
  auto zero = [&](unsigned i) { return isZero(op.getOperand(i)); };
  const OpInfo &info = op.getInfo();
  // An integer division by zero must still fail at run time.
  if (info.has(IntDivision) && !isFloat(op.getResult()->getType().dtype))
    return false;
  switch (info.zeroWhen) {
  case ZeroWhen::Never:
    return false;
  case ZeroWhen::First:
    return zero(0);
  case ZeroWhen::All:
    return llvm::all_of(op.getOperands(),
                        [&](const Value *v) { return isZero(v); });
  case ZeroWhen::Any:
    return llvm::any_of(op.getOperands(),
                        [&](const Value *v) { return isZero(v); });
  case ZeroWhen::Values:
    return zero(1) && zero(2);
  }
  return false;
}

/// A structural zero of `type` to stand for a result of `op`: a zero
/// operand of that type, or a new `zeros_like` of the first value of that
/// type in the function (a parameter if there is one; step 4 moves it to
/// the cheapest value later). Null when no value of the type precedes
/// `op`.
Value *Simplifier::findZeroOfType(const Op &op, const TensorType &type) {
  for (Value *v : op.getOperands())
    if (isZero(v) && v->getType() == type)
      return v;
  auto it = firstOfType.find(type);
  if (it == firstOfType.end() || it->second.first >= currentIndex)
    return nullptr;
  Value *anchor = rewriter.lookup(it->second.second);
  if (isZero(anchor))
    return anchor;
  Value *zero = rewriter.create1(OpKind::ZerosLike, {anchor}, {}, op);
  if (zero)
    zeros.insert(zero);
  return zero;
}

/// Replaces every result of `op` by a structural zero of its type. When
/// some result has no zero to stand for it, `op` stays (made exact by
/// exactZeroOp) and its results are recorded as zeros, so that its users
/// still simplify.
bool Simplifier::replaceByZeros(Op &op) {
  // Check first, so that no zeros_like is made for a rewrite that fails.
  for (Value *r : op.getResults()) {
    bool hasOperand = llvm::any_of(op.getOperands(), [&](const Value *v) {
      return isZero(v) && v->getType() == r->getType();
    });
    auto it = firstOfType.find(r->getType());
    if (!hasOperand &&
        (it == firstOfType.end() || it->second.first >= currentIndex)) {
      if (Value *exact = exactZeroOp(op)) {
        zeros.insert(exact);
        return rewriter.replaceOp(op, exact);
      }
      for (Value *result : op.getResults())
        zeros.insert(result);
      return false;
    }
  }
  llvm::SmallVector<Value *, 2> values;
  for (Value *r : op.getResults()) {
    // The results of unstack and split share types: one zero serves all.
    auto same = llvm::find_if(
        values, [&](const Value *v) { return v->getType() == r->getType(); });
    values.push_back(same != values.end() ? *same
                                          : findZeroOfType(op, r->getType()));
  }
  return rewriter.replaceOp(op, values);
}

/// An op that stays although its result is a structural zero must compute
/// zero at run time too, or a user that simplifies (`z + a` is `a`) and a
/// user that computes (`exp(z)`) would see different values of z. Most ops
/// of resultIsZero's table give exactly zero on zero operands, but not
/// these; each becomes an op on zeros of the same result type:
///   mean(z) over an empty axis is 0/0 = NaN, max(z) is -inf:  sum(z);
///   z * a, z @ a are NaN where a is inf or NaN:  z * zeros_like(a);
///   z / a is NaN where a is 0 or NaN:            z * zeros_like(a).
/// Null when the op is exact already (or the new op cannot be made).
Value *Simplifier::exactZeroOp(Op &op) {
  switch (op.getKind()) {
  case OpKind::Mean:
  case OpKind::Max:
    return rewriter.create1(OpKind::Sum, {op.getOperand(0)}, op.getAttrs(), op);
  case OpKind::Mul:
  case OpKind::MatMul:
  case OpKind::Div: {
    if (op.getKind() != OpKind::Div && isZero(op.getOperand(0)) &&
        isZero(op.getOperand(1)))
      return nullptr;
    llvm::SmallVector<Value *, 2> operands;
    for (Value *v : op.getOperands()) {
      if (!isZero(v)) {
        v = rewriter.create1(OpKind::ZerosLike, {v}, {}, op);
        if (!v)
          return nullptr;
        zeros.insert(v);
      }
      operands.push_back(v);
    }
    OpKind kind = op.getKind() == OpKind::Div ? OpKind::Mul : op.getKind();
    return rewriter.create1(kind, operands, op.getAttrs(), op);
  }
  default:
    return nullptr;
  }
}

/// zeros_like(z) of a structural zero is z; otherwise it is a zero and
/// may take its type from a cheaper value.
bool Simplifier::simplifyZerosLike(Op &op) {
  Value *x = op.getOperand(0);
  if (isZero(x))
    return replaceWith(op, x);
  zeros.insert(op.getResult());
  return reanchor(op);
}

/// zeros_like(x) and ones_like(x) read only the type of x. Pointing them
/// at a parameter of that type, or else at the earliest value of that type
/// in the chain that computes x, can leave the computation of x dead.
bool Simplifier::reanchor(Op &op) {
  Value *x = op.getOperand(0);
  if (x->isParam())
    return false;
  const TensorType &type = x->getType();
  Value *anchor = x;
  auto param = llvm::find_if(
      fn.getParams(), [&](const Value *p) { return p->getType() == type; });
  if (param != fn.getParams().end()) {
    anchor = *param;
  } else {
    while (const Op *def = anchor->getDefiningOp()) {
      auto same = llvm::find_if(def->getOperands(), [&](const Value *v) {
        return v->getType() == type;
      });
      if (same == def->getOperands().end())
        break;
      anchor = *same;
    }
  }
  if (anchor == x)
    return false;
  op.setOperand(0, anchor);
  rewriter.markChanged();
  return false;
}

//===----------------------------------------------------------------------===//
// Identities
//===----------------------------------------------------------------------===//

Value *Simplifier::broadcastTo(Value *v, const TensorType &type,
                               const Op &like) {
  if (v->getType() == type)
    return v;
  if (v->getType().dtype != type.dtype)
    return nullptr;
  std::optional<Shape> s = broadcastShapes(v->getType().shape, type.shape);
  if (!s || *s != type.shape)
    return nullptr;
  AttrList attrs;
  attrs.set("shape", type.shape);
  return rewriter.create1(OpKind::BroadcastTo, {v}, std::move(attrs), like);
}

/// add(a, 0) = add(0, a) = a for a structural zero. For a float constant
/// only -0.0 is exact: a + (-0.0) = a for every a, but -0.0 + (+0.0) is
/// +0.0, so `a + 0.0` stays.
bool Simplifier::simplifyAdd(Op &op) {
  const TensorType &type = op.getResult()->getType();
  for (unsigned i = 0; i < 2; ++i) {
    Value *zero = op.getOperand(i), *other = op.getOperand(1 - i);
    if (isZero(zero) || classifyConstantZero(zero) == ConstantZero::AllNegative)
      return replaceWith(op, broadcastTo(other, type, op));
  }
  return simplifyRowAdd(op);
}

/// The rows of `v` along one axis when they are known: a scatter_add of a
/// constant in-range scalar index (the adjoint of reading `x[c]`) is one
/// row, the others structural zeros; a stack is its operands.
std::optional<KnownRows> Simplifier::knownRows(Value *v) const {
  if (const Op *scatter = plainDef(v, OpKind::ScatterAdd)) {
    Value *index = scatter->getOperand(1);
    const std::vector<double> *values = getConstantValues(index);
    int64_t axis = scatter->getAttrs().getInt("axis");
    const Dim &n = v->getType().shape[axis];
    if (!values || values->size() != 1 || !index->getType().isScalar() ||
        !n.isKnown() || n.getSize() > maxKnownRows)
      return std::nullopt;
    // An index out of range stays: it must fail at run time.
    double c = (*values)[0];
    if (c < 0 || c >= double(n.getSize()))
      return std::nullopt;
    KnownRows known{axis, {}, index};
    known.rows.assign(n.getSize(), nullptr);
    known.rows[int64_t(c)] = scatter->getOperand(0);
    return known;
  }
  if (const Op *stack = plainDef(v, OpKind::Stack)) {
    if (stack->getNumOperands() > maxKnownRows)
      return std::nullopt;
    KnownRows known{stack->getAttrs().getInt("axis"), {}, nullptr};
    for (Value *row : stack->getOperands())
      known.rows.push_back(isZero(row) ? nullptr : row);
    return known;
  }
  return std::nullopt;
}

/// add(a, b) of two values known row by row along the same axis is one
/// value built row by row: row r is a[r] + b[r], or the one of them that
/// is not a structural zero. A gradient that reads `w[0]`, `w[1]`, ... of
/// a parameter adds one scatter_add per read, each a tensor of zeros with
/// one row set; the sum of them becomes one scatter_add (all on one row)
/// or one stack of the rows, zeros_like where no read lands.
bool Simplifier::simplifyRowAdd(Op &op) {
  const TensorType &type = op.getResult()->getType();
  Value *a = op.getOperand(0), *b = op.getOperand(1);
  if (a->getType() != type || b->getType() != type)
    return false;
  std::optional<KnownRows> x = knownRows(a), y = knownRows(b);
  if (!x || !y || x->axis != y->axis || x->rows.size() != y->rows.size())
    return false;
  const size_t n = x->rows.size();
  size_t nonzero = 0, last = 0;
  for (size_t r = 0; r < n; ++r)
    if (x->rows[r] || y->rows[r])
      ++nonzero, last = r;
  // One row set, by a scatter_add on that row: a scatter_add of the sum.
  Value *index = x->rows[last] ? x->index : nullptr;
  if (!index && y->rows[last])
    index = y->index;
  Value *zero = nullptr;
  if (nonzero != 1 || !index) {
    const Value *sample = x->rows[last] ? x->rows[last] : y->rows[last];
    if (nonzero < n && !(zero = findZeroOfType(op, sample->getType())))
      return false;
  }
  llvm::SmallVector<Value *, 8> rows;
  for (size_t r = 0; r < n; ++r) {
    Value *p = x->rows[r], *q = y->rows[r];
    rows.push_back(p && q ? rewriter.create1(OpKind::Add, {p, q}, {}, op)
                   : p    ? p
                   : q    ? q
                          : zero);
  }
  AttrList attrs;
  attrs.set("axis", x->axis);
  if (nonzero == 1 && index) {
    attrs.set("size", Shape{Dim::known(int64_t(n))});
    return replaceWith(op,
                       rewriter.create1(OpKind::ScatterAdd, {rows[last], index},
                                        std::move(attrs), op));
  }
  return replaceWith(
      op, rewriter.create1(OpKind::Stack, rows, std::move(attrs), op));
}

/// sub(a, 0) = a and sub(0, a) = neg(a) for a structural zero. For float
/// constants: a - (+0.0) = a exactly, and (-0.0) - a = neg(a) exactly
/// (-0.0 - (+0.0) = -0.0 = neg(+0.0)); the other signs are not exact.
bool Simplifier::simplifySub(Op &op) {
  const TensorType &type = op.getResult()->getType();
  Value *x = op.getOperand(0), *y = op.getOperand(1);
  if (isZero(y) || classifyConstantZero(y) == ConstantZero::AllPositive)
    return replaceWith(op, broadcastTo(x, type, op));
  if (isZero(x) || classifyConstantZero(x) == ConstantZero::AllNegative) {
    // Check the broadcast before making the neg, so that a failed rewrite
    // leaves nothing behind.
    std::optional<Shape> s = broadcastShapes(y->getType().shape, type.shape);
    if (!s || *s != type.shape)
      return false;
    Value *negated = rewriter.create1(OpKind::Neg, {y}, {}, op);
    return negated && replaceWith(op, broadcastTo(negated, type, op));
  }
  return false;
}

/// x * 1 = 1 * x = x / 1 = x, exactly (NaN, infinities and -0.0 too).
bool Simplifier::simplifyMulDiv(Op &op) {
  const TensorType &type = op.getResult()->getType();
  Value *x = op.getOperand(0), *y = op.getOperand(1);
  if (isOne(y))
    return replaceWith(op, broadcastTo(x, type, op));
  if (op.getKind() == OpKind::Mul && isOne(x))
    return replaceWith(op, broadcastTo(y, type, op));
  return false;
}

/// stop_gradient stays: the function may be differentiated later (a
/// `_grad` may be differentiated again). It goes only where no gradient
/// could flow anyway: around a constant (which has no operands) and
/// around another stop_gradient. A zero operand was handled before.
bool Simplifier::simplifyStopGradient(Op &op) {
  Value *x = op.getOperand(0);
  if (isDefinedBy(x, OpKind::Constant) || plainDef(x, OpKind::StopGradient))
    return replaceWith(op, x);
  return false;
}

/// neg(neg(x)) = x exactly.
bool Simplifier::simplifyNeg(Op &op) {
  if (const Op *inner = plainDef(op.getOperand(0), OpKind::Neg))
    return replaceWith(op, inner->getOperand(0));
  return false;
}

/// transpose(x, identity) = x. transpose(transpose(x, p), q) is
/// transpose(x, r) with r[i] = p[q[i]]: result axis i is axis q[i] of the
/// inner result, which is axis p[q[i]] of x.
bool Simplifier::simplifyTranspose(Op &op) {
  const std::vector<int64_t> &outer = op.getAttrs().getInts("perm");
  if (isIdentityPerm(outer))
    return replaceWith(op, op.getOperand(0));
  const Op *innerOp = plainDef(op.getOperand(0), OpKind::Transpose);
  if (!innerOp)
    return false;
  const std::vector<int64_t> &inner = innerOp->getAttrs().getInts("perm");
  std::vector<int64_t> composed;
  for (int64_t q : outer)
    composed.push_back(inner[q]);
  Value *x = innerOp->getOperand(0);
  if (isIdentityPerm(composed))
    return replaceWith(op, x);
  AttrList attrs;
  attrs.set("perm", composed);
  return replaceWith(
      op, rewriter.create1(OpKind::Transpose, {x}, std::move(attrs), op));
}

/// reshape or broadcast_to to the operand's own type is the operand.
/// reshape(reshape(x)) is one reshape (both keep row-major order);
/// broadcast_to(broadcast_to(x)) is one broadcast_to. When the composed op
/// would give x its own type back, it is x.
bool Simplifier::simplifyReshapeOrBroadcast(Op &op) {
  const TensorType &type = op.getResult()->getType();
  if (op.getOperand(0)->getType() == type)
    return replaceWith(op, op.getOperand(0));
  const Op *inner = plainDef(op.getOperand(0), op.getKind());
  if (!inner)
    return false;
  Value *x = inner->getOperand(0);
  if (x->getType() == type)
    return replaceWith(op, x);
  AttrList attrs;
  attrs.set("shape", type.shape);
  return replaceWith(op,
                     rewriter.create1(op.getKind(), {x}, std::move(attrs), op));
}

/// concat of one tensor, and split into one part, are that tensor.
bool Simplifier::simplifySingleOperandList(Op &op) {
  if (op.getNumOperands() != 1 || op.getNumResults() != 1)
    return false;
  return replaceWith(op, op.getOperand(0));
}

} // namespace

bool gradc::runSimplify(Module &module, DiagnosticEngine &) {
  for (const auto &fn : module.getFunctions()) {
    Simplifier simplifier(*fn);
    // Each walk sees operands already simplified; another walk is needed
    // only for zeros_like anchors and for values named later in the
    // function. Bounded so that a bug cannot loop forever.
    for (unsigned round = 0; round < 32 && simplifier.runOnce(); ++round)
      ;
  }
  return true;
}
