//===- IRParser.h - Reading the textual form of the IR ----------*- C++ -*-===//
//
// Reads what Printer.h prints (docs/IR.md has the grammar), so that IR can
// be written by hand in tests and fed to `gradc-opt`.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_IRPARSER_H
#define GRADC_IR_IRPARSER_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

#include <memory>

namespace gradc::ir {

/// Parses the printed form of a module from the buffer that starts at
/// `bufferStart`. Returns null after reporting errors (the parser recovers
/// at the next line, so one run can report several).
///
/// The parser checks syntax, names and attribute kinds only: result types
/// are taken as written and a value may be used before the line that
/// defines it, so that the verifier (run it next) can report such IR
/// precisely. Each op, function, gradient spec and rule gets the location
/// of its text in the buffer; `loc(...)` annotations are read and ignored,
/// and comments (`//` to the end of the line) are ignored, so op notes are
/// not read back.
std::unique_ptr<Module> parseIR(const SourceManager &sm, SourceLoc bufferStart,
                                DiagnosticEngine &diags);

} // namespace gradc::ir

#endif // GRADC_IR_IRPARSER_H
