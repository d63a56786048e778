//===- IR.h - The SSA tensor IR ---------------------------------*- C++ -*-===//
//
// A module is a list of functions; a function is a straight-line list of
// ops over typed SSA values (the language has no control flow, so there is
// one block and dominance is textual order). Every op is drawn from the op
// table (Ops.def); lists and tuples of the language are already resolved
// into separate values: `stack([a, b])` has two operands, `unstack` and a
// call of a function with several results have several results.
//
// Values keep the user's names where they exist, so that printed IR and
// generated code read like the source. Each op keeps its source location
// and, when an annotation changed it, the gradient rule it will use.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_IR_H
#define GRADC_IR_IR_H

#include "gradc/Basic/SourceManager.h"
#include "gradc/Ops/Attr.h"
#include "gradc/Ops/OpTable.h"
#include "gradc/Ops/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gradc::ir {

class Op;
class Function;

/// An SSA value: a function parameter or one result of an op.
class Value {
public:
  Value(TensorType type, std::string name, Op *def, unsigned resultIndex)
      : type(std::move(type)), name(std::move(name)), def(def),
        resultIndex(resultIndex) {}

  const TensorType &getType() const { return type; }
  /// Changes the type in place; the caller keeps the function well typed
  /// (`gradc check` promotes a whole module from f32 to f64 this way).
  void setType(TensorType t) { type = std::move(t); }
  /// The user's name (`h`, `d_x`), or "" for a temporary. Not unique: the
  /// printer makes printed names unique.
  llvm::StringRef getName() const { return name; }
  void setName(llvm::StringRef n) { name = n.str(); }
  /// The op that defines this value; null for a parameter.
  Op *getDefiningOp() const { return def; }
  bool isParam() const { return def == nullptr; }
  unsigned getResultIndex() const { return resultIndex; }

private:
  TensorType type;
  std::string name;
  Op *def;
  unsigned resultIndex; // for a parameter: its position
};

/// The gradient rule an annotation chose for an op. Absent (`isSet()`
/// false) means the op's built-in rule from lib/AD/Rules.
struct GradRuleAttr {
  /// The IR function that implements the rule at this use: it takes the
  /// op's operands, then its results, then one cotangent per result, and
  /// returns one cotangent per operand.
  std::string function;
  /// The rule's name in the source (`first_only`).
  std::string ruleName;
  /// How it was chosen: "override" or "custom_grad".
  std::string via;
  /// The annotation that chose it.
  SourceLoc annotationLoc;
  /// The rule is a function's inline grad block (`via` is "custom_grad",
  /// `ruleName` "grad block of 'f'").
  bool gradBlock = false;

  bool isSet() const { return !function.empty(); }
};

/// Why an op exists, for ops that differentiation made: set by lib/AD
/// together with the note, and read by `--emit=dot` and the loop IR's
/// origins instead of the note's text.
enum class Provenance : uint8_t {
  Source,     ///< not made by differentiation (forward code)
  Seed,       ///< seed, cotangent parameters, zero gradients
  BuiltIn,    ///< an op's built-in gradient rule (lib/AD/Rules)
  Override,   ///< a rule chosen by @override
  CustomGrad, ///< a rule chosen by @custom_grad
  GradBlock,  ///< a function's inline grad block
};

/// "built-in", "override", "custom_grad", "grad block", "seed", "source".
llvm::StringRef provenanceName(Provenance p);

class Op {
public:
  Op(OpKind kind, SourceLoc loc) : kind(kind), loc(loc) {}

  OpKind getKind() const { return kind; }
  const OpInfo &getInfo() const { return getOpInfo(kind); }
  llvm::StringRef getName() const { return getOpName(kind); }

  llvm::ArrayRef<Value *> getOperands() const { return operands; }
  Value *getOperand(unsigned i) const { return operands[i]; }
  unsigned getNumOperands() const { return operands.size(); }
  void setOperand(unsigned i, Value *v) { operands[i] = v; }
  void addOperand(Value *v) { operands.push_back(v); }

  llvm::ArrayRef<Value *> getResults() const { return results; }
  Value *getResult(unsigned i = 0) const { return results[i]; }
  unsigned getNumResults() const { return results.size(); }

  AttrList &getAttrs() { return attrs; }
  const AttrList &getAttrs() const { return attrs; }

  /// The callee of a `call` or `extern_call` op.
  llvm::StringRef getCallee() const { return attrs.getString("callee"); }
  /// The function an op runs, if any: the callee of a `call`, the body of
  /// a `for`; "" for other ops.
  llvm::StringRef getCalledFunction() const {
    if (kind == OpKind::Call)
      return attrs.getString("callee");
    if (kind == OpKind::For)
      return attrs.getString("body");
    return "";
  }
  /// Every function the op runs: getCalledFunction()'s, or both branches
  /// of an `if`.
  llvm::SmallVector<llvm::StringRef, 2> getCalledFunctions() const {
    if (kind == OpKind::If)
      return {attrs.getString("then"), attrs.getString("else")};
    llvm::StringRef f = getCalledFunction();
    if (f.empty())
      return {};
    return {f};
  }

  SourceLoc getLoc() const { return loc; }
  void setLoc(SourceLoc l) { loc = l; }

  GradRuleAttr &getGradRule() { return gradRule; }
  const GradRuleAttr &getGradRule() const { return gradRule; }

  /// For ops made by differentiation: why they exist ("gradient of 'stack'
  /// at f.grad:7:13 by rule 'first_only' (@override at f.grad:6:5)"). The
  /// printer shows it as a comment above each group of ops, and the C++
  /// emitter keeps it.
  const std::string &getNote() const { return note; }
  void setNote(std::string n) { note = std::move(n); }

  /// Which gradient mechanism made this op; Source for forward code.
  Provenance getProvenance() const { return provenance; }
  void setProvenance(Provenance p) { provenance = p; }

private:
  friend class Function;
  OpKind kind;
  SourceLoc loc;
  llvm::SmallVector<Value *, 3> operands;
  llvm::SmallVector<Value *, 1> results;
  AttrList attrs;
  GradRuleAttr gradRule;
  std::string note;
  Provenance provenance = Provenance::Source;
};

class Function {
public:
  explicit Function(std::string name) : name(std::move(name)) {}
  Function(const Function &) = delete;
  Function &operator=(const Function &) = delete;

  /// Fixed at creation: the module indexes its functions by name.
  llvm::StringRef getName() const { return name; }

  Value *addParam(TensorType type, llvm::StringRef name);
  llvm::ArrayRef<Value *> getParams() const { return params; }
  Value *getParam(unsigned i) const { return params[i]; }

  /// The returned values, in order.
  llvm::ArrayRef<Value *> getReturns() const { return returns; }
  void setReturns(llvm::ArrayRef<Value *> values) {
    returns.assign(values.begin(), values.end());
  }
  void setReturn(unsigned i, Value *v) { returns[i] = v; }

  /// Ops in execution order.
  const std::vector<std::unique_ptr<Op>> &getOps() const { return ops; }

  /// Creates an op with results of the given types at `pos` (default: the
  /// end). Results take the names in `resultNames` where given.
  Op *createOp(OpKind kind, llvm::ArrayRef<Value *> operands,
               llvm::ArrayRef<TensorType> resultTypes, AttrList attrs,
               SourceLoc loc, llvm::ArrayRef<std::string> resultNames = {},
               size_t pos = ~size_t(0));

  /// Index of `op` in getOps().
  size_t indexOf(const Op *op) const;
  /// Removes ops for which `dead` is true. Their results must be unused.
  void eraseOpsIf(llvm::function_ref<bool(const Op &)> dead);
  /// Replaces every use of `from` (operands and returns) by `to`.
  void replaceAllUses(Value *from, Value *to);
  /// Appends an op made elsewhere (one taken with takeOps()).
  Op *appendOp(std::unique_ptr<Op> op) {
    ops.push_back(std::move(op));
    return ops.back().get();
  }
  /// Replaces the op list wholesale (passes that rebuild the order).
  std::vector<std::unique_ptr<Op>> takeOps() { return std::move(ops); }
  void setOps(std::vector<std::unique_ptr<Op>> newOps) {
    ops = std::move(newOps);
  }

  /// The size names that the parameters bind, in first-seen order.
  std::vector<std::string> getSizeNames() const;

  /// Where the function came from: its `fn` in the source, or the @grad
  /// that generated it.
  SourceLoc getLoc() const { return loc; }
  void setLoc(SourceLoc l) { loc = l; }

  /// What the function is: a user function, a generated NAME_grad, the
  /// two halves of a gradient's split form (NAME_fwd returns the results
  /// and the residuals, NAME_bwd takes them; docs/ABI.md), a generated
  /// NAME_value_and_grad (the results, then the gradients), or the instance
  /// of a rule at one use (internal; inlined after differentiation and
  /// never emitted on its own), or the body of a `for` op (internal: the
  /// loop calls it once per iteration; differentiation adds its VJP, its
  /// tape form and its reverse body beside it, docs/IR.md).
  enum class Role {
    User,
    Grad,
    Forward,
    Backward,
    ValueAndGrad,
    RuleInstance,
    LoopBody
  };
  Role getRole() const { return role; }
  void setRole(Role r) { role = r; }

  /// Set on a function marked @grad: differentiation adds `gradName`,
  /// the gradient with respect to the parameters at `wrt`. Printed in the
  /// textual IR, so `gradc-opt --passes=differentiate` works on text.
  struct GradSpec {
    std::string gradName;
    std::vector<unsigned> wrt;
    SourceLoc loc; ///< the @grad annotation
    /// The split form's functions, once the `split` pass made them
    /// (empty before).
    std::string fwdName, bwdName;
    /// NAME_value_and_grad, once the `value-and-grad` pass made it.
    std::string valueAndGradName;
  };
  const std::optional<GradSpec> &getGradSpec() const { return gradSpec; }
  void setGradSpec(GradSpec spec) { gradSpec = std::move(spec); }

  /// The signature of the gradient that the GradSpec asks for (SPEC.md):
  /// this function's parameter types, then one cotangent per result unless
  /// it returns one floating-point scalar (whose seed is 1); it returns the
  /// types of the `wrt` parameters. Lets a call of a gradient that is not
  /// generated yet be typed before differentiation.
  void getGradSignature(llvm::SmallVectorImpl<TensorType> &paramTypes,
                        llvm::SmallVectorImpl<TensorType> &resultTypes) const {
    for (const Value *p : params)
      paramTypes.push_back(p->getType());
    bool seedIsOne = returns.size() == 1 && returns[0]->getType().isScalar() &&
                     isFloat(returns[0]->getType().dtype);
    if (!seedIsOne)
      for (const Value *r : returns)
        paramTypes.push_back(r->getType());
    if (gradSpec)
      for (unsigned i : gradSpec->wrt)
        if (i < params.size())
          resultTypes.push_back(params[i]->getType());
  }

  /// Set on a @custom_grad function (or one with a grad block): the rule
  /// that is its gradient. Calls of the function carry the same rule as
  /// their GradRuleAttr; differentiation reads this copy for the
  /// function's own NAME_grad, which then applies the rule to the whole
  /// body instead of differentiating it.
  const GradRuleAttr &getCustomGrad() const { return customGrad; }
  void setCustomGrad(GradRuleAttr rule) { customGrad = std::move(rule); }

private:
  std::string name;
  std::vector<Value *> params;
  std::vector<Value *> returns;
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<std::unique_ptr<Value>> values; // owns params and results
  SourceLoc loc;
  Role role = Role::User;
  std::optional<GradSpec> gradSpec;
  GradRuleAttr customGrad;
};

/// An `extern fn` of the source: a C or C++ function of the user's that
/// `extern_call` ops call through the C ABI of docs/Extern.md (the size
/// names as int64_t, then the inputs, then one output pointer per result).
/// It has no body in the IR: differentiation uses the rule its calls carry.
struct ExternDecl {
  /// The C symbol, which is also its name in the source.
  std::string name;
  /// The header that declares it, as written after `from`.
  std::string header;
  std::vector<std::string> paramNames;
  std::vector<TensorType> paramTypes;
  std::vector<TensorType> resultTypes;
  /// The C function returns an `int` status (docs/ABI.md's codes; non-zero
  /// is an error) rather than `void`. The header check decides.
  bool returnsStatus = true;
  /// Declared @surrogate without a rule: no gradient flows through it.
  bool noGradient = false;
  SourceLoc loc;

  /// The size names its parameters bind, in first-seen order.
  std::vector<std::string> getSizeNames() const;
};

class Module {
public:
  /// The extern functions, in source order.
  std::vector<ExternDecl> externs;
  const ExternDecl *lookupExtern(llvm::StringRef name) const;

  Function *addFunction(std::string name);
  Function *lookup(llvm::StringRef name) const;
  const std::vector<std::unique_ptr<Function>> &getFunctions() const {
    return functions;
  }
  void eraseFunction(Function *f);
  /// The file the module came from, for "Generated by gradc from FILE".
  std::string sourceName;

private:
  std::vector<std::unique_ptr<Function>> functions;
  /// Name -> the first function of that name, so that lookup (one per
  /// call op in inlining, verification and emission) is not a scan.
  llvm::StringMap<Function *> index;
};

} // namespace gradc::ir

#endif // GRADC_IR_IR_H
