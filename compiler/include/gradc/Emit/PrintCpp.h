//===- PrintCpp.h - The C++ printer of the loop IR --------------*- C++ -*-===//
//
// `gradc --emit=cpp --lower=loops` and `gradc run --backend=cpp-loops`: the
// module is lowered to the loop IR (lib/Loops), the loop passes of
// loops::defaultLoopPipeline run, and each loop function is printed as one
// C++ function with the same C ABI as EmitCpp's (docs/ABI.md: symbols,
// signatures, status codes, size checks), so that the generated header
// and host programs do not change. EmitCpp stays the default C++ backend;
// docs/CppBackend.md ("Printing the loop IR") describes the printer.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_PRINTCPP_H
#define GRADC_EMIT_PRINTCPP_H

#include "gradc/Emit/EmitCpp.h"

#include <string>

namespace gradc::emit {

/// Lowers `module` to loops, runs the loop passes and prints the C++
/// translation unit. Returns false with `error` set only on an internal
/// error (a lowering or a loop pass that breaks the loop IR's invariants);
/// nothing is written then.
bool printCppFromLoops(const ir::Module &module, const EmitOptions &options,
                       llvm::raw_ostream &os, std::string &error);

} // namespace gradc::emit

#endif // GRADC_EMIT_PRINTCPP_H
