//===- Lower.cpp - Tensor IR to loop IR: the driver -----------------------===//
//
// Lowers each function of a verified module:
//
//  1. Each parameter becomes a Param buffer; each returned value that an
//     op computes (and that is not returned twice) is given the
//     function's Output buffer directly, so it is written in place; for a
//     view (a reshape) the value it views is.
//  2. The ops lower in order, each through its family's file; every
//     statement carries the op as its origin.
//  3. Each output that no op wrote (a returned parameter, a value
//     returned twice) is filled by a copy loop.
//  4. Views that nothing reads go.
//
// Helpers for loop nests and affine indices live here, so that no family
// writes its own index algebra.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "gradc/IR/Interpreter.h"

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/StringSet.h"

#include <cassert>
#include <cmath>
#include <functional>
#include <limits>

using namespace gradc;
using namespace gradc::loops;

std::vector<ExprPtr> Nest::indices(size_t from, size_t to) const {
  std::vector<ExprPtr> out;
  for (size_t i = from; i < std::min(to, idx.size()); ++i)
    out.push_back(idx[i]->clone());
  return out;
}

Lowering::Lowering(const ir::Module &module, const ir::Function &src,
                   LoopFunction &fn)
    : module(module), src(src), fn(fn), names(src) {}

std::vector<int64_t> loops::intListAttr(const ir::Op &op,
                                        llvm::StringRef name) {
  const AttrValue *attr = op.getAttrs().find(name);
  if (!attr)
    return {};
  if (const int64_t *one = std::get_if<int64_t>(attr))
    return {*one};
  if (const auto *many = std::get_if<std::vector<int64_t>>(attr))
    return *many;
  return {};
}

static std::string plainName(const ir::ValueNamer &names, const ir::Value *v) {
  std::string s = names.get(v);
  return s.size() > 1 && s[0] == '%' ? s.substr(1) : s;
}

Buffer *Lowering::bufferOf(const ir::Value *v) {
  if (Buffer *b = buffers.lookup(v))
    return b;
  auto splat = splats.find(v);
  if (splat == splats.end())
    return nullptr;
  const TensorType &type = v->getType();
  Buffer *b = fn.addBuffer(Buffer::Kind::Scratch, type.dtype, type.shape,
                           plainName(names, v));
  buffers[v] = b;
  // The fill goes before the statements of the op being lowered, which
  // may already have opened its loops.
  Block fill;
  Nest n = openNest(fill, type.shape);
  store(*n.body, b, flatIndex(type.shape, n.idx),
        constant(fromDType(type.dtype), splat->second));
  for (StmtPtr &s : fill)
    top().insert(top().begin() + opStart++, std::move(s));
  return b;
}

bool Lowering::mayAlias(const ir::Op &op, unsigned i) const {
  return !outputFor.count(op.getResult(i));
}

Buffer *Lowering::resultBuffer(const ir::Op &op, unsigned i) {
  const ir::Value *v = op.getResult(i);
  Buffer *b = outputFor.lookup(v);
  if (!b)
    b = fn.addBuffer(Buffer::Kind::Scratch, v->getType().dtype,
                     v->getType().shape, plainName(names, v));
  buffers[v] = b;
  return b;
}

Buffer *Lowering::local(ScalarType type, llvm::StringRef name) {
  DType d = type == ScalarType::F64    ? DType::F64
            : type == ScalarType::I32  ? DType::I32
            : type == ScalarType::Bool ? DType::Bool
                                       : DType::F32;
  return fn.addBuffer(Buffer::Kind::Local, d, {}, name);
}

void Lowering::setOrigin(const ir::Op *op) {
  opStart = top().size();
  origin = Origin();
  if (!op)
    return;
  origin.op = op;
  std::string result, rule;
  if (op->getNumResults())
    result = names.get(op->getResult(0));
  origin.loc = op->getLoc();
  origin.provenance = op->getProvenance();
  if (origin.provenance != ir::Provenance::Source)
    rule = op->getNote();
  else if (op->getGradRule().isSet())
    rule = "rule '" + op->getGradRule().ruleName + "' (" +
           op->getGradRule().via + ")";
  origin.text = fn.saveOrigin(op->getName(), result, rule);
}

void Lowering::add(Block &block, StmtPtr s) {
  s->origin = origin;
  block.push_back(std::move(s));
}

void Lowering::store(Block &block, Buffer *b, ExprPtr idx, ExprPtr value) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::Store);
  s->buffer = b;
  s->index = std::move(idx);
  s->value = cast(fromDType(b->dtype), std::move(value));
  add(block, std::move(s));
}

void Lowering::accumulate(Block &block, Buffer *b, ExprPtr idx, Combiner c,
                          ExprPtr value) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::Accumulate);
  s->buffer = b;
  s->index = std::move(idx);
  s->combiner = c;
  s->value = cast(fromDType(b->dtype), std::move(value));
  add(block, std::move(s));
}

void Lowering::check(Block &block, ExprPtr cond, CheckStatus status,
                     llvm::StringRef message) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::Check);
  s->cond = std::move(cond);
  s->status = status;
  s->message = message.str();
  add(block, std::move(s));
}

Nest Lowering::openNest(Block &block, llvm::ArrayRef<Dim> shape) {
  Nest nest;
  Block *at = &block;
  for (const Dim &d : shape) {
    if (d.isKnown() && d.getSize() == 1) {
      nest.idx.push_back(index(0));
      continue;
    }
    auto loop = std::make_unique<Stmt>(Stmt::Kind::For);
    loop->var = fn.numVars++;
    loop->extent = extentOf(d);
    nest.idx.push_back(loopVar(loop->var));
    add(*at, std::move(loop));
    at = &at->back()->body;
  }
  nest.body = at;
  return nest;
}

std::pair<Block *, ExprPtr> Lowering::openLoop(Block &block, ExprPtr extent) {
  if (isIndexConst(*extent, 0))
    return {nullptr, nullptr};
  if (isIndexConst(*extent, 1))
    return {&block, index(0)};
  auto loop = std::make_unique<Stmt>(Stmt::Kind::For);
  loop->var = fn.numVars++;
  loop->extent = std::move(extent);
  ExprPtr var = loopVar(loop->var);
  add(block, std::move(loop));
  return {&block.back()->body, std::move(var)};
}

Buffer *Lowering::openLanes(Block &block, bool inF32) {
  int64_t w = inF32 ? ir::reductionLanesF32 : ir::reductionLanes;
  DType dtype = inF32 ? DType::F32 : DType::F64;
  Buffer *lanes =
      fn.addBuffer(Buffer::Kind::Stack, dtype, {Dim::known(w)}, "lanes");
  auto [body, l] = openLoop(block, index(w));
  store(*body, lanes, l->clone(), constant(fromDType(dtype), 0));
  return lanes;
}

void Lowering::accumulateLanes(
    Block &block, Buffer *lanes, const Dim &n,
    llvm::function_ref<ExprPtr(const ExprPtr &k)> term) {
  accumulateLanes(block, lanes, n,
                  [&](Block &, const ExprPtr &k) { return term(k); });
}

void Lowering::accumulateLanes(
    Block &block, Buffer *lanes, const Dim &n,
    llvm::function_ref<ExprPtr(Block &body, const ExprPtr &k)> term,
    Combiner combiner) {
  const int64_t w = lanes->shape[0].getSize();
  // Known extents fold, so that a short axis prints without divisions.
  ExprPtr chunks, rest, restStart;
  if (n.isKnown()) {
    chunks = index(n.getSize() / w);
    rest = index(n.getSize() % w);
    restStart = index(n.getSize() - n.getSize() % w);
  } else {
    chunks = prim(PrimOp::Div, extentOf(n), index(w));
    rest = prim(PrimOp::Rem, extentOf(n), index(w));
    restStart = prim(PrimOp::Sub, extentOf(n), rest->clone());
  }
  if (auto [body, c] = openLoop(block, std::move(chunks)); body) {
    auto [inner, l] = openLoop(*body, index(w));
    ExprPtr k = prim(PrimOp::Add, prim(PrimOp::Mul, std::move(c), index(w)),
                     l->clone());
    ExprPtr t = term(*inner, k);
    accumulate(*inner, lanes, std::move(l), combiner, std::move(t));
  }
  if (auto [body, l] = openLoop(block, std::move(rest)); body) {
    ExprPtr k = prim(PrimOp::Add, std::move(restStart), l->clone());
    ExprPtr t = term(*body, k);
    accumulate(*body, lanes, std::move(l), combiner, std::move(t));
  }
}

void Lowering::maxLanes(Block &block, Buffer *m, const Dim &n,
                        llvm::function_ref<ExprPtr(const ExprPtr &k)> at) {
  const int64_t w = ir::reductionLanes;
  ScalarType t = fromDType(m->dtype);
  bool isFloat = isFloatType(t);
  double lowest =
      isFloat ? -double(INFINITY) : double(std::numeric_limits<int32_t>::min());
  if (n.isKnown() && n.getSize() <= w) {
    store(block, m, index(0), constant(t, lowest));
    if (auto [body, k] = openLoop(block, index(n.getSize())); body)
      accumulate(*body, m, index(0), Combiner::Max, at(k));
    return;
  }
  Buffer *lanes =
      fn.addBuffer(Buffer::Kind::Stack, m->dtype, {Dim::known(w)}, "max_lanes");
  // Redone below when the lanes give 0 (or NaN).
  lanes->zeroSignFree = isFloat;
  {
    auto [body, l] = openLoop(block, index(w));
    store(*body, lanes, l->clone(), constant(t, lowest));
  }
  accumulateLanes(
      block, lanes, n, [&](Block &, const ExprPtr &k) { return at(k); },
      Combiner::Max);
  auto pair = [&](int64_t a) {
    return prim(PrimOp::Max, load(lanes, index(a)), load(lanes, index(a + 1)));
  };
  store(block, m, index(0),
        prim(PrimOp::Max, prim(PrimOp::Max, pair(0), pair(2)),
             prim(PrimOp::Max, pair(4), pair(6))));
  if (!isFloat)
    return;
  // 0 or NaN: the one accumulator decides the sign or the NaN.
  auto redo = [&] {
    return prim(PrimOp::Or, prim(PrimOp::Eq, load(m, index(0)), constant(t, 0)),
                prim(PrimOp::IsNaN, load(m, index(0))));
  };
  Buffer *again = local(t, "m_in_order");
  store(block, again, index(0), constant(t, lowest));
  if (auto [body, k] = openLoop(block, select(redo(), extentOf(n), index(0)));
      body)
    accumulate(*body, again, index(0), Combiner::Max, at(k));
  store(block, m, index(0),
        select(redo(), load(again, index(0)), load(m, index(0))));
}

ExprPtr Lowering::combineLanes(Buffer *lanes) {
  // ir::combinePairwise's tree over [a, a + n).
  std::function<ExprPtr(int64_t, int64_t)> tree = [&](int64_t a, int64_t n) {
    if (n == 1)
      return load(lanes, index(a));
    return prim(PrimOp::Add, tree(a, n / 2), tree(a + n / 2, n / 2));
  };
  return tree(0, lanes->shape[0].getSize());
}

// With n <= W terms, lane k < n holds +0 + t_k and every other lane +0.
// Dropping the known +0 lanes from combineLanes' tree and the +0 from
// each lane changes no value but the sign of a zero: x + (+-0) is x for
// every x that is not a zero, and a zero plus a zero is a zero. And no
// value of the lanes' tree is -0 (+0 + t is not, and a round-to-nearest
// sum is -0 only when both terms are), so the final +0, which turns -0
// into +0 and keeps everything else, makes the two bit for bit equal
// (NaN included: the same NaN meets only zeros that it absorbs).
ExprPtr
Lowering::sumFewTerms(Block &block, int64_t n,
                      llvm::function_ref<ExprPtr(const ExprPtr &k)> term,
                      bool inF32) {
  return sumFewTerms(
      block, n, [&](Block &, const ExprPtr &k) { return term(k); }, inF32);
}

ExprPtr Lowering::sumFewTerms(
    Block &block, int64_t n,
    llvm::function_ref<ExprPtr(Block &body, const ExprPtr &k)> term,
    bool inF32) {
  const int64_t w = inF32 ? ir::reductionLanesF32 : ir::reductionLanes;
  assert(n >= 1 && n <= w && "a sum of 1 to W terms");
  DType dtype = inF32 ? DType::F32 : DType::F64;
  Buffer *terms =
      fn.addBuffer(Buffer::Kind::Stack, dtype, {Dim::known(n)}, "terms");
  auto [body, k] = openLoop(block, index(n));
  ExprPtr t = term(*body, k);
  store(*body, terms, k->clone(), std::move(t));
  // combineLanes' tree over [a, b), null where every lane is empty.
  std::function<ExprPtr(int64_t, int64_t)> tree = [&](int64_t a, int64_t b) {
    if (a >= n)
      return ExprPtr();
    if (b - a == 1)
      return load(terms, index(a));
    ExprPtr left = tree(a, (a + b) / 2), right = tree((a + b) / 2, b);
    if (!right)
      return left;
    return prim(PrimOp::Add, std::move(left), std::move(right));
  };
  return prim(PrimOp::Add, tree(0, w), constant(fromDType(dtype), 0));
}

ExprPtr Lowering::flatIndex(llvm::ArrayRef<Dim> shape,
                            llvm::ArrayRef<ExprPtr> idx) {
  ExprPtr flat = index(0);
  for (size_t k = 0; k < shape.size(); ++k)
    flat = prim(
        PrimOp::Add, std::move(flat),
        prim(PrimOp::Mul, idx[k]->clone(), extentOf(shape.drop_front(k + 1))));
  return flat;
}

ExprPtr Lowering::broadcastIndex(llvm::ArrayRef<Dim> in,
                                 llvm::ArrayRef<ExprPtr> idx) {
  size_t lead = idx.size() - in.size();
  std::vector<ExprPtr> own;
  for (size_t k = 0; k < in.size(); ++k) {
    bool broadcast = in[k].isKnown() && in[k].getSize() == 1;
    own.push_back(broadcast ? index(0) : idx[lead + k]->clone());
  }
  return flatIndex(in, own);
}

ExprPtr Lowering::read(const ir::Value *v, llvm::ArrayRef<ExprPtr> idx) {
  if (!buffers.count(v)) {
    auto splat = splats.find(v);
    if (splat != splats.end())
      return constant(fromDType(v->getType().dtype), splat->second);
  }
  return load(bufferOf(v), broadcastIndex(v->getType().shape, idx));
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

static bool isView(OpKind kind) { return kind == OpKind::Reshape; }

static bool lowerOp(Lowering &l, const ir::Op &op) {
  switch (op.getKind()) {
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max:
  case OpKind::LogSumExp:
    return lowerReduce(l, op);
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::SoftmaxCrossEntropy:
    return lowerSoftmax(l, op);
  case OpKind::MatMul:
    return lowerMatMul(l, op);
  case OpKind::Transpose:
  case OpKind::Reshape:
  case OpKind::BroadcastTo:
  case OpKind::Stack:
  case OpKind::Unstack:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Slice:
  case OpKind::Pad:
  case OpKind::OneHot:
    return lowerLayout(l, op);
  case OpKind::Constant:
  case OpKind::Call:
  case OpKind::ExternCall:
    return lowerConstantOrCall(l, op);
  case OpKind::For:
  case OpKind::Take:
  case OpKind::ScatterAdd:
  case OpKind::If:
    return lowerControl(l, op);
  default:
    return lowerElementwise(l, op);
  }
}

/// Stacks and concatenations along the first axis in place: a value that
/// only such an op uses, once, and that an op computes (not a parameter, a
/// constant or a view) is computed straight into its part of the op's
/// result, a view of it at the part's offset, and the op copies only the
/// other parts. The gradient of an LSTM cell stacks the rows of its weight
/// gradients twice ([4, B] rows, then [2, 4, B]) in each call of the loop
/// body: two scratch buffers and their copies per call. The ops are walked
/// from the last, so that a stack of stacks is planned from the outside
/// in: the inner stack's result is already a view of the outer one's.
void Lowering::planPartsInPlace() {
  llvm::DenseMap<const ir::Value *, unsigned> uses;
  for (const auto &op : src.getOps())
    for (const ir::Value *v : op->getOperands())
      ++uses[v];
  for (const ir::Value *r : src.getReturns())
    ++uses[r];
  const auto &ops = src.getOps();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const ir::Op &op = **it;
    if (op.getKind() != OpKind::Stack && op.getKind() != OpKind::Concat)
      continue;
    const ir::Value *r = op.getResult();
    std::vector<int64_t> axes = intListAttr(op, "axis");
    if (!axes.empty() && axes[0] != 0 &&
        axes[0] != -int64_t(r->getType().shape.size()))
      continue;
    auto computed = [&](const ir::Value *v) {
      if (v->isParam() || uses.lookup(v) != 1 || outputFor.count(v))
        return false;
      OpKind k = v->getDefiningOp()->getKind();
      return k != OpKind::Constant && k != OpKind::Reshape &&
             k != OpKind::Take && k != OpKind::Slice;
    };
    if (llvm::none_of(op.getOperands(), computed))
      continue;
    Buffer *whole = outputFor.lookup(r);
    if (!whole) {
      whole = fn.addBuffer(Buffer::Kind::Scratch, r->getType().dtype,
                           r->getType().shape, plainName(names, r));
      outputFor[r] = whole;
    }
    ExprPtr offset = index(0);
    for (const ir::Value *v : op.getOperands()) {
      const Shape &part = v->getType().shape;
      if (computed(v)) {
        Buffer *view = fn.addBuffer(Buffer::Kind::Alias, v->getType().dtype,
                                    part, plainName(names, v));
        view->base = whole;
        view->offset = offset->clone();
        outputFor[v] = view;
        partViews[v] = view;
      }
      offset = prim(PrimOp::Add, std::move(offset), extentOf(part));
    }
  }
}

static bool lowerFunction(const ir::Module &module, const ir::Function &src,
                          LoopFunction &fn, std::string &error) {
  fn.name = src.getName().str();
  fn.sizeNames = src.getSizeNames();
  Lowering l(module, src, fn);
  const ir::ValueNamer &names = l.valueNames();
  for (const ir::Value *p : src.getParams()) {
    Buffer *b = fn.addBuffer(Buffer::Kind::Param, p->getType().dtype,
                             p->getType().shape, plainName(names, p));
    b->position = fn.params.size();
    fn.params.push_back(b);
    l.bind(p, b);
  }
  // 1. Outputs; a value computed by an op owns the first output it is
  // returned as.
  std::vector<bool> written;
  for (const ir::Value *r : src.getReturns()) {
    std::string name = "out" + std::to_string(fn.outputs.size());
    Buffer *b = fn.addBuffer(Buffer::Kind::Output, r->getType().dtype,
                             r->getType().shape, name);
    b->position = fn.outputs.size();
    fn.outputs.push_back(b);
    // A returned view (a reshape, such as the gradient's d_x = reshape(
    // W^T @ dy) of a vector) is written in place too: the value it views,
    // the same elements in the same order, is computed into the output.
    const ir::Value *v = r;
    while (!v->isParam() && isView(v->getDefiningOp()->getKind()))
      v = v->getDefiningOp()->getOperand(0);
    bool owns = !v->isParam() && !l.outputForHas(v);
    if (owns)
      l.setOutputFor(v, b);
    written.push_back(owns);
  }
  l.planPartsInPlace();
  // 2. The ops.
  for (const auto &op : src.getOps()) {
    l.setOrigin(op.get());
    if (!lowerOp(l, *op)) {
      error = l.error;
      return false;
    }
  }
  // 3. Copies into the outputs nobody wrote.
  l.setOrigin(nullptr);
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    if (written[i])
      continue;
    const ir::Value *r = src.getReturns()[i];
    Buffer *out = fn.outputs[i];
    l.origin.text = fn.saveOrigin("", names.get(r), "");
    Nest n = l.openNest(l.top(), out->shape);
    l.store(*n.body, out, Lowering::flatIndex(out->shape, n.idx),
            load(l.bufferOf(r), Lowering::flatIndex(out->shape, n.idx)));
  }
  // 4. Views that nothing reads (a returned reshape whose value was
  // computed in its output) go.
  for (bool removed = true; removed;) {
    BufferTable<unsigned> uses = countUses(fn);
    removed = false;
    std::erase_if(fn.buffers, [&](const std::unique_ptr<Buffer> &b) {
      if (b->kind != Buffer::Kind::Alias || uses.lookup(b.get()))
        return false;
      fn.bufferNames.erase(b->name);
      removed = true;
      return true;
    });
  }
  return true;
}

std::unique_ptr<LoopModule> loops::lowerModule(const ir::Module &module,
                                               std::string &error) {
  auto out = std::make_unique<LoopModule>();
  out->sourceName = module.sourceName;
  // Rule instances are inlined after differentiation; one that is still
  // called (a module that skipped the pipeline) is lowered like any other.
  llvm::StringSet<> called;
  for (const auto &f : module.getFunctions())
    for (const auto &op : f->getOps())
      if (op->getKind() == OpKind::Call)
        called.insert(op->getCallee());
  for (const auto &f : module.getFunctions()) {
    if (f->getRole() == ir::Function::Role::RuleInstance &&
        !called.contains(f->getName()))
      continue;
    out->functions.push_back(std::make_unique<LoopFunction>());
    if (!lowerFunction(module, *f, *out->functions.back(), error))
      return nullptr;
  }
  return out;
}

bool loops::runWithLoops(const ir::Module &module, llvm::StringRef fnName,
                         llvm::ArrayRef<ir::Tensor> args,
                         std::vector<ir::Tensor> &results, std::string &error) {
  std::unique_ptr<LoopModule> lowered = lowerModule(module, error);
  if (!lowered)
    return false;
  if (!verifyLoops(*lowered, error)) {
    error = "the lowered loops are invalid: " + error;
    return false;
  }
  return evaluateLoops(*lowered, fnName, args, results, error);
}

bool loops::runWithLoopPasses(const ir::Module &module, llvm::StringRef fnName,
                              llvm::ArrayRef<ir::Tensor> args,
                              std::vector<ir::Tensor> &results,
                              std::string &error) {
  std::unique_ptr<LoopModule> lowered = lowerModule(module, error);
  if (!lowered)
    return false;
  if (!verifyLoops(*lowered, error) ||
      !runLoopPasses(*lowered, defaultLoopPipeline, error)) {
    error = "the lowered loops are invalid: " + error;
    return false;
  }
  return evaluateLoops(*lowered, fnName, args, results, error);
}
