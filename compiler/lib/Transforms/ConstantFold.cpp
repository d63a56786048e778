//===- ConstantFold.cpp - Evaluating ops on constants at compile time -----===//
//
// An op whose operands are all constants computes the same tensor on every
// call, so it can be computed once, here. The values must be exactly the
// ones the program would compute at run time, in the op's element type
// (f32 rounding, i32 wrap-around), so this pass does not evaluate anything
// itself: it runs the reference interpreter (IR/Interpreter.h), which both
// backends are tested against, on a module made of the op and copies of
// its constant operands.
//
// Constants are kept small: a general fold must produce at most 64
// elements. Splat constants (one value for every element) stay splat at
// any size: an elementwise op on splats is evaluated once on scalars, and a
// layout op only moves equal elements around.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

#include "Rewriter.h"

#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdlib>

using namespace gradc;
using namespace gradc::ir;
using namespace gradc::transforms;

namespace {

/// The most elements a general fold may produce.
constexpr int64_t maxFoldedElements = 64;
/// The most operand elements a general fold may read.
constexpr int64_t maxOperandElements = 4096;

/// Bitwise equality of two element values: -0.0 differs from +0.0, and
/// every NaN equals every NaN.
bool sameElement(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

/// The one value of a constant whose elements are all equal, if it is.
std::optional<double> splatValue(llvm::ArrayRef<double> values) {
  if (values.empty())
    return std::nullopt;
  for (double d : values.drop_front())
    if (!sameElement(d, values.front()))
      return std::nullopt;
  return values.front();
}

/// The value to store for the f32 element `v` (a double that is exactly a
/// float): the shortest decimal that reads back as the same float, so that
/// a folded 0.1f prints as `0.1`, not `0.10000000149011612`. A constant's
/// values are rounded to its element type, so both mean the same; the
/// check guards against a decimal that would round twice differently.
double storedElement(double v, DType dtype) {
  if (dtype != DType::F32 || !std::isfinite(v))
    return v;
  float f = static_cast<float>(v);
  double shortest = std::strtod(formatFloat(f).c_str(), nullptr);
  if (static_cast<float>(shortest) != f ||
      std::signbit(shortest) != std::signbit(f))
    return v;
  return shortest;
}

/// Elementwise ops: each result element depends on the elements at the
/// same (broadcast) position only, so splat operands give a splat result.
bool isElementwise(OpKind kind) { return isElementwiseArithmetic(kind); }

/// Ops whose result elements are copies of operand elements, and `max`,
/// whose result elements are among them: on splats of one value, a splat
/// of that value (the op table's SplatPreserving trait).
bool preservesSplat(OpKind kind) {
  return getOpInfo(kind).has(SplatPreserving);
}

bool hasKnownShapes(llvm::ArrayRef<Value *> values, int64_t &elements) {
  elements = 0;
  for (const Value *v : values) {
    std::optional<int64_t> n = knownNumElements(v->getType().shape);
    if (!n)
      return false;
    elements += *n;
  }
  return true;
}

/// Runs `kind` with `attrs` on constants of the given types and values in
/// the reference interpreter. False when the interpreter reports an error
/// (an integer division by zero, say): the op then stays, so the error
/// still happens at run time.
bool evaluate(OpKind kind, const AttrList &attrs,
              llvm::ArrayRef<TensorType> operandTypes,
              llvm::ArrayRef<std::vector<double>> operandValues,
              llvm::ArrayRef<TensorType> resultTypes,
              std::vector<Tensor> &results) {
  Module module;
  Function *fn = module.addFunction("fold");
  llvm::SmallVector<Value *, 3> operands;
  for (auto [type, values] : llvm::zip(operandTypes, operandValues)) {
    AttrList value;
    value.set("value", values);
    operands.push_back(
        fn->createOp(OpKind::Constant, {}, {type}, value, SourceLoc())
            ->getResult());
  }
  Op *op = fn->createOp(kind, operands, resultTypes, attrs, SourceLoc());
  fn->setReturns(llvm::SmallVector<Value *, 2>(op->getResults()));
  std::string error;
  return interpret(module, "fold", {}, results, error) &&
         results.size() == resultTypes.size();
}

class Folder {
public:
  explicit Folder(Function &fn) : rewriter(fn) {}

  bool run() {
    return rewriter.run([&](Op &op) { return visit(op); });
  }

private:
  bool visit(Op &op);
  bool canonicalizeConstant(Op &op);
  bool foldOnesLike(Op &op);
  bool foldSplat(Op &op);
  bool foldSmall(Op &op);
  bool replaceByConstants(Op &op, llvm::ArrayRef<std::vector<double>> values);

  FunctionRewriter rewriter;
};

bool Folder::visit(Op &op) {
  if (op.getKind() == OpKind::Constant)
    return canonicalizeConstant(op);
  // A loop's body is another function: left alone, like a call.
  if (op.getKind() == OpKind::Call || op.getKind() == OpKind::ExternCall ||
      op.getKind() == OpKind::For || op.getKind() == OpKind::If ||
      hasCustomGradient(op))
    return false;
  if (op.getKind() == OpKind::OnesLike)
    return foldOnesLike(op);
  // zeros_like stays: it is how the other passes know a zero is
  // structural (docs/Passes.md).
  if (op.getKind() == OpKind::ZerosLike || op.getNumOperands() == 0)
    return false;
  if (!llvm::all_of(op.getOperands(), [](const Value *v) {
        return getConstantValues(v) != nullptr;
      }))
    return false;
  return foldSplat(op) || foldSmall(op);
}

/// A constant whose elements are all equal is stored as a splat, so that
/// equal constants look equal to cse and the printed IR stays short.
bool Folder::canonicalizeConstant(Op &op) {
  const std::vector<double> *values = getConstantValues(op.getResult());
  if (!values || values->size() < 2)
    return false;
  std::optional<double> splat = splatValue(*values);
  if (!splat)
    return false;
  op.getAttrs().set("value", std::vector<double>{*splat});
  rewriter.markChanged();
  return false;
}

/// ones_like(x) is the splat constant 1 of x's type (size names
/// included), which no longer needs x.
bool Folder::foldOnesLike(Op &op) {
  return replaceByConstants(op, {std::vector<double>{1.0}});
}

/// An elementwise op on splats is evaluated once, on scalars of the same
/// element types; a layout op on splats of one value gives that value.
/// Either way the result is a splat, so its shape may have size names.
bool Folder::foldSplat(Op &op) {
  llvm::SmallVector<double, 3> splats;
  for (const Value *v : op.getOperands()) {
    std::optional<double> s = splatValue(*getConstantValues(v));
    if (!s)
      return false;
    splats.push_back(*s);
  }
  if (preservesSplat(op.getKind())) {
    // The max over no elements is not one of them.
    int64_t operandElements;
    if (op.getKind() == OpKind::Max &&
        (!hasKnownShapes(op.getOperands(), operandElements) ||
         operandElements == 0))
      return false;
    if (!llvm::all_of(splats,
                      [&](double d) { return sameElement(d, splats[0]); }))
      return false;
    std::vector<std::vector<double>> values(op.getNumResults(), {splats[0]});
    return replaceByConstants(op, values);
  }
  if (!isElementwise(op.getKind()))
    return false;
  llvm::SmallVector<TensorType, 3> scalarTypes;
  llvm::SmallVector<std::vector<double>, 3> scalarValues;
  for (auto [v, s] : llvm::zip(op.getOperands(), splats)) {
    scalarTypes.push_back(TensorType(v->getType().dtype));
    scalarValues.push_back({s});
  }
  TensorType scalarResult(op.getResult()->getType().dtype);
  std::vector<Tensor> results;
  if (!evaluate(op.getKind(), op.getAttrs(), scalarTypes, scalarValues,
                {scalarResult}, results) ||
      results[0].data.size() != 1)
    return false;
  return replaceByConstants(op, {std::vector<double>{results[0].data[0]}});
}

/// Any other op on constants, when its results are small.
bool Folder::foldSmall(Op &op) {
  int64_t resultElements, operandElements;
  if (!hasKnownShapes(op.getResults(), resultElements) ||
      resultElements > maxFoldedElements ||
      !hasKnownShapes(op.getOperands(), operandElements) ||
      operandElements > maxOperandElements)
    return false;
  llvm::SmallVector<TensorType, 3> types;
  llvm::SmallVector<std::vector<double>, 3> values;
  for (const Value *v : op.getOperands()) {
    types.push_back(v->getType());
    values.push_back(*getConstantValues(v));
  }
  llvm::SmallVector<TensorType, 2> resultTypes;
  for (const Value *r : op.getResults())
    resultTypes.push_back(r->getType());
  std::vector<Tensor> results;
  if (!evaluate(op.getKind(), op.getAttrs(), types, values, resultTypes,
                results))
    return false;
  std::vector<std::vector<double>> folded;
  for (auto [tensor, type] : llvm::zip(results, resultTypes)) {
    if (int64_t(tensor.data.size()) != *knownNumElements(type.shape))
      return false;
    std::optional<double> splat = splatValue(tensor.data);
    folded.push_back(splat ? std::vector<double>{*splat} : tensor.data);
  }
  return replaceByConstants(op, folded);
}

bool Folder::replaceByConstants(Op &op,
                                llvm::ArrayRef<std::vector<double>> values) {
  llvm::SmallVector<Value *, 2> constants;
  for (auto [result, v] : llvm::zip(op.getResults(), values)) {
    DType dtype = result->getType().dtype;
    std::vector<double> stored;
    for (double d : v)
      stored.push_back(storedElement(d, dtype));
    constants.push_back(rewriter.createConstant(result->getType(), stored, op));
  }
  return rewriter.replaceOp(op, constants);
}

} // namespace

bool gradc::runConstantFold(Module &module, DiagnosticEngine &) {
  // Operands are folded before their users, so one walk folds whole
  // constant subexpressions.
  for (const auto &fn : module.getFunctions())
    Folder(*fn).run();
  return true;
}
