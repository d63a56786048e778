//===- LowerCheckpoint.cpp - checkpointed reverse loops -------------------===//
//
// A checkpointed reverse loop (`for` with `recompute`, docs/Gradients.md
// "Checkpointing"; the interpreter's evalCheckpointedFor) calls the
// reverse body B.crev once per step, last step first, on the carries that
// the forward body B had at that step, recomputed from snapshots by B:
//
//   every        every-K: a forward sweep keeps the carries of steps 0,
//                K, 2K, ...; each segment, last first, is rerun into a
//                segment store and reversed (lowerEvery)
//   binomial     Griewank and Walther's revolve with S snapshots, the
//                interpreter's recursion run by an explicit stack of
//                frames (lowerBinomial)
//
// Both make the interpreter's calls of B and B.crev on the same carries in
// the same order, so the gradient is bitwise the taped one; the snapshot
// stores are counted buffers (Buffer::count) whose lengths are the
// interpreter's peak numbers of sets of carries.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <cmath>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// dst[dstOffset + flat(idx)] = src[srcOffset + flat(idx)] over `shape`.
void copyBetween(Lowering &l, Block &block, Buffer *dst,
                 const ExprPtr &dstOffset, Buffer *src,
                 const ExprPtr &srcOffset, llvm::ArrayRef<Dim> shape) {
  Nest n = l.openNest(block, shape);
  ExprPtr at = Lowering::flatIndex(shape, n.idx);
  l.store(*n.body, dst, prim(PrimOp::Add, dstOffset->clone(), at->clone()),
          load(src, prim(PrimOp::Add, srcOffset->clone(), at->clone())));
}

/// Appends `for %v < extent {}` to `block`; returns its body and `%v`.
std::pair<Block *, ExprPtr> appendLoop(Lowering &l, Block &block,
                                       ExprPtr extent) {
  auto loop = std::make_unique<Stmt>(Stmt::Kind::For);
  loop->var = l.fn.numVars++;
  loop->extent = std::move(extent);
  Block *body = &loop->body;
  ExprPtr v = loopVar(loop->var);
  l.add(block, std::move(loop));
  return {body, std::move(v)};
}

/// Appends `for %v < index(cond) {}`, a loop of one iteration or none (a
/// branch, as `if` lowers); returns its body.
Block *appendIf(Lowering &l, Block &block, ExprPtr cond) {
  return appendLoop(l, block, cast(ScalarType::Index, std::move(cond))).first;
}

/// `shape`, a callee's type, in the caller's sizes: each size name is
/// replaced by the value `call` binds it to (a known size or a size name
/// of the caller). False when a value is neither.
bool shapeAtCall(const Shape &shape, const Stmt &call, Shape &out) {
  out.clear();
  for (const Dim &d : shape) {
    if (d.isKnown()) {
      out.push_back(d);
      continue;
    }
    auto it = llvm::find_if(call.sizeArgs, [&](const auto &arg) {
      return arg.first == d.getName();
    });
    if (it == call.sizeArgs.end())
      return false;
    const Expr &v = *it->second;
    if (v.kind == Expr::Kind::Const)
      out.push_back(Dim::known(int64_t(v.value)));
    else if (v.kind == Expr::Kind::Size)
      out.push_back(Dim::named(v.name));
    else
      return false;
  }
  return true;
}

/// What both schedules share: the operands after the `carries` adjoints
/// are B's initial carries c_0 and invariants, then the rest of B.crev's.
/// The adjoints live in the op's results (`adj`, B.crev writing `adjNext`);
/// the carries B and B.crev read are `cur`, B writes `next`. Every copy
/// goes through `cur` (a call reads and writes whole buffers); B's other
/// results (stacked outputs) are dropped.
struct Checkpointed {
  Lowering &l;
  const ir::Op &op;
  const ir::Function *rev = nullptr, *fwd = nullptr;
  Dim trip;
  ExprPtr T;
  int64_t start = 0;
  bool forwardDown = false;
  size_t carried = 0, k = 0, numFwd = 0;
  std::string prefix;
  std::vector<Buffer *> adj, adjNext, cur, next;
  /// The elements of one carry.
  std::vector<ExprPtr> size;
  Buffer *t = nullptr;
  Stmt fwdCall{Stmt::Kind::Call}, revCall{Stmt::Kind::Call};

  Checkpointed(Lowering &l, const ir::Op &op) : l(l), op(op) {}

  bool init();

  /// i32(start + pos), pos = i or T - 1 - i when the differentiated loop
  /// ran downwards: the index at which it ran its step i.
  ExprPtr stepIndex(ExprPtr i) const {
    ExprPtr pos =
        forwardDown ? prim(PrimOp::Sub, prim(PrimOp::Sub, T->clone(), index(1)),
                           std::move(i))
                    : std::move(i);
    return cast(ScalarType::I32,
                prim(PrimOp::Add, index(start), std::move(pos)));
  }

  /// next = B(t(i), cur, inv).carries.
  void advance(Block &in, ExprPtr i) const {
    l.store(in, t, index(0), stepIndex(std::move(i)));
    l.add(in, cloneCall(fwdCall));
  }

  /// adj = B.crev(t(i), adj, cur, rest).
  void reverse(Block &in, ExprPtr i) const {
    l.store(in, t, index(0), stepIndex(std::move(i)));
    l.add(in, cloneCall(revCall));
    for (size_t j = 0; j < carried; ++j)
      copyBetween(l, in, adj[j], index(0), adjNext[j], index(0), adj[j]->shape);
  }

  /// Copies a set of carries: to[toSlot] = from[fromSlot], where a slot
  /// (null: none) numbers the sets of a store of several.
  void copyCarries(Block &in, const std::vector<Buffer *> &to,
                   const ExprPtr &toSlot, const std::vector<Buffer *> &from,
                   const ExprPtr &fromSlot) const {
    for (size_t j = 0; j < k; ++j) {
      auto offset = [&](const ExprPtr &slot) {
        return slot ? prim(PrimOp::Mul, slot->clone(), size[j]->clone())
                    : index(0);
      };
      copyBetween(l, in, to[j], offset(toSlot), from[j], offset(fromSlot),
                  cur[j]->shape);
    }
  }

  /// One counted store of `sets` sets of carries per carry.
  std::vector<Buffer *> store(const ExprPtr &sets,
                              llvm::StringRef suffix) const {
    std::vector<Buffer *> out;
    for (size_t j = 0; j < k; ++j) {
      out.push_back(l.fn.addBuffer(Buffer::Kind::Scratch, cur[j]->dtype, {},
                                   cur[j]->name + suffix.str()));
      out.back()->count = prim(PrimOp::Mul, sets->clone(), size[j]->clone());
    }
    return out;
  }

  /// ceil(sqrt(T)), the default K and S: a constant for a known trip; at
  /// run time floor(sqrt(max(T - 1, 0))) + 1 (the square root of an
  /// integer below 2^52 is exact where it is one), which is 1 for T = 0
  /// where ceil(sqrt(0)) is 0, a difference that no schedule sees: the
  /// every-K one runs no segment, the binomial one keeps min(S, T) = 0
  /// snapshots. (No square root of -1: its NaN would be converted.)
  ExprPtr root() const {
    if (trip.isKnown())
      return index(int64_t(std::ceil(std::sqrt(double(trip.getSize())))));
    ExprPtr below = select(prim(PrimOp::Gt, T->clone(), index(0)),
                           prim(PrimOp::Sub, T->clone(), index(1)), index(0));
    return prim(PrimOp::Add,
                cast(ScalarType::Index,
                     intrinsic(Intrinsic::Sqrt,
                               cast(ScalarType::F64, std::move(below)))),
                index(1));
  }

private:
  static StmtPtr cloneCall(const Stmt &from) {
    auto call = std::make_unique<Stmt>(Stmt::Kind::Call);
    call->callee = from.callee;
    for (const auto &[name, value] : from.sizeArgs)
      call->sizeArgs.emplace_back(name, value->clone());
    call->inputs = from.inputs;
    call->outputs = from.outputs;
    return call;
  }
};

bool Checkpointed::init() {
  const AttrList &attrs = op.getAttrs();
  rev = l.module.lookup(attrs.getString("body"));
  fwd = l.module.lookup(attrs.getString("recompute"));
  if (!rev || !fwd)
    return l.fail("'for' runs unknown body function '" +
                  attrs.getString(rev ? "recompute" : "body") + "'");
  const Shape &tripShape = attrs.getShape("trip");
  if (tripShape.size() != 1)
    return l.fail("'for' needs one 'trip'");
  trip = tripShape.front();
  T = extentOf(trip);
  start = attrs.getInt("start");
  forwardDown = !(attrs.has("reverse") && attrs.getBool("reverse"));
  carried = attrs.getInt("carries");
  k = attrs.getInt("recompute_carries");
  numFwd = fwd->getParams().size() - 1;
  if (op.getNumResults() != carried ||
      rev->getParams().size() != 1 + op.getNumOperands() ||
      carried + numFwd > op.getNumOperands() || k > numFwd ||
      fwd->getReturns().size() < k)
    return l.fail("checkpointed 'for' does not fit its bodies '" +
                  rev->getName().str() + "' and '" + fwd->getName().str() +
                  "'");

  // The adjoints start as their initial values, in the results.
  for (size_t j = 0; j < carried; ++j) {
    const ir::Value *init = op.getOperand(j);
    const Shape &shape = init->getType().shape;
    Buffer *a = l.resultBuffer(op, j);
    Nest n = l.openNest(l.top(), shape);
    l.store(*n.body, a, Lowering::flatIndex(shape, n.idx), l.read(init, n.idx));
    adj.push_back(a);
    adjNext.push_back(l.fn.addBuffer(Buffer::Kind::Scratch,
                                     init->getType().dtype, shape,
                                     a->name + ".next"));
  }
  prefix = adj.empty() ? "ckpt" : adj.front()->name;
  // cur = c_0.
  for (size_t j = 0; j < k; ++j) {
    const TensorType &type = op.getOperand(carried + j)->getType();
    std::string name = prefix + ".c" + std::to_string(j);
    cur.push_back(
        l.fn.addBuffer(Buffer::Kind::Scratch, type.dtype, type.shape, name));
    next.push_back(l.fn.addBuffer(Buffer::Kind::Scratch, type.dtype, type.shape,
                                  name + ".next"));
    size.push_back(extentOf(type.shape));
    Nest n = l.openNest(l.top(), type.shape);
    l.store(*n.body, cur[j], Lowering::flatIndex(type.shape, n.idx),
            l.read(op.getOperand(carried + j), n.idx));
  }
  t = l.local(ScalarType::I32, "t");

  // B(t, cur, inv) -> (next, B's other results into buffers of their own).
  fwdCall.callee = fwd->getName().str();
  if (!bindSizes(l, op, *fwd, /*firstParam=*/1, /*firstOperand=*/carried,
                 fwdCall))
    return false;
  fwdCall.inputs.push_back(t);
  fwdCall.inputs.insert(fwdCall.inputs.end(), cur.begin(), cur.end());
  for (size_t p = carried + k; p < carried + numFwd; ++p)
    fwdCall.inputs.push_back(l.bufferOf(op.getOperand(p)));
  fwdCall.outputs = next;
  for (size_t o = k; o < fwd->getReturns().size(); ++o) {
    const TensorType &type = fwd->getReturns()[o]->getType();
    Shape shape;
    if (!shapeAtCall(type.shape, fwdCall, shape))
      return l.fail("result " + std::to_string(o) + " of '" +
                    fwd->getName().str() + "' has a size no operand binds");
    fwdCall.outputs.push_back(l.fn.addBuffer(Buffer::Kind::Scratch, type.dtype,
                                             shape, prefix + ".y"));
  }

  // B.crev(t, adj, cur, rest) -> adjNext.
  revCall.callee = rev->getName().str();
  if (!bindSizes(l, op, *rev, /*firstParam=*/1, /*firstOperand=*/0, revCall))
    return false;
  revCall.inputs.push_back(t);
  revCall.inputs.insert(revCall.inputs.end(), adj.begin(), adj.end());
  for (size_t p = carried; p < op.getNumOperands(); ++p)
    revCall.inputs.push_back(p < carried + k ? cur[p - carried]
                                             : l.bufferOf(op.getOperand(p)));
  revCall.outputs = adjNext;
  return true;
}

/// The every-K schedule, with T = trip and K = `every` or ceil(sqrt(T)),
/// S = ceil(T / K) segments:
///
///   adj = adj_0; c = c_0
///   for %s < S {                             the forward sweep
///     snap[s] = c
///     for %q < (s + 1 < S ? K : 0) { c = B(t(s K + q), c, inv).carries }
///   }
///   for %r < S {                             segments, last first
///     s = S - 1 - r; first = s K; len = min(T - first, K)
///     seg[0] = snap[s]
///     for %q < len - 1 { seg[q + 1] = B(t(first + q), seg[q], inv).carries }
///     for %q < len {                         the segment reversed
///       j = len - 1 - q
///       adj = B.crev(t(first + j), adj, seg[j], rest)
///     }
///   }
///
/// B.crev sees at each step the carries that B had there, computed by the
/// same calls in the same order as the taped loop, so the gradient is
/// bitwise the taped one; `snap` holds S sets of carries and `seg` K
/// (buffers counted by those expressions), the interpreter's
/// ceil(T/K) + K.
void lowerEvery(Checkpointed &c) {
  Lowering &l = c.l;
  const AttrList &attrs = c.op.getAttrs();
  ExprPtr K, S;
  if (c.trip.isKnown()) {
    int64_t t = c.trip.getSize();
    int64_t every = attrs.has("every")
                        ? attrs.getInt("every")
                        : int64_t(std::ceil(std::sqrt(double(t))));
    every = std::max<int64_t>(every, 1);
    K = index(every);
    S = index((t + every - 1) / every);
  } else {
    K = attrs.has("every") ? index(std::max<int64_t>(attrs.getInt("every"), 1))
                           : c.root();
    S = prim(PrimOp::Div,
             prim(PrimOp::Sub, prim(PrimOp::Add, c.T->clone(), K->clone()),
                  index(1)),
             K->clone());
  }
  std::vector<Buffer *> snap = c.store(S, ".snap"), seg = c.store(K, ".seg");

  // The forward sweep.
  {
    auto [sweep, s] = appendLoop(l, l.top(), S->clone());
    c.copyCarries(*sweep, snap, s, c.cur, nullptr);
    auto [steps, q] = appendLoop(
        l, *sweep,
        select(prim(PrimOp::Lt, prim(PrimOp::Add, s->clone(), index(1)),
                    S->clone()),
               K->clone(), index(0)));
    c.advance(*steps,
              prim(PrimOp::Add, prim(PrimOp::Mul, s->clone(), K->clone()),
                   q->clone()));
    c.copyCarries(*steps, c.cur, nullptr, c.next, nullptr);
  }

  // The segments, last first.
  auto [segments, r] = appendLoop(l, l.top(), S->clone());
  ExprPtr s =
      prim(PrimOp::Sub, prim(PrimOp::Sub, S->clone(), index(1)), r->clone());
  ExprPtr first = prim(PrimOp::Mul, s->clone(), K->clone());
  ExprPtr left = prim(PrimOp::Sub, c.T->clone(), first->clone());
  ExprPtr len = select(prim(PrimOp::Lt, left->clone(), K->clone()),
                       left->clone(), K->clone());
  c.copyCarries(*segments, seg, index(0), snap, s);
  {
    auto [steps, q] =
        appendLoop(l, *segments, prim(PrimOp::Sub, len->clone(), index(1)));
    c.copyCarries(*steps, c.cur, nullptr, seg, q);
    c.advance(*steps, prim(PrimOp::Add, first->clone(), q->clone()));
    c.copyCarries(*steps, seg, prim(PrimOp::Add, q->clone(), index(1)), c.next,
                  nullptr);
  }
  auto [steps, q] = appendLoop(l, *segments, len->clone());
  ExprPtr at =
      prim(PrimOp::Sub, prim(PrimOp::Sub, len->clone(), index(1)), q->clone());
  c.copyCarries(*steps, c.cur, nullptr, seg, at);
  c.reverse(*steps, prim(PrimOp::Add, first->clone(), at->clone()));
}

/// The binomial schedule (Griewank and Walther's revolve), the
/// interpreter's reverseBinomial with its recursion turned into a stack
/// of frames. Frame d reverses steps [I[d], I[d] + N[d]) from the carries
/// of step I[d], kept in snapshot slot d, with F = F0 - d more snapshots,
/// F0 = min(S, T, 10000) and S = `snapshots` or ceil(sqrt(T)):
///
///   snap[0] = c_0; I[0] = 0; N[0] = T; d = T > 0 ? 0 : -1
///   for %it < 2 T {                     each frame is pushed and popped
///     if d >= 0 {                       once, and there are at most T
///       i = I[d]; n = N[d]; f = F0 - d; cur = snap[d]
///       if n == 1 {                     one step: reverse it, pop
///         adj = B.crev(t(i), adj, cur, rest); d = d - 1
///       }
///       if n > 1 && f == 0 {            no snapshot left: rerun each step
///         for %q < n {                  from step i, last first; pop
///           j = n - 1 - q; cur = snap[d]
///           for %p < j { cur = B(t(i + p), cur, inv).carries }
///           adj = B.crev(t(i + j), adj, cur, rest)
///         }
///         d = d - 1
///       }
///       if n > 1 && f > 0 {             split at m, push the right part
///         r = the least r >= 1 with beta(f, r) >= n
///         m = max(1, n - beta(f - 1, r))
///         for %p < m { cur = B(t(i + p), cur, inv).carries }
///         N[d] = m; I[d + 1] = i + m; N[d + 1] = n - m; snap[d + 1] = cur
///         d = d + 1
///       }
///     }
///   }
///
/// with beta(s, r) = C(s + r, s), saturated at 2^40, computed as the
/// interpreter does (c = c (r + q) / q for q = 1..s, exact in index
/// arithmetic, kept in an f64 local: below 2^53). A frame's `n` becomes
/// `m` when its right part is pushed, so that after the pop it reverses
/// its left part, as the recursion's loop does. The calls of B and B.crev
/// are the interpreter's, in its order, on the same carries, so the
/// gradient is bitwise the taped one; `snap` holds F0 + 1 sets of carries
/// and `cur` and `next` two more, the interpreter's peak F0 + 2 plus one.
void lowerBinomial(Checkpointed &c) {
  Lowering &l = c.l;
  const AttrList &attrs = c.op.getAttrs();
  auto minOf = [](ExprPtr a, ExprPtr b) {
    return select(prim(PrimOp::Lt, a->clone(), b->clone()), a->clone(),
                  b->clone());
  };
  ExprPtr F0;
  if (c.trip.isKnown()) {
    int64_t t = c.trip.getSize();
    int64_t snapshots = attrs.has("snapshots")
                            ? attrs.getInt("snapshots")
                            : int64_t(std::ceil(std::sqrt(double(t))));
    F0 = index(std::min<int64_t>({snapshots, t, 10000}));
  } else {
    ExprPtr S =
        attrs.has("snapshots") ? index(attrs.getInt("snapshots")) : c.root();
    F0 = minOf(minOf(std::move(S), c.T->clone()), index(10000));
  }
  ExprPtr slots = prim(PrimOp::Add, F0->clone(), index(1));
  std::vector<Buffer *> snap = c.store(slots, ".snap");
  auto frame = [&](llvm::StringRef suffix) {
    Buffer *b = l.fn.addBuffer(Buffer::Kind::Scratch, DType::I32, {},
                               c.prefix + suffix.str());
    b->count = slots->clone();
    return b;
  };
  Buffer *frameI = frame(".first"), *frameN = frame(".steps");
  // The scalars of the schedule: i32 locals, read as index; `beta` an f64
  // local.
  Buffer *d = l.local(ScalarType::I32, "d"), *i = l.local(ScalarType::I32, "i"),
         *n = l.local(ScalarType::I32, "n"), *f = l.local(ScalarType::I32, "f"),
         *r = l.local(ScalarType::I32, "r"), *m = l.local(ScalarType::I32, "m"),
         *found = l.local(ScalarType::I32, "found"),
         *beta = l.local(ScalarType::F64, "beta");
  auto get = [](Buffer *b) {
    return cast(ScalarType::Index, load(b, index(0)));
  };
  auto set = [&](Block &in, Buffer *b, ExprPtr v) {
    l.store(in, b, index(0), cast(fromDType(b->dtype), std::move(v)));
  };
  auto setAt = [&](Block &in, Buffer *b, ExprPtr at, ExprPtr v) {
    l.store(in, b, std::move(at), cast(ScalarType::I32, std::move(v)));
  };
  auto add = [](ExprPtr a, ExprPtr b) {
    return prim(PrimOp::Add, std::move(a), std::move(b));
  };
  auto sub = [](ExprPtr a, ExprPtr b) {
    return prim(PrimOp::Sub, std::move(a), std::move(b));
  };
  auto cmp = [](PrimOp op, ExprPtr a, ExprPtr b) {
    return prim(op, std::move(a), std::move(b));
  };
  // beta = C(s + r, s), saturated at 2^40.
  const double cap = double(int64_t(1) << 40);
  auto emitBeta = [&](Block &in, ExprPtr s) {
    set(in, beta, index(1));
    auto [body, q] = appendLoop(l, in, std::move(s));
    ExprPtr q1 = add(q->clone(), index(1));
    ExprPtr grown = prim(PrimOp::Div,
                         prim(PrimOp::Mul, get(beta), add(get(r), q1->clone())),
                         q1->clone());
    set(*body, beta,
        select(cmp(PrimOp::Ge, load(beta, index(0)),
                   constant(ScalarType::F64, cap)),
               constant(ScalarType::F64, cap),
               cast(ScalarType::F64, std::move(grown))));
  };

  Block &top = l.top();
  c.copyCarries(top, snap, index(0), c.cur, nullptr);
  setAt(top, frameI, index(0), index(0));
  setAt(top, frameN, index(0), c.T->clone());
  set(top, d,
      select(cmp(PrimOp::Gt, c.T->clone(), index(0)), index(0), index(-1)));
  auto [action, it] =
      appendLoop(l, top, prim(PrimOp::Mul, index(2), c.T->clone()));
  (void)it;
  Block &frameBody = *appendIf(l, *action, cmp(PrimOp::Ge, get(d), index(0)));
  set(frameBody, i, load(frameI, get(d)));
  set(frameBody, n, load(frameN, get(d)));
  set(frameBody, f, sub(F0->clone(), get(d)));
  c.copyCarries(frameBody, c.cur, nullptr, snap, get(d));
  ExprPtr many = cmp(PrimOp::Gt, get(n), index(1));

  // One step: reverse it.
  {
    Block &one = *appendIf(l, frameBody, cmp(PrimOp::Eq, get(n), index(1)));
    c.reverse(one, get(i));
    set(one, d, sub(get(d), index(1)));
  }
  // No snapshot left: each step from step i, last first.
  {
    Block &none = *appendIf(
        l, frameBody,
        prim(PrimOp::And, many->clone(), cmp(PrimOp::Eq, get(f), index(0))));
    auto [steps, q] = appendLoop(l, none, get(n));
    ExprPtr j = sub(sub(get(n), index(1)), q->clone());
    c.copyCarries(*steps, c.cur, nullptr, snap, get(d));
    auto [run, p] = appendLoop(l, *steps, j->clone());
    c.advance(*run, add(get(i), p->clone()));
    c.copyCarries(*run, c.cur, nullptr, c.next, nullptr);
    c.reverse(*steps, add(get(i), j->clone()));
    set(none, d, sub(get(d), index(1)));
  }
  // Split: the least r with beta(f, r) >= n (r < n: beta(f, n - 1) >= n),
  // m = max(1, n - beta(f - 1, r)); run to step i + m and push its frame.
  {
    Block &split = *appendIf(
        l, frameBody,
        prim(PrimOp::And, many->clone(), cmp(PrimOp::Gt, get(f), index(0))));
    set(split, r, index(1));
    set(split, found, index(0));
    auto [search, x] = appendLoop(l, split, get(n));
    (void)x;
    Block &tryR = *appendIf(l, *search, cmp(PrimOp::Eq, get(found), index(0)));
    emitBeta(tryR, get(f));
    set(tryR, found,
        cmp(PrimOp::Ge, load(beta, index(0)), cast(ScalarType::F64, get(n))));
    set(tryR, r,
        add(get(r),
            cast(ScalarType::Index, cmp(PrimOp::Eq, get(found), index(0)))));
    emitBeta(split, sub(get(f), index(1)));
    ExprPtr rest = sub(get(n), get(beta));
    set(split, m,
        select(cmp(PrimOp::Lt, rest->clone(), index(1)), index(1),
               rest->clone()));
    auto [run, p] = appendLoop(l, split, get(m));
    c.advance(*run, add(get(i), p->clone()));
    c.copyCarries(*run, c.cur, nullptr, c.next, nullptr);
    ExprPtr up = add(get(d), index(1));
    setAt(split, frameN, get(d), get(m));
    setAt(split, frameI, up->clone(), add(get(i), get(m)));
    setAt(split, frameN, up->clone(), sub(get(n), get(m)));
    c.copyCarries(split, snap, up, c.cur, nullptr);
    set(split, d, up->clone());
  }
}

} // namespace

/// A checkpointed reverse loop: `body` is B.crev, `recompute` is the
/// forward body B; `checkpoint` names the schedule.
bool loops::lowerCheckpointedFor(Lowering &l, const ir::Op &op) {
  Checkpointed c(l, op);
  if (!c.init())
    return false;
  const AttrList &attrs = op.getAttrs();
  if (attrs.has("checkpoint") && attrs.getString("checkpoint") == "binomial")
    lowerBinomial(c);
  else
    lowerEvery(c);
  return true;
}
