//===- AST.h - Syntax tree of a .grad file ----------------------*- C++ -*-===//
//
// The parser builds these nodes; Sema annotates them in place (types,
// resolved callees, the gradient rule chosen for each op) and IRGen lowers
// them. Every node carries its source range. Nodes use LLVM-style RTTI:
// a Kind enum and classof, so `isa<CallExpr>(e)` and `dyn_cast` work.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_AST_AST_H
#define GRADC_AST_AST_H

#include "gradc/Basic/SourceManager.h"
#include "gradc/Ops/Attr.h"
#include "gradc/Ops/OpTable.h"
#include "gradc/Ops/Types.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Casting.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gradc::ast {

class FnDecl;
class RuleDecl;

/// An identifier with where it was written.
struct Ident {
  std::string name;
  SourceRange range;
};

//===----------------------------------------------------------------------===//
// Types as written
//===----------------------------------------------------------------------===//

/// One dimension as written: `3` or `N`.
struct DimExpr {
  Dim dim;
  SourceRange range;
};

/// `f32`, `f32[2, N]`.
struct TypeExpr {
  DType dtype = DType::F32;
  std::vector<DimExpr> dims;
  SourceRange range;

  TensorType toType() const;
};

//===----------------------------------------------------------------------===//
// What Sema computes for an expression
//===----------------------------------------------------------------------===//

/// The type of an expression: a tensor, a list of tensors (a list literal,
/// `unstack`'s result) or a tuple (a call of a function with several
/// results). Tuples and lists are resolved into separate values by IRGen.
struct ValueType {
  enum Kind { Unknown, Tensor, List, Tuple };
  Kind kind = Unknown;
  TensorType tensor;                // when kind == Tensor
  std::vector<TensorType> elements; // when kind == List or Tuple

  static ValueType ofTensor(TensorType t) {
    ValueType v;
    v.kind = Tensor;
    v.tensor = std::move(t);
    return v;
  }
  bool isTensor() const { return kind == Tensor; }
  bool isKnown() const { return kind != Unknown; }
  std::string str() const;
};

struct RuleInstance;

/// Which gradient rule an op (or a call of a @custom_grad function) uses,
/// when an annotation chose it.
struct RuleChoice {
  const RuleInstance *instance = nullptr; ///< null: the built-in rule
  SourceRange annotation; ///< the @override or @custom_grad that chose it
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind {
    Number,
    Bool,
    Name,
    Unary,
    Binary,
    Call,
    List,
    Tuple,
    Index,
    Slice,
    For,
    If
  };

  virtual ~Expr();
  Kind getKind() const { return kind; }
  SourceRange getRange() const { return range; }
  SourceLoc getLoc() const { return range.begin; }

  /// Set by Sema.
  ValueType type;

protected:
  Expr(Kind kind, SourceRange range) : kind(kind), range(range) {}

private:
  Kind kind;
  SourceRange range;
};

using ExprPtr = std::unique_ptr<Expr>;

/// `2`, `0.5`, `1e-3`. A literal takes the floating type of the tensor it
/// meets, so Sema gives it a type only from its context.
class NumberExpr : public Expr {
public:
  NumberExpr(SourceRange r, double value, bool isInteger)
      : Expr(Kind::Number, r), value(value), isInteger(isInteger) {}
  double value;
  bool isInteger; ///< written without '.' or exponent
  static bool classof(const Expr *e) { return e->getKind() == Kind::Number; }
};

class BoolExpr : public Expr {
public:
  BoolExpr(SourceRange r, bool value) : Expr(Kind::Bool, r), value(value) {}
  bool value;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Bool; }
};

/// A parameter, a `let` name, or (as an argument) a size name.
class NameExpr : public Expr {
public:
  NameExpr(SourceRange r, std::string name)
      : Expr(Kind::Name, r), name(std::move(name)) {}
  std::string name;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }
};

/// `-x`, lowered to the op `neg`.
class UnaryExpr : public Expr {
public:
  UnaryExpr(SourceRange r, SourceLoc opLoc, ExprPtr operand)
      : Expr(Kind::Unary, r), opLoc(opLoc), operand(std::move(operand)) {}
  SourceLoc opLoc;
  ExprPtr operand;
  RuleChoice rule; ///< Set by Sema.
  static bool classof(const Expr *e) { return e->getKind() == Kind::Unary; }
};

enum class BinaryOp { Add, Sub, Mul, Div, MatMul, Lt, Le, Gt, Ge, Eq, Ne };

/// The op behind a binary operator: `+` is `add`, `@` is `matmul`.
OpKind getBinaryOpKind(BinaryOp op);
llvm::StringRef getBinaryOpSpelling(BinaryOp op);

class BinaryExpr : public Expr {
public:
  BinaryExpr(SourceRange r, BinaryOp op, SourceLoc opLoc, ExprPtr lhs,
             ExprPtr rhs)
      : Expr(Kind::Binary, r), op(op), opLoc(opLoc), lhs(std::move(lhs)),
        rhs(std::move(rhs)) {}
  BinaryOp op;
  SourceLoc opLoc;
  ExprPtr lhs, rhs;
  RuleChoice rule; ///< Set by Sema.
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }
};

/// `name = value` in a call.
struct KeywordArg {
  Ident name;
  ExprPtr value;
};

/// `f(x, axis = 1)`: a built-in op, a function of the file, or a generated
/// `NAME_grad`.
class CallExpr : public Expr {
public:
  CallExpr(SourceRange r, Ident callee)
      : Expr(Kind::Call, r), callee(std::move(callee)) {}
  Ident callee;
  std::vector<ExprPtr> args;
  std::vector<KeywordArg> keywordArgs;

  // Set by Sema: exactly one of `op` and `fn` is set on a checked call.
  const OpInfo *op = nullptr; ///< a built-in op
  const FnDecl *fn = nullptr; ///< a function of the file ...
  bool callsGrad = false;     ///< ... or its generated NAME_grad
  /// For an op: the tensor operands (for a variadic op, the list's
  /// elements are in `args[0]`) and the normalised attributes. Sema leaves
  /// an op call in a canonical form: `args` holds exactly the operands and
  /// `keywordArgs` the attribute arguments, named, in the op's declared
  /// order (a positional `sum(x, 1)` becomes `axis = 1`). Attribute
  /// arguments are constants, not values: their expressions have no type.
  AttrList attrs;
  RuleChoice rule;

  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }
};

/// `[a, b]`: a list of tensors, for `stack`, `concat` and rule results.
class ListExpr : public Expr {
public:
  ListExpr(SourceRange r) : Expr(Kind::List, r) {}
  std::vector<ExprPtr> elements;
  static bool classof(const Expr *e) { return e->getKind() == Kind::List; }
};

/// `(a, b)`: only as the value of a `return`.
class TupleExpr : public Expr {
public:
  TupleExpr(SourceRange r) : Expr(Kind::Tuple, r) {}
  std::vector<ExprPtr> elements;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Tuple; }
};

/// `parts[0]`: a constant index into a list or tuple (negative counts from
/// the end); `xs[2]` or `xs[t]`: the slice of a tensor at an index of its
/// first axis (`take(xs, t, axis = 0)`), where the index is a constant or
/// an i32 scalar expression (`indexExpr`).
class IndexExpr : public Expr {
public:
  IndexExpr(SourceRange r, ExprPtr base, int64_t index, SourceRange indexRange)
      : Expr(Kind::Index, r), base(std::move(base)), index(index),
        indexRange(indexRange) {}
  ExprPtr base;
  int64_t index;
  SourceRange indexRange;
  /// The index when it is not an integer literal; null otherwise.
  ExprPtr indexExpr;
  /// Set by Sema: the base is a tensor (not a list or a tuple).
  bool indexesTensor = false;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Index; }
};

/// One bound of a slice: an integer (negative counts from the end of a
/// known axis) or a size name; `present` is false when it is left out.
struct SliceBound {
  bool present = false;
  int64_t value = 0;
  std::string name; ///< the size name, or empty for an integer
  SourceRange range;
};

/// `lo:hi` on one axis, either bound left out (`:`, `2:`, `:N`).
struct SliceAxis {
  SliceBound lo, hi;
  SourceRange range;
};

/// `x[1:3]`, `x[:, 0:N]`, `x[2:]`: the elements of a tensor between
/// constant or size-name bounds on its first axes, a view of static shape
/// (docs/LanguageReference.md, "Slices"). Axes after the given ones are
/// kept whole.
class SliceExpr : public Expr {
public:
  SliceExpr(SourceRange r, ExprPtr base)
      : Expr(Kind::Slice, r), base(std::move(base)) {}
  ExprPtr base;
  std::vector<SliceAxis> axes;
  /// Set by Sema, per sliced axis: where the slice starts and how many
  /// elements it keeps (the axis's own size when it is kept whole).
  std::vector<int64_t> starts;
  Shape lengths;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Slice; }
};

/// `name = init` in a loop's `carry (...)` clause.
struct LoopCarry {
  Ident name;
  ExprPtr init;
};

class Stmt;

/// `for t in 0..T carry (h = h0) { let ...; value }`: a counted loop. The
/// body sees the enclosing names, the index `t` (an i32 scalar) and the
/// carries; its final value is the new carries, then per-step outputs,
/// which the loop stacks along a new first axis. The loop's value is the
/// final carries, then the stacked outputs (a tuple unless one value).
class ForExpr : public Expr {
public:
  ForExpr(SourceRange r) : Expr(Kind::For, r) {}
  ~ForExpr() override; // in AST.cpp, where Stmt is complete
  Ident index;
  int64_t start = 0;
  SourceRange startRange;
  /// The end of the range (exclusive): an integer or a size name.
  Dim end;
  SourceRange endRange;
  std::vector<LoopCarry> carries;
  std::vector<std::unique_ptr<Stmt>> body;
  ExprPtr value;
  /// Set by Sema: the number of iterations, and the types of the carries
  /// and of one step's outputs.
  Dim trip;
  std::vector<TensorType> carryTypes, outputTypes;
  /// Set by Sema from a `@checkpoint` on the `let` whose value is the
  /// loop: how its reverse pass keeps the carries (docs/Gradients.md).
  enum class Checkpoint { None, Every, Binomial };
  Checkpoint checkpoint = Checkpoint::None;
  /// `every = K` or `snapshots = S`; 0 when not given (then the size is
  /// ceil(sqrt(trip)) when the loop runs).
  int64_t checkpointSize = 0;
  /// A bounded `while c max N carry (...) { v }`, which the parser writes
  /// as `for _ in 0..N carry (...) { if c { v } else { carries } }`: its
  /// index has no name that the source can use, and its body is that `if`
  /// (with IfExpr::whileBody set).
  bool isWhile = false;
  static bool classof(const Expr *e) { return e->getKind() == Kind::For; }
};

/// One branch of an `if`: `let`s, then its value.
struct Branch {
  std::vector<std::unique_ptr<Stmt>> body;
  ExprPtr value;
};

/// `if c { let ...; a } else { let ...; b }`: the value of the branch that
/// the bool scalar `c` selects; only that branch runs. Both branches give
/// the same type. `else if` nests another IfExpr as the else branch's
/// value.
class IfExpr : public Expr {
public:
  IfExpr(SourceRange r) : Expr(Kind::If, r) {}
  ~IfExpr() override; // in AST.cpp, where Stmt is complete
  ExprPtr cond;
  Branch thenBranch, elseBranch;
  /// The `else` keyword, for diagnostics about the else branch.
  SourceLoc elseLoc;
  /// The body of a `while` (ForExpr::isWhile): the then branch is the
  /// source's body, the else branch gives the carries unchanged, and
  /// diagnostics speak of 'while'.
  bool whileBody = false;
  static bool classof(const Expr *e) { return e->getKind() == Kind::If; }
};

//===----------------------------------------------------------------------===//
// Annotations
//===----------------------------------------------------------------------===//

/// One argument of an annotation: `a` in `@grad(a, b)`, `stack = first_only`
/// in `@override(...)`.
struct AnnotationArg {
  std::optional<Ident> key; ///< `stack` in `stack = first_only`
  Ident value;
  SourceRange range;
};

/// `@grad`, `@grad(a, b)`, `@override(op = rule)`, `@custom_grad(rule)`,
/// and whatever other names the parser sees (Sema rejects unknown ones).
struct Annotation {
  Ident name;
  bool hasParens = false;
  std::vector<AnnotationArg> args;
  SourceRange range;
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

class Stmt {
public:
  enum class Kind { Let, Return };
  virtual ~Stmt();
  Kind getKind() const { return kind; }
  SourceRange getRange() const { return range; }
  SourceLoc getLoc() const { return range.begin; }

protected:
  Stmt(Kind kind, SourceRange range) : kind(kind), range(range) {}

private:
  Kind kind;
  SourceRange range;
};

using StmtPtr = std::unique_ptr<Stmt>;

/// `let h = e`, `let h: f32[B, 128] = e`, `let (a, b) = f(x)`.
class LetStmt : public Stmt {
public:
  LetStmt(SourceRange r) : Stmt(Kind::Let, r) {}
  std::vector<Annotation> annotations;
  std::vector<Ident> names; ///< several when destructuring
  bool destructures = false;
  std::optional<TypeExpr> declaredType;
  ExprPtr value;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Let; }
};

/// `return e`, `return (a, b)`, `return [a, b]` (in a rule).
class ReturnStmt : public Stmt {
public:
  ReturnStmt(SourceRange r, ExprPtr value)
      : Stmt(Kind::Return, r), value(std::move(value)) {}
  ExprPtr value;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Return; }
};

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

/// A parameter: typed in a `fn`, untyped in a `rule` or `grad` block.
struct Param {
  Ident name;
  std::optional<TypeExpr> type;
};

/// `grad(dy) { ... }` after a function body.
struct GradBlock {
  std::vector<Param> params; ///< one cotangent per result
  std::vector<StmtPtr> body;
  SourceRange range;
};

class Decl {
public:
  enum class Kind { Fn, Rule };
  virtual ~Decl();
  Kind getKind() const { return kind; }
  SourceRange getRange() const { return range; }

  std::vector<Annotation> annotations;
  Ident name;
  std::vector<Param> params;
  std::vector<StmtPtr> body;

protected:
  Decl(Kind kind, SourceRange range) : kind(kind), range(range) {}

private:
  Kind kind;
  SourceRange range;
};

/// `fn name(p: type, ...) -> type { ... }`, optionally `grad(dy) { ... }`.
class FnDecl : public Decl {
public:
  FnDecl(SourceRange r) : Decl(Kind::Fn, r) {}
  std::vector<TypeExpr> results;
  bool returnsTuple = false; ///< `-> (a, b)`, even with one element
  std::optional<GradBlock> gradBlock;
  SourceRange signatureRange; ///< from `fn` to the result type
  /// `extern fn name(...) -> type from "header.h"`: a C/C++ function the
  /// program calls through the C ABI (docs/Extern.md). It has no body;
  /// `header` is the file name as written, without the quotes.
  bool isExtern = false;
  std::string header;
  SourceRange headerRange; ///< the string, quotes included
  /// Set by the header check: the C function returns `void`, not an `int`
  /// status.
  bool externReturnsVoid = false;

  // Set by Sema.
  bool wantsGrad = false;           ///< has @grad
  std::vector<unsigned> gradParams; ///< indices differentiated
  /// @custom_grad(rule) or an inline grad block: calls of this function
  /// use this rule; its body is never differentiated.
  const RuleInstance *customGrad = nullptr;
  std::vector<TensorType> paramTypes;
  std::vector<TensorType> resultTypes;

  static bool classof(const Decl *d) { return d->getKind() == Kind::Fn; }
};

/// `rule name(in1, ..., out, dout) { ... }`.
class RuleDecl : public Decl {
public:
  RuleDecl(SourceRange r) : Decl(Kind::Rule, r) {}
  static bool classof(const Decl *d) { return d->getKind() == Kind::Rule; }
};

using DeclPtr = std::unique_ptr<Decl>;

/// A gradient rule checked at one use: a `rule` used by an @override or a
/// @custom_grad, or an inline `grad` block. Sema types a copy of the body
/// for the operand and result types at that use (a rule is generic; each
/// use may have other shapes), and IRGen lowers each instance into one IR
/// function that takes the operands, the results and their cotangents and
/// returns one cotangent per operand.
struct RuleInstance {
  std::string name;                    ///< unique in the module: `first_only.1`
  const RuleDecl *rule = nullptr;      ///< null for an inline grad block
  const FnDecl *gradBlockOf = nullptr; ///< the fn of an inline grad block
  SourceRange useRange;                ///< the op or call it serves
  /// One parameter per rule parameter, typed (a list for a list operand).
  std::vector<Ident> paramNames;
  std::vector<ValueType> paramTypes;
  /// The typed copy of the body; returns one cotangent per operand.
  std::vector<StmtPtr> body;
  /// The cotangent types it returns, flattened (a list operand's elements
  /// one by one), in operand order.
  std::vector<TensorType> resultTypes;
};

/// A whole .grad file.
struct Module {
  std::vector<DeclPtr> decls;
  SourceLoc bufferStart;
  /// Made by Sema, in the order of first use.
  std::vector<std::unique_ptr<RuleInstance>> ruleInstances;

  const FnDecl *findFn(llvm::StringRef name) const;
  const RuleDecl *findRule(llvm::StringRef name) const;
};

} // namespace gradc::ast

#endif // GRADC_AST_AST_H
