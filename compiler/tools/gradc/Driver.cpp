//===- Driver.cpp - The compile pipeline of the gradc driver --------------===//

#include "Driver.h"

#include "gradc/AD/ReverseMode.h"
#include "gradc/IR/Verifier.h"
#include "gradc/IRGen/IRGen.h"
#include "gradc/Parse/Parser.h"
#include "gradc/Sema/Sema.h"
#include "gradc/Transforms/Passes.h"

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
  std::string error;
  if (!sm.addFile(path, mainBuffer, error)) {
    diags->report(SourceLoc(), diag::err_cannot_open_file) << path << error;
    return false;
  }
  if (verifyMode)
    static_cast<VerifyDiagnosticConsumer &>(*consumer).addExpectations(
        mainBuffer);
  return true;
}

bool Compilation::parse() {
  ast = parseModule(sm, mainBuffer, *diags);
  return !diags->hadError();
}

bool Compilation::check() { return checkModule(*ast, *diags); }

bool Compilation::lower() {
  ir = lowerModule(*ast, sm);
  return ir::verifyModule(*ir, *diags, "irgen");
}

bool Compilation::differentiate(llvm::StringRef pipeline) {
  if (!ad::differentiate(*ir, *diags))
    return false;
  if (!ir::verifyModule(*ir, *diags, "differentiate"))
    return false;
  if (pipeline.empty())
    return true;
  return runPasses(*ir, pipeline, *diags, /*verifyEach=*/true);
}

int Compilation::finish() {
  if (verifyMode)
    return consumer->finish() ? 0 : 1;
  return diags->hadError() ? 1 : 0;
}
