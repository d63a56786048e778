//===- LLVMJIT.cpp - Running IR functions through LLVM's JIT --------------===//
//
// Compiles a module with EmitLLVM (plus one trampoline per exported
// function) into memory with ORC's LLJIT and calls it. Every call goes
// through the trampoline's single signature
//
//   int32_t __gradc_call_SYM(const int64_t *sizes, void **args, void **outs)
//
// so no C++ code is needed per function signature: arguments are converted
// from ir::Tensor (doubles) into buffers of the C element type, sizes bound
// from the arguments' shapes, and outputs converted back.
//
// The `cpp` backend (lib/ClangJIT) compiles the C++ backend's output with
// Clang, trampolines included, and hands the LLVM module to
// createFromLLVMModule: the calling side is this file for both.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/LLVMJIT.h"

#include "gradc/Emit/EmitLLVM.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/IR/Printer.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

using namespace gradc;
using namespace gradc::emit;

namespace {

using Trampoline = int32_t (*)(const int64_t *, void **, void **);

/// Converts the interpreter's doubles into a buffer of the C element type.
std::vector<char> toBuffer(const ir::Tensor &t) {
  size_t n = t.data.size();
  std::vector<char> buffer(std::max<size_t>(n, 1) * elementByteSize(t.dtype));
  for (size_t i = 0; i < n; ++i) {
    double v = t.data[i];
    switch (t.dtype) {
    case DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(buffer.data() + i * sizeof f, &f, sizeof f);
      break;
    }
    case DType::F64:
      std::memcpy(buffer.data() + i * sizeof v, &v, sizeof v);
      break;
    case DType::I32: {
      int32_t k = static_cast<int32_t>(v);
      std::memcpy(buffer.data() + i * sizeof k, &k, sizeof k);
      break;
    }
    case DType::Bool:
      buffer[i] = v != 0 ? 1 : 0;
      break;
    }
  }
  return buffer;
}

/// Reads a buffer of the C element type back into doubles.
void fromBuffer(const std::vector<char> &buffer, ir::Tensor &t) {
  size_t n = t.numElements();
  t.data.resize(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, buffer.data() + i * sizeof f, sizeof f);
      t.data[i] = f;
      break;
    }
    case DType::F64:
      std::memcpy(&t.data[i], buffer.data() + i * sizeof(double),
                  sizeof(double));
      break;
    case DType::I32: {
      int32_t k;
      std::memcpy(&k, buffer.data() + i * sizeof k, sizeof k);
      t.data[i] = k;
      break;
    }
    case DType::Bool:
      t.data[i] = buffer[i] != 0 ? 1 : 0;
      break;
    }
  }
}

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Binds the size names of `fn` from the shapes of `args`; false with
/// `error` set when a shape contradicts the signature.
bool bindSizes(const ir::Function &fn, llvm::ArrayRef<ir::Tensor> args,
               llvm::StringMap<int64_t> &sizes, std::string &error) {
  if (args.size() != fn.getParams().size()) {
    error = "expected " + std::to_string(fn.getParams().size()) +
            " arguments, got " + std::to_string(args.size());
    return false;
  }
  for (auto [param, arg] : llvm::zip(fn.getParams(), args)) {
    const TensorType &type = param->getType();
    auto mismatch = [&] {
      error = "argument '" + param->getName().str() + "' of shape " +
              shapeString(arg.shape) + " does not fit " + type.str();
      return false;
    };
    if (arg.dtype != type.dtype || arg.shape.size() != type.getRank())
      return mismatch();
    for (auto [d, size] : llvm::zip(type.shape, arg.shape)) {
      if (d.isKnown() ? d.getSize() != size
                      : !sizes.try_emplace(d.getName(), size).second &&
                            sizes.lookup(d.getName()) != size)
        return mismatch();
    }
  }
  return true;
}

/// `gradc run` and `gradc check` hold every result in the interpreter's
/// tensors and print it, so a call whose function makes a tensor above the
/// interpreter's limit (maxInterpreterElements) is refused on every
/// backend, before anything is allocated, with the interpreter's error:
/// `sum(one_hot(i, 4294967296))` fails alike on interp, llvm and cpp
/// (docs/CLI.md), and a result too large for memory is an error, never an
/// abort ("LLVM ERROR: out of memory").
bool checkRunLimit(const ir::Function &fn,
                   const llvm::StringMap<int64_t> &sizes, std::string &error) {
  auto tooLarge = [&](const TensorType &type, llvm::StringRef what) {
    std::vector<int64_t> shape;
    int64_t n = 1;
    bool over = false;
    for (const Dim &d : type.shape) {
      int64_t size = d.isKnown() ? d.getSize() : sizes.lookup(d.getName());
      shape.push_back(size);
      if (size != 0 && n > ir::maxInterpreterElements / size)
        over = true;
      n = over ? n : n * size;
    }
    if (llvm::is_contained(shape, 0) || !over)
      return false;
    error = "in function '" + fn.getName().str() + "': " + what.str() +
            ": a result of shape " + shapeString(shape) +
            " exceeds the interpreter's limit of " +
            std::to_string(ir::maxInterpreterElements) + " elements";
    return true;
  };
  for (const auto &op : fn.getOps())
    for (const ir::Value *v : op->getResults())
      if (tooLarge(v->getType(), "'" + op->getName().str() + "'"))
        return false;
  return true;
}

} // namespace

struct JITModule::Impl {
  const ir::Module *module = nullptr;
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

JITModule::JITModule(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
JITModule::~JITModule() = default;

/// The host's JIT target machine builder at code generation level
/// `optLevel` (0 or optimised).
static llvm::Expected<llvm::orc::JITTargetMachineBuilder>
detectHostMachine(unsigned optLevel) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> jtmb =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  if (jtmb)
    jtmb->setCodeGenOptLevel(optLevel == 0 ? llvm::CodeGenOptLevel::None
                                           : llvm::CodeGenOptLevel::Default);
  return jtmb;
}

std::unique_ptr<JITModule>
JITModule::create(const ir::Module &module, unsigned optLevel,
                  std::string &error, llvm::ArrayRef<std::string> roots) {
  auto fail = [&](llvm::Error e) -> std::unique_ptr<JITModule> {
    error = llvm::toString(std::move(e));
    return nullptr;
  };
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> jtmb =
      detectHostMachine(optLevel);
  if (!jtmb)
    return fail(jtmb.takeError());
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm =
      jtmb->createTargetMachine();
  if (!tm)
    return fail(tm.takeError());

  LLVMOptions options;
  options.moduleName = jitModuleName;
  options.optLevel = optLevel;
  options.jitWrappers = true;
  options.scratchCache = false;
  options.roots.assign(roots.begin(), roots.end());
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> llvmModule =
      buildLLVMModule(module, *ctx, **tm, options, error);
  if (!llvmModule)
    return nullptr;
  return createFromLLVMModule(module, std::move(llvmModule), std::move(ctx),
                              optLevel, error);
}

/// The loops that the `parallel` loop pass marked call libgomp's
/// GOMP_parallel through a weak reference (docs/ABI.md, "Threads"): when
/// GRADC_NUM_THREADS asks for threads, libgomp is loaded into the process
/// once (if it is installed), so that the JIT resolves it; otherwise the
/// reference stays null and the loops run on this thread.
static void loadOpenMPForThreads() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char *text = std::getenv("GRADC_NUM_THREADS");
    if (text && std::strtol(text, nullptr, 10) > 1)
      llvm::sys::DynamicLibrary::LoadLibraryPermanently("libgomp.so.1");
  });
}

std::unique_ptr<JITModule>
JITModule::createFromLLVMModule(const ir::Module &module,
                                std::unique_ptr<llvm::Module> llvmModule,
                                std::unique_ptr<llvm::LLVMContext> context,
                                unsigned optLevel, std::string &error) {
  auto fail = [&](llvm::Error e) -> std::unique_ptr<JITModule> {
    error = llvm::toString(std::move(e));
    return nullptr;
  };
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> jtmb =
      detectHostMachine(optLevel);
  if (!jtmb)
    return fail(jtmb.takeError());
  loadOpenMPForThreads();
  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> jit =
      llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
  if (!jit)
    return fail(jit.takeError());
  // The extern functions the driver loaded (compiled from the user's C++
  // or from a --load library, docs/Extern.md) resolve to their code.
  llvm::orc::SymbolMap externs;
  for (const auto &[name, code] : ir::getLoadedExterns())
    if (code.address)
      externs[(*jit)->mangleAndIntern(name)] = {
          llvm::orc::ExecutorAddr::fromPtr(code.address),
          llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (!externs.empty())
    if (llvm::Error e = (*jit)->getMainJITDylib().define(
            llvm::orc::absoluteSymbols(std::move(externs))))
      return fail(std::move(e));
  if (llvm::Error e = (*jit)->addIRModule(llvm::orc::ThreadSafeModule(
          std::move(llvmModule), std::move(context))))
    return fail(std::move(e));
  auto impl = std::make_unique<Impl>();
  impl->module = &module;
  impl->jit = std::move(*jit);
  return std::unique_ptr<JITModule>(new JITModule(std::move(impl)));
}

bool JITModule::call(llvm::StringRef fnName, llvm::ArrayRef<ir::Tensor> args,
                     std::vector<ir::Tensor> &results, std::string &error) {
  const ir::Function *fn = impl->module->lookup(fnName);
  if (!fn || fn->getRole() == ir::Function::Role::RuleInstance) {
    error = "no function named '" + fnName.str() + "'";
    return false;
  }
  llvm::StringMap<int64_t> sizeMap;
  if (!bindSizes(*fn, args, sizeMap, error) ||
      !checkRunLimit(*fn, sizeMap, error))
    return false;
  std::vector<int64_t> sizes;
  for (const std::string &name : fn->getSizeNames())
    sizes.push_back(sizeMap.lookup(name));

  std::vector<std::vector<char>> inputs;
  std::vector<void *> argPtrs;
  for (const ir::Tensor &t : args)
    inputs.push_back(toBuffer(t));
  for (std::vector<char> &buffer : inputs)
    argPtrs.push_back(buffer.data());

  // Outputs: the result types with the size names substituted.
  results.clear();
  std::vector<std::vector<char>> outputs;
  std::vector<void *> outPtrs;
  for (const ir::Value *v : fn->getReturns()) {
    ir::Tensor t;
    t.dtype = v->getType().dtype;
    for (const Dim &d : v->getType().shape)
      t.shape.push_back(d.isKnown() ? d.getSize()
                                    : sizeMap.lookup(d.getName()));
    outputs.emplace_back(std::max<int64_t>(t.numElements(), 1) *
                         elementByteSize(t.dtype));
    results.push_back(std::move(t));
  }
  for (std::vector<char> &buffer : outputs)
    outPtrs.push_back(buffer.data());

  std::string symbol = jitWrapperName(cSymbolName(jitModuleName, fnName));
  // The first lookup compiles the module: on a large stack, as
  // writeObjectFile does.
  std::optional<llvm::Expected<llvm::orc::ExecutorAddr>> found;
  runWithLargeStack([&] { found.emplace(impl->jit->lookup(symbol)); });
  llvm::Expected<llvm::orc::ExecutorAddr> &addr = *found;
  if (!addr) {
    error = llvm::toString(addr.takeError());
    return false;
  }
  int32_t status =
      addr->toPtr<Trampoline>()(sizes.data(), argPtrs.data(), outPtrs.data());
  if (status != 0) {
    error = describeStatus(status);
    return false;
  }
  for (auto [buffer, t] : llvm::zip(outputs, results))
    fromBuffer(buffer, t);
  return true;
}

namespace {

/// The compiled modules of this process, by the printed IR of their
/// module and a tag that says what was compiled: `gradc check` calls one
/// function hundreds of times, and compiling it once makes the JIT as fast
/// to use as the interpreter. Keyed by the module's text, not its address,
/// so that a changed (or another) module is never served stale code.
class JITCache {
public:
  JITModule *
  get(const ir::Module &module, llvm::StringRef tag,
      llvm::function_ref<std::unique_ptr<JITModule>(std::string &)> compile,
      std::string &error) {
    std::string key;
    llvm::raw_string_ostream os(key);
    ir::printModule(module, os);
    os << "\n// " << tag;
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] = cache.try_emplace(key);
    Entry &entry = it->second;
    if (inserted)
      entry.jit = compile(entry.error);
    if (!entry.jit)
      error = entry.error;
    return entry.jit.get();
  }

private:
  /// A compiled module, or why it could not be compiled: compiling is
  /// deterministic, so a failure is not tried again on every call.
  struct Entry {
    std::unique_ptr<JITModule> jit;
    std::string error;
  };
  std::mutex mutex;
  std::map<std::string, Entry> cache;
};

} // namespace

JITModule *emit::getCachedJITModule(
    const ir::Module &module, llvm::StringRef tag,
    llvm::function_ref<std::unique_ptr<JITModule>(std::string &)> compile,
    std::string &error) {
  static JITCache cache;
  return cache.get(module, tag, compile, error);
}

bool emit::runWithLLVMJIT(const ir::Module &module, llvm::StringRef fnName,
                          llvm::ArrayRef<ir::Tensor> args,
                          std::vector<ir::Tensor> &results,
                          std::string &error) {
  JITModule *jit = getCachedJITModule(
      module, "llvm:" + fnName.str(),
      [&](std::string &compileError) {
        return JITModule::create(module, 2, compileError, {fnName.str()});
      },
      error);
  return jit && jit->call(fnName, args, results, error);
}

bool emit::runWithLLVMJITLoops(const ir::Module &module, llvm::StringRef fnName,
                               llvm::ArrayRef<ir::Tensor> args,
                               std::vector<ir::Tensor> &results,
                               std::string &error) {
  return runWithLLVMJIT(module, fnName, args, results, error);
}

std::string emit::describeStatus(int status) {
  switch (status) {
  case 1:
    return "a size argument is negative (GRADC_ERROR_SIZE)";
  case 2:
    return "an index is out of range (GRADC_ERROR_INDEX)";
  case 3:
    return "integer division by zero (GRADC_ERROR_DIV_ZERO)";
  case 4:
    return "a temporary could not be allocated (GRADC_ERROR_ALLOC)";
  default:
    return "unknown status " + std::to_string(status);
  }
}
