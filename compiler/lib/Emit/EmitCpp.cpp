//===- EmitCpp.cpp - The C++ backend --------------------------------------===//
//
// Turns each exported IR function into one `extern "C"` C++ function that
// reads like code a careful person wrote: the source's names, one
// statement per line, a comment quoting the source line (or, for gradient
// code, the note that says which rule made it) above each statement.
//
// The IR is a straight line of whole-tensor ops; emitting one loop per op
// would allocate a buffer for every intermediate and traverse memory once
// per op. Instead, every value is either *materialised* (it has storage: a
// parameter, a scratch buffer, an output, a scalar variable) or *inlined*
// (an elementwise expression, or an index map such as broadcast_to,
// transpose or unstack, that is computed where it is used). A
// materialised value is a *root*: one loop nest computes it, and the
// expressions of the inlined values it reads are substituted into that
// loop's body. The algorithm:
//
//   1. Count the uses of every value.
//   2. Decide storage: kernel results (matmul, softmax, calls, ...),
//      reductions, stack/concat and returned values are roots; index maps
//      and splat constants are inlined; an elementwise value is inlined
//      when it has one use, by a consumer that reads each of its elements
//      once (no broadcasting); everything else is a root.
//   3. Operands that a kernel reads through a pointer must be
//      materialised: an inlined operand becomes a root (a transposed
//      operand of matmul is read by the kernel instead).
//   4. Compute the last use of each materialised value, looking through
//      inlined values to the roots that actually read it.
//   5. Give each root storage: small known shapes live on the stack, the
//      rest in scratch buffers that are reused once their value is dead.
//   6. Emit each root's loop nest, merging adjacent loops wherever every
//      access is contiguous across them, and keeping reductions in a local
//      accumulator when their innermost loops are reduced.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitCpp.h"

#include "gradc/Emit/FusionDepth.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/Emit/SizeChecks.h"
#include "gradc/Ops/Attr.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

using namespace gradc;
using namespace gradc::emit;

namespace {

constexpr unsigned lineLimit = 80;
/// Temporaries with a known size up to this many bytes live on the stack.
constexpr int64_t maxStackBytes = 1024;

//===----------------------------------------------------------------------===//
// Sizes and index arithmetic
//===----------------------------------------------------------------------===//

/// A product of a constant and size names: an extent, a stride, a count.
struct Product {
  int64_t constant = 1;
  std::vector<std::string> names; // C++ names of size parameters

  static Product of(int64_t c) {
    Product p;
    p.constant = c;
    return p;
  }
  bool isZero() const { return constant == 0; }
  bool isOne() const { return constant == 1 && names.empty(); }
  bool isKnown() const { return names.empty() || constant == 0; }
  Product operator*(const Product &o) const {
    Product r;
    r.constant = constant * o.constant;
    if (r.constant != 0) {
      r.names = names;
      r.names.insert(r.names.end(), o.names.begin(), o.names.end());
    }
    return r;
  }
  bool operator==(const Product &o) const {
    if (constant != o.constant)
      return false;
    if (constant == 0)
      return true;
    std::vector<std::string> a = names, b = o.names;
    llvm::sort(a);
    llvm::sort(b);
    return a == b;
  }
  bool operator!=(const Product &o) const { return !(*this == o); }
  /// `B * H * 3`, `784`, `1`.
  std::string str() const {
    if (constant == 0)
      return "0";
    std::string s = llvm::join(names, " * ");
    if (constant != 1 || names.empty())
      s += (s.empty() ? "" : " * ") + std::to_string(constant);
    return s;
  }
};

/// One position of an index: a loop dimension (or none) plus a constant.
struct Idx {
  int dim = -1;
  int64_t offset = 0;
};
using Index = std::vector<Idx>;

/// A flat element offset: a sum of loop variables times strides, plus
/// constant terms.
struct LinearForm {
  struct Term {
    int dim; // -1 for a constant term
    Product coeff;
  };
  std::vector<Term> terms;

  void add(int dim, const Product &coeff) {
    if (coeff.isZero())
      return;
    for (Term &t : terms) {
      if (t.dim != dim)
        continue;
      if (dim >= 0) {
        assert(t.coeff == coeff && "a loop dimension reaches one place once");
        return;
      }
      Product a = t.coeff, b = coeff;
      a.constant = b.constant = 1;
      if (a == b) {
        t.coeff.constant += coeff.constant;
        return;
      }
    }
    terms.push_back({dim, coeff});
  }
  Product coeffOf(int dim) const {
    for (const Term &t : terms)
      if (t.dim == dim)
        return t.coeff;
    return Product::of(0);
  }
};

/// How the loop dimensions of a nest became loop variables: merged
/// dimensions share the variable of the innermost one.
struct LoopMap {
  std::vector<std::string> var; // per dimension; "" when merged away
};

//===----------------------------------------------------------------------===//
// Expressions, printed with C++ precedence and broken at 80 columns
//===----------------------------------------------------------------------===//

struct Expr;
using ExprP = std::shared_ptr<const Expr>;

struct Expr {
  enum Kind { Atom, Access, Index, Call, Unary, Binary, Cond };
  Kind kind;
  /// Atom text, array name, callee, or operator. An Index is the value of
  /// a loop position itself (its form), as one_hot compares against it.
  std::string text;
  std::vector<ExprP> args;
  LinearForm form; // Access
  /// C++ precedence: 0 primary, 3 unary, 5 multiplicative, 6 additive,
  /// 9 relational, 10 equality, 16 conditional.
  int prec = 0;
};

ExprP atom(std::string text, int prec = 0) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Atom;
  e->text = std::move(text);
  e->prec = prec;
  return e;
}
ExprP access(std::string name, LinearForm form) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Access;
  e->text = std::move(name);
  e->form = std::move(form);
  return e;
}
ExprP call(std::string callee, std::vector<ExprP> args) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Call;
  e->text = std::move(callee);
  e->args = std::move(args);
  return e;
}
ExprP unary(std::string op, ExprP a) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Unary;
  e->text = std::move(op);
  e->args = {std::move(a)};
  e->prec = 3;
  return e;
}
ExprP binary(std::string op, ExprP a, ExprP b) {
  // a + -b reads better as a - b (and is the same in IEEE arithmetic).
  if ((op == "+" || op == "-") && b->kind == Expr::Unary && b->text == "-") {
    op = op == "+" ? "-" : "+";
    b = b->args[0];
  }
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Binary;
  e->prec = (op == "*" || op == "/")     ? 5
            : (op == "+" || op == "-")   ? 6
            : (op == "==" || op == "!=") ? 10
            : op == "||"                 ? 15
                                         : 9;
  e->text = std::move(op);
  e->args = {std::move(a), std::move(b)};
  return e;
}
ExprP cond(ExprP c, ExprP a, ExprP b) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Cond;
  e->prec = 16;
  e->args = {std::move(c), std::move(a), std::move(b)};
  return e;
}
ExprP indexValue(LinearForm form) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Index;
  e->form = std::move(form);
  return e;
}
bool isLeaf(const ExprP &e) {
  return e->kind == Expr::Atom || e->kind == Expr::Access ||
         e->kind == Expr::Index;
}

std::string accessIndex(const LinearForm &form, const LoopMap &map) {
  std::vector<std::string> parts;
  for (const LinearForm::Term &t : form.terms) {
    if (t.dim < 0)
      continue;
    const std::string &v = map.var[t.dim];
    if (v.empty())
      continue;
    parts.push_back(t.coeff.isOne() ? v : v + " * " + t.coeff.str());
  }
  for (const LinearForm::Term &t : form.terms)
    if (t.dim < 0)
      parts.push_back(t.coeff.str());
  return parts.empty() ? "0" : llvm::join(parts, " + ");
}

class Printer {
public:
  explicit Printer(const LoopMap &map) : map(map) {}

  std::string flat(const ExprP &e) const {
    switch (e->kind) {
    case Expr::Atom:
      return e->text;
    case Expr::Access:
      return e->text + "[" + accessIndex(e->form, map) + "]";
    case Expr::Index: {
      std::string text = accessIndex(e->form, map);
      bool sum = text.find(' ') != std::string::npos;
      return sum ? "(" + text + ")" : text;
    }
    case Expr::Call: {
      std::vector<std::string> args;
      for (const ExprP &a : e->args)
        args.push_back(flat(a));
      return e->text + "(" + llvm::join(args, ", ") + ")";
    }
    case Expr::Unary:
      return e->text + wrap(e, 0, false, flat(e->args[0]));
    case Expr::Binary: {
      // The left spine iteratively, appending in place: a left-nested
      // chain (the null checks of every scratch buffer, one per slot) is
      // as deep as it is long, and recursion with a copy per level made
      // it quadratic and overflowed the stack at 100,000 slots.
      std::vector<const Expr *> spine;
      const Expr *head = e.get();
      for (; head->kind == Expr::Binary; head = head->args[0].get())
        spine.push_back(head);
      std::string text = flat(spine.back()->args[0]);
      for (const Expr *node : llvm::reverse(spine)) {
        if (needsParens(node->prec, node->args[0], /*right=*/false))
          text = "(" + text + ")";
        text += " " + node->text + " " +
                wrapChild(node->prec, node->args[1], /*right=*/true,
                          flat(node->args[1]));
      }
      return text;
    }
    case Expr::Cond:
      return wrap(e, 0, false, flat(e->args[0])) + " ? " +
             wrap(e, 1, false, flat(e->args[1])) + " : " +
             wrap(e, 2, false, flat(e->args[2]));
    }
    llvm_unreachable("unknown expression kind");
  }

  /// `e` printed from column `col`, broken over lines as clang-format's
  /// LLVM style would (continuations aligned under the first operand or
  /// the first argument) when it does not fit before `limit`.
  std::string format(const ExprP &e, unsigned col, unsigned limit) const {
    std::string f = flat(e);
    if (col + f.size() <= limit || isLeaf(e))
      return f;
    switch (e->kind) {
    case Expr::Atom:
    case Expr::Access:
    case Expr::Index:
      return f;
    case Expr::Call: {
      std::string s = e->text + "(";
      unsigned argCol = col + s.size();
      unsigned cur = argCol;
      for (size_t i = 0; i < e->args.size(); ++i) {
        bool last = i + 1 == e->args.size();
        std::string a = flat(e->args[i]);
        unsigned need = a.size() + 1; // "," or ")"
        if (i > 0 && cur + 1 + need > limit) {
          s += "\n" + std::string(argCol, ' ');
          cur = argCol;
        } else if (i > 0) {
          s += " ";
          ++cur;
        }
        std::string formatted = format(e->args[i], cur, limit - 1);
        s += formatted + (last ? ")" : ",");
        cur = endColumn(formatted, cur) + 1;
      }
      return s;
    }
    case Expr::Unary:
      return e->text + wrapFormatted(e, 0, col + e->text.size(), limit);
    case Expr::Binary: {
      // Flatten a left-nested chain of one precedence: a + b - c.
      std::vector<std::pair<std::string, ExprP>> chain;
      ExprP head = e;
      while (head->kind == Expr::Binary && head->prec == e->prec) {
        chain.push_back({head->text, head->args[1]});
        head = head->args[0];
      }
      std::reverse(chain.begin(), chain.end());
      std::string s = wrapFormattedChild(e->prec, head, false, col, limit);
      unsigned cur = endColumn(s, col);
      for (auto &[op, operand] : chain) {
        std::string piece = wrapChild(e->prec, operand, true, flat(operand));
        if (cur + op.size() + 2 + piece.size() <= limit) {
          s += " " + op + " " + piece;
          cur += op.size() + 2 + piece.size();
          continue;
        }
        s += " " + op + "\n" + std::string(col, ' ');
        std::string formatted =
            wrapFormattedChild(e->prec, operand, true, col, limit);
        s += formatted;
        cur = endColumn(formatted, col);
      }
      return s;
    }
    case Expr::Cond: {
      std::string s = wrapFormatted(e, 0, col, limit);
      s += "\n" + std::string(col, ' ') + "? " +
           wrapFormatted(e, 1, col + 2, limit);
      s += "\n" + std::string(col, ' ') + ": " +
           wrapFormatted(e, 2, col + 2, limit);
      return s;
    }
    }
    llvm_unreachable("unknown expression kind");
  }

private:
  static unsigned endColumn(const std::string &s, unsigned startCol) {
    size_t nl = s.rfind('\n');
    if (nl == std::string::npos)
      return startCol + s.size();
    return s.size() - nl - 1;
  }
  static bool needsParens(int parentPrec, const ExprP &child, bool right) {
    if (child->kind == Expr::Atom && child->prec == 0)
      return false;
    // GCC's -Wparentheses wants a comparison inside a comparison, and
    // anything inside ||, parenthesised.
    bool isComparison = child->prec == 9 || child->prec == 10;
    if ((parentPrec == 9 || parentPrec == 10) && isComparison)
      return true;
    return right ? child->prec >= parentPrec : child->prec > parentPrec;
  }
  std::string wrapChild(int parentPrec, const ExprP &child, bool right,
                        std::string text) const {
    return needsParens(parentPrec, child, right) ? "(" + text + ")" : text;
  }
  std::string wrap(const ExprP &e, unsigned i, bool, std::string text) const {
    bool right = e->kind == Expr::Binary ? i == 1 : e->kind != Expr::Cond;
    if (e->kind == Expr::Cond)
      right = i != 0;
    return wrapChild(e->prec, e->args[i], right, std::move(text));
  }
  std::string wrapFormattedChild(int parentPrec, const ExprP &child, bool right,
                                 unsigned col, unsigned limit) const {
    if (needsParens(parentPrec, child, right))
      return "(" + format(child, col + 1, limit - 1) + ")";
    return format(child, col, limit);
  }
  std::string wrapFormatted(const ExprP &e, unsigned i, unsigned col,
                            unsigned limit) const {
    bool right = e->kind == Expr::Cond ? i != 0 : e->kind != Expr::Binary || i;
    return wrapFormattedChild(e->prec, e->args[i], right, col, limit);
  }

  const LoopMap &map;
};

//===----------------------------------------------------------------------===//
// Literals
//===----------------------------------------------------------------------===//

ExprP literal(DType dtype, double v) {
  switch (dtype) {
  case DType::Bool:
    return atom(v != 0 ? "true" : "false");
  case DType::I32: {
    int64_t i = static_cast<int64_t>(v);
    if (i == INT32_MIN)
      return atom("(-2147483647 - 1)");
    return atom(std::to_string(i), i < 0 ? 3 : 0);
  }
  case DType::F32:
  case DType::F64: {
    bool f32 = dtype == DType::F32;
    llvm::StringRef type = f32 ? "float" : "double";
    if (std::isnan(v))
      return atom(("std::numeric_limits<" + type + ">::quiet_NaN()").str());
    if (std::isinf(v))
      return atom(((v < 0 ? "-" : "") +
                   ("std::numeric_limits<" + type + ">::infinity()"))
                      .str(),
                  v < 0 ? 3 : 0);
    // Whole numbers read best as such (10.0f, not 1e+01f).
    std::string s = std::fabs(v) < 1e15 && v == std::trunc(v)
                        ? std::to_string(static_cast<int64_t>(v))
                    : f32 ? formatFloat(static_cast<float>(v))
                          : formatDouble(v);
    if (v == 0 && std::signbit(v))
      s = "-0";
    if (s.find_first_of(".eE") == std::string::npos)
      s += ".0";
    if (f32)
      s += "f";
    return atom(s, s[0] == '-' ? 3 : 0);
  }
  }
  llvm_unreachable("unknown dtype");
}

/// A double expression rounded to float.
std::string narrowed(const std::string &e) {
  return "static_cast<float>(" + e + ")";
}

//===----------------------------------------------------------------------===//
// Op classification
//===----------------------------------------------------------------------===//

bool isElementwise(OpKind k) { return isElementwiseArithmetic(k); }

/// Ops that only move or repeat elements (or make constants): free to
/// inline wherever they are used.
bool isIndexMap(OpKind k) {
  switch (k) {
  case OpKind::Identity:
  case OpKind::StopGradient:
  case OpKind::ZerosLike:
  case OpKind::OnesLike:
  case OpKind::BroadcastTo:
  case OpKind::Transpose:
  case OpKind::Unstack:
  case OpKind::Split:
    return true;
  default:
    return false;
  }
}

bool isFusedReduction(OpKind k) {
  return k == OpKind::Sum || k == OpKind::Mean || k == OpKind::Max;
}

/// Whether sorted axes are consecutive (`[1, 2]`, `[0]`, `[]`), so that
/// the operand reads as `[outer, n, inner]` with the axes in the middle.
bool areAdjacent(const std::vector<int64_t> &axes) {
  for (size_t a = 1; a < axes.size(); ++a)
    if (axes[a] != axes[a - 1] + 1)
      return false;
  return true;
}

bool isSplatConstant(const ir::Op &op) {
  return op.getKind() == OpKind::Constant &&
         (op.getAttrs().getFloats("value").size() == 1 ||
          op.getResult()->getType().isScalar());
}

/// `head` + the parameters joined by ", " + `tail`, laid out as
/// clang-format's LLVM style would: on one line if it fits; else with the
/// parameters aligned after the parenthesis; else, when that would leave
/// little room (a long name), broken after the parenthesis and indented 4.
std::string declarationLines(const std::string &head,
                             const std::vector<std::string> &params,
                             const std::string &tail) {
  std::string one = head + llvm::join(params, ", ") + tail;
  if (one.size() <= lineLimit)
    return one;
  bool afterParen = head.size() > 40;
  std::string text = afterParen ? head + "\n    " : head;
  size_t col = afterParen ? 4 : head.size();
  size_t cur = col;
  for (size_t i = 0; i < params.size(); ++i) {
    std::string piece = params[i];
    piece += i + 1 < params.size() ? std::string(",") : tail;
    if (i > 0 && cur + 1 + piece.size() > lineLimit) {
      text += '\n';
      text.append(col, ' ');
      cur = col;
    } else if (i > 0) {
      text += ' ';
      ++cur;
    }
    text += piece;
    cur += piece.size();
  }
  return text;
}

/// `#include "shrink.h"` for the header of each extern function, once
/// each, in order of declaration (docs/Extern.md).
std::string externIncludes(const ir::Module &module) {
  std::string text;
  std::vector<std::string> seen;
  for (const ir::ExternDecl &e : module.externs) {
    if (llvm::is_contained(seen, e.header))
      continue;
    seen.push_back(e.header);
    text += "#include \"" + e.header + "\"\n";
  }
  return text;
}

/// Whether an op of any function calls `fn`.
/// The names of the functions that some call op of `module` calls.
llvm::StringSet<> calledNames(const ir::Module &module) {
  llvm::StringSet<> names;
  for (const auto &f : module.getFunctions())
    for (const auto &op : f->getOps())
      if (op->getKind() == OpKind::Call)
        names.insert(op->getCallee());
  return names;
}

std::string linkage(const ir::Function &fn) {
  return isExported(fn) ? "extern \"C\" int " : "static int ";
}

//===----------------------------------------------------------------------===//
// The emitter of one function
//===----------------------------------------------------------------------===//

class FunctionEmitter {
public:
  FunctionEmitter(const ir::Module &module, const ir::Function &fn,
                  const EmitOptions &options, std::string &out)
      : module(module), fn(fn), options(options), out(out) {}

  void run();

private:
  enum class Storage { Inline, Scalar, Pointer };
  struct Info {
    Storage storage = Storage::Inline;
    bool isRoot = false;
    std::string name;
    bool isParam = false;
    bool isAlias = false;
    bool isStatic = false;
    /// The output parameter that holds this value (-1: none).
    int output = -1;
    /// The C++ expression of an alias's pointer (`x`, `parts + 3`).
    std::string aliasInit;
    unsigned uses = 0;
    const ir::Op *user = nullptr;
    int lastUse = -1;
    int slot = -1;
    bool onStack = false;
    /// For a matmul operand read transposed: the value actually read.
    const ir::Value *transposedBase = nullptr;
  };
  struct Slot {
    DType dtype;
    Product size;
    std::string name;
    bool busy = false;
  };

  // Planning.
  void countUses();
  void decideStorage();
  bool readsEachElementOnce(const ir::Value *v, const ir::Op &user) const;
  void requirePointers();
  void ensurePointer(const ir::Value *v);
  bool isPointerExpressible(const ir::Value *v) const;
  void makeRoot(const ir::Value *v);
  void nameValues();
  std::string temporaryName(const ir::Op &op) const;
  void computeLiveness();
  void markRead(const ir::Value *v, int pos);
  void allocate();

  // Emission helpers.
  Product dimProduct(const Dim &d) const;
  Product extentOf(llvm::ArrayRef<Dim> shape, size_t from = 0,
                   size_t to = ~size_t(0)) const;
  std::vector<Product> strides(llvm::ArrayRef<Dim> shape) const;
  LinearForm rowMajorForm(llvm::ArrayRef<Dim> shape, const Index &idx) const;
  Index broadcastIndex(const Index &idx, llvm::ArrayRef<Dim> resultShape,
                       llvm::ArrayRef<Dim> operandShape) const;
  ExprP valueExpr(const ir::Value *v, const Index &idx);
  ExprP opExpr(const ir::Op &op, unsigned result, const Index &idx);
  ExprP elementwiseExpr(const ir::Op &op, const Index &idx);
  std::string pointerOf(const ir::Value *v) const;
  std::string typeName(const ir::Value *v) const {
    return cTypeName(v->getType().dtype).str();
  }

  // Emission.
  std::string signature(llvm::StringRef body) const;
  bool afterBrace() const {
    return out.size() >= 2 && out[out.size() - 2] == '{';
  }
  void line(const std::string &text) {
    out += std::string(indent, ' ') + text + "\n";
  }
  void statement(const std::string &lhs, const std::string &op,
                 const ExprP &rhs, const LoopMap &map);
  void comment(const ir::Op &op);
  void emitPrologue();
  void emitOp(const ir::Op &op, int pos);
  void emitOpBody(const ir::Op &op, int pos);
  void declareRoot(const ir::Value *v);
  void emitElementwiseRoot(const ir::Value *v);
  std::vector<const ir::Op *> reductionsToFuse(const ir::Value *v);
  void emitWithReductions(const ir::Value *v, const ExprP &rhs,
                          const LinearForm &dst,
                          const std::vector<Product> &extents,
                          std::vector<const LinearForm *> forms,
                          const std::vector<const ir::Op *> &reductions);
  std::string reductionInit(const ir::Op &op) const;
  void emitCopy(const ir::Value *from, const std::string &dst,
                const TensorType &type);
  void emitReduction(const ir::Op &op);
  void emitJoin(const ir::Op &op);
  void emitMatMul(const ir::Op &op);
  void emitKernel(const ir::Op &op);
  void emitLogSumExpLoops(const ir::Op &op);
  void emitCall(const ir::Op &op);
  void emitConstant(const ir::Op &op);
  void emitEpilogue();
  /// Emits `for` loops over `extents` around `body`, merging adjacent
  /// dimensions where every form in `forms` allows.
  void emitLoopNest(const std::vector<Product> &extents,
                    const std::vector<const LinearForm *> &forms,
                    llvm::function_ref<void(const LoopMap &)> body);
  std::vector<std::vector<int>>
  mergeGroups(const std::vector<Product> &extents,
              const std::vector<const LinearForm *> &forms,
              llvm::ArrayRef<int> barrier = {}) const;
  std::vector<const LinearForm *> collectForms(const ExprP &e) const;
  std::string countAsFloat(const Product &count, DType dtype) const;

  const ir::Module &module;
  const ir::Function &fn;
  const EmitOptions &options;
  std::string &out;

  NameScope scope;
  std::vector<CParam> cparams;
  llvm::DenseMap<const ir::Value *, Info> info;
  llvm::StringMap<std::string> sizeNames; // size name -> C++ name
  std::vector<Slot> slots;
  std::vector<std::string> loopVars;
  std::string accName, statusName, divStatusName;
  /// The running maximum of logsumexp's loops, claimed when first needed.
  std::string topName;
  bool needsDivStatus = false;
  /// Whether code emitted since the last check divides integers.
  bool dividedSinceCheck = false;
  void checkDivision() {
    if (!dividedSinceCheck)
      return;
    dividedSinceCheck = false;
    line("if (" + divStatusName + " != GRADC_OK)");
    line("  return " + divStatusName + ";");
  }
  unsigned indent = 2;
  std::string lastComment;
  /// Reductions already computed in the loop of their operand.
  llvm::SmallPtrSet<const ir::Op *, 4> fusedReductions;
  /// The sum, mean and max ops reading each value, in op order.
  llvm::DenseMap<const ir::Value *, llvm::SmallVector<const ir::Op *, 1>>
      reductionsOf;
};

//===--- Planning ---------------------------------------------------------===//

void FunctionEmitter::countUses() {
  for (const auto &op : fn.getOps())
    if (isFusedReduction(op->getKind()))
      reductionsOf[op->getOperand(0)].push_back(op.get());
  for (const ir::Value *p : fn.getParams()) {
    Info &i = info[p];
    i.isParam = true;
    i.storage = p->getType().isScalar() ? Storage::Scalar : Storage::Pointer;
  }
  for (const auto &op : fn.getOps())
    for (const ir::Value *v : op->getOperands()) {
      Info &i = info[v];
      ++i.uses;
      i.user = op.get();
    }
  for (const ir::Value *v : fn.getReturns()) {
    Info &i = info[v];
    ++i.uses;
    i.user = nullptr;
  }
}

/// Whether `user` reads each element of its operand `v` at most once, so
/// that inlining `v` into it does not repeat work.
bool FunctionEmitter::readsEachElementOnce(const ir::Value *v,
                                           const ir::Op &user) const {
  OpKind k = user.getKind();
  if (isElementwise(k) || k == OpKind::BroadcastTo)
    return v->getType().shape == user.getResult()->getType().shape;
  switch (k) {
  case OpKind::Identity:
  case OpKind::StopGradient:
  case OpKind::Transpose:
  case OpKind::Unstack:
  case OpKind::Split:
  case OpKind::ZerosLike:
  case OpKind::OnesLike:
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max:
  case OpKind::Stack:
  case OpKind::Concat:
    return true;
  default:
    return false;
  }
}

void FunctionEmitter::decideStorage() {
  for (const auto &opPtr : fn.getOps()) {
    const ir::Op &op = *opPtr;
    OpKind k = op.getKind();
    for (const ir::Value *v : op.getResults()) {
      Info &i = info[v];
      bool scalar = v->getType().isScalar();
      bool returned = llvm::is_contained(fn.getReturns(), v);
      if (k == OpKind::Reshape && scalar) {
        // reshape(x, []): the one element, read into a scalar local.
        i.storage = Storage::Scalar;
      } else if (k == OpKind::Reshape) {
        i.storage = Storage::Pointer;
        i.isAlias = true;
      } else if (isSplatConstant(op) || isIndexMap(k)) {
        i.storage = Storage::Inline;
      } else if (isElementwise(k) || k == OpKind::OneHot) {
        bool inlineIt = i.uses == 1 && i.user &&
                        readsEachElementOnce(v, *i.user) &&
                        (!scalar || v->getName().empty());
        i.storage = inlineIt ? Storage::Inline
                             : (scalar ? Storage::Scalar : Storage::Pointer);
      } else if (k == OpKind::Constant) {
        i.storage = Storage::Pointer;
        i.isStatic = true;
      } else {
        i.storage = scalar ? Storage::Scalar : Storage::Pointer;
      }
      if (returned && i.storage == Storage::Inline)
        i.storage = scalar ? Storage::Scalar : Storage::Pointer;
      if (returned && i.isAlias) {
        // A reshaped value that is returned is copied into the output.
        i.isAlias = false;
      }
      i.isRoot = i.storage != Storage::Inline && !i.isAlias;
    }
  }
}

void FunctionEmitter::makeRoot(const ir::Value *v) {
  Info &i = info[v];
  i.storage = v->getType().isScalar() ? Storage::Scalar : Storage::Pointer;
  i.isRoot = true;
  i.isAlias = false;
}

bool FunctionEmitter::isPointerExpressible(const ir::Value *v) const {
  const Info &i = info.find(v)->second;
  if (i.storage != Storage::Inline)
    return true;
  const ir::Op *def = v->getDefiningOp();
  if (!def)
    return true;
  switch (def->getKind()) {
  case OpKind::Identity:
  case OpKind::StopGradient:
    return isPointerExpressible(def->getOperand(0));
  case OpKind::Unstack:
  case OpKind::Split: {
    // A slice is contiguous when every dimension before its axis is 1.
    const ir::Value *x = def->getOperand(0);
    int64_t axis = def->getAttrs().getInt("axis");
    for (int64_t d = 0; d < axis; ++d) {
      const Dim &dim = x->getType().shape[d];
      if (!dim.isKnown() || dim.getSize() != 1)
        return false;
    }
    return isPointerExpressible(x);
  }
  default:
    return false;
  }
}

void FunctionEmitter::ensurePointer(const ir::Value *v) {
  Info &i = info[v];
  if (i.storage != Storage::Inline)
    return;
  if (!isPointerExpressible(v)) {
    makeRoot(v);
    return;
  }
  const ir::Op *def = v->getDefiningOp();
  ensurePointer(def->getOperand(0));
  i.storage = Storage::Pointer;
  i.isAlias = true;
}

void FunctionEmitter::requirePointers() {
  for (const auto &opPtr : fn.getOps()) {
    const ir::Op &op = *opPtr;
    switch (op.getKind()) {
    case OpKind::MatMul:
      for (const ir::Value *v : op.getOperands()) {
        // matmul(transpose(w)) reads w transposed when the transpose
        // swaps the last two axes only.
        const ir::Op *def = v->getDefiningOp();
        if (def && def->getKind() == OpKind::Transpose &&
            info[v].storage == Storage::Inline) {
          const std::vector<int64_t> &perm = def->getAttrs().getInts("perm");
          size_t r = perm.size();
          bool swapsLastTwo = r >= 2 && perm[r - 1] == int64_t(r - 2) &&
                              perm[r - 2] == int64_t(r - 1);
          for (size_t d = 0; d + 2 < r; ++d)
            swapsLastTwo &= perm[d] == int64_t(d);
          if (swapsLastTwo) {
            ensurePointer(def->getOperand(0));
            info[v].transposedBase = def->getOperand(0);
            continue;
          }
        }
        ensurePointer(v);
      }
      break;
    case OpKind::OneHot:
      if (info[op.getResult()].storage == Storage::Inline)
        break;
      [[fallthrough]];
    case OpKind::Reshape:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::LogSumExp:
    case OpKind::SoftmaxCrossEntropy:
      for (const ir::Value *v : op.getOperands())
        ensurePointer(v);
      break;
    case OpKind::Call:
    case OpKind::ExternCall:
      for (const ir::Value *v : op.getOperands())
        if (!v->getType().isScalar())
          ensurePointer(v);
      break;
    default:
      break;
    }
  }
}

void FunctionEmitter::markRead(const ir::Value *v, int pos) {
  Info &i = info[v];
  if (i.storage == Storage::Inline) {
    const ir::Op *def = v->getDefiningOp();
    if (!def || def->getKind() == OpKind::ZerosLike ||
        def->getKind() == OpKind::OnesLike)
      return;
    for (const ir::Value *operand : def->getOperands())
      markRead(operand, pos);
    return;
  }
  i.lastUse = std::max(i.lastUse, pos);
  if (i.transposedBase)
    markRead(i.transposedBase, pos);
  if (i.isAlias && v->getDefiningOp())
    markRead(v->getDefiningOp()->getOperand(0), pos);
}

void FunctionEmitter::computeLiveness() {
  const auto &ops = fn.getOps();
  for (size_t pos = 0; pos < ops.size(); ++pos) {
    const ir::Op &op = *ops[pos];
    bool emitsCode = llvm::any_of(op.getResults(), [&](const ir::Value *r) {
      const Info &i = info[r];
      return i.isRoot || i.isAlias;
    });
    if (!emitsCode)
      continue;
    for (const ir::Value *v : op.getOperands())
      markRead(v, pos);
  }
  for (const ir::Value *v : fn.getReturns())
    markRead(v, ops.size());
}

void FunctionEmitter::nameValues() {
  // The outputs' values first: a value named like its output uses the
  // output parameter itself.
  for (const CParam &p : cparams) {
    if (p.kind != CParamKind::Output)
      continue;
    Info &i = info[p.value];
    // (A constant array stays a static array and is copied.)
    if (i.isParam || i.output >= 0 || !i.isRoot || i.isStatic ||
        i.storage != Storage::Pointer)
      continue;
    i.output = p.resultIndex;
    if (p.value->getName().empty() ||
        mangleIdentifier(p.value->getName()) == p.name)
      i.name = p.name;
  }
  for (const ir::Value *p : fn.getParams())
    for (const CParam &c : cparams)
      if (c.value == p && c.kind == CParamKind::Input)
        info[p].name = c.name;
  for (const auto &op : fn.getOps())
    for (const ir::Value *v : op->getResults()) {
      Info &i = info[v];
      if (i.storage == Storage::Inline || !i.name.empty())
        continue;
      i.name = scope.claim(v->getName().empty() ? temporaryName(*op)
                                                : v->getName().str());
    }
}

/// A name for an unnamed temporary: the op, and its operand when that has
/// a name and the op has one operand (`tanh_h`, `matmul`, `sum_d_z`).
std::string FunctionEmitter::temporaryName(const ir::Op &op) const {
  std::string name = op.getName().str();
  if (op.getNumOperands() == 1 && !op.getOperand(0)->getName().empty())
    name += "_" + op.getOperand(0)->getName().str();
  return name;
}

/// First fit, in linear time: each value takes the lowest-numbered free
/// slot of its element type that fits it (a slot of a known size grows to
/// fit any known size; a symbolic size needs a slot of exactly that size),
/// and gives it back after its last use. The free slots are kept per kind
/// (element type and, for a symbolic size, the size) and the values per
/// last use, so an op costs a logarithm, not a walk over every slot and
/// every live value: that walk made the C++ of a 10,000-step gradient
/// quadratic.
void FunctionEmitter::allocate() {
  const auto &ops = fn.getOps();
  // The kind of a slot of element type `dtype` and size `size`: two slots
  // fit the same values exactly when their kinds are equal.
  auto kindOf = [](DType dtype, const Product &size) {
    std::string key = std::to_string(static_cast<int>(dtype));
    if (size.isKnown())
      return key;
    std::vector<std::string> names = size.names;
    llvm::sort(names);
    key += ":" + std::to_string(size.constant);
    for (const std::string &name : names)
      key += "," + name;
    return key;
  };
  std::map<std::string, std::set<int>> freeSlots;
  std::vector<std::string> slotKind;
  // The values whose slot is given back after op `pos`: freedAfter[pos].
  std::vector<std::vector<const ir::Value *>> freedAfter(ops.size());
  for (size_t pos = 0; pos < ops.size(); ++pos) {
    for (const ir::Value *v : ops[pos]->getResults()) {
      Info &i = info[v];
      if (!i.isRoot || i.storage != Storage::Pointer || i.output >= 0 ||
          i.isStatic)
        continue;
      const TensorType &t = v->getType();
      std::optional<int64_t> known = knownNumElements(t.shape);
      int64_t elementBytes = t.dtype == DType::F64    ? 8
                             : t.dtype == DType::Bool ? 1
                                                      : 4;
      if (known && *known * elementBytes <= maxStackBytes) {
        i.onStack = true;
        continue;
      }
      Product size = extentOf(t.shape);
      std::string kind = kindOf(t.dtype, size);
      std::set<int> &candidates = freeSlots[kind];
      int found;
      if (!candidates.empty()) {
        found = *candidates.begin();
        candidates.erase(candidates.begin());
        Slot &slot = slots[found];
        if (slot.size != size)
          slot.size.constant = std::max(slot.size.constant, size.constant);
      } else {
        found = slots.size();
        slots.push_back({t.dtype, size, "", false});
        slotKind.push_back(kind);
      }
      slots[found].busy = true;
      i.slot = found;
      // A returned value (last use: the end) keeps its slot.
      size_t last = std::max<int>(i.lastUse, pos);
      if (last < ops.size())
        freedAfter[last].push_back(v);
    }
    // Free the slots of values that nothing reads after this op.
    for (const ir::Value *v : freedAfter[pos]) {
      int slot = info[v].slot;
      slots[slot].busy = false;
      freeSlots[slotKind[slot]].insert(slot);
    }
  }
}

//===--- Index arithmetic -------------------------------------------------===//

Product FunctionEmitter::dimProduct(const Dim &d) const {
  if (d.isKnown())
    return Product::of(d.getSize());
  Product p;
  auto it = sizeNames.find(d.getName());
  p.names.push_back(it != sizeNames.end() ? it->second
                                          : mangleIdentifier(d.getName()));
  return p;
}

Product FunctionEmitter::extentOf(llvm::ArrayRef<Dim> shape, size_t from,
                                  size_t to) const {
  Product p;
  for (size_t d = from; d < std::min(to, shape.size()); ++d)
    p = p * dimProduct(shape[d]);
  return p;
}

std::vector<Product> FunctionEmitter::strides(llvm::ArrayRef<Dim> shape) const {
  std::vector<Product> s(shape.size());
  Product p;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = p;
    p = p * dimProduct(shape[d]);
  }
  return s;
}

LinearForm FunctionEmitter::rowMajorForm(llvm::ArrayRef<Dim> shape,
                                         const Index &idx) const {
  std::vector<Product> s = strides(shape);
  LinearForm form;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (idx[d].dim >= 0)
      form.add(idx[d].dim, s[d]);
    if (idx[d].offset)
      form.add(-1, s[d] * Product::of(idx[d].offset));
  }
  return form;
}

/// The index of an operand broadcast (NumPy rules) to `resultShape`.
Index FunctionEmitter::broadcastIndex(const Index &idx,
                                      llvm::ArrayRef<Dim> resultShape,
                                      llvm::ArrayRef<Dim> operandShape) const {
  size_t lead = resultShape.size() - operandShape.size();
  Index result(operandShape.size());
  for (size_t d = 0; d < operandShape.size(); ++d) {
    const Dim &od = operandShape[d];
    const Dim &rd = resultShape[lead + d];
    bool broadcast = od.isKnown() && od.getSize() == 1 &&
                     !(rd.isKnown() && rd.getSize() == 1);
    if (!broadcast)
      result[d] = idx[lead + d];
  }
  return result;
}

std::string FunctionEmitter::pointerOf(const ir::Value *v) const {
  const Info &i = info.find(v)->second;
  if (i.storage == Storage::Scalar)
    return "&" + i.name;
  return i.name;
}

ExprP FunctionEmitter::valueExpr(const ir::Value *v, const Index &idx) {
  const Info &i = info[v];
  switch (i.storage) {
  case Storage::Inline:
    return opExpr(*v->getDefiningOp(), v->getResultIndex(), idx);
  case Storage::Scalar:
    if (i.isParam && v->getType().dtype == DType::Bool)
      return binary("!=", atom(i.name), atom("0"));
    return atom(i.name);
  case Storage::Pointer: {
    ExprP a = access(i.name, rowMajorForm(v->getType().shape, idx));
    if (i.isParam && v->getType().dtype == DType::Bool)
      return binary("!=", a, atom("0"));
    return a;
  }
  }
  llvm_unreachable("unknown storage");
}

ExprP FunctionEmitter::opExpr(const ir::Op &op, unsigned result,
                              const Index &idx) {
  const ir::Value *x = op.getNumOperands() ? op.getOperand(0) : nullptr;
  const TensorType &type = op.getResult(result)->getType();
  switch (op.getKind()) {
  case OpKind::Identity:
  case OpKind::StopGradient:
    return valueExpr(x, idx);
  case OpKind::ZerosLike:
    return literal(type.dtype, 0);
  case OpKind::OnesLike:
    return literal(type.dtype, 1);
  case OpKind::Constant:
    return literal(type.dtype, op.getAttrs().getFloats("value")[0]);
  case OpKind::BroadcastTo:
    return valueExpr(x, broadcastIndex(idx, type.shape, x->getType().shape));
  case OpKind::OneHot: {
    // 1 where the index equals the position along the last axis; an index
    // out of range matches no position (a row of zeros).
    Index in(idx.begin(), idx.end() - 1);
    const Idx &last = idx.back();
    LinearForm position;
    if (last.dim >= 0)
      position.add(last.dim, Product());
    if (last.offset)
      position.add(-1, Product::of(last.offset));
    ExprP hit = binary("==", valueExpr(x, in), indexValue(position));
    return cond(hit, literal(type.dtype, 1), literal(type.dtype, 0));
  }
  case OpKind::Reshape:
    // A scalar operand is its one element; any other operand is
    // contiguous: the same flat offset.
    if (info[x].storage == Storage::Scalar)
      return valueExpr(x, Index());
    return access(pointerOf(x), rowMajorForm(type.shape, idx));
  case OpKind::Transpose: {
    const std::vector<int64_t> &perm = op.getAttrs().getInts("perm");
    Index in(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      in[perm[d]] = idx[d];
    return valueExpr(x, in);
  }
  case OpKind::Unstack: {
    Index in = idx;
    int64_t axis = op.getAttrs().getInt("axis");
    in.insert(in.begin() + axis, Idx{-1, int64_t(result)});
    return valueExpr(x, in);
  }
  case OpKind::Split: {
    Index in = idx;
    int64_t axis = op.getAttrs().getInt("axis");
    const Shape &sizes = op.getAttrs().getShape("sizes");
    for (unsigned r = 0; r < result; ++r)
      in[axis].offset += sizes[r].getSize();
    return valueExpr(x, in);
  }
  default:
    assert(isElementwise(op.getKind()) && "not an elementwise op");
    return elementwiseExpr(op, idx);
  }
}

ExprP FunctionEmitter::elementwiseExpr(const ir::Op &op, const Index &idx) {
  const TensorType &rtype = op.getResult()->getType();
  std::vector<ExprP> a;
  for (const ir::Value *v : op.getOperands())
    a.push_back(
        valueExpr(v, broadcastIndex(idx, rtype.shape, v->getType().shape)));
  DType t =
      op.getOperand(op.getKind() == OpKind::Select ? 1 : 0)->getType().dtype;
  bool isInt = t == DType::I32;
  auto fn1 = [&](const char *name) { return call(name, {a[0]}); };
  switch (op.getKind()) {
  case OpKind::Neg:
    return isInt ? fn1("gradc::wrapNeg") : unary("-", a[0]);
  case OpKind::Exp:
    return fn1("gradc::exp");
  case OpKind::Log:
    return fn1("gradc::log");
  case OpKind::Sqrt:
    return fn1("std::sqrt");
  case OpKind::Abs:
    return fn1(isInt ? "gradc::wrapAbs" : "std::fabs");
  case OpKind::Sign:
    return fn1("gradc::sign");
  case OpKind::Sin:
    return fn1("gradc::sin");
  case OpKind::Cos:
    return fn1("gradc::cos");
  case OpKind::Atan:
    return fn1("gradc::atan");
  case OpKind::Tanh:
    return fn1("gradc::tanh");
  case OpKind::Sigmoid:
    return fn1("gradc::sigmoid");
  case OpKind::Relu:
    return fn1("gradc::relu");
  case OpKind::Softplus:
    return fn1("gradc::softplus");
  case OpKind::Square:
    if (isLeaf(a[0]) && !isInt)
      return binary("*", a[0], a[0]);
    return fn1("gradc::square");
  case OpKind::Add:
    return isInt ? call("gradc::wrapAdd", a) : binary("+", a[0], a[1]);
  case OpKind::Sub:
    return isInt ? call("gradc::wrapSub", a) : binary("-", a[0], a[1]);
  case OpKind::Mul:
    return isInt ? call("gradc::wrapMul", a) : binary("*", a[0], a[1]);
  case OpKind::Div:
    if (isInt) {
      dividedSinceCheck = true;
      return call("gradc::divide", {a[0], a[1], atom(divStatusName)});
    }
    return binary("/", a[0], a[1]);
  case OpKind::Pow: {
    // Small constant exponents are multiplications, exactly as
    // gradc::pow computes them; anything else calls it.
    const ir::Op *e = op.getOperand(1)->getDefiningOp();
    if (e && isSplatConstant(*e) &&
        info[op.getOperand(1)].storage == Storage::Inline) {
      double p = e->getAttrs().getFloats("value")[0];
      if (p == 1)
        return a[0];
      if (p == 2)
        return isLeaf(a[0]) ? binary("*", a[0], a[0])
                            : call("gradc::square", {a[0]});
    }
    return call("gradc::pow", a);
  }
  case OpKind::Maximum:
    return call("gradc::maximum", a);
  case OpKind::Minimum:
    return call("gradc::minimum", a);
  case OpKind::Less:
    return binary("<", a[0], a[1]);
  case OpKind::LessEqual:
    return binary("<=", a[0], a[1]);
  case OpKind::Greater:
    return binary(">", a[0], a[1]);
  case OpKind::GreaterEqual:
    return binary(">=", a[0], a[1]);
  case OpKind::Equal:
    return binary("==", a[0], a[1]);
  case OpKind::NotEqual:
    return binary("!=", a[0], a[1]);
  case OpKind::Select:
    if (isFloat(t))
      return call("gradc::select", a);
    return cond(a[0], a[1], a[2]);
  case OpKind::Clip:
    return call("gradc::clip", a);
  default:
    llvm_unreachable("not an elementwise op");
  }
}

//===--- Loops ------------------------------------------------------------===//

std::vector<const LinearForm *>
FunctionEmitter::collectForms(const ExprP &e) const {
  std::vector<const LinearForm *> forms;
  std::vector<const Expr *> work{e.get()};
  while (!work.empty()) {
    const Expr *x = work.back();
    work.pop_back();
    if (x->kind == Expr::Access || x->kind == Expr::Index)
      forms.push_back(&x->form);
    for (const ExprP &a : x->args)
      work.push_back(a.get());
  }
  return forms;
}

/// The dimensions d where a reduction over `axes` changes between reduced
/// and kept (d - 1 is one, d the other): barriers for mergeGroups, so that
/// no loop runs over both kinds.
static std::vector<int> reductionBarriers(size_t rank,
                                          llvm::ArrayRef<int64_t> axes) {
  std::vector<int> barrier;
  for (size_t d = 1; d < rank; ++d)
    if (llvm::is_contained(axes, int64_t(d)) !=
        llvm::is_contained(axes, int64_t(d - 1)))
      barrier.push_back(int(d));
  return barrier;
}

/// Groups adjacent dimensions that one variable can run through: d and
/// d + 1 merge when every access steps over d exactly as far as over all
/// of d + 1 (coefficient(d) == coefficient(d + 1) * extent(d + 1)).
std::vector<std::vector<int>>
FunctionEmitter::mergeGroups(const std::vector<Product> &extents,
                             const std::vector<const LinearForm *> &forms,
                             llvm::ArrayRef<int> barrier) const {
  std::vector<std::vector<int>> groups;
  for (int d = 0; d < int(extents.size()); ++d) {
    bool merge = !groups.empty() && !llvm::is_contained(barrier, d);
    if (merge) {
      int prev = groups.back().back();
      // The merged group's innermost is `d` from now on: every access
      // must step over `prev` as far as over all of `d`.
      for (const LinearForm *f : forms)
        if (f->coeffOf(prev) != f->coeffOf(d) * extents[d]) {
          merge = false;
          break;
        }
    }
    if (merge)
      groups.back().push_back(d);
    else
      groups.push_back({d});
  }
  return groups;
}

void FunctionEmitter::emitLoopNest(
    const std::vector<Product> &extents,
    const std::vector<const LinearForm *> &forms,
    llvm::function_ref<void(const LoopMap &)> body) {
  std::vector<std::vector<int>> groups = mergeGroups(extents, forms);
  LoopMap map;
  map.var.resize(extents.size());
  unsigned saved = indent;
  for (size_t g = 0; g < groups.size(); ++g) {
    Product extent;
    for (int d : groups[g])
      extent = extent * extents[d];
    const std::string &v = loopVars[g];
    map.var[groups[g].back()] = v;
    line("for (int64_t " + v + " = 0; " + v + " < " + extent.str() + "; ++" +
         v + ")");
    indent += 2;
  }
  body(map);
  indent = saved;
}

void FunctionEmitter::statement(const std::string &lhs, const std::string &op,
                                const ExprP &rhs, const LoopMap &map) {
  Printer printer(map);
  std::string prefix = lhs + " " + op + " ";
  unsigned col = indent + prefix.size();
  line(prefix + printer.format(rhs, col, lineLimit - 1) + ";");
}

//===--- Comments ---------------------------------------------------------===//

/// Splits `text` into lines of at most `width` characters at spaces.
std::vector<std::string> wrapWords(llvm::StringRef text, unsigned width) {
  std::vector<std::string> lines;
  std::string cur;
  llvm::SmallVector<llvm::StringRef, 16> words;
  text.split(words, ' ', -1, false);
  for (llvm::StringRef w : words) {
    if (!cur.empty() && cur.size() + 1 + w.size() > width) {
      lines.push_back(cur);
      cur.clear();
    }
    if (!cur.empty())
      cur += ' ';
    cur.append(w.data(), w.size());
  }
  if (!cur.empty())
    lines.push_back(cur);
  return lines;
}

void FunctionEmitter::comment(const ir::Op &op) {
  std::string text = op.getNote();
  if (text.empty() && options.sourceManager && op.getLoc().isValid()) {
    PresumedLoc loc = options.sourceManager->getPresumedLoc(op.getLoc());
    if (loc.isValid())
      text = llvm::sys::path::filename(loc.filename).str() + ":" +
             std::to_string(loc.line) + ": " + loc.lineText.trim().str();
  }
  if (text.empty() || text == lastComment)
    return;
  if (!afterBrace())
    out += "\n";
  lastComment = text;
  for (const std::string &l : wrapWords(text, lineLimit - indent - 3))
    line("// " + l);
}

//===--- Emission ---------------------------------------------------------===//

std::string FunctionEmitter::countAsFloat(const Product &count,
                                          DType dtype) const {
  if (count.isKnown())
    return Printer(LoopMap()).flat(literal(dtype, double(count.constant)));
  return "static_cast<" + cTypeName(dtype).str() + ">(" + count.str() + ")";
}

void FunctionEmitter::emitPrologue() {
  std::vector<std::string> sizeChecks;
  for (const CParam &p : cparams)
    if (p.kind == CParamKind::Size)
      sizeChecks.push_back(p.name + " < 0");
  if (!sizeChecks.empty()) {
    line("if (" + llvm::join(sizeChecks, " || ") + ")");
    line("  return GRADC_ERROR_SIZE;");
  }
  // Element counts that could wrap (SizeChecks.h), once the sizes are
  // known to be non-negative.
  ExprP overflows;
  for (const SizeProduct &p : sizeProductsToCheck(fn)) {
    std::vector<std::string> factors;
    for (const std::string &name : p.names)
      factors.push_back(sizeNames.lookup(name));
    if (p.constant != 1)
      factors.push_back(std::to_string(p.constant));
    ExprP check =
        atom("gradc::countOverflows({" + llvm::join(factors, ", ") + "})");
    overflows = overflows ? binary("||", overflows, check) : check;
  }
  if (overflows) {
    line("if (" +
         Printer(LoopMap()).format(overflows, indent + 4, lineLimit - 1) + ")");
    line("  return GRADC_ERROR_SIZE;");
  }
  if (!slots.empty()) {
    if (!afterBrace())
      out += "\n";
    line("// Scratch space for temporaries, freed on return.");
    ExprP failed;
    for (Slot &s : slots) {
      line("gradc::Buffer<" + cTypeName(s.dtype).str() + "> " + s.name + "(" +
           s.size.str() + ");");
      ExprP check = unary("!", atom(s.name));
      failed = failed ? binary("||", failed, check) : check;
    }
    line("if (" + Printer(LoopMap()).format(failed, indent + 4, lineLimit - 1) +
         ")");
    line("  return GRADC_ERROR_ALLOC;");
  }
  if (needsDivStatus)
    line("int " + divStatusName + " = GRADC_OK;");
}

/// Declares the storage of a root with a pointer: a stack array, a
/// scratch buffer, or a name for the output that holds it.
void FunctionEmitter::declareRoot(const ir::Value *v) {
  Info &i = info[v];
  std::string type = typeName(v);
  if (i.output >= 0) {
    for (const CParam &p : cparams)
      if (p.kind == CParamKind::Output && int(p.resultIndex) == i.output &&
          p.name != i.name)
        line(type + " *" + i.name + " = " + p.name + ";");
    return;
  }
  if (i.onStack) {
    int64_t n = knownNumElements(v->getType().shape).value_or(1);
    line(type + " " + i.name + "[" + std::to_string(std::max<int64_t>(n, 1)) +
         "];");
    return;
  }
  if (i.slot >= 0)
    line(type + " *" + i.name + " = " + slots[i.slot].name + ".data();");
}

void FunctionEmitter::emitElementwiseRoot(const ir::Value *v) {
  const ir::Op &op = *v->getDefiningOp();
  const TensorType &t = v->getType();
  Info &i = info[v];
  Index idx(t.getRank());
  for (size_t d = 0; d < idx.size(); ++d)
    idx[d].dim = d;
  ExprP rhs = opExpr(op, v->getResultIndex(), idx);
  if (t.isScalar()) {
    statement(typeName(v) + " " + i.name, "=", rhs, LoopMap());
    return;
  }
  declareRoot(v);
  LinearForm dst = rowMajorForm(t.shape, idx);
  std::vector<const LinearForm *> forms = collectForms(rhs);
  forms.push_back(&dst);
  std::vector<Product> extents;
  for (const Dim &d : t.shape)
    extents.push_back(dimProduct(d));
  std::vector<const ir::Op *> reductions = reductionsToFuse(v);
  if (reductions.empty()) {
    emitLoopNest(extents, forms, [&](const LoopMap &map) {
      statement(i.name + "[" + accessIndex(dst, map) + "]", "=", rhs, map);
    });
    checkDivision();
    return;
  }
  emitWithReductions(v, rhs, dst, extents, forms, reductions);
}

/// The sums, means and maxima of `v` over its own elements that can be
/// computed in the loop that computes `v` rather than in a second pass:
/// those whose result lives in an output or a scalar (so no storage is
/// needed earlier than planned).
std::vector<const ir::Op *>
FunctionEmitter::reductionsToFuse(const ir::Value *v) {
  std::vector<const ir::Op *> found;
  for (const ir::Op *op : reductionsOf.lookup(v)) {
    const Info &r = info[op->getResult()];
    if (!r.isRoot || (r.storage != Storage::Scalar && r.output < 0))
      continue;
    found.push_back(op);
  }
  return found;
}

/// Emits `v`'s loop nest with the reductions of `v` accumulating in place
/// in the same body: `mul[i * 3 + j] = ...; d_b1[j] += mul[i * 3 + j];`.
void FunctionEmitter::emitWithReductions(
    const ir::Value *v, const ExprP &rhs, const LinearForm &dst,
    const std::vector<Product> &extents, std::vector<const LinearForm *> forms,
    const std::vector<const ir::Op *> &reductions) {
  const Info &vi = info[v];
  size_t rank = extents.size();
  struct Fused {
    const ir::Op *op;
    LinearForm dst;
    std::vector<int64_t> axes;
    Product count;
    /// An f32 sum into a scalar: the double local it accumulates in.
    std::string wideAcc;
  };
  std::vector<Fused> fused;
  std::vector<int> barrier;
  for (const ir::Op *r : reductions) {
    fusedReductions.insert(r);
    Fused f{r, {}, r->getAttrs().getInts("axis"), Product(), ""};
    Shape kept;
    Index keptIdx;
    for (size_t d = 0; d < rank; ++d) {
      if (llvm::is_contained(f.axes, int64_t(d))) {
        f.count = f.count * extents[d];
        continue;
      }
      kept.push_back(v->getType().shape[d]);
      keptIdx.push_back(Idx{int(d), 0});
    }
    f.dst = rowMajorForm(kept, keptIdx);
    for (size_t d = 1; d < rank; ++d)
      if (llvm::is_contained(f.axes, int64_t(d)) !=
          llvm::is_contained(f.axes, int64_t(d - 1)))
        barrier.push_back(d);
    fused.push_back(std::move(f));
  }
  for (const Fused &f : fused)
    forms.push_back(&f.dst);
  // Initialise each result, under the comment of its own op.
  for (Fused &f : fused) {
    const ir::Value *r = f.op->getResult();
    comment(*f.op);
    std::string init = reductionInit(*f.op);
    if (info[r].storage == Storage::Scalar) {
      if (r->getType().dtype == DType::F32 && f.op->getKind() != OpKind::Max) {
        f.wideAcc = scope.claim("acc");
        line("double " + f.wideAcc + " = 0.0;");
        continue;
      }
      line(typeName(r) + " " + info[r].name + " = " + init + ";");
      continue;
    }
    declareRoot(r);
    const std::string &lv = loopVars[0];
    line("for (int64_t " + lv + " = 0; " + lv + " < " +
         extentOf(r->getType().shape).str() + "; ++" + lv + ")");
    line("  " + info[r].name + "[" + lv + "] = " + init + ";");
  }
  std::vector<std::string> names;
  for (const Fused &f : fused)
    names.push_back(info[f.op->getResult()].name);
  out += "\n";
  line("// " + vi.name + ", with " + llvm::join(names, ", ") +
       " accumulated in the same pass:");
  std::vector<std::vector<int>> groups = mergeGroups(extents, forms, barrier);
  LoopMap map;
  map.var.resize(rank);
  for (size_t g = 0; g < groups.size(); ++g)
    map.var[groups[g].back()] = loopVars[g];
  unsigned saved = indent;
  for (size_t g = 0; g < groups.size(); ++g) {
    Product extent;
    for (int d : groups[g])
      extent = extent * extents[d];
    const std::string &lv = loopVars[g];
    line("for (int64_t " + lv + " = 0; " + lv + " < " + extent.str() + "; ++" +
         lv + ")" + (g + 1 == groups.size() ? " {" : ""));
    indent += 2;
  }
  std::string element = vi.name + "[" + accessIndex(dst, map) + "]";
  statement(element, "=", rhs, map);
  for (const Fused &f : fused) {
    const ir::Value *r = f.op->getResult();
    std::string target =
        !f.wideAcc.empty() ? f.wideAcc
        : info[r].storage == Storage::Scalar
            ? info[r].name
            : info[r].name + "[" + accessIndex(f.dst, map) + "]";
    if (f.op->getKind() == OpKind::Max)
      line(target + " = gradc::maximum(" + target + ", " + element + ");");
    else if (r->getType().dtype == DType::I32)
      line(target + " = gradc::wrapAdd(" + target + ", " + element + ");");
    else
      line(target + " += " + element + ";");
  }
  indent -= 2;
  line("}");
  indent = saved;
  checkDivision();
  for (const Fused &f : fused) {
    const ir::Value *r = f.op->getResult();
    if (!f.wideAcc.empty()) {
      std::string total = f.wideAcc;
      if (f.op->getKind() == OpKind::Mean)
        total += " / " + countAsFloat(f.count, DType::F64);
      line("float " + info[r].name + " = " + narrowed(total) + ";");
      continue;
    }
    if (f.op->getKind() != OpKind::Mean)
      continue;
    std::string divisor = countAsFloat(f.count, r->getType().dtype);
    if (info[r].storage == Storage::Scalar) {
      line(info[r].name + " /= " + divisor + ";");
      continue;
    }
    const std::string &lv = loopVars[0];
    line("for (int64_t " + lv + " = 0; " + lv + " < " +
         extentOf(r->getType().shape).str() + "; ++" + lv + ")");
    line("  " + info[r].name + "[" + lv + "] /= " + divisor + ";");
  }
  lastComment.clear();
}

/// The start value of a reduction: 0, or the lowest value for max.
std::string FunctionEmitter::reductionInit(const ir::Op &op) const {
  DType dtype = op.getResult()->getType().dtype;
  if (op.getKind() != OpKind::Max)
    return Printer(LoopMap()).flat(literal(dtype, 0));
  if (dtype == DType::I32)
    return "std::numeric_limits<int32_t>::min()";
  return "-std::numeric_limits<" + cTypeName(dtype).str() + ">::infinity()";
}

void FunctionEmitter::emitCopy(const ir::Value *from, const std::string &dst,
                               const TensorType &type) {
  Index idx(type.getRank());
  for (size_t d = 0; d < idx.size(); ++d)
    idx[d].dim = d;
  ExprP rhs = valueExpr(from, idx);
  if (type.isScalar()) {
    statement("*" + dst, "=", rhs, LoopMap());
    return;
  }
  LinearForm dstForm = rowMajorForm(type.shape, idx);
  std::vector<const LinearForm *> forms = collectForms(rhs);
  forms.push_back(&dstForm);
  std::vector<Product> extents;
  for (const Dim &d : type.shape)
    extents.push_back(dimProduct(d));
  emitLoopNest(extents, forms, [&](const LoopMap &map) {
    statement(dst + "[" + accessIndex(dstForm, map) + "]", "=", rhs, map);
  });
}

/// sum, mean and max: one loop nest over the operand with the producer's
/// expression inlined, accumulating in a local while the innermost loops
/// are reduced, else in place in the result.
void FunctionEmitter::emitReduction(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *v = op.getResult();
  Info &vi = info[v];
  const TensorType &xt = x->getType();
  DType dtype = v->getType().dtype;
  std::string type = typeName(v);
  const std::vector<int64_t> &axes = op.getAttrs().getInts("axis");
  bool isMax = op.getKind() == OpKind::Max;
  bool isMean = op.getKind() == OpKind::Mean;
  bool isInt = dtype == DType::I32;
  std::string init =
      isMax ? (isInt ? "std::numeric_limits<int32_t>::min()"
                     : "-std::numeric_limits<" + type + ">::infinity()")
            : Printer(LoopMap()).flat(literal(dtype, 0));

  size_t rank = xt.getRank();
  Index idx(rank);
  for (size_t d = 0; d < rank; ++d)
    idx[d].dim = d;
  ExprP element = valueExpr(x, idx);
  std::vector<Product> extents;
  for (const Dim &d : xt.shape)
    extents.push_back(dimProduct(d));
  Product count;
  for (int64_t a : axes)
    count = count * extents[a];
  auto isReduced = [&](int d) { return llvm::is_contained(axes, d); };

  // The result's offset for an operand index: reduced dimensions drop out.
  LinearForm dst;
  {
    Shape kept;
    Index keptIdx;
    for (size_t d = 0; d < rank; ++d)
      if (!isReduced(d)) {
        kept.push_back(xt.shape[d]);
        keptIdx.push_back(idx[d]);
      }
    dst = rowMajorForm(kept, keptIdx);
  }
  std::vector<const LinearForm *> forms = collectForms(element);
  forms.push_back(&dst);
  // Reduced and kept dimensions never share a loop: the result's
  // coefficient tells them apart (0 against non-zero), except where a
  // kept dimension has extent 1.
  std::vector<std::vector<int>> groups =
      mergeGroups(extents, forms, reductionBarriers(rank, axes));
  size_t firstInner = groups.size();
  while (firstInner > 0 && isReduced(groups[firstInner - 1].front()))
    --firstInner;
  bool outerReduced = llvm::any_of(
      llvm::ArrayRef(groups).take_front(firstInner),
      [&](const std::vector<int> &g) { return isReduced(g.front()); });

  auto combine = [&](const std::string &acc, ExprP e) -> ExprP {
    if (isMax)
      return call("gradc::maximum", {atom(acc), e});
    if (isInt)
      return call("gradc::wrapAdd", {atom(acc), e});
    return e;
  };
  std::string accOp = isMax || isInt ? "=" : "+=";
  // f32 sums accumulate in a double local where they run in one (all axes
  // reduced, or the innermost ones) and round once: a float accumulator
  // stops growing at 2^24 (docs/CppBackend.md, "Sums").
  bool wide = dtype == DType::F32 && !isMax;
  std::string accInit = wide ? "0.0" : init;
  LoopMap map;
  map.var.resize(rank);
  for (size_t g = 0; g < groups.size(); ++g)
    map.var[groups[g].back()] = loopVars[g];
  auto extentOfGroup = [&](size_t g) {
    Product e;
    for (int d : groups[g])
      e = e * extents[d];
    return e;
  };
  auto openLoop = [&](size_t g) {
    const std::string &lv = loopVars[g];
    line("for (int64_t " + lv + " = 0; " + lv + " < " + extentOfGroup(g).str() +
         "; ++" + lv + ")");
    indent += 2;
  };

  std::string resultCount = extentOf(v->getType().shape).str();
  auto flatLoop = [&](const std::string &body) {
    std::string lv = loopVars[0];
    line("for (int64_t " + lv + " = 0; " + lv + " < " + resultCount + "; ++" +
         lv + ")");
    line("  " + body);
  };

  if (v->getType().isScalar()) {
    // Everything is reduced: the result is the accumulator, or for an f32
    // sum a double accumulator rounded once at the end.
    std::string acc = wide ? scope.claim("acc") : vi.name;
    line((wide ? "double" : type) + " " + acc + " = " + accInit + ";");
    unsigned saved = indent;
    for (size_t g = 0; g < groups.size(); ++g)
      openLoop(g);
    statement(acc, accOp, combine(acc, element), map);
    indent = saved;
    if (wide)
      line(type + " " + vi.name + " = " +
           narrowed(isMean ? acc + " / " + countAsFloat(count, DType::F64)
                           : acc) +
           ";");
    else if (isMean)
      line(vi.name + " /= " + countAsFloat(count, dtype) + ";");
    return;
  }

  declareRoot(v);
  std::string dstText = vi.name + "[" + accessIndex(dst, map) + "]";
  if (outerReduced)
    flatLoop(vi.name + "[" + loopVars[0] + "] = " + init + ";");
  unsigned saved = indent;
  bool braces = firstInner < groups.size() && firstInner > 0;
  for (size_t g = 0; g < firstInner; ++g) {
    const std::string &lv = loopVars[g];
    bool last = g + 1 == firstInner;
    line("for (int64_t " + lv + " = 0; " + lv + " < " + extentOfGroup(g).str() +
         "; ++" + lv + ")" + (last && braces ? " {" : ""));
    indent += 2;
  }
  if (firstInner < groups.size()) {
    // The innermost loops are reduced: accumulate in a local (declared in
    // the function's own scope when no loop encloses it, so it needs a
    // name of its own there).
    std::string accName = firstInner == 0 ? scope.claim("acc") : this->accName;
    line((wide ? "double" : type) + " " + accName + " = " + accInit + ";");
    unsigned inner = indent;
    for (size_t g = firstInner; g < groups.size(); ++g)
      openLoop(g);
    statement(accName, accOp, combine(accName, element), map);
    indent = inner;
    ExprP total = atom(wide ? narrowed(accName) : accName);
    if (outerReduced)
      statement(dstText, accOp, combine(dstText, total), map);
    else if (isMean)
      line(dstText + " = " +
           (wide ? narrowed(accName + " / " + countAsFloat(count, DType::F64))
                 : accName + " / " + countAsFloat(count, dtype)) +
           ";");
    else
      line(dstText + " = " + (wide ? narrowed(accName) : accName) + ";");
    if (braces) {
      indent -= 2;
      line("}");
    }
  } else {
    statement(dstText, accOp, combine(dstText, element), map);
  }
  indent = saved;
  if (isMean && (outerReduced || firstInner == groups.size()))
    flatLoop(vi.name + "[" + loopVars[0] +
             "] /= " + countAsFloat(count, dtype) + ";");
}

/// stack and concat: one loop nest per operand, writing its block.
void FunctionEmitter::emitJoin(const ir::Op &op) {
  const ir::Value *v = op.getResult();
  declareRoot(v);
  const Shape &rshape = v->getType().shape;
  int64_t axis = op.getAttrs().getInt("axis");
  bool isStack = op.getKind() == OpKind::Stack;
  int64_t offset = 0;
  for (unsigned k = 0; k < op.getNumOperands(); ++k) {
    const ir::Value *x = op.getOperand(k);
    const TensorType &xt = x->getType();
    Index idx(xt.getRank());
    for (size_t d = 0; d < idx.size(); ++d)
      idx[d].dim = d;
    Index outIdx = idx;
    if (isStack) {
      outIdx.insert(outIdx.begin() + axis, Idx{-1, int64_t(k)});
    } else {
      outIdx[axis].offset = offset;
      if (xt.shape[axis].isKnown())
        offset += xt.shape[axis].getSize();
    }
    ExprP rhs = valueExpr(x, idx);
    LinearForm dst = rowMajorForm(rshape, outIdx);
    std::vector<const LinearForm *> forms = collectForms(rhs);
    forms.push_back(&dst);
    std::vector<Product> extents;
    for (const Dim &d : xt.shape)
      extents.push_back(dimProduct(d));
    emitLoopNest(extents, forms, [&](const LoopMap &map) {
      statement(info[v].name + "[" + accessIndex(dst, map) + "]", "=", rhs,
                map);
    });
  }
}

void FunctionEmitter::emitMatMul(const ir::Op &op) {
  const ir::Value *v = op.getResult();
  std::string c = info[v].name;
  if (info[v].storage == Storage::Scalar) {
    // A vector times a vector: a scalar local.
    line(typeName(v) + " " + c + " = 0;");
    c = "&" + c;
  } else {
    declareRoot(v);
  }
  struct Operand {
    std::string ptr;
    bool transposed = false;
    Shape shape; // as stored
  };
  auto operand = [&](const ir::Value *x) {
    Operand o;
    const Info &xi = info[x];
    if (xi.transposedBase) {
      o.ptr = pointerOf(xi.transposedBase);
      o.transposed = true;
      o.shape = xi.transposedBase->getType().shape;
    } else {
      o.ptr = pointerOf(x);
      o.shape = x->getType().shape;
    }
    return o;
  };
  Operand a = operand(op.getOperand(0)), b = operand(op.getOperand(1));
  // Logical shapes, vectors promoted as NumPy does.
  Shape as = op.getOperand(0)->getType().shape;
  Shape bs = op.getOperand(1)->getType().shape;
  bool aVector = as.size() == 1, bVector = bs.size() == 1;
  if (aVector)
    as.insert(as.begin(), Dim::known(1));
  if (bVector)
    bs.push_back(Dim::known(1));
  Product m = dimProduct(as[as.size() - 2]);
  Product k = dimProduct(as[as.size() - 1]);
  Product n = dimProduct(bs[bs.size() - 1]);
  Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  Shape batch = *broadcastShapes(aBatch, bBatch);
  auto trans = [](bool t) {
    return t ? "gradc::Transposed" : "gradc::NoTranspose";
  };
  Index idx(batch.size());
  for (size_t d = 0; d < batch.size(); ++d)
    idx[d].dim = d;
  // Offsets of each matrix within its batch.
  auto batchForm = [&](const Shape &opBatch, const Product &matrix) {
    Index in = broadcastIndex(idx, batch, opBatch);
    std::vector<Product> s = strides(opBatch);
    LinearForm form;
    for (size_t d = 0; d < opBatch.size(); ++d)
      if (in[d].dim >= 0)
        form.add(in[d].dim, s[d] * matrix);
    return form;
  };
  LinearForm af = batchForm(aBatch, m * k), bf = batchForm(bBatch, k * n);
  LinearForm cf = batchForm(batch, m * n);
  std::vector<Product> extents;
  for (const Dim &d : batch)
    extents.push_back(dimProduct(d));
  auto ptr = [](const std::string &base, const LinearForm &f,
                const LoopMap &map) {
    if (f.terms.empty())
      return base;
    return base + " + " + accessIndex(f, map);
  };
  emitLoopNest(extents, {&af, &bf, &cf}, [&](const LoopMap &map) {
    std::vector<ExprP> args = {atom(ptr(a.ptr, af, map)),
                               atom(trans(a.transposed)),
                               atom(ptr(b.ptr, bf, map)),
                               atom(trans(b.transposed)),
                               atom(ptr(c, cf, map)),
                               atom(m.str()),
                               atom(n.str()),
                               atom(k.str())};
    line(Printer(map).format(call("gradc::matmul", args), indent,
                             lineLimit - 1) +
         ";");
  });
}

/// softmax, log_softmax, logsumexp, softmax_cross_entropy and one_hot call
/// the runtime.
void FunctionEmitter::emitKernel(const ir::Op &op) {
  const ir::Value *v = op.getResult();
  Info &vi = info[v];
  const ir::Value *x = op.getOperand(0);
  const Shape &xs = x->getType().shape;
  std::string result = vi.name;
  if (vi.storage == Storage::Scalar) {
    line(typeName(v) + " " + vi.name + " = 0;");
    result = "&" + vi.name;
  } else {
    declareRoot(v);
  }
  auto emitCall = [&](const std::string &callee, std::vector<std::string> args,
                      bool returnsStatus) {
    std::vector<ExprP> exprs;
    for (std::string &a : args)
      exprs.push_back(atom(a));
    ExprP c = call(callee, exprs);
    if (!returnsStatus) {
      line(Printer(LoopMap()).format(c, indent, lineLimit - 1) + ";");
      return;
    }
    std::string prefix = "if (int " + statusName + " = ";
    line(prefix +
         Printer(LoopMap()).format(c, indent + prefix.size(), lineLimit - 1) +
         ")");
    line("  return " + statusName + ";");
  };
  switch (op.getKind()) {
  case OpKind::Softmax:
  case OpKind::LogSoftmax: {
    int64_t axis = op.getAttrs().getInt("axis");
    emitCall(op.getKind() == OpKind::Softmax ? "gradc::softmax"
                                             : "gradc::logSoftmax",
             {pointerOf(x), result, extentOf(xs, 0, axis).str(),
              dimProduct(xs[axis]).str(), extentOf(xs, axis + 1).str()},
             false);
    return;
  }
  case OpKind::LogSumExp: {
    // Adjacent axes (emitLogSumExpLoops does the others).
    const std::vector<int64_t> &axes = op.getAttrs().getInts("axis");
    size_t first = axes.empty() ? 0 : axes.front();
    size_t last = axes.empty() ? 0 : axes.back() + 1;
    emitCall("gradc::logSumExp",
             {pointerOf(x), result, extentOf(xs, 0, first).str(),
              extentOf(xs, first, last).str(), extentOf(xs, last).str()},
             false);
    return;
  }
  case OpKind::SoftmaxCrossEntropy:
    emitCall("gradc::softmaxCrossEntropy",
             {pointerOf(x), pointerOf(op.getOperand(1)), result,
              extentOf(xs, 0, xs.size() - 1).str(),
              dimProduct(xs.back()).str()},
             true);
    return;
  case OpKind::OneHot:
    emitCall("gradc::oneHot",
             {pointerOf(x), result, extentOf(xs).str(),
              dimProduct(op.getAttrs().getShape("depth")[0]).str()},
             false);
    return;
  default:
    llvm_unreachable("not a kernel");
  }
}

/// logsumexp over axes that are not adjacent (`axis = [0, 2]`), which the
/// runtime's `[outer, n, inner]` kernel cannot see: loops over the kept
/// axes, and inside them two passes over the reduced ones, as the kernel
/// and the interpreter compute it (the maximum, then the sum of e^(x - max)
/// in increasing flat index):
///
///   for (int64_t j = 0; j < 3; ++j) {
///     float top = -std::numeric_limits<float>::infinity();
///     for (int64_t i = 0; i < 2; ++i)
///       for (int64_t k = 0; k < 4; ++k)
///         top = gradc::maximum(top, x[i * 12 + j * 4 + k]);
///     float acc = 0.0f;
///     ... acc += gradc::exp(x[i * 12 + j * 4 + k] - top); ...
///     out[j] = std::isinf(top) ? top : top + gradc::log(acc);
///   }
///
/// An infinite maximum is the answer itself: -inf when every element is
/// -inf or nothing is reduced (log 0), +inf when one element is +inf.
void FunctionEmitter::emitLogSumExpLoops(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  const ir::Value *v = op.getResult();
  const TensorType &xt = x->getType();
  const std::vector<int64_t> &axes = op.getAttrs().getInts("axis");
  auto isReduced = [&](int d) { return llvm::is_contained(axes, d); };
  size_t rank = xt.getRank();
  Index idx(rank);
  Shape kept;
  Index keptIdx;
  std::vector<Product> extents;
  for (size_t d = 0; d < rank; ++d) {
    idx[d].dim = d;
    extents.push_back(dimProduct(xt.shape[d]));
    if (!isReduced(d)) {
      kept.push_back(xt.shape[d]);
      keptIdx.push_back(idx[d]);
    }
  }
  ExprP element = valueExpr(x, idx);
  LinearForm dst = rowMajorForm(kept, keptIdx);
  std::vector<const LinearForm *> forms = collectForms(element);
  forms.push_back(&dst);
  // Kept and reduced dimensions never share a loop; the loop variables
  // follow the operand's dimensions (i, j, k for x[i, j, k]).
  std::vector<std::vector<int>> groups =
      mergeGroups(extents, forms, reductionBarriers(rank, axes));
  LoopMap map;
  map.var.resize(rank);
  std::vector<size_t> keptGroups, reducedGroups;
  for (size_t g = 0; g < groups.size(); ++g) {
    map.var[groups[g].back()] = loopVars[g];
    (isReduced(groups[g].front()) ? reducedGroups : keptGroups).push_back(g);
  }
  assert(!keptGroups.empty() && "axes that are not adjacent leave one between");
  auto forLine = [&](size_t g, bool brace) {
    Product extent;
    for (int d : groups[g])
      extent = extent * extents[d];
    const std::string &lv = loopVars[g];
    line("for (int64_t " + lv + " = 0; " + lv + " < " + extent.str() + "; ++" +
         lv + ")" + (brace ? " {" : ""));
    indent += 2;
  };
  auto reducedLoops = [&](const std::string &lhs, const std::string &assign,
                          const ExprP &rhs) {
    unsigned saved = indent;
    for (size_t g : reducedGroups)
      forLine(g, false);
    statement(lhs, assign, rhs, map);
    indent = saved;
  };

  declareRoot(v);
  if (topName.empty())
    topName = scope.claim("top");
  std::string type = typeName(v);
  DType dtype = v->getType().dtype;
  unsigned saved = indent;
  for (size_t g : keptGroups)
    forLine(g, g == keptGroups.back());
  ExprP top = atom(topName);
  line(type + " " + topName + " = -std::numeric_limits<" + type +
       ">::infinity();");
  reducedLoops(topName, "=", call("gradc::maximum", {top, element}));
  bool wide = dtype == DType::F32;
  line((wide ? "double " : type + " ") + accName + " = " +
       Printer(LoopMap()).flat(literal(wide ? DType::F64 : dtype, 0)) + ";");
  reducedLoops(accName, "+=", call("gradc::exp", {binary("-", element, top)}));
  ExprP lse = cond(
      call("std::isinf", {top}), top,
      binary("+", top,
             call("gradc::log", {atom(wide ? narrowed(accName) : accName)})));
  statement(info[v].name + "[" + accessIndex(dst, map) + "]", "=", lse, map);
  indent -= 2;
  line("}");
  indent = saved;
}

void FunctionEmitter::emitCall(const ir::Op &op) {
  // A function of the module, or an extern function (docs/Extern.md): the
  // same C ABI, but an extern keeps its own symbol and may return void.
  const ir::Function *callee = nullptr;
  const ir::ExternDecl *ext = nullptr;
  std::vector<TensorType> paramTypes;
  std::vector<std::string> sizeNames;
  std::string symbol;
  bool returnsStatus = true;
  if (op.getKind() == OpKind::ExternCall) {
    ext = module.lookupExtern(op.getCallee());
    assert(ext && "the verifier checks callees");
    paramTypes = ext->paramTypes;
    sizeNames = ext->getSizeNames();
    symbol = ext->name;
    returnsStatus = ext->returnsStatus;
  } else {
    callee = module.lookup(op.getCallee());
    assert(callee && "the verifier checks callees");
    for (const ir::Value *p : callee->getParams())
      paramTypes.push_back(p->getType());
    sizeNames = callee->getSizeNames();
    symbol = cSymbolName(options.moduleName, callee->getName());
  }
  // Bind the callee's size names from the argument types here.
  std::vector<std::string> args;
  for (const std::string &size : sizeNames) {
    std::string value = "0";
    for (size_t p = 0; p < paramTypes.size(); ++p) {
      const Shape &ps = paramTypes[p].shape;
      for (size_t d = 0; d < ps.size(); ++d)
        if (ps[d].isNamed() && ps[d].getName() == size) {
          value = dimProduct(op.getOperand(p)->getType().shape[d]).str();
          goto found;
        }
    }
  found:
    args.push_back(value);
  }
  for (const ir::Value *a : op.getOperands())
    args.push_back(a->getType().isScalar()
                       ? Printer(LoopMap()).flat(valueExpr(a, {}))
                       : pointerOf(a));
  for (const ir::Value *r : op.getResults()) {
    Info &ri = info[r];
    if (ri.storage == Storage::Scalar) {
      line(typeName(r) + " " + ri.name + " = 0;");
      args.push_back("&" + ri.name);
    } else {
      declareRoot(r);
      args.push_back(ri.name);
    }
  }
  std::vector<ExprP> exprs;
  for (std::string &a : args)
    exprs.push_back(atom(a));
  ExprP c = call(symbol, exprs);
  if (!returnsStatus) {
    line(Printer(LoopMap()).format(c, indent, lineLimit - 1) + ";");
    return;
  }
  std::string prefix = "if (int " + statusName + " = ";
  line(prefix +
       Printer(LoopMap()).format(c, indent + prefix.size(), lineLimit - 1) +
       ")");
  line("  return " + statusName + ";");
}

void FunctionEmitter::emitConstant(const ir::Op &op) {
  const ir::Value *v = op.getResult();
  const std::vector<double> &values = op.getAttrs().getFloats("value");
  std::vector<std::string> items;
  for (double d : values)
    items.push_back(Printer(LoopMap()).flat(literal(v->getType().dtype, d)));
  std::string head =
      "static const " + typeName(v) + " " + info[v].name + "[] = {";
  std::string all = llvm::join(items, ", ");
  if (indent + head.size() + all.size() + 2 <= lineLimit) {
    line(head + all + "};");
    return;
  }
  line(head);
  std::string cur;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string item = items[i] + (i + 1 < items.size() ? "," : "");
    if (!cur.empty() && indent + 4 + cur.size() + 1 + item.size() > lineLimit) {
      line("    " + cur);
      cur.clear();
    }
    cur += (cur.empty() ? "" : " ") + item;
  }
  if (!cur.empty())
    line("    " + cur);
  line("};");
}

void FunctionEmitter::emitOp(const ir::Op &op, int pos) {
  if (fusedReductions.contains(&op))
    return;
  emitOpBody(op, pos);
  checkDivision();
}

void FunctionEmitter::emitOpBody(const ir::Op &op, int) {
  bool anyCode = llvm::any_of(op.getResults(), [&](const ir::Value *r) {
    const Info &i = info[r];
    return i.isRoot || i.isAlias;
  });
  if (!anyCode)
    return;
  comment(op);
  OpKind k = op.getKind();
  const ir::Value *v = op.getResult();
  if (k == OpKind::MatMul)
    return emitMatMul(op);
  if (k == OpKind::Call || k == OpKind::ExternCall)
    return emitCall(op);
  if (k == OpKind::LogSumExp && !areAdjacent(op.getAttrs().getInts("axis")))
    return emitLogSumExpLoops(op);
  if (k == OpKind::Softmax || k == OpKind::LogSoftmax ||
      k == OpKind::LogSumExp || k == OpKind::SoftmaxCrossEntropy ||
      k == OpKind::OneHot)
    return emitKernel(op);
  if (isFusedReduction(k))
    return emitReduction(op);
  if (k == OpKind::Stack || k == OpKind::Concat)
    return emitJoin(op);
  if (k == OpKind::Constant && !isSplatConstant(op))
    return emitConstant(op);
  for (const ir::Value *r : op.getResults()) {
    Info &ri = info[r];
    if (ri.isAlias) {
      // reshape, or a contiguous slice: a pointer into existing storage.
      std::string base = pointerOf(op.getOperand(0));
      std::string init = base;
      if (k == OpKind::Unstack || k == OpKind::Split) {
        int64_t axis = op.getAttrs().getInt("axis");
        const Shape &xs = op.getOperand(0)->getType().shape;
        Product stride = extentOf(xs, axis + 1);
        int64_t start = r->getResultIndex();
        if (k == OpKind::Split) {
          start = 0;
          const Shape &sizes = op.getAttrs().getShape("sizes");
          for (unsigned p = 0; p < r->getResultIndex(); ++p)
            start += sizes[p].getSize();
        }
        Product off = stride * Product::of(start);
        if (!off.isZero())
          init = base + " + " + off.str();
      }
      line("const " + typeName(r) + " *" + ri.name + " = " + init + ";");
      continue;
    }
    if (ri.isRoot)
      emitElementwiseRoot(r);
  }
  (void)v;
}

void FunctionEmitter::emitEpilogue() {
  bool first = true;
  for (const CParam &p : cparams) {
    if (p.kind != CParamKind::Output)
      continue;
    const Info &vi = info[p.value];
    if (vi.output == int(p.resultIndex))
      continue;
    if (first) {
      out += "\n";
      line("// Results.");
      first = false;
    }
    emitCopy(p.value, p.name, p.type);
    checkDivision();
  }
  line("return GRADC_OK;");
}

void FunctionEmitter::run() {
  // Names: the symbol of every function called here (a local must not
  // hide a callee; reserving every symbol of the module would make
  // emission quadratic in the number of functions), the parameters, then
  // the values, then the helpers.
  for (const auto &op : fn.getOps())
    if (op->getKind() == OpKind::Call)
      scope.reserve(cSymbolName(options.moduleName, op->getCallee()));
  cparams = getCParams(module, fn, scope);
  for (const CParam &p : cparams)
    if (p.kind == CParamKind::Size)
      sizeNames[p.sourceName] = p.name;
  countUses();
  decideStorage();
  // No fused expression deeper than FusionDepth.h allows.
  for (const ir::Value *v : valuesToMaterialize(fn, [&](const ir::Value *v) {
         return info[v].storage == Storage::Inline;
       }))
    makeRoot(v);
  requirePointers();
  // A reshape or slice of a returned or kernel-read value stays an alias.
  nameValues();
  computeLiveness();
  allocate();
  for (size_t s = 0; s < slots.size(); ++s)
    slots[s].name = scope.claim("scratch" + std::to_string(s));
  accName = scope.claim("acc");
  statusName = scope.claim("status");
  divStatusName = scope.claim("div_status");
  const llvm::StringRef candidates[] = {"i", "j", "k", "l"};
  for (unsigned d = 0; d < 16; ++d) {
    std::string v = d < 4 ? candidates[d].str() : "i" + std::to_string(d);
    while (scope.isTaken(v))
      v += "_";
    scope.reserve(v);
    loopVars.push_back(v);
  }
  // i32 division needs a status before the body is emitted.
  for (const auto &op : fn.getOps())
    if (op->getKind() == OpKind::Div &&
        op->getResult()->getType().dtype == DType::I32)
      needsDivStatus = true;

  // The body first: whether it reads a parameter decides how the
  // signature spells it.
  out += "{\n";
  size_t bodyStart = out.size();
  emitPrologue();
  const auto &ops = fn.getOps();
  for (size_t pos = 0; pos < ops.size(); ++pos)
    emitOp(*ops[pos], pos);
  emitEpilogue();
  out += "}\n";
  std::string body = out.substr(bodyStart);
  out.resize(bodyStart - 2);
  out += signature(body) + body;
}

/// `text` without its `//` comments.
static std::string withoutComments(llvm::StringRef text) {
  std::string code;
  llvm::SmallVector<llvm::StringRef, 64> lines;
  text.split(lines, '\n');
  for (llvm::StringRef l : lines) {
    size_t comment = l.find("//");
    code += l.substr(0, comment).str() + "\n";
  }
  return code;
}

/// Whether `name` occurs in `text` as a whole identifier.
static bool mentions(llvm::StringRef text, llvm::StringRef name) {
  for (size_t at = text.find(name); at != llvm::StringRef::npos;
       at = text.find(name, at + 1)) {
    bool before =
        at > 0 && (llvm::isAlnum(text[at - 1]) || text[at - 1] == '_');
    size_t end = at + name.size();
    bool after =
        end < text.size() && (llvm::isAlnum(text[end]) || text[end] == '_');
    if (!before && !after)
      return true;
  }
  return false;
}

/// The comment and the first line(s) of the definition, up to `{`. A
/// parameter that the body never reads (the input of a gradient that does
/// not depend on it) keeps its name in a comment, so that it is not
/// reported as unused.
std::string FunctionEmitter::signature(llvm::StringRef body) const {
  std::string text;
  std::string code = withoutComments(body);
  std::vector<std::string> decls;
  for (const CParam &p : cparams) {
    std::string decl = cParamDecl(p);
    if (p.kind == CParamKind::Input && !mentions(code, p.name)) {
      size_t at = decl.rfind(p.name);
      decl = decl.substr(0, at) + (decl[at - 1] == '*' ? " " : "") + "/*" +
             p.name + "*/";
    }
    decls.push_back(decl);
  }
  for (const std::string &l : wrapWords(sourceSignature(fn), lineLimit - 3))
    text += "// " + l + "\n";
  std::string head =
      linkage(fn) + cSymbolName(options.moduleName, fn.getName()) + "(";
  return text + declarationLines(head, decls, ") {") + "\n";
}

} // namespace

// Every verified module can be emitted, so nothing is reported to the
// DiagnosticEngine at present; the interface keeps it for a construct
// this backend may one day refuse.
bool emit::emitCpp(const ir::Module &module, const EmitOptions &options,
                   llvm::raw_ostream &os, DiagnosticEngine &) {
  std::string text;
  text += "// Generated by gradc from " +
          (options.sourceName.empty() ? std::string("<unknown>")
                                      : options.sourceName) +
          ". Do not edit.\n";
  std::string about =
      "The C ABI of module '" + options.moduleName +
      "' (docs/ABI.md): every function returns GRADC_OK or an error status, "
      "writes its results through the output pointers and allocates nothing "
      "that outlives the call.";
  text += "//\n";
  for (const std::string &l : wrapWords(about, lineLimit - 3))
    text += "// " + l + "\n";
  text += "\n";
  text += "#include \"gradc/Runtime.h\"\n";
  text += externIncludes(module);
  text += "\n";
  // Prototypes, so that the functions may call each other in any order.
  // Rule instances that a call still refers to are internal functions.
  std::vector<const ir::Function *> exported;
  llvm::StringSet<> called = calledNames(module);
  for (const auto &f : module.getFunctions())
    if (isExported(*f) || called.contains(f->getName()))
      exported.push_back(f.get());
  for (const ir::Function *f : exported) {
    NameScope scope;
    std::vector<std::string> decls;
    for (const CParam &p : getCParams(module, *f, scope))
      decls.push_back(cParamDecl(p));
    std::string head =
        linkage(*f) + cSymbolName(options.moduleName, f->getName()) + "(";
    text += declarationLines(head, decls, ");") + "\n";
  }
  for (const ir::Function *f : exported) {
    text += "\n";
    FunctionEmitter(module, *f, options, text).run();
  }
  os << text;
  return true;
}
