//===- Printer.h - The textual form of the IR -------------------*- C++ -*-===//
//
// `--emit=ir` and `gradc-opt` print modules in a stable, deterministic text
// that IRParser.h reads back: parse(print(M)) prints exactly as M does
// (except for notes, which are comments). See docs/IR.md for the grammar.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_PRINTER_H
#define GRADC_IR_PRINTER_H

#include "gradc/IR/IR.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace gradc::ir {

struct PrintOptions {
  /// Append `loc("file":line:col)` to every op and function, and to the
  /// gradient spec and gradient rules (needs `sourceManager`).
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

/// The names the printer gives the values of one function: the user's name
/// where there is one, made unique with a `.1`, `.2`, ... suffix (`%h`,
/// `%h.1`), and `%0`, `%1`, ... for values without a name (a name made of
/// digits only counts as none). Parameters come first, then op results in
/// order. The verifier uses it to name ops in its messages.
class ValueNamer {
public:
  explicit ValueNamer(const Function &fn);
  /// `%h`, `%"odd name"`; `%<null>` or `%<unknown>` for a value that does
  /// not belong to the function.
  std::string get(const Value *v) const;

private:
  llvm::DenseMap<const Value *, std::string> names;
};

/// `name` as it appears after `%` or `@`: bare when it is made of letters,
/// digits, `_` and `.`, else quoted with `"` (and `\"`, `\\`, `\n` escapes).
std::string formatIRName(llvm::StringRef name);
/// A string in quotes with the same escapes.
std::string formatIRString(llvm::StringRef s);

} // namespace gradc::ir

#endif // GRADC_IR_PRINTER_H
