//===- HeaderCheck.cpp - Checking extern functions against their headers --===//
//
// Each `extern fn` names a header; gradc will call the function with the
// C ABI of docs/Extern.md, so the header's declaration must take exactly
// what gradc passes. For each header:
//
//   1. A one-line translation unit `#include "header.h"`, placed in the
//      .grad file's directory, is parsed by clang::tooling::ClangTool with
//      the flags of getExternCompilerArgs (-I, -D, compile_commands.json)
//      and Clang's own resource directory. Clang's errors are collected:
//      a missing header or one that does not compile is reported at the
//      `from "..."` of the declaration.
//   2. An AST matcher finds the functions of that name; when there is
//      none, another matcher lists every function declared outside system
//      headers, for a did-you-mean.
//   3. The declaration is compared with the expected C parameter list:
//      linkage (`extern "C"`), return type (`int` status or `void`), the
//      count, the order (the same types in another order is reported as
//      such), then each parameter's element type and const-ness.
//
// Every error is reported at the `.grad` declaration and followed by a
// note at the header's line and column: the header is added to gradc's
// SourceManager, so that the note prints its line with a caret and
// -verify finds expectations written in the header.
//
//===----------------------------------------------------------------------===//

#include "gradc/ClangJIT/Externs.h"

#include "gradc/Emit/Mangle.h"

#include "clang/AST/ASTContext.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/DiagnosticLex.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/ASTUnit.h"
#include "clang/Tooling/CompilationDatabase.h"
#include "clang/Tooling/JSONCompilationDatabase.h"
#include "clang/Tooling/Tooling.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <map>

using namespace gradc;
using namespace gradc::clangjit;
namespace am = clang::ast_matchers;

#ifndef GRADC_CLANG_RESOURCE_DIR
#error "GRADC_CLANG_RESOURCE_DIR must name LLVM 19's lib/clang/19"
#endif

//===----------------------------------------------------------------------===//
// Flags
//===----------------------------------------------------------------------===//

/// Whether a compile command's argument carries an include path or a
/// macro, which a header needs to parse as the project's code sees it.
static bool isHeaderFlag(llvm::StringRef arg) {
  return arg.starts_with("-I") || arg.starts_with("-D") ||
         arg.starts_with("-U") || arg.starts_with("-isystem") ||
         arg.starts_with("-iquote") || arg.starts_with("-std=") ||
         arg == "-include";
}

bool clangjit::getExternCompilerArgs(const ExternOptions &options,
                                     llvm::StringRef headerPath,
                                     std::vector<std::string> &args,
                                     std::string &error) {
  if (!options.baseDir.empty())
    args.push_back("-I" + options.baseDir);
  for (const std::string &dir : options.includeDirs)
    args.push_back("-I" + dir);
  for (const std::string &d : options.defines)
    args.push_back("-D" + d);
  if (options.compileCommandsDir.empty())
    return true;
  std::unique_ptr<clang::tooling::CompilationDatabase> db =
      clang::tooling::CompilationDatabase::loadFromDirectory(
          options.compileCommandsDir, error);
  if (!db)
    return false;
  // A header is rarely in the database itself: libTooling infers its
  // command from the nearest source file that is.
  db = clang::tooling::inferMissingCompileCommands(std::move(db));
  std::vector<clang::tooling::CompileCommand> commands =
      db->getCompileCommands(headerPath);
  if (commands.empty())
    return true;
  const clang::tooling::CompileCommand &command = commands.front();
  const std::vector<std::string> &line = command.CommandLine;
  for (size_t i = 1; i < line.size(); ++i) {
    llvm::StringRef arg = line[i];
    if (!isHeaderFlag(arg))
      continue;
    std::string value;
    llvm::StringRef flag = arg;
    // `-I dir` and `-include file` take the next argument.
    bool separate = arg == "-I" || arg == "-D" || arg == "-isystem" ||
                    arg == "-iquote" || arg == "-include";
    if (separate && i + 1 < line.size())
      value = line[++i];
    else if (arg.starts_with("-I"))
      flag = "-I", value = arg.drop_front(2).str();
    // A relative include directory is relative to the command's directory.
    bool isPath = flag == "-I" || flag == "-isystem" || flag == "-iquote";
    if (isPath && !value.empty() && llvm::sys::path::is_relative(value)) {
      llvm::SmallString<256> full(command.Directory);
      llvm::sys::path::append(full, value);
      value = full.str().str();
    }
    if (separate || flag == "-I") {
      args.push_back(flag.str());
      args.push_back(value);
    } else {
      args.push_back(arg.str());
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The expected declaration
//===----------------------------------------------------------------------===//

namespace {

/// One parameter of the C function gradc calls.
struct ExpectedParam {
  enum Kind { Size, Input, Output } kind;
  std::string name;
  DType dtype = DType::F32;
  bool scalar = false;
  std::string what; ///< "size 'N'", "input 'x' (f32[N])", "result 0 (f32[N])"

  /// The C spelling of the parameter's type: `int64_t`, `const float *`.
  std::string cType() const {
    if (kind == Size)
      return "int64_t";
    std::string element = emit::cTypeName(dtype).str();
    if (kind == Input)
      return scalar ? element : "const " + element + " *";
    return element + " *";
  }
  std::string cDecl() const {
    std::string t = cType();
    return t + (llvm::StringRef(t).ends_with("*") ? "" : " ") + name;
  }
};

std::vector<ExpectedParam> expectedParams(const ast::FnDecl &fn) {
  std::vector<ExpectedParam> params;
  std::vector<std::string> sizes;
  for (const TensorType &t : fn.paramTypes)
    for (const Dim &d : t.shape)
      if (d.isNamed() && !llvm::is_contained(sizes, d.getName().str()))
        sizes.push_back(d.getName().str());
  for (const std::string &s : sizes)
    params.push_back(
        {ExpectedParam::Size, s, DType::F32, true, "size '" + s + "'"});
  for (size_t i = 0; i < fn.paramTypes.size() && i < fn.params.size(); ++i) {
    const std::string &name = fn.params[i].name.name;
    params.push_back({ExpectedParam::Input, name, fn.paramTypes[i].dtype,
                      fn.paramTypes[i].isScalar(),
                      "input '" + name + "' (" + fn.paramTypes[i].str() + ")"});
  }
  size_t n = fn.resultTypes.size();
  for (size_t i = 0; i < n; ++i) {
    std::string name = n == 1 ? "out" : "out" + std::to_string(i);
    params.push_back(
        {ExpectedParam::Output, name, fn.resultTypes[i].dtype, false,
         "result " + std::to_string(i) + " (" + fn.resultTypes[i].str() + ")"});
  }
  return params;
}

/// `int soft_threshold(int64_t N, const float *x, float t, float *out)`.
std::string expectedPrototype(const ast::FnDecl &fn,
                              llvm::ArrayRef<ExpectedParam> params) {
  std::vector<std::string> decls;
  for (const ExpectedParam &p : params)
    decls.push_back(p.cDecl());
  return "int " + fn.name.name + "(" + llvm::join(decls, ", ") + ")";
}

//===----------------------------------------------------------------------===//
// Comparing one declaration
//===----------------------------------------------------------------------===//

class HeaderChecker {
public:
  HeaderChecker(const ExternOptions &options, SourceManager &gradcSM,
                DiagnosticEngine &diags,
                llvm::function_ref<void(SourceLoc)> onHeaderBuffer)
      : options(options), gradcSM(gradcSM), diags(diags),
        onHeaderBuffer(onHeaderBuffer) {}

  /// Checks every extern of `module` that names `header`; when they all
  /// pass and `checked` is not null, appends the header and the files
  /// Clang read for it.
  void checkHeader(llvm::StringRef header,
                   llvm::ArrayRef<ast::FnDecl *> externs,
                   std::vector<CheckedHeader> *checked);

  bool hadError = false;

private:
  void checkFunction(ast::FnDecl &fn, clang::ASTUnit &unit);
  void checkParams(ast::FnDecl &fn, const clang::FunctionDecl &decl,
                   clang::ASTContext &ctx);
  bool typeFits(const ExpectedParam &p, clang::QualType type,
                clang::ASTContext &ctx, bool &onlyConst) const;
  void reportMissing(ast::FnDecl &fn, clang::ASTUnit &unit);

  /// gradc's location of a place in a header.
  SourceLoc toLoc(const clang::SourceManager &sm, clang::SourceLocation loc);
  InFlightDiagnostic error(const ast::FnDecl &fn, diag::ID id) {
    return errorAt(fn.name.range.begin, id);
  }
  InFlightDiagnostic errorAt(SourceLoc loc, diag::ID id) {
    hadError = true;
    return diags.report(loc, id);
  }
  std::string printed(clang::QualType type, clang::ASTContext &ctx) const {
    return type.getAsString(ctx.getPrintingPolicy());
  }
  std::string headerName(const clang::FunctionDecl &decl,
                         const clang::SourceManager &sm) const {
    return llvm::sys::path::filename(
               sm.getFilename(sm.getFileLoc(decl.getLocation())))
        .str();
  }

  const ExternOptions &options;
  SourceManager &gradcSM;
  DiagnosticEngine &diags;
  llvm::function_ref<void(SourceLoc)> onHeaderBuffer;
  /// The headers in gradc's SourceManager, by the path Clang opened.
  std::map<std::string, SourceLoc> buffers;
};

/// Keeps Clang's errors instead of printing them.
class ErrorKeeper : public clang::DiagnosticConsumer {
public:
  void HandleDiagnostic(clang::DiagnosticsEngine::Level level,
                        const clang::Diagnostic &info) override {
    clang::DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < clang::DiagnosticsEngine::Error || !first.empty())
      return;
    llvm::SmallString<128> message;
    info.FormatDiagnostic(message);
    first = message.str().str();
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      const clang::SourceManager &sm = info.getSourceManager();
      clang::PresumedLoc p = sm.getPresumedLoc(info.getLocation());
      if (p.isValid())
        first = (llvm::sys::path::filename(p.getFilename()) + ":" +
                 llvm::Twine(p.getLine()) + ":" + llvm::Twine(p.getColumn()) +
                 ": " + first)
                    .str();
    }
    // The header itself is missing (not a file that it includes) when
    // the one-line translation unit fails to include it.
    if (info.getID() == clang::diag::err_pp_file_not_found &&
        info.hasSourceManager() && info.getLocation().isValid()) {
      const clang::SourceManager &sm = info.getSourceManager();
      fileNotFound = sm.isInMainFile(sm.getFileLoc(info.getLocation()));
    }
  }
  std::string first;
  bool fileNotFound = false;
};

SourceLoc HeaderChecker::toLoc(const clang::SourceManager &sm,
                               clang::SourceLocation loc) {
  loc = sm.getFileLoc(loc);
  if (loc.isInvalid())
    return SourceLoc();
  std::string path = sm.getFilename(loc).str();
  auto it = buffers.find(path);
  if (it == buffers.end()) {
    SourceLoc start;
    std::string ignored;
    if (!gradcSM.addFile(path, start, ignored))
      return SourceLoc();
    it = buffers.emplace(path, start).first;
    onHeaderBuffer(start);
  }
  return it->second.getAdvanced(sm.getFileOffset(loc));
}

/// The files on disk that a parse read (not the one-line translation
/// unit, which is mapped in memory), plus the compile_commands.json its
/// flags came from: what a cached check depends on.
static std::vector<std::string> filesRead(const clang::SourceManager &sm,
                                          const ExternOptions &options) {
  std::vector<std::string> files;
  for (auto it = sm.fileinfo_begin(); it != sm.fileinfo_end(); ++it) {
    llvm::SmallString<256> path(it->first.getName());
    if (!llvm::sys::fs::is_regular_file(path))
      continue;
    llvm::sys::fs::make_absolute(path);
    llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
    files.push_back(std::string(path));
  }
  if (!options.compileCommandsDir.empty()) {
    llvm::SmallString<256> db(options.compileCommandsDir);
    llvm::sys::path::append(db, "compile_commands.json");
    llvm::sys::fs::make_absolute(db);
    files.push_back(std::string(db));
  }
  llvm::sort(files);
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

void HeaderChecker::checkHeader(llvm::StringRef header,
                                llvm::ArrayRef<ast::FnDecl *> externs,
                                std::vector<CheckedHeader> *checked) {
  // The translation unit sits in the .grad file's directory, so that the
  // header resolves relative to it first, as `#include "..."` would.
  llvm::SmallString<256> mainPath(options.baseDir.empty() ? "."
                                                          : options.baseDir);
  llvm::sys::fs::make_absolute(mainPath);
  llvm::sys::path::append(mainPath, "gradc-extern-check.cpp");
  llvm::SmallString<256> headerGuess(options.baseDir);
  llvm::sys::path::append(headerGuess, header);

  std::vector<std::string> args = {"-xc++", "-std=c++17", "-fsyntax-only",
                                   "-resource-dir=" GRADC_CLANG_RESOURCE_DIR};
  std::string flagError;
  if (!getExternCompilerArgs(options, headerGuess, args, flagError)) {
    errorAt(externs.front()->headerRange.begin, diag::err_extern_header_error)
        << header << externs.front()->name.name
        << "cannot read compile_commands.json: " + flagError
        << externs.front()->headerRange;
    return;
  }
  clang::tooling::FixedCompilationDatabase db(
      llvm::sys::path::parent_path(mainPath), args);
  clang::tooling::ClangTool tool(db, {std::string(mainPath)});
  // ClangTool keeps a reference to the contents, not a copy.
  std::string contents = ("#include \"" + header + "\"\n").str();
  tool.mapVirtualFile(mainPath, contents);
  ErrorKeeper keeper;
  tool.setDiagnosticConsumer(&keeper);
  std::vector<std::unique_ptr<clang::ASTUnit>> units;
  tool.buildASTs(units);
  if (units.empty() || !keeper.first.empty()) {
    const ast::FnDecl &first = *externs.front();
    if (keeper.fileNotFound) {
      std::string searched;
      for (const std::string &dir : options.includeDirs)
        searched += ", '" + dir + "'";
      errorAt(first.headerRange.begin, diag::err_extern_header_not_found)
          << header << first.name.name << searched << first.headerRange;
    } else {
      errorAt(first.headerRange.begin, diag::err_extern_header_error)
          << header << first.name.name
          << (keeper.first.empty() ? "Clang made no AST" : keeper.first)
          << first.headerRange;
    }
    return;
  }
  bool earlierError = hadError;
  hadError = false;
  for (ast::FnDecl *fn : externs)
    checkFunction(*fn, *units.front());
  if (!hadError && checked)
    checked->push_back(
        {header.str(), filesRead(units.front()->getSourceManager(), options)});
  hadError |= earlierError;
}

void HeaderChecker::reportMissing(ast::FnDecl &fn, clang::ASTUnit &unit) {
  clang::ASTContext &ctx = unit.getASTContext();
  auto candidates = am::match(
      am::functionDecl(am::unless(am::isExpansionInSystemHeader())).bind("f"),
      ctx);
  std::vector<std::string> names;
  std::vector<const clang::FunctionDecl *> decls;
  for (const am::BoundNodes &b : candidates) {
    const auto *f = b.getNodeAs<clang::FunctionDecl>("f");
    std::string name = f->getNameAsString();
    if (name.empty() || llvm::is_contained(names, name))
      continue;
    names.push_back(name);
    decls.push_back(f);
  }
  // About one edit in three characters, as Sema's did-you-mean.
  const std::string &want = fn.name.name;
  unsigned limit = std::max<unsigned>(1, (want.size() + 2) / 3);
  const clang::FunctionDecl *best = nullptr;
  unsigned bestDistance = limit + 1;
  for (auto [name, decl] : llvm::zip(names, decls)) {
    unsigned d = llvm::StringRef(want).edit_distance(name, true, limit);
    if (d < bestDistance) {
      bestDistance = d;
      best = decl;
    }
  }
  std::string suggestion =
      best ? "; did you mean '" + best->getNameAsString() + "'?" : "";
  error(fn, diag::err_extern_not_found)
      << fn.name.name << fn.header << suggestion << fn.name.range;
  if (best) {
    const clang::SourceManager &sm = unit.getSourceManager();
    diags.report(toLoc(sm, best->getLocation()), diag::note_extern_candidate)
        << best->getNameAsString() << printed(best->getType(), ctx);
  }
}

void HeaderChecker::checkFunction(ast::FnDecl &fn, clang::ASTUnit &unit) {
  clang::ASTContext &ctx = unit.getASTContext();
  const clang::SourceManager &sm = unit.getSourceManager();
  auto found =
      am::match(am::functionDecl(am::hasName(fn.name.name)).bind("f"), ctx);
  if (found.empty())
    return reportMissing(fn, unit);
  const auto *decl = found.front().getNodeAs<clang::FunctionDecl>("f");
  std::string header = headerName(*decl, sm);
  auto noteDecl = [&] {
    diags.report(toLoc(sm, decl->getLocation()), diag::note_extern_declared)
        << fn.name.name << printed(decl->getType(), ctx);
  };

  // 1. C linkage: the LLVM backend and the JIT call the symbol by name.
  if (!decl->isExternC()) {
    error(fn, diag::err_extern_linkage)
        << fn.name.name << header << fn.name.range;
    return noteDecl();
  }
  // 2. The result: an int status, or nothing.
  clang::QualType ret = decl->getReturnType().getCanonicalType();
  if (ret->isVoidType()) {
    fn.externReturnsVoid = true;
  } else if (!ret->isSpecificBuiltinType(clang::BuiltinType::Int)) {
    error(fn, diag::err_extern_return)
        << fn.name.name << printed(decl->getReturnType(), ctx) << header
        << fn.name.range;
    return noteDecl();
  }
  checkParams(fn, *decl, ctx);
}

/// Whether `type` is what gradc passes for `p`. `onlyConst` is set when
/// it would be, but for a missing `const` on an input's pointee.
bool HeaderChecker::typeFits(const ExpectedParam &p, clang::QualType type,
                             clang::ASTContext &ctx, bool &onlyConst) const {
  onlyConst = false;
  type = type.getCanonicalType();
  if (p.kind == ExpectedParam::Size)
    return type->isSignedIntegerType() && ctx.getTypeSize(type) == 64;
  clang::QualType element;
  switch (p.dtype) {
  case DType::F32:
    element = ctx.FloatTy;
    break;
  case DType::F64:
    element = ctx.DoubleTy;
    break;
  case DType::I32:
    element = ctx.IntTy;
    break;
  case DType::Bool:
    element = ctx.UnsignedCharTy;
    break;
  }
  if (p.kind == ExpectedParam::Input && p.scalar)
    return ctx.hasSameUnqualifiedType(type, element);
  const auto *pointer = type->getAs<clang::PointerType>();
  if (!pointer)
    return false;
  clang::QualType pointee = pointer->getPointeeType();
  if (!ctx.hasSameUnqualifiedType(pointee, element))
    return false;
  bool isConst = pointee.isConstQualified();
  if (p.kind == ExpectedParam::Output)
    return !isConst;
  onlyConst = !isConst;
  return isConst;
}

void HeaderChecker::checkParams(ast::FnDecl &fn,
                                const clang::FunctionDecl &decl,
                                clang::ASTContext &ctx) {
  const clang::SourceManager &sm = ctx.getSourceManager();
  std::vector<ExpectedParam> expected = expectedParams(fn);
  std::string header = headerName(decl, sm);
  auto noteDecl = [&] {
    diags.report(toLoc(sm, decl.getLocation()), diag::note_extern_declared)
        << fn.name.name << printed(decl.getType(), ctx);
  };
  // 3. The count.
  if (decl.getNumParams() != expected.size()) {
    error(fn, diag::err_extern_param_count)
        << fn.name.name << decl.getNumParams() << header << expected.size()
        << expectedPrototype(fn, expected) << fn.name.range;
    return noteDecl();
  }
  // 4. The order: every parameter fits some expected one, but not the
  // one at its position.
  std::vector<bool> fits(expected.size());
  bool allFit = true;
  for (size_t i = 0; i < expected.size(); ++i) {
    bool onlyConst;
    fits[i] =
        typeFits(expected[i], decl.getParamDecl(i)->getType(), ctx, onlyConst);
    allFit &= fits[i];
  }
  if (allFit)
    return;
  std::vector<bool> used(expected.size());
  bool permutation = true;
  for (size_t i = 0; i < expected.size() && permutation; ++i) {
    bool matched = false;
    for (size_t j = 0; j < expected.size() && !matched; ++j) {
      bool onlyConst;
      if (!used[j] && typeFits(expected[j], decl.getParamDecl(i)->getType(),
                               ctx, onlyConst))
        used[j] = matched = true;
    }
    permutation = matched;
  }
  if (permutation) {
    std::vector<std::string> has, wants;
    for (const clang::ParmVarDecl *p : decl.parameters())
      has.push_back(printed(p->getType(), ctx));
    error(fn, diag::err_extern_param_order)
        << fn.name.name << header << llvm::join(has, ", ")
        << "(" +
               llvm::join(llvm::map_range(
                              expected,
                              [](const ExpectedParam &p) { return p.cDecl(); }),
                          ", ") +
               ")"
        << fn.name.range;
    return noteDecl();
  }
  // 5. The first parameter that does not fit, by element type or const.
  for (size_t i = 0; i < expected.size(); ++i) {
    if (fits[i])
      continue;
    const clang::ParmVarDecl *param = decl.getParamDecl(i);
    bool onlyConst;
    typeFits(expected[i], param->getType(), ctx, onlyConst);
    error(fn, onlyConst ? diag::err_extern_param_const
                        : diag::err_extern_param_type)
        << i + 1 << fn.name.name << printed(param->getType(), ctx) << header
        << expected[i].cType() << expected[i].what << fn.name.range;
    std::string name = param->getNameAsString();
    diags.report(toLoc(sm, param->getLocation()), diag::note_extern_param)
        << (name.empty() ? "#" + std::to_string(i + 1) : name)
        << printed(param->getType(), ctx);
    return;
  }
}

} // namespace

bool clangjit::checkExternHeaders(
    ast::Module &module, const ExternOptions &options, SourceManager &sm,
    DiagnosticEngine &diags, llvm::function_ref<void(SourceLoc)> onHeaderBuffer,
    std::vector<CheckedHeader> *checked) {
  auto byHeader = externsByHeader(module);
  HeaderChecker checker(options, sm, diags, onHeaderBuffer);
  for (auto &[header, externs] : byHeader)
    checker.checkHeader(header, externs, checked);
  return !checker.hadError;
}
