//===- Builder.cpp - Creating typed IR ops --------------------------------===//

#include "gradc/IR/Builder.h"

#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cstdlib>

using namespace gradc;
using namespace gradc::ir;

Op *Builder::createWithTypes(OpKind kind, llvm::ArrayRef<Value *> operands,
                             llvm::ArrayRef<TensorType> resultTypes,
                             AttrList attrs,
                             llvm::ArrayRef<std::string> resultNames) {
  Op *op = fn->createOp(kind, operands, resultTypes, std::move(attrs), loc,
                        resultNames, insertPos);
  if (!note.empty())
    op->setNote(note);
  op->setProvenance(provenance);
  if (insertPos != ~size_t(0))
    ++insertPos;
  return op;
}

llvm::SmallVector<Value *, 1>
Builder::create(OpKind kind, llvm::ArrayRef<Value *> operands, AttrList attrs) {
  llvm::SmallVector<TensorType, 4> operandTypes;
  for (Value *v : operands)
    operandTypes.push_back(v->getType());
  llvm::SmallVector<TensorType, 1> resultTypes;
  OpTypeError error;
  if (!inferOpTypes(kind, operandTypes, attrs, resultTypes, error)) {
    // Sema checked user input, so this is a bug in the code that called us.
    llvm::errs() << "gradc internal error: ill-typed '" << getOpName(kind)
                 << "' built: "
                 << DiagnosticEngine::formatMessage(error.id, error.args)
                 << "\n";
    assert(false && "Builder::create made an ill-typed op");
    std::abort();
  }
  Op *op = createWithTypes(kind, operands, resultTypes, std::move(attrs));
  return llvm::SmallVector<Value *, 1>(op->getResults());
}

Value *Builder::create1(OpKind kind, llvm::ArrayRef<Value *> operands,
                        AttrList attrs) {
  auto results = create(kind, operands, std::move(attrs));
  assert(results.size() == 1 && "create1 on an op with several results");
  return results.front();
}

Value *Builder::sum(Value *x, llvm::ArrayRef<int64_t> axes, bool keepdims) {
  AttrList attrs;
  attrs.set("axis", std::vector<int64_t>(axes.begin(), axes.end()));
  attrs.set("keepdims", keepdims);
  return create1(OpKind::Sum, {x}, std::move(attrs));
}

Value *Builder::reshape(Value *x, llvm::ArrayRef<Dim> shape) {
  AttrList attrs;
  attrs.set("shape", Shape(shape.begin(), shape.end()));
  return create1(OpKind::Reshape, {x}, std::move(attrs));
}

Value *Builder::broadcastTo(Value *x, llvm::ArrayRef<Dim> shape) {
  AttrList attrs;
  attrs.set("shape", Shape(shape.begin(), shape.end()));
  return create1(OpKind::BroadcastTo, {x}, std::move(attrs));
}

Value *Builder::transpose(Value *x, llvm::ArrayRef<int64_t> perm) {
  AttrList attrs;
  attrs.set("perm", std::vector<int64_t>(perm.begin(), perm.end()));
  return create1(OpKind::Transpose, {x}, std::move(attrs));
}

Value *Builder::transposeLastTwo(Value *x) {
  unsigned rank = x->getType().getRank();
  assert(rank >= 2 && "transposeLastTwo needs a matrix");
  std::vector<int64_t> perm;
  for (unsigned i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return transpose(x, perm);
}

Value *Builder::scalar(DType dtype, double value) {
  return constant(TensorType(dtype), {value});
}

Value *Builder::constant(const TensorType &type,
                         llvm::ArrayRef<double> values) {
  AttrList attrs;
  attrs.set("value", std::vector<double>(values.begin(), values.end()));
  return createWithTypes(OpKind::Constant, {}, {type}, std::move(attrs))
      ->getResult();
}

llvm::SmallVector<Value *, 1>
Builder::externCall(llvm::StringRef callee, llvm::ArrayRef<Value *> args,
                    llvm::ArrayRef<TensorType> resultTypes) {
  AttrList attrs;
  attrs.set("callee", callee.str());
  Op *op =
      createWithTypes(OpKind::ExternCall, args, resultTypes, std::move(attrs));
  return llvm::SmallVector<Value *, 1>(op->getResults());
}

llvm::SmallVector<Value *, 1>
Builder::call(llvm::StringRef callee, llvm::ArrayRef<Value *> args,
              llvm::ArrayRef<TensorType> resultTypes) {
  AttrList attrs;
  attrs.set("callee", callee.str());
  Op *op = createWithTypes(OpKind::Call, args, resultTypes, std::move(attrs));
  return llvm::SmallVector<Value *, 1>(op->getResults());
}
