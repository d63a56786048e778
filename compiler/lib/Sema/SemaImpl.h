//===- SemaImpl.h - The state of one Sema run -------------------*- C++ -*-===//
//
// Private to lib/Sema. One `Sema` object checks one module; its methods are
// spread over the files of this directory by topic:
//
//   Sema.cpp          the driver: declarations, signatures, generated
//                     NAME_grad signatures, the call graph and recursion
//   Annotations.cpp   @grad, @override, @custom_grad and their placement
//   TypeCheck.cpp     bodies, statements, expressions and calls of functions
//   OpCalls.cpp       calls of built-in ops: operands, attributes, literals
//   RuleInstances.cpp rule instantiation and inline `grad` blocks
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_LIB_SEMA_SEMAIMPL_H
#define GRADC_LIB_SEMA_SEMAIMPL_H

#include "gradc/AST/AST.h"
#include "gradc/Basic/Diagnostic.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gradc::sema {

/// What a name in a body stands for.
struct Binding {
  enum Kind { Param, Let };
  Kind kind = Let;
  ast::ValueType type;
  SourceRange range; ///< where it is declared
};

/// The types of a callable function: a `fn` of the file or the NAME_grad
/// that @grad generates for it.
struct Signature {
  const ast::FnDecl *fn = nullptr;
  bool isGrad = false;
  std::string name;
  std::vector<std::string> paramNames;
  std::vector<TensorType> params;
  std::vector<TensorType> results;
  bool returnsTuple = false;
  /// False when the declaration has an error that makes its types
  /// meaningless (a result size name no parameter binds): calls of it get
  /// an unknown type instead of more errors.
  bool valid = true;

  ast::ValueType resultValueType() const;
};

/// One `op = rule` of an @override.
struct OverrideEntry {
  const OpInfo *op = nullptr;
  const ast::RuleDecl *rule = nullptr; ///< null when the rule is unknown
  bool arityOk = false;
  SourceRange opRange;  ///< the op's name
  SourceRange argRange; ///< `op = rule`
  unsigned matches = 0; ///< ops of this kind seen in its scope
};

/// The overrides of one `let` statement or one `fn`. A `let`'s scope has
/// the function's as its parent: the innermost override of an op wins.
struct OverrideScope {
  std::vector<OverrideEntry> entries;
  OverrideScope *parent = nullptr;
  std::string where; ///< "in this statement", "in function 'f'"

  OverrideEntry *find(OpKind kind);
};

/// A node of the call graph: a function's forward computation, or its
/// gradient (what NAME_grad computes, or what differentiating a call of
/// the function needs).
struct CallNode {
  const ast::FnDecl *fn = nullptr;
  bool gradient = false;
  bool operator==(const CallNode &o) const {
    return fn == o.fn && gradient == o.gradient;
  }
  bool operator<(const CallNode &o) const {
    return fn != o.fn ? fn < o.fn : gradient < o.gradient;
  }
};

/// A call of a function found in some body.
struct CallSite {
  CallNode target;
  SourceRange range;
};

/// Where a body's calls go, for the call graph.
struct CallSink {
  /// Calls made by the forward computation (a function's body).
  std::vector<CallSite> *forward = nullptr;
  /// Calls made while computing the gradient (rule instances, grad
  /// blocks, and the gradients of the callees of a differentiated body).
  std::vector<CallSite> *gradient = nullptr;
};

/// The state of the body being checked.
struct BodyScope {
  enum Kind { FnBody, RuleBody, GradBlock };
  Kind kind = FnBody;
  /// "function 'f'", "rule 'r'", "the 'grad' block of 'f'".
  std::string description;
  llvm::StringMap<Binding> names;
  /// `let` names of the body not yet defined, for "used before its
  /// definition".
  llvm::StringMap<SourceRange> laterLets;
  /// Size names that types and shape arguments may use.
  llvm::StringSet<> sizeNames;
  /// The overrides in force; null where overrides cannot apply.
  OverrideScope *overrides = nullptr;
  CallSink calls;
};

/// A cotangent a rule must return: its type and how messages name it.
struct CotangentSlot {
  TensorType type;
  std::string what; ///< "operand 'x' of 'mul'"
};

/// Where a rule is used, for its instantiation.
struct RuleUse {
  std::string target;       ///< "stack", or the function's name
  bool forFunction = false; ///< @custom_grad rather than @override
  std::string count;        ///< "2 operands", "1 parameter"
  SourceRange range;        ///< the op or the @custom_grad argument
};

/// Per-function results of the declaration pass.
struct FnInfo {
  Signature sig;
  std::optional<Signature> gradSig;
  std::unique_ptr<OverrideScope> overrides;
  const ast::RuleDecl *customGradRule = nullptr;
  SourceRange customGradRange;
  SourceRange gradAnnotation;
  std::vector<CallSite> forwardCalls;
  std::vector<CallSite> gradientCalls;
};

class Sema {
public:
  Sema(ast::Module &module, DiagnosticEngine &diags);
  bool run();

  //===--------------------------------------------------------------------===//
  // Reporting (Sema.cpp)
  //===--------------------------------------------------------------------===//

  /// An error or a warning. Notes of an enclosing rule instantiation
  /// ("in rule 'r' used for 'stack' here") follow it.
  InFlightDiagnostic report(SourceLoc loc, diag::ID id);
  /// A note attached to the last error or warning.
  InFlightDiagnostic note(SourceLoc loc, diag::ID id);
  void flushContextNotes();
  /// The text of a range as written: `1.5`, `[N, 784]`.
  std::string sourceText(SourceRange range) const;
  /// "; did you mean 'x'?" or "".
  static std::string didYouMean(llvm::StringRef name,
                                llvm::ArrayRef<std::string> candidates);

  //===--------------------------------------------------------------------===//
  // Declarations (Sema.cpp)
  //===--------------------------------------------------------------------===//

  void collectDecls();
  void checkSignature(ast::FnDecl &fn, FnInfo &info);
  /// Reports a type of too high a rank or too many elements (Types.h);
  /// false if it did.
  bool checkTypeSize(const ast::TypeExpr &type);
  void buildGradSignature(const ast::FnDecl &fn, FnInfo &info);
  void checkGradNameClashes();
  void checkRuleDecl(ast::RuleDecl &rule);
  void checkFn(ast::FnDecl &fn);
  void checkRecursion();
  const Signature *lookupCallee(llvm::StringRef name,
                                const ast::FnDecl *&notGenerated) const;
  std::vector<std::string> calleeNames() const;

  //===--------------------------------------------------------------------===//
  // Annotations (Annotations.cpp)
  //===--------------------------------------------------------------------===//

  void checkFnAnnotations(ast::FnDecl &fn, FnInfo &info);
  void checkGradAnnotation(const ast::Annotation &a, ast::FnDecl &fn);
  void checkSurrogateAnnotation(const ast::Annotation &a);
  void checkCustomGradAnnotation(const ast::Annotation &a, ast::FnDecl &fn,
                                 FnInfo &info);
  void parseOverride(const ast::Annotation &a, OverrideScope &scope);
  /// Rejects the annotations of a `let` that cannot carry them, and parses
  /// its @override into `scope` when `allowOverride`.
  void checkCheckpointAnnotation(const ast::Annotation &a,
                                 const ast::LetStmt &let);
  void checkLetAnnotations(const ast::LetStmt &let, OverrideScope &scope,
                           const BodyScope &body);
  void rejectAnnotation(const ast::Annotation &a, llvm::StringRef place);
  void warnUnusedOverrides(const OverrideScope &scope);
  const ast::RuleDecl *lookupRule(const ast::Ident &name);
  /// Checks that `rule` has `expected` parameters; `target` and `params`
  /// describe what it is used for.
  bool checkRuleArity(const ast::RuleDecl &rule, SourceRange use,
                      const std::string &target, size_t expected,
                      const std::string &params);

  //===--------------------------------------------------------------------===//
  // Bodies and expressions (TypeCheck.cpp)
  //===--------------------------------------------------------------------===//

  /// Checks the statements of a body and returns its `return` (or null).
  ast::ReturnStmt *checkBody(std::vector<ast::StmtPtr> &body, BodyScope &scope,
                             SourceLoc declLoc);
  void checkLet(ast::LetStmt &let, BodyScope &scope);
  void bindLetName(const ast::Ident &name, const ast::ValueType &type,
                   BodyScope &scope);
  void bindParam(const ast::Ident &name, const ast::ValueType &type,
                 BodyScope &scope);
  ast::ValueType checkExpr(ast::Expr *expr, BodyScope &scope,
                           std::optional<DType> hint = std::nullopt);
  ast::ValueType checkExprKind(ast::Expr *expr, BodyScope &scope,
                               std::optional<DType> hint);
  /// Checks the value of a `return`: a tuple's elements meet `hints` one
  /// by one.
  ast::ValueType checkReturnValue(ast::Expr *value, BodyScope &scope,
                                  llvm::ArrayRef<DType> hints);
  ast::ValueType checkNumber(ast::NumberExpr &num, std::optional<DType> hint);
  ast::ValueType checkName(ast::NameExpr &name, BodyScope &scope);
  ast::ValueType checkList(ast::ListExpr &list, BodyScope &scope,
                           std::optional<DType> hint);
  ast::ValueType checkIndex(ast::IndexExpr &index, BodyScope &scope);
  ast::ValueType checkSlice(ast::SliceExpr &slice, BodyScope &scope);
  bool resolveSliceBound(const ast::SliceBound &bound, const Dim &axisDim,
                         const TensorType &base, size_t axis,
                         const BodyScope &scope, Dim &out);
  ast::ValueType checkTensorIndex(ast::IndexExpr &index, const TensorType &base,
                                  const ast::ValueType *indexType);
  ast::ValueType checkFor(ast::ForExpr &loop, BodyScope &scope);
  ast::ValueType checkIf(ast::IfExpr &e, BodyScope &scope,
                         std::optional<DType> hint);
  ast::ValueType checkBranch(ast::Branch &branch, BodyScope &scope,
                             std::optional<DType> hint, bool whileBody = false);
  bool bindLoopName(const ast::Ident &name, const TensorType &type,
                    BodyScope &body);
  ast::ValueType checkCall(ast::CallExpr &call, BodyScope &scope,
                           std::optional<DType> hint);
  ast::ValueType checkFnCall(ast::CallExpr &call, const Signature &sig,
                             BodyScope &scope);
  /// Binds the callee's size names to the argument shapes; false after
  /// reporting a mismatch.
  bool unifyArguments(const ast::CallExpr &call, const Signature &sig,
                      llvm::ArrayRef<ast::ValueType> argTypes,
                      std::map<std::string, Dim> &sizes);
  std::optional<TensorType> resolveTypeExpr(const ast::TypeExpr &type,
                                            const BodyScope &scope);

  //===--------------------------------------------------------------------===//
  // Ops (OpCalls.cpp)
  //===--------------------------------------------------------------------===//

  ast::ValueType checkOpCall(ast::CallExpr &call, const OpInfo &op,
                             BodyScope &scope, std::optional<DType> hint);
  ast::ValueType checkUnary(ast::UnaryExpr &unary, BodyScope &scope,
                            std::optional<DType> hint);
  ast::ValueType checkBinary(ast::BinaryExpr &binary, BodyScope &scope,
                             std::optional<DType> hint);
  /// Checks expressions that must share one element type (the operands of
  /// `x + 2.0`, the elements of a list), giving each constant expression
  /// the element type of the tensors it meets. `shared[i]` false leaves
  /// expression i out of the group (the condition of `select`); empty
  /// means all share. `resultFollows`: the result has the group's element
  /// type, so `hint`, the type the result must have, reaches the group.
  void checkGroup(llvm::ArrayRef<ast::Expr *> exprs,
                  llvm::ArrayRef<bool> shared, bool resultFollows,
                  BodyScope &scope, std::optional<DType> hint,
                  llvm::SmallVectorImpl<ast::ValueType> &types);
  void checkOperandExprs(const OpInfo &op, llvm::ArrayRef<ast::Expr *> exprs,
                         BodyScope &scope, std::optional<DType> hint,
                         llvm::SmallVectorImpl<ast::ValueType> &types);
  void requireTensors(const OpInfo &op, llvm::ArrayRef<ast::Expr *> exprs,
                      llvm::MutableArrayRef<ast::ValueType> types);
  /// Evaluates a constant argument of an op into `attrs`.
  bool evalAttr(const OpInfo &op, const AttrInfo &attr, const ast::Expr *expr,
                const BodyScope &scope, AttrList &attrs);
  /// Infers the op's result types, reports a type error at `loc`, and
  /// applies an @override in force.
  ast::ValueType finishOp(const OpInfo &op,
                          llvm::ArrayRef<ast::ValueType> operandTypes,
                          AttrList &attrs, SourceLoc loc, SourceRange range,
                          ast::RuleChoice &rule, BodyScope &scope);

  //===--------------------------------------------------------------------===//
  // Rules (RuleInstances.cpp)
  //===--------------------------------------------------------------------===//

  /// Instantiates the rule of `entry` for one op and records the choice.
  void applyOverride(const OverrideEntry &entry, const OpInfo &op,
                     llvm::ArrayRef<ast::ValueType> operandTypes,
                     const ast::ValueType &result, SourceRange range,
                     ast::RuleChoice &choice, BodyScope &scope);
  const ast::RuleInstance *
  instantiateRule(const ast::RuleDecl &rule,
                  const std::vector<ast::ValueType> &paramTypes,
                  llvm::ArrayRef<CotangentSlot> expected, const RuleUse &use);
  void checkCotangents(const ast::ReturnStmt *ret,
                       llvm::ArrayRef<CotangentSlot> expected,
                       const ast::RuleDecl *rule, const RuleUse *use,
                       const ast::FnDecl *gradBlockOf);
  void instantiateCustomGrad(ast::FnDecl &fn, FnInfo &info);
  void checkGradBlock(ast::FnDecl &fn, FnInfo &info, BodyScope &fnScope);
  /// Adds the calls of an instance to the gradient calls of its user.
  void addInstanceCalls(const ast::RuleInstance *instance,
                        std::vector<CallSite> *sink);

  //===--------------------------------------------------------------------===//
  // State
  //===--------------------------------------------------------------------===//

  ast::Module &module;
  DiagnosticEngine &diags;
  const SourceManager &sm;

  /// The first declaration of each name, functions and rules alike.
  llvm::StringMap<ast::FnDecl *> fns;
  llvm::StringMap<ast::RuleDecl *> rules;
  /// Per function, in declaration order (`fnOrder`).
  llvm::DenseMap<const ast::FnDecl *, std::unique_ptr<FnInfo>> fnInfos;
  std::vector<ast::FnDecl *> fnOrder;
  /// Rules whose body has an error found without types: never instantiated.
  llvm::DenseSet<const ast::RuleDecl *> brokenRules;

  /// Instances by rule and parameter types; null records a failed one.
  std::map<std::pair<const ast::RuleDecl *, std::string>,
           const ast::RuleInstance *>
      instanceCache;
  llvm::DenseMap<const ast::RuleDecl *, unsigned> instanceCounts;
  llvm::DenseMap<const ast::RuleInstance *, std::vector<CallSite>>
      instanceCalls;

  /// Notes that follow every error inside a rule instantiation.
  struct ContextNote {
    SourceLoc loc;
    diag::ID id;
    std::string rule, target;
    SourceRange range;
  };
  std::vector<ContextNote> context;
  bool contextPending = false;
  unsigned errors = 0;
};

/// "1 operand", "2 operands".
std::string plural(size_t n, llvm::StringRef noun);
/// "'name'".
std::string quoted(llvm::StringRef name);

} // namespace gradc::sema

#endif // GRADC_LIB_SEMA_SEMAIMPL_H
