//===- Sema.cpp - Names, types, shapes and annotations --------------------===//
//
// The driver of semantic analysis and the module-level checks. A module is
// checked in passes, so that declarations may come in any order:
//
//   1. collect the functions and rules (duplicates are errors);
//   2. check each function's signature: its types give the parameter and
//      result types every call is checked against, so no body depends on
//      another body;
//   3. check the annotations of each function and derive the signature of
//      each generated NAME_grad;
//   4. resolve the names of every rule's body (types come later, per use);
//   5. check each function's body, instantiating the rules that @override,
//      @custom_grad and inline `grad` blocks choose;
//   6. reject call cycles.
//
// Errors are reported and checking goes on, so that one run shows several.
//
//===----------------------------------------------------------------------===//

#include "gradc/Sema/Sema.h"

#include "ASTClone.h"
#include "SemaImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <set>

using namespace gradc;
using namespace gradc::ast;
using namespace gradc::sema;

bool gradc::checkModule(Module &module, DiagnosticEngine &diags) {
  Sema sema(module, diags);
  return sema.run();
}

std::string sema::plural(size_t n, llvm::StringRef noun) {
  return std::to_string(n) + " " + noun.str() + (n == 1 ? "" : "s");
}

std::string sema::quoted(llvm::StringRef name) {
  std::string s;
  s.reserve(name.size() + 2);
  s += '\'';
  s += name;
  s += '\'';
  return s;
}

ValueType Signature::resultValueType() const {
  if (!valid)
    return ValueType();
  if (results.size() == 1 && !returnsTuple)
    return ValueType::ofTensor(results[0]);
  ValueType tuple;
  tuple.kind = ValueType::Tuple;
  tuple.elements = results;
  return tuple;
}

OverrideEntry *OverrideScope::find(OpKind kind) {
  for (OverrideEntry &e : entries)
    if (e.op->kind == kind)
      return &e;
  return nullptr;
}

Sema::Sema(Module &module, DiagnosticEngine &diags)
    : module(module), diags(diags), sm(diags.getSourceManager()) {}

bool Sema::run() {
  collectDecls();
  for (FnDecl *fn : fnOrder)
    checkSignature(*fn, *fnInfos[fn]);
  for (FnDecl *fn : fnOrder) {
    checkFnAnnotations(*fn, *fnInfos[fn]);
    buildGradSignature(*fn, *fnInfos[fn]);
  }
  checkGradNameClashes();
  for (DeclPtr &decl : module.decls)
    if (auto *rule = llvm::dyn_cast_or_null<RuleDecl>(decl.get()))
      checkRuleDecl(*rule);
  for (FnDecl *fn : fnOrder)
    checkFn(*fn);
  checkRecursion();
  flushContextNotes();
  return errors == 0;
}

//===----------------------------------------------------------------------===//
// Reporting
//===----------------------------------------------------------------------===//

InFlightDiagnostic Sema::report(SourceLoc loc, diag::ID id) {
  flushContextNotes();
  if (DiagnosticEngine::getSeverity(id) == Severity::Error)
    ++errors;
  contextPending = !context.empty();
  return diags.report(loc, id);
}

InFlightDiagnostic Sema::note(SourceLoc loc, diag::ID id) {
  return diags.report(loc, id);
}

void Sema::flushContextNotes() {
  if (!contextPending)
    return;
  contextPending = false;
  for (const ContextNote &c : llvm::reverse(context))
    diags.report(c.loc, c.id) << c.rule << c.target << c.range;
}

std::string Sema::sourceText(SourceRange range) const {
  if (!range.isValid() || range.end.getRaw() < range.begin.getRaw())
    return "";
  llvm::StringRef text = sm.getCharacterData(range.begin);
  return text.take_front(range.end.getRaw() - range.begin.getRaw()).str();
}

std::string Sema::didYouMean(llvm::StringRef name,
                             llvm::ArrayRef<std::string> candidates) {
  // About one edit in three characters, as clang's typo correction.
  unsigned limit = std::max<unsigned>(1, (name.size() + 2) / 3);
  const std::string *best = nullptr;
  unsigned bestDistance = limit + 1;
  for (const std::string &c : candidates) {
    if (c == name)
      continue;
    unsigned d = name.equals_insensitive(c)
                     ? 0
                     : name.edit_distance(c, /*AllowReplacements=*/true, limit);
    // A suggestion that shares nothing with the name is noise ('x' for 'y').
    if (d < bestDistance && d < std::max(name.size(), c.size()) &&
        d < name.size()) {
      bestDistance = d;
      best = &c;
    }
  }
  return best ? "; did you mean '" + *best + "'?" : "";
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

void Sema::collectDecls() {
  for (DeclPtr &decl : module.decls) {
    if (!decl)
      continue;
    auto *fn = llvm::dyn_cast<FnDecl>(decl.get());
    if (fn) {
      fnOrder.push_back(fn);
      fnInfos[fn] = std::make_unique<FnInfo>();
    }
    const Ident &name = decl->name;
    if (name.name.empty())
      continue;
    const Decl *first = nullptr;
    if (FnDecl *f = fns.lookup(name.name))
      first = f;
    else if (RuleDecl *r = rules.lookup(name.name))
      first = r;
    if (first) {
      report(name.range.begin, diag::err_redefinition)
          << name.name << name.range;
      note(first->name.range.begin, diag::note_first_definition)
          << name.name << first->name.range;
      continue;
    }
    if (fn) {
      fns[name.name] = fn;
      if (lookupOp(name.name))
        report(name.range.begin, diag::err_fn_named_like_op)
            << name.name << name.range;
    } else {
      rules[name.name] = llvm::cast<RuleDecl>(decl.get());
    }
  }
}

/// Reports the second of two parameters with one name.
static void checkDuplicateParams(Sema &sema, llvm::ArrayRef<Param> params) {
  llvm::StringMap<const Param *> seen;
  for (const Param &p : params) {
    auto [it, inserted] = seen.try_emplace(p.name.name, &p);
    if (inserted || p.name.name.empty())
      continue;
    sema.report(p.name.range.begin, diag::err_duplicate_param)
        << p.name.name << p.name.range;
    sema.note(it->second->name.range.begin, diag::note_first_definition)
        << p.name.name << it->second->name.range;
  }
}

void Sema::checkSignature(FnDecl &fn, FnInfo &info) {
  Signature &sig = info.sig;
  sig.fn = &fn;
  sig.name = fn.name.name;
  checkDuplicateParams(*this, fn.params);
  llvm::StringSet<> sizeNames;
  for (const Param &p : fn.params) {
    sig.paramNames.push_back(p.name.name);
    if (!p.type) {
      // Only a parse error leaves a parameter without a type.
      sig.valid = false;
      sig.params.push_back(TensorType(DType::F32));
      continue;
    }
    if (!checkTypeSize(*p.type))
      sig.valid = false;
    sig.params.push_back(p.type->toType());
    for (const DimExpr &d : p.type->dims)
      if (d.dim.isNamed())
        sizeNames.insert(d.dim.getName());
  }
  for (const TypeExpr &result : fn.results) {
    for (const DimExpr &d : result.dims) {
      if (!d.dim.isNamed() || sizeNames.contains(d.dim.getName()))
        continue;
      report(d.range.begin, diag::err_result_size_unbound)
          << d.dim.getName() << fn.name.name << d.range;
      sig.valid = false;
    }
    if (!checkTypeSize(result))
      sig.valid = false;
    sig.results.push_back(result.toType());
  }
  if (fn.results.empty())
    sig.valid = false;
  sig.returnsTuple = fn.returnsTuple;
  fn.paramTypes = sig.params;
  fn.resultTypes = sig.results;
}

// A rank above maxRank cannot be passed through the header's C++ layer;
// an element count (or a stride) past int64 cannot be computed at all.
bool Sema::checkTypeSize(const TypeExpr &type) {
  TensorType t = type.toType();
  if (t.getRank() > maxRank) {
    report(type.range.begin, diag::err_type_rank)
        << t.str() << t.getRank() << maxRank << type.range;
    return false;
  }
  if (!knownSizesFit(t.shape)) {
    report(type.range.begin, diag::err_type_too_large) << t.str() << type.range;
    return false;
  }
  return true;
}

/// NAME_grad takes f's parameters, then one cotangent per result unless f
/// returns one floating-point scalar (then the seed is 1, as for a loss),
/// and returns the gradients of the @grad parameters in parameter order.
void Sema::buildGradSignature(const FnDecl &fn, FnInfo &info) {
  if (!fn.wantsGrad || fn.name.name.empty())
    return;
  const Signature &sig = info.sig;
  Signature grad;
  grad.fn = &fn;
  grad.isGrad = true;
  grad.name = fn.name.name + "_grad";
  grad.paramNames = sig.paramNames;
  grad.params = sig.params;
  bool scalarLoss = sig.results.size() == 1 && sig.results[0].isScalar() &&
                    isFloat(sig.results[0].dtype);
  if (!scalarLoss) {
    for (size_t i = 0; i < sig.results.size(); ++i) {
      grad.paramNames.push_back(
          sig.results.size() == 1 ? "d_out" : "d_out" + std::to_string(i));
      grad.params.push_back(sig.results[i]);
    }
  }
  for (unsigned i : fn.gradParams)
    grad.results.push_back(sig.params[i]);
  grad.returnsTuple = grad.results.size() > 1;
  grad.valid = sig.valid;
  info.gradSig = std::move(grad);
}

void Sema::checkGradNameClashes() {
  for (FnDecl *fn : fnOrder) {
    const FnInfo &info = *fnInfos[fn];
    if (!info.gradSig)
      continue;
    FnDecl *clash = fns.lookup(info.gradSig->name);
    if (!clash)
      continue;
    report(clash->name.range.begin, diag::err_grad_fn_clash)
        << clash->name.name << fn->name.name << clash->name.range;
    note(info.gradAnnotation.begin, diag::note_grad_requested_here)
        << fn->name.name << info.gradAnnotation;
  }
}

void Sema::checkRuleDecl(RuleDecl &rule) {
  for (const Annotation &a : rule.annotations) {
    if (a.name.name == "surrogate")
      checkSurrogateAnnotation(a);
    else
      rejectAnnotation(a, "a rule");
  }
  checkDuplicateParams(*this, rule.params);

  // Resolve names without types: a rule is typed where it is used, but
  // a misspelt name is an error even in a rule that nobody uses. A copy is
  // checked, so that the rule as written keeps no types of its own.
  std::vector<StmtPtr> body;
  cloneStmts(rule.body, body);
  BodyScope scope;
  scope.kind = BodyScope::RuleBody;
  scope.description = "rule " + quoted(rule.name.name);
  for (const Param &p : rule.params)
    bindParam(p.name, ValueType(), scope);
  unsigned before = errors;
  if (ReturnStmt *ret = checkBody(body, scope, rule.name.range.begin))
    checkReturnValue(ret->value.get(), scope, {});
  if (errors != before)
    brokenRules.insert(&rule);
}

/// Whether a returned value has the declared result type. A function
/// declared `-> (f32[N])` may return its one tensor without a tuple.
static bool returnFits(const ValueType &got, const ValueType &expected) {
  if (got.str() == expected.str())
    return true;
  return got.isTensor() && expected.kind == ValueType::Tuple &&
         expected.elements.size() == 1 && expected.elements[0] == got.tensor;
}

void Sema::checkFn(FnDecl &fn) {
  FnInfo &info = *fnInfos[&fn];
  const Signature &sig = info.sig;
  // An extern's body is C++: its header is checked after Sema
  // (clangjit::checkExternHeaders); only its rule is gradc's.
  if (fn.isExtern) {
    if (info.customGradRule)
      instantiateCustomGrad(fn, info);
    return;
  }
  BodyScope scope;
  scope.kind = BodyScope::FnBody;
  scope.description = "function " + quoted(fn.name.name);
  scope.overrides = info.overrides.get();
  scope.calls = {&info.forwardCalls, &info.gradientCalls};
  for (size_t i = 0; i < fn.params.size(); ++i) {
    const Param &p = fn.params[i];
    bindParam(p.name, p.type ? ValueType::ofTensor(sig.params[i]) : ValueType(),
              scope);
    if (p.type)
      for (const DimExpr &d : p.type->dims)
        if (d.dim.isNamed())
          scope.sizeNames.insert(d.dim.getName());
  }

  ReturnStmt *ret = checkBody(fn.body, scope, fn.name.range.begin);
  if (ret && ret->value) {
    std::vector<DType> hints;
    for (const TensorType &t : sig.results)
      hints.push_back(t.dtype);
    Expr *value = ret->value.get();
    ValueType got = checkReturnValue(value, scope, hints);
    ValueType expected = sig.resultValueType();
    if (got.isKnown() && expected.isKnown() && !returnFits(got, expected))
      report(value->getLoc(), diag::err_return_type)
          << fn.name.name << expected.str() << got.str() << value->getRange();
  }

  // A custom gradient replaces the body's: its overrides change nothing.
  bool hasCustomGrad = info.customGradRule || fn.gradBlock;
  if (info.overrides && hasCustomGrad && !info.overrides->entries.empty())
    report(info.overrides->entries.front().argRange.begin,
           diag::warn_override_custom_grad)
        << fn.name.name;
  else if (info.overrides)
    warnUnusedOverrides(*info.overrides);
  if (fn.gradBlock)
    checkGradBlock(fn, info, scope);
  if (info.customGradRule)
    instantiateCustomGrad(fn, info);
}

//===----------------------------------------------------------------------===//
// Callees and the call graph
//===----------------------------------------------------------------------===//

const Signature *Sema::lookupCallee(llvm::StringRef name,
                                    const FnDecl *&notGenerated) const {
  notGenerated = nullptr;
  if (FnDecl *fn = fns.lookup(name))
    return &fnInfos.find(fn)->second->sig;
  if (!name.ends_with("_grad"))
    return nullptr;
  FnDecl *base = fns.lookup(name.drop_back(5));
  if (!base)
    return nullptr;
  const FnInfo &info = *fnInfos.find(base)->second;
  if (info.gradSig)
    return &*info.gradSig;
  notGenerated = base;
  return nullptr;
}

std::vector<std::string> Sema::calleeNames() const {
  std::vector<std::string> names;
  for (const OpInfo &op : getAllOps())
    if (op.userVisible)
      names.push_back(op.name);
  for (const FnDecl *fn : fnOrder) {
    names.push_back(fn->name.name);
    if (fnInfos.find(fn)->second->gradSig)
      names.push_back(fn->name.name + "_grad");
  }
  return names;
}

/// "f" for a function's forward computation, "f_grad" for its gradient.
static std::string nodeName(const CallNode &node) {
  return node.fn->name.name + (node.gradient ? "_grad" : "");
}

/// Finds call cycles with a depth-first search over the call nodes. The
/// search keeps its own stack, so that a long chain of calls cannot
/// overflow the C++ stack.
///
/// Edges: the forward computation of f calls what its body calls (the
/// forward of g for `g(x)`, the gradient of g for `g_grad(x)`). The
/// gradient of f recomputes f, and needs the gradients of f's callees
/// unless a custom gradient replaces them; the rules it uses call what
/// their bodies call.
void Sema::checkRecursion() {
  auto edgesOf = [&](const CallNode &node) {
    std::vector<CallSite> edges;
    const FnInfo &info = *fnInfos.find(node.fn)->second;
    if (!node.gradient)
      return info.forwardCalls;
    edges.push_back({CallNode{node.fn, false}, SourceRange()});
    if (!node.fn->customGrad && !node.fn->gradBlock && !info.customGradRule)
      for (const CallSite &c : info.forwardCalls)
        edges.push_back({CallNode{c.target.fn, true}, c.range});
    llvm::append_range(edges, info.gradientCalls);
    return edges;
  };

  struct Frame {
    CallNode node;
    std::vector<CallSite> edges;
    size_t next = 0;
    SourceRange via; ///< the call that led here
  };
  std::map<CallNode, int> state; // 1: on the stack, 2: done
  // A cycle through gradients follows from a cycle of the same functions'
  // forward calls; one error per set of functions is enough.
  std::set<const FnDecl *> reported;
  std::vector<Frame> stack;
  auto visit = [&](CallNode root) {
    if (state[root])
      return;
    stack.push_back({root, edgesOf(root), 0, SourceRange()});
    state[root] = 1;
    while (!stack.empty()) {
      Frame &top = stack.back();
      if (top.next == top.edges.size()) {
        state[top.node] = 2;
        stack.pop_back();
        continue;
      }
      CallSite edge = top.edges[top.next++];
      int s = state[edge.target];
      if (s == 2)
        continue;
      if (s == 0) {
        state[edge.target] = 1;
        stack.push_back({edge.target, edgesOf(edge.target), 0, edge.range});
        continue;
      }
      // A cycle: from the frame of edge.target to the top, then back.
      size_t start = 0;
      while (!(stack[start].node == edge.target))
        ++start;
      bool known = true;
      for (size_t i = start; i < stack.size(); ++i)
        known &= reported.count(stack[i].node.fn) != 0;
      if (known)
        continue;
      for (size_t i = start; i < stack.size(); ++i)
        reported.insert(stack[i].node.fn);
      std::string chain;
      SourceRange at;
      for (size_t i = start; i < stack.size(); ++i) {
        chain += nodeName(stack[i].node) + " -> ";
        if (i > start && !at.isValid())
          at = stack[i].via;
      }
      chain += nodeName(edge.target);
      if (!at.isValid())
        at = edge.range;
      if (!at.isValid())
        at = edge.target.fn->name.range;
      report(at.begin, diag::err_recursion) << chain << at;
    }
  };
  for (const FnDecl *fn : fnOrder)
    visit({fn, false});
  for (const FnDecl *fn : fnOrder)
    visit({fn, true});
}
