//===- IRGen.h - Lowering the checked AST to IR -----------------*- C++ -*-===//
//
// Lowers a module that Sema accepted: one IR function per `fn` (calls stay
// calls), one per rule instance (role RuleInstance), the user's names kept
// as value names, and each op's gradient-rule attribute taken from the
// annotation Sema resolved.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IRGEN_IRGEN_H
#define GRADC_IRGEN_IRGEN_H

#include "gradc/AST/AST.h"
#include "gradc/IR/IR.h"

#include <memory>

namespace gradc {

std::unique_ptr<ir::Module> lowerModule(const ast::Module &module,
                                        const SourceManager &sm);

} // namespace gradc

#endif // GRADC_IRGEN_IRGEN_H
