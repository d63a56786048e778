//===- Mangle.cpp - C and C++ names of generated code ---------------------===//
//
// Generated code keeps the source's names (`h`, `logits`, `d_h`), but a
// DSL identifier may be a C++ keyword (`int`, `delete`), a name the
// generated code itself needs (`std`, `gradc`), a macro of a standard
// header (`NAN`), or an identifier the implementation reserves (`_X`,
// `a__b`). mangleIdentifier repairs each such name deterministically, and
// NameScope makes names unique within a function.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/Mangle.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <iterator>

using namespace gradc;
using namespace gradc::emit;

namespace {

/// C++20 keywords and alternative tokens, C keywords, the names generated
/// code uses, and macros a header may define that the compilers' tables
/// below need not list (`errno`, `assert`).
const char *const reservedNames[] = {
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Bool",
    "_Complex",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "assert",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "char8_t",
    "class",
    "compl",
    "concept",
    "const",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "errno",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "gradc",
    "if",
    "inline",
    "int",
    "int16_t",
    "int32_t",
    "int64_t",
    "int8_t",
    "intptr_t",
    "long",
    "main",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "ptrdiff_t",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "restrict",
    "return",
    "short",
    "signed",
    "size_t",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "std",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "uint8_t",
    "uintptr_t",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
};

/// Every macro that g++-12 and clang++-19 predefine or that the headers of
/// generated code define, sorted: derived from the compilers by
/// utils/gen-macro-names.py, never edited by hand (`linux`, `unix`,
/// `M_PI`, `RAND_MAX`, `EXIT_SUCCESS`, `FP_NAN`, `NAN`, ...).
const char *const macroNames[] = {
#include "MacroNames.inc"
};

bool isMacroName(llvm::StringRef name) {
  auto less = [](const char *a, llvm::StringRef b) { return b.compare(a) > 0; };
  const char *const *end = std::end(macroNames);
  const char *const *it =
      std::lower_bound(std::begin(macroNames), end, name, less);
  return it != end && name == *it;
}

bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// "out" for one result, "out0", "out1", ... for several.
std::vector<std::string> resultNames(size_t n) {
  if (n == 1)
    return {"out"};
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i)
    names.push_back("out" + std::to_string(i));
  return names;
}

/// The outputs of a function: "d_<param>" for a generated gradient and
/// the backward half of a split one; the results, then the residuals under
/// the names that NAME_bwd gives them, for the forward half; the results,
/// then "d_<param>", for NAME_value_and_grad; "out" / "outK" otherwise.
std::vector<std::string> outputNames(const ir::Module &module,
                                     const ir::Function &fn) {
  size_t n = fn.getReturns().size();
  const ir::Function *primal = findPrimal(module, fn);
  if (!primal)
    return resultNames(n);
  const ir::Function::GradSpec &spec = *primal->getGradSpec();
  if (fn.getRole() == ir::Function::Role::Forward) {
    size_t numResults = primal->getReturns().size();
    std::vector<std::string> names = resultNames(numResults);
    const ir::Function *bwd = module.lookup(spec.bwdName);
    size_t numParams = primal->getParams().size();
    for (size_t i = numResults; i < n; ++i) {
      size_t param = numParams + i; // after the parameters and results
      bool named = bwd && param < bwd->getParams().size();
      names.push_back(named ? bwd->getParam(param)->getName().str()
                            : "res" + std::to_string(i - numResults));
    }
    return names;
  }
  // NAME_value_and_grad: the results as NAME names them, then the
  // gradients.
  size_t numResults = fn.getRole() == ir::Function::Role::ValueAndGrad
                          ? primal->getReturns().size()
                          : 0;
  if (spec.wrt.size() + numResults != n)
    return resultNames(n);
  std::vector<std::string> names = resultNames(numResults);
  for (unsigned index : spec.wrt)
    names.push_back(index < primal->getParams().size()
                        ? "d_" + primal->getParam(index)->getName().str()
                        : "d_" + std::to_string(index));
  return names;
}

} // namespace

std::string emit::sanitizeModuleName(llvm::StringRef name) {
  std::string result;
  for (char c : name)
    result.push_back(isIdentChar(c) ? c : '_');
  if (result.empty() || llvm::isDigit(result[0]))
    result = "gradc_" + result;
  return result;
}

std::string emit::moduleNameFromPath(llvm::StringRef path) {
  return sanitizeModuleName(llvm::sys::path::stem(path));
}

std::string emit::cSymbolName(llvm::StringRef module,
                              llvm::StringRef function) {
  std::string symbol = (module + "_" + function).str();
  for (char &c : symbol)
    if (!isIdentChar(c))
      c = '_';
  return symbol;
}

bool emit::isReservedName(llvm::StringRef name) {
  if (name.starts_with("GRADC_") || isMacroName(name))
    return true;
  // A set, not a walk over the list: every temporary of a 100,000-step
  // chain is named.
  static const llvm::StringSet<> reserved = [] {
    llvm::StringSet<> set;
    for (const char *r : reservedNames)
      set.insert(r);
    return set;
  }();
  return reserved.contains(name);
}

std::string emit::mangleIdentifier(llvm::StringRef name) {
  std::string result;
  for (char c : name)
    result.push_back(isIdentChar(c) ? c : '_');
  if (result.empty() || llvm::isDigit(result[0]))
    result = "v" + result;
  // Any identifier containing "__" is reserved in C++.
  for (size_t pos; (pos = result.find("__")) != std::string::npos;)
    result.replace(pos, 2, "_0_");
  // So is "_" followed by an upper-case letter.
  if (result.size() > 1 && result[0] == '_' && llvm::isUpper(result[1]))
    result = "v" + result;
  if (isReservedName(result))
    result += "_";
  return result;
}

std::string NameScope::claim(llvm::StringRef base) {
  std::string name = mangleIdentifier(base);
  if (taken.insert(name).second)
    return name;
  std::string stem = llvm::StringRef(name).ends_with("_") ? name : name + "_";
  for (unsigned i = 1;; ++i) {
    std::string candidate = stem + std::to_string(i);
    if (taken.insert(candidate).second)
      return candidate;
  }
}

std::string
NameScope::claimFirstFree(llvm::ArrayRef<llvm::StringRef> candidates,
                          llvm::StringRef fallback) {
  for (llvm::StringRef c : candidates)
    if (taken.insert(c).second)
      return c.str();
  return claim(fallback);
}

const ir::Function *emit::findPrimal(const ir::Module &module,
                                     const ir::Function &fn) {
  using Role = ir::Function::Role;
  Role role = fn.getRole();
  if (role != Role::Grad && role != Role::Forward && role != Role::Backward &&
      role != Role::ValueAndGrad)
    return nullptr;
  for (const auto &f : module.getFunctions()) {
    const auto &spec = f->getGradSpec();
    if (!spec)
      continue;
    const std::string &name = role == Role::Grad       ? spec->gradName
                              : role == Role::Forward  ? spec->fwdName
                              : role == Role::Backward ? spec->bwdName
                                                       : spec->valueAndGradName;
    if (name == fn.getName())
      return f.get();
  }
  return nullptr;
}

bool emit::isExported(const ir::Function &fn) {
  return fn.getRole() != ir::Function::Role::RuleInstance &&
         fn.getRole() != ir::Function::Role::LoopBody;
}

std::vector<CParam> emit::getCParams(const ir::Module &module,
                                     const ir::Function &fn, NameScope &scope) {
  std::vector<CParam> params;
  for (const std::string &size : fn.getSizeNames()) {
    CParam p;
    p.kind = CParamKind::Size;
    p.name = scope.claim(size);
    p.sourceName = size;
    params.push_back(p);
  }
  for (const ir::Value *v : fn.getParams()) {
    CParam p;
    p.kind = CParamKind::Input;
    p.name = scope.claim(v->getName());
    p.sourceName = v->getName().str();
    p.dtype = v->getType().dtype;
    p.type = v->getType();
    p.value = v;
    params.push_back(p);
  }
  std::vector<std::string> outs = outputNames(module, fn);
  for (unsigned i = 0; i < fn.getReturns().size(); ++i) {
    const ir::Value *v = fn.getReturns()[i];
    CParam p;
    p.kind = CParamKind::Output;
    p.name = scope.claim(outs[i]);
    p.sourceName = outs[i];
    p.dtype = v->getType().dtype;
    p.type = v->getType();
    p.value = v;
    p.resultIndex = i;
    params.push_back(p);
  }
  return params;
}

llvm::StringRef emit::cTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float";
  case DType::F64:
    return "double";
  case DType::I32:
    return "int32_t";
  case DType::Bool:
    return "uint8_t";
  }
  llvm_unreachable("unknown dtype");
}

std::string emit::cParamDecl(const CParam &param) {
  switch (param.kind) {
  case CParamKind::Size:
    return "int64_t " + param.name;
  case CParamKind::Input:
    if (param.type.isScalar())
      return (cTypeName(param.dtype) + " " + param.name).str();
    return ("const " + cTypeName(param.dtype) + " *" + param.name).str();
  case CParamKind::Output:
    return (cTypeName(param.dtype) + " *" + param.name).str();
  }
  llvm_unreachable("unknown parameter kind");
}

std::string emit::sourceSignature(const ir::Function &fn) {
  std::string s = "fn " + fn.getName().str() + "(";
  for (size_t i = 0; i < fn.getParams().size(); ++i) {
    const ir::Value *p = fn.getParam(i);
    s += (i ? ", " : "") + p->getName().str() + ": " + p->getType().str();
  }
  s += ") -> ";
  llvm::ArrayRef<ir::Value *> rets = fn.getReturns();
  if (rets.size() == 1)
    return s + rets[0]->getType().str();
  s += "(";
  for (size_t i = 0; i < rets.size(); ++i)
    s += (i ? ", " : "") + rets[i]->getType().str();
  return s + ")";
}

std::vector<std::string> emit::describeFunction(const ir::Module &module,
                                                const ir::Function &fn) {
  std::vector<std::string> lines;
  if (const ir::Function *primal = findPrimal(module, fn)) {
    const ir::Function::GradSpec &spec = *primal->getGradSpec();
    std::vector<std::string> wrt;
    for (unsigned i : spec.wrt)
      if (i < primal->getParams().size())
        wrt.push_back(primal->getParam(i)->getName().str());
    std::string of = "'" + primal->getName().str() + "'";
    switch (fn.getRole()) {
    case ir::Function::Role::Forward:
      lines.push_back("The forward half of the split gradient of " + of +
                      ": its results, then the residuals that " + spec.bwdName +
                      " takes:");
      break;
    case ir::Function::Role::Backward:
      lines.push_back("The backward half of the split gradient of " + of +
                      " with respect to " + llvm::join(wrt, ", ") + ": what " +
                      spec.fwdName +
                      " took and returned, then one cotangent per result:");
      break;
    case ir::Function::Role::ValueAndGrad:
      lines.push_back("The results of " + of +
                      ", then its gradient with respect to " +
                      llvm::join(wrt, ", ") + ", from one forward pass:");
      break;
    default:
      lines.push_back("The gradient of " + of + " with respect to " +
                      llvm::join(wrt, ", ") + ":");
    }
  }
  lines.push_back(sourceSignature(fn));
  return lines;
}

bool emit::checkBackendSupport(const ir::Module &module,
                               llvm::StringRef backend,
                               DiagnosticEngine &diags) {
  for (const auto &fn : module.getFunctions())
    for (const auto &op : fn->getOps()) {
      OpKind kind = op->getKind();
      if (kind != OpKind::For && kind != OpKind::Take &&
          kind != OpKind::ScatterAdd && kind != OpKind::If &&
          kind != OpKind::Slice && kind != OpKind::Pad)
        continue;
      llvm::StringRef what = kind == OpKind::For  ? "a loop"
                             : kind == OpKind::If ? "a branch"
                                                  : "indexing";
      diags.report(op->getLoc(), diag::err_emit_loop_unsupported)
          << backend << what << op->getName();
      return false;
    }
  return true;
}
