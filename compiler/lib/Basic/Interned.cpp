//===- Interned.cpp - Strings kept once for the life of the process -------===//

#include "gradc/Basic/Interned.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Allocator.h"

#include <mutex>

using namespace gradc;

InternedString::InternedString(llvm::StringRef text) {
  if (text.empty())
    return;
  // Never destroyed: an InternedString may outlive every static object.
  static auto *table = new llvm::StringSet<llvm::BumpPtrAllocator>();
  static std::mutex lock;
  std::lock_guard<std::mutex> guard(lock);
  entry = &*table->insert(text).first;
}
