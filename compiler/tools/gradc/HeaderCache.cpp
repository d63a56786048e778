//===- HeaderCache.cpp - Checks of extern headers that passed -------------===//
//
// An entry is a text file, header-checks/<hash of the key>.txt:
//
//   <the key: what the check read besides files, one fact per line>
//   end key
//   void 0 1              (FnDecl::externReturnsVoid of each extern)
//   file <size> <modification time, ns> <absolute path>
//   ...
//
// The key is stored whole and compared whole, so a collision of hashes
// is a miss, not a wrong answer. It is written to a temporary file and
// renamed into place: a concurrent run reads the old entry, the new one
// or none.
//
//===----------------------------------------------------------------------===//

#include "HeaderCache.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cstdlib>

using namespace gradc;
using namespace gradc::driver;

/// Changes whenever the entry's format or what the key holds changes.
static constexpr const char *formatLine = "gradc header check, format 1\n";

/// "size time" of a file, or "" when it cannot be read.
static std::string fileStamp(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status) ||
      !llvm::sys::fs::is_regular_file(status))
    return "";
  auto time = status.getLastModificationTime().time_since_epoch();
  return std::to_string(status.getSize()) + " " +
         std::to_string(
             std::chrono::duration_cast<std::chrono::nanoseconds>(time)
                 .count());
}

static std::string absolute(llvm::StringRef path) {
  llvm::SmallString<256> full(path.empty() ? "." : path);
  llvm::sys::fs::make_absolute(full);
  llvm::sys::path::remove_dots(full, /*remove_dot_dot=*/true);
  return std::string(full);
}

HeaderCheckCache::HeaderCheckCache(std::string directory,
                                   llvm::StringRef pluginPath)
    : directory(std::move(directory)) {
  std::string stamp = fileStamp(pluginPath);
  // Without a checker to name, no key can say which one checked.
  if (stamp.empty())
    this->directory.clear();
  checkerStamp = absolute(pluginPath) + " " + stamp;
}

std::string HeaderCheckCache::defaultDirectory() {
  if (const char *dir = std::getenv("GRADC_CACHE_DIR"))
    return dir;
  llvm::SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    path = xdg;
  else if (const char *home = std::getenv("HOME"); home && *home)
    llvm::sys::path::append(path, home, ".cache");
  else
    return "";
  llvm::sys::path::append(path, "gradc");
  return std::string(path);
}

std::string
HeaderCheckCache::key(llvm::ArrayRef<const ast::FnDecl *> externs,
                      llvm::StringRef header,
                      const clangjit::ExternOptions &options) const {
  std::string text = formatLine;
  llvm::raw_string_ostream os(text);
  os << "checker " << checkerStamp << "\n";
  os << "base " << absolute(options.baseDir) << "\n";
  for (const std::string &dir : options.includeDirs)
    os << "include " << absolute(dir) << "\n";
  for (const std::string &d : options.defines)
    os << "define " << d << "\n";
  if (!options.compileCommandsDir.empty())
    os << "compile-commands " << absolute(options.compileCommandsDir) << "\n";
  os << "header " << header << "\n";
  // The declarations as Sema typed them: what the expected C prototype is
  // made from.
  for (const ast::FnDecl *fn : externs) {
    os << "extern " << fn->name.name << "(";
    for (size_t i = 0; i < fn->params.size() && i < fn->paramTypes.size(); ++i)
      os << (i ? ", " : "") << fn->params[i].name.name << ": "
         << fn->paramTypes[i].str();
    os << ") -> (";
    for (size_t i = 0; i < fn->resultTypes.size(); ++i)
      os << (i ? ", " : "") << fn->resultTypes[i].str();
    os << ")\n";
  }
  os << "end key\n";
  return text;
}

std::string HeaderCheckCache::entryPath(llvm::StringRef key) const {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, "header-checks",
                          llvm::utohexstr(llvm::xxh3_64bits(key), false, 16) +
                              ".txt");
  return std::string(path);
}

/// The `void` flags of a valid entry for `key`, or none.
static std::optional<std::vector<bool>>
readEntry(llvm::StringRef path, llvm::StringRef key, size_t externCount) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return std::nullopt;
  llvm::StringRef text = (*buffer)->getBuffer();
  if (!text.consume_front(key))
    return std::nullopt;
  std::vector<bool> voids;
  bool sawVoid = false;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    if (line.consume_front("void")) {
      llvm::SmallVector<llvm::StringRef, 8> flags;
      line.split(flags, ' ', -1, /*KeepEmpty=*/false);
      for (llvm::StringRef f : flags)
        voids.push_back(f == "1");
      sawVoid = true;
    } else if (line.consume_front("file ")) {
      // "size time path": the file must still have that size and time.
      auto [size, afterSize] = line.split(' ');
      auto [time, path] = afterSize.split(' ');
      if (fileStamp(path) != (size + " " + time).str())
        return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (!sawVoid || voids.size() != externCount)
    return std::nullopt;
  return voids;
}

bool HeaderCheckCache::lookup(ast::Module &module,
                              const clangjit::ExternOptions &options) {
  if (!enabled())
    return false;
  auto byHeader = clangjit::externsByHeader(module);
  std::vector<std::vector<bool>> found;
  for (const auto &[header, externs] : byHeader) {
    std::vector<const ast::FnDecl *> decls(externs.begin(), externs.end());
    std::string k = key(decls, header, options);
    std::optional<std::vector<bool>> voids =
        readEntry(entryPath(k), k, externs.size());
    if (!voids)
      return false;
    found.push_back(std::move(*voids));
  }
  for (size_t h = 0; h < byHeader.size(); ++h)
    for (size_t i = 0; i < byHeader[h].second.size(); ++i)
      byHeader[h].second[i]->externReturnsVoid = found[h][i];
  return true;
}

void HeaderCheckCache::store(const ast::Module &module,
                             const clangjit::ExternOptions &options,
                             llvm::ArrayRef<clangjit::CheckedHeader> checked) {
  if (!enabled() || checked.empty())
    return;
  llvm::SmallString<256> dir(directory);
  llvm::sys::path::append(dir, "header-checks");
  if (llvm::sys::fs::create_directories(dir))
    return;
  auto byHeader = clangjit::externsByHeader(module);
  for (const clangjit::CheckedHeader &c : checked) {
    auto it = llvm::find_if(byHeader,
                            [&](const auto &e) { return e.first == c.header; });
    if (it == byHeader.end())
      continue;
    std::string k = key(it->second, c.header, options);
    std::string text = k + "void";
    for (const ast::FnDecl *fn : it->second)
      text += fn->externReturnsVoid ? " 1" : " 0";
    text += "\n";
    bool readable = true;
    for (const std::string &file : c.files) {
      std::string stamp = fileStamp(file);
      readable &= !stamp.empty();
      text += "file " + stamp + " " + file + "\n";
    }
    if (!readable)
      continue;
    llvm::SmallString<256> temporary;
    int fd;
    llvm::SmallString<256> model(dir);
    llvm::sys::path::append(model, "tmp-%%%%%%%%.txt");
    if (llvm::sys::fs::createUniqueFile(model, fd, temporary))
      continue;
    {
      llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
      os << text;
      os.close();
      if (os.has_error()) {
        os.clear_error();
        llvm::sys::fs::remove(temporary);
        continue;
      }
    }
    if (llvm::sys::fs::rename(temporary, entryPath(k)))
      llvm::sys::fs::remove(temporary);
  }
}
