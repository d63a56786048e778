//===- Driver.cpp - The compile pipeline of the gradc driver --------------===//

#include "Driver.h"

#include "Backends.h"
#include "HeaderCache.h"

#include "gradc/AD/ReverseMode.h"
#include "gradc/Basic/Timing.h"
#include "gradc/IR/Verifier.h"
#include "gradc/IRGen/IRGen.h"
#include "gradc/Parse/Parser.h"
#include "gradc/Sema/Sema.h"
#include "gradc/Transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

using namespace gradc;
using namespace gradc::driver;

Compilation::Compilation(bool verify) : verifyMode(verify) {
  if (verify)
    consumer = std::make_unique<VerifyDiagnosticConsumer>(llvm::errs(), sm);
  else
    consumer = std::make_unique<TextDiagnosticPrinter>(llvm::errs(), sm);
  diags = std::make_unique<DiagnosticEngine>(sm, *consumer);
}

bool Compilation::readFile(llvm::StringRef path) {
  TimeRegion region("read");
  std::string error;
  if (!sm.addFile(path, mainBuffer, error)) {
    diags->report(SourceLoc(), diag::err_cannot_open_file) << path << error;
    return false;
  }
  if (verifyMode)
    static_cast<VerifyDiagnosticConsumer &>(*consumer).addExpectations(
        mainBuffer);
  externOptions.baseDir = llvm::sys::path::parent_path(path).str();
  if (externOptions.baseDir.empty())
    externOptions.baseDir = ".";
  return true;
}

bool Compilation::parse() {
  TimeRegion region("parse");
  ast = parseModule(sm, mainBuffer, *diags);
  return !diags->hadError();
}

bool Compilation::check() {
  TimeRegion region("check");
  if (!checkModule(*ast, *diags))
    return false;
  bool hasExterns = llvm::any_of(ast->decls, [](const ast::DeclPtr &d) {
    auto *fn = llvm::dyn_cast_or_null<ast::FnDecl>(d.get());
    return fn && fn->isExtern;
  });
  if (!hasExterns)
    return true;
  // A check that passed before, with the same declarations, flags and
  // files, passes again: without loading Clang (HeaderCache.h). -verify
  // runs always check, since they are there to see the diagnostics.
  HeaderCheckCache cache(verifyMode ? "" : HeaderCheckCache::defaultDirectory(),
                         findBackendPlugin());
  {
    TimeRegion lookup("header cache");
    if (cache.lookup(*ast, externOptions))
      return true;
  }
  const BackendPlugin *plugin = getBackendPlugin(*diags);
  if (!plugin)
    return false;
  std::vector<clangjit::CheckedHeader> checked;
  // In -verify mode, a header's notes are expected in the header itself.
  bool ok = plugin->checkExternHeaders(
      *ast, externOptions, sm, *diags,
      [&](SourceLoc buffer) {
        if (verifyMode)
          static_cast<VerifyDiagnosticConsumer &>(*consumer).addExpectations(
              buffer);
      },
      cache.enabled() ? &checked : nullptr);
  cache.store(*ast, externOptions, checked);
  return ok;
}

bool Compilation::loadExterns() {
  if (ir->externs.empty())
    return true;
  // The generated C++ of the cpp backend includes the headers: it gets
  // the flags of the first one.
  const BackendPlugin *plugin = getBackendPlugin(*diags);
  if (!plugin)
    return false;
  std::vector<std::string> args;
  std::string error;
  llvm::SmallString<256> header(externOptions.baseDir);
  llvm::sys::path::append(header, ir->externs.front().header);
  if (plugin->getExternCompilerArgs(externOptions, header, args, error))
    plugin->setGeneratedCodeArgs(args);
  if (plugin->loadExterns(*ir, externOptions, error))
    return true;
  diags->report(ir->externs.front().loc, diag::err_extern_load)
      << ir->externs.front().name << error;
  return false;
}

bool Compilation::lower() {
  TimeRegion region("lower");
  {
    TimeRegion irgen("irgen");
    ir = lowerModule(*ast, sm);
  }
  TimeRegion verify("verify");
  return ir::verifyModule(*ir, *diags, "irgen");
}

bool Compilation::differentiate(llvm::StringRef pipeline) {
  {
    TimeRegion region("differentiate");
    if (!ad::differentiate(*ir, *diags))
      return false;
  }
  // The gradient is verified once, after the passes; each verification
  // of a gradient of 10,000 steps took 4% of its compile time.
  // --verify-each verifies after each step instead, so that an error
  // names the step that made it.
  bool noPasses = pipeline.trim().empty();
  if (verifyEach || noPasses) {
    TimeRegion verify("verify");
    if (!ir::verifyModule(*ir, *diags, "differentiate"))
      return false;
  }
  if (noPasses)
    return true;
  {
    TimeRegion region("passes");
    if (!runPasses(*ir, pipeline, *diags, verifyEach))
      return false;
  }
  if (verifyEach)
    return true;
  TimeRegion verify("verify");
  return ir::verifyModule(*ir, *diags, ("differentiate," + pipeline).str());
}

int Compilation::finish() {
  if (verifyMode)
    return consumer->finish() ? 0 : 1;
  return diags->hadError() ? 1 : 0;
}
