//===- LoopPasses.cpp - The registry of loop-level passes -----------------===//
//
// Each loop pass by name, as Transforms/Passes.cpp does for the tensor
// passes, so that `gradc-opt --emit=loops --loop-passes=fuse` runs one
// alone; the verifier runs after each unless told not to.
//
//===----------------------------------------------------------------------===//

#include "gradc/Loops/Loops.h"

#include "gradc/Basic/Timing.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace gradc;
using namespace gradc::loops;

namespace {

const LoopPass loopPasses[] = {
    {"expand",
     "writes a matrix-vector product of known small sizes as the loops of "
     "its definition (f64 dot products that vectorise), reading an operand "
     "that a nest only transposes where it came from (ExpandMatMul.cpp)",
     expandMatMuls},
    {"fuse",
     "computes an elementwise producer read by one statement where it is "
     "read, instead of storing it, and one cheap to recompute in each pass "
     "that reads it (Fuse.cpp)",
     fuseElementwise},
    {"hoist",
     "moves the definition of a local that an inner loop does not change "
     "out of that loop (Hoist.cpp)",
     hoistInvariants},
    {"inplace",
     "keeps a scratch row that the row's last loop reads to store the "
     "output's row in that output row, which the loop then rewrites in "
     "place (InPlace.cpp)",
     keepRowsInPlace},
    {"jam",
     "works on four (or two) rows at a time (unroll and jam) in a loop over "
     "rows whose sums are chains of adds and that adds column sums across "
     "its rows, each row with its own lanes (JamRows.cpp)",
     jamRows},
    {"merge",
     "merges adjacent loops over the same rows when each buffer both use "
     "is used row by row, and shrinks a scratch buffer used one row at a "
     "time to one row (MergeLoops.cpp)",
     mergeLoops},
    {"pair",
     "runs two chunks of a sum in 8 f64 lanes whose terms compute an f32 "
     "math function as one step of 16 elements, the lanes added in order "
     "(PairChunks.cpp)",
     pairChunks},
    {"parallel",
     "marks outermost loops whose iterations are independent, with their "
     "private buffers and estimated work (Parallel.cpp)",
     markParallelLoops},
    {"sink",
     "computes a row buffer's elements in the lane loops of the sum that "
     "reads them next, instead of in a loop of their own "
     "(SinkProducers.cpp)",
     sinkProducers},
    {"share",
     "runs an elementwise loop that follows a sum, and computes a math "
     "function the sum computes of the same elements, in the sum's lane "
     "loops: one walk, the function once (ShareWalks.cpp)",
     shareWalks},
    {"plan",
     "puts small scratch buffers on the stack and gives buffers whose "
     "lifetimes do not overlap one slot (PlanBuffers.cpp)",
     planBuffers},
};

} // namespace

llvm::ArrayRef<LoopPass> loops::getLoopPasses() { return loopPasses; }

bool loops::runLoopPasses(LoopModule &module, llvm::StringRef names,
                          std::string &error, bool verifyEach) {
  llvm::SmallVector<llvm::StringRef, 4> list;
  names.split(list, ',', -1, false);
  for (llvm::StringRef name : list) {
    const LoopPass *pass = nullptr;
    for (const LoopPass &p : loopPasses)
      if (name.trim() == p.name)
        pass = &p;
    if (!pass) {
      std::string known;
      for (const LoopPass &p : loopPasses)
        known += (known.empty() ? "" : ", ") + std::string(p.name);
      error = "unknown loop pass '" + name.trim().str() + "'; known: " + known;
      return false;
    }
    {
      TimeRegion region(pass->name);
      if (!pass->run(module, error))
        return false;
    }
    if (verifyEach && !verifyLoops(module, error)) {
      error = "after loop pass '" + std::string(pass->name) + "': " + error;
      return false;
    }
  }
  return true;
}

std::unique_ptr<LoopModule> loops::lowerForBackend(const ir::Module &module,
                                                   std::string &error) {
  std::unique_ptr<LoopModule> lowered;
  {
    TimeRegion region("lower to loops");
    lowered = lowerModule(module, error);
  }
  if (!lowered || !verifyLoops(*lowered, error))
    return nullptr;
  if (!runLoopPasses(*lowered, defaultLoopPipeline, error,
                     /*verifyEach=*/false))
    return nullptr;
  if (!verifyLoops(*lowered, error)) {
    error = "after the loop passes '" + std::string(defaultLoopPipeline) +
            "': " + error;
    return nullptr;
  }
  return lowered;
}
