//===- FuzzABI.cpp - libFuzzer target for the C ABI of generated code -----===//
//
// Compiles a few fixed programs once, with the LLVM backend in process
// (EmitLLVM at -O2, ORC's LLJIT), and calls their functions through the
// C ABI of docs/ABI.md with hostile arguments chosen by the fuzzer: sizes
// that are zero, negative, huge, or whose products overflow int64, and
// null pointers. Each call must either return a status other than
// GRADC_OK or compute without a memory error:
//
//  - a negative size, or a tensor argument or result whose element count
//    overflows int64 (the caller cannot have allocated it), must give a
//    non-zero status; such calls get null pointers for every tensor;
//  - otherwise every argument and result gets a buffer of exactly its
//    size from malloc (null for an empty tensor, as the ABI allows), the
//    call may return any status, and ASan watches the buffers. Calls whose
//    buffers or sizes exceed maxElements are skipped (they would be legal
//    but slow).
//
// The generated code allocates its temporaries with the process's malloc,
// so __asan_default_options below makes a huge allocation return null
// (the code must then report GRADC_ERROR_ALLOC) instead of aborting.
//
// GRADC_FUZZ_ABI_SMALL_SIZES=1 restricts sizes to negative, zero and small
// values whose products cannot overflow, to explore the rest of a call.
//
//===----------------------------------------------------------------------===//

#include "gradc/AD/ReverseMode.h"
#include "gradc/Basic/Diagnostic.h"
#include "gradc/Emit/EmitLLVM.h"
#include "gradc/Emit/Mangle.h"
#include "gradc/IRGen/IRGen.h"
#include "gradc/Parse/Parser.h"
#include "gradc/Sema/Sema.h"
#include "gradc/Transforms/Passes.h"

#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace gradc;

extern "C" const char *__asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=512";
}

namespace {

/// The programs under test: matmul with an inner size that may be zero
/// (issue 12 item 6), broadcasting, reductions, gradients, labels and
/// one_hot indices from the caller, integer division, layout ops.
const char *const source = R"(
fn mm(a: f32[B, K], b: f32[K, M]) -> f32 {
    let m = a @ b
    return sum(m)
}
fn rows(x: f32[B, 5]) -> f32 {
    return sum(x)
}
@grad
fn ew(x: f32[N, 5], y: f32[5]) -> f32 {
    return sum(exp(x) * y + log(abs(x) + 1.0))
}
@grad
fn sce(z: f32[B, C], t: i32[B]) -> f32 {
    return mean(softmax_cross_entropy(z, t))
}
fn hot(i: i32[N], w: f32[C, M]) -> f32[N, M] {
    return one_hot(i, C) @ w
}
fn outer(x: f32[N, 1], y: f32[1, M]) -> f32[N, M] {
    return x * y
}
fn idiv(a: i32[N], b: i32[N]) -> i32[N] {
    return a / b
}
@grad
fn red(x: f64[A, B, C]) -> f64 {
    return sum(logsumexp(x, axis = 1)) + max(x) * mean(x)
}
@grad
fn layout(x: f32[A, B], y: f32[A, B]) -> f32 {
    let s = stack([x, y], axis = 1)
    let t = transpose(x, [1, 0])
    return sum(softmax(s)) + sum(t @ y)
}
)";

constexpr int64_t maxElements = 1 << 16;

using Trampoline = int32_t (*)(const int64_t *, void **, void **);

struct Entry {
  const ir::Function *fn;
  Trampoline call;
};

class DropConsumer : public DiagnosticConsumer {
public:
  void handle(const Diagnostic &) override {}
};

[[noreturn]] void setupError(const std::string &why) {
  std::fprintf(stderr, "FuzzABI: setup failed: %s\n", why.c_str());
  std::abort();
}

/// Everything compiled once per process.
struct Compiled {
  SourceManager sm;
  DropConsumer consumer;
  std::unique_ptr<DiagnosticEngine> diags;
  std::unique_ptr<ast::Module> ast;
  std::unique_ptr<ir::Module> ir;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::vector<Entry> entries;

  Compiled() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    diags = std::make_unique<DiagnosticEngine>(sm, consumer);
    SourceLoc start = sm.addBuffer("abi.grad", source);
    ast = parseModule(sm, start, *diags);
    if (diags->hadError() || !checkModule(*ast, *diags))
      setupError("the programs do not check");
    ir = lowerModule(*ast, sm);
    if (!ad::differentiate(*ir, *diags) ||
        !runPasses(*ir, getDefaultPipeline(), *diags, true))
      setupError("the programs do not differentiate");
    emit::LLVMOptions options;
    options.moduleName = "abi";
    options.jitWrappers = true;
    std::string error;
    std::unique_ptr<llvm::TargetMachine> tm =
        emit::createTargetMachine(options, error);
    if (!tm)
      setupError(error);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> module =
        emit::buildLLVMModule(*ir, *ctx, *tm, options, error);
    if (!module)
      setupError(error);
    auto made = llvm::orc::LLJITBuilder().create();
    if (!made)
      setupError(llvm::toString(made.takeError()));
    jit = std::move(*made);
    if (llvm::Error e = jit->addIRModule(
            llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx))))
      setupError(llvm::toString(std::move(e)));
    for (const auto &fn : ir->getFunctions()) {
      if (fn->getRole() == ir::Function::Role::RuleInstance)
        continue;
      std::string symbol = emit::jitWrapperName(
          emit::cSymbolName(options.moduleName, fn->getName()));
      auto addr = jit->lookup(symbol);
      if (!addr)
        setupError(llvm::toString(addr.takeError()));
      entries.push_back({fn.get(), addr->toPtr<Trampoline>()});
    }
  }
};

/// Reads the fuzzer's bytes in order; zeros once they run out.
struct Bytes {
  const uint8_t *data;
  size_t size;
  uint8_t byte() {
    if (size == 0)
      return 0;
    --size;
    return *data++;
  }
  uint64_t word() {
    uint64_t w = 0;
    for (int i = 0; i < 8; ++i)
      w = (w << 8) | byte();
    return w;
  }
};

/// A size chosen by the fuzzer: mostly from a table of hostile values.
int64_t pickSize(Bytes &in, bool smallOnly) {
  static const int64_t table[] = {
      0,
      1,
      2,
      3,
      7,
      -1,
      -2,
      INT64_MIN,
      INT64_MAX,
      int64_t(1) << 62,
      int64_t(1) << 32,
      int64_t(1) << 31,
      3689348814741910324, // 5 * this wraps to 4 (issue 12, item 6)
      int64_t(1) << 20,
  };
  uint8_t b = in.byte();
  int64_t v;
  if (b < 0xF0)
    v = table[b % (sizeof table / sizeof *table)];
  else
    v = static_cast<int64_t>(in.word());
  if (smallOnly && v > 16)
    v = v % 17;
  return v;
}

/// The element count of `type` under `sizes`; false when it overflows.
/// A zero dimension makes the count zero whatever the others are, as in
/// the generated code's size checks (docs/ABI.md).
bool elementCount(const TensorType &type,
                  const std::map<std::string, int64_t> &sizes, int64_t &count) {
  std::vector<int64_t> dims;
  for (const Dim &d : type.shape)
    dims.push_back(d.isKnown() ? d.getSize() : sizes.at(d.getName().str()));
  count = 0;
  if (llvm::is_contained(dims, 0))
    return true;
  count = 1;
  for (int64_t n : dims)
    if (__builtin_mul_overflow(count, n, &count))
      return false;
  return true;
}

size_t elementBytes(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 8;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Compiled compiled;
  static const bool smallOnly = [] {
    const char *v = std::getenv("GRADC_FUZZ_ABI_SMALL_SIZES");
    return v && *v && *v != '0';
  }();
  Bytes in{data, size};
  const Entry &entry = compiled.entries[in.byte() % compiled.entries.size()];
  const ir::Function &fn = *entry.fn;

  std::vector<std::string> names = fn.getSizeNames();
  std::vector<int64_t> sizes;
  std::map<std::string, int64_t> byName;
  bool negative = false;
  for (const std::string &name : names) {
    int64_t v = pickSize(in, smallOnly);
    negative |= v < 0;
    sizes.push_back(v);
    byName[name] = v;
  }

  // Which tensors the caller could not have allocated.
  bool overflow = false, tooBig = false;
  std::vector<int64_t> counts;
  std::vector<const ir::Value *> tensors;
  for (const ir::Value *v : fn.getParams())
    tensors.push_back(v);
  for (const ir::Value *v : fn.getReturns())
    tensors.push_back(v);
  for (const ir::Value *v : tensors) {
    int64_t n = 0;
    if (negative || !elementCount(v->getType(), byName, n)) {
      overflow |= !negative;
      n = 0;
    }
    tooBig |= n > maxElements;
    counts.push_back(n);
  }
  // A size past maxElements makes even a call on empty tensors slow: the
  // generated loops still run over the outer dimensions of a tensor whose
  // inner one is zero (softmax over [2^62, 2, 0] visits 2^63 empty rows).
  // That is legal but unbounded work, not a memory error, so such calls
  // are skipped like large buffers.
  for (int64_t v : sizes)
    tooBig |= v > maxElements;
  bool mustFail = negative || overflow;
  if (!mustFail && tooBig)
    return 0;

  // Buffers: exact sizes, filled from the fuzzer's bytes; null when empty
  // or when the call must fail. A scalar parameter is passed by value and
  // always needs its slot.
  std::vector<void *> buffers;
  for (auto [i, v] : llvm::enumerate(tensors)) {
    const TensorType &type = v->getType();
    size_t bytes =
        size_t(type.isScalar() ? 1 : counts[i]) * elementBytes(type.dtype);
    bool isParam = i < fn.getParams().size();
    if (bytes == 0 || (mustFail && !type.isScalar())) {
      buffers.push_back(nullptr);
      continue;
    }
    auto *p = static_cast<uint8_t *>(std::malloc(bytes));
    for (size_t k = 0; k < bytes; ++k)
      p[k] = isParam ? in.byte() : 0xAB;
    // Keep floats finite-ish and labels in a small range sometimes:
    // arbitrary bytes already cover NaN, inf and out-of-range labels.
    buffers.push_back(p);
  }
  std::vector<void *> args(buffers.begin(),
                           buffers.begin() + fn.getParams().size());
  std::vector<void *> outs(buffers.begin() + fn.getParams().size(),
                           buffers.end());
  int32_t status = entry.call(sizes.data(), args.data(), outs.data());
  for (void *p : buffers)
    std::free(p);
  if (mustFail && status == 0) {
    std::fprintf(stderr, "FuzzABI: %s returned GRADC_OK with sizes",
                 fn.getName().str().c_str());
    for (auto [i, name] : llvm::enumerate(names))
      std::fprintf(stderr, " %s=%lld", name.c_str(), (long long)sizes[i]);
    std::fprintf(stderr, " (negative, or an element count overflows)\n");
    std::abort();
  }
  return 0;
}
