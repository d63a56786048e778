//===- Runtime.h - What gradc-generated C++ code includes -------*- C++ -*-===//
//
// The whole runtime of the C++ backend, header-only and free of
// dependencies beyond the C++17 standard library (and, optionally, a CBLAS
// header). Generated `.cpp` files include it, and so does the C++ layer of
// generated headers. It is three headers:
//
//   - gradc/ABI.h: the status codes and element types of the C ABI
//     (docs/ABI.md), defined once for generated headers, this runtime,
//     gradc/Python.h and the LLVM backend;
//   - gradc/Math.h: the scalar semantics of the elementwise ops, among
//     them the one implementation of f32 exp, log, tanh, sigmoid,
//     softplus, sin, cos, pow and atan, which the LLVM backend links as
//     bitcode and the interpreter calls too (docs/Math.md);
//   - gradc/Kernels.h: `TensorView`, the scratch cache behind `Buffer`,
//     matmul, the normalisations along an axis, one_hot.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_RUNTIME_H
#define GRADC_RUNTIME_H

#include "gradc/ABI.h"
#include "gradc/Kernels.h"
#include "gradc/Math.h"

#endif // GRADC_RUNTIME_H
