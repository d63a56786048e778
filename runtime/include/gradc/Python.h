//===- Python.h - What generated Python modules include --------*- C++ -*-===//
//
// The argument handling of the extension modules that `gradc --emit=python`
// writes (docs/Python.md): one Call per call of a wrapped C function takes
// its Python arguments, checks each against the signature, binds the size
// names from the shapes, allocates the results as NumPy arrays and turns the
// C status into a Python exception.
//
// It uses the CPython API and the buffer protocol only: no NumPy headers
// (results are made by calling numpy.empty) and no libtorch (a CPU tensor
// is read in place through its Python attributes, dtype, shape,
// is_contiguous() and data_ptr(), and results go back through
// torch.from_numpy when any argument was a tensor). Inputs are never copied: a
// tensor that is not C-contiguous, or whose element type, rank or shape differ
// from the signature, is refused with a TypeError or ValueError that names the
// argument and the expected type, as gradc's diagnostics would.
//
// Generated modules are one translation unit each; everything here is in
// an unnamed namespace so that two modules loaded together share nothing.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_PYTHON_H
#define GRADC_PYTHON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gradc/ABI.h"

namespace gradc::python {
namespace {

using abi::DType;
using abi::dtypeName;
using abi::numpyName;

/// A parameter or result of a wrapped function. `dims[d]` is a known size
/// when >= 0, and size name `-1 - dims[d]` of the function otherwise.
struct Tensor {
  const char *name;
  DType dtype;
  int rank;
  const int64_t *dims;
  /// The type as the source spells it: `f32[B, 4]`.
  const char *type;
};

/// A wrapped C function: its size names, inputs and outputs in ABI order.
struct Function {
  const char *name;
  int numSizes;
  const char *const *sizeNames;
  int numInputs;
  const Tensor *inputs;
  int numOutputs;
  const Tensor *outputs;
};

/// The gradc type of a buffer's elements, or false for any other.
inline bool dtypeOfFormat(const Py_buffer &view, DType &t) {
  const char *f = view.format ? view.format : "B";
  if (*f == '@' || *f == '=' || *f == '<')
    ++f;
  if (f[0] == 0 || f[1] != 0)
    return false;
  switch (f[0]) {
  case 'f':
    t = DType::F32;
    return view.itemsize == 4;
  case 'd':
    t = DType::F64;
    return view.itemsize == 8;
  case 'i':
  case 'l':
    t = DType::I32;
    return view.itemsize == 4;
  case '?':
    t = DType::Bool;
    return view.itemsize == 1;
  }
  return false;
}

/// `[3, 4]`.
inline std::string describeDims(size_t rank, const int64_t *dims) {
  std::string s = "[";
  for (size_t d = 0; d < rank; ++d)
    s += (d ? ", " : "") + std::to_string(dims[d]);
  return s + "]";
}

/// How an argument that does not fit is described: `f64[3, 4]`, or the
/// NumPy name of another element type (`int64[3]`).
inline std::string describeBuffer(const Py_buffer &view) {
  DType t;
  std::string s;
  if (dtypeOfFormat(view, t)) {
    s = dtypeName(t);
  } else {
    const char *f = view.format ? view.format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
      ++f;
    static const struct {
      char c;
      const char *name;
    } names[] = {{'e', "float16"}, {'b', "int8"},   {'B', "uint8"},
                 {'h', "int16"},   {'H', "uint16"}, {'I', "uint32"},
                 {'L', "uint64"},  {'q', "int64"},  {'Q', "uint64"}};
    s = std::string("format '") + f + "'";
    if (f[0] && !f[1]) {
      if (f[0] == 'l' && view.itemsize == 8)
        s = "int64";
      for (const auto &n : names)
        if (n.c == f[0])
          s = n.name;
    }
  }
  std::vector<int64_t> dims(view.shape, view.shape + view.ndim);
  return s + describeDims(dims.size(), dims.data());
}

/// The Python objects that every module shares: numpy.empty, and
/// torch.Tensor and torch.from_numpy once torch is imported.
struct Globals {
  PyObject *numpyEmpty = nullptr;
  PyObject *dtypes[4] = {};
  PyObject *tensorType = nullptr;
  PyObject *fromNumpy = nullptr;
  /// torch.float32, torch.float64, torch.int32, torch.bool (DType order).
  PyObject *torchDtypes[4] = {};
  /// The attribute names read from a tensor, interned once.
  PyObject *isCpu = nullptr, *dtype = nullptr, *shape = nullptr,
           *isContiguous = nullptr, *dataPtr = nullptr;
};

inline Globals &globals() {
  static Globals g;
  return g;
}

/// Imports NumPy; called by the module's init function.
inline bool initialize() {
  Globals &g = globals();
  PyObject *numpy = PyImport_ImportModule("numpy");
  if (!numpy)
    return false;
  g.numpyEmpty = PyObject_GetAttrString(numpy, "empty");
  g.isCpu = PyUnicode_InternFromString("is_cpu");
  g.dtype = PyUnicode_InternFromString("dtype");
  g.shape = PyUnicode_InternFromString("shape");
  g.isContiguous = PyUnicode_InternFromString("is_contiguous");
  g.dataPtr = PyUnicode_InternFromString("data_ptr");
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::Bool})
    g.dtypes[int(t)] = PyObject_GetAttrString(
        numpy, t == DType::Bool ? "bool_" : numpyName(t));
  Py_DECREF(numpy);
  return g.numpyEmpty && g.dtypes[0] && g.dtypes[1] && g.dtypes[2] &&
         g.dtypes[3] && g.isCpu && g.dtype && g.shape && g.isContiguous &&
         g.dataPtr;
}

/// torch.Tensor if torch has been imported (no argument can be a tensor
/// before), else null.
inline PyObject *tensorType() {
  Globals &g = globals();
  if (g.tensorType)
    return g.tensorType;
  PyObject *name = PyUnicode_FromString("torch");
  PyObject *torch = name ? PyImport_GetModule(name) : nullptr;
  Py_XDECREF(name);
  if (!torch) {
    PyErr_Clear();
    return nullptr;
  }
  g.tensorType = PyObject_GetAttrString(torch, "Tensor");
  g.fromNumpy = PyObject_GetAttrString(torch, "from_numpy");
  const char *names[] = {"float32", "float64", "int32", "bool"};
  bool ok = g.tensorType && g.fromNumpy;
  for (int k = 0; k < 4; ++k)
    ok = ok && (g.torchDtypes[k] = PyObject_GetAttrString(torch, names[k]));
  Py_DECREF(torch);
  if (!ok) {
    PyErr_Clear();
    Py_CLEAR(g.tensorType);
    Py_CLEAR(g.fromNumpy);
    for (PyObject *&d : g.torchDtypes)
      Py_CLEAR(d);
  }
  return g.tensorType;
}

/// The arguments and results of one call of a wrapped function.
class Call {
public:
  explicit Call(const Function &fn)
      : fn(fn), sizes(fn.numSizes, -1), sizeFrom(fn.numSizes, -1),
        inputs(fn.numInputs), outputs(fn.numOutputs) {}
  Call(const Call &) = delete;
  Call &operator=(const Call &) = delete;
  ~Call() {
    for (Slot &s : inputs)
      s.release();
    for (Slot &s : outputs)
      s.release();
  }

  /// Takes the arguments (positional, then keywords by parameter name) and
  /// checks each; false with a Python exception set.
  bool parse(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    std::vector<PyObject *> given(fn.numInputs, nullptr);
    if (nargs > fn.numInputs)
      return arityError(nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0));
    for (Py_ssize_t i = 0; i < nargs; ++i)
      given[i] = args[i];
    Py_ssize_t numKw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < numKw; ++k) {
      const char *key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
      if (!key)
        return false;
      int index = -1;
      for (int i = 0; i < fn.numInputs; ++i)
        if (std::strcmp(fn.inputs[i].name, key) == 0)
          index = i;
      if (index < 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s() got an unexpected keyword argument '%s'", fn.name,
                     key);
        return false;
      }
      if (given[index]) {
        PyErr_Format(PyExc_TypeError,
                     "%s() got multiple values for argument '%s'", fn.name,
                     key);
        return false;
      }
      given[index] = args[nargs + k];
    }
    for (int i = 0; i < fn.numInputs; ++i) {
      if (!given[i]) {
        PyErr_Format(PyExc_TypeError, "%s() missing argument '%s' (%s)",
                     fn.name, fn.inputs[i].name, fn.inputs[i].type);
        return false;
      }
      if (!(fn.inputs[i].rank == 0 ? takeScalar(i, given[i])
                                   : takeTensor(i, given[i])))
        return false;
    }
    return true;
  }

  /// Allocates the results; false with a Python exception set.
  bool allocate() {
    Globals &g = globals();
    for (int i = 0; i < fn.numOutputs; ++i) {
      const Tensor &t = fn.outputs[i];
      PyObject *shape = PyTuple_New(t.rank);
      if (!shape)
        return false;
      for (int d = 0; d < t.rank; ++d)
        PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(dim(t, d)));
      PyObject *array = PyObject_CallFunctionObjArgs(
          g.numpyEmpty, shape, g.dtypes[int(t.dtype)], nullptr);
      Py_DECREF(shape);
      if (!array)
        return false;
      Slot &s = outputs[i];
      s.owner = array;
      if (PyObject_GetBuffer(array, &s.view,
                             PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0)
        return false;
      s.hasView = true;
    }
    return true;
  }

  int64_t size(int k) const { return sizes[k]; }
  template <class T> const T *in(int i) const {
    return static_cast<const T *>(inputs[i].data);
  }
  template <class T> T scalar(int i) const {
    const Slot &s = inputs[i];
    switch (fn.inputs[i].dtype) {
    case DType::I32:
      return static_cast<T>(s.i);
    case DType::Bool:
      return static_cast<T>(s.b);
    default:
      return static_cast<T>(s.d);
    }
  }
  template <class T> T *out(int i) const {
    return static_cast<T *>(outputs[i].view.buf);
  }

  /// The results (one object, or a tuple of several), or null with the
  /// exception that `status` stands for.
  PyObject *finish(int status) {
    if (status != GRADC_OK)
      return statusError(status);
    PyObject *fromNumpy = sawTensor ? globals().fromNumpy : nullptr;
    std::vector<PyObject *> results;
    for (Slot &s : outputs) {
      PyBuffer_Release(&s.view);
      s.hasView = false;
      PyObject *r = s.owner;
      s.owner = nullptr;
      if (fromNumpy) {
        PyObject *t = PyObject_CallOneArg(fromNumpy, r);
        Py_DECREF(r);
        r = t;
      }
      if (!r) {
        for (PyObject *done : results)
          Py_DECREF(done);
        return nullptr;
      }
      results.push_back(r);
    }
    if (results.size() == 1)
      return results[0];
    PyObject *tuple = PyTuple_New(results.size());
    if (!tuple) {
      for (PyObject *r : results)
        Py_DECREF(r);
      return nullptr;
    }
    for (size_t i = 0; i < results.size(); ++i)
      PyTuple_SET_ITEM(tuple, i, results[i]);
    return tuple;
  }

private:
  struct Slot {
    Py_buffer view{};
    bool hasView = false;
    /// An input tensor's elements (in `view`, or a torch tensor's).
    void *data = nullptr;
    /// A result array.
    PyObject *owner = nullptr;
    double d = 0;
    int32_t i = 0;
    uint8_t b = 0;
    void release() {
      if (hasView)
        PyBuffer_Release(&view);
      hasView = false;
      Py_CLEAR(owner);
    }
  };

  int64_t dim(const Tensor &t, int d) const {
    return t.dims[d] >= 0 ? t.dims[d] : sizes[-1 - t.dims[d]];
  }

  bool arityError(Py_ssize_t got) {
    std::string names;
    for (int i = 0; i < fn.numInputs; ++i)
      names += std::string(i ? ", " : "") + fn.inputs[i].name;
    PyErr_Format(PyExc_TypeError, "%s() takes %d argument%s (%s), got %zd",
                 fn.name, fn.numInputs, fn.numInputs == 1 ? "" : "s",
                 names.c_str(), got);
    return false;
  }

  bool takeScalar(int i, PyObject *arg) {
    const Tensor &t = fn.inputs[i];
    Slot &s = inputs[i];
    const char *got = Py_TYPE(arg)->tp_name;
    if (t.dtype == DType::I32 || t.dtype == DType::Bool) {
      if (PyFloat_Check(arg) || !PyIndex_Check(arg)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be %s (an integer), got '%s'",
                     fn.name, t.name, t.type, got);
        return false;
      }
      long long v = PyLong_AsLongLong(arg);
      if (v == -1 && PyErr_Occurred())
        return false;
      if (t.dtype == DType::Bool) {
        s.b = v != 0;
        return true;
      }
      if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError,
                     "%s(): argument '%s' must be %s, got %lld, which does "
                     "not fit in 32 bits",
                     fn.name, t.name, t.type, v);
        return false;
      }
      s.i = static_cast<int32_t>(v);
      return true;
    }
    if (PyUnicode_Check(arg) || PyBytes_Check(arg) ||
        (!PyFloat_Check(arg) && !PyIndex_Check(arg) &&
         !PyObject_HasAttrString(arg, "__float__"))) {
      PyErr_Format(PyExc_TypeError,
                   "%s(): argument '%s' must be %s (a real number), got '%s'",
                   fn.name, t.name, t.type, got);
      return false;
    }
    s.d = PyFloat_AsDouble(arg);
    return !(s.d == -1.0 && PyErr_Occurred());
  }

  bool tensorError(PyObject *type, const Tensor &t, const std::string &got,
                   const std::string &why) {
    PyErr_Format(type, "%s(): argument '%s' must be %s, got %s%s", fn.name,
                 t.name, t.type, got.c_str(), why.c_str());
    return false;
  }

  /// A CPU torch tensor read in place: its element type, shape,
  /// contiguity and data pointer, with no NumPy view (which costs more
  /// than the call of a small kernel).
  bool takeTorchTensor(int i, PyObject *arg) {
    const Tensor &t = fn.inputs[i];
    Slot &s = inputs[i];
    Globals &g = globals();
    PyObject *isCpu = PyObject_GetAttr(arg, g.isCpu);
    if (!isCpu)
      return false;
    bool cpu = isCpu == Py_True;
    Py_DECREF(isCpu);
    if (!cpu) {
      PyObject *device = PyObject_GetAttrString(arg, "device");
      PyObject *text = device ? PyObject_Str(device) : nullptr;
      const char *where = text ? PyUnicode_AsUTF8(text) : nullptr;
      std::string got = std::string("a tensor on ") + (where ? where : "?");
      PyErr_Clear();
      Py_XDECREF(device);
      Py_XDECREF(text);
      return tensorError(
          PyExc_TypeError, t, got,
          ": gradc functions run on the CPU (move it with .cpu())");
    }
    PyObject *dtype = PyObject_GetAttr(arg, g.dtype);
    PyObject *shape = dtype ? PyObject_GetAttr(arg, g.shape) : nullptr;
    if (!shape || !PyTuple_Check(shape)) {
      Py_XDECREF(dtype);
      Py_XDECREF(shape);
      return false;
    }
    int known = -1;
    for (int k = 0; k < 4; ++k)
      if (dtype == g.torchDtypes[k])
        known = k;
    std::vector<int64_t> dims;
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); ++d)
      dims.push_back(PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d)));
    Py_DECREF(shape);
    std::string got;
    if (known >= 0) {
      got = dtypeName(DType(known));
    } else {
      PyObject *text = PyObject_Str(dtype);
      const char *name = text ? PyUnicode_AsUTF8(text) : nullptr;
      got = name ? name : "a tensor of another type";
      PyErr_Clear();
      Py_XDECREF(text);
    }
    Py_DECREF(dtype);
    got += describeDims(dims.size(), dims.data());
    if (known < 0 || DType(known) != t.dtype)
      return tensorError(PyExc_TypeError, t, "a tensor of " + got, "");
    if (!checkShape(i, int(dims.size()), dims.data(), got))
      return false;
    PyObject *contiguous = PyObject_CallMethodNoArgs(arg, g.isContiguous);
    if (!contiguous)
      return false;
    bool isContiguous = contiguous == Py_True;
    Py_DECREF(contiguous);
    if (!isContiguous)
      return tensorError(PyExc_ValueError, t, "a non-contiguous " + got,
                         ": gradc passes arrays without copying (use "
                         "numpy.ascontiguousarray or Tensor.contiguous)");
    PyObject *ptr = PyObject_CallMethodNoArgs(arg, g.dataPtr);
    if (!ptr)
      return false;
    s.data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (!s.data && PyErr_Occurred())
      return false;
    sawTensor = true;
    return true;
  }

  /// Rank, known dimensions and size names of an input; `got` describes
  /// it for the message.
  bool checkShape(int i, int rank, const int64_t *shape,
                  const std::string &got) {
    const Tensor &t = fn.inputs[i];
    if (rank != t.rank)
      return tensorError(PyExc_ValueError, t, got,
                         ": rank " + std::to_string(rank) + ", expected " +
                             std::to_string(t.rank));
    for (int d = 0; d < t.rank; ++d) {
      int64_t n = shape[d];
      if (t.dims[d] >= 0) {
        if (n != t.dims[d])
          return tensorError(PyExc_ValueError, t, got,
                             ": dimension " + std::to_string(d) + " is " +
                                 std::to_string(n) + ", expected " +
                                 std::to_string(t.dims[d]));
        continue;
      }
      int k = -1 - int(t.dims[d]);
      if (sizes[k] < 0) {
        sizes[k] = n;
        sizeFrom[k] = i;
      } else if (sizes[k] != n) {
        const char *from = fn.inputs[sizeFrom[k]].name;
        return tensorError(PyExc_ValueError, t, got,
                           std::string(": size '") + fn.sizeNames[k] + "' is " +
                               std::to_string(sizes[k]) + " from argument '" +
                               from + "'");
      }
    }
    return true;
  }

  bool takeTensor(int i, PyObject *arg) {
    const Tensor &t = fn.inputs[i];
    Slot &s = inputs[i];
    if (PyObject *tensor = tensorType();
        tensor && PyObject_TypeCheck(arg, (PyTypeObject *)tensor))
      return takeTorchTensor(i, arg);
    if (PyObject_GetBuffer(arg, &s.view, PyBUF_STRIDES | PyBUF_FORMAT) != 0) {
      PyErr_Clear();
      return tensorError(PyExc_TypeError, t,
                         std::string("'") + Py_TYPE(arg)->tp_name + "'",
                         " (pass a numpy.ndarray or a CPU torch.Tensor)");
    }
    s.hasView = true;
    s.data = s.view.buf;
    const Py_buffer &v = s.view;
    DType dtype;
    if (!dtypeOfFormat(v, dtype) || dtype != t.dtype)
      return tensorError(PyExc_TypeError, t, describeBuffer(v), "");
    std::vector<int64_t> shape(v.shape, v.shape + v.ndim);
    if (!checkShape(i, v.ndim, shape.data(), describeBuffer(v)))
      return false;
    if (!PyBuffer_IsContiguous(&v, 'C'))
      return tensorError(PyExc_ValueError, t,
                         "a non-contiguous " + describeBuffer(v),
                         ": gradc passes arrays without copying (use "
                         "numpy.ascontiguousarray or Tensor.contiguous)");
    return true;
  }

  PyObject *statusError(int status) {
    switch (status) {
    case GRADC_ERROR_SIZE:
      PyErr_Format(PyExc_ValueError,
                   "%s(): the sizes of the arguments disagree "
                   "(GRADC_ERROR_SIZE)",
                   fn.name);
      break;
    case GRADC_ERROR_INDEX:
      PyErr_Format(PyExc_IndexError,
                   "%s(): a label of softmax_cross_entropy is outside "
                   "[0, classes) (GRADC_ERROR_INDEX)",
                   fn.name);
      break;
    case GRADC_ERROR_DIV_ZERO:
      PyErr_Format(PyExc_ZeroDivisionError,
                   "%s(): integer division by zero (GRADC_ERROR_DIV_ZERO)",
                   fn.name);
      break;
    case GRADC_ERROR_ALLOC:
      PyErr_Format(PyExc_MemoryError,
                   "%s(): a temporary could not be allocated "
                   "(GRADC_ERROR_ALLOC)",
                   fn.name);
      break;
    default:
      PyErr_Format(PyExc_RuntimeError, "%s(): unknown status %d", fn.name,
                   status);
    }
    return nullptr;
  }

  const Function &fn;
  std::vector<int64_t> sizes;
  std::vector<int> sizeFrom;
  std::vector<Slot> inputs, outputs;
  bool sawTensor = false;
};

} // namespace
} // namespace gradc::python

#endif // GRADC_PYTHON_H
