//===- FuzzFrontEnd.cpp - libFuzzer target for the front end --------------===//
//
// Feeds arbitrary bytes to the lexer and parser, dumps the AST, and, when
// the input parsed without errors, runs Sema and dumps the checked AST. The
// front end must never crash, hang, assert or leak on any input; ASan and
// UBSan (see Sanitizers.cmake) turn any memory error or undefined behaviour
// into a crash the fuzzer reports. Diagnostics go to a consumer that drops
// them: they are the expected outcome for most inputs.
//
//===----------------------------------------------------------------------===//

#include "gradc/AST/ASTDumper.h"
#include "gradc/Basic/Diagnostic.h"
#include "gradc/Parse/Parser.h"
#include "gradc/Sema/Sema.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace gradc;

namespace {

/// Drops every diagnostic; formatting them already happened in the engine.
class DropConsumer : public DiagnosticConsumer {
public:
  void handle(const Diagnostic &) override {}
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  SourceManager sm;
  SourceLoc start = sm.addBuffer(
      "fuzz.grad", std::string(reinterpret_cast<const char *>(data), size));
  DropConsumer consumer;
  DiagnosticEngine diags(sm, consumer);
  llvm::raw_null_ostream null;

  std::unique_ptr<ast::Module> module = parseModule(sm, start, diags);
  ast::dumpModule(*module, sm, null);
  if (diags.hadError())
    return 0;
  checkModule(*module, diags);
  ast::dumpModule(*module, sm, null);
  return 0;
}
