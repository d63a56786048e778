//===- Mangle.h - C and C++ names of generated code -------------*- C++ -*-===//
//
// Both backends name things the same way, so that one generated header fits
// either: the C symbol of a function is `<module>_<function>` (docs/ABI.md),
// and the C++ names of parameters and locals are the source's names made
// valid, non-reserved, non-clashing C++ identifiers. This file is that one
// place, plus the ABI's parameter list of a function, which the C++
// emitter, the header emitter and the LLVM emitter all follow.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_EMIT_MANGLE_H
#define GRADC_EMIT_MANGLE_H

#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"

#include <string>
#include <vector>

namespace gradc::emit {

/// The module name for a source path: the file's stem sanitised by
/// sanitizeModuleName (`nets/stack-override.grad` -> `stack_override`).
std::string moduleNameFromPath(llvm::StringRef path);

/// Replaces every byte outside [A-Za-z0-9_] by '_' and prefixes `gradc_`
/// when the result is empty or starts with a digit.
std::string sanitizeModuleName(llvm::StringRef name);

/// The exported C symbol of `function` in `module`: `<module>_<function>`,
/// every byte outside [A-Za-z0-9_] replaced by '_'.
std::string cSymbolName(llvm::StringRef module, llvm::StringRef function);

/// Whether `name` may not be used as a C++ identifier of generated code:
/// C and C++ keywords and alternative tokens, names the generated code
/// refers to (`std`, `gradc`, the fixed-width integer types), macros of
/// the standard headers it includes (`NAN`, `INFINITY`, `errno`, ...) and
/// every `GRADC_` macro.
bool isReservedName(llvm::StringRef name);

/// Makes any identifier a valid C++ identifier that the implementation
/// does not reserve: bytes outside [A-Za-z0-9_] become '_', a leading
/// digit or an empty name gets the prefix `v`, `__` becomes `_0_`, a
/// leading `_` before an upper-case letter gets the prefix `v`, and a
/// reserved name (isReservedName) gets a trailing `_` (`int` -> `int_`).
/// Not injective: NameScope resolves the clashes.
std::string mangleIdentifier(llvm::StringRef name);

/// The identifiers of one C++ scope (a generated function): hands out
/// mangled names that clash neither with each other nor with names
/// reserved up front.
class NameScope {
public:
  /// Marks `name` (already mangled) as taken without claiming it.
  void reserve(llvm::StringRef name) { taken.insert(name); }
  bool isTaken(llvm::StringRef name) const { return taken.contains(name); }
  /// Mangles `base` and returns it if free, else the first free of
  /// `base_1`, `base_2`, ...; the result is taken from now on.
  std::string claim(llvm::StringRef base);
  /// Like claim, but tries the candidates in order first (`i`, `j`, ...).
  std::string claimFirstFree(llvm::ArrayRef<llvm::StringRef> candidates,
                             llvm::StringRef fallback);

private:
  llvm::StringSet<> taken;
};

/// What a C parameter of an exported function carries.
enum class CParamKind { Size, Input, Output };

/// One parameter of the C function of an IR function, in ABI order.
struct CParam {
  CParamKind kind = CParamKind::Input;
  /// The C++ name (mangled and unique within the function).
  std::string name;
  /// The source name: a size name, an IR parameter's name, or the output's
  /// name (`out`, `out0`, `d_x`).
  std::string sourceName;
  /// The element type; i64 sizes have none.
  DType dtype = DType::F32;
  /// For inputs and outputs: the tensor's type (scalar if rank 0).
  TensorType type;
  /// For inputs: the IR parameter; for outputs: the returned value.
  const ir::Value *value = nullptr;
  /// For outputs: the position among the results.
  unsigned resultIndex = 0;
};

/// The C parameters of `fn` in ABI order (sizes, inputs, outputs), with
/// unique C++ names claimed in `scope`. `module` is consulted to name the
/// outputs of a generated NAME_grad after the parameters they belong to.
std::vector<CParam> getCParams(const ir::Module &module, const ir::Function &fn,
                               NameScope &scope);

/// `float`, `double`, `int32_t` or `uint8_t`.
llvm::StringRef cTypeName(DType dtype);

/// The C declaration of a parameter: `int64_t B`, `const float *x`,
/// `float x` (scalar input), `float *out`.
std::string cParamDecl(const CParam &param);

/// The function's signature as the source spells it, for comments:
/// `fn loss(x: f32[B, 4], labels: i32[B]) -> f32`.
std::string sourceSignature(const ir::Function &fn);

/// The function that `fn` is the gradient of, or one half of the split
/// gradient of (by its GradSpec), or null.
const ir::Function *findPrimal(const ir::Module &module,
                               const ir::Function &fn);

/// The lines that document an exported function, for the generated
/// header's comments and the Python module's docstrings: for a generated
/// NAME_grad, NAME_fwd or NAME_bwd what it is the gradient of and with
/// respect to what, then the source signature (sourceSignature).
std::vector<std::string> describeFunction(const ir::Module &module,
                                          const ir::Function &fn);

/// Whether `fn` is exported (every function except rule instances and
/// loop bodies).
bool isExported(const ir::Function &fn);

/// Loops (`for`) and indexing (`take`, `scatter_add`) run in the reference
/// interpreter only, until the backends lower them through the loop IR
/// (docs/IR.md): reports the first such op of the module, for the backend
/// named `backend` ("C++", "LLVM"), and returns false; true when there is
/// none.
bool checkBackendSupport(const ir::Module &module, llvm::StringRef backend,
                         DiagnosticEngine &diags);

} // namespace gradc::emit

#endif // GRADC_EMIT_MANGLE_H
