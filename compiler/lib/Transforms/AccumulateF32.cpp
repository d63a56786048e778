//===- AccumulateF32.cpp - f32 sums in f32 --------------------------------===//
//
// `gradc --accumulate=f32` runs this pass first and last in the pipeline:
// every op that sums f32 data (sum, mean, logsumexp, softmax, log_softmax,
// softmax_cross_entropy, matmul) gets `accumulate = "f32"`, the second
// summation order of docs/IR.md: 16 f32 lanes along the last axis, one
// f32 accumulator elsewhere, matmul's terms added in f32. Run last, it
// also marks the sums that differentiation and simplification made (a
// cotangent's sum over a broadcast axis, a matmul of the gradient); run
// first too, so that constant folding, which evaluates ops with the
// interpreter, folds in the order the program runs in.
//
//===----------------------------------------------------------------------===//

#include "gradc/Transforms/Passes.h"

using namespace gradc;
using namespace gradc::ir;

namespace {

bool sumsInF32(const Op &op) {
  switch (op.getKind()) {
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::LogSumExp:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::SoftmaxCrossEntropy:
  case OpKind::MatMul:
    return op.getNumOperands() > 0 &&
           op.getOperand(0)->getType().dtype == DType::F32;
  default:
    return false;
  }
}

} // namespace

bool gradc::runAccumulateF32(Module &module, DiagnosticEngine &) {
  for (const auto &fn : module.getFunctions())
    for (const auto &op : fn->getOps())
      if (sumsInF32(*op))
        op->getAttrs().set("accumulate", std::string("f32"));
  return true;
}
