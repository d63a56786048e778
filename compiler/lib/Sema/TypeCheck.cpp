//===- TypeCheck.cpp - Bodies, statements and expressions -----------------===//
//
// Checks the statements of a body in order and gives every expression its
// type (Expr::type): a tensor, a list of tensors (list literals, `unstack`)
// or a tuple (a call of a function with several results). Calls of ops go
// to OpCalls.cpp; calls of the file's functions and of generated NAME_grad
// functions are checked here against their signatures, binding the
// callee's size names to the argument shapes.
//
// An expression whose type cannot be known after an error gets the unknown
// type, and nothing that uses it is reported again: one mistake, one
// message.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include "llvm/ADT/STLExtras.h"

using namespace gradc;
using namespace gradc::ast;
using namespace gradc::sema;

//===----------------------------------------------------------------------===//
// Bodies and statements
//===----------------------------------------------------------------------===//

/// body ::= stmt* return
/// Exactly one `return`, and it comes last: there is no control flow, so a
/// statement after a `return` could never run.
ReturnStmt *Sema::checkBody(std::vector<StmtPtr> &body, BodyScope &scope,
                            SourceLoc declLoc) {
  for (const StmtPtr &stmt : body)
    if (auto *let = llvm::dyn_cast_or_null<LetStmt>(stmt.get()))
      for (const Ident &name : let->names)
        if (!scope.names.count(name.name))
          scope.laterLets.try_emplace(name.name, name.range);

  ReturnStmt *last = nullptr;
  for (size_t i = 0; i < body.size(); ++i) {
    Stmt *stmt = body[i].get();
    if (!stmt)
      continue;
    if (auto *let = llvm::dyn_cast<LetStmt>(stmt)) {
      checkLet(*let, scope);
      continue;
    }
    auto *ret = llvm::cast<ReturnStmt>(stmt);
    if (i + 1 == body.size()) {
      last = ret;
      continue;
    }
    report(ret->getLoc(), diag::err_return_not_last)
        << scope.description << SourceRange(ret->getLoc());
    checkExpr(ret->value.get(), scope);
  }
  if (!last)
    report(declLoc, diag::err_missing_return) << scope.description;
  return last;
}

/// let ::= annotation* 'let' (name (':' type)? | '(' name, ... ')') '=' expr
void Sema::checkLet(LetStmt &let, BodyScope &scope) {
  OverrideScope letOverrides;
  letOverrides.parent = scope.overrides;
  letOverrides.where = "in this statement";
  checkLetAnnotations(let, letOverrides, scope);

  std::optional<TensorType> declared;
  if (let.declaredType)
    declared = resolveTypeExpr(*let.declaredType, scope);

  OverrideScope *outer = scope.overrides;
  if (!letOverrides.entries.empty())
    scope.overrides = &letOverrides;
  ValueType value = checkExpr(let.value.get(), scope,
                              declared ? std::optional<DType>(declared->dtype)
                                       : std::nullopt);
  scope.overrides = outer;
  warnUnusedOverrides(letOverrides);

  llvm::StringRef firstName =
      let.names.empty() ? llvm::StringRef() : let.names[0].name;
  if (declared && value.isKnown() && let.value) {
    if (!value.isTensor())
      report(let.value->getLoc(), diag::err_let_type_not_tensor)
          << firstName << declared->str() << value.str()
          << let.value->getRange();
    else if (value.tensor != *declared)
      report(let.value->getLoc(), diag::err_let_type_mismatch)
          << firstName << declared->str() << value.str()
          << let.value->getRange();
  }

  if (!let.destructures) {
    // After a mismatch the declared type is what later statements expect.
    ValueType bound = declared ? ValueType::ofTensor(*declared) : value;
    for (const Ident &name : let.names)
      bindLetName(name, bound, scope);
    return;
  }
  std::vector<ValueType> parts(let.names.size());
  bool fits = value.kind == ValueType::Tuple || value.kind == ValueType::List;
  if (fits && value.elements.size() == let.names.size()) {
    for (size_t i = 0; i < parts.size(); ++i)
      parts[i] = ValueType::ofTensor(value.elements[i]);
  } else if (value.isKnown() && let.value) {
    report(let.value->getLoc(), diag::err_destructure_arity)
        << value.str() << plural(let.names.size(), "name")
        << let.value->getRange();
  }
  for (size_t i = 0; i < parts.size(); ++i)
    bindLetName(let.names[i], parts[i], scope);
}

void Sema::bindLetName(const Ident &name, const ValueType &type,
                       BodyScope &scope) {
  if (name.name.empty())
    return;
  auto it = scope.names.find(name.name);
  if (it != scope.names.end()) {
    const Binding &first = it->second;
    if (first.kind == Binding::Param) {
      report(name.range.begin, diag::err_let_shadows_param)
          << name.name << name.range;
      note(first.range.begin, diag::note_param_here)
          << name.name << first.range;
    } else {
      report(name.range.begin, diag::err_let_redefinition)
          << name.name << scope.description << name.range;
      note(first.range.begin, diag::note_first_definition)
          << name.name << first.range;
    }
    return;
  }
  scope.names[name.name] = Binding{Binding::Let, type, name.range};
  scope.laterLets.erase(name.name);
}

void Sema::bindParam(const Ident &name, const ValueType &type,
                     BodyScope &scope) {
  // A duplicate parameter was reported with the signature; keep the first.
  if (!name.name.empty())
    scope.names.try_emplace(name.name,
                            Binding{Binding::Param, type, name.range});
}

std::optional<TensorType> Sema::resolveTypeExpr(const TypeExpr &type,
                                                const BodyScope &scope) {
  bool ok = true;
  for (const DimExpr &d : type.dims) {
    if (!d.dim.isNamed() || scope.sizeNames.contains(d.dim.getName()))
      continue;
    std::vector<std::string> known;
    for (const auto &entry : scope.sizeNames)
      known.push_back(entry.getKey().str());
    llvm::sort(known);
    report(d.range.begin, diag::err_unknown_size_name)
        << d.dim.getName() << didYouMean(d.dim.getName(), known) << d.range;
    ok = false;
  }
  if (!ok || !checkTypeSize(type))
    return std::nullopt;
  return type.toType();
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

ValueType Sema::checkExpr(Expr *expr, BodyScope &scope,
                          std::optional<DType> hint) {
  if (!expr)
    return ValueType();
  expr->type = checkExprKind(expr, scope, hint);
  return expr->type;
}

ValueType Sema::checkExprKind(Expr *expr, BodyScope &scope,
                              std::optional<DType> hint) {
  switch (expr->getKind()) {
  case Expr::Kind::Number:
    return checkNumber(*llvm::cast<NumberExpr>(expr), hint);
  case Expr::Kind::Bool:
    return ValueType::ofTensor(TensorType(DType::Bool));
  case Expr::Kind::Name:
    return checkName(*llvm::cast<NameExpr>(expr), scope);
  case Expr::Kind::Unary:
    return checkUnary(*llvm::cast<UnaryExpr>(expr), scope, hint);
  case Expr::Kind::Binary:
    return checkBinary(*llvm::cast<BinaryExpr>(expr), scope, hint);
  case Expr::Kind::Call:
    return checkCall(*llvm::cast<CallExpr>(expr), scope, hint);
  case Expr::Kind::List:
    return checkList(*llvm::cast<ListExpr>(expr), scope, hint);
  case Expr::Kind::Tuple: {
    // Only a `return` takes a tuple, and it checks the elements itself.
    report(expr->getLoc(), diag::err_tuple_not_returned) << expr->getRange();
    for (ExprPtr &e : llvm::cast<TupleExpr>(expr)->elements)
      checkExpr(e.get(), scope);
    return ValueType();
  }
  case Expr::Kind::Index:
    return checkIndex(*llvm::cast<IndexExpr>(expr), scope);
  case Expr::Kind::Slice:
    return checkSlice(*llvm::cast<SliceExpr>(expr), scope);
  case Expr::Kind::For:
    return checkFor(*llvm::cast<ForExpr>(expr), scope);
  case Expr::Kind::If:
    return checkIf(*llvm::cast<IfExpr>(expr), scope, hint);
  }
  return ValueType();
}

ValueType Sema::checkReturnValue(Expr *value, BodyScope &scope,
                                 llvm::ArrayRef<DType> hints) {
  auto *tuple = llvm::dyn_cast_or_null<TupleExpr>(value);
  if (!tuple) {
    // One value meets one type; a list's elements meet theirs.
    std::optional<DType> hint;
    if (!hints.empty() && llvm::all_equal(hints))
      hint = hints[0];
    return checkExpr(value, scope, hint);
  }
  ValueType type;
  type.kind = ValueType::Tuple;
  for (size_t i = 0; i < tuple->elements.size(); ++i) {
    Expr *element = tuple->elements[i].get();
    ValueType t = checkExpr(element, scope,
                            i < hints.size() ? std::optional<DType>(hints[i])
                                             : std::nullopt);
    if (t.isKnown() && !t.isTensor())
      report(element->getLoc(), diag::err_tuple_element)
          << t.str() << element->getRange();
    if (t.isTensor() && type.isKnown())
      type.elements.push_back(t.tensor);
    else
      type = ValueType();
  }
  tuple->type = type;
  return type;
}

/// A number literal takes the element type of the tensor it meets (`hint`):
/// `2.0 * x` is f64 when x is. Alone, `2.0` is f32 and `2` is i32.
ValueType Sema::checkNumber(NumberExpr &num, std::optional<DType> hint) {
  DType type = num.isInteger ? DType::I32 : DType::F32;
  if (hint && isFloat(*hint)) {
    type = *hint;
  } else if (hint == DType::I32) {
    type = DType::I32;
    if (!num.isInteger)
      report(num.getLoc(), diag::err_literal_not_integer)
          << sourceText(num.getRange()) << "i32" << num.getRange();
  }
  return ValueType::ofTensor(TensorType(type));
}

ValueType Sema::checkName(NameExpr &name, BodyScope &scope) {
  auto it = scope.names.find(name.name);
  if (it != scope.names.end())
    return it->second.type;
  auto later = scope.laterLets.find(name.name);
  if (later != scope.laterLets.end()) {
    report(name.getLoc(), diag::err_use_before_def)
        << name.name << name.getRange();
    note(later->second.begin, diag::note_defined_here)
        << name.name << later->second;
    return ValueType();
  }
  if (scope.sizeNames.contains(name.name)) {
    report(name.getLoc(), diag::err_size_name_as_value)
        << name.name << name.getRange();
    return ValueType();
  }
  std::vector<std::string> visible;
  for (const auto &entry : scope.names)
    visible.push_back(entry.getKey().str());
  llvm::sort(visible);
  report(name.getLoc(), diag::err_unknown_name)
      << name.name << didYouMean(name.name, visible) << name.getRange();
  return ValueType();
}

/// list ::= '[' expr, ... ']': tensors, for ops that take a list and for a
/// rule's list of cotangents. Literals in it meet the other elements.
ValueType Sema::checkList(ListExpr &list, BodyScope &scope,
                          std::optional<DType> hint) {
  std::vector<Expr *> elements;
  for (ExprPtr &e : list.elements)
    elements.push_back(e.get());
  llvm::SmallVector<ValueType, 4> types;
  checkGroup(elements, {}, /*resultFollows=*/true, scope, hint, types);
  ValueType type;
  type.kind = ValueType::List;
  for (size_t i = 0; i < elements.size(); ++i) {
    if (types[i].isKnown() && !types[i].isTensor())
      report(elements[i]->getLoc(), diag::err_list_element)
          << types[i].str() << elements[i]->getRange();
    if (types[i].isTensor() && type.isKnown())
      type.elements.push_back(types[i].tensor);
    else
      type = ValueType();
  }
  return type;
}

/// index ::= expr '[' integer ']': a constant index into a list or tuple;
/// negative counts from the end. On a tensor, `xs[i]` is the slice at
/// index i of its first axis: a constant (checked against a known size)
/// or an i32 scalar expression (checked when the program runs).
ValueType Sema::checkIndex(IndexExpr &index, BodyScope &scope) {
  ValueType base = checkExpr(index.base.get(), scope);
  if (index.indexExpr) {
    ValueType indexType = checkExpr(index.indexExpr.get(), scope, DType::I32);
    if (!base.isKnown())
      return ValueType();
    if (!base.isTensor()) {
      report(index.indexRange.begin, diag::err_index_list_literal)
          << index.indexRange;
      return ValueType();
    }
    return checkTensorIndex(index, base.tensor, &indexType);
  }
  if (!base.isKnown())
    return ValueType();
  if (base.isTensor())
    return checkTensorIndex(index, base.tensor, nullptr);
  int64_t n = base.elements.size();
  if (index.index < -n || index.index >= n) {
    std::string what = base.kind == ValueType::List
                           ? "a list of " + plural(n, "tensor")
                           : "a tuple of " + plural(n, "value");
    report(index.indexRange.begin, diag::err_index_range)
        << index.index << what << index.indexRange;
    return ValueType();
  }
  return ValueType::ofTensor(
      base.elements[index.index < 0 ? index.index + n : index.index]);
}

/// `xs[i]` on a tensor of type T[D0, D1, ...] has type T[D1, ...]. A
/// constant index must lie in [-D0, D0) when D0 is known (negative counts
/// from the end) and in [0, D0) when D0 is a size name.
ValueType Sema::checkTensorIndex(IndexExpr &index, const TensorType &base,
                                 const ValueType *indexType) {
  if (base.isScalar()) {
    report(index.base->getLoc(), diag::err_tensor_index_scalar)
        << base.str() << index.base->getRange();
    return ValueType();
  }
  if (indexType) {
    if (!indexType->isKnown())
      return ValueType();
    if (!indexType->isTensor() || indexType->tensor != TensorType(DType::I32)) {
      report(index.indexRange.begin, diag::err_tensor_index_type)
          << indexType->str() << index.indexRange;
      return ValueType();
    }
  } else {
    const Dim &first = base.shape.front();
    bool inRange = first.isKnown() ? index.index >= -first.getSize() &&
                                         index.index < first.getSize()
                                   : index.index >= 0;
    if (!inRange) {
      report(index.indexRange.begin, diag::err_tensor_index_range)
          << index.index << base.str() << index.indexRange;
      return ValueType();
    }
    if (index.index < 0)
      index.index += first.getSize();
  }
  index.indexesTensor = true;
  TensorType result = base;
  result.shape.erase(result.shape.begin());
  return ValueType::ofTensor(result);
}

//===----------------------------------------------------------------------===//
// Slices
//===----------------------------------------------------------------------===//

/// `lo:hi` as written, for diagnostics.
static std::string sliceText(const SliceAxis &axis) {
  auto bound = [](const SliceBound &b) {
    if (!b.present)
      return std::string();
    return b.name.empty() ? std::to_string(b.value) : b.name;
  };
  return bound(axis.lo) + ":" + bound(axis.hi);
}

/// Resolves one bound of a slice of axis `axis` (of size `axisDim`) to a
/// position: a size name must be one of the signature's, and an integer
/// must lie in [-D, D] when the size D is known (negative counts from the
/// end) and be non-negative when it is a size name (checked against the
/// size when the program runs).
bool Sema::resolveSliceBound(const SliceBound &bound, const Dim &axisDim,
                             const TensorType &base, size_t axis,
                             const BodyScope &scope, Dim &out) {
  if (!bound.name.empty()) {
    if (!scope.sizeNames.contains(bound.name)) {
      std::vector<std::string> known;
      for (const auto &entry : scope.sizeNames)
        known.push_back(entry.getKey().str());
      llvm::sort(known);
      report(bound.range.begin, diag::err_unknown_size_name)
          << bound.name << didYouMean(bound.name, known) << bound.range;
      return false;
    }
    out = Dim::named(bound.name);
    return true;
  }
  int64_t v = bound.value;
  bool inRange = axisDim.isKnown()
                     ? v >= -axisDim.getSize() && v <= axisDim.getSize()
                     : v >= 0;
  if (!inRange) {
    report(bound.range.begin, diag::err_slice_bound_range)
        << v << axis << base.str() << bound.range;
    return false;
  }
  out = Dim::known(v < 0 ? v + axisDim.getSize() : v);
  return true;
}

/// slice ::= expr '[' lo ':' hi { ',' lo ':' hi } ']' on a tensor
/// T[D0, D1, ...]: axis k keeps the elements from lo to hi (exclusive),
/// by default 0 and Dk. Shapes are static, so the number of elements,
/// hi - lo, must be a known size or a size name: both bounds integers,
/// or lo = 0 and hi a size name (`x[:N]`, `x[:]` of a named axis). A
/// slice known to be empty or reversed, or a bound known to be out of
/// range, is an error here; a bound against a size name is checked when
/// the program runs (GRADC_ERROR_INDEX).
ValueType Sema::checkSlice(SliceExpr &slice, BodyScope &scope) {
  ValueType base = checkExpr(slice.base.get(), scope);
  if (!base.isKnown())
    return ValueType();
  SourceRange first = slice.axes.front().range;
  if (!base.isTensor()) {
    report(first.begin, diag::err_index_list_literal) << first;
    return ValueType();
  }
  const TensorType &type = base.tensor;
  if (type.isScalar()) {
    report(slice.base->getLoc(), diag::err_tensor_index_scalar)
        << type.str() << slice.base->getRange();
    return ValueType();
  }
  if (slice.axes.size() > type.getRank()) {
    report(first.begin, diag::err_slice_rank)
        << type.str() << slice.axes.size() << type.getRank()
        << SourceRange(first.begin, slice.axes.back().range.end);
    return ValueType();
  }
  TensorType result = type;
  bool ok = true;
  slice.starts.clear();
  slice.lengths.clear();
  for (size_t k = 0; k < slice.axes.size(); ++k) {
    const SliceAxis &axis = slice.axes[k];
    const Dim &d = type.shape[k];
    Dim lo = Dim::known(0), hi = d;
    if ((axis.lo.present &&
         !resolveSliceBound(axis.lo, d, type, k, scope, lo)) ||
        (axis.hi.present &&
         !resolveSliceBound(axis.hi, d, type, k, scope, hi))) {
      ok = false;
      continue;
    }
    bool empty = lo == hi ||
                 (lo.isKnown() && hi.isKnown() && hi.getSize() <= lo.getSize());
    if (empty) {
      report(axis.range.begin, diag::err_slice_empty)
          << sliceText(axis) << k << type.str() << axis.range;
      ok = false;
      continue;
    }
    Dim length;
    if (lo.isKnown() && hi.isKnown())
      length = Dim::known(hi.getSize() - lo.getSize());
    else if (lo.isKnown() && lo.getSize() == 0)
      length = hi;
    else {
      report(axis.range.begin, diag::err_slice_length)
          << sliceText(axis) << k << type.str() << hi.str() + " - " + lo.str()
          << axis.range;
      ok = false;
      continue;
    }
    slice.starts.push_back(lo.getSize());
    slice.lengths.push_back(length);
    result.shape[k] = length;
  }
  if (!ok)
    return ValueType();
  return ValueType::ofTensor(result);
}

//===----------------------------------------------------------------------===//
// Loops
//===----------------------------------------------------------------------===//

/// Binds a loop's index or carry in the body's scope; a name that is
/// already visible is an error (there is no shadowing in the language).
bool Sema::bindLoopName(const Ident &name, const TensorType &type,
                        BodyScope &body) {
  auto it = body.names.find(name.name);
  if (it != body.names.end()) {
    report(name.range.begin, diag::err_loop_name_taken)
        << name.name << name.range;
    note(it->second.range.begin, diag::note_first_definition)
        << name.name << it->second.range;
    return false;
  }
  body.names[name.name] =
      Binding{Binding::Param, ValueType::ofTensor(type), name.range};
  return true;
}

/// for ::= 'for' t 'in' a '..' b ['carry' '(' c = init, ... ')'] '{' ... '}'
/// The body is checked in a scope that sees the enclosing names, `t` (an
/// i32 scalar) and the carries (typed by their initial values). Its value
/// lists the new carries, each of exactly its carry's type, then the
/// per-step outputs; the loop gives the final carries and each output
/// stacked along a new first axis of size b - a.
ValueType Sema::checkFor(ForExpr &loop, BodyScope &scope) {
  std::vector<std::optional<TensorType>> carryTypes;
  for (LoopCarry &c : loop.carries) {
    ValueType init = checkExpr(c.init.get(), scope);
    if (init.isKnown() && !init.isTensor())
      report(c.init->getLoc(), diag::err_loop_carry_not_tensor)
          << c.name.name << init.str() << c.init->getRange();
    carryTypes.push_back(init.isTensor() ? std::optional(init.tensor)
                                         : std::nullopt);
  }

  bool ok = true;
  if (loop.end.isNamed() && !scope.sizeNames.contains(loop.end.getName())) {
    std::vector<std::string> known;
    for (const auto &entry : scope.sizeNames)
      known.push_back(entry.getKey().str());
    llvm::sort(known);
    report(loop.endRange.begin, diag::err_unknown_size_name)
        << loop.end.getName() << didYouMean(loop.end.getName(), known)
        << loop.endRange;
    ok = false;
  } else if (loop.end.isNamed() && loop.start != 0) {
    report(loop.startRange.begin, diag::err_loop_named_start)
        << loop.end.getName() << loop.start << loop.startRange;
    ok = false;
  } else if (loop.end.isKnown() && loop.end.getSize() < loop.start) {
    report(loop.startRange.begin, diag::err_loop_range)
        << loop.start << loop.end.getSize()
        << SourceRange(loop.startRange.begin, loop.endRange.end);
    ok = false;
  }
  if (ok)
    loop.trip = loop.end.isKnown() ? Dim::known(loop.end.getSize() - loop.start)
                                   : loop.end;

  BodyScope body;
  body.kind = scope.kind;
  body.description = "the loop body";
  body.names = scope.names;
  body.laterLets = scope.laterLets;
  body.sizeNames = scope.sizeNames;
  body.overrides = scope.overrides;
  body.calls = scope.calls;
  // The index of a `while` has no name the source can use.
  if (!loop.isWhile)
    ok &= bindLoopName(loop.index, TensorType(DType::I32), body);
  for (size_t i = 0; i < loop.carries.size(); ++i)
    ok &= bindLoopName(loop.carries[i].name,
                       carryTypes[i].value_or(TensorType()), body) &&
          carryTypes[i].has_value();

  for (const auto &stmt : loop.body)
    if (auto *let = llvm::dyn_cast_or_null<LetStmt>(stmt.get()))
      for (const Ident &name : let->names)
        if (!body.names.count(name.name))
          body.laterLets.try_emplace(name.name, name.range);
  for (auto &stmt : loop.body)
    if (auto *let = llvm::dyn_cast_or_null<LetStmt>(stmt.get()))
      checkLet(*let, body);

  llvm::SmallVector<DType, 4> hints;
  for (const auto &t : carryTypes)
    if (t)
      hints.push_back(t->dtype);
  ValueType value = checkReturnValue(loop.value.get(), body, hints);
  if (!value.isKnown() || !ok)
    return ValueType();
  if (value.kind == ValueType::List) {
    report(loop.value->getLoc(), diag::err_loop_value_kind)
        << value.str() << loop.value->getRange();
    return ValueType();
  }
  std::vector<TensorType> values =
      value.isTensor() ? std::vector<TensorType>{value.tensor} : value.elements;
  if (values.size() < loop.carries.size()) {
    report(loop.value->getLoc(), diag::err_loop_value_count)
        << plural(values.size(), "value")
        << (loop.carries.size() == 1
                ? std::string("1 carry")
                : std::to_string(loop.carries.size()) + " carries")
        << loop.value->getRange();
    return ValueType();
  }
  for (size_t i = 0; i < loop.carries.size(); ++i) {
    if (values[i] == *carryTypes[i])
      continue;
    report(loop.value->getLoc(), diag::err_loop_carry_type)
        << loop.carries[i].name.name << carryTypes[i]->str() << values[i].str()
        << loop.value->getRange();
    ok = false;
  }
  if (!ok)
    return ValueType();
  loop.carryTypes.assign(values.begin(), values.begin() + loop.carries.size());
  loop.outputTypes.assign(values.begin() + loop.carries.size(), values.end());
  ValueType result;
  result.kind = ValueType::Tuple;
  result.elements = loop.carryTypes;
  for (TensorType t : loop.outputTypes) {
    t.shape.insert(t.shape.begin(), loop.trip);
    result.elements.push_back(t);
  }
  if (result.elements.size() == 1)
    return ValueType::ofTensor(result.elements.front());
  return result;
}

/// A branch of `if` is checked in a scope of its own that sees the
/// enclosing names; its `let`s end with it.
ValueType Sema::checkBranch(Branch &branch, BodyScope &scope,
                            std::optional<DType> hint, bool whileBody) {
  BodyScope body;
  body.kind = scope.kind;
  body.description = whileBody ? "the loop body" : "a branch of 'if'";
  body.names = scope.names;
  body.laterLets = scope.laterLets;
  body.sizeNames = scope.sizeNames;
  body.overrides = scope.overrides;
  body.calls = scope.calls;
  for (const auto &stmt : branch.body)
    if (auto *let = llvm::dyn_cast_or_null<LetStmt>(stmt.get()))
      for (const Ident &name : let->names)
        if (!body.names.count(name.name))
          body.laterLets.try_emplace(name.name, name.range);
  for (auto &stmt : branch.body)
    if (auto *let = llvm::dyn_cast_or_null<LetStmt>(stmt.get()))
      checkLet(*let, body);
  llvm::SmallVector<DType, 1> hints;
  if (hint)
    hints.push_back(*hint);
  ValueType value = checkReturnValue(branch.value.get(), body, hints);
  if (value.kind == ValueType::List) {
    report(branch.value->getLoc(),
           whileBody ? diag::err_loop_value_kind : diag::err_if_branch_kind)
        << value.str() << branch.value->getRange();
    return ValueType();
  }
  return value;
}

/// if ::= 'if' c '{' ... '}' 'else' '{' ... '}'
/// `c` is a bool scalar; each branch gives a tensor or a tuple, both of
/// the same type, which is the value of the `if`. A bare number in one
/// branch takes the element type of the other (`if c { x } else { 0.0 }`).
ValueType Sema::checkIf(IfExpr &e, BodyScope &scope,
                        std::optional<DType> hint) {
  ValueType cond = checkExpr(e.cond.get(), scope);
  bool ok = true;
  if (cond.isKnown() && !(cond.isTensor() && cond.tensor.dtype == DType::Bool &&
                          cond.tensor.getRank() == 0)) {
    report(e.cond->getLoc(),
           e.whileBody ? diag::err_while_cond_type : diag::err_if_cond_type)
        << cond.str() << e.cond->getRange();
    ok = false;
  }
  // The branch that is not a bare number is checked first, so that a
  // number in the other takes its element type.
  bool elseFirst = !hint && llvm::isa<NumberExpr>(e.thenBranch.value.get()) &&
                   !llvm::isa<NumberExpr>(e.elseBranch.value.get());
  Branch &first = elseFirst ? e.elseBranch : e.thenBranch;
  Branch &second = elseFirst ? e.thenBranch : e.elseBranch;
  ValueType a = checkBranch(first, scope, hint, e.whileBody && !elseFirst);
  std::optional<DType> next = hint;
  if (!next && a.isTensor())
    next = a.tensor.dtype;
  ValueType b = checkBranch(second, scope, next, e.whileBody && elseFirst);
  if (!ok || !a.isKnown() || !b.isKnown())
    return ValueType();
  const ValueType &thenType = elseFirst ? b : a;
  const ValueType &elseType = elseFirst ? a : b;
  bool same = thenType.kind == elseType.kind &&
              (thenType.isTensor() ? thenType.tensor == elseType.tensor
                                   : thenType.elements == elseType.elements);
  if (!same && e.whileBody) {
    // The else branch of a `while`'s body gives the carries as they are.
    report(e.thenBranch.value->getLoc(), diag::err_while_body_types)
        << thenType.str() << elseType.str() << e.thenBranch.value->getRange();
    return ValueType();
  }
  if (!same) {
    report(e.elseLoc, diag::err_if_branch_types)
        << thenType.str() << elseType.str()
        << SourceRange(e.getRange().begin, e.getRange().end);
    return ValueType();
  }
  return thenType;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

/// call ::= name '(' args ')': a built-in op, a function of the file, or
/// the NAME_grad that @grad generates for one.
ValueType Sema::checkCall(CallExpr &call, BodyScope &scope,
                          std::optional<DType> hint) {
  const std::string &name = call.callee.name;
  if (const OpInfo *op = lookupOp(name))
    return checkOpCall(call, *op, scope, hint);
  const FnDecl *notGenerated = nullptr;
  if (const Signature *sig = lookupCallee(name, notGenerated))
    return checkFnCall(call, *sig, scope);

  if (notGenerated) {
    report(call.callee.range.begin, diag::err_grad_fn_not_generated)
        << name << notGenerated->name.name << call.callee.range;
    note(notGenerated->name.range.begin, diag::note_declared_here)
        << notGenerated->name.name << notGenerated->name.range;
  } else {
    report(call.callee.range.begin, diag::err_unknown_callee)
        << name << didYouMean(name, calleeNames()) << call.callee.range;
  }
  // The arguments may hold mistakes of their own.
  for (ExprPtr &arg : call.args)
    checkExpr(arg.get(), scope);
  for (KeywordArg &k : call.keywordArgs)
    checkExpr(k.value.get(), scope);
  return ValueType();
}

ValueType Sema::checkFnCall(CallExpr &call, const Signature &sig,
                            BodyScope &scope) {
  call.fn = sig.fn;
  call.callsGrad = sig.isGrad;
  if (scope.calls.forward)
    scope.calls.forward->push_back(
        {CallNode{sig.fn, sig.isGrad}, call.getRange()});

  for (KeywordArg &k : call.keywordArgs) {
    report(k.name.range.begin, diag::err_call_keyword)
        << sig.name << k.name.name << k.name.range;
    checkExpr(k.value.get(), scope);
  }
  std::vector<ValueType> argTypes;
  for (size_t i = 0; i < call.args.size(); ++i) {
    std::optional<DType> hint;
    if (i < sig.params.size())
      hint = sig.params[i].dtype;
    argTypes.push_back(checkExpr(call.args[i].get(), scope, hint));
  }
  if (!call.keywordArgs.empty())
    return ValueType();
  if (call.args.size() != sig.params.size()) {
    report(call.callee.range.begin, diag::err_call_arg_count)
        << sig.name << plural(sig.params.size(), "argument") << call.args.size()
        << call.getRange();
    note(sig.fn->name.range.begin, diag::note_declared_here)
        << sig.fn->name.name << sig.fn->name.range;
    return ValueType();
  }
  if (!sig.valid)
    return ValueType();

  std::map<std::string, Dim> sizes;
  if (!unifyArguments(call, sig, argTypes, sizes))
    return ValueType();
  Signature substituted = sig;
  for (TensorType &result : substituted.results) {
    for (Dim &d : result.shape) {
      if (d.isKnown())
        continue;
      auto it = sizes.find(d.getName().str());
      if (it == sizes.end())
        return ValueType();
      d = it->second;
    }
  }
  return substituted.resultValueType();
}

/// Each size name of the callee binds to the first argument dimension it
/// meets (a known size, or a size name of the caller); every later
/// occurrence must be the same dimension.
bool Sema::unifyArguments(const CallExpr &call, const Signature &sig,
                          llvm::ArrayRef<ValueType> argTypes,
                          std::map<std::string, Dim> &sizes) {
  std::map<std::string, size_t> boundBy;
  bool ok = true;
  for (size_t i = 0; i < argTypes.size(); ++i) {
    const ValueType &arg = argTypes[i];
    const TensorType &param = sig.params[i];
    const Expr *expr = call.args[i].get();
    if (!arg.isKnown()) {
      ok = false;
      continue;
    }
    auto mismatch = [&] {
      report(expr->getLoc(), diag::err_call_arg_type)
          << sig.paramNames[i] << sig.name << param.str() << arg.str()
          << expr->getRange();
      ok = false;
    };
    if (!arg.isTensor() || arg.tensor.dtype != param.dtype ||
        arg.tensor.getRank() != param.getRank()) {
      mismatch();
      continue;
    }
    for (unsigned d = 0; d < param.getRank(); ++d) {
      const Dim &want = param.shape[d];
      const Dim &have = arg.tensor.shape[d];
      if (want.isKnown()) {
        if (want != have) {
          mismatch();
          break;
        }
        continue;
      }
      std::string name = want.getName().str();
      auto [it, inserted] = sizes.try_emplace(name, have);
      if (inserted) {
        boundBy[name] = i;
        continue;
      }
      if (it->second != have) {
        report(expr->getLoc(), diag::err_call_size_conflict)
            << name << sig.name << it->second.str()
            << sig.paramNames[boundBy[name]] << have.str() << sig.paramNames[i]
            << expr->getRange();
        ok = false;
        break;
      }
    }
  }
  return ok;
}
