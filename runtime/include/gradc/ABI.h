/*===- ABI.h - The codes of gradc's C ABI ---------------------*- C/C++ -*-===//
//
// What the C ABI of generated functions (docs/ABI.md) fixes, defined once:
// the status codes every generated function returns and the codes and
// names of the element types. Plain C (for C callers) with a C++ part.
// The generated header prints the status macros from this list (gradc
// includes this file), the C++ runtime and gradc/Python.h include it, and
// the LLVM backend takes its status constants from it.
//
//===----------------------------------------------------------------------===*/

#ifndef GRADC_ABI_H
#define GRADC_ABI_H

/* The status codes, as X(NAME, VALUE) for code that prints or checks them. */
#define GRADC_STATUS_LIST(X)                                                   \
  X(GRADC_OK, 0)                                                               \
  X(GRADC_ERROR_SIZE, 1)                                                       \
  X(GRADC_ERROR_INDEX, 2)                                                      \
  X(GRADC_ERROR_DIV_ZERO, 3)                                                   \
  X(GRADC_ERROR_ALLOC, 4)

/* Generated headers define the same macros under the same guard. */
#ifndef GRADC_STATUS_CODES
#define GRADC_STATUS_CODES
#define GRADC_OK 0
#define GRADC_ERROR_SIZE 1
#define GRADC_ERROR_INDEX 2
#define GRADC_ERROR_DIV_ZERO 3
#define GRADC_ERROR_ALLOC 4
#endif

#ifdef __cplusplus
#include <cstdint>

namespace gradc {
namespace abi {

#define GRADC_ABI_CHECK_STATUS(NAME, VALUE)                                    \
  static_assert(NAME == VALUE, #NAME " differs from GRADC_STATUS_LIST");
GRADC_STATUS_LIST(GRADC_ABI_CHECK_STATUS)
#undef GRADC_ABI_CHECK_STATUS

/// The element types of tensors at the ABI, in this order everywhere
/// (gradc's own DType, the Python module's tables).
enum class DType : uint8_t { F32, F64, I32, Bool };

/// The name a gradc program spells: "f32".
inline constexpr const char *dtypeName(DType t) {
  return t == DType::F32    ? "f32"
         : t == DType::F64  ? "f64"
         : t == DType::I32  ? "i32"
         : t == DType::Bool ? "bool"
                            : "?";
}

/// NumPy's name of the same element type: "float32".
inline constexpr const char *numpyName(DType t) {
  return t == DType::F32    ? "float32"
         : t == DType::F64  ? "float64"
         : t == DType::I32  ? "int32"
         : t == DType::Bool ? "bool"
                            : "?";
}

} // namespace abi
} // namespace gradc
#endif /* __cplusplus */

#endif /* GRADC_ABI_H */
