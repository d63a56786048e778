//===- LowerCall.cpp - constants, calls and extern calls ------------------===//
//
//   constant     one value: the number itself wherever an elementwise op
//                reads it (a buffer and fill loop only where one is
//                needed: an output, a call, a kernel, a layout op);
//                several: a Constant buffer of the values rounded to the
//                element type (copied when it is the function's output)
//   call         a Call of the lowered callee: its outputs are the op's
//                result buffers; each of the callee's size names is
//                passed with its value here (from the operand shapes)
//   extern_call  the same, of the user's C function; when it returns a
//                status (docs/Extern.md), the call checks it
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "gradc/IR/Interpreter.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

bool lowerConstant(Lowering &l, const ir::Op &op) {
  const AttrValue *attr = op.getAttrs().find("value");
  const auto *values = attr ? std::get_if<std::vector<double>>(attr) : nullptr;
  if (!values || values->empty())
    return l.fail("a constant has no 'value'");
  const TensorType &type = op.getResult()->getType();
  if (values->size() == 1 && l.mayAlias(op)) {
    l.setSplat(op.getResult(), ir::roundToDType(type.dtype, values->front()));
    return true;
  }
  if (values->size() == 1) {
    Buffer *y = l.resultBuffer(op);
    Nest n = l.openNest(l.top(), type.shape);
    l.store(*n.body, y, Lowering::flatIndex(type.shape, n.idx),
            constant(fromDType(type.dtype),
                     ir::roundToDType(type.dtype, values->front())));
    return true;
  }
  Buffer *data = l.fn.addBuffer(
      Buffer::Kind::Constant, type.dtype, type.shape,
      l.origin.result().size() > 1 ? l.origin.result().substr(1) : "const");
  for (double v : *values)
    data->data.push_back(ir::roundToDType(type.dtype, v));
  if (l.mayAlias(op)) {
    l.bind(op.getResult(), data);
    return true;
  }
  Buffer *y = l.resultBuffer(op);
  Nest n = l.openNest(l.top(), type.shape);
  ExprPtr i = Lowering::flatIndex(type.shape, n.idx);
  l.store(*n.body, y, i->clone(), load(data, i->clone()));
  return true;
}

/// The value of each size name of a callee, read off the operands that
/// bind it.
bool bindSizes(Lowering &l, const ir::Op &op,
               const std::vector<std::string> &sizeNames,
               llvm::ArrayRef<TensorType> paramTypes, Stmt &call) {
  for (const std::string &name : sizeNames) {
    ExprPtr value;
    for (unsigned p = 0; p < paramTypes.size() && !value; ++p)
      for (unsigned d = 0; d < paramTypes[p].getRank() && !value; ++d)
        if (paramTypes[p].shape[d].isNamed() &&
            paramTypes[p].shape[d].getName() == name && p < op.getNumOperands())
          value = extentOf(op.getOperand(p)->getType().shape[d]);
    if (!value)
      return l.fail("size '" + name + "' of '" + op.getCallee().str() +
                    "' is bound by no operand");
    call.sizeArgs.emplace_back(name, std::move(value));
  }
  return true;
}

bool lowerCall(Lowering &l, const ir::Op &op) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::Call);
  s->callee = op.getCallee().str();
  s->isExtern = op.getKind() == OpKind::ExternCall;
  std::vector<std::string> sizeNames;
  std::vector<TensorType> paramTypes;
  if (s->isExtern) {
    const ir::ExternDecl *decl = l.module.lookupExtern(s->callee);
    if (!decl)
      return l.fail("call of unknown extern function '" + s->callee + "'");
    sizeNames = decl->getSizeNames();
    paramTypes = decl->paramTypes;
    s->checksStatus = decl->returnsStatus;
  } else {
    const ir::Function *callee = l.module.lookup(s->callee);
    if (!callee)
      return l.fail("call of unknown function '" + s->callee + "'");
    sizeNames = callee->getSizeNames();
    for (const ir::Value *p : callee->getParams())
      paramTypes.push_back(p->getType());
  }
  if (!bindSizes(l, op, sizeNames, paramTypes, *s))
    return false;
  for (const ir::Value *v : op.getOperands())
    s->inputs.push_back(l.bufferOf(v));
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    s->outputs.push_back(l.resultBuffer(op, i));
  l.add(l.top(), std::move(s));
  return true;
}

} // namespace

bool loops::lowerConstantOrCall(Lowering &l, const ir::Op &op) {
  if (op.getKind() == OpKind::Constant)
    return lowerConstant(l, op);
  return lowerCall(l, op);
}
