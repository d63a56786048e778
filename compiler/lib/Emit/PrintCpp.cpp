//===- PrintCpp.cpp - The C++ backend: a printer of the loop IR -----------===//
//
// `gradc --emit=cpp` (EmitCpp.h). Prints a lowered module (after the loop
// passes) as C++ over gradc/Runtime.h, one statement of the loop IR at a time:
// a `for` per loop, an assignment per store or accumulation, an `if (...)
// return STATUS;` per check, a gradc::matmul per kernel call and a call (with
// its status checked) per call. Nothing here knows what an op was: lowering
// made every op primitive, and the loop passes fused and planned it.
//
// The ABI comes from the places the header and the LLVM backend share:
// symbols and parameters from
// Mangle.h (getCParams), the size checks from SizeChecks.h, the status
// codes of docs/ABI.md. A parameter that no statement reads
// (LoopFunction::isParamRead) keeps its name in a comment.
//
// Each expression prints with C++'s precedence, parenthesised only where
// needed; each primitive maps to the one runtime function with its
// semantics (docs/Loops.md): i32 arithmetic wraps (gradc::wrapAdd, ...),
// the NaN-propagating max/min are gradc::maximum/minimum, a float select
// is gradc::select, exp/log/tanh are the runtime's, the other intrinsics
// <cmath>'s.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitCpp.h"

#include "gradc/Basic/Timing.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/Emit/SizeChecks.h"
#include "gradc/Emit/TransposedOperands.h"
#include "gradc/Loops/Loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/Path.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>

using namespace gradc;
using namespace gradc::emit;
using namespace gradc::loops;

namespace {

constexpr unsigned lineLimit = 80;

/// `text` broken into lines of at most `width` characters at spaces.
std::vector<std::string> wrap(llvm::StringRef text, unsigned width) {
  // Most comments are one line of single spaces: as they are. (A loop,
  // not StringRef::contains: its general search was half of this
  // function's time, which runs for each of 110,000 statements of a
  // gradient of 10,000 steps.)
  auto doubleSpace = [&] {
    for (size_t i = 1; i < text.size(); ++i)
      if (text[i] == ' ' && text[i - 1] == ' ')
        return true;
    return false;
  };
  if (text.size() <= width && !text.empty() && text.front() != ' ' &&
      text.back() != ' ' && !doubleSpace())
    return {text.str()};
  std::vector<std::string> lines;
  std::string cur;
  llvm::SmallVector<llvm::StringRef, 16> words;
  text.split(words, ' ', -1, false);
  for (llvm::StringRef w : words) {
    if (!cur.empty() && cur.size() + 1 + w.size() > width) {
      lines.push_back(cur);
      cur.clear();
    }
    cur += (cur.empty() ? "" : " ") + w.str();
  }
  if (!cur.empty())
    lines.push_back(cur);
  return lines;
}

/// `if (GRADC_UNLIKELY(cond))`: the test of a failure (a size, an
/// allocation, an index). GCC's estimated profile counts every `return` of
/// a failure as taken now and then, and after a few dozen of them (a size
/// test, one per scratch buffer, the index checks of `take`) it thought
/// the loops that follow too cold to vectorise: all of GMM's gradient but
/// its first loops ran as scalar code, memsets as `rep stos`.
std::string unlikely(const std::string &cond) {
  return "if (GRADC_UNLIKELY(" + cond + "))";
}

/// `head` + the parameters joined by ", " + `tail`, on one line if it
/// fits, else with the parameters aligned after the parenthesis (or, after
/// a long head, on lines of their own indented by 4), as clang-format's
/// LLVM style lays out a declaration.
std::string declaration(const std::string &head,
                        const std::vector<std::string> &params,
                        const std::string &tail) {
  std::string one = head + llvm::join(params, ", ") + tail;
  if (one.size() <= lineLimit)
    return one;
  bool afterParen = head.size() > 40;
  std::string text = afterParen ? head + "\n    " : head;
  size_t col = afterParen ? 4 : head.size(), cur = col;
  for (size_t i = 0; i < params.size(); ++i) {
    std::string piece = params[i] + (i + 1 < params.size() ? "," : tail);
    if (i > 0 && cur + 1 + piece.size() > lineLimit) {
      text += "\n" + std::string(col, ' ');
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

/// The C++ type of a scalar expression.
llvm::StringRef cType(ScalarType t) {
  switch (t) {
  case ScalarType::F32:
    return "float";
  case ScalarType::F64:
    return "double";
  case ScalarType::I32:
    return "int32_t";
  case ScalarType::Bool:
    return "bool";
  case ScalarType::Index:
    return "int64_t";
  }
  llvm_unreachable("unknown scalar type");
}

/// A printed expression and its precedence (higher binds tighter).
struct Text {
  std::string s;
  int prec;
};

enum Prec : int {
  Ternary = 20,
  LogicalOr = 30,
  LogicalAnd = 40,
  Equality = 55,
  Relational = 60,
  Additive = 70,
  Multiplicative = 80,
  Unary = 90,
  Atom = 100,
};

/// The printer of one function.
class FunctionPrinter {
public:
  FunctionPrinter(const ir::Module &module, const LoopFunction &fn,
                  const ir::Function &irFn, const EmitOptions &options,
                  llvm::raw_ostream &os)
      : module(module), fn(fn), irFn(irFn), options(options), os(os) {}

  void run();

private:
  // Names.
  void nameEverything();
  /// The name, not a copy of it: a buffer is named wherever it is used.
  const std::string &bufferName(const Buffer *b) const {
    static const std::string none;
    auto it = names.find(b);
    return it == names.end() ? none : it->second;
  }
  bool isScalarParam(const Buffer *b) const {
    return b->kind == Buffer::Kind::Param && b->shape.empty();
  }
  /// The buffer's first element as a pointer expression.
  std::string pointerOf(const Buffer *b) const;
  /// `b[index]`, or the scalar itself for a local or a scalar parameter.
  std::string elementOf(const Buffer *b, const Expr &index) const;

  // Expressions.
  Text expr(const Expr &e) const;
  Text primExpr(const Expr &e) const;
  std::string flat(const Expr &e) const { return expr(e).s; }
  static std::string paren(const Text &t, int min) {
    return t.prec < min ? "(" + t.s + ")" : t.s;
  }
  static Text literal(ScalarType t, double v);
  /// literal(t, v), formatted once per constant (snprintf is slow, and a
  /// chain prints the same few constants thousands of times).
  const Text &cachedLiteral(ScalarType t, double v) const;

  // Statements.
  void line(const std::string &text);
  bool afterBrace() const {
    return out.size() >= 2 && out[out.size() - 2] == '{';
  }
  void comment(const Origin &origin);
  /// `file:line: text` of the source line at `at`, or "" (made once per
  /// location).
  const std::string &sourceLine(SourceLoc at);
  void prologue();
  void declarations();
  void block(const Block &b);
  void stmt(const Stmt &s);
  void forLoop(const Stmt &s);
  bool dotColumns(const Stmt &s);
  std::string widenedFactors(const Stmt &s, const Expr *factor,
                             const std::string &acc);
  bool widenedLanes(const Stmt &s);
  void endFirstCopy(const Stmt &s);
  void laneLoopHead(const Stmt &s, const std::string &v);
  std::vector<const Buffer *> beginLaneVectors(const Stmt &s);
  void endLaneVectors(const std::vector<const Buffer *> &lanes);
  std::vector<const Buffer *> beginLaneTerms(const Stmt &s);
  void endLaneTerms(const std::vector<const Buffer *> &lanes);
  void copyColumns(const Stmt &s, const Expr &factor, const std::string &v0,
                   const std::string &v1);
  void parallelHead(const Stmt &s);
  void privateCopies(const Stmt &s);
  void accumulate(const Stmt &s);
  void call(const Stmt &s);
  void kernelCall(const Stmt &s);
  void findTransposedOperands();
  void rangeVersion();
  void failureReturn(const std::string &status);
  std::string signature() const;

  const ir::Module &module;
  const LoopFunction &fn;
  const ir::Function &irFn;
  const EmitOptions &options;
  /// Where the function goes, and its text not yet written there.
  llvm::raw_ostream &os;
  std::string out;
  /// Writes `out` to `os` once it holds options.writeChunk bytes, but for
  /// its last two characters (afterBrace reads them): a function of a
  /// 100,000-step chain is a hundred megabytes of C++, and a string of it
  /// (grown by doubling, then copied by the driver) touched three times as
  /// much fresh memory.
  void spill();

  NameScope scope;
  std::vector<CParam> cparams;
  /// For each C parameter that is an input, its parameter number.
  std::vector<unsigned> inputPosition;
  llvm::StringMap<std::string> sizeNames;
  llvm::DenseMap<const Buffer *, std::string> names;
  /// The private buffers of parallel loops, declared in their loop.
  llvm::DenseSet<const Buffer *> privates;
  /// Loop variable number -> its C++ name, while its loop is open.
  llvm::DenseMap<unsigned, std::string> loopVars;
  std::vector<std::string> depthNames;
  unsigned depth = 0;
  std::string statusName, divStatusName;
  bool dividesI32 = false;
  /// The function has a range version (loops::hasRangeVersion), and the
  /// first copy's flag; `smallTrig` while that copy is printed.
  bool rangeVersioned = false;
  bool smallTrig = false;
  bool usesGeneralLabel = false;
  std::string rangeFlagName;
  /// In a lane loop the flag is one per lane (GCC vectorises a lane loop
  /// with an `|=` of one flag two to three times slower than without: it
  /// reduces the vector on every trip), named `laneFlagsName[laneVar]`.
  std::string laneFlagsName, laneVar;
  /// The first copy declares laneFlagsName (a lane loop calls a small
  /// function): its parallel loops reduce both flags.
  bool laneFlags = false;
  /// The length of laneFlagsName: the widest lane loop's lanes.
  int64_t laneFlagCount = ir::reductionLanes;
  unsigned indent = 2;
  std::string lastComment;
  /// Matmul operands that a loop nest only transposes: the buffer, what it
  /// transposes, and the nests (not printed: the kernel reads the source
  /// transposed).
  llvm::DenseMap<const Buffer *, const Buffer *> transposedFrom;
  llvm::DenseSet<const Stmt *> elided;
  /// In dotColumns' column loop: loads that read a transposed copy instead
  /// (what they print).
  llvm::DenseMap<const Expr *, std::string> columnCopies;
  /// In widenedLanes' second loop: the conversions of f32 to f64 that
  /// read the f64 copy of their term instead (what they print).
  llvm::DenseMap<const Expr *, std::string> widenedTerms;
  /// Lanes that a chunk loop adds to in gradc::Lanes8 vectors (beginLane-
  /// Vectors): the vector's name, and in a lane loop that adds to them,
  /// the f32 array of its terms.
  struct LaneVector {
    std::string vector, terms;
  };
  llvm::DenseMap<const Buffer *, LaneVector> laneVectors;
  mutable std::map<std::pair<unsigned, uint64_t>, Text> literals;
  std::map<uint32_t, std::string> sourceLines;
};

//===--- Names ------------------------------------------------------------===//

void FunctionPrinter::nameEverything() {
  // The callees' symbols first, so that no local hides one.
  walk(fn.body, [&](const Stmt &s) {
    if (s.kind != Stmt::Kind::Call)
      return;
    if (s.isExtern)
      scope.reserve(s.callee);
    else
      scope.reserve(cSymbolName(options.moduleName, s.callee));
  });
  cparams = getCParams(module, irFn, scope);
  // Parameters and outputs are named by the signature: the inputs in
  // order, the outputs by result.
  unsigned input = 0;
  for (CParam &p : cparams) {
    if (p.kind == CParamKind::Size)
      sizeNames[p.sourceName] = p.name;
    if (p.kind == CParamKind::Input) {
      for (const Buffer *b : fn.params)
        if (b->position == input)
          names[b] = p.name;
      inputPosition.push_back(input++);
    } else {
      inputPosition.push_back(~0u);
    }
    for (const Buffer *b : fn.outputs)
      if (p.kind == CParamKind::Output && b->position == p.resultIndex)
        names[b] = p.name;
  }
  for (const auto &b : fn.buffers) {
    if (names.count(b.get()))
      continue;
    // Temporaries without a source name are numbered: `t3`.
    std::string base = b->name;
    if (base.empty() || llvm::isDigit(base[0]))
      base = "t" + base;
    names[b.get()] = scope.claim(base);
  }
  statusName = scope.claim("status");
  divStatusName = scope.claim("div_status");
  if (rangeVersioned) {
    rangeFlagName = scope.claim("outOfRange");
    laneFlagsName = scope.claim("outOfRangeLanes");
  }
  const llvm::StringRef candidates[] = {"i", "j", "k", "l"};
  for (unsigned d = 0; d < 32; ++d) {
    std::string v = d < 4 ? candidates[d].str() : "i" + std::to_string(d);
    while (scope.isTaken(v))
      v += "_";
    scope.reserve(v);
    depthNames.push_back(v);
  }
}

std::string FunctionPrinter::pointerOf(const Buffer *b) const {
  if (isScalarParam(b) || b->kind == Buffer::Kind::Local)
    return "&" + bufferName(b);
  return bufferName(b);
}

std::string FunctionPrinter::elementOf(const Buffer *b,
                                       const Expr &index) const {
  if (isScalarParam(b) || b->kind == Buffer::Kind::Local)
    return bufferName(b);
  return bufferName(b) + "[" + flat(index) + "]";
}

//===--- Expressions ------------------------------------------------------===//

Text FunctionPrinter::literal(ScalarType t, double v) {
  switch (t) {
  case ScalarType::Bool:
    return {v != 0 ? "true" : "false", Atom};
  case ScalarType::Index:
  case ScalarType::I32: {
    int64_t i = static_cast<int64_t>(v);
    if (t == ScalarType::I32 && i == std::numeric_limits<int32_t>::min())
      return {"(-2147483647 - 1)", Atom};
    return {std::to_string(i), i < 0 ? Unary : Atom};
  }
  case ScalarType::F32:
  case ScalarType::F64: {
    std::string type = cType(t).str();
    if (std::isnan(v))
      return {"std::numeric_limits<" + type + ">::quiet_NaN()", Atom};
    if (std::isinf(v))
      return {(v < 0 ? "-" : "") +
                  ("std::numeric_limits<" + type + ">::infinity()"),
              v < 0 ? Unary : Atom};
    char buf[64];
    if (v == std::trunc(v) && std::fabs(v) < 1e15)
      std::snprintf(buf, sizeof buf, "%.1f", v);
    else if (t == ScalarType::F32)
      std::snprintf(buf, sizeof buf, "%.9g", v);
    else
      std::snprintf(buf, sizeof buf, "%.17g", v);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos)
      s += ".0";
    if (std::signbit(v) && v == 0)
      s = "-0.0";
    if (t == ScalarType::F32)
      s += "f";
    return {s, s[0] == '-' ? Unary : Atom};
  }
  }
  llvm_unreachable("unknown scalar type");
}

const Text &FunctionPrinter::cachedLiteral(ScalarType t, double v) const {
  auto [it, inserted] = literals.try_emplace(
      {static_cast<unsigned>(t), llvm::bit_cast<uint64_t>(v)});
  if (inserted)
    it->second = literal(t, v);
  return it->second;
}

Text FunctionPrinter::expr(const Expr &e) const {
  switch (e.kind) {
  case Expr::Kind::Const:
    return cachedLiteral(e.type, e.value);
  case Expr::Kind::Size:
    return {sizeNames.lookup(e.name), Atom};
  case Expr::Kind::LoopVar:
    return {loopVars.lookup(e.var), Atom};
  case Expr::Kind::Load: {
    auto copy = columnCopies.find(&e);
    if (copy != columnCopies.end())
      return {copy->second, Atom};
    return {elementOf(e.buffer, *e.args[0]), Atom};
  }
  case Expr::Kind::Prim:
    return primExpr(e);
  case Expr::Kind::Intrinsic: {
    // The math library's functions (gradc/Math.h, docs/Math.md), the one
    // implementation every backend calls; sqrt is exact and log1p is f64
    // only here, so those are <cmath>'s.
    std::string callee;
    switch (e.fn) {
    case Intrinsic::Sqrt:
    case Intrinsic::Log1p:
      callee = "std::" + intrinsicName(e.fn).str();
      break;
    default:
      callee = "gradc::" + intrinsicName(e.fn).str();
    }
    bool small = smallTrig && loops::hasSmallArgumentVersion(e);
    if (small)
      callee += "Small";
    std::vector<std::string> args;
    for (const ExprPtr &a : e.args)
      args.push_back(flat(*a));
    if (small)
      args.push_back(laneVar.empty() ? rangeFlagName
                                     : laneFlagsName + "[" + laneVar + "]");
    return {callee + "(" + llvm::join(args, ", ") + ")", Atom};
  }
  case Expr::Kind::Select: {
    // A blend for numbers (it vectorises), a conditional otherwise.
    if (e.type != ScalarType::Bool && e.type != ScalarType::Index)
      return {"gradc::select(" + flat(*e.args[0]) + ", " + flat(*e.args[1]) +
                  ", " + flat(*e.args[2]) + ")",
              Atom};
    return {paren(expr(*e.args[0]), LogicalOr) + " ? " +
                paren(expr(*e.args[1]), LogicalOr) + " : " +
                paren(expr(*e.args[2]), Ternary),
            Ternary};
  }
  case Expr::Kind::Cast:
    if (auto w = widenedTerms.find(&e); w != widenedTerms.end())
      return {w->second, Atom};
    return {"static_cast<" + cType(e.type).str() + ">(" + flat(*e.args[0]) +
                ")",
            Atom};
  }
  llvm_unreachable("unknown expression kind");
}

Text FunctionPrinter::primExpr(const Expr &e) const {
  ScalarType t = e.args[0]->type;
  bool isI32 = t == ScalarType::I32;
  auto fn = [&](llvm::StringRef callee) -> Text {
    std::vector<std::string> args;
    for (const ExprPtr &a : e.args)
      args.push_back(flat(*a));
    return {callee.str() + "(" + llvm::join(args, ", ") + ")", Atom};
  };
  auto binary = [&](llvm::StringRef op, int prec) -> Text {
    // Left-associative: a right operand of the same precedence needs
    // parentheses (`a - (b - c)`).
    return {paren(expr(*e.args[0]), prec) + " " + op.str() + " " +
                paren(expr(*e.args[1]), prec + 1),
            prec};
  };
  switch (e.op) {
  case PrimOp::Neg:
    if (isI32)
      return fn("gradc::wrapNeg");
    return {"-" + paren(expr(*e.args[0]), Atom), Unary};
  case PrimOp::Abs:
    return fn(isI32            ? "gradc::wrapAbs"
              : isFloatType(t) ? "std::fabs"
                               : "std::abs");
  case PrimOp::Not:
    return {"!" + paren(expr(*e.args[0]), Atom), Unary};
  case PrimOp::IsNaN:
    return fn("std::isnan");
  case PrimOp::IsFinite:
    return fn("std::isfinite");
  case PrimOp::Add:
    return isI32 ? fn("gradc::wrapAdd") : binary("+", Additive);
  case PrimOp::Sub:
    return isI32 ? fn("gradc::wrapSub") : binary("-", Additive);
  case PrimOp::Mul:
    return isI32 ? fn("gradc::wrapMul") : binary("*", Multiplicative);
  case PrimOp::Div:
    // A check before it rules out a zero divisor; gradc::divide also wraps
    // INT32_MIN / -1.
    if (isI32)
      return {"gradc::divide(" + flat(*e.args[0]) + ", " + flat(*e.args[1]) +
                  ", " + divStatusName + ")",
              Atom};
    return binary("/", Multiplicative);
  case PrimOp::Rem:
    return binary("%", Multiplicative);
  case PrimOp::Max:
    return fn(t == ScalarType::Index ? "std::max" : "gradc::maximum");
  case PrimOp::Min:
    return fn(t == ScalarType::Index ? "std::min" : "gradc::minimum");
  case PrimOp::Lt:
    return binary("<", Relational);
  case PrimOp::Le:
    return binary("<=", Relational);
  case PrimOp::Gt:
    return binary(">", Relational);
  case PrimOp::Ge:
    return binary(">=", Relational);
  case PrimOp::Eq:
    return binary("==", Equality);
  case PrimOp::Ne:
    return binary("!=", Equality);
  case PrimOp::And:
    return binary("&&", LogicalAnd);
  case PrimOp::Or:
    return binary("||", LogicalOr);
  }
  llvm_unreachable("unknown primitive");
}

//===--- Statements -------------------------------------------------------===//

/// Whether `token` is a binary operator that a line may break after.
static bool breaksAfter(llvm::StringRef token) {
  static const char *const ops[] = {"=",  "+=", "+",  "-", "*",  "/",
                                    "%",  "<",  "<=", ">", ">=", "==",
                                    "!=", "&&", "||", "?", ":"};
  return llvm::is_contained(ops, token);
}

void FunctionPrinter::spill() {
  if (out.size() <= 2 || out.size() < options.writeChunk)
    return;
  os.write(out.data(), out.size() - 2);
  out.erase(0, out.size() - 2);
}

/// One statement at the current indentation, broken at 80 columns as
/// clang-format would roughly break it: after a comma or a binary operator
/// of the least nesting that fits, the rest indented by 4 more.
void FunctionPrinter::line(const std::string &text) {
  spill();
  size_t col = indent;
  if (col + text.size() <= lineLimit) {
    out.append(col, ' ');
    out += text;
    out += '\n';
    return;
  }
  std::string rest = text;
  // Lines that come broken (the prologue's) and comments print as given.
  while (col + rest.size() > lineLimit &&
         !llvm::StringRef(rest).starts_with("//") &&
         rest.find('\n') == std::string::npos) {
    int depth = 0, bestDepth = std::numeric_limits<int>::max();
    size_t best = std::string::npos;
    for (size_t i = 1; i < rest.size() && col + i <= lineLimit; ++i) {
      char c = rest[i - 1];
      if (c == '(' || c == '[' || c == '{')
        ++depth;
      else if (c == ')' || c == ']' || c == '}')
        --depth;
      if (rest[i] != ' ' || depth > bestDepth)
        continue;
      size_t start = rest.rfind(' ', i - 1);
      llvm::StringRef token = llvm::StringRef(rest).slice(
          start == std::string::npos ? 0 : start + 1, i);
      if (c == ',' || (start != std::string::npos && breaksAfter(token))) {
        best = i;
        bestDepth = depth;
      }
    }
    if (best == std::string::npos)
      break;
    out += std::string(col, ' ') + rest.substr(0, best) + "\n";
    rest = rest.substr(best + 1);
    col = indent + 4;
  }
  out += std::string(col, ' ') + rest + "\n";
}

const std::string &FunctionPrinter::sourceLine(SourceLoc at) {
  auto [it, inserted] = sourceLines.try_emplace(at.getRaw());
  if (inserted && options.sourceManager && at.isValid()) {
    PresumedLoc loc = options.sourceManager->getPresumedLoc(at);
    if (loc.isValid())
      it->second = llvm::sys::path::filename(loc.filename).str() + ":" +
                   std::to_string(loc.line) + ": " + loc.lineText.trim().str();
  }
  return it->second;
}

/// One comment per source statement or rule: the rule's note, else the
/// source line.
void FunctionPrinter::comment(const Origin &origin) {
  llvm::StringRef text = origin.rule().empty()
                             ? llvm::StringRef(sourceLine(origin.loc))
                             : origin.rule();
  if (text.empty() || text == lastComment)
    return;
  if (!afterBrace())
    out += "\n";
  lastComment = text.str();
  for (const std::string &l : wrap(text, lineLimit - indent - 3))
    line("// " + l);
}

void FunctionPrinter::prologue() {
  std::vector<std::string> negative;
  for (const CParam &p : cparams)
    if (p.kind == CParamKind::Size)
      negative.push_back(p.name + " < 0");
  if (!negative.empty()) {
    line(unlikely(llvm::join(negative, " || ")));
    line("  return GRADC_ERROR_SIZE;");
  }
  // Element counts that could wrap (SizeChecks.h), once the sizes are
  // known to be non-negative.
  std::vector<std::string> overflows;
  for (const SizeProduct &p : sizeProductsToCheck(irFn)) {
    std::vector<std::string> factors;
    for (const std::string &name : p.names)
      factors.push_back(sizeNames.lookup(name));
    if (p.constant != 1)
      factors.push_back(std::to_string(p.constant));
    overflows.push_back("gradc::countOverflows({" + llvm::join(factors, ", ") +
                        "})");
  }
  if (!overflows.empty()) {
    line(unlikely(llvm::join(overflows, " || ")));
    line("  return GRADC_ERROR_SIZE;");
  }
}

/// Storage: one gradc::Buffer per scratch slot (checked once), one array
/// per stack slot, then a name for each buffer that lives in a slot, the
/// constants, the views and the scalar locals.
void FunctionPrinter::declarations() {
  struct Slot {
    const Buffer *first;
    std::string name;
  };
  std::vector<Slot> scratch, stack;
  llvm::DenseMap<const Buffer *, std::string> storage;
  auto place = [&](const Buffer *b, std::vector<Slot> &slots,
                   llvm::StringRef prefix) {
    // An unplanned buffer has a slot of its own.
    size_t s = b->slot >= 0 ? size_t(b->slot) : slots.size();
    if (b->slot < 0 || s >= slots.size() || !slots[s].first) {
      if (s >= slots.size())
        slots.resize(s + 1);
      slots[s].first = b;
      slots[s].name = scope.claim(prefix.str() + std::to_string(s));
    }
    storage[b] = slots[s].name;
  };
  // Unplanned buffers go after the planned ones; a parallel loop declares
  // its private buffers itself, and a transposed matmul operand needs no
  // storage.
  for (const auto &b : fn.buffers)
    if (privates.contains(b.get()) || transposedFrom.count(b.get()))
      continue;
    else if (b->slot >= 0 && b->kind == Buffer::Kind::Scratch)
      place(b.get(), scratch, "scratch");
    else if (b->slot >= 0 && b->kind == Buffer::Kind::Stack)
      place(b.get(), stack, "stack");
  for (const auto &b : fn.buffers)
    if (privates.contains(b.get()) || transposedFrom.count(b.get()))
      continue;
    else if (b->slot < 0 && b->kind == Buffer::Kind::Scratch)
      place(b.get(), scratch, "scratch");
    else if (b->slot < 0 && b->kind == Buffer::Kind::Stack)
      place(b.get(), stack, "stack");

  std::vector<std::string> failed;
  bool any = false;
  auto blank = [&] {
    if (!afterBrace() && !any)
      out += "\n";
    any = true;
  };
  for (const Slot &s : scratch) {
    if (!s.first)
      continue;
    if (failed.empty()) {
      blank();
      line("// Scratch space for temporaries, freed on return.");
    }
    line("gradc::Buffer<" + cTypeName(s.first->dtype).str() + "> " + s.name +
         "(" + flat(*s.first->numElements()) + ");");
    failed.push_back("!" + s.name);
  }
  if (!failed.empty()) {
    line(unlikely(llvm::join(failed, " || ")));
    line("  return GRADC_ERROR_ALLOC;");
  }
  for (const Slot &s : stack) {
    if (!s.first)
      continue;
    blank();
    // A stack buffer has a known size (buffer planning's rule).
    int64_t n = 1;
    for (const Dim &d : s.first->shape) {
      assert(d.isKnown() && "a stack buffer has a known size");
      n *= d.getSize();
    }
    line("alignas(16) " + cTypeName(s.first->dtype).str() + " " + s.name + "[" +
         std::to_string(std::max<int64_t>(n, 1)) + "];");
  }
  for (const auto &bp : fn.buffers) {
    const Buffer *b = bp.get();
    if (transposedFrom.count(b))
      continue;
    std::string type = cTypeName(b->dtype).str();
    if (privates.contains(b))
      continue;
    switch (b->kind) {
    case Buffer::Kind::Param:
    case Buffer::Kind::Output:
      break;
    case Buffer::Kind::Scratch:
    case Buffer::Kind::Stack: {
      blank();
      const std::string &slot = storage[b];
      bool sameType = false;
      for (const Slot &s : b->kind == Buffer::Kind::Scratch ? scratch : stack)
        if (s.name == slot)
          sameType = s.first->dtype == b->dtype;
      std::string ptr =
          b->kind == Buffer::Kind::Scratch ? slot + ".data()" : slot;
      if (!sameType)
        ptr = "reinterpret_cast<" + type + " *>(" + ptr + ")";
      line(type + " *" + bufferName(b) + " = " + ptr + ";");
      break;
    }
    case Buffer::Kind::Local:
      blank();
      line(type + " " + bufferName(b) + " = 0;");
      break;
    case Buffer::Kind::Constant: {
      blank();
      std::vector<std::string> items;
      for (double d : b->data)
        items.push_back(literal(fromDType(b->dtype), d).s);
      std::string head =
          "static const " + type + " " + bufferName(b) + "[] = {";
      std::string all = head + llvm::join(items, ", ") + "};";
      if (all.size() + indent <= lineLimit) {
        line(all);
        break;
      }
      line(head);
      std::string cur;
      for (size_t i = 0; i < items.size(); ++i) {
        std::string piece = items[i] + (i + 1 < items.size() ? "," : "");
        if (!cur.empty() &&
            indent + 4 + cur.size() + 1 + piece.size() > lineLimit) {
          line("    " + cur);
          cur.clear();
        }
        cur += (cur.empty() ? "" : " ") + piece;
      }
      if (!cur.empty())
        line("    " + cur);
      line("};");
      break;
    }
    case Buffer::Kind::Alias: {
      blank();
      std::string base = pointerOf(b->base);
      if (!isIndexConst(*b->offset, 0))
        base += " + " + paren(expr(*b->offset), Additive + 1);
      line((b->isReadOnly() ? "const " : "") + type + " *" + bufferName(b) +
           " = " + base + ";");
      break;
    }
    }
  }
  if (dividesI32)
    line("int " + divStatusName + " = GRADC_OK;");
}

void FunctionPrinter::block(const Block &b) {
  for (const StmtPtr &s : b)
    stmt(*s);
}

/// A loop of dot products (loops::isDotLoop) in the one shape that
/// dotColumns prints as columns: `for i < M { %acc = c; for p < K { %acc
/// += a * b }; S }` with %acc an f64 local, one factor of the product free
/// of i (the one the columns share), and S statements without loops that
/// write neither %acc nor anything the product reads (so that all the sums
/// may run before the first S), which does not read %acc. The index of the
/// free factor, or -1.
static int columnDotFactor(const Stmt &s) {
  if (!isDotLoop(s) || s.body.size() < 2)
    return -1;
  const Stmt &init = *s.body[0];
  const Stmt &inner = *s.body[1];
  if (init.kind != Stmt::Kind::Store ||
      init.buffer->kind != Buffer::Kind::Local ||
      init.buffer->dtype != DType::F64 ||
      init.value->kind != Expr::Kind::Const || inner.kind != Stmt::Kind::For ||
      inner.body.size() != 1)
    return -1;
  const Stmt &add = *inner.body[0];
  if (add.kind != Stmt::Kind::Accumulate || add.combiner != Combiner::Add ||
      add.buffer != init.buffer || add.value->kind != Expr::Kind::Prim ||
      add.value->op != PrimOp::Mul || add.value->args.size() != 2 ||
      add.value->type != ScalarType::F64)
    return -1;
  llvm::SmallPtrSet<const Buffer *, 4> read;
  walkExprs(add, [&](const Expr &e) {
    if (e.kind == Expr::Kind::Load)
      read.insert(e.buffer->root());
  });
  // The product reads the sums only through the columns' own element.
  if (read.contains(init.buffer))
    return -1;
  for (size_t k = 2; k < s.body.size(); ++k) {
    const Stmt &st = *s.body[k];
    if (st.kind == Stmt::Kind::For || !st.buffer || st.buffer == init.buffer ||
        read.contains(st.buffer->root()))
      return -1;
  }
  for (int f : {1, 0})
    if (!usesVar(*add.value->args[f], s.var))
      return f;
  return -1;
}

/// GCC (12) vectorises a small loop of f64 dot products two lanes at a
/// time, or not at all, when each row adds its own sum; as columns, one
/// column of sums (f64[M]) that each step p adds a column of products to,
/// the factor they share computed once per step, it adds all rows at once
/// (K4: 4 x 4, one <4 x double> per step; gradient 22.0 to 19.4 ns). Each
/// sum still adds its terms in increasing p from its start: the same bits.
/// Clang vectorises the rows' form better (17.6 ns against 20.3): both
/// are printed, the columns under GRADC_DOT_COLUMNS (gradc/Kernels.h).
/// Returns false, printing nothing, for a loop of another shape.
bool FunctionPrinter::dotColumns(const Stmt &s) {
  int shared = columnDotFactor(s);
  if (shared < 0)
    return false;
  const Stmt &init = *s.body[0];
  const Stmt &inner = *s.body[1];
  const Expr &product = *inner.body[0]->value;
  std::string acc = bufferName(init.buffer);
  std::string col = scope.claim(acc + "_col");
  std::string factor = scope.claim(acc + "_factor");
  std::string rows = paren(expr(*s.extent), Relational + 1);
  std::string i = depthNames[std::min<size_t>(depth, depthNames.size() - 1)];
  std::string i1 =
      depthNames[std::min<size_t>(depth + 1, depthNames.size() - 1)];
  auto head = [&](const std::string &v, const std::string &extent) {
    return "for (int64_t " + v + " = 0; " + v + " < " + extent + "; ++" + v +
           ") {";
  };
  line("#if GRADC_DOT_COLUMNS");
  line("{");
  indent += 2;
  copyColumns(s, *product.args[1 - shared], i, i1);
  line("double " + col + "[" + rows + "];");
  line(head(i, rows));
  line("  " + col + "[" + i + "] = " + flat(*init.value) + ";");
  line("}");
  loopVars[inner.var] = i;
  std::string factorValue = widenedFactors(s, product.args[shared].get(), acc);
  line(head(i, paren(expr(*inner.extent), Relational + 1)));
  line("  const double " + factor + " = " +
       (factorValue.empty() ? flat(*product.args[shared])
                            : factorValue + "[" + i + "]") +
       ";");
  loopVars[s.var] = i1;
  Text other = expr(*product.args[1 - shared]);
  std::string term = shared == 1
                         ? paren(other, Multiplicative) + " * " + factor
                         : factor + " * " + paren(other, Multiplicative + 1);
  line("  " + head(i1, rows));
  line("    " + col + "[" + i1 + "] += " + term + ";");
  columnCopies.clear();
  line("  }");
  line("}");
  loopVars.erase(inner.var);
  loopVars[s.var] = i;
  line(head(i, rows));
  ++depth;
  indent += 2;
  line(acc + " = " + col + "[" + i + "];");
  for (size_t k = 2; k < s.body.size(); ++k)
    stmt(*s.body[k]);
  endFirstCopy(s);
  return true;
}

/// When the factor that dotColumns' rows share is one f32 element per step
/// (loops::sharedWidenedFactor: K4's gradient `d_x = wᵀ g`), prints the K
/// steps' factors widened at once into an f64 array, for gradc::widen4
/// (one vcvtps2pd per 4, where GCC widened and broadcast each alone: K4's
/// gradient with its outer product as rows, 24.6 to 20.1 ns), and returns
/// the array's name; else prints nothing and returns "".
std::string FunctionPrinter::widenedFactors(const Stmt &s, const Expr *factor,
                                            const std::string &acc) {
  if (factor != loops::sharedWidenedFactor(s))
    return "";
  const Expr &load = *factor->args[0];
  const Expr &index = *load.args[0];
  std::string from = pointerOf(load.buffer);
  if (index.kind != Expr::Kind::LoopVar)
    from += " + " + paren(expr(*index.args[0]), Additive + 1);
  std::string name = scope.claim(acc + "_factors");
  int64_t steps = int64_t(s.body[1]->extent->value);
  line("double " + name + "[" + std::to_string(steps) + "];");
  for (int64_t k = 0; k < steps; k += 4)
    line("gradc::widen4(" + name + (k ? " + " + std::to_string(k) : "") + ", " +
         from + (k ? " + " + std::to_string(k) : "") + ");");
  return name;
}

/// Ends the first of the two copies of loop `s` that dotColumns and
/// widenedLanes print: its loop, the block around it, then `#else`.
void FunctionPrinter::endFirstCopy(const Stmt &s) {
  indent -= 2;
  --depth;
  line("}");
  loopVars.erase(s.var);
  indent -= 2;
  line("}");
  line("#else");
}

/// dotColumns' column loop reads the factor that differs between rows at
/// step p down a column, `a[i * K + p]` for each row i: GCC assembles such
/// a column from four scalar loads. A load whose index moves with both i
/// and p, other than by one element per row, so reads a copy `a_t[p * M +
/// i]` of those elements first (a transpose, which GCC does with
/// shuffles: K4's gradient 21.2 to 20.1 ns, its value 14.4 to 13.3, called
/// 1024 times in a row). Nothing in the loop writes what the product
/// reads (columnDotFactor): the copy has the values the loads would read.
void FunctionPrinter::copyColumns(const Stmt &s, const Expr &factor,
                                  const std::string &v0,
                                  const std::string &v1) {
  const Stmt &inner = *s.body[1];
  auto contiguous = [&](const Expr &index) {
    return index.kind == Expr::Kind::Prim && index.op == PrimOp::Add &&
           index.args[1]->kind == Expr::Kind::LoopVar &&
           index.args[1]->var == s.var && !usesVar(*index.args[0], s.var);
  };
  std::vector<const Expr *> loads;
  std::function<void(const Expr &)> find = [&](const Expr &e) {
    if (e.kind == Expr::Kind::Load && usesVar(*e.args[0], s.var) &&
        usesVar(*e.args[0], inner.var) && !contiguous(*e.args[0])) {
      loads.push_back(&e);
      return;
    }
    for (const ExprPtr &a : e.args)
      find(*a);
  };
  find(factor);
  // The copy's loops: row v0, step v1; the column loop reads it at step
  // v0, row v1.
  std::string rows = paren(expr(*s.extent), Multiplicative + 1);
  std::string steps = paren(expr(*inner.extent), Multiplicative + 1);
  loopVars[s.var] = v0;
  loopVars[inner.var] = v1;
  for (const Expr *load : loads) {
    std::string copy = scope.claim(bufferName(load->buffer) + "_t");
    line(cType(fromDType(load->buffer->dtype)).str() + " " + copy + "[" +
         paren(expr(*s.extent), Multiplicative) + " * " + steps + "];");
    line("for (int64_t " + v0 + " = 0; " + v0 + " < " + rows + "; ++" + v0 +
         ") {");
    line("  for (int64_t " + v1 + " = 0; " + v1 + " < " + steps + "; ++" + v1 +
         ") {");
    line("    " + copy + "[" + v1 + " * " + rows + " + " + v0 +
         "] = " + flat(*load) + ";");
    line("  }");
    line("}");
    columnCopies[load] = copy + "[" + v0 + " * " + rows + " + " + v1 + "]";
  }
  loopVars.erase(inner.var);
  loopVars.erase(s.var);
}

/// Whether `e` converts an f32 value to f64 (a term of an f64 sum).
static bool isWidening(const Expr &e) {
  return e.kind == Expr::Kind::Cast && e.type == ScalarType::F64 &&
         e.args[0]->type == ScalarType::F32;
}

/// The widenings in `e`, outermost first (none inside another).
static void findWidenings(const Expr &e, std::vector<const Expr *> &out) {
  if (isWidening(e)) {
    out.push_back(&e);
    return;
  }
  for (const ExprPtr &a : e.args)
    findWidenings(*a, out);
}

/// Whether `e` loads from a buffer in `written`: outside its widenings
/// (`inside` false) or inside them (true).
static bool readsAny(const Expr &e,
                     const llvm::SmallPtrSetImpl<const Buffer *> &written,
                     bool inside) {
  if (isWidening(e) && !inside)
    return false;
  if (isWidening(e))
    inside = false;
  if (e.kind == Expr::Kind::Load && written.contains(e.buffer->root()) &&
      !inside)
    return true;
  for (const ExprPtr &a : e.args)
    if (readsAny(*a, written, inside))
      return true;
  return false;
}

/// The statements of a lane loop of 8 f64 lanes (loops::isLaneLoop) that
/// add f32 terms to f64 sums other than the lanes (a column's sum), if
/// the loop may run as two loops: the rest, with each such term stored as
/// f32, then these statements, the terms converted to f64 8 at a time in
/// between. Each loop runs all 8 lanes before the next: so neither may
/// write what the other reads or writes (these statements read their
/// terms through the copy). The lanes' own sum stays in the first loop
/// (beginLaneVectors keeps the lanes in registers; with their terms
/// through a copy in the second loop, GCC kept them in memory). Empty if
/// the loop may not run so, or has no such statement.
static std::vector<const Stmt *> widenedStatements(const Stmt &s) {
  if (s.extent->kind != Expr::Kind::Const ||
      int64_t(s.extent->value) != ir::reductionLanes)
    return {};
  std::vector<const Stmt *> wide;
  llvm::SmallPtrSet<const Buffer *, 8> writesRest, writesWide;
  for (const StmtPtr &st : s.body) {
    if (st->kind != Stmt::Kind::Store && st->kind != Stmt::Kind::Accumulate)
      return {};
    std::vector<const Expr *> terms;
    findWidenings(*st->value, terms);
    if (terms.empty() || st->buffer->kind == Buffer::Kind::Stack) {
      writesRest.insert(st->buffer->root());
      continue;
    }
    wide.push_back(st.get());
    writesWide.insert(st->buffer->root());
  }
  if (wide.empty())
    return {};
  auto reads = [](const Expr &e, const auto &written) {
    return readsAny(e, written, false) || readsAny(e, written, true);
  };
  for (const StmtPtr &st : s.body) {
    const Buffer *target = st->buffer->root();
    if (!llvm::is_contained(wide, st.get())) {
      if (writesWide.contains(target) || reads(*st->index, writesWide) ||
          reads(*st->value, writesWide))
        return {};
      continue;
    }
    // Its terms are computed in the first loop, the rest in the second.
    if (writesRest.contains(target) || reads(*st->index, writesRest) ||
        reads(*st->index, writesWide) ||
        readsAny(*st->value, writesRest, false) ||
        readsAny(*st->value, writesWide, true))
      return {};
  }
  return wide;
}

/// A lane loop that also adds f32 terms to f64 sums other than its lanes
/// (K5's column sums of d_beta and d_gamma), when widenedStatements
/// allows, is printed twice: under GRADC_WIDEN_COLUMNS (GCC) as two loops,
/// the f32 work, which stores each such term in `terms[n][k]`, then
/// gradc::widen8 of each row of terms into `wide[n]`, then the f64 sums,
/// which add `wide[n][k]`; else (Clang) as it is. GCC vectorises a loop of
/// 8 lanes with vectors of one size, so it converts 8 floats to f64 as two
/// halves of 4 with a shuffle between (three shuffle-port instructions
/// where one does); widen8 converts all 8 at once. K5's gradient, default
/// order, g++ -O3 -march=native: 298 us, 300 with this alone, 290 with
/// beginLaneVectors alone, 257 with both; Clang: 546 us as one loop, 621
/// as two. Every sum adds the same terms in the same order: the same bits.
/// Returns false, printing nothing, for a loop it does not apply to.
bool FunctionPrinter::widenedLanes(const Stmt &s) {
  std::vector<const Stmt *> wide = widenedStatements(s);
  if (wide.empty())
    return false;
  std::vector<const Expr *> terms;
  for (const Stmt *st : wide)
    findWidenings(*st->value, terms);
  std::string v = depthNames[std::min<size_t>(depth, depthNames.size() - 1)];
  std::string termsName = scope.claim("terms");
  std::string wideName = scope.claim("wide");
  std::string count = std::to_string(terms.size());
  auto term = [&](const std::string &name, size_t n) {
    return name + "[" + std::to_string(n) + "][" + v + "]";
  };
  line("#if GRADC_WIDEN_COLUMNS");
  line("{");
  indent += 2;
  line("float " + termsName + "[" + count + "][8];");
  line("double " + wideName + "[" + count + "][8];");
  laneLoopHead(s, v);
  ++depth;
  indent += 2;
  laneVar = v;
  size_t n = 0;
  for (const StmtPtr &st : s.body) {
    if (!llvm::is_contained(wide, st.get())) {
      stmt(*st);
      continue;
    }
    std::vector<const Expr *> own;
    findWidenings(*st->value, own);
    for (const Expr *e : own)
      line(term(termsName, n++) + " = " + flat(*e->args[0]) + ";");
  }
  indent -= 2;
  line("}");
  for (size_t k = 0; k < terms.size(); ++k) {
    std::string row = "[" + std::to_string(k) + "]";
    line("gradc::widen8(" + wideName + row + ", " + termsName + row + ");");
  }
  laneLoopHead(s, v);
  indent += 2;
  for (size_t k = 0; k < terms.size(); ++k)
    widenedTerms[terms[k]] = term(wideName, k);
  for (const Stmt *st : wide)
    stmt(*st);
  widenedTerms.clear();
  laneVar.clear();
  endFirstCopy(s);
  return true;
}

/// The head of a lane loop over `v` (its macros, then `for`).
void FunctionPrinter::laneLoopHead(const Stmt &s, const std::string &v) {
  loopVars[s.var] = v;
  line("GRADC_LANE_LOOP");
  if (s.independent)
    line("GRADC_IVDEP");
  line("for (int64_t " + v + " = 0; " + v + " < " +
       paren(expr(*s.extent), Relational + 1) + "; ++" + v + ") {");
}

/// The lane sums `lanes[k] += f64(t)` of an 8-lane f64 sum (a Stack
/// buffer) in the lane loops of chunk loop `s`, where nothing else in `s`
/// touches them (the rest loop after it, the tree that combines them, do).
/// Only where `s` holds several lane loops (the rows that `jam` put
/// together): a chunk loop of one sum gained nothing, and where its lanes
/// were just zeroed Lanes8 reloads them (GMM's forward 15-34% and K2's
/// 7-26% slower; Performance.md, session 18).
static std::vector<const Buffer *> vectorLanes(const Stmt &s) {
  if (s.kind != Stmt::Kind::For || s.parallel)
    return {};
  auto isLanes8 = [](const Stmt &c) {
    return c.kind == Stmt::Kind::For && loops::isLaneLoop(c) &&
           c.extent->kind == Expr::Kind::Const &&
           int64_t(c.extent->value) == ir::reductionLanes;
  };
  if (llvm::count_if(s.body, [&](const StmtPtr &c) { return isLanes8(*c); }) <
      2)
    return {};
  llvm::SmallVector<const Buffer *, 4> found;
  llvm::SmallPtrSet<const Stmt *, 4> sums;
  for (const StmtPtr &c : s.body) {
    if (!isLanes8(*c))
      continue;
    for (const StmtPtr &st : c->body)
      if (st->kind == Stmt::Kind::Accumulate && st->combiner == Combiner::Add &&
          st->buffer->kind == Buffer::Kind::Stack &&
          st->buffer->dtype == DType::F64 &&
          st->index->kind == Expr::Kind::LoopVar && st->index->var == c->var &&
          isWidening(*st->value) && !llvm::is_contained(found, st->buffer)) {
        found.push_back(st->buffer);
        sums.insert(st.get());
      }
  }
  llvm::SmallPtrSet<const Buffer *, 4> other;
  walk(s.body, [&](const Stmt &st) {
    if (st.buffer && !sums.contains(&st))
      other.insert(st.buffer);
    walkExprs(st, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Load)
        other.insert(e.buffer);
    });
  });
  std::vector<const Buffer *> lanes;
  for (const Buffer *b : found)
    if (!other.contains(b))
      lanes.push_back(b);
  return lanes;
}

/// A chunk loop whose lane loops add f32 terms to 8 f64 lanes keeps the
/// lanes in a gradc::Lanes8 (an <8 x double> vector where the compiler has
/// vector extensions) from before the loop to after it, and each lane loop
/// stores its terms in an f32 array that Lanes8::add converts and adds in
/// one step, where GCC converts a lane loop's terms four at a time and
/// adds them to the lanes as two halves (widenedLanes; K5's gradient, with
/// it: 298 to 257 us). Lane k still adds term k of each chunk in order:
/// the same bits. Only in chunk loops of several lane loops (vectorLanes).
std::vector<const Buffer *> FunctionPrinter::beginLaneVectors(const Stmt &s) {
  std::vector<const Buffer *> lanes = vectorLanes(s);
  if (lanes.empty())
    return lanes;
  line("{");
  indent += 2;
  for (const Buffer *b : lanes) {
    std::string name = scope.claim(pointerOf(b) + "_v");
    line("gradc::Lanes8 " + name + "(" + pointerOf(b) + ");");
    laneVectors[b] = {name, ""};
  }
  return lanes;
}

void FunctionPrinter::endLaneVectors(const std::vector<const Buffer *> &lanes) {
  if (lanes.empty())
    return;
  for (const Buffer *b : lanes) {
    line(laneVectors[b].vector + ".store(" + pointerOf(b) + ");");
    laneVectors.erase(b);
  }
  indent -= 2;
  line("}");
}

/// Before lane loop `s`: the f32 arrays of the terms that it adds to the
/// lane vectors (beginLaneVectors), declared; accumulate stores into them.
std::vector<const Buffer *> FunctionPrinter::beginLaneTerms(const Stmt &s) {
  std::vector<const Buffer *> lanes;
  if (laneVectors.empty())
    return lanes;
  for (const StmtPtr &st : s.body) {
    auto v = laneVectors.find(st->buffer);
    if (st->kind != Stmt::Kind::Accumulate || v == laneVectors.end())
      continue;
    v->second.terms = scope.claim(pointerOf(st->buffer) + "_terms");
    line("float " + v->second.terms + "[8];");
    lanes.push_back(st->buffer);
  }
  return lanes;
}

void FunctionPrinter::endLaneTerms(const std::vector<const Buffer *> &lanes) {
  for (const Buffer *b : lanes) {
    LaneVector &v = laneVectors[b];
    line(v.vector + ".add(" + v.terms + ");");
    v.terms.clear();
  }
}

void FunctionPrinter::forLoop(const Stmt &s) {
  bool lanes = loops::isLaneLoop(s);
  std::vector<const Buffer *> terms;
  if (lanes)
    terms = beginLaneTerms(s);
  bool widened = lanes && !s.parallel && widenedLanes(s);
  std::vector<const Buffer *> vectors;
  if (!lanes)
    vectors = beginLaneVectors(s);
  bool columns = !s.parallel && dotColumns(s);
  std::string v = depthNames[std::min<size_t>(depth, depthNames.size() - 1)];
  loopVars[s.var] = v;
  if (s.parallel)
    parallelHead(s);
  if (lanes)
    line("GRADC_LANE_LOOP");
  else if (depth > 0 && loops::isRowStoreLoop(s))
    line("GRADC_ROW_LOOP");
  if (s.independent)
    line("GRADC_IVDEP");
  line("for (int64_t " + v + " = 0; " + v + " < " +
       paren(expr(*s.extent), Relational + 1) + "; ++" + v + ") {");
  ++depth;
  indent += 2;
  if (s.parallel)
    privateCopies(s);
  if (lanes)
    laneVar = v;
  block(s.body);
  laneVar.clear();
  indent -= 2;
  --depth;
  line("}");
  loopVars.erase(s.var);
  if (columns || widened)
    line("#endif");
  endLaneTerms(terms);
  endLaneVectors(vectors);
}

/// A loop that the `parallel` pass marked runs on gradc::numThreads()
/// threads when the program is compiled with OpenMP and its work reaches
/// loops::parallelMinWork (Kernels.h's GRADC_PARALLEL_FOR; docs/ABI.md,
/// "Threads").
void FunctionPrinter::parallelHead(const Stmt &s) {
  std::string head = "GRADC_PARALLEL_FOR(gradc::numThreads() > 1";
  if (smallTrig && loops::callsSmallArgumentVersion(s))
    head = (laneFlags ? (laneFlagCount == 16 ? "GRADC_PARALLEL_FOR_FLAGS16("
                                             : "GRADC_PARALLEL_FOR_FLAGS(") +
                            rangeFlagName + ", " + laneFlagsName + ", "
                      : "GRADC_PARALLEL_FOR_FLAG(" + rangeFlagName + ", ") +
           "gradc::numThreads() > 1";
  if (s.work->kind == Expr::Kind::Const) {
    line(head + ")");
    return;
  }
  std::string work = paren(expr(*s.work), Relational + 1) +
                     " >= " + std::to_string(parallelMinWork) + ")";
  if (indent + head.size() + 4 + work.size() <= lineLimit) {
    line(head + " && " + work);
    return;
  }
  line(head + " &&");
  line(std::string(head.size() - 23, ' ') + work);
}

/// Each iteration's own locals and stack arrays, at the top of the body
/// (so each thread has its own).
void FunctionPrinter::privateCopies(const Stmt &s) {
  for (const Buffer *b : s.privates) {
    std::string type = cTypeName(b->dtype).str();
    if (b->kind == Buffer::Kind::Local) {
      line(type + " " + bufferName(b) + " = 0;");
      continue;
    }
    int64_t n = 1;
    for (const Dim &d : b->shape) {
      assert(d.isKnown() && "a stack buffer has a known size");
      n *= d.getSize();
    }
    line("alignas(16) " + type + " " + bufferName(b) + "[" +
         std::to_string(std::max<int64_t>(n, 1)) + "];");
  }
}

void FunctionPrinter::accumulate(const Stmt &s) {
  if (auto v = laneVectors.find(s.buffer);
      v != laneVectors.end() && !v->second.terms.empty()) {
    line(v->second.terms + "[" + flat(*s.index) +
         "] = " + flat(*s.value->args[0]) + ";");
    return;
  }
  std::string target = elementOf(s.buffer, *s.index);
  ScalarType t = fromDType(s.buffer->dtype);
  std::string value = flat(*s.value);
  switch (s.combiner) {
  case Combiner::Add:
    if (t == ScalarType::I32)
      line(target + " = gradc::wrapAdd(" + target + ", " + value + ");");
    else
      line(target + " += " + value + ";");
    return;
  case Combiner::Max:
    line(target + " = gradc::maximum(" + target + ", " + value + ");");
    return;
  case Combiner::Min:
    line(target + " = gradc::minimum(" + target + ", " + value + ");");
    return;
  }
}

void FunctionPrinter::call(const Stmt &s) {
  std::vector<std::string> args;
  std::string symbol;
  bool checked = true;
  std::vector<TensorType> paramTypes;
  if (s.isExtern) {
    const ir::ExternDecl *decl = module.lookupExtern(s.callee);
    assert(decl && "the verifier checks callees");
    symbol = decl->name;
    checked = s.checksStatus;
  } else {
    symbol = cSymbolName(options.moduleName, s.callee);
  }
  for (const auto &[name, value] : s.sizeArgs)
    args.push_back(flat(*value));
  // A scalar input goes by value (docs/ABI.md), the rest by pointer.
  for (const Buffer *in : s.inputs)
    args.push_back(in->shape.empty() ? elementOf(in, *index(0))
                                     : pointerOf(in));
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    std::string p = pointerOf(s.outputs[i]);
    if (!s.operands.empty() && !isIndexConst(*s.operands[i], 0))
      p += " + " + paren(expr(*s.operands[i]), Additive + 1);
    args.push_back(std::move(p));
  }
  std::string c = symbol + "(" + llvm::join(args, ", ") + ")";
  if (!checked) {
    line(c + ";");
    return;
  }
  std::string test = "if (int " + statusName + " = " + c + "; GRADC_UNLIKELY(" +
                     statusName + "))";
  if (!smallTrig) {
    line(test);
    line("  return " + statusName + ";");
    return;
  }
  line(test + " {");
  failureReturn(statusName);
  line("}");
}

/// z = a @ b on M x K and K x N matrices at those offsets; an operand that
/// a nest only transposes is read transposed where it came from.
void FunctionPrinter::kernelCall(const Stmt &s) {
  auto at = [&](const Buffer *b, const Expr &offset) {
    std::string p = pointerOf(b);
    if (!isIndexConst(offset, 0))
      p += " + " + paren(expr(offset), Additive + 1);
    return p;
  };
  auto operand = [&](unsigned i) {
    const Buffer *b = s.inputs[i];
    if (const Buffer *from = transposedFrom.lookup(b))
      return at(from, *s.operands[i + 1]) + ", gradc::Transposed";
    return at(b, *s.operands[i + 1]) + ", gradc::NoTranspose";
  };
  // An f32 accumulator: the second order (accumulate = "f32").
  std::string kernel =
      s.accType == ScalarType::F32 ? "gradc::matmulF32(" : "gradc::matmul(";
  line(kernel + operand(0) + ", " + operand(1) + ", " +
       at(s.outputs[0], *s.operands[0]) + ", " + flat(*s.operands[3]) + ", " +
       flat(*s.operands[5]) + ", " + flat(*s.operands[4]) + ");");
}

/// The operands that the runtime's kernels read transposed
/// (gradc::Transposed), where they came from: any matmul's
/// (TransposedOperands.h).
void FunctionPrinter::findTransposedOperands() {
  TransposedOperands found = emit::findTransposedOperands(
      fn, [](const Stmt &) { return true; },
      /*batches=*/true);
  transposedFrom = std::move(found.from);
  elided = std::move(found.elided);
}

void FunctionPrinter::stmt(const Stmt &s) {
  if (elided.count(&s))
    return;
  comment(s.origin);
  switch (s.kind) {
  case Stmt::Kind::For:
    forLoop(s);
    return;
  case Stmt::Kind::Store:
    line(elementOf(s.buffer, *s.index) + " = " + flat(*s.value) + ";");
    return;
  case Stmt::Kind::Accumulate:
    accumulate(s);
    return;
  case Stmt::Kind::Check:
    if (!smallTrig) {
      line(unlikely("!" + paren(expr(*s.cond), Atom)));
      line("  return " + checkStatusName(s.status).str() + ";");
      return;
    }
    line(unlikely("!" + paren(expr(*s.cond), Atom)) + " {");
    failureReturn(checkStatusName(s.status).str());
    line("}");
    return;
  case Stmt::Kind::KernelCall:
    kernelCall(s);
    return;
  case Stmt::Kind::Call:
    call(s);
    return;
  }
}

/// The first copy of a function with a range version (docs/Loops.md): the
/// body with gradc::sinSmall/cosSmall, which set the flag for an argument
/// of 2^20 or more (or inf or NaN), their parallel loops on threads too
/// (each thread's flags or-ed at the join); it returns when no argument
/// was out of range, and otherwise the body runs again as it is, from the
/// start (it reads only its inputs, and writes every output and temporary
/// before it reads it).
void FunctionPrinter::rangeVersion() {
  line("int32_t " + rangeFlagName + " = 0;");
  // One flag per lane of the widest such lane loop (16 f32 lanes with
  // accumulate = "f32", else 8).
  walk(fn.body, [&](const Stmt &s) {
    if (!loops::isLaneLoop(s) || !loops::callsSmallArgumentVersion(s))
      return;
    laneFlags = true;
    laneFlagCount = std::max(laneFlagCount, int64_t(s.extent->value));
  });
  int64_t lanes = laneFlagCount;
  std::string lane = depthNames[0];
  if (laneFlags)
    line("int32_t " + laneFlagsName + "[" + std::to_string(lanes) + "] = {};");
  line("{");
  indent += 2;
  smallTrig = true;
  block(fn.body);
  smallTrig = false;
  if (laneFlags) {
    line("for (int64_t " + lane + " = 0; " + lane + " < " +
         std::to_string(lanes) + "; ++" + lane + ")");
    line("  " + rangeFlagName + " |= " + laneFlagsName + "[" + lane + "];");
  }
  line("if (!" + rangeFlagName + ")");
  line("  return GRADC_OK;");
  indent -= 2;
  line("}");
  if (usesGeneralLabel)
    out += "gradc_general:\n";
  lastComment.clear();
}

/// In the first copy of a range version a failure may come from an
/// argument out of range (a value made from its meaningless sin): then
/// the second copy decides.
void FunctionPrinter::failureReturn(const std::string &status) {
  indent += 2;
  line("if (" + rangeFlagName + ")");
  line("  goto gradc_general;");
  line("return " + status + ";");
  indent -= 2;
  usesGeneralLabel = true;
}

/// The comment and the first line(s) of the definition, up to `{`.
std::string FunctionPrinter::signature() const {
  std::string text;
  std::vector<std::string> decls;
  for (size_t i = 0; i < cparams.size(); ++i) {
    const CParam &p = cparams[i];
    std::string decl = cParamDecl(p);
    if (p.kind == CParamKind::Input && !fn.isParamRead(inputPosition[i])) {
      size_t at = decl.rfind(p.name);
      decl = decl.substr(0, at) + (decl[at - 1] == '*' ? " " : "") + "/*" +
             p.name + "*/";
    } else if (size_t star = decl.rfind(" *"); star != std::string::npos) {
      // The ABI forbids outputs to overlap inputs or each other (inputs
      // are only read): without run-time overlap checks, small nests such
      // as K4's outer product vectorise (24 ns per gradient, not 34).
      decl.insert(star + 2, "GRADC_RESTRICT ");
    }
    decls.push_back(decl);
  }
  for (const std::string &l : wrap(sourceSignature(irFn), lineLimit - 3))
    text += "// " + l + "\n";
  std::string linkage = isExported(irFn) ? "extern \"C\" int " : "static int ";
  return text +
         declaration(linkage + cSymbolName(options.moduleName, fn.name) + "(",
                     decls, ") {") +
         "\n";
}

void FunctionPrinter::run() {
  rangeVersioned = loops::hasRangeVersion(fn);
  nameEverything();
  walk(fn.body, [&](const Stmt &s) {
    walkExprs(s, [&](const Expr &e) {
      if (e.kind == Expr::Kind::Prim && e.op == PrimOp::Div &&
          e.type == ScalarType::I32)
        dividesI32 = true;
    });
  });
  for (const StmtPtr &s : fn.body)
    if (s->parallel)
      privates.insert(s->privates.begin(), s->privates.end());
  findTransposedOperands();
  out += signature();
  prologue();
  declarations();
  if (rangeVersioned)
    rangeVersion();
  block(fn.body);
  line("return GRADC_OK;");
  out += "}\n";
  os << out;
  out.clear();
}

} // namespace

bool emit::emitCpp(const ir::Module &module, const EmitOptions &options,
                   llvm::raw_ostream &os, std::string &error) {
  std::unique_ptr<LoopModule> lowered = lowerForBackend(module, error);
  if (!lowered)
    return false;
  TimeRegion region("print C++");
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
  for (const std::string &l : wrap(about, lineLimit - 3))
    text += "// " + l + "\n";
  text += "\n#include \"gradc/Runtime.h\"\n";
  std::vector<std::string> headers;
  for (const ir::ExternDecl &e : module.externs)
    if (!llvm::is_contained(headers, e.header)) {
      headers.push_back(e.header);
      text += "#include \"" + e.header + "\"\n";
    }
  text += "\n";
  // Prototypes, so that the functions may call each other in any order.
  std::vector<std::pair<const LoopFunction *, const ir::Function *>> fns;
  for (const auto &f : lowered->functions) {
    const ir::Function *irFn = module.lookup(f->name);
    if (!irFn) {
      error = "no function '" + f->name + "' for its loops";
      return false;
    }
    fns.push_back({f.get(), irFn});
    NameScope scope;
    std::vector<std::string> decls;
    for (const CParam &p : getCParams(module, *irFn, scope))
      decls.push_back(cParamDecl(p));
    text +=
        declaration((isExported(*irFn) ? "extern \"C\" int " : "static int ") +
                        cSymbolName(options.moduleName, f->name) + "(",
                    decls, ");") +
        "\n";
  }
  os << text;
  for (const auto &[f, irFn] : fns) {
    os << "\n";
    FunctionPrinter(module, *f, *irFn, options, os).run();
  }
  if (options.disableFree)
    llvm::BuryPointer(std::move(lowered));
  return true;
}
