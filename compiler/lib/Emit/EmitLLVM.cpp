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
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
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

/// Calls of the math library that one function may inline (see
/// linkMathLibrary).
static constexpr size_t maxInlinedMathCalls = 256;

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

/// Links the functions of the math library that `module` calls
/// (gradc_math_*, and the scratch cache's gradc_scratch_*) into it, from
/// the embedded bitcode, makes them internal and marks the math calls
/// always-inline: the optimiser then inlines them into the loops, which
/// vectorise, and an object file needs nothing beyond libc. The scratch
/// cache's two functions stay out of line (MathBitcode.cpp).
/// The bitcode's CPU attributes are dropped, so that the functions take
/// the module's target (they were compiled for the generic CPU).
static bool linkMathLibrary(llvm::Module &module, bool fma,
                            std::string &error) {
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
  // Each call of an entry point is inlined, unless its function calls the
  // library more than maxInlinedMathCalls times: a fused chain of 10,000
  // sin and tanh inlined is one loop of a million instructions, which
  // took LLVM 78 s to optimise (test/Emit/compile-time-10k.test), so
  // there the calls stay calls and compile time stays linear.
  for (llvm::Function &fn : module) {
    if (library.contains(fn.getName()))
      continue;
    llvm::SmallVector<llvm::CallBase *, 16> calls;
    for (llvm::Instruction &inst : llvm::instructions(fn))
      if (auto *call = llvm::dyn_cast<llvm::CallBase>(&inst))
        if (llvm::Function *callee = call->getCalledFunction())
          if (callee->getName().starts_with("gradc_math_"))
            calls.push_back(call);
    bool inlined = calls.size() <= maxInlinedMathCalls;
    for (llvm::CallBase *call : calls)
      call->addFnAttr(inlined ? llvm::Attribute::AlwaysInline
                              : llvm::Attribute::NoInline);
    if (!inlined)
      dropHintsAroundCalls(fn, calls);
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
    if (!linkMathLibrary(*llvmModule, targetHasFMA(tm), error))
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
