//===- IR.cpp - The SSA tensor IR -----------------------------------------===//

#include "gradc/IR/IR.h"

#include <algorithm>
#include <cassert>

using namespace gradc;
using namespace gradc::ir;

Value *Function::addParam(TensorType type, llvm::StringRef paramName) {
  values.push_back(std::make_unique<Value>(std::move(type), paramName.str(),
                                           nullptr, params.size()));
  params.push_back(values.back().get());
  return params.back();
}

Op *Function::createOp(OpKind kind, llvm::ArrayRef<Value *> operands,
                       llvm::ArrayRef<TensorType> resultTypes, AttrList attrs,
                       SourceLoc loc, llvm::ArrayRef<std::string> resultNames,
                       size_t pos) {
  auto op = std::make_unique<Op>(kind, loc);
  op->operands.assign(operands.begin(), operands.end());
  op->attrs = std::move(attrs);
  for (unsigned i = 0; i < resultTypes.size(); ++i) {
    std::string n = i < resultNames.size() ? resultNames[i] : std::string();
    values.push_back(
        std::make_unique<Value>(resultTypes[i], std::move(n), op.get(), i));
    op->results.push_back(values.back().get());
  }
  Op *raw = op.get();
  if (pos >= ops.size())
    ops.push_back(std::move(op));
  else
    ops.insert(ops.begin() + pos, std::move(op));
  return raw;
}

size_t Function::indexOf(const Op *op) const {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].get() == op)
      return i;
  assert(false && "op is not in this function");
  return ops.size();
}

void Function::eraseOpsIf(llvm::function_ref<bool(const Op &)> dead) {
  // Values of erased ops stay owned by the function (they are unused), so
  // that no dangling pointer can appear in a half-updated pass.
  std::erase_if(ops, [&](const std::unique_ptr<Op> &op) { return dead(*op); });
}

void Function::replaceAllUses(Value *from, Value *to) {
  for (auto &op : ops)
    for (Value *&v : op->operands)
      if (v == from)
        v = to;
  for (Value *&v : returns)
    if (v == from)
      v = to;
}

std::vector<std::string> Function::getSizeNames() const {
  std::vector<std::string> names;
  for (Value *p : params)
    for (const Dim &d : p->getType().shape)
      if (d.isNamed() &&
          std::find(names.begin(), names.end(), d.getName()) == names.end())
        names.push_back(d.getName().str());
  return names;
}

std::vector<std::string> ExternDecl::getSizeNames() const {
  std::vector<std::string> names;
  for (const TensorType &t : paramTypes)
    for (const Dim &d : t.shape)
      if (d.isNamed() &&
          std::find(names.begin(), names.end(), d.getName()) == names.end())
        names.push_back(d.getName().str());
  return names;
}

const ExternDecl *Module::lookupExtern(llvm::StringRef name) const {
  for (const ExternDecl &e : externs)
    if (e.name == name)
      return &e;
  return nullptr;
}

Function *Module::addFunction(std::string name) {
  functions.push_back(std::make_unique<Function>(std::move(name)));
  Function *f = functions.back().get();
  index.try_emplace(f->getName(), f);
  return f;
}

Function *Module::lookup(llvm::StringRef name) const {
  return index.lookup(name);
}

void Module::eraseFunction(Function *f) {
  std::string name = f->getName().str();
  std::erase_if(functions, [&](const auto &p) { return p.get() == f; });
  auto it = index.find(name);
  if (it == index.end() || it->second != f)
    return;
  index.erase(it);
  // Another function of the same name (only ill-formed input has one)
  // becomes the one found.
  for (const auto &other : functions)
    if (other->getName() == name) {
      index.try_emplace(name, other.get());
      break;
    }
}

llvm::StringRef ir::provenanceName(Provenance p) {
  switch (p) {
  case Provenance::Source:
    return "source";
  case Provenance::Seed:
    return "seed";
  case Provenance::BuiltIn:
    return "built-in";
  case Provenance::Override:
    return "override";
  case Provenance::CustomGrad:
    return "custom_grad";
  case Provenance::GradBlock:
    return "grad block";
  }
  return "?";
}
