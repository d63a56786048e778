//===- SourceManager.cpp - Source buffers and locations -------------------===//
//
// Maps raw offsets back to buffers, lines and columns. Line starts are
// computed once per buffer, so a lookup is two binary searches.
//
//===----------------------------------------------------------------------===//

#include "gradc/Basic/SourceManager.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>

using namespace gradc;

SourceLoc SourceManager::addBuffer(std::string name, std::string text) {
  auto buf = std::make_unique<Buffer>();
  buf->name = std::move(name);
  buf->text = std::move(text);
  buf->start = nextStart;
  buf->lineStarts.push_back(0);
  for (uint32_t i = 0, e = buf->text.size(); i != e; ++i)
    if (buf->text[i] == '\n')
      buf->lineStarts.push_back(i + 1);
  // One past the end is a valid location (end of file), so leave a gap.
  nextStart += buf->text.size() + 1;
  SourceLoc start = SourceLoc::fromRaw(buf->start);
  buffers.push_back(std::move(buf));
  return start;
}

bool SourceManager::addFile(llvm::StringRef path, SourceLoc &start,
                            std::string &error) {
  llvm::Expected<llvm::sys::fs::file_t> file =
      path == "-" ? llvm::Expected<llvm::sys::fs::file_t>(
                        llvm::sys::fs::getStdinHandle())
                  : llvm::sys::fs::openNativeFileForRead(path);
  if (!file) {
    error = llvm::toString(file.takeError());
    return false;
  }
  // Read in chunks up to one byte past the limit: a file of any kind
  // (a device, a FIFO) stops there.
  std::string text;
  char chunk[1 << 16];
  std::error_code ec;
  while (text.size() <= maxFileSize) {
    llvm::Expected<size_t> n =
        llvm::sys::fs::readNativeFile(*file, llvm::MutableArrayRef(chunk));
    if (!n) {
      ec = llvm::errorToErrorCode(n.takeError());
      break;
    }
    if (*n == 0)
      break;
    text.append(chunk, *n);
  }
  if (path != "-")
    llvm::sys::fs::closeFile(*file);
  if (ec) {
    error = ec.message();
    return false;
  }
  if (text.size() > maxFileSize) {
    error = "larger than " + std::to_string(maxFileSize >> 20) +
            " MiB, the most a source file may hold";
    return false;
  }
  start = addBuffer(path.str(), std::move(text));
  return true;
}

const SourceManager::Buffer *SourceManager::findBuffer(SourceLoc loc) const {
  if (!loc.isValid())
    return nullptr;
  auto it =
      std::upper_bound(buffers.begin(), buffers.end(), loc.getRaw(),
                       [](uint32_t raw, const std::unique_ptr<Buffer> &b) {
                         return raw < b->start;
                       });
  if (it == buffers.begin())
    return nullptr;
  const Buffer *buf = std::prev(it)->get();
  if (loc.getRaw() > buf->start + buf->text.size())
    return nullptr;
  return buf;
}

llvm::StringRef SourceManager::getBufferText(SourceLoc loc) const {
  const Buffer *buf = findBuffer(loc);
  return buf ? llvm::StringRef(buf->text) : llvm::StringRef();
}

llvm::StringRef SourceManager::getBufferName(SourceLoc loc) const {
  const Buffer *buf = findBuffer(loc);
  return buf ? llvm::StringRef(buf->name) : llvm::StringRef();
}

llvm::StringRef SourceManager::getCharacterData(SourceLoc loc) const {
  const Buffer *buf = findBuffer(loc);
  if (!buf)
    return {};
  return llvm::StringRef(buf->text).drop_front(loc.getRaw() - buf->start);
}

PresumedLoc SourceManager::getPresumedLoc(SourceLoc loc) const {
  PresumedLoc result;
  const Buffer *buf = findBuffer(loc);
  if (!buf)
    return result;
  uint32_t offset = loc.getRaw() - buf->start;
  auto it =
      std::upper_bound(buf->lineStarts.begin(), buf->lineStarts.end(), offset);
  unsigned lineIndex = std::prev(it) - buf->lineStarts.begin();
  uint32_t lineStart = buf->lineStarts[lineIndex];
  llvm::StringRef rest = llvm::StringRef(buf->text).drop_front(lineStart);
  result.filename = buf->name;
  result.line = lineIndex + 1;
  result.column = offset - lineStart + 1;
  result.lineText = rest.take_until([](char c) { return c == '\n'; });
  result.lineText.consume_back("\r");
  return result;
}

std::string SourceManager::formatLoc(SourceLoc loc) const {
  PresumedLoc p = getPresumedLoc(loc);
  if (!p.isValid())
    return "<unknown>";
  return (p.filename + ":" + llvm::Twine(p.line) + ":" + llvm::Twine(p.column))
      .str();
}
