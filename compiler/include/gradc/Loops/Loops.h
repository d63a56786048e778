//===- Loops.h - Lowering, printing, checking and running loops -*- C++ -*-===//
//
// The entry points of lib/Loops: lowering a verified tensor-IR module to
// the loop IR (one file per op family), its textual form, its verifier,
// and an evaluator that runs it with the interpreter's numerics, so that
// the lowering is proven before any printer uses it (`gradc run
// --backend=loops`).
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_LOOPS_LOOPS_H
#define GRADC_LOOPS_LOOPS_H

#include "gradc/IR/IR.h"
#include "gradc/IR/Interpreter.h"
#include "gradc/Loops/LoopIR.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace gradc::loops {

/// Lowers every function of a verified module (rule instances excluded:
/// they are inlined before emission). Every op of Ops.def lowers; returns
/// null with `error` set only for a module the tensor-IR verifier would
/// reject (an unknown callee, a missing attribute).
std::unique_ptr<LoopModule> lowerModule(const ir::Module &module,
                                        std::string &error);

/// The textual form (docs/Loops.md). With a source manager, each origin
/// comment shows `file:line:col`.
void printLoops(const LoopModule &module, llvm::raw_ostream &os,
                const SourceManager *sm = nullptr);

/// Checks the invariants of docs/Loops.md; on failure returns false with
/// `error` naming the function and the broken rule.
bool verifyLoops(const LoopModule &module, std::string &error);

/// Runs function `fnName` of a lowered module on `args` with the numerics
/// of the reference interpreter (every value held in a double, rounded to
/// its type by each store, cast and operation), so that its results are
/// comparable bit for bit with ir::interpret's.
bool evaluateLoops(const LoopModule &module, llvm::StringRef fnName,
                   llvm::ArrayRef<ir::Tensor> args,
                   std::vector<ir::Tensor> &results, std::string &error);

//===----------------------------------------------------------------------===//
// Loop passes
//===----------------------------------------------------------------------===//

/// Scratch buffers of a known size up to this many bytes go on the stack
/// (the one threshold of every backend).
constexpr int64_t stackThresholdBytes = 1024;

/// `expand`: a matrix-vector product of known small sizes (N = 1) becomes
/// the loops of its definition, f64 dot products that both printers
/// vectorise; an operand that a nest only transposes is read where it came
/// from (ExpandMatMul.cpp).
bool expandMatMuls(LoopModule &module, std::string &error);
/// `fuse`: an elementwise producer nest whose buffer one statement reads is
/// computed there instead (Fuse.cpp).
bool fuseElementwise(LoopModule &module, std::string &error);
/// The statements the last fuseElementwise indexed, moved and looked at
/// as readers or for their position in a block: linear in the size of the
/// module (`gradc-opt --loop-work`; test/Loops/fuse-linear.test).
uint64_t fuseElementwiseWork();
/// `merge`: adjacent loops over the same rows become one, and a scratch
/// buffer used one row at a time shrinks to a row (MergeLoops.cpp).
bool mergeLoops(LoopModule &module, std::string &error);
/// The accesses the last mergeLoops looked at: linear in the size of the
/// module (`gradc-opt --loop-work`; test/Loops/merge-linear.test).
uint64_t mergeLoopsWork();
/// `hoist`: a local's definition that does not change in an inner loop
/// moves out of it (Hoist.cpp).
bool hoistInvariants(LoopModule &module, std::string &error);
/// `jam`: a loop over rows whose sums are chains of adds, with column
/// sums across its rows, works on four (or two) rows at a time
/// (JamRows.cpp).
bool jamRows(LoopModule &module, std::string &error);
/// `sink`: a loop that stores a row buffer runs in the lane loops of the
/// sum that reads it next (SinkProducers.cpp).
bool sinkProducers(LoopModule &module, std::string &error);
/// `share`: an elementwise loop after a sum that computes a math function
/// the sum computes of the same elements runs in the sum's lane loops
/// (ShareWalks.cpp).
bool shareWalks(LoopModule &module, std::string &error);
/// `inplace`: a scratch row that the row's last loop reads to store the
/// output's row lives in that output row (InPlace.cpp).
bool keepRowsInPlace(LoopModule &module, std::string &error);
/// `pair`: two chunks of a sum in 8 f64 lanes, when its terms compute an
/// f32 math function, run as one step of 16 elements (PairChunks.cpp).
bool pairChunks(LoopModule &module, std::string &error);
/// `plan`: the stack threshold, lifetimes and slot reuse (PlanBuffers.cpp).
bool planBuffers(LoopModule &module, std::string &error);

/// Below this many estimated operations (Parallel.cpp's count: one per
/// expression node, more for a math function) a parallel loop runs on
/// one thread: starting and joining threads costs a few microseconds.
constexpr int64_t parallelMinWork = 65536;

/// `parallel`: marks outermost loops whose iterations are independent and
/// whose estimated work may reach parallelMinWork (Parallel.cpp).
bool markParallelLoops(LoopModule &module, std::string &error);

struct LoopPass {
  const char *name;
  const char *summary;
  bool (*run)(LoopModule &module, std::string &error);
};
/// Every loop pass, in the order `gradc-opt --help` lists them.
llvm::ArrayRef<LoopPass> getLoopPasses();
/// Runs the comma-separated passes `names` in order, verifying after each
/// when `verifyEach`. On failure (an unknown name, a broken invariant)
/// returns false with `error` set.
bool runLoopPasses(LoopModule &module, llvm::StringRef names,
                   std::string &error, bool verifyEach = true);

/// The passes that the `loops-opt` backend runs: every loop pass.
constexpr const char *defaultLoopPipeline =
    "fuse,expand,merge,hoist,jam,sink,share,inplace,pair,plan,parallel";

/// Lowers `module`, verifies it, runs defaultLoopPipeline and verifies the
/// result: what both backends print. The passes are verified once at the
/// end rather than after each (as LLVM's release pipelines do): on a
/// 10,000-op chain, six more walks of the module were a tenth of the
/// compile time. `gradc-opt --loop-passes=... --verify-each` and the
/// `loops-opt` backend still verify after each pass. Returns null with
/// `error` set when a pass breaks an invariant.
std::unique_ptr<LoopModule> lowerForBackend(const ir::Module &module,
                                            std::string &error);

/// Lowers, verifies and evaluates: the `loops` backend of `gradc run`.
bool runWithLoops(const ir::Module &module, llvm::StringRef fnName,
                  llvm::ArrayRef<ir::Tensor> args,
                  std::vector<ir::Tensor> &results, std::string &error);

/// The same after the loop passes of defaultLoopPipeline (each verified):
/// the `loops-opt` backend, which proves the passes against the
/// interpreter.
bool runWithLoopPasses(const ir::Module &module, llvm::StringRef fnName,
                       llvm::ArrayRef<ir::Tensor> args,
                       std::vector<ir::Tensor> &results, std::string &error);

} // namespace gradc::loops

#endif // GRADC_LOOPS_LOOPS_H
