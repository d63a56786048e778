//===- Types.h - Element types, shapes and tensor types ---------*- C++ -*-===//
//
// The type system shared by every phase: a tensor type is an element type
// and a shape whose dimensions are either known sizes or size names (`N`)
// that are bound when a function is called.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_OPS_TYPES_H
#define GRADC_OPS_TYPES_H

#include "gradc/Basic/Interned.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace gradc {

enum class DType : uint8_t { F32, F64, I32, Bool };

llvm::StringRef dtypeName(DType t);
std::optional<DType> parseDType(llvm::StringRef name);
inline bool isFloat(DType t) { return t == DType::F32 || t == DType::F64; }
inline bool isNumeric(DType t) { return t != DType::Bool; }
/// The bytes of one element in the C ABI (docs/ABI.md): bool is one byte.
size_t elementByteSize(DType t);

/// One dimension: a known size, or a size name bound at the call.
class Dim {
public:
  Dim() = default;
  static Dim known(int64_t size) {
    Dim d;
    d.size = size;
    return d;
  }
  static Dim named(llvm::StringRef name) {
    Dim d;
    d.name = InternedString(name);
    return d;
  }
  bool isKnown() const { return name.empty(); }
  bool isNamed() const { return !name.empty(); }
  int64_t getSize() const { return size; }
  llvm::StringRef getName() const { return name; }
  bool operator==(const Dim &o) const {
    return size == o.size && name == o.name;
  }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  std::string str() const;

private:
  int64_t size = 0;
  InternedString name; // empty for a known size
};

/// A hash that agrees with ==. A size name is interned, so its address
/// stands for its text.
inline llvm::hash_code hash_value(const Dim &d) {
  return llvm::hash_combine(d.getSize(), d.getName().data());
}

using Shape = llvm::SmallVector<Dim, 4>;

/// "[2, N]"; "[]" for a scalar.
std::string shapeStr(llvm::ArrayRef<Dim> shape);

/// Number of elements when every dimension is known.
std::optional<int64_t> knownNumElements(llvm::ArrayRef<Dim> shape);

/// The highest rank a tensor may have: what `gradc::TensorView` of
/// runtime/include/gradc/Runtime.h (the header's C++ layer) can hold.
inline constexpr unsigned maxRank = 8;

/// Whether the product of the known non-zero dimensions of `shape` fits
/// in int64, so that every element count, stride and offset of a tensor
/// of this shape can be computed. A shape where it does not is rejected
/// wherever one is formed (a type, an op's result).
bool knownSizesFit(llvm::ArrayRef<Dim> shape);

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  TensorType() = default;
  TensorType(DType dtype, llvm::ArrayRef<Dim> shape = {})
      : dtype(dtype), shape(shape.begin(), shape.end()) {}

  unsigned getRank() const { return shape.size(); }
  bool isScalar() const { return shape.empty(); }
  bool operator==(const TensorType &o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
  /// "f32[2, N]", or "f32" for a scalar: the language's own spelling.
  std::string str() const;
  /// The same text, written to `os` (cse's keys and canonicalize's
  /// fingerprint write one per value: no string of its own).
  void print(llvm::raw_ostream &os) const;
};

/// A hash that agrees with ==: the element type and each dimension.
inline llvm::hash_code hash_value(const TensorType &t) {
  return llvm::hash_combine(
      t.dtype, llvm::hash_combine_range(t.shape.begin(), t.shape.end()));
}

} // namespace gradc

/// Tensor types as keys of a DenseMap (a type's text as a key cost a
/// string per value: simplify looks up every value's type).
template <> struct llvm::DenseMapInfo<gradc::TensorType> {
  static gradc::TensorType getEmptyKey() {
    return gradc::TensorType(static_cast<gradc::DType>(0xff));
  }
  static gradc::TensorType getTombstoneKey() {
    return gradc::TensorType(static_cast<gradc::DType>(0xfe));
  }
  static unsigned getHashValue(const gradc::TensorType &t) {
    return static_cast<unsigned>(hash_value(t));
  }
  static bool isEqual(const gradc::TensorType &a, const gradc::TensorType &b) {
    return a == b;
  }
};

#endif // GRADC_OPS_TYPES_H
