//===- Annotations.cpp - @grad, @override and @custom_grad ----------------===//
//
// Checks where each annotation stands and what it names:
//
//   @grad, @grad(a, b)       on a `fn`: which parameters NAME_grad
//                            differentiates
//   @override(op = rule)     on a `fn` or a `let`: the ops of that scope use
//                            the rule instead of their built-in gradient
//   @custom_grad(rule)       on a `fn`: the whole function is one primitive
//                            whose gradient is the rule
//   @surrogate               on a `rule` or a `fn`: its gradient differs from
//                            the true derivative on purpose (clipping,
//                            reversal, straight-through); `gradc check`
//                            reports the difference instead of failing. On
//                            an `extern fn` without a rule: no gradient
//                            flows through it, on purpose
//
// An `extern fn` takes @custom_grad and @surrogate only.
//
// Overrides are lexical: a `let`'s override applies to the ops written in
// that statement, a `fn`'s to the ops written in its body, and the innermost
// one wins. Ops inside the functions a body calls are not affected: what a
// statement does is visible in the source of that statement, and a callee
// that wants another gradient carries its own annotation.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include "llvm/ADT/STLExtras.h"

using namespace gradc;
using namespace gradc::ast;
using namespace gradc::sema;

/// `@name`, as an annotation is written.
static std::string spelling(llvm::StringRef name) {
  std::string s = "@";
  s += name;
  return s;
}

/// The annotations gradc knows, as written.
static const std::vector<std::string> &knownAnnotations() {
  static const std::vector<std::string> names = {
      "@grad", "@override", "@custom_grad", "@surrogate", "@checkpoint"};
  return names;
}

static bool isKnownAnnotation(llvm::StringRef name) {
  return llvm::is_contained(knownAnnotations(), spelling(name));
}

void Sema::rejectAnnotation(const Annotation &a, llvm::StringRef place) {
  if (isKnownAnnotation(a.name.name)) {
    report(a.name.range.begin, diag::err_annotation_place)
        << a.name.name << place << a.range;
    return;
  }
  report(a.name.range.begin, diag::err_unknown_annotation)
      << a.name.name << didYouMean(spelling(a.name.name), knownAnnotations())
      << a.name.range;
}

void Sema::checkFnAnnotations(FnDecl &fn, FnInfo &info) {
  const Annotation *grad = nullptr;
  const Annotation *customGrad = nullptr;
  auto once = [&](const Annotation &a, const Annotation *&first) {
    if (!first) {
      first = &a;
      return true;
    }
    report(a.name.range.begin, diag::err_annotation_twice)
        << a.name.name << a.range;
    note(first->name.range.begin, diag::note_annotation_first)
        << a.name.name << first->range;
    return false;
  };
  for (const Annotation &a : fn.annotations) {
    llvm::StringRef name = a.name.name;
    // An extern has no body to differentiate or override: its gradient is
    // a @custom_grad rule (or none, declared @surrogate).
    if (fn.isExtern && (name == "grad" || name == "override")) {
      rejectAnnotation(a, "an extern function");
      continue;
    }
    if (name == "grad") {
      if (once(a, grad)) {
        info.gradAnnotation = a.range;
        checkGradAnnotation(a, fn);
      }
    } else if (name == "custom_grad") {
      if (once(a, customGrad))
        checkCustomGradAnnotation(a, fn, info);
    } else if (name == "surrogate") {
      checkSurrogateAnnotation(a);
    } else if (name == "override") {
      if (!info.overrides) {
        info.overrides = std::make_unique<OverrideScope>();
        info.overrides->where = "in function " + quoted(fn.name.name);
      }
      parseOverride(a, *info.overrides);
    } else {
      rejectAnnotation(a, "a function");
    }
  }
  if (customGrad && fn.gradBlock) {
    report(customGrad->name.range.begin, diag::err_custom_grad_and_block)
        << fn.name.name << customGrad->range;
    note(fn.gradBlock->range.begin, diag::note_grad_block_here)
        << fn.name.name << fn.gradBlock->range;
    info.customGradRule = nullptr;
  }
}

/// `@surrogate` declares a gradient that differs from the derivative on
/// purpose; it takes no arguments. Only `gradc check` reads it.
void Sema::checkSurrogateAnnotation(const Annotation &a) {
  if (a.hasParens)
    report(a.name.range.begin, diag::err_surrogate_args) << a.range;
}

/// `@grad` means every floating-point parameter; `@grad(a, b)` those.
void Sema::checkGradAnnotation(const Annotation &a, FnDecl &fn) {
  std::vector<unsigned> indices;
  if (!a.hasParens) {
    bool allTyped = true;
    for (unsigned i = 0; i < fn.params.size(); ++i) {
      allTyped &= fn.params[i].type.has_value();
      if (i < fn.paramTypes.size() && fn.params[i].type &&
          isFloat(fn.paramTypes[i].dtype))
        indices.push_back(i);
    }
    if (indices.empty() && allTyped)
      report(a.name.range.begin, diag::err_grad_no_float_param)
          << fn.name.name << a.range;
  } else if (a.args.empty()) {
    report(a.name.range.begin, diag::err_grad_empty_parens) << a.range;
  }

  std::vector<std::string> paramNames;
  for (const Param &p : fn.params)
    paramNames.push_back(p.name.name);
  llvm::StringMap<const AnnotationArg *> named;
  for (const AnnotationArg &arg :
       a.hasParens ? a.args : std::vector<AnnotationArg>()) {
    if (arg.key) {
      report(arg.range.begin, diag::err_grad_arg_form)
          << sourceText(arg.range) << arg.range;
      continue;
    }
    const std::string &name = arg.value.name;
    auto found = llvm::find(paramNames, name);
    if (found == paramNames.end()) {
      report(arg.value.range.begin, diag::err_grad_unknown_param)
          << name << fn.name.name << didYouMean(name, paramNames)
          << arg.value.range;
      continue;
    }
    auto [it, inserted] = named.try_emplace(name, &arg);
    if (!inserted) {
      report(arg.value.range.begin, diag::err_grad_param_twice)
          << name << arg.value.range;
      note(it->second->value.range.begin, diag::note_grad_param_first)
          << name << it->second->value.range;
      continue;
    }
    unsigned index = found - paramNames.begin();
    const Param &param = fn.params[index];
    if (!param.type || index >= fn.paramTypes.size())
      continue;
    if (!isFloat(fn.paramTypes[index].dtype)) {
      report(arg.value.range.begin, diag::err_grad_nonfloat)
          << fn.name.name << name << fn.paramTypes[index].str()
          << arg.value.range;
      continue;
    }
    indices.push_back(index);
  }
  llvm::sort(indices);
  fn.gradParams = indices;
  fn.wantsGrad = !indices.empty();
}

const RuleDecl *Sema::lookupRule(const Ident &name) {
  if (RuleDecl *rule = rules.lookup(name.name))
    return rule;
  std::vector<std::string> names;
  for (const DeclPtr &d : module.decls)
    if (const auto *r = llvm::dyn_cast_or_null<RuleDecl>(d.get()))
      names.push_back(r->name.name);
  report(name.range.begin, diag::err_unknown_rule)
      << name.name << didYouMean(name.name, names) << name.range;
  return nullptr;
}

bool Sema::checkRuleArity(const RuleDecl &rule, SourceRange use,
                          const std::string &target, size_t expected,
                          const std::string &params) {
  if (rule.params.size() == expected)
    return true;
  report(use.begin, diag::err_rule_arity)
      << rule.name.name << plural(rule.params.size(), "parameter") << target
      << std::to_string(expected) << params << use;
  note(rule.name.range.begin, diag::note_rule_declared)
      << rule.name.name << rule.name.range;
  return false;
}

/// What a rule for `op` takes, for messages: "x, y, the result and its
/// cotangent".
static std::string describeRuleParams(const OpInfo &op) {
  std::string s;
  for (const char *name : op.operandNames)
    s += (op.variadic ? "the list " : "") + std::string(name) + ", ";
  if (op.kind == OpKind::Unstack)
    return s + "the list of results and the list of their cotangents";
  return s + "the result and its cotangent";
}

/// A @custom_grad rule takes the function's parameters, its result and the
/// result's cotangent; a function with a tuple result gives the rule a list
/// of results and a list of cotangents, so that every rule has the shape
/// (inputs..., output, d_output).
void Sema::checkCustomGradAnnotation(const Annotation &a, FnDecl &fn,
                                     FnInfo &info) {
  if (!a.hasParens || a.args.size() != 1 || a.args[0].key) {
    report(a.name.range.begin, diag::err_custom_grad_args) << a.range;
    return;
  }
  const AnnotationArg &arg = a.args[0];
  const RuleDecl *rule = lookupRule(arg.value);
  if (!rule)
    return;
  std::string params;
  if (!fn.params.empty()) {
    params = "the parameter" + std::string(fn.params.size() == 1 ? " " : "s ");
    for (const Param &p : fn.params)
      params += p.name.name + ", ";
  }
  params += fn.returnsTuple
                ? "the list of results and the list of their cotangents"
                : "the result and its cotangent";
  if (!checkRuleArity(*rule, arg.value.range,
                      "function " + quoted(fn.name.name), fn.params.size() + 2,
                      params))
    return;
  info.customGradRule = rule;
  info.customGradRange = arg.range;
}

void Sema::parseOverride(const Annotation &a, OverrideScope &scope) {
  if (!a.hasParens || a.args.empty()) {
    report(a.name.range.begin, diag::err_override_no_args) << a.range;
    return;
  }
  for (const AnnotationArg &arg : a.args) {
    if (!arg.key) {
      report(arg.range.begin, diag::err_override_arg_form)
          << sourceText(arg.range) << arg.range;
      continue;
    }
    const Ident &key = *arg.key;
    const OpInfo *op = lookupOp(key.name);
    if (!op) {
      // TensorFlow's op types (`Pack`) are what a TensorFlow user reaches
      // for; name the op they mean and say why the name differs.
      llvm::StringRef tf = mapTensorFlowOpName(key.name);
      llvm::StringRef suggestion = tf.empty() ? suggestOpName(key.name) : tf;
      report(key.range.begin, diag::err_override_unknown_op)
          << key.name
          << (suggestion.empty() ? ""
                                 : "; did you mean '" + suggestion.str() + "'?")
          << key.range;
      if (!tf.empty())
        note(key.range.begin, diag::note_tensorflow_op_name)
            << key.name << tf << key.range;
      continue;
    }
    if (!op->isDifferentiable()) {
      report(key.range.begin, diag::err_override_nondiff)
          << op->name << op->nonDiffReason << key.range;
      continue;
    }
    if (const OverrideEntry *first = scope.find(op->kind)) {
      report(key.range.begin, diag::err_override_twice)
          << op->name << key.range;
      note(first->opRange.begin, diag::note_override_first)
          << op->name << first->opRange;
      continue;
    }
    OverrideEntry entry;
    entry.op = op;
    entry.opRange = key.range;
    entry.argRange = arg.range;
    entry.rule = lookupRule(arg.value);
    if (entry.rule)
      entry.arityOk =
          checkRuleArity(*entry.rule, arg.value.range, quoted(op->name),
                         op->operandNames.size() + 2, describeRuleParams(*op));
    scope.entries.push_back(entry);
  }
}

void Sema::checkLetAnnotations(const LetStmt &let, OverrideScope &scope,
                               const BodyScope &body) {
  for (const Annotation &a : let.annotations) {
    if (a.name.name == "checkpoint") {
      checkCheckpointAnnotation(a, let);
      continue;
    }
    if (a.name.name != "override") {
      rejectAnnotation(a, "a 'let' statement");
      continue;
    }
    switch (body.kind) {
    case BodyScope::FnBody:
      parseOverride(a, scope);
      break;
    case BodyScope::RuleBody:
      rejectAnnotation(a, "a statement of a rule");
      break;
    case BodyScope::GradBlock:
      rejectAnnotation(a, "a statement of a 'grad' block");
      break;
    }
  }
}

// checkpoint ::= '@checkpoint' [ '(' ( 'every' '=' integer
//                 | 'binomial' [ ',' 'snapshots' '=' integer ] ) ')' ]
//
// Only a `let` whose value is a `for` loop takes it; Sema records the
// schedule on the loop, and IRGen puts it on the `for` op, where reverse
// mode reads it (docs/Gradients.md, "Checkpointing").
void Sema::checkCheckpointAnnotation(const Annotation &a, const LetStmt &let) {
  auto *loop = llvm::dyn_cast_or_null<ForExpr>(let.value.get());
  if (!loop) {
    report(a.name.range.begin, diag::err_checkpoint_not_loop) << a.range;
    return;
  }
  if (loop->checkpoint != ForExpr::Checkpoint::None) {
    report(a.name.range.begin, diag::err_annotation_twice) << a.name.name;
    return;
  }
  auto size = [&](const AnnotationArg &arg) -> int64_t {
    int64_t n = 0;
    if (llvm::StringRef(arg.value.name).getAsInteger(10, n) || n < 1 ||
        n > 1000000000) {
      report(arg.value.range.begin, diag::err_checkpoint_size)
          << arg.key->name << arg.value.name << arg.range;
      return 0;
    }
    return n;
  };
  auto badArg = [&](const AnnotationArg &arg) {
    std::string text = arg.key ? arg.key->name + " = " : "";
    report(arg.range.begin, diag::err_checkpoint_arg)
        << text + arg.value.name << arg.range;
  };
  ForExpr::Checkpoint kind = ForExpr::Checkpoint::Every;
  int64_t n = 0;
  for (size_t i = 0; i < a.args.size(); ++i) {
    const AnnotationArg &arg = a.args[i];
    if (i == 0 && !arg.key && arg.value.name == "binomial") {
      kind = ForExpr::Checkpoint::Binomial;
      continue;
    }
    bool fits =
        arg.key && i == (kind == ForExpr::Checkpoint::Binomial) &&
        arg.key->name ==
            (kind == ForExpr::Checkpoint::Binomial ? "snapshots" : "every");
    if (!fits)
      return badArg(arg);
    if (!(n = size(arg)))
      return;
  }
  loop->checkpoint = kind;
  loop->checkpointSize = n;
}

void Sema::warnUnusedOverrides(const OverrideScope &scope) {
  for (const OverrideEntry &e : scope.entries)
    if (e.matches == 0)
      report(e.opRange.begin, diag::warn_override_unused)
          << e.op->name << scope.where << e.opRange;
}
