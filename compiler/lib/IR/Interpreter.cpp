//===- Interpreter.cpp - STUB: to be written ---------------------------------===//
#include "gradc/IR/Interpreter.h"
using namespace gradc;
int64_t ir::Tensor::numElements() const { int64_t n = 1; for (int64_t d : shape) n *= d; return n; }
bool ir::interpret(const Module &, llvm::StringRef, llvm::ArrayRef<Tensor>, std::vector<Tensor> &, std::string &e) { e = "not implemented"; return false; }
