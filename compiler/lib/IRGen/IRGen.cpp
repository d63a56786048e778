//===- IRGen.cpp - Lowering the checked AST to IR -------------------------===//
//
// Walks a module that Sema accepted and builds the SSA IR:
//
//  - one IR function per `fn` (role User), parameters typed from Sema and
//    named as the user named them, `let` names kept as value names;
//  - one IR function per rule instance (role RuleInstance), named after the
//    instance (`first_only.1`; it cannot clash with a user function, whose
//    name has no '.'), taking (operands, results, cotangents) as every
//    rule function does, a list flattened into one parameter per element;
//  - lists and tuples resolved into separate values: every expression
//    lowers to a list of values (one for a tensor), so `stack([a, b])` gets
//    two operands, `unstack` and calls with several results give several
//    values, and `parts[0]` just picks one;
//  - a `for` loop's body becomes a function of its own (role LoopBody,
//    named `f.for0`, `f.for1`, ...) taking the index, the carries and every
//    enclosing value it uses (captured as it is met), and the loop a `for`
//    op that runs it (docs/IR.md); `xs[t]` on a tensor is `take(xs, t)`;
//  - an `extern fn` becomes an ExternDecl of the module and its calls
//    `extern_call` ops;
//  - calls of user functions (and of generated `NAME_grad`) stay `call`
//    ops: the IR reads like the source, and differentiation inlines a
//    callee where it needs its body;
//  - the gradient rule that an annotation chose is put on the op as a
//    GradRuleAttr (on each call of a @custom_grad function, and on the
//    function itself as its custom grad); `@grad` becomes the function's
//    GradSpec.
//
// Every op is created with ir::Builder, which types it with the op table;
// Sema typed the same expression with the same table, so a mismatch is a
// bug in gradc and is asserted on.
//
//===----------------------------------------------------------------------===//

#include "gradc/IRGen/IRGen.h"

#include "gradc/IR/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cassert>

using namespace gradc;
using namespace gradc::ast;

namespace {

/// What an expression or a name stands for: one value for a tensor, one
/// per element for a list or a tuple.
using Values = llvm::SmallVector<ir::Value *, 2>;

/// The types Sema gave an expression, one per value it lowers to.
llvm::SmallVector<TensorType, 2> flattenType(const ValueType &type) {
  llvm::SmallVector<TensorType, 2> types;
  if (type.kind == ValueType::Tensor)
    types.push_back(type.tensor);
  else if (type.kind == ValueType::List || type.kind == ValueType::Tuple)
    types.append(type.elements.begin(), type.elements.end());
  return types;
}

/// Whether a `let` may (re)name `v`: a temporary takes the user's name,
/// and so does a list element with a derived name (`parts.0`) when it is
/// bound alone (`let p = parts[0]`); parameters and values the user named
/// keep their names, and a list literal of named values renames nothing.
bool mayRename(const ir::Value *v, bool bindsAlone) {
  if (v->isParam())
    return false;
  return v->getName().empty() || (bindsAlone && v->getName().contains('.'));
}

/// The annotation `name` of a declaration, if present.
const Annotation *findAnnotation(const Decl &decl, llvm::StringRef name) {
  for (const Annotation &a : decl.annotations)
    if (a.name.name == name)
      return &a;
  return nullptr;
}

/// Where a function's gradient rule was chosen: its @custom_grad
/// annotation, or its inline grad block.
SourceLoc customGradLoc(const FnDecl &fn) {
  if (const Annotation *a = findAnnotation(fn, "custom_grad"))
    return a->range.begin;
  if (fn.gradBlock)
    return fn.gradBlock->range.begin;
  return SourceLoc();
}

/// The whole-module state: which IR function implements which rule
/// instance.
class ModuleLowering {
public:
  ModuleLowering(const ast::Module &module, const SourceManager &sm)
      : astModule(module), sm(sm), irModule(std::make_unique<ir::Module>()) {}

  std::unique_ptr<ir::Module> run();

  /// Fills `attr` for a use of `inst` chosen by the annotation at
  /// `annotation`; `via` is "override" or "custom_grad".
  void makeRuleAttr(ir::GradRuleAttr &attr, const RuleInstance *inst,
                    SourceLoc annotation, llvm::StringRef via) const {
    attr.function = getRuleFunctionName(inst).str();
    if (inst->rule)
      attr.ruleName = inst->rule->name.name;
    else if (inst->gradBlockOf)
      attr.ruleName = "grad block of '" + inst->gradBlockOf->name.name + "'";
    else
      attr.ruleName = inst->name;
    attr.via = via.str();
    attr.gradBlock = !inst->rule && inst->gradBlockOf;
    attr.annotationLoc = annotation;
  }

  /// A fresh name for the body of a loop in function `fn`: `fn.for0`, ...
  std::string newLoopBodyName(llvm::StringRef fn) {
    std::string name;
    do
      name = fn.str() + ".for" + std::to_string(loopCounters[fn]++);
    while (irModule->lookup(name));
    return name;
  }
  /// A fresh stem for the branches of an `if` in function `fn`: `fn.if0`
  /// (whose branches are `fn.if0.then` and `fn.if0.else`), ...
  std::string newBranchName(llvm::StringRef fn) {
    std::string name;
    do
      name = fn.str() + ".if" + std::to_string(branchCounters[fn]++);
    while (irModule->lookup(name + ".then") ||
           irModule->lookup(name + ".else"));
    return name;
  }
  ir::Module &getIRModule() { return *irModule; }

  /// The IR function name of a rule instance.
  llvm::StringRef getRuleFunctionName(const RuleInstance *inst) const {
    auto it = ruleFunctionNames.find(inst);
    assert(it != ruleFunctionNames.end() && "rule instance not in the module");
    return it->second;
  }

private:
  void nameRuleInstances();
  void lowerFn(const FnDecl &fn);
  void lowerExtern(const FnDecl &fn);
  void lowerRuleInstance(const RuleInstance &inst);
  void addResultParams(ir::Function &irFn, const FnDecl &fn);

  const ast::Module &astModule;
  const SourceManager &sm;
  std::unique_ptr<ir::Module> irModule;
  llvm::DenseMap<const RuleInstance *, std::string> ruleFunctionNames;
  llvm::StringMap<unsigned> loopCounters;
  llvm::StringMap<unsigned> branchCounters;
};

/// Lowers the statements of one function (or rule instance) body.
class BodyLowering {
public:
  BodyLowering(ModuleLowering &module, ir::Function &fn,
               BodyLowering *parent = nullptr)
      : module(module), builder(fn), parent(parent) {}

  /// Binds a parameter name to its IR parameter(s).
  void bind(llvm::StringRef name, Values values) {
    env[name] = std::move(values);
  }

  /// Lowers `let`s and the final `return`; returns the returned values,
  /// flattened.
  Values lowerBody(llvm::ArrayRef<StmtPtr> body);

private:
  void lowerLet(const LetStmt &let);
  Values lowerExpr(const Expr &e);
  Values lowerNumber(const NumberExpr &e);
  Values lowerName(const NameExpr &e);
  Values lowerUnary(const UnaryExpr &e);
  Values lowerBinary(const BinaryExpr &e);
  Values lowerCall(const CallExpr &e);
  Values lowerOpCall(const CallExpr &e);
  Values lowerFnCall(const CallExpr &e);
  Values lowerIndex(const IndexExpr &e);
  Values lowerSlice(const SliceExpr &e);
  Values lowerFor(const ForExpr &e);
  Values lowerIf(const IfExpr &e);
  /// Lowers one branch of an `if` into the function that `body` builds.
  static Values lowerBranch(const Branch &branch, BodyLowering &body);
  /// The values of `name` in this body; in a loop body, a name of an
  /// enclosing body becomes a new parameter (a capture) on first use.
  const Values *lookup(llvm::StringRef name);
  Values lowerElements(llvm::ArrayRef<ExprPtr> elements);

  /// Sets the GradRuleAttr of `op` from an annotation's choice.
  void setRule(ir::Op *op, const RuleChoice &choice, llvm::StringRef via);
  void setRule(ir::Op *op, const RuleInstance *inst, SourceLoc annotation,
               llvm::StringRef via);

  /// Asserts that Builder typed `values` as Sema typed `e`.
  void checkTypes(const Expr &e, llvm::ArrayRef<ir::Value *> values) const;

  ModuleLowering &module;
  ir::Builder builder;
  llvm::StringMap<Values> env;
  /// For a loop body: the enclosing body, and the enclosing values that
  /// this body's parameters after the index and carries stand for.
  BodyLowering *parent;
  Values captured;
  /// The names whose values `captured` holds, in order of capture.
  std::vector<std::string> capturedNames;
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

Values BodyLowering::lowerBody(llvm::ArrayRef<StmtPtr> body) {
  for (const StmtPtr &stmt : body) {
    if (const auto *let = llvm::dyn_cast<LetStmt>(stmt.get())) {
      lowerLet(*let);
      continue;
    }
    // Sema guarantees one `return`, last.
    const auto *ret = llvm::cast<ReturnStmt>(stmt.get());
    return lowerExpr(*ret->value);
  }
  assert(false && "a checked body ends with a return");
  return {};
}

/// `let h = e` names e's value `h` (a list's elements `h.0`, `h.1`, ...);
/// `let (a, b) = e` names e's values `a` and `b`. A `let` that only
/// renames (`let y = x`) creates no op: `y` stands for x's value.
void BodyLowering::lowerLet(const LetStmt &let) {
  Values values = lowerExpr(*let.value);
  if (let.destructures) {
    assert(values.size() == let.names.size() &&
           "Sema checked the destructuring count");
    for (size_t i = 0; i < let.names.size() && i < values.size(); ++i) {
      if (mayRename(values[i], /*bindsAlone=*/true))
        values[i]->setName(let.names[i].name);
      env[let.names[i].name] = {values[i]};
    }
    return;
  }
  assert(let.names.size() == 1 && "a plain let binds one name");
  const std::string &name = let.names.front().name;
  bool isList = let.value->type.kind == ValueType::List ||
                let.value->type.kind == ValueType::Tuple || values.size() != 1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!mayRename(values[i], /*bindsAlone=*/!isList))
      continue;
    values[i]->setName(isList ? name + "." + std::to_string(i) : name);
  }
  env[name] = std::move(values);
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Values BodyLowering::lowerExpr(const Expr &e) {
  switch (e.getKind()) {
  case Expr::Kind::Number:
    return lowerNumber(llvm::cast<NumberExpr>(e));
  case Expr::Kind::Bool:
    builder.setLoc(e.getLoc());
    return {builder.scalar(DType::Bool, llvm::cast<BoolExpr>(e).value)};
  case Expr::Kind::Name:
    return lowerName(llvm::cast<NameExpr>(e));
  case Expr::Kind::Unary:
    return lowerUnary(llvm::cast<UnaryExpr>(e));
  case Expr::Kind::Binary:
    return lowerBinary(llvm::cast<BinaryExpr>(e));
  case Expr::Kind::Call:
    return lowerCall(llvm::cast<CallExpr>(e));
  case Expr::Kind::List:
    return lowerElements(llvm::cast<ListExpr>(e).elements);
  case Expr::Kind::Tuple:
    return lowerElements(llvm::cast<TupleExpr>(e).elements);
  case Expr::Kind::Index:
    return lowerIndex(llvm::cast<IndexExpr>(e));
  case Expr::Kind::Slice:
    return lowerSlice(llvm::cast<SliceExpr>(e));
  case Expr::Kind::For:
    return lowerFor(llvm::cast<ForExpr>(e));
  case Expr::Kind::If:
    return lowerIf(llvm::cast<IfExpr>(e));
  }
  llvm_unreachable("unknown expression kind");
}

/// A number literal is a scalar constant of the element type Sema gave it
/// (the floating type of the tensor it meets); broadcasting does the rest,
/// so `2.0 * x` is `mul(constant 2 : f32, x)`.
Values BodyLowering::lowerNumber(const NumberExpr &e) {
  DType dtype = e.type.isTensor() ? e.type.tensor.dtype : DType::F32;
  builder.setLoc(e.getLoc());
  return {builder.scalar(dtype, e.value)};
}

Values BodyLowering::lowerName(const NameExpr &e) {
  const Values *values = lookup(e.name);
  assert(values && "Sema resolved every name");
  if (!values)
    return {};
  return *values;
}

const Values *BodyLowering::lookup(llvm::StringRef name) {
  auto it = env.find(name);
  if (it != env.end())
    return &it->second;
  const Values *outer = parent ? parent->lookup(name) : nullptr;
  if (!outer)
    return nullptr;
  Values params;
  for (ir::Value *v : *outer) {
    params.push_back(
        builder.getFunction().addParam(v->getType(), v->getName()));
    captured.push_back(v);
  }
  capturedNames.push_back(name.str());
  return &(env[name] = std::move(params));
}

/// `-e` is `neg(e)`; `-2.0` is the constant -2 (unless an @override chose
/// a rule for that `neg`, which must then exist as an op).
Values BodyLowering::lowerUnary(const UnaryExpr &e) {
  if (const auto *number = llvm::dyn_cast<NumberExpr>(e.operand.get());
      number && !e.rule.instance) {
    DType dtype = e.type.isTensor() ? e.type.tensor.dtype : DType::F32;
    builder.setLoc(e.opLoc);
    return {builder.scalar(dtype, -number->value)};
  }
  Values operand = lowerExpr(*e.operand);
  assert(operand.size() == 1 && "Sema checked that '-' gets a tensor");
  builder.setLoc(e.opLoc);
  ir::Value *result = builder.neg(operand.front());
  setRule(result->getDefiningOp(), e.rule, "override");
  checkTypes(e, {result});
  return {result};
}

Values BodyLowering::lowerBinary(const BinaryExpr &e) {
  Values lhs = lowerExpr(*e.lhs);
  Values rhs = lowerExpr(*e.rhs);
  assert(lhs.size() == 1 && rhs.size() == 1 &&
         "Sema checked that operators get tensors");
  builder.setLoc(e.opLoc);
  ir::Value *result =
      builder.binary(getBinaryOpKind(e.op), lhs.front(), rhs.front());
  setRule(result->getDefiningOp(), e.rule, "override");
  checkTypes(e, {result});
  return {result};
}

Values BodyLowering::lowerCall(const CallExpr &e) {
  if (e.op)
    return lowerOpCall(e);
  assert(e.fn && "Sema resolved every callee");
  return lowerFnCall(e);
}

/// A built-in op: its tensor operands are the leading positional arguments
/// (or keyword arguments named like the operand); a variadic op's one list
/// argument becomes one operand per element. Sema turned the remaining
/// arguments into `attrs`.
Values BodyLowering::lowerOpCall(const CallExpr &e) {
  const OpInfo &info = *e.op;
  Values operands;
  for (unsigned i = 0; i < info.operandNames.size(); ++i) {
    const Expr *arg = i < e.args.size() ? e.args[i].get() : nullptr;
    for (const KeywordArg &kw : e.keywordArgs)
      if (!arg && kw.name.name == info.operandNames[i])
        arg = kw.value.get();
    assert(arg && "Sema checked the operand count");
    if (arg)
      operands.append(lowerExpr(*arg));
  }
  builder.setLoc(e.callee.range.begin);
  Values results = builder.create(info.kind, operands, e.attrs);
  if (!results.empty()) // `unstack` of an axis of size 0 has none
    setRule(results.front()->getDefiningOp(), e.rule, "override");
  checkTypes(e, results);
  return results;
}

/// A call of a function of the file, or of its generated NAME_grad, stays
/// a `call` op; a function with @custom_grad or a grad block carries its
/// rule on each call, since differentiation treats the call as one op.
Values BodyLowering::lowerFnCall(const CallExpr &e) {
  Values args;
  for (const ExprPtr &arg : e.args)
    args.append(lowerExpr(*arg));
  std::string callee = e.fn->name.name;
  if (e.callsGrad)
    callee += "_grad";
  // Sema typed the call with the caller's sizes; the declared result types
  // are only a fallback (they may name the callee's sizes).
  llvm::SmallVector<TensorType, 2> resultTypes = flattenType(e.type);
  if (resultTypes.empty() && !e.callsGrad)
    resultTypes.assign(e.fn->resultTypes.begin(), e.fn->resultTypes.end());
  builder.setLoc(e.callee.range.begin);
  Values results = e.fn->isExtern
                       ? builder.externCall(callee, args, resultTypes)
                       : builder.call(callee, args, resultTypes);
  ir::Op *op = results.empty() ? nullptr : results.front()->getDefiningOp();
  if (op && e.rule.instance) {
    setRule(op, e.rule, "custom_grad");
  } else if (op && !e.callsGrad && e.fn->customGrad) {
    // Sema recorded the rule on the function only.
    setRule(op, e.fn->customGrad, customGradLoc(*e.fn), "custom_grad");
  }
  return results;
}

Values BodyLowering::lowerIndex(const IndexExpr &e) {
  Values base = lowerExpr(*e.base);
  if (e.indexesTensor) {
    assert(base.size() == 1 && "Sema checked that a tensor is indexed");
    ir::Value *index = nullptr;
    if (e.indexExpr) {
      Values v = lowerExpr(*e.indexExpr);
      index = v.empty() ? nullptr : v.front();
    } else {
      builder.setLoc(e.indexRange.begin);
      index = builder.scalar(DType::I32, double(e.index));
    }
    AttrList attrs;
    attrs.set("axis", int64_t(0));
    builder.setLoc(e.indexRange.begin);
    ir::Value *result =
        builder.create1(OpKind::Take, {base.front(), index}, attrs);
    checkTypes(e, {result});
    return {result};
  }
  int64_t index = e.index < 0 ? e.index + int64_t(base.size()) : e.index;
  assert(index >= 0 && index < int64_t(base.size()) &&
         "Sema checked the index");
  if (index < 0 || index >= int64_t(base.size()))
    return {};
  return {base[index]};
}

/// `x[a:b, c:d]` is one `slice` op per axis that Sema did not find kept
/// whole, first axis first.
Values BodyLowering::lowerSlice(const SliceExpr &e) {
  Values base = lowerExpr(*e.base);
  if (base.size() != 1)
    return {};
  ir::Value *v = base.front();
  for (size_t k = 0; k < e.lengths.size(); ++k) {
    if (e.starts[k] == 0 && e.lengths[k] == v->getType().shape[k])
      continue;
    AttrList attrs;
    attrs.set("axis", int64_t(k));
    attrs.set("start", e.starts[k]);
    attrs.set("size", Shape{e.lengths[k]});
    builder.setLoc(e.axes[k].range.begin);
    v = builder.create1(OpKind::Slice, {v}, attrs);
  }
  checkTypes(e, {v});
  return {v};
}

/// A loop becomes a body function `f.forN(t, carries..., captures...)`
/// returning (new carries..., outputs...), and a `for` op whose operands
/// are the initial carries and the captured values.
Values BodyLowering::lowerFor(const ForExpr &e) {
  Values inits;
  for (const LoopCarry &c : e.carries)
    inits.append(lowerExpr(*c.init));
  ir::Module &m = module.getIRModule();
  std::string name = module.newLoopBodyName(builder.getFunction().getName());
  ir::Function *bodyFn = m.addFunction(name);
  bodyFn->setRole(ir::Function::Role::LoopBody);
  bodyFn->setLoc(e.getLoc());
  BodyLowering body(module, *bodyFn, this);
  // The index of a `while` has a name no source can refer to.
  ir::Value *index = bodyFn->addParam(TensorType(DType::I32), e.index.name);
  if (!e.isWhile)
    body.bind(e.index.name, {index});
  for (size_t i = 0; i < e.carries.size(); ++i)
    body.bind(e.carries[i].name.name,
              {bodyFn->addParam(e.carryTypes[i], e.carries[i].name.name)});
  for (const auto &stmt : e.body)
    body.lowerLet(*llvm::cast<LetStmt>(stmt.get()));
  bodyFn->setReturns(body.lowerExpr(*e.value));

  Values operands = inits;
  operands.append(body.captured.begin(), body.captured.end());
  llvm::SmallVector<TensorType, 4> types(e.carryTypes.begin(),
                                         e.carryTypes.end());
  for (TensorType t : e.outputTypes) {
    t.shape.insert(t.shape.begin(), e.trip);
    types.push_back(t);
  }
  AttrList attrs;
  attrs.set("body", name);
  attrs.set("start", e.start);
  attrs.set("trip", Shape{e.trip});
  attrs.set("carries", int64_t(e.carries.size()));
  // @checkpoint: the schedule reverse mode gives the loop's adjoint.
  if (e.checkpoint != ForExpr::Checkpoint::None) {
    bool every = e.checkpoint == ForExpr::Checkpoint::Every;
    attrs.set("checkpoint", std::string(every ? "every" : "binomial"));
    if (e.checkpointSize)
      attrs.set(every ? "every" : "snapshots", e.checkpointSize);
  }
  builder.setLoc(e.getLoc());
  ir::Op *op = builder.createWithTypes(OpKind::For, operands, types, attrs);
  Values results(op->getResults().begin(), op->getResults().end());
  checkTypes(e, results);
  return results;
}

/// An `if` becomes two functions `f.ifN.then(captures...)` and
/// `f.ifN.else(captures...)` with the same parameters, the enclosing
/// values that either branch uses, and an `if` op on the condition and
/// those values.
Values BodyLowering::lowerIf(const IfExpr &e) {
  Values cond = lowerExpr(*e.cond);
  assert(cond.size() == 1 && "Sema checked the condition");
  ir::Module &m = module.getIRModule();
  std::string stem = module.newBranchName(builder.getFunction().getName());
  auto make = [&](llvm::StringRef suffix) {
    ir::Function *fn = m.addFunction(stem + suffix.str());
    fn->setRole(ir::Function::Role::LoopBody);
    fn->setLoc(e.getLoc());
    return fn;
  };
  ir::Function *thenFn = make(".then"), *elseFn = make(".else");
  BodyLowering thenBody(module, *thenFn, this), elseBody(module, *elseFn, this);
  Values thenValues = lowerBranch(e.thenBranch, thenBody);
  // The else branch takes the then branch's captures first, then its own;
  // the then branch takes those too, so that both have one signature.
  for (const std::string &name : std::vector<std::string>(
           thenBody.capturedNames.begin(), thenBody.capturedNames.end()))
    elseBody.lookup(name);
  size_t shared = elseBody.capturedNames.size();
  Values elseValues = lowerBranch(e.elseBranch, elseBody);
  for (size_t i = shared; i < elseBody.capturedNames.size(); ++i)
    thenBody.lookup(elseBody.capturedNames[i]);
  thenFn->setReturns(thenValues);
  elseFn->setReturns(elseValues);
  assert(thenBody.captured == elseBody.captured &&
         "both branches take the same captures");

  Values operands = cond;
  operands.append(thenBody.captured.begin(), thenBody.captured.end());
  llvm::SmallVector<TensorType, 4> types;
  for (const ir::Value *v : thenValues)
    types.push_back(v->getType());
  AttrList attrs;
  attrs.set("then", thenFn->getName().str());
  attrs.set("else", elseFn->getName().str());
  builder.setLoc(e.getLoc());
  ir::Op *op = builder.createWithTypes(OpKind::If, operands, types, attrs);
  Values results(op->getResults().begin(), op->getResults().end());
  checkTypes(e, results);
  return results;
}

Values BodyLowering::lowerBranch(const Branch &branch, BodyLowering &body) {
  for (const auto &stmt : branch.body)
    body.lowerLet(*llvm::cast<LetStmt>(stmt.get()));
  return body.lowerExpr(*branch.value);
}

Values BodyLowering::lowerElements(llvm::ArrayRef<ExprPtr> elements) {
  Values values;
  for (const ExprPtr &element : elements)
    values.append(lowerExpr(*element));
  return values;
}

//===----------------------------------------------------------------------===//
// Gradient-rule attributes and type checks
//===----------------------------------------------------------------------===//

void BodyLowering::setRule(ir::Op *op, const RuleChoice &choice,
                           llvm::StringRef via) {
  if (choice.instance)
    setRule(op, choice.instance, choice.annotation.begin, via);
}

void BodyLowering::setRule(ir::Op *op, const RuleInstance *inst,
                           SourceLoc annotation, llvm::StringRef via) {
  if (inst)
    module.makeRuleAttr(op->getGradRule(), inst, annotation, via);
}

void BodyLowering::checkTypes(const Expr &e,
                              llvm::ArrayRef<ir::Value *> values) const {
#ifndef NDEBUG
  if (!e.type.isKnown())
    return;
  llvm::SmallVector<TensorType, 2> expected = flattenType(e.type);
  assert(expected.size() == values.size() &&
         "IRGen and Sema disagree on the number of values");
  for (size_t i = 0; i < expected.size() && i < values.size(); ++i)
    assert(expected[i] == values[i]->getType() &&
           "the op table typed an op unlike Sema");
#else
  (void)e;
  (void)values;
#endif
}

//===----------------------------------------------------------------------===//
// Functions and rule instances
//===----------------------------------------------------------------------===//

/// Rule instances keep Sema's name (`first_only.1`), made unique against
/// every user function and every other instance just in case.
void ModuleLowering::nameRuleInstances() {
  llvm::StringSet<> taken;
  for (const DeclPtr &decl : astModule.decls)
    if (llvm::isa<FnDecl>(decl.get()))
      taken.insert(decl->name.name);
  unsigned counter = 0;
  for (const auto &inst : astModule.ruleInstances) {
    std::string name = inst->name.empty() ? "rule" : inst->name;
    std::string unique = name;
    while (taken.contains(unique))
      unique = name + "." + std::to_string(++counter);
    taken.insert(unique);
    ruleFunctionNames[inst.get()] = unique;
  }
}

void ModuleLowering::lowerFn(const FnDecl &fn) {
  if (fn.isExtern)
    return lowerExtern(fn);
  ir::Function *irFn = irModule->addFunction(fn.name.name);
  irFn->setRole(ir::Function::Role::User);
  irFn->setLoc(fn.signatureRange.isValid() ? fn.signatureRange.begin
                                           : fn.getRange().begin);
  BodyLowering body(*this, *irFn);
  for (size_t i = 0; i < fn.params.size(); ++i) {
    // Sema fills paramTypes; the written type is the fallback.
    TensorType type = i < fn.paramTypes.size() ? fn.paramTypes[i]
                      : fn.params[i].type      ? fn.params[i].type->toType()
                                               : TensorType();
    const std::string &name = fn.params[i].name.name;
    body.bind(name, {irFn->addParam(type, name)});
  }
  irFn->setReturns(body.lowerBody(fn.body));
  if (fn.customGrad) {
    ir::GradRuleAttr rule;
    makeRuleAttr(rule, fn.customGrad, customGradLoc(fn), "custom_grad");
    irFn->setCustomGrad(std::move(rule));
  }
  if (fn.wantsGrad) {
    ir::Function::GradSpec spec;
    spec.gradName = fn.name.name + "_grad";
    spec.wrt = fn.gradParams;
    if (const Annotation *a = findAnnotation(fn, "grad"))
      spec.loc = a->range.begin;
    irFn->setGradSpec(std::move(spec));
  }
}

/// An `extern fn` becomes a declaration of the module; its calls are
/// `extern_call` ops that carry its rule.
void ModuleLowering::lowerExtern(const FnDecl &fn) {
  ir::ExternDecl decl;
  decl.name = fn.name.name;
  decl.header = fn.header;
  for (const Param &p : fn.params)
    decl.paramNames.push_back(p.name.name);
  decl.paramTypes = fn.paramTypes;
  decl.resultTypes = fn.resultTypes;
  decl.returnsStatus = !fn.externReturnsVoid;
  decl.noGradient = !fn.customGrad && findAnnotation(fn, "surrogate");
  decl.loc = fn.signatureRange.begin;
  irModule->externs.push_back(std::move(decl));
}

/// The unused result parameters of a grad block's function: `result`, or
/// `result.0`, `result.1`, ... for a tuple.
void ModuleLowering::addResultParams(ir::Function &irFn, const FnDecl &fn) {
  size_t n = fn.resultTypes.size();
  for (size_t i = 0; i < n; ++i)
    irFn.addParam(fn.resultTypes[i],
                  n == 1 ? "result" : "result." + std::to_string(i));
}

/// A rule instance becomes a function of the op's operands, results and
/// cotangents (a list parameter one IR parameter per element: `xs.0`,
/// `xs.1`) that returns one cotangent per operand element.
void ModuleLowering::lowerRuleInstance(const RuleInstance &inst) {
  ir::Function *irFn = irModule->addFunction(getRuleFunctionName(&inst).str());
  irFn->setRole(ir::Function::Role::RuleInstance);
  if (inst.rule)
    irFn->setLoc(inst.rule->name.range.begin);
  else if (inst.gradBlockOf && inst.gradBlockOf->gradBlock)
    irFn->setLoc(inst.gradBlockOf->gradBlock->range.begin);
  BodyLowering body(*this, *irFn);
  // An inline grad block is bound to the function's parameters and its
  // cotangents only (it sees the results through the copied `let`s), but
  // every rule function takes (operands, results, cotangents): the
  // results go in between, as parameters the body does not use.
  size_t resultsAt = ~size_t(0);
  if (const FnDecl *fn = inst.gradBlockOf)
    resultsAt = fn->params.size();
  for (size_t i = 0; i < inst.paramNames.size(); ++i) {
    if (i == resultsAt)
      addResultParams(*irFn, *inst.gradBlockOf);
    const std::string &name = inst.paramNames[i].name;
    const ValueType &type =
        i < inst.paramTypes.size() ? inst.paramTypes[i] : ValueType();
    if (type.isTensor()) {
      body.bind(name, {irFn->addParam(type.tensor, name)});
      continue;
    }
    Values elements;
    for (size_t k = 0; k < type.elements.size(); ++k)
      elements.push_back(
          irFn->addParam(type.elements[k], name + "." + std::to_string(k)));
    body.bind(name, std::move(elements));
  }
  if (resultsAt == inst.paramNames.size())
    addResultParams(*irFn, *inst.gradBlockOf);
  Values returns = body.lowerBody(inst.body);
#ifndef NDEBUG
  assert(returns.size() == inst.resultTypes.size() &&
         "a rule instance returns one cotangent per operand element");
  for (size_t i = 0; i < returns.size() && i < inst.resultTypes.size(); ++i)
    assert(returns[i]->getType() == inst.resultTypes[i] &&
           "a rule instance's cotangent has the operand's type");
#endif
  irFn->setReturns(returns);
}

std::unique_ptr<ir::Module> ModuleLowering::run() {
  if (astModule.bufferStart.isValid())
    irModule->sourceName = sm.getBufferName(astModule.bufferStart).str();
  nameRuleInstances();
  for (const DeclPtr &decl : astModule.decls)
    if (const auto *fn = llvm::dyn_cast<FnDecl>(decl.get()))
      lowerFn(*fn);
  for (const auto &inst : astModule.ruleInstances)
    lowerRuleInstance(*inst);
  return std::move(irModule);
}

} // namespace

std::unique_ptr<ir::Module> gradc::lowerModule(const ast::Module &module,
                                               const SourceManager &sm) {
  return ModuleLowering(module, sm).run();
}
