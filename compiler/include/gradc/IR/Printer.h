//===- Printer.h - The textual form of the IR -------------------*- C++ -*-===//
//
// `--emit=ir` and `gradc-opt` print modules in a stable, deterministic text
// that IRParser.h reads back. See docs/IR.md for the grammar.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_PRINTER_H
#define GRADC_IR_PRINTER_H

#include "gradc/IR/IR.h"

#include "llvm/Support/raw_ostream.h"

namespace gradc::ir {

struct PrintOptions {
  /// Append `loc("file":line:col)` to every op.
  bool printLocations = false;
  /// Print the note of differentiation ops as comments ("gradient of ...").
  bool printNotes = true;
  /// Used to format locations.
  const SourceManager *sourceManager = nullptr;
};

void printModule(const Module &module, llvm::raw_ostream &os,
                 const PrintOptions &options = {});
void printFunction(const Function &fn, llvm::raw_ostream &os,
                   const PrintOptions &options = {});

} // namespace gradc::ir

#endif // GRADC_IR_PRINTER_H
