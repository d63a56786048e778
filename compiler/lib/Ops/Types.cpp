//===- Types.cpp - Element types, shapes and tensor types -----------------===//

#include "gradc/Ops/Types.h"

#include "llvm/Support/raw_ostream.h"

using namespace gradc;

llvm::StringRef gradc::dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

size_t gradc::elementByteSize(DType t) {
  switch (t) {
  case DType::F32:
    return sizeof(float);
  case DType::F64:
    return sizeof(double);
  case DType::I32:
    return sizeof(int32_t);
  case DType::Bool:
    return 1;
  }
  return 1;
}

std::optional<DType> gradc::parseDType(llvm::StringRef name) {
  if (name == "f32")
    return DType::F32;
  if (name == "f64")
    return DType::F64;
  if (name == "i32")
    return DType::I32;
  if (name == "bool")
    return DType::Bool;
  return std::nullopt;
}

std::string Dim::str() const {
  return isKnown() ? std::to_string(size) : name.str();
}

std::string gradc::shapeStr(llvm::ArrayRef<Dim> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += shape[i].str();
  }
  return s + "]";
}

std::optional<int64_t> gradc::knownNumElements(llvm::ArrayRef<Dim> shape) {
  int64_t n = 1;
  for (const Dim &d : shape) {
    if (!d.isKnown())
      return std::nullopt;
    // Shapes that reach here were checked by knownSizesFit; saturate
    // rather than wrap should one not have been.
    if (__builtin_mul_overflow(n, d.getSize(), &n))
      return INT64_MAX;
  }
  return n;
}

bool gradc::knownSizesFit(llvm::ArrayRef<Dim> shape) {
  int64_t n = 1;
  // Zeros are skipped: `[0, 2^40, 2^40]` has no element, but the stride
  // of its first axis (a product of the others) still overflows.
  for (const Dim &d : shape)
    if (d.isKnown() && d.getSize() != 0 &&
        __builtin_mul_overflow(n, d.getSize(), &n))
      return false;
  return true;
}

void TensorType::print(llvm::raw_ostream &os) const {
  os << dtypeName(dtype);
  if (shape.empty())
    return;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      os << ", ";
    if (shape[i].isKnown())
      os << shape[i].getSize();
    else
      os << shape[i].getName();
  }
  os << ']';
}

std::string TensorType::str() const {
  std::string s = dtypeName(dtype).str();
  if (!shape.empty())
    s += shapeStr(shape);
  return s;
}
