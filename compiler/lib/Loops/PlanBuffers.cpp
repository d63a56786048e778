//===- PlanBuffers.cpp - Stack placement, lifetimes and reuse -------------===//
//
// The loop pass `plan`, one policy for every backend:
//
//  1. A scratch buffer whose size is known and at most stackThresholdBytes
//     (1024 bytes) becomes a stack buffer; larger or symbolic ones stay
//     scratch (heap, or one arena in a printer).
//  2. The lifetime of a buffer is the range of top-level statements that
//     touch it: loads, stores, calls and kernels, through views too (a
//     view keeps its base alive).
//  3. In order of first use, each buffer takes the first slot of its kind
//     whose size (element bytes times the symbolic element count) is the
//     same and whose last occupant died before this buffer's first use;
//     otherwise a new slot. Buffers in one slot share memory.
//
// The evaluator gives buffers of one slot one storage, so a wrong
// lifetime shows as a wrong number in the op corpus.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace gradc;
using namespace gradc::loops;

namespace {

/// A structural key of an index expression (sizes are products).
std::string key(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Const:
    return std::to_string(int64_t(e.value));
  case Expr::Kind::Size:
    return e.name.str();
  default:
    break;
  }
  std::string s = "(" + primOpName(e.op).str();
  for (const ExprPtr &a : e.args)
    s += " " + key(*a);
  return s + ")";
}

void noteLoads(
    const Expr &e, size_t t,
    llvm::DenseMap<const Buffer *, std::pair<size_t, size_t>> &life) {
  if (e.kind == Expr::Kind::Load) {
    auto [it, inserted] = life.try_emplace(e.buffer->root(), t, t);
    if (!inserted)
      it->second.second = t;
  }
  for (const ExprPtr &a : e.args)
    noteLoads(*a, t, life);
}

void planFunction(LoopFunction &fn) {
  // 1. The stack.
  for (const auto &b : fn.buffers) {
    if (b->kind != Buffer::Kind::Scratch || b->count)
      continue;
    std::optional<int64_t> n = knownNumElements(b->shape);
    if (n && *n * int64_t(elementByteSize(b->dtype)) <= stackThresholdBytes)
      b->kind = Buffer::Kind::Stack;
  }
  // 2. Lifetimes in top-level statements.
  llvm::DenseMap<const Buffer *, std::pair<size_t, size_t>> life;
  for (size_t t = 0; t < fn.body.size(); ++t) {
    auto touch = [&](const Buffer *b) {
      auto [it, inserted] = life.try_emplace(b->root(), t, t);
      if (!inserted)
        it->second.second = t;
    };
    std::vector<const Stmt *> stmts = {fn.body[t].get()};
    walk(fn.body[t]->body, [&](const Stmt &s) { stmts.push_back(&s); });
    for (const Stmt *s : stmts) {
      if (s->buffer)
        touch(s->buffer);
      for (const Buffer *b : s->inputs)
        touch(b);
      for (const Buffer *b : s->outputs)
        touch(b);
      walkExprs(*s, [&](const Expr &e) {
        if (e.kind == Expr::Kind::Load)
          touch(e.buffer);
      });
    }
  }
  // 3. Slots, in order of first use.
  struct Slot {
    Buffer::Kind kind;
    std::string size;
    size_t freeAfter;
  };
  std::vector<Slot> slots;
  std::vector<Buffer *> order;
  for (const auto &b : fn.buffers)
    if (b->kind == Buffer::Kind::Scratch || b->kind == Buffer::Kind::Stack)
      order.push_back(b.get());
  std::stable_sort(order.begin(), order.end(),
                   [&](const Buffer *a, const Buffer *b) {
                     auto la = life.find(a), lb = life.find(b);
                     size_t fa = la == life.end() ? 0 : la->second.first;
                     size_t fb = lb == life.end() ? 0 : lb->second.first;
                     return fa < fb;
                   });
  for (Buffer *b : order) {
    auto it = life.find(b);
    size_t first = it == life.end() ? 0 : it->second.first;
    size_t last = it == life.end() ? fn.body.size() : it->second.second;
    std::string size = std::to_string(elementByteSize(b->dtype)) + "*" +
                       key(*b->numElements());
    // Slots are numbered per kind: stack slot 0, scratch slot 0, ...
    b->slot = -1;
    int number = 0;
    for (Slot &slot : slots) {
      if (slot.kind != b->kind)
        continue;
      if (b->slot < 0 && slot.size == size && slot.freeAfter < first) {
        b->slot = number;
        slot.freeAfter = last;
      }
      ++number;
    }
    if (b->slot < 0) {
      b->slot = number;
      slots.push_back({b->kind, size, last});
    }
  }
}

} // namespace

bool loops::planBuffers(LoopModule &module, std::string &) {
  for (auto &fn : module.functions)
    planFunction(*fn);
  return true;
}
