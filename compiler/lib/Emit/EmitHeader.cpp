//===- EmitHeader.cpp - The generated C ABI header ------------------------===//
//
// One header per module declares its C ABI (docs/ABI.md), whichever backend
// compiled it: plain C prototypes inside `extern "C"`, each under a doc
// comment with its .grad signature, and, for C++ callers, one inline
// function per exported function that takes gradc::TensorView arguments,
// binds the size names from their shapes, checks that every shape agrees
// with the signature (GRADC_ERROR_SIZE otherwise) and calls the C function.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitHeader.h"

#include "gradc/ABI.h"
#include "gradc/Emit/Mangle.h"

#include "llvm/ADT/StringExtras.h"

using namespace gradc;
using namespace gradc::emit;

namespace {

constexpr unsigned lineLimit = 80;

/// `head` + the items joined by ", " + `tail`, broken after commas with
/// continuation lines aligned under the first item when a line would be
/// longer than 80 columns. `head` includes its line's indentation.
std::string joinWrapped(const std::string &head,
                        const std::vector<std::string> &items,
                        const std::string &tail) {
  std::string one = head + llvm::join(items, ", ") + tail;
  if (one.size() <= lineLimit)
    return one;
  // A long head leaves little room after the parenthesis: break after it
  // and indent 4, as clang-format would.
  size_t indent = head.find_first_not_of(' ');
  bool afterParen = head.size() > 40 && head.back() == '(';
  std::string text =
      afterParen ? head + "\n" + std::string(indent + 4, ' ') : head;
  size_t col = afterParen ? indent + 4 : head.size(), cur = col;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string piece = items[i];
    piece += i + 1 < items.size() ? std::string(",") : tail;
    if (i > 0 && cur + 1 + piece.size() > lineLimit) {
      text += '\n';
      text.append(col, ' ');
      cur = col;
    } else if (i > 0) {
      text += " ";
      ++cur;
    }
    text += piece;
    cur += piece.size();
  }
  return text;
}

/// Writes `lines` as a doc comment, breaking long lines at spaces.
void emitComment(llvm::raw_ostream &os, const std::vector<std::string> &lines,
                 unsigned indent) {
  for (const std::string &l : lines) {
    llvm::SmallVector<llvm::StringRef, 16> words;
    llvm::StringRef(l).split(words, ' ', -1, false);
    std::string cur;
    for (llvm::StringRef w : words) {
      if (!cur.empty() && indent + 4 + cur.size() + 1 + w.size() > lineLimit) {
        os << std::string(indent, ' ') << "/// " << cur << "\n";
        cur = "   ";
      }
      if (!cur.empty() && cur != "   ")
        cur += ' ';
      cur.append(w.data(), w.size());
    }
    os << std::string(indent, ' ') << "/// " << cur << "\n";
  }
}

/// The checks of one view against its type: rank, known dimensions, and
/// size names (bound by the first view that has them).
void addShapeChecks(const CParam &p,
                    const llvm::StringMap<std::string> &sizeNames,
                    std::vector<std::vector<std::string>> &allChecks) {
  allChecks.emplace_back();
  std::vector<std::string> &checks = allChecks.back();
  const Shape &shape = p.type.shape;
  checks.push_back(p.name + ".rank() != " + std::to_string(shape.size()));
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string dim = p.name + ".dim(" + std::to_string(d) + ")";
    if (shape[d].isKnown())
      checks.push_back(dim + " != " + std::to_string(shape[d].getSize()));
    else
      checks.push_back("!gradc::bindSize(" +
                       sizeNames.lookup(shape[d].getName()) + ", " + dim + ")");
  }
}

void emitCppWrapper(llvm::raw_ostream &os, const ir::Module &module,
                    const ir::Function &fn, const EmitOptions &options,
                    NameScope &functionNames) {
  NameScope scope;
  std::vector<CParam> params = getCParams(module, fn, scope);
  llvm::StringMap<std::string> sizeNames;
  std::vector<std::string> decls, args;
  std::vector<std::vector<std::string>> checks;
  for (const CParam &p : params) {
    std::string type = cTypeName(p.dtype).str();
    switch (p.kind) {
    case CParamKind::Size:
      sizeNames[p.sourceName] = p.name;
      args.push_back(p.name);
      break;
    case CParamKind::Input:
      if (p.type.isScalar()) {
        decls.push_back(type + " " + p.name);
        args.push_back(p.name);
      } else {
        decls.push_back("gradc::TensorView<const " + type + "> " + p.name);
        addShapeChecks(p, sizeNames, checks);
        args.push_back(p.name + ".data()");
      }
      break;
    case CParamKind::Output:
      if (p.type.isScalar()) {
        decls.push_back(type + " &" + p.name);
        args.push_back("&" + p.name);
      } else {
        decls.push_back("gradc::TensorView<" + type + "> " + p.name);
        addShapeChecks(p, sizeNames, checks);
        args.push_back(p.name + ".data()");
      }
      break;
    }
  }
  emitComment(os, describeFunction(module, fn), 0);
  std::string name = functionNames.claim(fn.getName());
  os << joinWrapped("inline int " + name + "(", decls, ") {") << "\n";
  for (const CParam &p : params)
    if (p.kind == CParamKind::Size)
      os << "  int64_t " << p.name << " = -1;\n";
  // One test per tensor.
  for (const std::vector<std::string> &tensorChecks : checks) {
    std::string cond = llvm::join(tensorChecks, " || ");
    if (2 + 4 + cond.size() + 1 <= lineLimit) {
      os << "  if (" << cond << ")\n";
    } else {
      std::string text = "  if (", cur = text;
      for (size_t c = 0; c < tensorChecks.size(); ++c) {
        std::string piece =
            tensorChecks[c] + (c + 1 < tensorChecks.size() ? " ||" : ")");
        if (cur.size() > 6 && cur.size() + 1 + piece.size() > lineLimit) {
          text += cur + "\n";
          cur = "      ";
        } else if (cur.size() > 6) {
          cur += " ";
        }
        cur += piece;
      }
      os << text.substr(6) << cur << "\n";
    }
    os << "    return GRADC_ERROR_SIZE;\n";
  }
  os << joinWrapped("  return " +
                        cSymbolName(options.moduleName, fn.getName()) + "(",
                    args, ");")
     << "\n";
  os << "}\n";
}

} // namespace

void emit::emitHeader(const ir::Module &module, const EmitOptions &options,
                      llvm::raw_ostream &os) {
  std::string guard =
      "GRADC_GENERATED_" + llvm::StringRef(options.moduleName).upper() + "_H";
  std::vector<const ir::Function *> exported;
  for (const auto &f : module.getFunctions())
    if (isExported(*f))
      exported.push_back(f.get());

  os << "// Generated by gradc from "
     << (options.sourceName.empty() ? "<unknown>" : options.sourceName)
     << ". Do not edit.\n"
     << "//\n"
     << "// The C ABI of module '" << options.moduleName
     << "' (docs/ABI.md): sizes, then inputs, then\n"
     << "// output pointers; each function returns GRADC_OK or an error "
        "status. C++\n"
     << "// callers also get namespace " << mangleIdentifier(options.moduleName)
     << ", which takes gradc::TensorView\n"
     << "// arguments and checks their shapes.\n\n"
     << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include <stdint.h>\n\n"
     << "#ifndef GRADC_STATUS_CODES\n"
     << "#define GRADC_STATUS_CODES\n";
  // The codes of gradc/ABI.h, printed so that C callers need no header.
#define GRADC_PRINT_STATUS(NAME, VALUE) os << "#define " #NAME " " #VALUE "\n";
  GRADC_STATUS_LIST(GRADC_PRINT_STATUS)
#undef GRADC_PRINT_STATUS
  os << "#endif\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n";
  for (const ir::Function *f : exported) {
    os << "\n";
    emitComment(os, describeFunction(module, *f), 0);
    NameScope scope;
    std::vector<std::string> decls;
    for (const CParam &p : getCParams(module, *f, scope))
      decls.push_back(cParamDecl(p));
    os << joinWrapped("int " + cSymbolName(options.moduleName, f->getName()) +
                          "(",
                      decls, ");")
       << "\n";
  }
  os << "\n#ifdef __cplusplus\n} // extern \"C\"\n\n"
     << "#include \"gradc/Runtime.h\"\n\n"
     << "namespace " << mangleIdentifier(options.moduleName) << " {\n";
  NameScope functionNames;
  for (const ir::Function *f : exported) {
    os << "\n";
    emitCppWrapper(os, module, *f, options, functionNames);
  }
  os << "\n} // namespace " << mangleIdentifier(options.moduleName) << "\n"
     << "#endif // __cplusplus\n\n"
     << "#endif // " << guard << "\n";
}
