//===- EmitPython.cpp - A Python extension module per .grad file ----------===//
//
// The module is plain CPython API over the C ABI, with the argument checks
// in runtime/include/gradc/Python.h (docs/Python.md says why not
// pybind11). For each exported function it writes:
//
//   1. the C prototype (getCParams, as the header has it);
//   2. a static description of the signature: size names, and per input
//      and output its name, element type, dimensions (a known size, or the
//      index of a size name) and source spelling;
//   3. a METH_FASTCALL wrapper: gradc::python::Call checks and binds the
//      arguments and allocates the results, the C function runs with the
//      GIL released, and its status becomes the result or an exception.
//
// The module also carries `__gradc__`, a JSON description of every
// function (roles, parameters, results, and for a function marked @grad
// the names of its gradient, its split halves and the parameters it is
// differentiated with respect to), from which runtime/python/gradc_torch.py
// builds torch.autograd.Functions.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitPython.h"

#include "gradc/Emit/Mangle.h"

#include "llvm/ADT/StringExtras.h"

using namespace gradc;
using namespace gradc::emit;

namespace {

/// A C string literal of `text`.
std::string quote(llvm::StringRef text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  return s + "\"";
}

/// A JSON string.
std::string json(llvm::StringRef text) { return quote(text); }

llvm::StringRef dtypeEnum(DType t) {
  switch (t) {
  case DType::F32:
    return "gradc::python::DType::F32";
  case DType::F64:
    return "gradc::python::DType::F64";
  case DType::I32:
    return "gradc::python::DType::I32";
  case DType::Bool:
    return "gradc::python::DType::Bool";
  }
  return "gradc::python::DType::F32";
}

llvm::StringRef roleName(ir::Function::Role role) {
  switch (role) {
  case ir::Function::Role::Grad:
    return "grad";
  case ir::Function::Role::Forward:
    return "fwd";
  case ir::Function::Role::Backward:
    return "bwd";
  default:
    return "user";
  }
}

/// `{"name": "x", "dtype": "f32", "shape": ["B", 4]}`.
std::string jsonTensor(llvm::StringRef name, const TensorType &type) {
  std::vector<std::string> dims;
  for (const Dim &d : type.shape)
    dims.push_back(d.isKnown() ? std::to_string(d.getSize())
                               : json(d.getName()));
  return "{\"name\": " + json(name) +
         ", \"dtype\": " + json(dtypeName(type.dtype)) + ", \"shape\": [" +
         llvm::join(dims, ", ") + "]}";
}

/// One function's entry of `__gradc__`.
std::string jsonFunction(const ir::Module &module, const ir::Function &fn,
                         const std::vector<CParam> &params) {
  std::vector<std::string> ins, outs;
  for (const CParam &p : params) {
    if (p.kind == CParamKind::Input)
      ins.push_back(jsonTensor(p.sourceName, p.type));
    else if (p.kind == CParamKind::Output)
      outs.push_back(jsonTensor(p.sourceName, p.type));
  }
  std::string s = json(fn.getName()) +
                  ": {\"role\": " + json(roleName(fn.getRole())) +
                  ", \"params\": [" + llvm::join(ins, ", ") +
                  "], \"results\": [" + llvm::join(outs, ", ") + "]";
  if (const ir::Function *primal = findPrimal(module, fn))
    s += ", \"primal\": " + json(primal->getName());
  if (const auto &spec = fn.getGradSpec()) {
    std::vector<std::string> wrt;
    for (unsigned i : spec->wrt)
      wrt.push_back(std::to_string(i));
    s += ", \"grad\": " + json(spec->gradName) +
         ", \"fwd\": " + json(spec->fwdName) +
         ", \"bwd\": " + json(spec->bwdName) + ", \"wrt\": [" +
         llvm::join(wrt, ", ") + "]";
  }
  return s + "}";
}

/// The descriptions of one list of tensors (inputs or outputs) of function
/// number `index`; returns the array's name, or "nullptr" if empty.
std::string emitTensors(llvm::raw_ostream &os, unsigned index,
                        llvm::StringRef what,
                        const std::vector<const CParam *> &tensors,
                        const llvm::StringMap<unsigned> &sizeIndex) {
  if (tensors.empty())
    return "nullptr";
  std::string prefix = "f" + std::to_string(index) + "_" + what.str();
  std::vector<std::string> entries;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const CParam &p = *tensors[i];
    std::string dims = "nullptr";
    if (!p.type.shape.empty()) {
      std::vector<std::string> values;
      for (const Dim &d : p.type.shape)
        values.push_back(
            d.isKnown()
                ? std::to_string(d.getSize())
                : std::to_string(-1 - int64_t(sizeIndex.lookup(d.getName()))));
      dims = prefix + std::to_string(i) + "_dims";
      os << "static const int64_t " << dims << "[] = {"
         << llvm::join(values, ", ") << "};\n";
    }
    entries.push_back("    {" + quote(p.sourceName) + ", " +
                      dtypeEnum(p.type.dtype).str() + ", " +
                      std::to_string(p.type.shape.size()) + ", " + dims + ", " +
                      quote(p.type.str()) + "},");
  }
  os << "static const gradc::python::Tensor " << prefix << "[] = {\n"
     << llvm::join(entries, "\n") << "\n};\n";
  return prefix;
}

/// Steps 1-3 for function number `index`; returns the wrapper's name.
std::string emitWrapper(llvm::raw_ostream &os, const ir::Module &module,
                        const ir::Function &fn, unsigned index,
                        const EmitOptions &options, std::string &metadata) {
  NameScope scope;
  std::vector<CParam> params = getCParams(module, fn, scope);
  std::string symbol = cSymbolName(options.moduleName, fn.getName());
  std::vector<std::string> decls;
  for (const CParam &p : params)
    decls.push_back(cParamDecl(p));
  os << "\n// " << sourceSignature(fn) << "\n"
     << "extern \"C\" int " << symbol << "(" << llvm::join(decls, ", ")
     << ");\n";

  llvm::StringMap<unsigned> sizeIndex;
  std::vector<std::string> sizeNames;
  std::vector<const CParam *> inputs, outputs;
  std::vector<std::string> args;
  for (const CParam &p : params) {
    std::string type = cTypeName(p.dtype).str();
    switch (p.kind) {
    case CParamKind::Size:
      args.push_back("call.size(" + std::to_string(sizeNames.size()) + ")");
      sizeIndex[p.sourceName] = sizeNames.size();
      sizeNames.push_back(quote(p.sourceName));
      break;
    case CParamKind::Input:
      args.push_back((p.type.isScalar() ? "call.scalar<" : "call.in<") + type +
                     ">(" + std::to_string(inputs.size()) + ")");
      inputs.push_back(&p);
      break;
    case CParamKind::Output:
      args.push_back("call.out<" + type + ">(" +
                     std::to_string(outputs.size()) + ")");
      outputs.push_back(&p);
      break;
    }
  }
  std::string f = "f" + std::to_string(index);
  std::string sizes = "nullptr";
  if (!sizeNames.empty()) {
    sizes = f + "_sizes";
    os << "static const char *const " << sizes << "[] = {"
       << llvm::join(sizeNames, ", ") << "};\n";
  }
  std::string ins = emitTensors(os, index, "in", inputs, sizeIndex);
  std::string outs = emitTensors(os, index, "out", outputs, sizeIndex);
  os << "static const gradc::python::Function " << f << "_spec = {"
     << quote(fn.getName()) << ", " << sizeNames.size() << ", " << sizes << ", "
     << inputs.size() << ", " << ins << ", " << outputs.size() << ", " << outs
     << "};\n\n"
     << "static PyObject *" << f
     << "(PyObject *, PyObject *const *args, Py_ssize_t nargs,\n"
     << "    PyObject *kwnames) {\n"
     << "  gradc::python::Call call(" << f << "_spec);\n"
     << "  if (!call.parse(args, nargs, kwnames) || !call.allocate())\n"
     << "    return nullptr;\n"
     << "  int status;\n"
     << "  Py_BEGIN_ALLOW_THREADS\n"
     << "  status = " << symbol << "(\n      " << llvm::join(args, ",\n      ")
     << ");\n"
     << "  Py_END_ALLOW_THREADS\n"
     << "  return call.finish(status);\n"
     << "}\n";
  metadata += jsonFunction(module, fn, params);
  return f;
}

} // namespace

void emit::emitPython(const ir::Module &module, const EmitOptions &options,
                      llvm::raw_ostream &os) {
  const std::string &name = options.moduleName;
  os << "// Generated by gradc from "
     << (options.sourceName.empty() ? "<unknown>" : options.sourceName)
     << ". Do not edit.\n"
     << "//\n"
     << "// The Python extension module '" << name
     << "' (docs/Python.md): every function of the\n"
     << "// module over its C ABI (docs/ABI.md), taking NumPy arrays and CPU "
        "torch\n"
     << "// tensors. Compile with -I runtime/include and the Python headers, "
        "and link\n"
     << "// with the module's code from either backend.\n\n"
     << "#include \"gradc/Python.h\"\n";

  std::vector<std::string> methods;
  std::string metadata;
  unsigned index = 0;
  for (const auto &f : module.getFunctions()) {
    if (!isExported(*f))
      continue;
    if (!metadata.empty())
      metadata += ", ";
    std::string wrapper =
        emitWrapper(os, module, *f, index++, options, metadata);
    std::string doc = llvm::join(describeFunction(module, *f), "\n");
    methods.push_back("    {" + quote(f->getName()) +
                      ", reinterpret_cast<PyCFunction>(\n"
                      "         reinterpret_cast<void (*)()>(" +
                      wrapper + ")),\n     METH_FASTCALL | METH_KEYWORDS, " +
                      quote(doc) + "},");
  }
  std::string source = options.sourceName.empty() ? "" : options.sourceName;
  metadata = "{\"module\": " + json(name) + ", \"source\": " + json(source) +
             ", \"functions\": {" + metadata + "}}";

  os << "\nstatic PyMethodDef methods[] = {\n";
  for (const std::string &m : methods)
    os << m << "\n";
  os << "    {nullptr, nullptr, 0, nullptr}};\n\n"
     << "static PyModuleDef moduleDef = {\n"
     << "    PyModuleDef_HEAD_INIT, " << quote(name) << ",\n    "
     << quote("gradc functions of " +
              (source.empty() ? std::string("a .grad file") : source) +
              " (docs/Python.md)")
     << ",\n    -1, methods, nullptr, nullptr, nullptr, nullptr};\n\n"
     << "PyMODINIT_FUNC PyInit_" << name << "() {\n"
     << "  if (!gradc::python::initialize())\n"
     << "    return nullptr;\n"
     << "  PyObject *m = PyModule_Create(&moduleDef);\n"
     << "  if (m && PyModule_AddStringConstant(m, \"__gradc__\",\n"
     << "                                      " << quote(metadata)
     << ") != 0)\n"
     << "    Py_CLEAR(m);\n"
     << "  return m;\n"
     << "}\n";
}
