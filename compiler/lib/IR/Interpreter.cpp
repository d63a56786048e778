//===- Interpreter.cpp - STUB: to be written ---------------------------------===//
#include "gradc/IR/Interpreter.h"
using namespace gradc;
int64_t ir::Tensor::numElements() const { return data.size(); }
bool ir::interpret(const Module &, llvm::StringRef, llvm::ArrayRef<Tensor>, std::vector<Tensor> &, std::string &e) { e = "not implemented"; return false; }
