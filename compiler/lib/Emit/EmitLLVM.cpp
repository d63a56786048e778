//===- EmitLLVM.cpp - From the IR to an optimised LLVM module or object ---===//
//
// The LLVM backend's driver around the printer of the loop IR
// (PrintLLVM.cpp, which builds the functions): the target machine, the
// module with the math library linked in as bitcode and verified, LLVM's
// pipeline (loops outlined from huge functions first, float reductions
// vectorised in order) on a large stack, and object code. Nothing here
// knows what an op is: every op is lowered once, in lib/Loops, for the
// interpreter's numerics (docs/LLVMBackend.md).
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitLLVM.h"

#include "gradc/Basic/Timing.h"
#include "gradc/Emit/PrintLLVM.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/VFABIDemangler.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/thread.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include <map>
#include <mutex>

using namespace gradc;
using namespace gradc::emit;

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::string emit::jitWrapperName(llvm::StringRef symbol) {
  return "__gradc_call_" + symbol.str();
}

static void initializeTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

std::unique_ptr<llvm::TargetMachine>
emit::createTargetMachine(const LLVMOptions &options, std::string &error) {
  initializeTargets();
  bool host = options.triple.empty();
  llvm::Triple triple(host ? llvm::sys::getProcessTriple()
                           : llvm::Triple::normalize(options.triple));
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple.str(), error);
  if (!target) {
    error = "unknown target '" + options.triple + "': " + error;
    return nullptr;
  }
  std::string cpu = options.cpu;
  std::string features;
  if ((host && cpu.empty()) || cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    std::vector<std::string> list;
    for (const auto &f : llvm::sys::getHostCPUFeatures())
      list.push_back((f.second ? "+" : "-") + f.first().str());
    std::sort(list.begin(), list.end());
    features = llvm::join(list, ",");
  } else if (cpu.empty()) {
    cpu = "generic";
  }
  std::unique_ptr<llvm::MCSubtargetInfo> sti(
      target->createMCSubtargetInfo(triple.str(), "", ""));
  if (!sti || (cpu != "generic" && !sti->isCPUStringValid(cpu))) {
    error = "unknown CPU '" + cpu + "' for target '" + triple.str() + "'";
    return nullptr;
  }
  llvm::CodeGenOptLevel level = llvm::CodeGenOptLevel::Default;
  if (options.optLevel == 0)
    level = llvm::CodeGenOptLevel::None;
  else if (options.optLevel >= 3)
    level = llvm::CodeGenOptLevel::Aggressive;
  llvm::TargetOptions targetOptions;
  // Standard fuses only llvm.fmuladd, which gradc never emits (the math
  // bitcode is compiled with -ffp-contract=off): nothing is contracted.
  targetOptions.AllowFPOpFusion = options.fpContractFast
                                      ? llvm::FPOpFusion::Fast
                                      : llvm::FPOpFusion::Standard;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple.str(), cpu, features, targetOptions,
                                  llvm::Reloc::PIC_, std::nullopt, level));
  if (!tm)
    error = "cannot create a target machine for '" + triple.str() + "'";
  return tm;
}

// gradc/Math.h compiled to bitcode (MathBitcode.cpp, CMakeLists.txt): for
// targets with FMA, whose reduction of sin and cos calls llvm.fma, and for
// the others, which get the same bits from double (Math.h, reduceStep).
#include "MathBitcode.inc"
#include "MathBitcodeFMA.inc"

/// Whether `tm` fuses a multiply and an add in hardware: then the math
/// library's llvm.fma calls are single instructions, elsewhere calls of
/// libm's fmaf.
static bool targetHasFMA(const llvm::TargetMachine &tm) {
  const llvm::MCSubtargetInfo *sti = tm.getMCSubtargetInfo();
  if (tm.getTargetTriple().isX86())
    return sti && sti->checkFeatures("+fma");
  return tm.getTargetTriple().isAArch64();
}

/// Calls of the math library that one function may inline
/// (planMathCalls).
static constexpr size_t maxInlinedMathCalls = 256;

/// Calls of the math library that one loop may inline (planMathCalls).
static constexpr size_t maxInlinedMathCallsPerLoop = 16;

/// Calls of the math library in one loop that may be vectorised through
/// vector variants (addVectorVariants): LLVM's loop vectoriser grows
/// faster than the loop beyond (`--emit=obj` of a chain's gradient, about
/// 1.5 calls per step in a loop: 100 steps 0.5 s, 400 steps 2.5 s, 1,000
/// steps 8 s, 10,000 steps 543 s, where scalar calls take 15 s).
static constexpr size_t maxVectorisedMathCallsPerLoop = 512;

/// Drops the hint that forces vectorisation (PrintLLVM's markLaneLoop)
/// from each loop around one of `calls`: a math call kept out of line
/// cannot be vectorised, and LLVM answers a forced hint it cannot honour
/// with a remark and a warning on standard error ("loop not vectorized")
/// that a user could do nothing about. Loops without such a call keep
/// theirs.
static void dropHintsAroundCalls(llvm::Function &fn,
                                 llvm::ArrayRef<llvm::CallBase *> calls) {
  if (calls.empty())
    return;
  llvm::DominatorTree dt(fn);
  llvm::LoopInfo loops(dt);
  for (llvm::CallBase *call : calls)
    for (llvm::Loop *loop = loops.getLoopFor(call->getParent()); loop;
         loop = loop->getParentLoop())
      if (loop->getLoopID())
        loop->setLoopID(nullptr);
}

/// The vector variant of the math library's entry point `scalar` for
/// `lanes` lanes: `<lanes x float> NAME_vLANES(<lanes x float>...)`,
/// internal and never inlined, whose body runs `scalar` (inlined) over
/// the lanes in a loop that the loop vectoriser turns into one vector
/// iteration. So each lane computes what the scalar function computes,
/// bit for bit, and the vector code is made once per module instead of
/// once per call.
static llvm::Function *vectorVariant(llvm::Module &module,
                                     llvm::Function &scalar, unsigned lanes) {
  std::string name = (scalar.getName() + "_v" + llvm::Twine(lanes)).str();
  if (llvm::Function *existing = module.getFunction(name))
    return existing;
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *f32 = llvm::Type::getFloatTy(ctx);
  auto *vec = llvm::FixedVectorType::get(f32, lanes);
  unsigned arity = scalar.arg_size();
  llvm::SmallVector<llvm::Type *, 2> params(arity, vec);
  llvm::Function *variant =
      llvm::Function::Create(llvm::FunctionType::get(vec, params, false),
                             llvm::GlobalValue::InternalLinkage, name, module);
  variant->addFnAttr(llvm::Attribute::NoInline);
  variant->addFnAttr(llvm::Attribute::NoUnwind);
  variant->addFnAttr(llvm::Attribute::WillReturn);
  variant->setMemoryEffects(llvm::MemoryEffects::none());

  auto *array = llvm::ArrayType::get(f32, lanes);
  auto *entry = llvm::BasicBlock::Create(ctx, "entry", variant);
  auto *loop = llvm::BasicBlock::Create(ctx, "lane", variant);
  auto *exit = llvm::BasicBlock::Create(ctx, "exit", variant);
  llvm::IRBuilder<> b(entry);
  llvm::SmallVector<llvm::AllocaInst *, 2> in;
  for (llvm::Argument &arg : variant->args()) {
    in.push_back(b.CreateAlloca(array));
    b.CreateStore(&arg, in.back());
  }
  llvm::AllocaInst *out = b.CreateAlloca(array);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  i->addIncoming(b.getInt64(0), entry);
  llvm::SmallVector<llvm::Value *, 2> args;
  for (llvm::AllocaInst *a : in)
    args.push_back(b.CreateLoad(f32, b.CreateInBoundsGEP(f32, a, i)));
  llvm::CallInst *call = b.CreateCall(&scalar, args);
  call->addFnAttr(llvm::Attribute::AlwaysInline);
  b.CreateStore(call, b.CreateInBoundsGEP(f32, out, i));
  llvm::Value *next = b.CreateAdd(i, b.getInt64(1), "", true, true);
  i->addIncoming(next, loop);
  llvm::BranchInst *back =
      b.CreateCondBr(b.CreateICmpULT(next, b.getInt64(lanes)), loop, exit);
  // All the lanes in one vector iteration.
  llvm::Metadata *hints[] = {
      nullptr,
      llvm::MDNode::get(ctx,
                        {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"),
                         llvm::ConstantAsMetadata::get(b.getTrue())}),
      llvm::MDNode::get(ctx,
                        {llvm::MDString::get(ctx, "llvm.loop.vectorize.width"),
                         llvm::ConstantAsMetadata::get(b.getInt32(lanes))}),
      llvm::MDNode::get(ctx,
                        {llvm::MDString::get(ctx, "llvm.loop.interleave.count"),
                         llvm::ConstantAsMetadata::get(b.getInt32(1))})};
  llvm::MDNode *id = llvm::MDNode::getDistinct(ctx, hints);
  id->replaceOperandWith(0, id);
  back->setMetadata(llvm::LLVMContext::MD_loop, id);
  b.SetInsertPoint(exit);
  b.CreateRet(b.CreateLoad(vec, out));
  // Kept until the loop vectoriser has seen the calls that name it (only
  // their attribute does): an unused one is a few dozen instructions.
  llvm::appendToCompilerUsed(module, {variant});
  return variant;
}

/// The lanes of the vector variants (vectorVariant): the vectors that the
/// loop vectoriser will choose for f32, as PrintLLVM's lane loops are
/// (LLVMOptions::preferVectorWidth, else the target's own preference).
static unsigned variantLanes(llvm::Function &fn, llvm::TargetMachine &tm,
                             unsigned preferVectorWidth) {
  unsigned bits = preferredVectorWidth(tm, preferVectorWidth);
  if (!bits)
    bits = tm.getTargetTransformInfo(fn)
               .getRegisterBitWidth(
                   llvm::TargetTransformInfo::RGK_FixedWidthVector)
               .getFixedValue();
  return bits / 32;
}

/// Makes `calls` (of the math library, kept out of line) vectorisable:
/// each names the vector variants of its callee (LLVM's
/// "vector-function-abi-variant", as for a vector math library) and is
/// marked pure, so that the loop vectoriser turns a call per element into
/// a call per vector. Without them a fused chain of 100 steps ran its
/// math one element at a time on this backend, 10 times slower than the
/// C++ backend's (docs/LLVMBackend.md, "Math kept out of line").
static void addVectorVariants(llvm::Module &module,
                              llvm::ArrayRef<llvm::CallBase *> calls,
                              unsigned lanes) {
  if (lanes < 2)
    return;
  // Also 8 lanes where vectors have more: the lanes of a sum in the
  // default order are 8 (docs/IR.md, "Numbers"), a loop of 8 steps that
  // LLVM would otherwise unroll into 8 scalar calls.
  llvm::SmallVector<unsigned, 2> widths = {lanes};
  if (lanes > 8)
    widths.push_back(8);
  for (llvm::CallBase *call : calls) {
    llvm::Function *scalar = call->getCalledFunction();
    if (!llvm::all_of(scalar->args(), [](const llvm::Argument &a) {
          return a.getType()->isFloatTy();
        }))
      continue;
    std::string mappings;
    for (unsigned width : widths) {
      llvm::Function *variant = vectorVariant(module, *scalar, width);
      if (!mappings.empty())
        mappings += ",";
      mappings += ("_ZGV_LLVM_N" + llvm::Twine(width) +
                   std::string(scalar->arg_size(), 'v') + "_" +
                   scalar->getName() + "(" + variant->getName() + ")")
                      .str();
    }
    call->setMemoryEffects(llvm::MemoryEffects::none());
    call->addFnAttr(llvm::Attribute::NoUnwind);
    call->addFnAttr(llvm::Attribute::WillReturn);
    call->addFnAttr(llvm::Attribute::get(
        module.getContext(), llvm::VFABI::MappingsAttrName, mappings));
  }
}

/// What becomes of each call of the math library in one function.
struct MathCallPlan {
  /// Inlined: the optimiser vectorises and schedules them with the loop
  /// around them.
  llvm::SmallVector<llvm::CallBase *, 16> inlined;
  /// Out of line, vectorised through vector variants (addVectorVariants).
  llvm::SmallVector<llvm::CallBase *, 16> vectorised;
  /// Out of line, one element per call.
  llvm::SmallVector<llvm::CallBase *, 16> scalar;
};

/// Plans the calls `calls` of the math library in `fn`:
///  - A loop that makes more than maxInlinedMathCallsPerLoop (a fused
///    chain) calls vector variants: it runs as fast with a vector call per
///    function as inlined, and inlined it costs the optimiser time
///    superlinear in the loop (the gradient of a 30-step chain: 2.5 s for
///    `--emit=obj` inlined, 0.23 s with variants, the same speed; of an
///    8-step chain, 10-15% slower with variants: docs/LLVMBackend.md).
///  - Where more than maxInlinedMathCalls would still be inlined in the
///    function, none is: a function of 10,000 loops, each with a call,
///    stays linear (test/Emit/compile-time-10k.test).
///  - Out of line, a call is vectorised if its loop makes at most
///    maxVectorisedMathCallsPerLoop; otherwise it stays scalar.
static MathCallPlan planMathCalls(llvm::Function &fn,
                                  llvm::ArrayRef<llvm::CallBase *> calls) {
  llvm::DominatorTree dt(fn);
  llvm::LoopInfo loops(dt);
  llvm::DenseMap<const llvm::Loop *, size_t> perLoop;
  for (llvm::CallBase *call : calls)
    ++perLoop[loops.getLoopFor(call->getParent())];
  MathCallPlan plan;
  llvm::SmallVector<llvm::CallBase *, 16> outOfLine;
  for (llvm::CallBase *call : calls) {
    const llvm::Loop *loop = loops.getLoopFor(call->getParent());
    if (loop && perLoop.lookup(loop) > maxInlinedMathCallsPerLoop)
      outOfLine.push_back(call);
    else
      plan.inlined.push_back(call);
  }
  if (plan.inlined.size() > maxInlinedMathCalls) {
    outOfLine.append(plan.inlined.begin(), plan.inlined.end());
    plan.inlined.clear();
  }
  for (llvm::CallBase *call : outOfLine) {
    const llvm::Loop *loop = loops.getLoopFor(call->getParent());
    if (loop && perLoop.lookup(loop) <= maxVectorisedMathCallsPerLoop)
      plan.vectorised.push_back(call);
    else
      plan.scalar.push_back(call);
  }
  return plan;
}

/// Links the functions of the math library that `module` calls
/// (gradc_math_*, and the scratch cache's gradc_scratch_*) into it, from
/// the embedded bitcode, makes them internal and marks the math calls
/// always-inline: the optimiser then inlines them into the loops, which
/// vectorise, and an object file needs nothing beyond libc. The scratch
/// cache's two functions stay out of line (MathBitcode.cpp).
/// The bitcode's CPU attributes are dropped, so that the functions take
/// the module's target (they were compiled for the generic CPU).
static bool linkMathLibrary(llvm::Module &module, llvm::TargetMachine &tm,
                            unsigned preferVectorWidth, std::string &error) {
  bool fma = targetHasFMA(tm);
  bool used = false;
  for (const llvm::Function &fn : module)
    used |= fn.isDeclaration() && fn.getName().starts_with("gradc_");
  if (!used)
    return true;
  llvm::StringRef bytes =
      fma ? llvm::StringRef(
                reinterpret_cast<const char *>(embeddedMathBitcodeFMA),
                sizeof(embeddedMathBitcodeFMA) - 1)
          : llvm::StringRef(reinterpret_cast<const char *>(embeddedMathBitcode),
                            sizeof(embeddedMathBitcode) - 1);
  llvm::MemoryBufferRef buffer(bytes, "gradc-math.bc");
  llvm::Expected<std::unique_ptr<llvm::Module>> math =
      llvm::parseBitcodeFile(buffer, module.getContext());
  if (!math) {
    error = "internal error: the embedded math bitcode does not load: " +
            llvm::toString(math.takeError());
    return false;
  }
  (*math)->setTargetTriple(module.getTargetTriple());
  (*math)->setDataLayout(module.getDataLayout());
  // Every function of the library, the entry points and the gradc::
  // functions that clang left out of line (pow) alike.
  llvm::StringSet<> library;
  for (llvm::Function &fn : **math) {
    fn.removeFnAttr("target-cpu");
    fn.removeFnAttr("target-features");
    fn.removeFnAttr("tune-cpu");
    if (!fn.isDeclaration())
      library.insert(fn.getName());
  }
  if (llvm::Linker::linkModules(module, std::move(*math),
                                llvm::Linker::LinkOnlyNeeded)) {
    error = "internal error: the math bitcode does not link";
    return false;
  }
  // The scratch cache's state (MathBitcode.cpp) is the module's own.
  for (llvm::GlobalVariable &g : module.globals())
    if (g.getName().starts_with("gradc_scratch_") && !g.isDeclaration())
      g.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration() && library.contains(fn.getName())) {
      fn.setLinkage(llvm::GlobalValue::InternalLinkage);
      fn.setComdat(nullptr);
      if (fn.getName().starts_with("gradc_scratch_"))
        continue;
      fn.removeFnAttr(llvm::Attribute::NoInline);
      fn.removeFnAttr(llvm::Attribute::OptimizeNone);
      // The library's own helpers always inline into its entry points;
      // the entry points inline where the calls below say so.
      if (!fn.getName().starts_with("gradc_math_"))
        fn.addFnAttr(llvm::Attribute::AlwaysInline);
    }
  // Which calls of the entry points are inlined: planMathCalls.
  std::vector<llvm::Function *> callers;
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration() && !library.contains(fn.getName()))
      callers.push_back(&fn);
  for (llvm::Function *fn : callers) {
    llvm::SmallVector<llvm::CallBase *, 16> calls;
    for (llvm::Instruction &inst : llvm::instructions(*fn))
      if (auto *call = llvm::dyn_cast<llvm::CallBase>(&inst))
        if (llvm::Function *callee = call->getCalledFunction())
          if (callee->getName().starts_with("gradc_math_"))
            calls.push_back(call);
    if (calls.empty())
      continue;
    MathCallPlan plan = planMathCalls(*fn, calls);
    for (llvm::CallBase *call : plan.inlined)
      call->addFnAttr(llvm::Attribute::AlwaysInline);
    for (llvm::CallBase *call : plan.vectorised)
      call->addFnAttr(llvm::Attribute::NoInline);
    for (llvm::CallBase *call : plan.scalar)
      call->addFnAttr(llvm::Attribute::NoInline);
    addVectorVariants(module, plan.vectorised,
                      variantLanes(*fn, tm, preferVectorWidth));
    llvm::SmallVector<llvm::CallBase *, 16> outOfLine(plan.vectorised);
    outOfLine.append(plan.scalar.begin(), plan.scalar.end());
    dropHintsAroundCalls(*fn, outOfLine);
  }
  return true;
}

std::unique_ptr<llvm::Module> emit::lowerToLLVM(const ir::Module &module,
                                                llvm::LLVMContext &ctx,
                                                llvm::TargetMachine &tm,
                                                const LLVMOptions &options,
                                                std::string &error) {
  auto llvmModule = std::make_unique<llvm::Module>(options.moduleName, ctx);
  llvmModule->setTargetTriple(tm.getTargetTriple().str());
  llvmModule->setDataLayout(tm.createDataLayout());
  if (!module.sourceName.empty())
    llvmModule->setSourceFileName(module.sourceName);
  LLVMOptions printing = options;
  printing.maskedTails =
      preferredVectorWidth(tm, options.preferVectorWidth) == 512;
  if (!printLLVMFromLoops(module, *llvmModule, printing, error)) {
    error = "internal error: " + error;
    return nullptr;
  }
  {
    TimeRegion region("link math");
    if (!linkMathLibrary(*llvmModule, tm, options.preferVectorWidth, error))
      return nullptr;
  }
  TimeRegion region("verify module");
  llvm::raw_string_ostream os(error);
  if (llvm::verifyModule(*llvmModule, &os)) {
    error =
        "internal error: the LLVM backend produced an invalid module: " + error;
    return nullptr;
  }
  return llvmModule;
}

/// Functions with more top-level loops than this have each loop moved into
/// a function of its own before optimisation.
static constexpr unsigned maxLoopsPerFunction = 64;

/// Makes the uses in `loop` of arguments and of instructions outside it
/// (except allocas, which CodeExtractor inspects) uses of proxies in
/// `preheader`, one per value, recorded in `original` and `proxies`.
static void
proxyOutsideValues(llvm::Loop &loop, llvm::BasicBlock &preheader,
                   llvm::DenseMap<llvm::Value *, llvm::Value *> &original,
                   std::vector<llvm::FreezeInst *> &proxies) {
  llvm::DenseMap<llvm::Value *, llvm::FreezeInst *> proxyOf;
  for (llvm::BasicBlock *block : loop.getBlocks())
    for (llvm::Instruction &inst : *block)
      for (llvm::Use &use : inst.operands()) {
        llvm::Value *value = use.get();
        auto *def = llvm::dyn_cast<llvm::Instruction>(value);
        bool outside = llvm::isa<llvm::Argument>(value) ||
                       (def && !llvm::isa<llvm::AllocaInst>(def) &&
                        !loop.contains(def->getParent()));
        if (!outside || value->getType()->isTokenTy() ||
            value->getType()->isLabelTy())
          continue;
        llvm::FreezeInst *&proxy = proxyOf[value];
        if (!proxy) {
          proxy = new llvm::FreezeInst(value, "", preheader.getTerminator());
          original[proxy] = value;
          proxies.push_back(proxy);
        }
        use.set(proxy);
      }
}

/// Moves every top-level loop of `fn` into an internal noinline function
/// of its own (LLVM's CodeExtractor passes the values it uses as
/// arguments). LLVM 19's loop passes (LoopRotate, LoopDeletion,
/// LoopUnroll) each cost time proportional to the whole function per loop,
/// so a function of n loops (the gradient of an n-step chain) took
/// quadratic time to optimise: 18 s for 3,000 steps. Split, each loop is
/// optimised alone, in linear total time; the call per loop nest costs
/// nothing next to the loop.
static void outlineLoops(llvm::Function &fn) {
  llvm::DominatorTree dt(fn);
  llvm::LoopInfo li(dt);
  std::vector<llvm::Loop *> loops(li.begin(), li.end());
  if (loops.size() <= maxLoopsPerFunction)
    return;
  // One cache for the function (its allocas stay in the entry block, which
  // no extraction touches); one per loop would be quadratic again.
  llvm::CodeExtractorAnalysisCache cache(fn);
  // CodeExtractor walks every use of each value that a loop reads from
  // outside: the size arguments, used by every loop, made the extraction
  // of n loops quadratic (5.7 s of 16 s for the gradient of a 10,000-step
  // chain). Each loop reads such a value through a proxy of its own (a
  // `freeze` in its preheader, used only by that loop) while it is
  // extracted; afterwards each call passes the value itself again, the
  // argument takes the value's name, and the proxies are erased, which
  // leaves exactly the IR that extraction without proxies gives.
  llvm::DenseMap<llvm::Value *, llvm::Value *> original;
  std::vector<llvm::FreezeInst *> proxies;
  std::vector<llvm::CallInst *> calls;
  for (llvm::Loop *loop : loops) {
    llvm::BasicBlock *preheader = loop->getLoopPreheader();
    if (preheader)
      proxyOutsideValues(*loop, *preheader, original, proxies);
    llvm::CodeExtractor extractor(loop->getBlocks(), &dt);
    if (!extractor.isEligible())
      continue;
    if (llvm::Function *outlined = extractor.extractCodeRegion(cache)) {
      outlined->addFnAttr(llvm::Attribute::NoInline);
      outlined->addFnAttr(llvm::Attribute::NoUnwind);
      if (auto *call = llvm::dyn_cast<llvm::CallInst>(outlined->user_back()))
        calls.push_back(call);
    }
  }
  for (llvm::CallInst *call : calls)
    for (unsigned i = 0, e = call->arg_size(); i != e; ++i)
      if (llvm::Value *value = original.lookup(call->getArgOperand(i)))
        call->getCalledFunction()->getArg(i)->setName(value->getName());
  for (llvm::FreezeInst *proxy : proxies) {
    proxy->replaceAllUsesWith(proxy->getOperand(0));
    proxy->eraseFromParent();
  }
}

/// Blocks of more instructions than this are cut into pieces of about
/// blockPieceInstructions before code generation (outlineLongBlocks).
/// Pieces of 512 compiled fastest (the gradient of a 10,000-step chain:
/// code generation 3.9 s of CPU; 4.6 s with 1,024, 8 s with 2,048, 10.7 s
/// with 4,096, 48 s uncut).
static constexpr size_t maxBlockInstructions = 4096;
static constexpr size_t blockPieceInstructions = 512;

/// Where a value that crosses from one piece of a long block to another
/// lives: its byte offset in the block's frame, and the pieces from its
/// definition to its last use (for a value from outside the block, all).
struct FrameSlot {
  uint64_t offset = 0;
  unsigned firstPiece = 0;
  unsigned lastPiece = 0;
};

/// Cuts `block` into pieces of about blockPieceInstructions: the first
/// stays `block` (with its phis), the terminator goes into a block of its
/// own, which also stays. Returns the pieces to outline, in order.
/// A block that allocates stack memory after its start is left whole,
/// since a piece's allocas would die when the piece returns.
static std::vector<llvm::BasicBlock *> cutIntoPieces(llvm::BasicBlock &block) {
  std::vector<llvm::Instruction *> cuts;
  size_t count = 0;
  for (llvm::Instruction &inst :
       llvm::make_range(block.getFirstNonPHIOrDbgOrAlloca(), block.end())) {
    if (llvm::isa<llvm::AllocaInst>(inst))
      return {};
    if (auto *intrinsic = llvm::dyn_cast<llvm::IntrinsicInst>(&inst))
      if (intrinsic->getIntrinsicID() == llvm::Intrinsic::stacksave)
        return {};
    if (inst.isTerminator())
      continue;
    if (++count > blockPieceInstructions) {
      cuts.push_back(&inst);
      count = 1;
    }
  }
  std::vector<llvm::BasicBlock *> pieces;
  llvm::BasicBlock *last = &block;
  for (llvm::Instruction *cut : cuts) {
    last = last->splitBasicBlock(cut, block.getName() + ".piece");
    pieces.push_back(last);
  }
  if (!pieces.empty())
    last->splitBasicBlock(last->getTerminator(), block.getName() + ".tail");
  return pieces;
}

/// Whether `value`, an operand, is something a piece must read from its
/// frame rather than compute or name itself.
static bool needsSlot(llvm::Value *value) {
  if (!llvm::isa<llvm::Instruction>(value) && !llvm::isa<llvm::Argument>(value))
    return false;
  llvm::Type *type = value->getType();
  return type->isSized() && !type->isTokenTy() && !type->isLabelTy() &&
         !type->isX86_AMXTy();
}

/// Moves each piece of every block of `fn` with more than
/// maxBlockInstructions instructions after the first into an internal
/// noinline function of its own. LLVM's code generation is quadratic in
/// the length of a block that calls functions: the greedy register
/// allocator checks each live range against the register masks of every
/// call it spans (LiveIntervals::checkRegMaskInterference), and the fused
/// loop of the gradient of a 10,000-step chain is one block of 50,000
/// instructions and 15,000 calls of sin and tanh (45 s of its 48 s of code
/// generation). A value that one piece defines and a later piece reads
/// goes through a stack slot of the function, stored once after its
/// definition and loaded once in each piece that reads it, as the
/// register allocator would have spilled it across the calls anyway;
/// values from outside the block likewise. Slots are reused once the last
/// piece reading them is past. Each piece then takes the frame as its one
/// argument, plus what CodeExtractor passes for the few values that leave
/// the block (those of the loop's phis).
static void outlineLongBlocks(llvm::Function &fn) {
  std::vector<llvm::BasicBlock *> longBlocks;
  for (llvm::BasicBlock &block : fn)
    if (block.size() > maxBlockInstructions)
      longBlocks.push_back(&block);
  if (longBlocks.empty())
    return;
  const llvm::DataLayout &layout = fn.getDataLayout();
  llvm::LLVMContext &ctx = fn.getContext();
  llvm::Type *byteType = llvm::Type::getInt8Ty(ctx);
  llvm::BasicBlock &entry = fn.getEntryBlock();
  // The frame is created once its size is known; the addresses refer to a
  // placeholder until then.
  auto *placeholder = new llvm::AllocaInst(
      byteType, layout.getAllocaAddrSpace(), "", entry.getFirstInsertionPt());
  uint64_t frameBytes = 0;
  llvm::Align frameAlign(16);
  auto addressOf = [&](uint64_t offset, llvm::Instruction *before) {
    return llvm::GetElementPtrInst::CreateInBounds(
        byteType, placeholder,
        {llvm::ConstantInt::get(llvm::Type::getInt64Ty(ctx), offset)}, "",
        before);
  };
  std::vector<std::vector<llvm::BasicBlock *>> allPieces;
  for (llvm::BasicBlock *block : longBlocks) {
    std::vector<llvm::BasicBlock *> pieces = cutIntoPieces(*block);
    if (pieces.empty())
      continue;
    // Piece numbers: 0 is `block`, i + 1 is pieces[i].
    llvm::DenseMap<llvm::BasicBlock *, unsigned> pieceOf;
    pieceOf[block] = 0;
    for (unsigned i = 0; i != pieces.size(); ++i)
      pieceOf[pieces[i]] = i + 1;
    // The values each piece reads from elsewhere, in the order of their
    // first use, and the last piece that reads each.
    llvm::MapVector<llvm::Value *, FrameSlot> slots;
    for (unsigned i = 0; i != pieces.size(); ++i)
      for (llvm::Instruction &inst : *pieces[i])
        for (llvm::Value *operand : inst.operands()) {
          if (!needsSlot(operand))
            continue;
          // The piece that defines it; a value from outside the block
          // counts as piece 0's and keeps its slot throughout.
          auto *def = llvm::dyn_cast<llvm::Instruction>(operand);
          auto defined = def ? pieceOf.find(def->getParent()) : pieceOf.end();
          bool inside = defined != pieceOf.end();
          if (inside && defined->second == i + 1)
            continue;
          FrameSlot &slot = slots[operand];
          slot.firstPiece = inside ? defined->second : 0;
          slot.lastPiece = inside ? std::max(slot.lastPiece, i + 1)
                                  : unsigned(pieces.size());
        }
    // Slots, reused across pieces: a slot whose value's last reader is
    // piece p is free for a value defined in a piece after p.
    std::vector<std::pair<llvm::Value *, FrameSlot *>> byDef;
    for (auto &[value, slot] : slots)
      byDef.push_back({value, &slot});
    std::stable_sort(byDef.begin(), byDef.end(), [](auto &a, auto &b) {
      return a.second->firstPiece < b.second->firstPiece;
    });
    // Free slots by (size, alignment); the slots to free after each piece.
    using Kind = std::pair<uint64_t, uint64_t>;
    std::map<Kind, std::vector<uint64_t>> free;
    std::vector<std::vector<std::pair<Kind, uint64_t>>> freedAfter(
        pieces.size() + 1);
    unsigned freedUpTo = 0;
    for (auto &[value, slot] : byDef) {
      for (; freedUpTo < slot->firstPiece; ++freedUpTo)
        for (auto &[kind, offset] : freedAfter[freedUpTo])
          free[kind].push_back(offset);
      llvm::Type *type = value->getType();
      Kind kind{layout.getTypeAllocSize(type).getFixedValue(),
                layout.getABITypeAlign(type).value()};
      std::vector<uint64_t> &list = free[kind];
      if (!list.empty()) {
        slot->offset = list.back();
        list.pop_back();
      } else {
        frameBytes = llvm::alignTo(frameBytes, kind.second);
        slot->offset = frameBytes;
        frameBytes += kind.first;
        frameAlign = std::max(frameAlign, llvm::Align(kind.second));
      }
      freedAfter[slot->lastPiece].push_back({kind, slot->offset});
    }
    // Store each value once, after its definition.
    for (auto &[value, slot] : slots) {
      llvm::Instruction *before;
      if (auto *def = llvm::dyn_cast<llvm::Instruction>(value))
        before = llvm::isa<llvm::PHINode>(def)
                     ? &*def->getParent()->getFirstInsertionPt()
                     : def->getNextNode();
      else
        before = &*entry.getFirstNonPHIOrDbgOrAlloca();
      new llvm::StoreInst(value, addressOf(slot.offset, before), before);
    }
    // Load it once in each piece that reads it, before the first reader.
    for (unsigned i = 0; i != pieces.size(); ++i) {
      llvm::DenseMap<llvm::Value *, llvm::Value *> loaded;
      for (llvm::Instruction &inst : *pieces[i])
        for (llvm::Use &use : inst.operands()) {
          auto it = slots.find(use.get());
          if (it == slots.end())
            continue;
          auto *def = llvm::dyn_cast<llvm::Instruction>(use.get());
          if (def && def->getParent() == pieces[i])
            continue;
          llvm::Value *&copy = loaded[use.get()];
          if (!copy)
            copy = new llvm::LoadInst(use.get()->getType(),
                                      addressOf(it->second.offset, &inst), "",
                                      &inst);
          use.set(copy);
        }
    }
    allPieces.push_back(std::move(pieces));
  }
  auto *frame = new llvm::AllocaInst(
      llvm::ArrayType::get(byteType, std::max<uint64_t>(frameBytes, 1)),
      layout.getAllocaAddrSpace(), nullptr, frameAlign, "pieces.frame",
      placeholder);
  placeholder->replaceAllUsesWith(frame);
  placeholder->eraseFromParent();
  // CodeExtractor walks every use of each value a piece reads: each piece
  // reads the frame through a proxy of its own while it is extracted (as
  // in outlineLoops), else the extraction would be quadratic.
  std::vector<llvm::FreezeInst *> proxies;
  for (std::vector<llvm::BasicBlock *> &pieces : allPieces)
    for (llvm::BasicBlock *piece : pieces) {
      auto *proxy =
          new llvm::FreezeInst(frame, "pieces.frame", frame->getNextNode());
      proxies.push_back(proxy);
      for (llvm::Instruction &inst : *piece)
        if (auto *gep = llvm::dyn_cast<llvm::GetElementPtrInst>(&inst))
          if (gep->getPointerOperand() == frame)
            gep->setOperand(0, proxy);
    }
  llvm::CodeExtractorAnalysisCache cache(fn);
  for (std::vector<llvm::BasicBlock *> &pieces : allPieces)
    for (llvm::BasicBlock *piece : pieces) {
      llvm::CodeExtractor extractor{llvm::ArrayRef<llvm::BasicBlock *>(piece)};
      if (!extractor.isEligible())
        continue;
      if (llvm::Function *outlined = extractor.extractCodeRegion(cache)) {
        outlined->addFnAttr(llvm::Attribute::NoInline);
        outlined->addFnAttr(llvm::Attribute::NoUnwind);
      }
    }
  for (llvm::FreezeInst *proxy : proxies) {
    proxy->replaceAllUsesWith(frame);
    proxy->eraseFromParent();
  }
}

/// LLVM's option `-force-ordered-reductions` (LoopVectorize.cpp), set to
/// `value` for the life of this object unless the user gave it
/// (`-mllvm`). A loop that accumulates a float in order (`s += f(x[i])`,
/// every sum of the loop IR) is not vectorised without it on x86, since
/// reordering the additions would change the sum; with it, the loop
/// vectoriser computes f on whole vectors and adds the lanes in order
/// (llvm.vector.reduce.fadd with a start value, which keeps the order),
/// so the sum is the same bit for bit: issue 13's
/// `sum(sigmoid(x) * tanh(x) + exp(-x * x) * sin(x))` over 10^6 floats
/// took 298 ms without and 25 ms with it (docs/LLVMBackend.md).
class OrderedReductions {
public:
  explicit OrderedReductions(bool value) {
    llvm::StringMap<llvm::cl::Option *> &options =
        llvm::cl::getRegisteredOptions();
    auto it = options.find("force-ordered-reductions");
    // The loop vectoriser reads the option only when it occurred.
    if (!value || it == options.end() || it->second->getNumOccurrences())
      return;
    option = it->second;
    option->addOccurrence(0, "force-ordered-reductions", "true");
  }
  ~OrderedReductions() {
    if (option)
      option->reset();
  }

private:
  llvm::cl::Option *option = nullptr;
};

// LLVM's passes recurse along use-def chains (JumpThreading's
// computeValueKnownInPredecessors, for one, and code generation's too), as
// deep as the chain of values in a function: the gradient of a 100,000-op
// chain overflowed the main thread's 8 MB stack (utils/scaling.sh;
// test/Emit/llvm-deep-chain-stack.test). 512 MB is address space, of which
// only what the recursion touches is ever mapped.
void emit::runWithLargeStack(llvm::function_ref<void()> work) {
  constexpr unsigned stackBytes = 512u << 20;
  llvm::thread worker(std::optional<unsigned>(stackBytes), [&] { work(); });
  worker.join();
}

unsigned emit::preferredVectorWidth(const llvm::TargetMachine &tm,
                                    unsigned requested) {
  if (requested)
    return requested;
  const llvm::MCSubtargetInfo *sti = tm.getMCSubtargetInfo();
  if (tm.getTargetTriple().isX86() && sti && sti->checkFeatures("+avx512f"))
    return 512;
  return 0;
}

void emit::optimizeModule(llvm::Module &module, llvm::TargetMachine &tm,
                          unsigned optLevel, unsigned preferVectorWidth) {
  if (optLevel == 0)
    return;
  std::vector<llvm::Function *> defined;
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration())
      defined.push_back(&fn);
  {
    TimeRegion region("outline loops");
    for (llvm::Function *fn : defined)
      outlineLoops(*fn);
  }
  // LLVM's x86 tuning prefers 256-bit vectors even where AVX-512 is there
  // (frequency drops on the first CPUs that had it); gradc's loops are
  // long runs of arithmetic, where 512 bits do twice the work per
  // instruction: K2's gradient 3.10 -> 1.52 ms on a Xeon (Sapphire
  // Rapids), no benchmark kernel slower (docs/LLVMBackend.md).
  if (unsigned width = preferredVectorWidth(tm, preferVectorWidth))
    for (llvm::Function &fn : module)
      if (!fn.isDeclaration())
        fn.addFnAttr("prefer-vector-width", llvm::utostr(width));
  {
    TimeRegion region("LLVM pipeline");
    OrderedReductions ordered(true);
    llvm::PipelineTuningOptions tuning;
    tuning.LoopVectorization = true;
    // No SLP vectorisation: LLVM 19's SLP vectoriser miscompiles the
    // straight-line code that full unrolling makes of small batched matmul
    // chains on AVX-512 targets (test/Backends/batched-matmul-chain.grad:
    // the middle batch came out wrong; -opt-bisect-limit names
    // SLPVectorizerPass, and the input is free of undefined behaviour:
    // ASan and MSan are clean, and dropping every nuw, noalias and inbounds
    // changes nothing). The loops are vectorised by the loop vectoriser,
    // which is where the work is.
    tuning.SLPVectorization = false;
    tuning.LoopInterleaving = true;
    tuning.LoopUnrolling = true;
    llvm::PassBuilder pb(&tm, tuning);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel level = optLevel == 1 ? llvm::OptimizationLevel::O1
                                    : optLevel == 2
                                        ? llvm::OptimizationLevel::O2
                                        : llvm::OptimizationLevel::O3;
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
    runWithLargeStack([&] { mpm.run(module, mam); });
  }
  // After the pipeline, which would merge the pieces back (the inliner) or
  // not see a loop whole (the vectoriser).
  TimeRegion pieces("outline long blocks");
  std::vector<llvm::Function *> optimized;
  for (llvm::Function &fn : module)
    if (!fn.isDeclaration())
      optimized.push_back(&fn);
  for (llvm::Function *fn : optimized)
    outlineLongBlocks(*fn);
}

std::unique_ptr<llvm::Module> emit::buildLLVMModule(const ir::Module &module,
                                                    llvm::LLVMContext &ctx,
                                                    llvm::TargetMachine &tm,
                                                    const LLVMOptions &options,
                                                    std::string &error) {
  std::unique_ptr<llvm::Module> llvmModule;
  {
    TimeRegion region("lower to LLVM");
    llvmModule = lowerToLLVM(module, ctx, tm, options, error);
  }
  if (!llvmModule)
    return nullptr;
  TimeRegion region("optimize");
  optimizeModule(*llvmModule, tm, options.optLevel, options.preferVectorWidth);
  return llvmModule;
}

bool emit::writeObjectFile(llvm::Module &module, llvm::TargetMachine &tm,
                           llvm::raw_pwrite_stream &os, std::string &error) {
  TimeRegion region("code generation");
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             llvm::CodeGenFileType::ObjectFile)) {
    error =
        "target '" + tm.getTargetTriple().str() + "' cannot emit object files";
    return false;
  }
  runWithLargeStack([&] { pm.run(module); });
  return true;
}
