//===- LLVMABI.cpp - The C ABI as LLVM IR, shared by both lowerings -------===//
//
// The signature, trampoline and extern declarations of docs/ABI.md as
// LLVM IR, used by EmitLLVM.cpp and PrintLLVM.cpp alike (LLVMABI.h).
//
//===----------------------------------------------------------------------===//

#include "LLVMABI.h"

#include "gradc/Emit/Mangle.h"

#include "llvm/IR/Module.h"

using namespace gradc;
using namespace gradc::emit;

llvm::Type *emit::scalarParamType(llvm::LLVMContext &ctx, DType t) {
  switch (t) {
  case DType::F32:
    return llvm::Type::getFloatTy(ctx);
  case DType::F64:
    return llvm::Type::getDoubleTy(ctx);
  case DType::I32:
    return llvm::Type::getInt32Ty(ctx);
  case DType::Bool:
    return llvm::Type::getInt8Ty(ctx);
  }
  llvm_unreachable("unknown dtype");
}

llvm::FunctionCallee emit::getGemm(llvm::Module &llvmModule, DType t) {
  llvm::LLVMContext &ctx = llvmModule.getContext();
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type *elt = t == DType::F32 ? llvm::Type::getFloatTy(ctx)
                                    : llvm::Type::getDoubleTy(ctx);
  // (order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
  auto *type = llvm::FunctionType::get(
      llvm::Type::getVoidTy(ctx),
      {i32, i32, i32, i32, i32, i32, elt, ptr, i32, ptr, i32, elt, ptr, i32},
      false);
  return llvmModule.getOrInsertFunction(
      t == DType::F32 ? "cblas_sgemm" : "cblas_dgemm", type);
}

// The extern's C ABI (docs/Extern.md): an i64 per size name, each input
// by value (a scalar) or as a pointer, a pointer per result, and an i32
// status or void.
llvm::Function *emit::getExternFunction(llvm::Module &llvmModule,
                                        const ir::ExternDecl &decl) {
  if (llvm::Function *f = llvmModule.getFunction(decl.name))
    return f;
  llvm::LLVMContext &ctx = llvmModule.getContext();
  llvm::Type *ptrTy = llvm::PointerType::get(ctx, 0);
  llvm::SmallVector<llvm::Type *, 8> types(decl.getSizeNames().size(),
                                           llvm::Type::getInt64Ty(ctx));
  for (const TensorType &t : decl.paramTypes)
    types.push_back(t.isScalar() ? scalarParamType(ctx, t.dtype) : ptrTy);
  types.append(decl.resultTypes.size(), ptrTy);
  llvm::Type *ret = decl.returnsStatus ? llvm::Type::getInt32Ty(ctx)
                                       : llvm::Type::getVoidTy(ctx);
  return llvm::Function::Create(llvm::FunctionType::get(ret, types, false),
                                llvm::Function::ExternalLinkage, decl.name,
                                llvmModule);
}

llvm::Function *emit::declareCFunction(llvm::Module &llvmModule,
                                       const ir::Module &module,
                                       const ir::Function &fn,
                                       const LLVMOptions &options) {
  llvm::LLVMContext &ctx = llvmModule.getContext();
  llvm::Type *ptrTy = llvm::PointerType::get(ctx, 0);
  NameScope scope;
  std::vector<CParam> cparams = getCParams(module, fn, scope);
  llvm::SmallVector<llvm::Type *, 8> types;
  for (const CParam &p : cparams) {
    if (p.kind == CParamKind::Size)
      types.push_back(llvm::Type::getInt64Ty(ctx));
    else if (p.kind == CParamKind::Input && p.type.isScalar())
      types.push_back(scalarParamType(ctx, p.dtype));
    else
      types.push_back(ptrTy);
  }
  auto *type =
      llvm::FunctionType::get(llvm::Type::getInt32Ty(ctx), types, false);
  bool exported = isExported(fn);
  // An internal name contains a '.', so it can never clash with the C
  // symbol of an exported function.
  std::string symbol =
      exported ? cSymbolName(options.moduleName, fn.getName())
               : options.moduleName + ".internal." + fn.getName().str();
  auto *f =
      llvm::Function::Create(type,
                             exported ? llvm::GlobalValue::ExternalLinkage
                                      : llvm::GlobalValue::InternalLinkage,
                             symbol, llvmModule);
  f->addFnAttr(llvm::Attribute::NoUnwind);

  // The ABI promises that outputs overlap nothing; inputs are only read,
  // so noalias holds for them too.
  for (auto [i, p] : llvm::enumerate(cparams)) {
    llvm::Argument *arg = f->getArg(i);
    arg->setName(p.name);
    if (p.kind == CParamKind::Size ||
        (p.kind == CParamKind::Input && p.type.isScalar()))
      continue;
    arg->addAttr(llvm::Attribute::NoAlias);
    arg->addAttr(llvm::Attribute::NoCapture);
    if (p.kind == CParamKind::Input)
      arg->addAttr(llvm::Attribute::ReadOnly);
  }
  return f;
}

void emit::emitJITWrapper(llvm::Module &llvmModule, const ir::Function &fn,
                          llvm::Function *target) {
  llvm::LLVMContext &ctx = llvmModule.getContext();
  llvm::Type *ptrTy = llvm::PointerType::get(ctx, 0);
  auto *type = llvm::FunctionType::get(llvm::Type::getInt32Ty(ctx),
                                       {ptrTy, ptrTy, ptrTy}, false);
  auto *f =
      llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                             jitWrapperName(target->getName()), llvmModule);
  f->getArg(0)->setName("sizes");
  f->getArg(1)->setName("args");
  f->getArg(2)->setName("outs");
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", f));
  llvm::SmallVector<llvm::Value *, 8> args;
  auto at = [&](llvm::Value *array, unsigned i, llvm::Type *t) {
    return b.CreateLoad(t, b.CreateConstInBoundsGEP1_64(t, array, i));
  };
  size_t numSizes = fn.getSizeNames().size();
  for (size_t i = 0; i < numSizes; ++i)
    args.push_back(at(f->getArg(0), i, b.getInt64Ty()));
  for (auto [i, p] : llvm::enumerate(fn.getParams())) {
    llvm::Value *ptr = at(f->getArg(1), i, ptrTy);
    llvm::Type *paramTy = target->getArg(numSizes + i)->getType();
    args.push_back(p->getType().isScalar() ? b.CreateLoad(paramTy, ptr) : ptr);
  }
  for (size_t i = 0; i < fn.getReturns().size(); ++i)
    args.push_back(at(f->getArg(2), i, ptrTy));
  b.CreateRet(b.CreateCall(target, args));
}

llvm::Value *
emit::elementCountOverflows(llvm::IRBuilder<> &b, const SizeProduct &p,
                            const llvm::StringMap<llvm::Value *> &sizes) {
  llvm::SmallVector<llvm::Value *, 4> factors;
  for (const std::string &name : p.names)
    factors.push_back(sizes.lookup(name));
  if (p.constant != 1)
    factors.push_back(b.getInt64(p.constant));
  // (A constant factor is never 0: SizeChecks skips those counts.)
  llvm::Value *anyZero = nullptr;
  for (llvm::Value *f : factors)
    if (!llvm::isa<llvm::ConstantInt>(f)) {
      llvm::Value *zero = b.CreateICmpEQ(f, b.getInt64(0));
      anyZero = anyZero ? b.CreateOr(anyZero, zero) : zero;
    }
  if (!anyZero)
    anyZero = b.getFalse();
  llvm::Value *over = nullptr;
  llvm::Value *product = factors[0];
  for (llvm::Value *f : llvm::ArrayRef(factors).drop_front()) {
    llvm::Value *mul = b.CreateBinaryIntrinsic(
        llvm::Intrinsic::umul_with_overflow, product, f);
    llvm::Value *bit = b.CreateExtractValue(mul, 1);
    over = over ? b.CreateOr(over, bit) : bit;
    product = b.CreateExtractValue(mul, 0);
  }
  // Above INT64_MAX as an unsigned product: the sign bit.
  llvm::Value *sign = b.CreateICmpSLT(product, b.getInt64(0));
  over = over ? b.CreateOr(over, sign) : sign;
  return b.CreateAnd(over, b.CreateNot(anyZero));
}
