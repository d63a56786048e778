//===- Interpreter.h - The reference interpreter ----------------*- C++ -*-===//
//
// Executes IR op by op, exactly as docs/LanguageReference.md defines each
// op, in the declared element type: f32 results are rounded to float after
// every op, i32 arithmetic wraps. It is the oracle that both emitters are
// tested against, so it is written for clarity, not speed.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_INTERPRETER_H
#define GRADC_IR_INTERPRETER_H

#include "gradc/IR/IR.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradc::ir {

/// A concrete tensor: row-major values held as doubles but always exactly
/// representable in `dtype` (floats rounded, ints integral, bools 0/1).
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;

  int64_t numElements() const;
};

/// Runs `fnName` on `args`. On a run-time error (an argument whose shape
/// contradicts the signature or binds a size name twice differently)
/// returns false with `error` set.
bool interpret(const Module &module, llvm::StringRef fnName,
               llvm::ArrayRef<Tensor> args, std::vector<Tensor> &results,
               std::string &error);

} // namespace gradc::ir

#endif // GRADC_IR_INTERPRETER_H
