//===- EmitPython.h - A Python extension module per .grad file --*- C++ -*-===//
//
// `gradc --emit=python`: the C++ source of a CPython extension module that
// wraps every exported function of a module (NAME_grad, NAME_fwd and
// NAME_bwd included) over the C ABI of docs/ABI.md, so that it takes and
// returns NumPy arrays and CPU torch tensors. It is compiled against
// runtime/include/gradc/Python.h and linked with the code of either
// backend. docs/Python.md describes the module.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_EMITPYTHON_H
#define GRADC_EMIT_EMITPYTHON_H

#include "gradc/Emit/EmitCpp.h"

namespace gradc::emit {

/// Writes the extension module of `module`; its Python name is
/// `options.moduleName`.
void emitPython(const ir::Module &module, const EmitOptions &options,
                llvm::raw_ostream &os);

} // namespace gradc::emit

#endif // GRADC_EMIT_EMITPYTHON_H
