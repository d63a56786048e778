//===- SourceManager.h - Source buffers and locations -----------*- C++ -*-===//
//
// gradc keeps every source buffer (the .grad file, a `--call` expression,
// textual IR) in one SourceManager. A SourceLoc is an offset into the
// concatenation of all buffers, as in clang, so that it fits in 32 bits and
// can be compared and stored freely. Offset 0 is the invalid location.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_BASIC_SOURCEMANAGER_H
#define GRADC_BASIC_SOURCEMANAGER_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gradc {

/// A position in some buffer of the SourceManager.
class SourceLoc {
public:
  SourceLoc() = default;
  static SourceLoc fromRaw(uint32_t raw) {
    SourceLoc loc;
    loc.raw = raw;
    return loc;
  }
  bool isValid() const { return raw != 0; }
  uint32_t getRaw() const { return raw; }
  SourceLoc getAdvanced(uint32_t n) const { return fromRaw(raw + n); }
  bool operator==(const SourceLoc &o) const { return raw == o.raw; }
  bool operator!=(const SourceLoc &o) const { return raw != o.raw; }
  bool operator<(const SourceLoc &o) const { return raw < o.raw; }

private:
  uint32_t raw = 0;
};

/// A half-open range [begin, end) of characters.
struct SourceRange {
  SourceLoc begin, end;
  SourceRange() = default;
  SourceRange(SourceLoc b, SourceLoc e) : begin(b), end(e) {}
  explicit SourceRange(SourceLoc b) : begin(b), end(b) {}
  bool isValid() const { return begin.isValid(); }
};

/// Line and column (both 1-based) of a location, with its file name and the
/// text of its line (without the newline).
struct PresumedLoc {
  llvm::StringRef filename;
  unsigned line = 0;
  unsigned column = 0;
  llvm::StringRef lineText;
  bool isValid() const { return line != 0; }
};

class SourceManager {
public:
  /// Adds a buffer and returns the location of its first character.
  SourceLoc addBuffer(std::string name, std::string text);

  /// The largest source a file may hold (docs/Language.md): reading stops
  /// there, so that `/dev/zero` or a runaway pipe ends in an error.
  static constexpr uint64_t maxFileSize = 64 << 20;

  /// Reads a file ("-": standard input) into a new buffer. Returns false
  /// (and sets `error`) when the file cannot be read or is larger than
  /// maxFileSize.
  bool addFile(llvm::StringRef path, SourceLoc &start, std::string &error);

  /// The text of the buffer that contains `loc`.
  llvm::StringRef getBufferText(SourceLoc loc) const;
  llvm::StringRef getBufferName(SourceLoc loc) const;

  /// The text from `loc` to the end of its buffer.
  llvm::StringRef getCharacterData(SourceLoc loc) const;

  PresumedLoc getPresumedLoc(SourceLoc loc) const;

  /// "file:line:col", or "<unknown>" for an invalid location.
  std::string formatLoc(SourceLoc loc) const;

private:
  struct Buffer {
    std::string name;
    std::string text;
    uint32_t start;                   // raw offset of text[0]
    std::vector<uint32_t> lineStarts; // offsets within text
  };
  const Buffer *findBuffer(SourceLoc loc) const;

  std::vector<std::unique_ptr<Buffer>> buffers;
  uint32_t nextStart = 1;
};

} // namespace gradc

#endif // GRADC_BASIC_SOURCEMANAGER_H
