//===- Externs.h - Extern functions: header check and loading ---*- C++ -*-===//
//
// `extern fn name(...) -> type from "header.h"` names a C or C++ function
// of the user's (docs/Extern.md). This library does the two things that
// need Clang:
//
//   - checkExternHeaders: after Sema, each header is parsed with Clang's
//     libTooling (clang::tooling::ClangTool and the AST matchers) and each
//     extern's declaration is compared with the C ABI gradc calls it
//     with; a mismatch is an error at the `.grad` declaration with a note
//     at the header's line and column;
//   - loadExterns: for `gradc run` and `gradc check`, the user's code is
//     compiled in-process from the `.cpp` beside each header (by the Clang
//     the cpp backend uses) or found in a `--load` library, and made
//     callable from every run backend (ir::registerLoadedExtern).
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_CLANGJIT_EXTERNS_H
#define GRADC_CLANGJIT_EXTERNS_H

#include "gradc/AST/AST.h"
#include "gradc/Basic/Diagnostic.h"
#include "gradc/IR/IR.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace gradc::clangjit {

/// Where headers and code come from: the command line (`-I`, `-D`, `-p`,
/// `--load`) or gradc_add_module's INCLUDE_DIRECTORIES.
struct ExternOptions {
  /// The directory of the .grad file: headers are found relative to it
  /// first, as `#include "..."` finds them relative to the includer.
  std::string baseDir;
  std::vector<std::string> includeDirs;
  std::vector<std::string> defines;
  /// A directory with compile_commands.json (libTooling's `-p`): the
  /// flags of the command it gives (or infers) for a header are added.
  std::string compileCommandsDir;
  /// Shared libraries that define extern functions (`--load`).
  std::vector<std::string> libraries;
};

/// The Clang flags (`-I`, `-D`, and those of compile_commands.json for
/// `headerPath`) that headers and the user's code are compiled with.
/// False with `error` set when compile_commands.json cannot be read.
bool getExternCompilerArgs(const ExternOptions &options,
                           llvm::StringRef headerPath,
                           std::vector<std::string> &args, std::string &error);

/// The extern functions of `module` by header, in order of first
/// appearance: the order in which checkExternHeaders checks them (and the
/// driver's cache of checks keys them). Inline: the driver, which has no
/// Clang, needs it too.
inline std::vector<std::pair<std::string, std::vector<ast::FnDecl *>>>
externsByHeader(const ast::Module &module) {
  std::vector<std::pair<std::string, std::vector<ast::FnDecl *>>> byHeader;
  for (const ast::DeclPtr &d : module.decls) {
    auto *fn = llvm::dyn_cast_or_null<ast::FnDecl>(d.get());
    if (!fn || !fn->isExtern)
      continue;
    auto it =
        std::find_if(byHeader.begin(), byHeader.end(),
                     [&](const auto &e) { return e.first == fn->header; });
    if (it == byHeader.end())
      byHeader.push_back({fn->header, {fn}});
    else
      it->second.push_back(fn);
  }
  return byHeader;
}

/// A header whose externs all passed the check, and the files Clang read
/// to parse it (absolute paths: the header, what it includes, and
/// compile_commands.json when its flags came from one): the driver's
/// cache of checks is valid while none of them changes.
struct CheckedHeader {
  std::string header; ///< as the externs name it
  std::vector<std::string> files;
};

/// Checks the header of every extern function of `module` against its
/// gradc signature, and records what the header says on each extern
/// (FnDecl::externReturnsVoid). Reports errors at the declarations, with
/// notes in the headers, which are added to `sm` (the diagnostics' source
/// manager); `onHeaderBuffer` is called with each such buffer (-verify reads
/// its expectations there). Appends each header that passed to `checked`
/// unless it is null. Returns false after an error.
bool checkExternHeaders(ast::Module &module, const ExternOptions &options,
                        SourceManager &sm, DiagnosticEngine &diags,
                        llvm::function_ref<void(SourceLoc)> onHeaderBuffer,
                        std::vector<CheckedHeader> *checked);

/// Makes the extern functions of `module` callable by every run backend:
/// loads `options.libraries`, compiles the `.cpp`, `.cc` or `.c` beside
/// each header that has one, and a trampoline per extern, into one
/// process-wide JIT, and registers each function (ir::registerLoadedExtern).
/// Does nothing for a module without externs. False with `error` set.
bool loadExterns(const ir::Module &module, const ExternOptions &options,
                 std::string &error);

/// Flags added when the cpp run backend compiles generated C++, so that
/// the `#include` of an extern's header resolves: set by the driver from
/// the same options.
void setGeneratedCodeArgs(std::vector<std::string> args);

} // namespace gradc::clangjit

#endif // GRADC_CLANGJIT_EXTERNS_H
