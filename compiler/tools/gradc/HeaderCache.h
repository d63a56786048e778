//===- HeaderCache.h - Checks of extern headers that passed -----*- C++ -*-===//
//
// Checking an `extern fn` against its header needs Clang: loading the
// backends plugin with libclang-cpp and parsing the header take 30-40 ms,
// ten times the rest of `gradc FILE --emit=cpp` for a small file. A check
// that passed stays true while the declarations, the flags and every file
// Clang read stay the same, so the driver keeps it, as ccache keeps an
// object: one entry per header in the cache directory, keyed by the text
// of everything the check depended on, and valid while each file it read
// has the size and modification time it had then (docs/Extern.md, "The
// cache of header checks"). Failed checks are never kept: their
// diagnostics come from Clang each time.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_TOOLS_GRADC_HEADERCACHE_H
#define GRADC_TOOLS_GRADC_HEADERCACHE_H

#include "gradc/AST/AST.h"
#include "gradc/ClangJIT/Externs.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace gradc::driver {

class HeaderCheckCache {
public:
  /// The cache in `directory` (off when empty), for checks made by the
  /// plugin at `pluginPath` (its size and time are part of every key: a
  /// rebuilt checker checks again).
  HeaderCheckCache(std::string directory, llvm::StringRef pluginPath);

  /// The directory from the environment: GRADC_CACHE_DIR when set (empty:
  /// no cache), else $XDG_CACHE_HOME/gradc, else $HOME/.cache/gradc, else
  /// none.
  static std::string defaultDirectory();

  bool enabled() const { return !directory.empty(); }

  /// True when every header of `module`'s externs has a valid entry: then
  /// the check would pass, and each extern's FnDecl::externReturnsVoid is
  /// set as the check set it.
  bool lookup(ast::Module &module, const clangjit::ExternOptions &options);

  /// Keeps the headers that passed. Failing to write is not an error (the
  /// next run checks again).
  void store(const ast::Module &module, const clangjit::ExternOptions &options,
             llvm::ArrayRef<clangjit::CheckedHeader> checked);

private:
  std::string key(llvm::ArrayRef<const ast::FnDecl *> externs,
                  llvm::StringRef header,
                  const clangjit::ExternOptions &options) const;
  std::string entryPath(llvm::StringRef key) const;

  std::string directory;
  /// "path size time" of the plugin.
  std::string checkerStamp;
};

} // namespace gradc::driver

#endif // GRADC_TOOLS_GRADC_HEADERCACHE_H
