//===- EmitHeader.h - The generated C ABI header ----------------*- C++ -*-===//
//
// `gradc --emit=header`: the one header that declares a module's C ABI,
// whichever backend compiled it, with a thin C++ layer over
// gradc::TensorView that checks sizes (docs/ABI.md, "The generated
// header").
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_EMITHEADER_H
#define GRADC_EMIT_EMITHEADER_H

#include "gradc/Emit/EmitCpp.h"

namespace gradc::emit {

/// Writes the header of `module`.
void emitHeader(const ir::Module &module, const EmitOptions &options,
                llvm::raw_ostream &os);

} // namespace gradc::emit

#endif // GRADC_EMIT_EMITHEADER_H
