//===- RuleInstances.cpp - Typing gradient rules where they are used ------===//
//
// A `rule` has no types: it is checked at each use, against the types of
// the op (or function) it serves. Instantiating a rule:
//
//   1. binds its parameters: one per operand (a list for a variadic op's
//      list), then the result (a list for unstack), then the result's
//      cotangent, which has the result's type; for @custom_grad, the
//      function's parameters, its result and the result's cotangent (a list
//      of results and a list of cotangents for a tuple result);
//   2. type-checks a copy of the body in that environment; an error in it
//      is reported where the rule's body has it, followed by a note at the
//      use ("in rule 'r' used for 'stack' here");
//   3. checks what it returns: one cotangent per operand (parameter), each
//      of that operand's type. A tuple `(da, db)` or a list `[da, db]`
//      holds several; a list operand's cotangents are its elements.
//
// Identical instantiations (the same rule at the same types) are made
// once. Each successful one is recorded in Module::ruleInstances for IRGen.
// An inline `grad` block becomes an instance too: its body is a copy of the
// function's `let` statements followed by the block's statements.
//
//===----------------------------------------------------------------------===//

#include "ASTClone.h"
#include "SemaImpl.h"

#include "llvm/ADT/STLExtras.h"

using namespace gradc;
using namespace gradc::ast;
using namespace gradc::sema;

/// The tensors a rule returned, one per cotangent.
static std::vector<TensorType> flatten(const ValueType &type) {
  if (type.isTensor())
    return {type.tensor};
  return type.elements;
}

/// Where the i-th cotangent of a return value was written.
static const Expr *cotangentExpr(const Expr *value, size_t i) {
  const std::vector<ExprPtr> *elements = nullptr;
  if (const auto *list = llvm::dyn_cast<ListExpr>(value))
    elements = &list->elements;
  else if (const auto *tuple = llvm::dyn_cast<TupleExpr>(value))
    elements = &tuple->elements;
  if (elements && i < elements->size() && (*elements)[i])
    return (*elements)[i].get();
  return value;
}

void Sema::applyOverride(const OverrideEntry &entry, const OpInfo &op,
                         llvm::ArrayRef<ValueType> operandTypes,
                         const ValueType &result, SourceRange range,
                         RuleChoice &choice, BodyScope &scope) {
  if (!entry.rule || !entry.arityOk || !result.isKnown())
    return;
  std::vector<ValueType> params(operandTypes.begin(), operandTypes.end());
  params.push_back(result); // the result
  params.push_back(result); // its cotangent
  std::vector<CotangentSlot> expected;
  for (size_t i = 0; i < operandTypes.size(); ++i) {
    std::string operand =
        "operand " + quoted(op.operandNames[i]) + " of " + quoted(op.name);
    if (operandTypes[i].isTensor()) {
      expected.push_back({operandTypes[i].tensor, operand});
      continue;
    }
    for (size_t j = 0; j < operandTypes[i].elements.size(); ++j)
      expected.push_back({operandTypes[i].elements[j],
                          "element " + std::to_string(j) + " of " + operand});
  }
  RuleUse use;
  use.target = op.name;
  use.count = plural(expected.size(), "operand");
  use.range = range;
  const RuleInstance *instance =
      instantiateRule(*entry.rule, params, expected, use);
  if (!instance)
    return;
  choice = RuleChoice{instance, entry.argRange};
  addInstanceCalls(instance, scope.calls.gradient);
}

void Sema::addInstanceCalls(const RuleInstance *instance,
                            std::vector<CallSite> *sink) {
  auto it = instanceCalls.find(instance);
  if (sink && it != instanceCalls.end())
    llvm::append_range(*sink, it->second);
}

const RuleInstance *Sema::instantiateRule(
    const RuleDecl &rule, const std::vector<ValueType> &paramTypes,
    llvm::ArrayRef<CotangentSlot> expected, const RuleUse &use) {
  if (brokenRules.contains(&rule) || paramTypes.size() != rule.params.size())
    return nullptr;
  std::string key;
  for (const ValueType &t : paramTypes)
    key += t.str() + ";";
  auto [cached, inserted] = instanceCache.try_emplace({&rule, key}, nullptr);
  if (!inserted)
    return cached->second;

  auto instance = std::make_unique<RuleInstance>();
  instance->name =
      rule.name.name + "." + std::to_string(++instanceCounts[&rule]);
  instance->rule = &rule;
  instance->useRange = use.range;
  instance->paramTypes = paramTypes;
  for (const Param &p : rule.params)
    instance->paramNames.push_back(p.name);
  cloneStmts(rule.body, instance->body);

  context.push_back({use.range.begin,
                     use.forFunction ? diag::note_rule_used_for_fn
                                     : diag::note_rule_used_for_op,
                     rule.name.name, use.target, use.range});
  unsigned before = errors;
  BodyScope scope;
  scope.kind = BodyScope::RuleBody;
  scope.description = "rule " + quoted(rule.name.name);
  scope.calls.forward = &instanceCalls[instance.get()];
  for (size_t i = 0; i < paramTypes.size(); ++i)
    bindParam(rule.params[i].name, paramTypes[i], scope);
  std::vector<DType> hints;
  for (const CotangentSlot &slot : expected)
    hints.push_back(slot.type.dtype);
  if (ReturnStmt *ret =
          checkBody(instance->body, scope, rule.name.range.begin)) {
    checkReturnValue(ret->value.get(), scope, hints);
    if (errors == before)
      checkCotangents(ret, expected, &rule, &use, nullptr);
  }
  flushContextNotes();
  context.pop_back();
  if (errors != before)
    return nullptr;

  for (const CotangentSlot &slot : expected)
    instance->resultTypes.push_back(slot.type);
  const RuleInstance *result = instance.get();
  module.ruleInstances.push_back(std::move(instance));
  cached->second = result;
  return result;
}

void Sema::checkCotangents(const ReturnStmt *ret,
                           llvm::ArrayRef<CotangentSlot> expected,
                           const RuleDecl *rule, const RuleUse *use,
                           const FnDecl *gradBlockOf) {
  const Expr *value = ret->value.get();
  if (!value || !value->type.isKnown())
    return;
  std::vector<TensorType> got = flatten(value->type);
  if (got.size() != expected.size()) {
    if (rule) {
      report(value->getLoc(), diag::err_rule_result_count)
          << rule->name.name << plural(got.size(), "cotangent") << use->target
          << use->count << value->getRange();
      note(rule->name.range.begin, diag::note_rule_declared)
          << rule->name.name << rule->name.range;
    } else {
      report(value->getLoc(), diag::err_grad_block_result_count)
          << gradBlockOf->name.name << plural(got.size(), "cotangent")
          << plural(expected.size(), "parameter") << value->getRange();
    }
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == expected[i].type)
      continue;
    const Expr *at = cotangentExpr(value, i);
    if (rule)
      report(at->getLoc(), diag::err_rule_result_type)
          << rule->name.name << got[i].str() << expected[i].what
          << expected[i].type.str() << at->getRange();
    else
      report(at->getLoc(), diag::err_grad_block_result_type)
          << gradBlockOf->name.name << got[i].str()
          << gradBlockOf->params[i].name.name << expected[i].type.str()
          << at->getRange();
  }
}

/// The cotangents a function's gradient returns: one per parameter.
static std::vector<CotangentSlot> parameterSlots(const FnDecl &fn,
                                                 const Signature &sig) {
  std::vector<CotangentSlot> slots;
  for (size_t i = 0; i < sig.params.size(); ++i)
    slots.push_back({sig.params[i], "parameter " + quoted(sig.paramNames[i]) +
                                        " of " + quoted(fn.name.name)});
  return slots;
}

void Sema::instantiateCustomGrad(FnDecl &fn, FnInfo &info) {
  const Signature &sig = info.sig;
  if (!sig.valid)
    return;
  ValueType result;
  if (fn.returnsTuple) {
    result.kind = ValueType::List;
    result.elements = sig.results;
  } else {
    result = ValueType::ofTensor(sig.results[0]);
  }
  std::vector<ValueType> params;
  for (const TensorType &t : sig.params)
    params.push_back(ValueType::ofTensor(t));
  params.push_back(result);
  params.push_back(result);
  RuleUse use;
  use.target = fn.name.name;
  use.forFunction = true;
  use.count = plural(sig.params.size(), "parameter");
  use.range = info.customGradRange;
  const RuleInstance *instance = instantiateRule(*info.customGradRule, params,
                                                 parameterSlots(fn, sig), use);
  if (!instance)
    return;
  fn.customGrad = instance;
  addInstanceCalls(instance, &info.gradientCalls);
}

/// fn f(params) -> results { body } grad(d1, ...) { block }
/// The block sees the parameters and `let` names of f, takes one cotangent
/// per result and returns one cotangent per parameter.
void Sema::checkGradBlock(FnDecl &fn, FnInfo &info, BodyScope &fnScope) {
  GradBlock &block = *fn.gradBlock;
  const Signature &sig = info.sig;
  unsigned before = errors;
  if (block.params.size() != sig.results.size())
    report(block.range.begin, diag::err_grad_block_params)
        << fn.name.name << sig.results.size() << block.params.size()
        << block.range;

  BodyScope &scope = fnScope;
  scope.kind = BodyScope::GradBlock;
  scope.description = "the 'grad' block of " + quoted(fn.name.name);
  scope.overrides = nullptr;
  scope.calls = {&info.gradientCalls, nullptr};
  for (size_t i = 0; i < block.params.size(); ++i) {
    const Ident &name = block.params[i].name;
    ValueType type;
    if (i < sig.results.size() && sig.valid)
      type = ValueType::ofTensor(sig.results[i]);
    bool fresh = !scope.names.count(name.name);
    bindLetName(name, type, scope);
    if (fresh && !name.name.empty())
      scope.names[name.name].kind = Binding::Param;
  }
  std::vector<DType> hints;
  for (const TensorType &t : sig.params)
    hints.push_back(t.dtype);
  if (ReturnStmt *ret = checkBody(block.body, scope, block.range.begin)) {
    checkReturnValue(ret->value.get(), scope, hints);
    if (errors == before && sig.valid)
      checkCotangents(ret, parameterSlots(fn, sig), nullptr, nullptr, &fn);
  }
  if (errors != before || !sig.valid)
    return;

  auto instance = std::make_unique<RuleInstance>();
  instance->name = fn.name.name + ".grad";
  instance->gradBlockOf = &fn;
  instance->useRange = block.range;
  for (size_t i = 0; i < fn.params.size(); ++i) {
    instance->paramNames.push_back(fn.params[i].name);
    instance->paramTypes.push_back(ValueType::ofTensor(sig.params[i]));
  }
  for (size_t i = 0; i < block.params.size(); ++i) {
    instance->paramNames.push_back(block.params[i].name);
    instance->paramTypes.push_back(ValueType::ofTensor(sig.results[i]));
  }
  for (const StmtPtr &stmt : fn.body)
    if (llvm::isa_and_nonnull<LetStmt>(stmt.get()))
      instance->body.push_back(cloneStmt(*stmt));
  cloneStmts(block.body, instance->body);
  instance->resultTypes = sig.params;
  fn.customGrad = instance.get();
  module.ruleInstances.push_back(std::move(instance));
}
