//===- ASTDumper.cpp - Printing the syntax tree ---------------------------===//
//
// `gradc --emit=ast`: one node per line, indented two spaces per level,
// with its kind, its key fields and the line:col where it starts. Golden
// tests depend on this format, so it is stable and deterministic; it is
// documented in docs/Grammar.md. After Sema, every expression whose type is
// known also shows it (` : f32[2, 2]`), and the rule instances Sema made
// are printed after the declarations.
//
//===----------------------------------------------------------------------===//

#include "gradc/AST/ASTDumper.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <charconv>
#include <cmath>

using namespace gradc;
using namespace gradc::ast;

namespace {

class Dumper {
public:
  Dumper(const SourceManager &sm, llvm::raw_ostream &os) : sm(sm), os(os) {}

  void dumpModule(const Module &module);

private:
  /// Starts a line at the current depth.
  llvm::raw_ostream &line() {
    os.indent(2 * depth);
    return os;
  }
  void endLine(SourceLoc loc) {
    PresumedLoc p = sm.getPresumedLoc(loc);
    if (p.isValid())
      os << " <" << p.line << ":" << p.column << ">";
    else
      os << " <invalid>";
  }
  void endExprLine(const Expr &e) {
    endLine(e.getLoc());
    if (e.type.isKnown())
      os << " : " << e.type.str();
    os << "\n";
  }

  /// Deepens the indentation for one scope.
  struct Nest {
    explicit Nest(Dumper &d) : d(d) { ++d.depth; }
    ~Nest() { --d.depth; }
    Dumper &d;
  };

  void dumpDecl(const Decl &decl);
  void dumpAnnotation(const Annotation &a);
  void dumpParam(const Param &p);
  void dumpBody(llvm::ArrayRef<StmtPtr> body);
  void dumpStmt(const Stmt &stmt);
  void dumpExpr(const Expr &expr);
  void dumpRuleInstance(const RuleInstance &instance);

  const SourceManager &sm;
  llvm::raw_ostream &os;
  unsigned depth = 0;
};

} // namespace

/// `f32[2, N]`, the way it is written.
static std::string typeStr(const TypeExpr &t) { return t.toType().str(); }

/// The shortest spelling that reads back as the same double; floating
/// literals always show a '.' or an exponent, so `2.0` prints as `2.0` and
/// the integer `2` as `2`.
static std::string numberStr(const NumberExpr &n) {
  if (!std::isfinite(n.value))
    return n.value != n.value ? "nan" : (n.value < 0 ? "-inf" : "inf");
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), n.value);
  std::string s(buf, ec == std::errc() ? end : buf);
  if (!n.isInteger && s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

void Dumper::dumpModule(const Module &module) {
  line() << "Module\n";
  Nest nest(*this);
  for (const DeclPtr &decl : module.decls)
    dumpDecl(*decl);
  for (const auto &instance : module.ruleInstances)
    dumpRuleInstance(*instance);
}

// FnDecl 'name' -> RESULT <l:c>, then annotations, params, body, grad block.
// FnDecl 'name' -> RESULT extern from "h.h" <l:c> for an extern.
// RuleDecl 'name' <l:c>, then annotations, params, body.
void Dumper::dumpDecl(const Decl &decl) {
  const auto *fn = llvm::dyn_cast<FnDecl>(&decl);
  line() << (fn ? "FnDecl" : "RuleDecl") << " '" << decl.name.name << "'";
  if (fn) {
    os << " -> ";
    if (fn->returnsTuple)
      os << "(";
    for (size_t i = 0; i < fn->results.size(); ++i)
      os << (i ? ", " : "") << typeStr(fn->results[i]);
    if (fn->returnsTuple)
      os << ")";
    if (fn->isExtern)
      os << " extern from \"" << fn->header << "\"";
  }
  endLine(decl.getRange().begin);
  os << "\n";
  Nest nest(*this);
  for (const Annotation &a : decl.annotations)
    dumpAnnotation(a);
  for (const Param &p : decl.params)
    dumpParam(p);
  dumpBody(decl.body);
  if (fn && fn->gradBlock) {
    line() << "GradBlock";
    endLine(fn->gradBlock->range.begin);
    os << "\n";
    Nest inner(*this);
    for (const Param &p : fn->gradBlock->params)
      dumpParam(p);
    dumpBody(fn->gradBlock->body);
  }
}

// Annotation @override(stack = first_only) <l:c>
void Dumper::dumpAnnotation(const Annotation &a) {
  line() << "Annotation @" << a.name.name;
  if (a.hasParens) {
    os << "(";
    for (size_t i = 0; i < a.args.size(); ++i) {
      const AnnotationArg &arg = a.args[i];
      os << (i ? ", " : "");
      if (arg.key)
        os << arg.key->name << " = ";
      os << arg.value.name;
    }
    os << ")";
  }
  endLine(a.range.begin);
  os << "\n";
}

// Param 'x' : f32[2] <l:c>   (no type in a rule or grad block)
void Dumper::dumpParam(const Param &p) {
  line() << "Param '" << p.name.name << "'";
  if (p.type)
    os << " : " << typeStr(*p.type);
  endLine(p.name.range.begin);
  os << "\n";
}

void Dumper::dumpBody(llvm::ArrayRef<StmtPtr> body) {
  for (const StmtPtr &stmt : body)
    dumpStmt(*stmt);
}

// LetStmt 'y' [: TYPE] <l:c> / LetStmt ('a', 'b') <l:c>, then its
// annotations and value. ReturnStmt <l:c>, then its value.
void Dumper::dumpStmt(const Stmt &stmt) {
  if (const auto *let = llvm::dyn_cast<LetStmt>(&stmt)) {
    line() << "LetStmt ";
    if (let->destructures)
      os << "(";
    for (size_t i = 0; i < let->names.size(); ++i)
      os << (i ? ", " : "") << "'" << let->names[i].name << "'";
    if (let->destructures)
      os << ")";
    if (let->declaredType)
      os << " : " << typeStr(*let->declaredType);
    endLine(stmt.getLoc());
    os << "\n";
    Nest nest(*this);
    for (const Annotation &a : let->annotations)
      dumpAnnotation(a);
    if (let->value)
      dumpExpr(*let->value);
    return;
  }
  const auto &ret = llvm::cast<ReturnStmt>(stmt);
  line() << "ReturnStmt";
  endLine(stmt.getLoc());
  os << "\n";
  Nest nest(*this);
  if (ret.value)
    dumpExpr(*ret.value);
}

void Dumper::dumpExpr(const Expr &expr) {
  switch (expr.getKind()) {
  case Expr::Kind::Number:
    line() << "NumberExpr " << numberStr(llvm::cast<NumberExpr>(expr));
    endExprLine(expr);
    return;
  case Expr::Kind::Bool:
    line() << "BoolExpr "
           << (llvm::cast<BoolExpr>(expr).value ? "true" : "false");
    endExprLine(expr);
    return;
  case Expr::Kind::Name:
    line() << "NameExpr '" << llvm::cast<NameExpr>(expr).name << "'";
    endExprLine(expr);
    return;
  case Expr::Kind::Unary: {
    line() << "UnaryExpr '-'";
    endExprLine(expr);
    Nest nest(*this);
    dumpExpr(*llvm::cast<UnaryExpr>(expr).operand);
    return;
  }
  case Expr::Kind::Binary: {
    const auto &b = llvm::cast<BinaryExpr>(expr);
    line() << "BinaryExpr '" << getBinaryOpSpelling(b.op) << "'";
    endExprLine(expr);
    Nest nest(*this);
    dumpExpr(*b.lhs);
    dumpExpr(*b.rhs);
    return;
  }
  case Expr::Kind::Call: {
    const auto &c = llvm::cast<CallExpr>(expr);
    line() << "CallExpr '" << c.callee.name << "'";
    endExprLine(expr);
    Nest nest(*this);
    for (const ExprPtr &arg : c.args)
      dumpExpr(*arg);
    for (const KeywordArg &kw : c.keywordArgs) {
      line() << "KeywordArg '" << kw.name.name << "'";
      endLine(kw.name.range.begin);
      os << "\n";
      Nest inner(*this);
      dumpExpr(*kw.value);
    }
    return;
  }
  case Expr::Kind::List:
  case Expr::Kind::Tuple: {
    bool isList = expr.getKind() == Expr::Kind::List;
    line() << (isList ? "ListExpr" : "TupleExpr");
    endExprLine(expr);
    Nest nest(*this);
    const auto &elements = isList ? llvm::cast<ListExpr>(expr).elements
                                  : llvm::cast<TupleExpr>(expr).elements;
    for (const ExprPtr &e : elements)
      dumpExpr(*e);
    return;
  }
  case Expr::Kind::Index: {
    const auto &i = llvm::cast<IndexExpr>(expr);
    if (i.indexExpr)
      line() << "IndexExpr";
    else
      line() << "IndexExpr [" << i.index << "]";
    endExprLine(expr);
    Nest nest(*this);
    dumpExpr(*i.base);
    if (i.indexExpr)
      dumpExpr(*i.indexExpr);
    return;
  }
  case Expr::Kind::Slice: {
    const auto &sl = llvm::cast<SliceExpr>(expr);
    auto bound = [](const SliceBound &b) {
      if (!b.present)
        return std::string();
      return b.name.empty() ? std::to_string(b.value) : b.name;
    };
    line() << "SliceExpr [";
    for (size_t k = 0; k < sl.axes.size(); ++k)
      os << (k ? ", " : "") << bound(sl.axes[k].lo) << ":"
         << bound(sl.axes[k].hi);
    os << "]";
    endExprLine(expr);
    Nest nest(*this);
    dumpExpr(*sl.base);
    return;
  }
  case Expr::Kind::For: {
    const auto &f = llvm::cast<ForExpr>(expr);
    if (f.isWhile)
      line() << "WhileExpr max " << f.end.str();
    else
      line() << "ForExpr '" << f.index.name << "' in " << f.start << ".."
             << f.end.str();
    endExprLine(expr);
    Nest nest(*this);
    for (const LoopCarry &c : f.carries) {
      line() << "Carry '" << c.name.name << "'";
      endLine(c.name.range.begin);
      os << "\n";
      Nest inner(*this);
      dumpExpr(*c.init);
    }
    for (const auto &stmt : f.body)
      if (stmt)
        dumpStmt(*stmt);
    if (f.value)
      dumpExpr(*f.value);
    return;
  }
  case Expr::Kind::If: {
    const auto &i = llvm::cast<IfExpr>(expr);
    line() << (i.whileBody ? "IfExpr (the body of 'while')" : "IfExpr");
    endExprLine(expr);
    Nest nest(*this);
    if (i.cond)
      dumpExpr(*i.cond);
    for (const Branch *b : {&i.thenBranch, &i.elseBranch}) {
      line() << (b == &i.thenBranch ? "Then" : "Else");
      os << "\n";
      Nest inner(*this);
      for (const auto &stmt : b->body)
        if (stmt)
          dumpStmt(*stmt);
      if (b->value)
        dumpExpr(*b->value);
    }
    return;
  }
  }
  llvm_unreachable("unknown expression kind");
}

// RuleInstance 'first_only.1' <l:c of the use>, then its typed parameters
// and its typed copy of the body.
void Dumper::dumpRuleInstance(const RuleInstance &instance) {
  line() << "RuleInstance '" << instance.name << "'";
  endLine(instance.useRange.begin);
  os << "\n";
  Nest nest(*this);
  for (size_t i = 0; i < instance.paramNames.size(); ++i) {
    line() << "Param '" << instance.paramNames[i].name << "'";
    if (i < instance.paramTypes.size() && instance.paramTypes[i].isKnown())
      os << " : " << instance.paramTypes[i].str();
    endLine(instance.paramNames[i].range.begin);
    os << "\n";
  }
  dumpBody(instance.body);
}

void ast::dumpModule(const Module &module, const SourceManager &sm,
                     llvm::raw_ostream &os) {
  Dumper(sm, os).dumpModule(module);
}
