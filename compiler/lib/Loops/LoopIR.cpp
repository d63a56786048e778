//===- LoopIR.cpp - Loop IR nodes and builders ----------------------------===//
//
// Names of the enums (used by the printer and the docs), expression
// builders that fold index arithmetic, and walkers.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/LoopIR.h"

#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/Twine.h"

#include <cassert>
#include <cmath>
#include <cstddef>

using namespace gradc;
using namespace gradc::loops;

llvm::StringRef loops::bufferKindName(Buffer::Kind k) {
  switch (k) {
  case Buffer::Kind::Param:
    return "param";
  case Buffer::Kind::Output:
    return "output";
  case Buffer::Kind::Scratch:
    return "scratch";
  case Buffer::Kind::Stack:
    return "stack";
  case Buffer::Kind::Local:
    return "local";
  case Buffer::Kind::Constant:
    return "constant";
  case Buffer::Kind::Alias:
    return "alias";
  }
  return "?";
}

llvm::StringRef loops::combinerName(Combiner c) {
  switch (c) {
  case Combiner::Add:
    return "add";
  case Combiner::Max:
    return "max";
  case Combiner::Min:
    return "min";
  }
  return "?";
}

llvm::StringRef loops::checkStatusName(CheckStatus s) {
  switch (s) {
  case CheckStatus::DivZero:
    return "GRADC_ERROR_DIV_ZERO";
  case CheckStatus::Index:
    return "GRADC_ERROR_INDEX";
  }
  llvm_unreachable("unknown check status");
}

llvm::StringRef loops::kernelName(Kernel k) {
  switch (k) {
  case Kernel::MatMul:
    return "matmul";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Node storage
//===----------------------------------------------------------------------===//

namespace {
/// Storage for nodes of one size: slabs of NodesPerSlab nodes, and a list
/// of the freed ones, reused last in, first out. A slab is never given
/// back (a compilation frees its IR only to build more); each thread has
/// its own pool, and its slabs outlive it, so that a node may be freed on
/// another thread than the one that made it.
template <std::size_t Size> class NodePool {
  struct FreeNode {
    FreeNode *next;
  };
  static_assert(Size >= sizeof(FreeNode));
  static constexpr std::size_t NodesPerSlab = 4096;
  // Nodes hold pointers and doubles, nothing aligned more: an Expr of 64
  // bytes takes 64, not 80.
  static constexpr std::size_t Align = alignof(void *);
  static_assert(alignof(double) <= Align);
  static constexpr std::size_t Stride = (Size + Align - 1) / Align * Align;

  FreeNode *freeList = nullptr;
  char *next = nullptr, *end = nullptr;

public:
  void *allocate() {
    if (FreeNode *n = freeList) {
      freeList = n->next;
      return n;
    }
    if (next == end) {
      next = static_cast<char *>(::operator new(Stride * NodesPerSlab));
      end = next + Stride * NodesPerSlab;
    }
    void *p = next;
    next += Stride;
    return p;
  }
  void deallocate(void *p) {
    auto *n = static_cast<FreeNode *>(p);
    n->next = freeList;
    freeList = n;
  }
};

template <typename T> NodePool<sizeof(T)> &poolOf() {
  thread_local NodePool<sizeof(T)> pool;
  return pool;
}
} // namespace

void *Expr::operator new(std::size_t size) {
  static_assert(alignof(Expr) <= alignof(void *));
  assert(size == sizeof(Expr) && "a class derived from Expr");
  (void)size;
  return poolOf<Expr>().allocate();
}

void Expr::operator delete(void *p, std::size_t) {
  poolOf<Expr>().deallocate(p);
}

void *Stmt::operator new(std::size_t size) {
  static_assert(alignof(Stmt) <= alignof(void *));
  assert(size == sizeof(Stmt) && "a class derived from Stmt");
  (void)size;
  return poolOf<Stmt>().allocate();
}

void Stmt::operator delete(void *p, std::size_t) {
  poolOf<Stmt>().deallocate(p);
}

void *Buffer::operator new(std::size_t size) {
  static_assert(alignof(Buffer) <= alignof(void *));
  assert(size == sizeof(Buffer) && "a class derived from Buffer");
  (void)size;
  return poolOf<Buffer>().allocate();
}

void Buffer::operator delete(void *p, std::size_t) {
  poolOf<Buffer>().deallocate(p);
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

ExprPtr Expr::cloneNode() const {
  auto e = std::make_unique<Expr>(kind, type);
  e->value = value;
  e->name = name;
  e->var = var;
  e->buffer = buffer;
  e->op = op;
  e->fn = fn;
  return e;
}

ExprPtr Expr::clone() const {
  ExprPtr e = cloneNode();
  e->args.reserve(args.size());
  for (const ExprPtr &a : args)
    e->args.push_back(a->clone());
  return e;
}

ExprPtr loops::constant(ScalarType type, double value) {
  auto e = std::make_unique<Expr>(Expr::Kind::Const, type);
  e->value = value;
  return e;
}

ExprPtr loops::index(int64_t value) {
  return constant(ScalarType::Index, double(value));
}

ExprPtr loops::sizeRef(llvm::StringRef name) {
  auto e = std::make_unique<Expr>(Expr::Kind::Size, ScalarType::Index);
  e->name = InternedString(name);
  return e;
}

ExprPtr loops::loopVar(unsigned var) {
  auto e = std::make_unique<Expr>(Expr::Kind::LoopVar, ScalarType::Index);
  e->var = var;
  return e;
}

ExprPtr loops::load(Buffer *buffer, ExprPtr idx) {
  auto e = std::make_unique<Expr>(Expr::Kind::Load, fromDType(buffer->dtype));
  e->buffer = buffer;
  e->args.push_back(std::move(idx));
  return e;
}

bool loops::isIndexConst(const Expr &e, int64_t v) {
  return e.kind == Expr::Kind::Const && e.type == ScalarType::Index &&
         e.value == double(v);
}

ExprPtr loops::prim(PrimOp op, ExprPtr a, ExprPtr b) {
  assert(a && (isUnaryPrim(op) == !b) && "wrong number of operands");
  // Fold index arithmetic so that indices read as written by hand.
  if (b && a->type == ScalarType::Index) {
    bool ca = a->kind == Expr::Kind::Const, cb = b->kind == Expr::Kind::Const;
    if (ca && cb) {
      int64_t x = int64_t(a->value), y = int64_t(b->value);
      switch (op) {
      case PrimOp::Add:
        return index(x + y);
      case PrimOp::Sub:
        return index(x - y);
      case PrimOp::Mul:
        return index(x * y);
      default:
        break;
      }
    }
    if (op == PrimOp::Add && isIndexConst(*a, 0))
      return b;
    if ((op == PrimOp::Add || op == PrimOp::Sub) && isIndexConst(*b, 0))
      return a;
    if (op == PrimOp::Mul && (isIndexConst(*a, 0) || isIndexConst(*b, 1)))
      return a;
    if (op == PrimOp::Mul && (isIndexConst(*b, 0) || isIndexConst(*a, 1)))
      return b;
  }
  ScalarType t = a->type;
  if (isComparison(op) || op == PrimOp::Not || op == PrimOp::IsNaN ||
      op == PrimOp::IsFinite)
    t = ScalarType::Bool;
  auto e = std::make_unique<Expr>(Expr::Kind::Prim, t);
  e->op = op;
  e->args.push_back(std::move(a));
  if (b)
    e->args.push_back(std::move(b));
  return e;
}

ExprPtr loops::intrinsic(Intrinsic fn, ExprPtr a, ExprPtr b) {
  auto e = std::make_unique<Expr>(Expr::Kind::Intrinsic, a->type);
  e->fn = fn;
  e->args.push_back(std::move(a));
  if (b)
    e->args.push_back(std::move(b));
  return e;
}

ExprPtr loops::select(ExprPtr cond, ExprPtr a, ExprPtr b) {
  auto e = std::make_unique<Expr>(Expr::Kind::Select, a->type);
  e->args.push_back(std::move(cond));
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr loops::cast(ScalarType to, ExprPtr a) {
  if (a->type == to)
    return a;
  auto e = std::make_unique<Expr>(Expr::Kind::Cast, to);
  e->args.push_back(std::move(a));
  return e;
}

ExprPtr loops::extentOf(llvm::ArrayRef<Dim> dims) {
  int64_t known = 1;
  ExprPtr named;
  for (const Dim &d : dims) {
    if (d.isKnown()) {
      known *= d.getSize();
      continue;
    }
    named = named ? prim(PrimOp::Mul, std::move(named), sizeRef(d.getName()))
                  : sizeRef(d.getName());
  }
  if (!named || known == 0)
    return index(known);
  return known == 1 ? std::move(named)
                    : prim(PrimOp::Mul, index(known), std::move(named));
}

//===----------------------------------------------------------------------===//
// Functions and walkers
//===----------------------------------------------------------------------===//

Buffer *LoopFunction::addBuffer(Buffer::Kind kind, DType dtype,
                                llvm::ArrayRef<Dim> shape,
                                llvm::StringRef name) {
  auto b = std::make_unique<Buffer>();
  b->id = bufferIds++;
  b->kind = kind;
  b->dtype = dtype;
  b->shape.assign(shape.begin(), shape.end());
  // Names are unique within a function: the user's name, then `name.1`...
  llvm::StringRef base = name.empty() ? "t" : name;
  auto taken = bufferNames.try_emplace(base, 1);
  if (taken.second) {
    b->name = base.str();
  } else {
    unsigned &n = nextSuffix[base];
    std::string unique;
    do
      unique = (llvm::Twine(base) + "." + llvm::Twine(++n)).str();
    while (!bufferNames.try_emplace(unique, 1).second);
    b->name = std::move(unique);
  }
  buffers.push_back(std::move(b));
  return buffers.back().get();
}

static bool readsBuffer(const Expr &e, const Buffer *b) {
  if (e.kind == Expr::Kind::Load) {
    for (const Buffer *at = e.buffer; at; at = at->base)
      if (at == b)
        return true;
  }
  for (const ExprPtr &a : e.args)
    if (readsBuffer(*a, b))
      return true;
  return false;
}

bool LoopFunction::isParamRead(unsigned i) const {
  const Buffer *p = params[i];
  bool read = false;
  walk(body, [&](const Stmt &s) {
    for (const Buffer *in : s.inputs)
      for (const Buffer *at = in; at; at = at->base)
        read = read || at == p;
    walkExprs(s, [&](const Expr &e) {
      read = read || (e.kind == Expr::Kind::Load && readsBuffer(e, p));
    });
  });
  return read;
}

const LoopFunction *LoopModule::lookup(llvm::StringRef name) const {
  for (const auto &f : functions)
    if (f->name == name)
      return f.get();
  return nullptr;
}

llvm::StringMap<const LoopFunction *> LoopModule::functionsByName() const {
  llvm::StringMap<const LoopFunction *> byName;
  for (const auto &f : functions)
    byName.try_emplace(f->name, f.get());
  return byName;
}

bool loops::isLaneLoop(const Stmt &s) {
  if (s.kind != Stmt::Kind::For || s.parallel ||
      !(isIndexConst(*s.extent, ir::reductionLanes) ||
        isIndexConst(*s.extent, ir::reductionLanesF32)))
    return false;
  bool lanes = false, loads = false;
  for (const StmtPtr &st : s.body) {
    if (st->kind == Stmt::Kind::For || st->kind == Stmt::Kind::KernelCall ||
        st->kind == Stmt::Kind::Call || st->kind == Stmt::Kind::Check)
      return false;
    // No sum carried from one lane to the next: the printers' forced
    // vectorisation could reorder it (as isDotLoop).
    if (st->kind == Stmt::Kind::Accumulate && !usesVar(*st->index, s.var))
      return false;
    // 16 lanes are the f32 ones of accumulate = "f32", or the terms of
    // two chunks of 8 f64 lanes (PairChunks.cpp), stored as f64.
    lanes |= st->buffer && st->buffer->kind == Buffer::Kind::Stack &&
             st->index->kind == Expr::Kind::LoopVar &&
             st->index->var == s.var &&
             (isIndexConst(*s.extent, ir::reductionLanes) ||
              st->buffer->dtype == DType::F32 ||
              (st->kind == Stmt::Kind::Store && st->buffer->pairedTerms));
    walkExprs(*st, [&](const Expr &e) { loads |= e.kind == Expr::Kind::Load; });
  }
  // A loop that only sets the lanes (to 0, to -inf) vectorises anyway.
  return lanes && loads;
}

bool loops::sameExpr(const Expr &a, const Expr &b) {
  if (a.kind != b.kind || a.type != b.type || a.args.size() != b.args.size())
    return false;
  switch (a.kind) {
  case Expr::Kind::Const:
    if (!(a.value == b.value || (std::isnan(a.value) && std::isnan(b.value))))
      return false;
    break;
  case Expr::Kind::Size:
    if (a.name != b.name)
      return false;
    break;
  case Expr::Kind::LoopVar:
    if (a.var != b.var)
      return false;
    break;
  case Expr::Kind::Load:
    if (a.buffer != b.buffer)
      return false;
    break;
  case Expr::Kind::Prim:
    if (a.op != b.op)
      return false;
    break;
  case Expr::Kind::Intrinsic:
    if (a.fn != b.fn)
      return false;
    break;
  case Expr::Kind::Select:
  case Expr::Kind::Cast:
    break;
  }
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!sameExpr(*a.args[i], *b.args[i]))
      return false;
  return true;
}

bool loops::usesVar(const Expr &e, unsigned var) {
  if (e.kind == Expr::Kind::LoopVar && e.var == var)
    return true;
  for (const ExprPtr &a : e.args)
    if (usesVar(*a, var))
      return true;
  return false;
}

bool loops::hasSmallArgumentVersion(const Expr &e) {
  return e.kind == Expr::Kind::Intrinsic && e.type == ScalarType::F32 &&
         (e.fn == Intrinsic::Sin || e.fn == Intrinsic::Cos);
}

bool loops::callsSmallArgumentVersion(const Stmt &s) {
  bool calls = false;
  auto note = [&](const Stmt &st) {
    walkExprs(st, [&](const Expr &e) { calls |= hasSmallArgumentVersion(e); });
  };
  note(s);
  walk(s.body, note);
  return calls;
}

bool loops::hasRangeVersion(const LoopFunction &fn) {
  return llvm::any_of(
      fn.body, [](const StmtPtr &s) { return callsSmallArgumentVersion(*s); });
}

/// A sequential loop of 4, 8 or 16 iterations (a known index extent): what
/// PrintLLVM may ask LLVM to vectorise whole. Not 2: LLVM 19 then leaves a
/// dot loop's accumulator's last value live out of the loop and refuses
/// ("value that could not be identified as reduction is used outside the
/// loop"), with a warning.
static bool isSmallVectorLoop(const Stmt &s) {
  if (s.kind != Stmt::Kind::For || s.parallel ||
      s.extent->kind != Expr::Kind::Const ||
      s.extent->type != ScalarType::Index)
    return false;
  int64_t extent = int64_t(s.extent->value);
  return extent >= 4 && extent <= 16 && (extent & (extent - 1)) == 0;
}

bool loops::isDotLoop(const Stmt &s) {
  if (!isSmallVectorLoop(s))
    return false;
  // No math function of f64 (a libm call, which LLVM does not vectorise:
  // a forced vectorisation that fails warns at every compile); f32 ones
  // are gradc/Math.h's, inlined.
  auto plain = [](const Stmt &st) {
    if (st.kind != Stmt::Kind::Store && st.kind != Stmt::Kind::Accumulate)
      return false;
    bool ok = true;
    walkExprs(st, [&](const Expr &e) {
      ok &= e.kind != Expr::Kind::Intrinsic || e.type == ScalarType::F32;
    });
    return ok;
  };
  // Each iteration keeps its own sums: a local that an inner loop adds to
  // is set earlier in the same iteration. A sum carried from one
  // iteration to the next would be a reduction across the loop, which a
  // forced vectorisation may reorder (LLVM's LoopVectorize allows it
  // then): `%acc = 0; for i < 4 { for j < 3 { %acc += ... } }`, an f64
  // sum of 12 terms (seed 20261215 program 75).
  llvm::SmallPtrSet<const Buffer *, 4> set;
  bool dots = false;
  for (const StmtPtr &st : s.body) {
    if (st->kind != Stmt::Kind::For) {
      if (!plain(*st))
        return false;
      if (st->kind == Stmt::Kind::Store &&
          st->buffer->kind == Buffer::Kind::Local)
        set.insert(st->buffer);
      continue;
    }
    if (st->parallel || st->extent->kind != Expr::Kind::Const ||
        st->extent->value > 8)
      return false;
    for (const StmtPtr &inner : st->body) {
      if (!plain(*inner))
        return false;
      if (inner->kind == Stmt::Kind::Accumulate &&
          inner->buffer->kind == Buffer::Kind::Local &&
          !set.contains(inner->buffer))
        return false;
    }
    dots |= st->body.size() == 1 &&
            st->body[0]->kind == Stmt::Kind::Accumulate &&
            st->body[0]->buffer->kind == Buffer::Kind::Local;
  }
  return dots;
}

bool loops::isRowStoreLoop(const Stmt &s) {
  if (!isSmallVectorLoop(s) || s.body.size() != 1 ||
      s.body[0]->kind != Stmt::Kind::Store ||
      s.body[0]->buffer->kind == Buffer::Kind::Local)
    return false;
  const Stmt &store = *s.body[0];
  auto isVar = [&](const Expr &e) {
    return e.kind == Expr::Kind::LoopVar && e.var == s.var;
  };
  const Expr &index = *store.index;
  bool atVar = isVar(index) ||
               (index.kind == Expr::Kind::Prim && index.op == PrimOp::Add &&
                isVar(*index.args[1]) && !usesVar(*index.args[0], s.var));
  if (!atVar)
    return false;
  const Buffer *written = store.buffer->root();
  bool ok = true, loads = false;
  walkExprs(store, [&](const Expr &e) {
    loads |= e.kind == Expr::Kind::Load;
    ok &= !(e.kind == Expr::Kind::Load && e.buffer->root() == written) &&
          (e.kind != Expr::Kind::Intrinsic || e.type == ScalarType::F32);
  });
  return ok && loads;
}

const Expr *loops::sharedWidenedFactor(const Stmt &s) {
  if (!isDotLoop(s) || s.body.size() < 2)
    return nullptr;
  const Stmt &inner = *s.body[1];
  if (inner.kind != Stmt::Kind::For || inner.body.size() != 1 ||
      !isSmallVectorLoop(inner))
    return nullptr;
  const Stmt &add = *inner.body[0];
  if (add.kind != Stmt::Kind::Accumulate || add.combiner != Combiner::Add ||
      add.value->kind != Expr::Kind::Prim || add.value->op != PrimOp::Mul ||
      add.value->args.size() != 2)
    return nullptr;
  auto isStep = [&](const Expr &e) {
    return e.kind == Expr::Kind::LoopVar && e.var == inner.var;
  };
  for (const ExprPtr &f : add.value->args) {
    if (f->kind != Expr::Kind::Cast || f->type != ScalarType::F64)
      continue;
    const Expr &load = *f->args[0];
    if (load.kind != Expr::Kind::Load || load.type != ScalarType::F32 ||
        load.buffer->kind == Buffer::Kind::Local)
      continue;
    const Expr &index = *load.args[0];
    bool contiguous =
        isStep(index) ||
        (index.kind == Expr::Kind::Prim && index.op == PrimOp::Add &&
         isStep(*index.args[1]) && !usesVar(*index.args[0], inner.var) &&
         !usesVar(*index.args[0], s.var));
    if (!contiguous)
      continue;
    const Buffer *read = load.buffer->root();
    bool written = false;
    walk(s.body, [&](const Stmt &st) {
      written |= st.buffer && st.buffer->root() == read;
    });
    if (!written)
      return f.get();
  }
  return nullptr;
}

BufferTable<unsigned> loops::countUses(const LoopFunction &fn) {
  BufferTable<unsigned> uses(fn);
  walk(fn.body, [&](const Stmt &s) {
    walkExprs(s, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Load)
        ++uses[e.buffer];
    });
    for (const Buffer *b : s.inputs)
      ++uses[b];
    for (const Buffer *b : s.outputs)
      ++uses[b];
    if (s.buffer)
      ++uses[s.buffer];
  });
  for (const auto &b : fn.buffers)
    if (b->base)
      uses[b->base] += 2;
  return uses;
}

void loops::walk(const Block &block, llvm::function_ref<void(const Stmt &)> f) {
  for (const StmtPtr &s : block) {
    f(*s);
    walk(s->body, f);
  }
}

static void walkExpr(const Expr &e, llvm::function_ref<void(const Expr &)> f) {
  f(e);
  for (const ExprPtr &a : e.args)
    walkExpr(*a, f);
}

void loops::forEachExprSlot(Stmt &s, llvm::function_ref<void(ExprPtr &)> f) {
  for (ExprPtr *e : {&s.extent, &s.index, &s.value, &s.cond})
    if (*e)
      f(*e);
  for (ExprPtr &e : s.operands)
    f(e);
  for (auto &[name, e] : s.sizeArgs)
    f(e);
}

void loops::walkExprs(const Stmt &s, llvm::function_ref<void(const Expr &)> f) {
  for (const Expr *e :
       {s.extent.get(), s.index.get(), s.value.get(), s.cond.get()})
    if (e)
      walkExpr(*e, f);
  for (const ExprPtr &e : s.operands)
    walkExpr(*e, f);
  for (const auto &[name, e] : s.sizeArgs)
    walkExpr(*e, f);
}

ExprPtr loops::substituteVar(const Expr &e, unsigned var, const Expr &by) {
  if (e.kind == Expr::Kind::LoopVar && e.var == var)
    return by.clone();
  ExprPtr copy = e.cloneNode();
  copy->args.reserve(e.args.size());
  for (const ExprPtr &a : e.args)
    copy->args.push_back(substituteVar(*a, var, by));
  return copy;
}

Block loops::substitutedStores(const Block &stores, unsigned var,
                               const Expr &by) {
  Block copies;
  for (const StmtPtr &s : stores) {
    auto c = std::make_unique<Stmt>(Stmt::Kind::Store);
    c->origin = s->origin;
    c->buffer = s->buffer;
    c->index = substituteVar(*s->index, var, by);
    c->value = substituteVar(*s->value, var, by);
    copies.push_back(std::move(c));
  }
  return copies;
}

void BufferAccesses::add(const Stmt &s) {
  walkExprs(s, [&](const Expr &e) {
    if (e.kind == Expr::Kind::Load)
      reads.insert(e.buffer->root());
  });
  if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Accumulate)
    writes.insert(s.buffer->root());
  calls |= s.kind == Stmt::Kind::Call || s.kind == Stmt::Kind::KernelCall ||
           s.kind == Stmt::Kind::Check;
  for (Buffer *b : s.outputs)
    writes.insert(b->root());
  for (Buffer *b : s.inputs)
    reads.insert(b->root());
  for (const StmtPtr &c : s.body)
    add(*c);
}
