//===- Verifier.cpp - Checking IR invariants ------------------------------===//
//
// Re-checks everything the rest of gradc assumes about a module, so that a
// bug in IRGen, differentiation or a pass is caught right after it runs,
// with a message that names the pass, the function and the op:
//
//   after pass 'cse': in function 'f': operand 1 of 'add' (%y) is used
//   before it is defined
//
// Per module: unique function names, no recursion. Per function: the
// gradient spec, every op (below) and the returned values. Per op:
//   1. operands present and defined earlier in the same function;
//   2. results owned by the op;
//   3. attributes known to the op table and of the right kind;
//   4. types: constants and calls have their own checks; every other op
//      is re-typed with inferOpTypes on a copy of its attributes, and the
//      result types and the (normalised) attributes must equal the copy;
//   5. the gradient rule an annotation chose, against the op's signature.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Verifier.h"

#include "gradc/IR/Printer.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace gradc;
using namespace gradc::ir;

bool ir::unifyParamType(const TensorType &param, const TensorType &arg,
                        SizeBindings &bindings, std::string &conflictName) {
  if (param.dtype != arg.dtype || param.getRank() != arg.getRank())
    return false;
  for (unsigned i = 0; i < param.getRank(); ++i) {
    const Dim &p = param.shape[i], &a = arg.shape[i];
    if (p.isKnown()) {
      if (p != a)
        return false;
      continue;
    }
    auto [it, inserted] = bindings.emplace(p.getName().str(), a);
    if (!inserted && it->second != a) {
      conflictName = p.getName().str();
      return false;
    }
  }
  return true;
}

TensorType ir::substituteSizes(const TensorType &type,
                               const SizeBindings &bindings) {
  TensorType result = type;
  for (Dim &d : result.shape) {
    if (!d.isNamed())
      continue;
    auto it = bindings.find(d.getName().str());
    if (it != bindings.end())
      d = it->second;
  }
  return result;
}

namespace {

/// `axis = [0], keepdims = false`
std::string attrDictStr(const AttrList &attrs) {
  std::string s;
  for (const NamedAttr &a : attrs.entries()) {
    if (!s.empty())
      s += ", ";
    s += a.name;
    s += " = ";
    s += attrValueStr(a.value);
  }
  return s;
}

bool hasKind(const AttrValue &value, AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return std::holds_alternative<int64_t>(value);
  case AttrKind::Axes:
    return std::holds_alternative<int64_t>(value) ||
           std::holds_alternative<std::vector<int64_t>>(value);
  case AttrKind::IntList:
    return std::holds_alternative<std::vector<int64_t>>(value);
  case AttrKind::Bool:
    return std::holds_alternative<bool>(value);
  case AttrKind::Shape:
  case AttrKind::Dim:
    return std::holds_alternative<Shape>(value);
  case AttrKind::Floats:
    return std::holds_alternative<std::vector<double>>(value);
  case AttrKind::Symbol:
    return std::holds_alternative<std::string>(value);
  }
  return false;
}

const char *kindDescription(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "an integer";
  case AttrKind::Axes:
    return "an integer or a list of integers";
  case AttrKind::IntList:
    return "a list of integers";
  case AttrKind::Bool:
    return "a bool";
  case AttrKind::Shape:
  case AttrKind::Dim:
    return "a shape";
  case AttrKind::Floats:
    return "a list of numbers";
  case AttrKind::Symbol:
    return "a string";
  }
  return "a value";
}

/// The attributes in the order the op table declares them.
/// What every message starts with: "after pass 'cse': ", "after passes
/// 'differentiate,canonicalize': " for several steps verified at once, or
/// nothing for input IR.
std::string prefixFor(llvm::StringRef afterPass) {
  if (afterPass.empty())
    return "";
  return ((afterPass.contains(',') ? "after passes '" : "after pass '") +
          afterPass + "': ")
      .str();
}

AttrList inDeclaredOrder(const OpInfo &info, const AttrList &attrs) {
  AttrList ordered;
  for (const AttrInfo &a : info.attrs)
    if (const AttrValue *v = attrs.find(a.name))
      ordered.set(a.name, *v);
  return ordered;
}

class FunctionVerifier {
public:
  FunctionVerifier(const Module &module, const Function &fn,
                   DiagnosticEngine &diags, llvm::StringRef afterPass)
      : module(module), fn(fn), diags(diags), prefix(prefixFor(afterPass)) {}

  bool verify() {
    verifyGradSpec();
    for (const Value *p : fn.getParams())
      definedAt[p] = 0;
    const auto &ops = fn.getOps();
    for (size_t i = 0; i < ops.size(); ++i) {
      verifyOp(*ops[i], i);
      for (const Value *r : ops[i]->getResults())
        definedAt[r] = i + 1;
    }
    for (size_t i = 0; i < fn.getReturns().size(); ++i) {
      const Value *v = fn.getReturns()[i];
      if (!v || !definedAt.count(v))
        error(fn.getLoc(), diag::err_verify_bad_return) << i;
    }
    return ok;
  }

private:
  const Module &module;
  const Function &fn;
  DiagnosticEngine &diags;
  /// Names for messages, built at the first one: naming every value of a
  /// 10,000-op function was most of the verifier's time on valid IR.
  mutable std::optional<ValueNamer> names;
  std::string prefix;
  /// Where each value is defined: 0 for a parameter, i + 1 for a result
  /// of op i.
  llvm::DenseMap<const Value *, size_t> definedAt;
  bool ok = true;

  /// An op as messages name it, described only when a message is built.
  struct OpDesc {
    const FunctionVerifier &verifier;
    const Op &op;
    size_t index;
    operator std::string() const { return verifier.describe(op, index); }
  };

  /// An error with the pass prefix and the function name as %0 and %1.
  InFlightDiagnostic error(SourceLoc loc, diag::ID id) {
    ok = false;
    InFlightDiagnostic d = diags.report(loc, id);
    d << prefix << fn.getName();
    return d;
  }

  /// `'add' (%y)`, or `'call' (op 3)` for an op without results.
  std::string describe(const Op &op, size_t index) const {
    std::string s = ("'" + op.getName() + "' (").str();
    if (op.getNumResults()) {
      if (!names)
        names.emplace(fn);
      s += names->get(op.getResult(0));
    } else
      s += "op " + std::to_string(index);
    return s + ")";
  }

  //===--------------------------------------------------------------------===//
  // The function
  //===--------------------------------------------------------------------===//

  void verifyGradSpec() {
    const auto &spec = fn.getGradSpec();
    if (!spec)
      return;
    SourceLoc loc = spec->loc.isValid() ? spec->loc : fn.getLoc();
    if (spec->gradName.empty())
      error(loc, diag::err_verify_grad_name);
    for (size_t i = 0; i < spec->wrt.size(); ++i) {
      unsigned index = spec->wrt[i];
      if (i > 0 && index <= spec->wrt[i - 1]) {
        std::string list;
        for (unsigned w : spec->wrt)
          list += (list.empty() ? "" : ", ") + std::to_string(w);
        error(loc, diag::err_verify_wrt_order) << "[" + list + "]";
        return;
      }
      if (index >= fn.getParams().size()) {
        error(loc, diag::err_verify_wrt_range)
            << index << fn.getParams().size();
        continue;
      }
      const Value *p = fn.getParam(index);
      if (!isFloat(p->getType().dtype))
        error(loc, diag::err_verify_wrt_float)
            << index << p->getName() << p->getType().str();
    }
  }

  //===--------------------------------------------------------------------===//
  // One op
  //===--------------------------------------------------------------------===//

  void verifyOp(const Op &op, size_t index) {
    OpDesc desc{*this, op, index};
    bool operandsOk = verifyOperands(op, index, desc);
    verifyResults(op, desc);
    if (!verifyAttrKinds(op, desc) || !operandsOk)
      return;
    verifyAccumulate(op, desc);
    switch (op.getKind()) {
    case OpKind::Constant:
      verifyConstant(op, desc);
      break;
    case OpKind::Call:
    case OpKind::ExternCall:
      verifyCall(op, desc);
      break;
    case OpKind::For:
      verifyLoop(op, desc);
      break;
    case OpKind::If:
      verifyIf(op, desc);
      break;
    default:
      verifyTyped(op, desc);
      break;
    }
    verifyGradRule(op, desc);
  }

  /// Operands are present and dominate the op. Returns false if an
  /// operand is missing (types cannot be checked then).
  bool verifyOperands(const Op &op, size_t index, const OpDesc &desc) {
    bool present = true;
    for (unsigned i = 0; i < op.getNumOperands(); ++i) {
      const Value *v = op.getOperand(i);
      if (!v) {
        error(op.getLoc(), diag::err_verify_null_operand) << i << desc;
        present = false;
        continue;
      }
      auto it = definedAt.find(v);
      if (it != definedAt.end())
        continue; // defined by a parameter or an earlier op
      if (isDefinedLater(v, index))
        error(op.getLoc(), diag::err_verify_use_before_def) << i << desc;
      else
        error(op.getLoc(), diag::err_verify_foreign_operand) << i << desc;
    }
    return present;
  }

  bool isDefinedLater(const Value *v, size_t index) const {
    const auto &ops = fn.getOps();
    for (size_t i = index; i < ops.size(); ++i)
      if (ops[i].get() == v->getDefiningOp())
        return true;
    return false;
  }

  void verifyResults(const Op &op, const OpDesc &desc) {
    for (unsigned i = 0; i < op.getNumResults(); ++i) {
      const Value *r = op.getResult(i);
      if (!r || r->getDefiningOp() != &op || r->getResultIndex() != i)
        error(op.getLoc(), diag::err_verify_result_owner) << i << desc;
    }
  }

  bool verifyAttrKinds(const Op &op, const OpDesc &desc) {
    bool kindsOk = true;
    const OpInfo &info = op.getInfo();
    for (const NamedAttr &a : op.getAttrs().entries()) {
      const AttrInfo *attr = info.findAttr(a.name);
      if (!attr) {
        error(op.getLoc(), diag::err_verify_unknown_attr) << desc << a.name;
        kindsOk = false;
      } else if (!hasKind(a.value, attr->kind)) {
        error(op.getLoc(), diag::err_verify_attr_kind)
            << desc << a.name << kindDescription(attr->kind);
        kindsOk = false;
      }
    }
    if (!kindsOk)
      return false;
    if (info.inferTypes)
      return true; // inferOpTypes reports missing attributes
    for (const AttrInfo &a : info.attrs) {
      if (a.required && !op.getAttrs().has(a.name)) {
        error(op.getLoc(), diag::err_verify_missing_attr) << desc << a.name;
        kindsOk = false;
      }
    }
    return kindsOk;
  }

  /// `accumulate = "f32"` (the accumulate-f32 pass) only where the data
  /// is f32: an f64 or i32 sum has one order.
  void verifyAccumulate(const Op &op, const OpDesc &desc) {
    const AttrValue *v = op.getAttrs().find("accumulate");
    if (!v)
      return;
    const std::string &value = std::get<std::string>(*v);
    if (value != "f32" || op.getNumOperands() == 0 ||
        op.getOperand(0)->getType().dtype != DType::F32)
      error(op.getLoc(), diag::err_verify_accumulate) << desc << value;
  }

  std::vector<TensorType> operandTypes(const Op &op) const {
    std::vector<TensorType> types;
    for (const Value *v : op.getOperands())
      types.push_back(v->getType());
    return types;
  }

  /// An op typed by the op table: re-infer on a copy of the attributes.
  void verifyTyped(const Op &op, const OpDesc &desc) {
    std::vector<TensorType> operands = operandTypes(op);
    if (op.getKind() == OpKind::Unstack && !checkUnstackCount(op, desc))
      return;
    AttrList attrs = op.getAttrs();
    llvm::SmallVector<TensorType, 2> results;
    OpTypeError typeError;
    if (!inferOpTypes(op.getKind(), operands, attrs, results, typeError)) {
      error(op.getLoc(), diag::err_verify_op_type)
          << desc
          << DiagnosticEngine::formatMessage(typeError.id, typeError.args);
      return;
    }
    checkResultTypes(op, desc, results);
    AttrList normal = inDeclaredOrder(op.getInfo(), attrs);
    if (!(normal == op.getAttrs()))
      error(op.getLoc(), diag::err_verify_attr_not_normal)
          << desc << attrDictStr(normal) << attrDictStr(op.getAttrs());
  }

  /// unstack makes one result per slice; compare counts before inference
  /// so that a huge axis in a broken type cannot make it allocate.
  bool checkUnstackCount(const Op &op, const OpDesc &desc) {
    if (op.getNumOperands() != 1)
      return true; // inferOpTypes reports the arity
    const TensorType &x = op.getOperand(0)->getType();
    int64_t rank = x.getRank();
    const AttrValue *axisAttr = op.getAttrs().find("axis");
    int64_t axis = axisAttr ? std::get<int64_t>(*axisAttr) : 0;
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank || !x.shape[axis].isKnown())
      return true; // inferOpTypes reports these
    int64_t count = x.shape[axis].getSize();
    if (count == int64_t(op.getNumResults()))
      return true;
    error(op.getLoc(), diag::err_verify_result_count)
        << desc << op.getNumResults() << count;
    return false;
  }

  void checkResultTypes(const Op &op, const OpDesc &desc,
                        llvm::ArrayRef<TensorType> expected) {
    if (expected.size() != op.getNumResults()) {
      error(op.getLoc(), diag::err_verify_result_count)
          << desc << op.getNumResults() << expected.size();
      return;
    }
    for (unsigned i = 0; i < expected.size(); ++i)
      if (op.getResult(i)->getType() != expected[i])
        error(op.getLoc(), diag::err_verify_result_type)
            << i << desc << op.getResult(i)->getType().str()
            << expected[i].str();
  }

  // constant: no operands, one result, one value per element or one value
  // to fill it with, each valid for the element type.
  void verifyConstant(const Op &op, const OpDesc &desc) {
    if (op.getNumOperands() != 0)
      error(op.getLoc(), diag::err_verify_constant_operands)
          << desc << op.getNumOperands();
    if (op.getNumResults() != 1) {
      error(op.getLoc(), diag::err_verify_constant_results)
          << desc << op.getNumResults();
      return;
    }
    const TensorType &type = op.getResult()->getType();
    const std::vector<double> &values = op.getAttrs().getFloats("value");
    std::optional<int64_t> elements = knownNumElements(type.shape);
    bool countOk =
        values.size() == 1 || (elements && int64_t(values.size()) == *elements);
    if (!countOk) {
      std::string expected = "1";
      if (elements && *elements != 1)
        expected += " or " + std::to_string(*elements);
      error(op.getLoc(), diag::err_verify_constant_count)
          << desc << type.str() << values.size() << expected;
      return;
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (isValidElement(type.dtype, values[i]))
        continue;
      error(op.getLoc(), diag::err_verify_constant_value)
          << i << desc << formatDouble(values[i]) << dtypeName(type.dtype);
      return;
    }
  }

  static bool isValidElement(DType dtype, double v) {
    switch (dtype) {
    case DType::F32:
    case DType::F64:
      return true;
    case DType::I32:
      return std::isfinite(v) && v == std::trunc(v) &&
             v >= std::numeric_limits<int32_t>::min() &&
             v <= std::numeric_limits<int32_t>::max();
    case DType::Bool:
      return v == 0 || v == 1;
    }
    return false;
  }

  /// The parameter and result types of the function `name`: a function of
  /// the module, or the gradient that a function's GradSpec will generate
  /// (a function may call `f_grad` before differentiation creates it).
  struct Signature {
    llvm::SmallVector<TensorType, 4> params;
    llvm::SmallVector<std::string, 4> paramNames;
    llvm::SmallVector<TensorType, 2> results;
  };
  bool lookupSignature(llvm::StringRef name, Signature &sig,
                       bool isExtern) const {
    // An extern_call calls an extern declaration, a call a function.
    if (isExtern) {
      const ExternDecl *decl = module.lookupExtern(name);
      if (!decl)
        return false;
      sig.params.assign(decl->paramTypes.begin(), decl->paramTypes.end());
      sig.paramNames.assign(decl->paramNames.begin(), decl->paramNames.end());
      sig.results.assign(decl->resultTypes.begin(), decl->resultTypes.end());
      return true;
    }
    if (const Function *fn = module.lookup(name)) {
      for (const Value *p : fn->getParams()) {
        sig.params.push_back(p->getType());
        sig.paramNames.push_back(p->getName().str());
      }
      for (const Value *r : fn->getReturns())
        // A broken return is reported with the callee; keep the count.
        sig.results.push_back(r ? r->getType() : TensorType());
      return true;
    }
    for (const auto &fn : module.getFunctions()) {
      const auto &spec = fn->getGradSpec();
      if (!spec || spec->gradName != name)
        continue;
      fn->getGradSignature(sig.params, sig.results);
      for (unsigned i = 0; i < sig.params.size(); ++i)
        sig.paramNames.push_back(i < fn->getParams().size()
                                     ? fn->getParam(i)->getName().str()
                                     : "d_out" + std::to_string(i));
      return true;
    }
    return false;
  }

  // call, extern_call: the callee exists; each argument fits its parameter once
  // the callee's size names are bound; the results are the callee's result
  // types under the same bindings.
  void verifyCall(const Op &op, const OpDesc &desc) {
    const std::string &calleeName = op.getAttrs().getString("callee");
    Signature callee;
    if (!lookupSignature(calleeName, callee,
                         op.getKind() == OpKind::ExternCall)) {
      error(op.getLoc(), diag::err_verify_unknown_callee) << desc << calleeName;
      return;
    }
    size_t numParams = callee.params.size();
    if (op.getNumOperands() != numParams) {
      error(op.getLoc(), diag::err_verify_call_arg_count)
          << desc << op.getNumOperands() << calleeName << numParams;
      return;
    }
    SizeBindings bindings;
    for (unsigned i = 0; i < numParams; ++i) {
      const TensorType &paramType = callee.params[i];
      const TensorType &argType = op.getOperand(i)->getType();
      SizeBindings before = bindings;
      std::string conflict;
      if (unifyParamType(paramType, argType, bindings, conflict))
        continue;
      if (!conflict.empty()) {
        error(op.getLoc(), diag::err_verify_call_size)
            << desc << conflict << calleeName << before[conflict].str()
            << boundDim(paramType, argType, conflict).str();
      } else {
        error(op.getLoc(), diag::err_verify_call_arg_type)
            << i << desc << argType.str() << callee.paramNames[i] << calleeName
            << paramType.str();
      }
      return;
    }
    if (callee.results.size() != op.getNumResults()) {
      error(op.getLoc(), diag::err_verify_call_result_count)
          << desc << op.getNumResults() << calleeName << callee.results.size();
      return;
    }
    for (unsigned i = 0; i < callee.results.size(); ++i) {
      TensorType expected = substituteSizes(callee.results[i], bindings);
      if (op.getResult(i)->getType() != expected)
        error(op.getLoc(), diag::err_verify_call_result_type)
            << i << desc << op.getResult(i)->getType().str() << calleeName
            << expected.str();
    }
  }

  // for: the body is a function taking (i32 index, carries..., invariants...)
  // and returning (new carries..., per-step outputs...); the operands fit
  // its parameters once its size names are bound; each carry keeps its type
  // exactly; each output is stacked along a new first axis of `trip`.
  void verifyLoop(const Op &op, const OpDesc &desc) {
    const AttrList &attrs = op.getAttrs();
    const std::string &bodyName = attrs.getString("body");
    const Function *body = module.lookup(bodyName);
    auto fail = [&](const std::string &why) {
      error(op.getLoc(), diag::err_verify_loop) << desc << why;
    };
    if (!body)
      return fail("runs unknown body function '" + bodyName + "'");
    int64_t carries = attrs.getInt("carries");
    const Shape &trip = attrs.getShape("trip");
    unsigned numOperands = op.getNumOperands();
    if (trip.size() != 1 || (trip[0].isKnown() && trip[0].getSize() < 0))
      return fail("has an invalid trip count " + shapeStr(trip));
    if (trip[0].isNamed() && attrs.getInt("start") != 0)
      return fail("starts at " + std::to_string(attrs.getInt("start")) +
                  ", but a loop over a size name must start at 0");
    if (carries < 0 || carries > int64_t(numOperands) ||
        carries > int64_t(op.getNumResults()))
      return fail("has " + std::to_string(carries) + " carries, but " +
                  std::to_string(numOperands) + " operand(s) and " +
                  std::to_string(op.getNumResults()) + " result(s)");
    if (body->getParams().size() != numOperands + 1 ||
        body->getParam(0)->getType() != TensorType(DType::I32))
      return fail("passes an i32 index and " + std::to_string(numOperands) +
                  " operand(s) to '" + bodyName +
                  "', which does not take exactly that");
    SizeBindings bindings;
    for (unsigned i = 0; i < numOperands; ++i) {
      const TensorType &param = body->getParam(i + 1)->getType();
      const TensorType &arg = op.getOperand(i)->getType();
      std::string conflict;
      if (!unifyParamType(param, arg, bindings, conflict))
        return fail("passes " + arg.str() + " as operand " + std::to_string(i) +
                    " to parameter of type " + param.str() + " of '" +
                    bodyName + "'");
    }
    if (body->getReturns().size() != op.getNumResults())
      return fail("has " + std::to_string(op.getNumResults()) +
                  " result(s), but '" + bodyName + "' returns " +
                  std::to_string(body->getReturns().size()));
    for (unsigned i = 0; i < op.getNumResults(); ++i) {
      const Value *ret = body->getReturns()[i];
      if (!ret)
        return;
      TensorType expected = substituteSizes(ret->getType(), bindings);
      if (i < carries && (expected != op.getOperand(i)->getType() ||
                          param(body, i + 1) != ret->getType()))
        return fail("carry " + std::to_string(i) + " enters as " +
                    op.getOperand(i)->getType().str() + " but '" + bodyName +
                    "' returns it as " + expected.str());
      if (i >= carries)
        expected.shape.insert(expected.shape.begin(), trip[0]);
      if (op.getResult(i)->getType() != expected)
        return fail("result " + std::to_string(i) + " has type " +
                    op.getResult(i)->getType().str() + ", but '" + bodyName +
                    "' gives " + expected.str());
    }
    if (attrs.has("recompute"))
      verifyRecompute(op, fail);
  }

  // A checkpointed reverse loop: `recompute` names a body taking (i32,
  // recompute_carries carries, invariants) whose operands follow the
  // carried ones, and that returns those carries first, with their types.
  template <typename Fail> void verifyRecompute(const Op &op, Fail fail) {
    const AttrList &attrs = op.getAttrs();
    const std::string &name = attrs.getString("recompute");
    const Function *fwd = module.lookup(name);
    if (!fwd)
      return fail("recomputes with unknown body function '" + name + "'");
    int64_t carried = attrs.getInt("carries");
    int64_t k =
        attrs.has("recompute_carries") ? attrs.getInt("recompute_carries") : -1;
    size_t numFwd = fwd->getParams().size();
    if (k < 0 || numFwd == 0 || size_t(k) + 1 > numFwd ||
        size_t(carried) + numFwd - 1 > op.getNumOperands() ||
        fwd->getReturns().size() < size_t(k))
      return fail("recomputes with '" + name +
                  "', which does not take or return its operands' carries");
    SizeBindings bindings;
    for (size_t i = 0; i < numFwd - 1; ++i) {
      const TensorType &type = op.getOperand(carried + i)->getType();
      const TensorType &param = fwd->getParam(i + 1)->getType();
      std::string conflict;
      if (!unifyParamType(param, type, bindings, conflict) ||
          (i < size_t(k) && fwd->getReturns()[i] &&
           fwd->getReturns()[i]->getType() != param))
        return fail("recomputes with '" + name + "', whose parameter " +
                    std::to_string(i + 1) + " does not have type " +
                    type.str());
    }
  }

  /// `if %c, args... {then = @a, else = @b}`: %c is a bool scalar; both
  /// functions take the arguments (binding their size names) and return
  /// the op's result types.
  void verifyIf(const Op &op, const OpDesc &desc) {
    auto fail = [&](const std::string &why) {
      error(op.getLoc(), diag::err_verify_loop) << desc << why;
    };
    if (op.getNumOperands() < 1 ||
        op.getOperand(0)->getType() != TensorType(DType::Bool))
      return fail("needs a bool scalar as its first operand");
    for (llvm::StringRef key : {"then", "else"}) {
      const std::string &name = op.getAttrs().getString(key);
      const Function *branch = module.lookup(name);
      if (!branch)
        return fail("runs unknown branch function '" + name + "'");
      if (branch->getParams().size() != op.getNumOperands() - 1)
        return fail("passes " + std::to_string(op.getNumOperands() - 1) +
                    " operand(s) to '" + name + "', which takes " +
                    std::to_string(branch->getParams().size()));
      SizeBindings bindings;
      for (unsigned i = 1; i < op.getNumOperands(); ++i) {
        const TensorType &p = param(branch, i - 1);
        const TensorType &arg = op.getOperand(i)->getType();
        std::string conflict;
        if (!unifyParamType(p, arg, bindings, conflict))
          return fail("passes " + arg.str() + " as operand " +
                      std::to_string(i) + " to parameter of type " + p.str() +
                      " of '" + name + "'");
      }
      if (branch->getReturns().size() != op.getNumResults())
        return fail("has " + std::to_string(op.getNumResults()) +
                    " result(s), but '" + name + "' returns " +
                    std::to_string(branch->getReturns().size()));
      for (unsigned i = 0; i < op.getNumResults(); ++i) {
        const Value *ret = branch->getReturns()[i];
        if (!ret)
          return;
        TensorType expected = substituteSizes(ret->getType(), bindings);
        if (op.getResult(i)->getType() != expected)
          return fail("result " + std::to_string(i) + " has type " +
                      op.getResult(i)->getType().str() + ", but '" + name +
                      "' gives " + expected.str());
      }
    }
  }

  static const TensorType &param(const Function *fn, unsigned i) {
    return fn->getParam(i)->getType();
  }

  /// The argument's dimension where `param` uses size name `name`, bound
  /// differently before.
  static Dim boundDim(const TensorType &param, const TensorType &arg,
                      llvm::StringRef name) {
    for (unsigned i = 0; i < param.getRank(); ++i)
      if (param.shape[i].isNamed() && param.shape[i].getName() == name)
        return arg.shape[i];
    return Dim();
  }

  // A rule chosen by an annotation is an IR function that takes the op's
  // operands, its results and one cotangent per result, and returns one
  // cotangent per operand, each of its operand's type.
  void verifyGradRule(const Op &op, const OpDesc &desc) {
    const GradRuleAttr &rule = op.getGradRule();
    if (!rule.isSet())
      return;
    SourceLoc loc = op.getLoc();
    if (rule.via != "override" && rule.via != "custom_grad")
      error(loc, diag::err_verify_rule_via) << desc << rule.via;
    const Function *ruleFn = module.lookup(rule.function);
    if (!ruleFn) {
      error(loc, diag::err_verify_rule_function) << desc << rule.function;
      return;
    }
    std::string problem = ruleSignatureProblem(op, *ruleFn);
    if (!problem.empty())
      error(loc, diag::err_verify_rule_signature)
          << desc << rule.function << problem;
  }

  /// Why `ruleFn` does not fit `op`, or "".
  static std::string ruleSignatureProblem(const Op &op,
                                          const Function &ruleFn) {
    unsigned numOperands = op.getNumOperands();
    unsigned numResults = op.getNumResults();
    std::vector<TensorType> expected;
    std::vector<std::string> roles;
    for (unsigned i = 0; i < numOperands; ++i) {
      expected.push_back(op.getOperand(i)->getType());
      roles.push_back("operand " + std::to_string(i));
    }
    for (unsigned i = 0; i < numResults; ++i) {
      expected.push_back(op.getResult(i)->getType());
      roles.push_back("result " + std::to_string(i));
    }
    for (unsigned i = 0; i < numResults; ++i) {
      expected.push_back(op.getResult(i)->getType());
      roles.push_back("the cotangent of result " + std::to_string(i));
    }
    if (ruleFn.getParams().size() != expected.size())
      return "it takes " + std::to_string(ruleFn.getParams().size()) +
             " parameter(s), but the op needs " +
             std::to_string(expected.size()) + " (" +
             std::to_string(numOperands) + " operand(s), " +
             std::to_string(numResults) + " result(s) and as many " +
             "cotangents)";
    SizeBindings bindings;
    for (size_t i = 0; i < expected.size(); ++i) {
      const Value *param = ruleFn.getParam(i);
      std::string conflict;
      if (!unifyParamType(param->getType(), expected[i], bindings, conflict))
        return "parameter '" + param->getName().str() + "' has type " +
               param->getType().str() + ", but " + roles[i] + " has type " +
               expected[i].str();
    }
    llvm::ArrayRef<Value *> returns = ruleFn.getReturns();
    if (returns.size() != numOperands)
      return "it returns " + std::to_string(returns.size()) +
             " value(s), but the op has " + std::to_string(numOperands) +
             " operand(s)";
    for (unsigned i = 0; i < numOperands; ++i) {
      if (!returns[i])
        continue;
      TensorType got = substituteSizes(returns[i]->getType(), bindings);
      if (got != expected[i])
        return "it returns " + got.str() + " as the cotangent of operand " +
               std::to_string(i) + ", which has type " + expected[i].str();
    }
    return "";
  }
};

/// Reports each call cycle once, at the call that closes it.
class RecursionChecker {
public:
  RecursionChecker(const Module &module, DiagnosticEngine &diags,
                   llvm::StringRef afterPass)
      : module(module), diags(diags), prefix(prefixFor(afterPass)) {}

  bool check() {
    for (const auto &fn : module.getFunctions())
      visit(*fn);
    return ok;
  }

private:
  enum class State { Unvisited, Active, Done };
  const Module &module;
  DiagnosticEngine &diags;
  std::string prefix;
  llvm::DenseMap<const Function *, State> state;
  std::vector<const Function *> stack;
  bool ok = true;

  void visit(const Function &fn) {
    State &s = state[&fn];
    if (s != State::Unvisited)
      return;
    s = State::Active;
    stack.push_back(&fn);
    for (const auto &op : fn.getOps())
      for (llvm::StringRef name : op->getCalledFunctions()) {
        const Function *callee = module.lookup(name);
        if (!callee)
          continue; // the function verifier reports it
        if (state[callee] == State::Active)
          reportCycle(*callee, *op);
        else
          visit(*callee);
      }
    stack.pop_back();
    state[&fn] = State::Done;
  }

  void reportCycle(const Function &target, const Op &call) {
    ok = false;
    std::string path;
    bool inCycle = false;
    for (const Function *f : stack) {
      inCycle |= f == &target;
      if (inCycle)
        path += f->getName().str() + " -> ";
    }
    path += target.getName().str();
    diags.report(call.getLoc(), diag::err_verify_recursion)
        << prefix << target.getName() << path;
  }
};

} // namespace

bool ir::verifyModule(const Module &module, DiagnosticEngine &diags,
                      llvm::StringRef afterPass) {
  bool ok = true;
  std::string prefix = prefixFor(afterPass);
  llvm::StringMap<const Function *> seen;
  for (const auto &fn : module.getFunctions()) {
    if (!seen.try_emplace(fn->getName(), fn.get()).second) {
      diags.report(fn->getLoc(), diag::err_verify_duplicate_function)
          << prefix << fn->getName();
      ok = false;
    }
  }
  for (const auto &fn : module.getFunctions())
    ok &= FunctionVerifier(module, *fn, diags, afterPass).verify();
  ok &= RecursionChecker(module, diags, afterPass).check();
  return ok;
}
