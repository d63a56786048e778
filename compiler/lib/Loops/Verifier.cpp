//===- Verifier.cpp - Invariants of the loop IR ---------------------------===//
//
// Run after lowering (and, in verify mode, after every loop pass). The
// rules of docs/Loops.md:
//
//  1. A loop variable is used only inside its loop, and each loop has its
//     own variable; a size name is one of the function's.
//  2. Extents, indices and kernel operands have type `index`.
//  3. A store or accumulation gives a value of exactly its buffer's type
//     (conversions are explicit casts), never into a parameter, a
//     constant or a view of either; a local is written at index 0.
//  4. Expressions are well typed: a binary primitive's operands have one
//     type; `%` is for indices; `&&`, `||`, `!` and select's condition
//     are bool; intrinsics take floats.
//  5. Every buffer used belongs to the function; an alias has a base.
//  6. Every output is written; a call names a function of the module
//     with as many inputs and outputs as it has parameters and results.
//
//===----------------------------------------------------------------------===//

#include "gradc/Basic/Timing.h"
#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

class LoopVerifier {
public:
  LoopVerifier(const llvm::StringMap<const LoopFunction *> &functions,
               const LoopFunction &fn)
      : functions(functions), fn(fn) {
    for (const auto &b : fn.buffers)
      owned.insert(b.get());
  }

  bool run(std::string &error) {
    for (const auto &b : fn.buffers)
      if (b->kind == Buffer::Kind::Alias &&
          (!b->base || !owned.count(b->base) || !b->offset ||
           !checkIndex(*b->offset, "an alias offset")))
        return fail(error, "alias '" + b->name + "' has no valid base");
    // A counted buffer: heap scratch of no shape, whose count is known at
    // entry (sizes only).
    for (const auto &b : fn.buffers)
      if (b->count &&
          (b->kind != Buffer::Kind::Scratch || !b->shape.empty() ||
           !checkIndex(*b->count, "a buffer's count") || !sizesOnly(*b->count)))
        return fail(error, "buffer '" + b->name +
                               "' has a count that is not an index "
                               "expression of sizes");
    if (!message.empty())
      return fail(error, message);
    checkBlock(fn.body);
    for (const Buffer *out : fn.outputs)
      if (!written.count(out) && message.empty())
        message = "output '" + out->name + "' is never written";
    if (!message.empty())
      return fail(error, message);
    return true;
  }

private:
  const llvm::StringMap<const LoopFunction *> &functions;
  const LoopFunction &fn;
  // Hash sets: a fused chain of 100,000 steps has as many buffers and
  // loops.
  llvm::DenseSet<const Buffer *> owned, written;
  llvm::DenseSet<unsigned> live, seen;
  std::string message;

  bool fail(std::string &error, const std::string &text) {
    error = "in function '" + fn.name + "': " + text;
    return false;
  }

  bool bad(const std::string &text) {
    if (message.empty())
      message = text;
    return false;
  }

  static bool sizesOnly(const Expr &e) {
    if (e.kind == Expr::Kind::Load || e.kind == Expr::Kind::LoopVar)
      return false;
    return llvm::all_of(e.args, [](const ExprPtr &a) { return sizesOnly(*a); });
  }

  bool checkBuffer(const Buffer *b) {
    if (!b || !owned.count(b))
      return bad("a statement uses a buffer of another function");
    return true;
  }

  bool checkIndex(const Expr &e, llvm::StringRef what) {
    if (!checkExpr(e))
      return false;
    if (e.type != ScalarType::Index)
      return bad(what.str() + " has type " + scalarTypeName(e.type).str() +
                 ", not index");
    return true;
  }

  bool checkExpr(const Expr &e) {
    for (const ExprPtr &a : e.args)
      if (!a || !checkExpr(*a))
        return false;
    switch (e.kind) {
    case Expr::Kind::Const:
      return true;
    case Expr::Kind::Size:
      for (const std::string &s : fn.sizeNames)
        if (s == e.name.ref())
          return true;
      return bad("size '" + e.name.str() + "' is not a size of the function");
    case Expr::Kind::LoopVar:
      if (!live.count(e.var))
        return bad("%i" + std::to_string(e.var) + " is used outside its loop");
      return true;
    case Expr::Kind::Load:
      if (!checkBuffer(e.buffer) || e.args.size() != 1)
        return false;
      if (e.type != fromDType(e.buffer->dtype))
        return bad("a load of '" + e.buffer->name + "' has the wrong type");
      return e.args[0]->type == ScalarType::Index ||
             bad("an index of '" + e.buffer->name + "' is not an index");
    case Expr::Kind::Prim: {
      bool unary = isUnaryPrim(e.op);
      if (e.args.size() != (unary ? 1u : 2u))
        return bad("'" + primOpName(e.op).str() +
                   "' has the wrong number of operands");
      ScalarType t = e.args[0]->type;
      if (!unary && e.args[1]->type != t)
        return bad("operands of '" + primOpName(e.op).str() + "' have types " +
                   scalarTypeName(t).str() + " and " +
                   scalarTypeName(e.args[1]->type).str());
      bool logical =
          e.op == PrimOp::And || e.op == PrimOp::Or || e.op == PrimOp::Not;
      if (logical != (t == ScalarType::Bool) &&
          (logical || (!isComparison(e.op))))
        return bad("'" + primOpName(e.op).str() + "' of " +
                   scalarTypeName(t).str());
      if (e.op == PrimOp::Rem && t != ScalarType::Index)
        return bad("'%' of " + scalarTypeName(t).str());
      if ((e.op == PrimOp::IsNaN || e.op == PrimOp::IsFinite) &&
          !isFloatType(t))
        return bad("'" + primOpName(e.op).str() + "' of a non-float");
      return true;
    }
    case Expr::Kind::Intrinsic:
      if (e.args.size() != intrinsicArity(e.fn))
        return bad("'" + intrinsicName(e.fn).str() +
                   "' has the wrong number of operands");
      for (const ExprPtr &a : e.args)
        if (!isFloatType(a->type) || a->type != e.type)
          return bad("'" + intrinsicName(e.fn).str() +
                     "' of a non-float or of mixed types");
      return true;
    case Expr::Kind::Select:
      if (e.args.size() != 3 || e.args[0]->type != ScalarType::Bool)
        return bad("a select needs a bool condition");
      if (e.args[1]->type != e.type || e.args[2]->type != e.type)
        return bad("the arms of a select have different types");
      return true;
    case Expr::Kind::Cast:
      return e.args.size() == 1 || bad("a cast needs one operand");
    }
    return true;
  }

  void checkWrite(const Stmt &s) {
    if (!checkBuffer(s.buffer) || !s.index || !s.value)
      return;
    if (s.buffer->isReadOnly())
      bad("a store into read-only buffer '" + s.buffer->name + "'");
    if (checkIndex(*s.index, "the index of a store") && checkExpr(*s.value) &&
        s.value->type != fromDType(s.buffer->dtype))
      bad("a store of " + scalarTypeName(s.value->type).str() + " into '" +
          s.buffer->name + "' of " + dtypeName(s.buffer->dtype).str());
    if (s.buffer->kind == Buffer::Kind::Local && !isIndexConst(*s.index, 0))
      bad("local '" + s.buffer->name + "' is written at a non-zero index");
    for (const Buffer *b = s.buffer; b; b = b->base)
      written.insert(b);
  }

  void checkBlock(const Block &block) {
    for (const StmtPtr &s : block) {
      if (!message.empty())
        return;
      checkStmt(*s);
    }
  }

  void checkStmt(const Stmt &s) {
    switch (s.kind) {
    case Stmt::Kind::For:
      if (!s.extent || !checkIndex(*s.extent, "a loop extent"))
        return;
      if (!seen.insert(s.var).second) {
        bad("%i" + std::to_string(s.var) + " is bound by two loops");
        return;
      }
      if (s.parallel) {
        // The `parallel` pass's marks: a work count of the sizes, and
        // private copies only of scalars and stack arrays.
        if (!s.work || !checkIndex(*s.work, "a parallel loop's work"))
          return;
        for (const Buffer *b : s.privates)
          if (b->kind != Buffer::Kind::Local &&
              b->kind != Buffer::Kind::Stack) {
            bad("a parallel loop's private buffer is not a local or stack "
                "buffer");
            return;
          }
      }
      live.insert(s.var);
      checkBlock(s.body);
      live.erase(s.var);
      return;
    case Stmt::Kind::Store:
    case Stmt::Kind::Accumulate:
      checkWrite(s);
      return;
    case Stmt::Kind::Check:
      if (s.cond && checkExpr(*s.cond) && s.cond->type != ScalarType::Bool)
        bad("a check's condition is not bool");
      return;
    case Stmt::Kind::KernelCall:
      if (s.outputs.size() != 1 || s.inputs.size() != 2 ||
          s.operands.size() != 6) {
        bad("a matmul kernel needs z, a, b and six operands");
        return;
      }
      for (const ExprPtr &e : s.operands)
        if (!checkIndex(*e, "a kernel operand"))
          return;
      for (const Buffer *b : {s.outputs[0], s.inputs[0], s.inputs[1]})
        if (!checkBuffer(b))
          return;
      if (s.outputs[0]->isReadOnly())
        bad("a kernel writes read-only buffer '" + s.outputs[0]->name + "'");
      for (const Buffer *b = s.outputs[0]; b; b = b->base)
        written.insert(b);
      return;
    case Stmt::Kind::Call:
      for (const Buffer *b : s.inputs)
        if (!checkBuffer(b))
          return;
      for (const Buffer *b : s.outputs) {
        if (!checkBuffer(b))
          return;
        if (b->isReadOnly())
          bad("a call writes read-only buffer '" + b->name + "'");
        written.insert(b);
      }
      for (const auto &[name, e] : s.sizeArgs)
        if (!checkIndex(*e, "size argument '" + name + "'"))
          return;
      if (!s.operands.empty() && s.operands.size() != s.outputs.size()) {
        bad("a call of '" + s.callee + "' has " +
            std::to_string(s.operands.size()) + " output offsets for " +
            std::to_string(s.outputs.size()) + " outputs");
        return;
      }
      for (const ExprPtr &e : s.operands)
        if (!checkIndex(*e, "an output offset"))
          return;
      if (!s.isExtern) {
        const LoopFunction *callee = functions.lookup(s.callee);
        if (!callee)
          bad("a call of unknown function '" + s.callee + "'");
        else if (callee->params.size() != s.inputs.size() ||
                 callee->outputs.size() != s.outputs.size())
          bad("a call of '" + s.callee +
              "' does not fit its parameters and results");
      }
      return;
    }
  }
};

} // namespace

bool loops::verifyLoops(const LoopModule &module, std::string &error) {
  TimeRegion region("verify loops");
  llvm::StringMap<const LoopFunction *> functions = module.functionsByName();
  for (const auto &fn : module.functions)
    if (!LoopVerifier(functions, *fn).run(error))
      return false;
  return true;
}
