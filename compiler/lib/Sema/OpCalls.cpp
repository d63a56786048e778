//===- OpCalls.cpp - Calls of built-in ops --------------------------------===//
//
// Checks a call of a built-in op (and the operators `-x`, `x + y`, `a @ b`,
// `x < y`, which are the ops neg, add, matmul, less, ...) in three steps:
//
//   1. map the arguments: the first positional arguments are the op's
//      operands (a variadic op takes one list), further positional
//      arguments and keyword arguments are its attributes, by the kinds
//      the op table declares;
//   2. type the operands, giving number literals the element type of the
//      tensors they meet, and evaluate the attributes, which must be
//      compile-time constants;
//   3. let the op table infer the result types (the one place that knows
//      each op's shape rules) and report its error at the call.
//
// Afterwards the call is in a canonical form for later phases: `args` holds
// exactly the operands and `keywordArgs` the attribute arguments in the
// op's declared order; `attrs` holds their normalised values.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace gradc;
using namespace gradc::ast;
using namespace gradc::sema;

//===----------------------------------------------------------------------===//
// Number literals meet tensors
//===----------------------------------------------------------------------===//

/// Whether the op's result has its operands' element type; comparisons
/// give bool and one_hot gives f32 whatever they are given.
static bool resultFollowsOperands(OpKind op) {
  switch (op) {
  case OpKind::Less:
  case OpKind::LessEqual:
  case OpKind::Greater:
  case OpKind::GreaterEqual:
  case OpKind::Equal:
  case OpKind::NotEqual:
  case OpKind::OneHot:
    return false;
  default:
    return true;
  }
}

/// Whether operand `index` shares the element type of the op's other
/// operands (the condition of select and the labels of
/// softmax_cross_entropy do not).
static bool sharesElementType(OpKind op, unsigned index) {
  if (op == OpKind::Select)
    return index != 0;
  if (op == OpKind::SoftmaxCrossEntropy)
    return index == 0;
  return true;
}

/// A constant expression built from number literals (`2.0`, `-1`,
/// `2.0 * 3.0`, `exp(1.0)`): its element type is not fixed until it meets
/// a tensor.
static bool isFlexible(const Expr *e) {
  if (!e)
    return false;
  switch (e->getKind()) {
  case Expr::Kind::Number:
    return true;
  case Expr::Kind::Unary:
    return isFlexible(llvm::cast<UnaryExpr>(e)->operand.get());
  case Expr::Kind::Binary: {
    const auto *b = llvm::cast<BinaryExpr>(e);
    bool arithmetic = b->op == BinaryOp::Add || b->op == BinaryOp::Sub ||
                      b->op == BinaryOp::Mul || b->op == BinaryOp::Div;
    return arithmetic && isFlexible(b->lhs.get()) && isFlexible(b->rhs.get());
  }
  case Expr::Kind::Call: {
    const auto *call = llvm::cast<CallExpr>(e);
    const OpInfo *op = lookupOp(call->callee.name);
    if (!op || !resultFollowsOperands(op->kind) || call->args.empty())
      return false;
    return llvm::all_of(call->args,
                        [](const ExprPtr &a) { return isFlexible(a.get()); });
  }
  case Expr::Kind::List: {
    const auto *list = llvm::cast<ListExpr>(e);
    return !list->elements.empty() &&
           llvm::all_of(list->elements,
                        [](const ExprPtr &a) { return isFlexible(a.get()); });
  }
  default:
    return false;
  }
}

static bool containsFloatLiteral(const Expr *e) {
  if (!e)
    return false;
  switch (e->getKind()) {
  case Expr::Kind::Number:
    return !llvm::cast<NumberExpr>(e)->isInteger;
  case Expr::Kind::Unary:
    return containsFloatLiteral(llvm::cast<UnaryExpr>(e)->operand.get());
  case Expr::Kind::Binary: {
    const auto *b = llvm::cast<BinaryExpr>(e);
    return containsFloatLiteral(b->lhs.get()) ||
           containsFloatLiteral(b->rhs.get());
  }
  case Expr::Kind::Call:
    return llvm::any_of(llvm::cast<CallExpr>(e)->args, [](const ExprPtr &a) {
      return containsFloatLiteral(a.get());
    });
  case Expr::Kind::List:
    return llvm::any_of(
        llvm::cast<ListExpr>(e)->elements,
        [](const ExprPtr &a) { return containsFloatLiteral(a.get()); });
  default:
    return false;
  }
}

/// The expressions whose type is fixed are checked first; the first of
/// them that is not bool gives the group its element type, which the
/// constant expressions then take. A group of constants alone takes the
/// type its result must have, else f32 if a float literal is in it, else
/// i32 (so `2.0 * 3` is f32).
void Sema::checkGroup(llvm::ArrayRef<Expr *> exprs, llvm::ArrayRef<bool> shared,
                      bool resultFollows, BodyScope &scope,
                      std::optional<DType> hint,
                      llvm::SmallVectorImpl<ValueType> &types) {
  types.assign(exprs.size(), ValueType());
  auto inGroup = [&](size_t i) { return shared.empty() || shared[i]; };
  std::optional<DType> groupType;
  for (size_t i = 0; i < exprs.size(); ++i) {
    if (isFlexible(exprs[i]))
      continue;
    types[i] = checkExpr(exprs[i], scope,
                         inGroup(i) && resultFollows ? hint : std::nullopt);
    if (inGroup(i) && !groupType && types[i].isTensor() &&
        types[i].tensor.dtype != DType::Bool)
      groupType = types[i].tensor.dtype;
  }
  if (!groupType && resultFollows && hint && *hint != DType::Bool)
    groupType = hint;
  if (!groupType) {
    bool anyFloat = false;
    for (size_t i = 0; i < exprs.size(); ++i)
      anyFloat |=
          inGroup(i) && isFlexible(exprs[i]) && containsFloatLiteral(exprs[i]);
    groupType = anyFloat ? DType::F32 : DType::I32;
  }
  for (size_t i = 0; i < exprs.size(); ++i)
    if (isFlexible(exprs[i]))
      types[i] =
          checkExpr(exprs[i], scope, inGroup(i) ? groupType : std::nullopt);
}

//===----------------------------------------------------------------------===//
// Attributes: compile-time constants
//===----------------------------------------------------------------------===//

/// An integer literal, possibly negated: `1`, `-1`.
static std::optional<int64_t> evalInt(const Expr *e) {
  if (const auto *num = llvm::dyn_cast<NumberExpr>(e)) {
    // Beyond 2^53 a double no longer holds every integer exactly.
    if (!num->isInteger || std::abs(num->value) > 9007199254740992.0)
      return std::nullopt;
    return static_cast<int64_t>(num->value);
  }
  if (const auto *neg = llvm::dyn_cast<UnaryExpr>(e))
    if (neg->operand)
      if (std::optional<int64_t> v = evalInt(neg->operand.get()))
        return -*v;
  return std::nullopt;
}

/// An integer or a size name in scope: one dimension of a shape argument.
static std::optional<Dim> evalDimExpr(const Expr *e, const BodyScope &scope) {
  if (std::optional<int64_t> v = evalInt(e))
    return Dim::known(*v);
  if (const auto *name = llvm::dyn_cast<NameExpr>(e))
    if (scope.sizeNames.contains(name->name))
      return Dim::named(name->name);
  return std::nullopt;
}

static llvm::StringRef describeAttrKind(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "an integer";
  case AttrKind::Axes:
    return "an integer or a list of integers";
  case AttrKind::IntList:
    return "a list of integers";
  case AttrKind::Bool:
    return "true or false";
  case AttrKind::Shape:
    return "a list of sizes or size names";
  case AttrKind::Dim:
    return "a size or a size name";
  case AttrKind::Floats:
  case AttrKind::Symbol:
    break;
  }
  return "a constant";
}

/// Finds the part of an attribute argument that is computed rather than
/// written as a constant, and reports it. Names are constants only when
/// they are size names.
static bool checkConstant(Sema &sema, const OpInfo &op, const AttrInfo &attr,
                          const Expr *e, const BodyScope &scope) {
  auto notConstant = [&] {
    sema.report(e->getLoc(), diag::err_attr_not_constant)
        << attr.name << op.name << e->getRange();
    return false;
  };
  switch (e->getKind()) {
  case Expr::Kind::Number:
  case Expr::Kind::Bool:
    return true;
  case Expr::Kind::Unary: {
    const Expr *operand = llvm::cast<UnaryExpr>(e)->operand.get();
    return !operand || checkConstant(sema, op, attr, operand, scope);
  }
  case Expr::Kind::List:
    for (const ExprPtr &element : llvm::cast<ListExpr>(e)->elements)
      if (element && !checkConstant(sema, op, attr, element.get(), scope))
        return false;
    return true;
  case Expr::Kind::Name: {
    const std::string &name = llvm::cast<NameExpr>(e)->name;
    if (scope.sizeNames.contains(name))
      return true;
    if (scope.names.count(name) || scope.laterLets.count(name))
      return notConstant();
    std::vector<std::string> known;
    bool wantsSize = attr.kind == AttrKind::Shape || attr.kind == AttrKind::Dim;
    if (wantsSize) {
      for (const auto &entry : scope.sizeNames)
        known.push_back(entry.getKey().str());
    } else {
      for (const auto &entry : scope.names)
        known.push_back(entry.getKey().str());
    }
    llvm::sort(known);
    sema.report(e->getLoc(), wantsSize ? diag::err_unknown_size_name
                                       : diag::err_unknown_name)
        << name << Sema::didYouMean(name, known) << e->getRange();
    return false;
  }
  default:
    return notConstant();
  }
}

bool Sema::evalAttr(const OpInfo &op, const AttrInfo &attr, const Expr *expr,
                    const BodyScope &scope, AttrList &attrs) {
  if (!expr || !checkConstant(*this, op, attr, expr, scope))
    return false;
  const auto *list = llvm::dyn_cast<ListExpr>(expr);
  auto ints = [&]() -> std::optional<std::vector<int64_t>> {
    std::vector<int64_t> values;
    for (const ExprPtr &e : list->elements) {
      std::optional<int64_t> v = e ? evalInt(e.get()) : std::nullopt;
      if (!v)
        return std::nullopt;
      values.push_back(*v);
    }
    return values;
  };
  std::optional<AttrValue> value;
  switch (attr.kind) {
  case AttrKind::Int:
    if (std::optional<int64_t> v = evalInt(expr))
      value = *v;
    break;
  case AttrKind::Axes:
    if (list) {
      if (std::optional<std::vector<int64_t>> v = ints())
        value = *v;
    } else if (std::optional<int64_t> v = evalInt(expr)) {
      value = *v;
    }
    break;
  case AttrKind::IntList:
    if (list)
      if (std::optional<std::vector<int64_t>> v = ints())
        value = *v;
    break;
  case AttrKind::Bool:
    if (const auto *b = llvm::dyn_cast<BoolExpr>(expr))
      value = b->value;
    break;
  case AttrKind::Shape:
    if (list) {
      Shape shape;
      for (const ExprPtr &e : list->elements) {
        std::optional<Dim> d = e ? evalDimExpr(e.get(), scope) : std::nullopt;
        if (!d) {
          shape.clear();
          list = nullptr;
          break;
        }
        shape.push_back(*d);
      }
      if (list)
        value = shape;
    }
    break;
  case AttrKind::Dim:
    if (std::optional<Dim> d = evalDimExpr(expr, scope))
      value = Shape{*d};
    break;
  case AttrKind::Floats:
  case AttrKind::Symbol:
    break;
  }
  if (!value) {
    report(expr->getLoc(), diag::err_attr_kind)
        << attr.name << op.name << describeAttrKind(attr.kind)
        << sourceText(expr->getRange()) << expr->getRange();
    return false;
  }
  attrs.set(attr.name, std::move(*value));
  return true;
}

//===----------------------------------------------------------------------===//
// Calls of ops
//===----------------------------------------------------------------------===//

/// "'axis' and 'keepdims'".
static std::string listNames(llvm::ArrayRef<AttrInfo> attrs) {
  std::string s;
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i)
      s += i + 1 == attrs.size() ? " and " : ", ";
    s += quoted(attrs[i].name);
  }
  return s;
}

/// Reports operands that are lists or tuples where the op takes a tensor;
/// their types become unknown.
void Sema::requireTensors(const OpInfo &op, llvm::ArrayRef<Expr *> exprs,
                          llvm::MutableArrayRef<ValueType> types) {
  for (size_t i = 0; i < exprs.size(); ++i) {
    if (!types[i].isKnown() || types[i].isTensor())
      continue;
    report(exprs[i]->getLoc(), diag::err_op_operand_tensor)
        << op.operandNames[i] << op.name << types[i].str()
        << exprs[i]->getRange();
    types[i] = ValueType();
  }
}

static bool isIROnly(const AttrInfo &attr) {
  return attr.kind == AttrKind::Floats || attr.kind == AttrKind::Symbol;
}

/// The attributes a program may write: the op table lists IR-only ones
/// (one_hot's `dtype`, which `gradc check` sets when it promotes a module
/// to f64) after them.
static llvm::ArrayRef<AttrInfo> programAttrs(const OpInfo &op) {
  auto irOnly = llvm::find_if(op.attrs, isIROnly);
  assert(std::none_of(irOnly, op.attrs.end(),
                      [](const AttrInfo &a) { return !isIROnly(a); }) &&
         "IR-only attributes come last in the op table");
  return op.attrs.take_front(irOnly - op.attrs.begin());
}

namespace {
/// The arguments of an op call, sorted: operands, then the attribute
/// arguments in the op's declared order.
struct OpArguments {
  std::vector<ExprPtr> operands;
  std::vector<ExprPtr> attrs;         ///< one slot per attribute, maybe null
  std::vector<SourceRange> attrNames; ///< where each attribute was given
  std::vector<ExprPtr> extra;         ///< positional arguments too many
  std::vector<KeywordArg> rejected;   ///< unknown or repeated keywords
  bool ok = true;
};
} // namespace

/// Sorts the arguments of a call of `op`: the first positional ones are
/// the operands, further positional ones and keyword ones the attributes.
/// Reports missing operands, extra arguments and bad keywords.
static OpArguments mapOpArguments(Sema &sema, CallExpr &call, const OpInfo &op,
                                  llvm::ArrayRef<AttrInfo> opAttrs) {
  OpArguments out;
  std::vector<ExprPtr> positional = std::move(call.args);
  std::vector<KeywordArg> keywords = std::move(call.keywordArgs);
  call.args.clear();
  call.keywordArgs.clear();
  size_t numOperands = op.operandNames.size();
  size_t maxPositional = numOperands + opAttrs.size();
  auto namesOperand = [&](llvm::StringRef name) {
    return llvm::is_contained(op.operandNames, name);
  };

  if (positional.size() > maxPositional) {
    const Expr *extra = positional[maxPositional].get();
    sema.report(extra ? extra->getLoc() : call.getLoc(),
                diag::err_op_too_many_args)
        << op.name << maxPositional << positional.size() << call.getRange();
    out.ok = false;
  } else if (positional.size() < numOperands) {
    // `labels = y` is reported as a keyword naming an operand instead.
    if (llvm::none_of(keywords, [&](const KeywordArg &k) {
          return namesOperand(k.name.name);
        }))
      sema.report(call.callee.range.begin, diag::err_op_operand_count)
          << op.name << numOperands << positional.size() << call.getRange();
    out.ok = false;
  }

  out.attrs.resize(opAttrs.size());
  out.attrNames.resize(opAttrs.size());
  for (size_t i = 0; i < positional.size(); ++i) {
    if (i < numOperands) {
      out.operands.push_back(std::move(positional[i]));
    } else if (i < maxPositional) {
      size_t a = i - numOperands;
      if (positional[i])
        out.attrNames[a] = positional[i]->getRange();
      out.attrs[a] = std::move(positional[i]);
    } else {
      out.extra.push_back(std::move(positional[i]));
    }
  }

  for (KeywordArg &k : keywords) {
    const std::string &name = k.name.name;
    auto attr = llvm::find_if(
        opAttrs, [&](const AttrInfo &a) { return name == a.name; });
    size_t index = attr - opAttrs.begin();
    if (attr == opAttrs.end()) {
      if (namesOperand(name))
        sema.report(k.name.range.begin, diag::err_op_keyword_operand)
            << name << op.name << k.name.range;
      else if (opAttrs.empty())
        sema.report(k.name.range.begin, diag::err_op_no_keywords)
            << op.name << name << k.name.range;
      else
        sema.report(k.name.range.begin, diag::err_op_unknown_keyword)
            << op.name << name << listNames(opAttrs) << k.name.range;
    } else if (out.attrs[index]) {
      sema.report(k.name.range.begin, diag::err_op_arg_twice)
          << name << op.name << k.name.range;
      sema.note(out.attrNames[index].begin, diag::note_op_arg_first)
          << name << out.attrNames[index];
    } else {
      out.attrs[index] = std::move(k.value);
      out.attrNames[index] = k.name.range;
      continue;
    }
    out.ok = false;
    out.rejected.push_back(std::move(k));
  }
  return out;
}

/// Types the operands of `op`: a variadic op's one list, or tensors whose
/// number literals meet each other.
void Sema::checkOperandExprs(const OpInfo &op, llvm::ArrayRef<Expr *> exprs,
                             BodyScope &scope, std::optional<DType> hint,
                             llvm::SmallVectorImpl<ValueType> &types) {
  if (!op.variadic) {
    llvm::SmallVector<bool, 4> shared;
    for (size_t i = 0; i < exprs.size(); ++i)
      shared.push_back(sharesElementType(op.kind, i));
    checkGroup(exprs, shared, resultFollowsOperands(op.kind), scope, hint,
               types);
    requireTensors(op, exprs, types);
    return;
  }
  for (Expr *e : exprs) {
    ValueType t = checkExpr(e, scope, hint);
    if (t.isKnown() && t.kind != ValueType::List) {
      report(e->getLoc(), diag::err_op_operand_list)
          << op.operandNames[0] << op.name << t.str() << e->getRange();
      t = ValueType();
    }
    types.push_back(t);
  }
}

/// call ::= op '(' operand, ... (attr-value, ...)? (name '=' attr-value, ...)?
/// ')'
ValueType Sema::checkOpCall(CallExpr &call, const OpInfo &op, BodyScope &scope,
                            std::optional<DType> hint) {
  call.op = &op;
  llvm::ArrayRef<AttrInfo> opAttrs = programAttrs(op);
  OpArguments args = mapOpArguments(*this, call, op, opAttrs);

  std::vector<Expr *> operandExprs;
  for (const ExprPtr &e : args.operands)
    operandExprs.push_back(e.get());
  llvm::SmallVector<ValueType, 4> operandTypes;
  checkOperandExprs(op, operandExprs, scope, hint, operandTypes);
  AttrList attrs;
  for (size_t i = 0; i < opAttrs.size(); ++i)
    if (args.attrs[i])
      args.ok &= evalAttr(op, opAttrs[i], args.attrs[i].get(), scope, attrs);

  // The canonical form: operands, then attributes by name.
  call.args = std::move(args.operands);
  for (size_t i = 0; i < opAttrs.size(); ++i)
    if (args.attrs[i])
      call.keywordArgs.push_back({Ident{opAttrs[i].name, args.attrNames[i]},
                                  std::move(args.attrs[i])});
  for (KeywordArg &k : args.rejected)
    call.keywordArgs.push_back(std::move(k));
  for (ExprPtr &e : args.extra)
    call.args.push_back(std::move(e));

  if (!args.ok)
    return ValueType();
  ValueType result = finishOp(op, operandTypes, attrs, call.callee.range.begin,
                              call.getRange(), call.rule, scope);
  call.attrs = std::move(attrs);
  return result;
}

/// unary ::= '-' expr: the op neg.
ValueType Sema::checkUnary(UnaryExpr &unary, BodyScope &scope,
                           std::optional<DType> hint) {
  const OpInfo &op = getOpInfo(OpKind::Neg);
  llvm::SmallVector<ValueType, 1> types;
  checkGroup({unary.operand.get()}, {}, true, scope, hint, types);
  requireTensors(op, {unary.operand.get()}, types);
  AttrList attrs;
  return finishOp(op, types, attrs, unary.opLoc, unary.getRange(), unary.rule,
                  scope);
}

/// binary ::= expr op expr: the ops add, sub, mul, div, matmul and the
/// comparisons less ... not_equal.
ValueType Sema::checkBinary(BinaryExpr &binary, BodyScope &scope,
                            std::optional<DType> hint) {
  OpKind kind = getBinaryOpKind(binary.op);
  const OpInfo &op = getOpInfo(kind);
  llvm::SmallVector<ValueType, 2> types;
  checkGroup({binary.lhs.get(), binary.rhs.get()}, {},
             resultFollowsOperands(kind), scope, hint, types);
  requireTensors(op, {binary.lhs.get(), binary.rhs.get()}, types);
  AttrList attrs;
  return finishOp(op, types, attrs, binary.opLoc, binary.getRange(),
                  binary.rule, scope);
}

ValueType Sema::finishOp(const OpInfo &op,
                         llvm::ArrayRef<ValueType> operandTypes,
                         AttrList &attrs, SourceLoc loc, SourceRange range,
                         RuleChoice &rule, BodyScope &scope) {
  OverrideEntry *override = nullptr;
  for (OverrideScope *s = scope.overrides; s; s = s->parent) {
    if (OverrideEntry *e = s->find(op.kind)) {
      ++e->matches;
      if (!override)
        override = e; // the innermost wins
    }
  }

  llvm::SmallVector<TensorType, 4> operands;
  for (const ValueType &t : operandTypes) {
    if (t.isTensor())
      operands.push_back(t.tensor);
    else if (t.kind == ValueType::List)
      llvm::append_range(operands, t.elements);
    else
      return ValueType();
  }
  if (operandTypes.size() != op.operandNames.size())
    return ValueType();

  llvm::SmallVector<TensorType, 2> results;
  OpTypeError error;
  if (!inferOpTypes(op.kind, operands, attrs, results, error)) {
    InFlightDiagnostic d = report(loc, error.id);
    for (const std::string &arg : error.args)
      d << arg;
    d << range;
    return ValueType();
  }
  ValueType result;
  if (op.kind == OpKind::Unstack) {
    result.kind = ValueType::List;
    result.elements.assign(results.begin(), results.end());
  } else if (!results.empty()) {
    result = ValueType::ofTensor(results[0]);
  }
  if (override)
    applyOverride(*override, op, operandTypes, result, range, rule, scope);
  return result;
}
