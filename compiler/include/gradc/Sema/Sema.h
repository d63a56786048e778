//===- Sema.h - Names, types, shapes and annotations ------------*- C++ -*-===//
//
// Checks a parsed module and annotates it in place: resolves names and
// callees, infers every expression's type and shape (size names, NumPy
// broadcasting) with the op table, checks annotations (@grad, @override,
// @custom_grad, inline grad blocks) and instantiates each user rule at
// each use against that op's operand and result types.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_SEMA_SEMA_H
#define GRADC_SEMA_SEMA_H

#include "gradc/AST/AST.h"
#include "gradc/Basic/Diagnostic.h"

namespace gradc {

/// Returns false if any error was reported.
bool checkModule(ast::Module &module, DiagnosticEngine &diags);

} // namespace gradc

#endif // GRADC_SEMA_SEMA_H
