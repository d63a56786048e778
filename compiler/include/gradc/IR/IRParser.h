//===- IRParser.h - Reading the textual form of the IR ----------*- C++ -*-===//

#ifndef GRADC_IR_IRPARSER_H
#define GRADC_IR_IRPARSER_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

#include <memory>

namespace gradc::ir {

/// Parses the printed form of a module. Returns null after reporting
/// errors. Ops are re-typed with the op table and checked by the verifier.
std::unique_ptr<Module> parseIR(const SourceManager &sm, SourceLoc bufferStart,
                                DiagnosticEngine &diags);

} // namespace gradc::ir

#endif // GRADC_IR_IRPARSER_H
