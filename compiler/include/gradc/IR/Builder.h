//===- Builder.h - Creating typed IR ops ------------------------*- C++ -*-===//
//
// Creates ops at an insertion point of a function, typing their results
// with the op table, so that IRGen and differentiation never compute a
// shape by hand. An op that fails the op table's checks here is a bug in
// gradc (user input was checked by Sema), hence an assertion.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_BUILDER_H
#define GRADC_IR_BUILDER_H

#include "gradc/IR/IR.h"

namespace gradc::ir {

class Builder {
public:
  explicit Builder(Function &fn) : fn(&fn) {}

  Function &getFunction() { return *fn; }

  /// New ops go before the op at index `pos` (default: at the end).
  void setInsertionIndex(size_t pos) { insertPos = pos; }
  void setInsertionAtEnd() { insertPos = ~size_t(0); }

  /// The location and note given to every op created from now on.
  void setLoc(SourceLoc l) { loc = l; }
  SourceLoc getLoc() const { return loc; }
  void setNote(std::string n) { note = std::move(n); }
  /// The provenance given to every op created from now on.
  void setProvenance(Provenance p) { provenance = p; }

  /// Creates an op and types its results with the op table.
  llvm::SmallVector<Value *, 1>
  create(OpKind kind, llvm::ArrayRef<Value *> operands, AttrList attrs = {});
  /// The same for an op with one result.
  Value *create1(OpKind kind, llvm::ArrayRef<Value *> operands,
                 AttrList attrs = {});

  Value *unary(OpKind kind, Value *x) { return create1(kind, {x}); }
  Value *binary(OpKind kind, Value *x, Value *y) {
    return create1(kind, {x, y});
  }

  Value *add(Value *x, Value *y) { return binary(OpKind::Add, x, y); }
  Value *sub(Value *x, Value *y) { return binary(OpKind::Sub, x, y); }
  Value *mul(Value *x, Value *y) { return binary(OpKind::Mul, x, y); }
  Value *div(Value *x, Value *y) { return binary(OpKind::Div, x, y); }
  Value *neg(Value *x) { return unary(OpKind::Neg, x); }
  Value *matmul(Value *x, Value *y) { return binary(OpKind::MatMul, x, y); }
  Value *select(Value *c, Value *a, Value *b) {
    return create1(OpKind::Select, {c, a, b});
  }
  Value *zerosLike(Value *x) { return unary(OpKind::ZerosLike, x); }
  Value *onesLike(Value *x) { return unary(OpKind::OnesLike, x); }

  /// sum over `axes` (sorted, non-negative).
  Value *sum(Value *x, llvm::ArrayRef<int64_t> axes, bool keepdims);
  Value *reshape(Value *x, llvm::ArrayRef<Dim> shape);
  Value *broadcastTo(Value *x, llvm::ArrayRef<Dim> shape);
  Value *transpose(Value *x, llvm::ArrayRef<int64_t> perm);
  /// Swaps the last two axes (a matrix transpose, batched).
  Value *transposeLastTwo(Value *x);

  /// A scalar constant of the given element type.
  Value *scalar(DType dtype, double value);
  /// A constant of any type: `values` has one element per element of
  /// `type`, or one element to fill it with.
  Value *constant(const TensorType &type, llvm::ArrayRef<double> values);

  /// A call of `callee` with explicit result types.
  llvm::SmallVector<Value *, 1> call(llvm::StringRef callee,
                                     llvm::ArrayRef<Value *> args,
                                     llvm::ArrayRef<TensorType> resultTypes);

  /// A call of the extern function `callee` (Module::externs).
  llvm::SmallVector<Value *, 1>
  externCall(llvm::StringRef callee, llvm::ArrayRef<Value *> args,
             llvm::ArrayRef<TensorType> resultTypes);

  /// The raw form: an op with explicit result types (used by the IR parser
  /// and for constants and calls).
  Op *createWithTypes(OpKind kind, llvm::ArrayRef<Value *> operands,
                      llvm::ArrayRef<TensorType> resultTypes, AttrList attrs,
                      llvm::ArrayRef<std::string> resultNames = {});

private:
  Function *fn;
  size_t insertPos = ~size_t(0);
  SourceLoc loc;
  std::string note;
  Provenance provenance = Provenance::Source;
};

} // namespace gradc::ir

#endif // GRADC_IR_BUILDER_H
