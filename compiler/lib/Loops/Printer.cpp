//===- Printer.cpp - The textual form of the loop IR ----------------------===//
//
// Prints a lowered module as docs/Loops.md describes:
//
//   func @f(%x: f32[N] param) -> (%out0: f32[N]) sizes(N) {
//     local %acc: f64
//
//     # %y = exp  (f.grad:2:13)
//     for %i0 < N {
//       %out0[%i0] = exp(%x[%i0])
//     }
//   }
//
// One `#` comment per origin (the tensor op, its location, its rule), so
// the text reads like the generated code will. Deterministic: names come
// from the lowering, buffers print in creation order.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "gradc/IR/Printer.h"
#include "gradc/Ops/Attr.h"

#include <cmath>

using namespace gradc;
using namespace gradc::loops;

namespace {

class LoopPrinter {
public:
  LoopPrinter(llvm::raw_ostream &os, const SourceManager *sm)
      : os(os), sm(sm) {}

  void printFunction(const LoopFunction &fn);

private:
  llvm::raw_ostream &os;
  const SourceManager *sm;
  const Origin *lastOrigin = nullptr;
  /// Whether a blank line separates the next origin comment from what
  /// precedes it (not from the function's first line).
  bool needBlank = false;

  static std::string name(const Buffer *b) {
    return "%" + ir::formatIRName(b->name).substr(0);
  }

  static std::string typeStr(const Buffer *b) {
    return TensorType(b->dtype, b->shape).str();
  }

  static std::string constStr(ScalarType t, double v) {
    if (t == ScalarType::Index)
      return std::to_string(int64_t(v));
    if (t == ScalarType::Bool)
      return v != 0 ? "true" : "false";
    std::string s;
    if (std::isnan(v))
      s = "nan";
    else if (std::isinf(v))
      s = v < 0 ? "-inf" : "inf";
    else if (t == ScalarType::F32)
      s = formatFloat(float(v));
    else if (t == ScalarType::F64)
      s = formatDouble(v);
    else
      s = std::to_string(int64_t(v));
    return s + ":" + scalarTypeName(t).str();
  }

  static bool isInfix(const Expr &e) {
    return e.kind == Expr::Kind::Prim && !isUnaryPrim(e.op) &&
           e.op != PrimOp::Max && e.op != PrimOp::Min;
  }

  /// Binding strength of an infix primitive, as in C.
  static int precedence(PrimOp op) {
    switch (op) {
    case PrimOp::Mul:
    case PrimOp::Div:
    case PrimOp::Rem:
      return 5;
    case PrimOp::Add:
    case PrimOp::Sub:
      return 4;
    case PrimOp::And:
      return 2;
    case PrimOp::Or:
      return 1;
    default:
      return 3; // comparisons
    }
  }

  /// `e` printed as an operand of an infix op of precedence `outer`
  /// (0: not an operand); `right` for the right operand, which needs
  /// parentheses at equal precedence (`a - (b - c)`).
  std::string expr(const Expr &e, int outer = 0, bool right = false) {
    switch (e.kind) {
    case Expr::Kind::Const:
      return constStr(e.type, e.value);
    case Expr::Kind::Size:
      return e.name.str();
    case Expr::Kind::LoopVar:
      return "%i" + std::to_string(e.var);
    case Expr::Kind::Load:
      if (e.buffer->kind == Buffer::Kind::Local)
        return name(e.buffer);
      return name(e.buffer) + "[" + expr(*e.args[0]) + "]";
    case Expr::Kind::Prim: {
      if (e.op == PrimOp::Neg || e.op == PrimOp::Not)
        return primOpName(e.op).str() + expr(*e.args[0], 6);
      if (!isInfix(e)) {
        std::string s = primOpName(e.op).str() + "(" + expr(*e.args[0]);
        if (e.args.size() > 1)
          s += ", " + expr(*e.args[1]);
        return s + ")";
      }
      int p = precedence(e.op);
      std::string s = expr(*e.args[0], p) + " " + primOpName(e.op).str() + " " +
                      expr(*e.args[1], p, true);
      bool paren = outer && (p < outer || (right && p == outer));
      return paren ? "(" + s + ")" : s;
    }
    case Expr::Kind::Intrinsic: {
      std::string s = intrinsicName(e.fn).str() + "(" + expr(*e.args[0]);
      if (e.args.size() > 1)
        s += ", " + expr(*e.args[1]);
      return s + ")";
    }
    case Expr::Kind::Select:
      return "select(" + expr(*e.args[0]) + ", " + expr(*e.args[1]) + ", " +
             expr(*e.args[2]) + ")";
    case Expr::Kind::Cast:
      return scalarTypeName(e.type).str() + "(" + expr(*e.args[0]) + ")";
    }
    return "?";
  }

  std::string target(const Buffer *b, const Expr &index) {
    if (b->kind == Buffer::Kind::Local)
      return name(b);
    return name(b) + "[" + expr(index) + "]";
  }

  void indent(unsigned depth) { os.indent(2 * depth); }

  void printOrigin(const Origin &o, unsigned depth) {
    if (lastOrigin && lastOrigin->op == o.op &&
        lastOrigin->result() == o.result())
      return;
    lastOrigin = &o;
    if (needBlank)
      os << "\n";
    needBlank = true;
    indent(depth);
    if (o.opName().empty())
      os << "# return " << o.result();
    else
      os << "# " << o.result() << " = " << o.opName();
    if (sm && o.loc.isValid())
      os << "  (" << sm->formatLoc(o.loc) << ")";
    os << "\n";
    if (!o.rule().empty()) {
      indent(depth);
      os << "# " << o.rule() << "\n";
    }
  }

  void printBlock(const Block &block, unsigned depth) {
    for (const StmtPtr &s : block)
      printStmt(*s, depth);
  }

  void printStmt(const Stmt &s, unsigned depth) {
    if (depth == 1)
      printOrigin(s.origin, depth);
    indent(depth);
    switch (s.kind) {
    case Stmt::Kind::For:
      os << (s.parallel ? "parallel for %i" : "for %i") << s.var << " < "
         << expr(*s.extent);
      if (s.parallel) {
        if (!s.privates.empty()) {
          os << " private(";
          for (size_t i = 0; i < s.privates.size(); ++i)
            os << (i ? ", " : "") << name(s.privates[i]);
          os << ")";
        }
        os << " work(" << expr(*s.work) << ")";
      }
      if (s.independent)
        os << " independent";
      os << " {\n";
      printBlock(s.body, depth + 1);
      indent(depth);
      os << "}\n";
      return;
    case Stmt::Kind::Store:
      os << target(s.buffer, *s.index) << " = " << expr(*s.value) << "\n";
      return;
    case Stmt::Kind::Accumulate: {
      llvm::StringRef op = s.combiner == Combiner::Add   ? "+="
                           : s.combiner == Combiner::Max ? "max="
                                                         : "min=";
      os << target(s.buffer, *s.index) << " " << op << " " << expr(*s.value)
         << "\n";
      return;
    }
    case Stmt::Kind::Check:
      os << "check " << expr(*s.cond) << ", " << checkStatusName(s.status)
         << ", " << ir::formatIRString(s.message) << "\n";
      return;
    case Stmt::Kind::KernelCall:
      os << kernelName(s.kernel) << "(" << name(s.outputs[0]) << " + "
         << expr(*s.operands[0]) << ", " << name(s.inputs[0]) << " + "
         << expr(*s.operands[1]) << ", " << name(s.inputs[1]) << " + "
         << expr(*s.operands[2]) << ", " << expr(*s.operands[3]) << ", "
         << expr(*s.operands[4]) << ", " << expr(*s.operands[5]) << ") acc "
         << scalarTypeName(s.accType) << "\n";
      return;
    case Stmt::Kind::Call: {
      os << (s.isExtern ? "extern_call @" : "call @")
         << ir::formatIRName(s.callee) << "(";
      for (size_t i = 0; i < s.inputs.size(); ++i)
        os << (i ? ", " : "") << name(s.inputs[i]);
      os << ") -> (";
      for (size_t i = 0; i < s.outputs.size(); ++i) {
        os << (i ? ", " : "") << name(s.outputs[i]);
        if (!s.operands.empty() && !isIndexConst(*s.operands[i], 0)) {
          const Expr &off = *s.operands[i];
          bool sum = off.kind == Expr::Kind::Prim &&
                     (off.op == PrimOp::Add || off.op == PrimOp::Sub);
          os << (sum ? " + (" : " + ") << expr(off) << (sum ? ")" : "");
        }
      }
      os << ")";
      if (!s.sizeArgs.empty()) {
        os << " sizes(";
        for (size_t i = 0; i < s.sizeArgs.size(); ++i)
          os << (i ? ", " : "") << s.sizeArgs[i].first << " = "
             << expr(*s.sizeArgs[i].second);
        os << ")";
      }
      if (s.checksStatus)
        os << " status";
      os << "\n";
      return;
    }
    }
  }
};

void LoopPrinter::printFunction(const LoopFunction &fn) {
  os << "func @" << ir::formatIRName(fn.name) << "(";
  for (size_t i = 0; i < fn.params.size(); ++i)
    os << (i ? ", " : "") << name(fn.params[i]) << ": " << typeStr(fn.params[i])
       << (fn.isParamRead(i) ? "" : " unread");
  os << ") -> (";
  for (size_t i = 0; i < fn.outputs.size(); ++i)
    os << (i ? ", " : "") << name(fn.outputs[i]) << ": "
       << typeStr(fn.outputs[i]);
  os << ")";
  if (!fn.sizeNames.empty()) {
    os << " sizes(";
    for (size_t i = 0; i < fn.sizeNames.size(); ++i)
      os << (i ? ", " : "") << fn.sizeNames[i];
    os << ")";
  }
  os << " {\n";
  needBlank = false;
  for (const auto &b : fn.buffers) {
    needBlank = needBlank || (b->kind != Buffer::Kind::Param &&
                              b->kind != Buffer::Kind::Output);
    switch (b->kind) {
    case Buffer::Kind::Param:
    case Buffer::Kind::Output:
      continue;
    case Buffer::Kind::Local:
      os << "  local " << name(b.get()) << ": " << dtypeName(b->dtype);
      break;
    case Buffer::Kind::Alias:
      os << "  alias " << name(b.get()) << ": " << typeStr(b.get()) << " = "
         << name(b->base) << " + " << expr(*b->offset);
      break;
    case Buffer::Kind::Constant:
      os << "  constant " << name(b.get()) << ": " << typeStr(b.get())
         << " = [";
      for (size_t i = 0; i < b->data.size(); ++i)
        os << (i ? ", " : "")
           << constStr(fromDType(b->dtype), b->data[i])
                  .substr(0,
                          constStr(fromDType(b->dtype), b->data[i]).rfind(':'));
      os << "]";
      break;
    default:
      os << "  " << bufferKindName(b->kind) << " " << name(b.get()) << ": "
         << (b->count ? dtypeName(b->dtype).str() + "[" + expr(*b->count) + "]"
                      : typeStr(b.get()));
      if (b->slot >= 0)
        os << " slot " << b->slot;
      break;
    }
    os << "\n";
  }
  lastOrigin = nullptr;
  printBlock(fn.body, 1);
  os << "}\n";
}

} // namespace

void loops::printLoops(const LoopModule &module, llvm::raw_ostream &os,
                       const SourceManager *sm) {
  if (!module.sourceName.empty())
    os << "# Lowered by gradc from " << module.sourceName << "\n";
  bool first = true;
  for (const auto &fn : module.functions) {
    if (!first)
      os << "\n";
    first = false;
    LoopPrinter(os, sm).printFunction(*fn);
  }
}
