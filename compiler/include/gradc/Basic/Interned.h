//===- Interned.h - Strings kept once for the life of the process -*- C++
//-*-===//
//
// Size names (`N`, `B`) are few, but every dimension of every type and
// every size node of the loop IR names one: a gradient of 100,000 steps
// has millions. Each was a std::string of its own (32 bytes, copied with
// every shape); an InternedString is one pointer to the name's only copy,
// and two are the same name exactly when they are the same pointer.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_BASIC_INTERNED_H
#define GRADC_BASIC_INTERNED_H

#include "llvm/ADT/StringMapEntry.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace gradc {

class InternedString {
public:
  /// The empty string.
  InternedString() = default;
  /// The one copy of `text` (saved on first use, never freed; safe from
  /// any thread).
  explicit InternedString(llvm::StringRef text);

  llvm::StringRef ref() const {
    return entry ? entry->getKey() : llvm::StringRef();
  }
  operator llvm::StringRef() const { return ref(); }
  /// A copy, as llvm::StringRef::str.
  std::string str() const { return ref().str(); }
  bool empty() const { return !entry; }
  size_t size() const { return ref().size(); }

  bool operator==(InternedString o) const { return entry == o.entry; }
  bool operator!=(InternedString o) const { return entry != o.entry; }

private:
  using Entry = llvm::StringMapEntry<std::nullopt_t>;
  const Entry *entry = nullptr; // null for ""
};

} // namespace gradc

#endif // GRADC_BASIC_INTERNED_H
