//===- Passes.h - IR passes by name -----------------------------*- C++ -*-===//
//
// Every IR-to-IR transformation is a pass with one entry point, known to
// the drivers by name (`gradc-opt --passes=simplify,cse`), so that each can
// be tested on its own.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_TRANSFORMS_PASSES_H
#define GRADC_TRANSFORMS_PASSES_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace gradc {

/// A pass returns false only after reporting a diagnostic.
using PassFn = bool (*)(ir::Module &module, DiagnosticEngine &diags);

struct PassInfo {
  const char *name;
  const char *description;
  PassFn run;
};

/// All passes, in a stable order.
llvm::ArrayRef<PassInfo> getAllPasses();
const PassInfo *lookupPass(llvm::StringRef name);

/// Runs a comma-separated list of passes, verifying after each one when
/// `verifyEach` is set. Reports an unknown pass name as an error.
bool runPasses(ir::Module &module, llvm::StringRef pipeline,
               DiagnosticEngine &diags, bool verifyEach);

/// What `gradc` runs after differentiation at -O1 (the default).
llvm::StringRef getDefaultPipeline();

} // namespace gradc

#endif // GRADC_TRANSFORMS_PASSES_H
