//===- Printer.cpp - The textual form of the IR ---------------------------===//
//
// Prints modules in the MLIR-flavoured text of docs/IR.md:
//
//   func @synth(%x: f32[2]) -> f32[2, 2] attributes {grad = @synth_grad, wrt =
//   [0]} {
//     %y = stack %x, %x {axis = 0} : f32[2, 2] rule(@first_only.1,
//     "first_only", override) return %y
//   }
//
// Everything in IR.h is printed (locations only on request), in a fixed
// order, so that golden tests are stable and IRParser.cpp can rebuild the
// same module. Attribute values print according to the op table's kind for
// the name, which is how the parser reads them back.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Printer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

using namespace gradc;
using namespace gradc::ir;

//===----------------------------------------------------------------------===//
// Names and strings
//===----------------------------------------------------------------------===//

static bool isBareNameChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.';
}

std::string ir::formatIRString(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (llvm::isPrint(c)) {
        out += c;
      } else {
        // Other bytes as two hex digits, as MLIR does.
        out += '\\';
        out += llvm::hexdigit((unsigned char)c >> 4, /*LowerCase=*/false);
        out += llvm::hexdigit((unsigned char)c & 15, /*LowerCase=*/false);
      }
    }
  }
  return out + "\"";
}

std::string ir::formatIRName(llvm::StringRef name) {
  if (!name.empty() && llvm::all_of(name, isBareNameChar))
    return name.str();
  return formatIRString(name);
}

static bool isAllDigits(llvm::StringRef s) {
  return !s.empty() && llvm::all_of(s, llvm::isDigit);
}

ValueNamer::ValueNamer(const Function &fn) {
  llvm::StringSet<> used;
  unsigned nextTemp = 0;
  auto assign = [&](const Value *v) {
    if (!v || names.count(v))
      return;
    llvm::StringRef base = v->getName();
    std::string name;
    if (base.empty() || isAllDigits(base)) {
      // A temporary: the next number that no named value took.
      do
        name = std::to_string(nextTemp++);
      while (used.contains(name));
    } else {
      name = base.str();
      for (unsigned suffix = 1; used.contains(name); ++suffix)
        name = (base + "." + llvm::Twine(suffix)).str();
    }
    used.insert(name);
    names[v] = ("%" + llvm::Twine(formatIRName(name))).str();
  };
  for (const Value *p : fn.getParams())
    assign(p);
  for (const auto &op : fn.getOps())
    for (const Value *r : op->getResults())
      assign(r);
}

std::string ValueNamer::get(const Value *v) const {
  if (!v)
    return "%<null>";
  auto it = names.find(v);
  return it == names.end() ? "%<unknown>" : it->second;
}

//===----------------------------------------------------------------------===//
// Module printer
//===----------------------------------------------------------------------===//

namespace {

class ModulePrinter {
public:
  ModulePrinter(llvm::raw_ostream &os, const PrintOptions &options)
      : os(os), options(options) {}

  // module ::= ('module' string)? function*
  void printModule(const Module &module) {
    bool first = true;
    if (!module.sourceName.empty()) {
      os << "module " << formatIRString(module.sourceName) << "\n";
      first = false;
    }
    for (const ExternDecl &decl : module.externs) {
      if (!first)
        os << "\n";
      first = false;
      printExtern(decl);
    }
    for (const auto &fn : module.getFunctions()) {
      if (!first)
        os << "\n";
      first = false;
      printFunction(*fn);
    }
  }

  // extern ::= 'extern' '@' name '(' params ')' '->' resultTypes
  //            'from' string externAttr* location?
  // externAttr ::= 'void' | 'no_gradient'
  void printExtern(const ExternDecl &decl) {
    os << "extern @" << formatIRName(decl.name) << "(";
    for (size_t i = 0; i < decl.paramTypes.size(); ++i)
      os << (i ? ", " : "") << "%" << formatIRName(decl.paramNames[i]) << ": "
         << decl.paramTypes[i].str();
    os << ") -> ";
    if (decl.resultTypes.size() == 1) {
      os << decl.resultTypes[0].str();
    } else {
      os << "(";
      for (size_t i = 0; i < decl.resultTypes.size(); ++i)
        os << (i ? ", " : "") << decl.resultTypes[i].str();
      os << ")";
    }
    os << " from " << formatIRString(decl.header);
    if (!decl.returnsStatus)
      os << " void";
    if (decl.noGradient)
      os << " no_gradient";
    printLoc(decl.loc, " ");
    os << "\n";
  }

  // function ::= 'func' '@' name '(' params ')' '->' resultTypes
  //              fnAttrs? location? '{' statement* '}'
  void printFunction(const Function &fn) {
    ValueNamer names(fn);
    os << "func @" << formatIRName(fn.getName()) << "(";
    for (size_t i = 0; i < fn.getParams().size(); ++i) {
      const Value *p = fn.getParam(i);
      os << (i ? ", " : "") << names.get(p) << ": " << p->getType().str();
    }
    os << ") -> ";
    printResultTypes(fn);
    printFunctionAttrs(fn);
    printLoc(fn.getLoc(), " ");
    os << " {\n";
    const std::string *currentNote = nullptr;
    for (const auto &op : fn.getOps()) {
      printNote(*op, currentNote);
      printOp(*op, names);
    }
    os << "  return";
    for (size_t i = 0; i < fn.getReturns().size(); ++i)
      os << (i ? ", " : " ") << names.get(fn.getReturns()[i]);
    os << "\n}\n";
  }

private:
  llvm::raw_ostream &os;
  const PrintOptions &options;

  static std::string typeStr(const Value *v) {
    return v ? v->getType().str() : "<null>";
  }

  /// One type bare, several (or none) as a tuple `(t1, t2)`.
  void printResultTypes(const Function &fn) {
    llvm::ArrayRef<Value *> returns = fn.getReturns();
    if (returns.size() == 1) {
      os << typeStr(returns[0]);
      return;
    }
    os << "(";
    for (size_t i = 0; i < returns.size(); ++i)
      os << (i ? ", " : "") << typeStr(returns[i]);
    os << ")";
  }

  // fnAttrs ::= 'attributes' '{' fnAttr (',' fnAttr)* '}'
  // fnAttr  ::= 'role' '=' ('grad' | 'fwd' | 'bwd' | 'value_and_grad'
  //                        | 'rule_instance' | 'loop_body')
  //           | 'grad' '=' '@' name | 'wrt' '=' '[' ints ']'
  //           | 'fwd' '=' '@' name | 'bwd' '=' '@' name
  //           | 'value_and_grad' '=' '@' name
  //           | 'grad_loc' '=' location | 'custom_grad' '=' ruleAttr
  void printFunctionAttrs(const Function &fn) {
    llvm::SmallVector<std::string, 4> attrs;
    switch (fn.getRole()) {
    case Function::Role::User:
      break;
    case Function::Role::Grad:
      attrs.push_back("role = grad");
      break;
    case Function::Role::Forward:
      attrs.push_back("role = fwd");
      break;
    case Function::Role::Backward:
      attrs.push_back("role = bwd");
      break;
    case Function::Role::ValueAndGrad:
      attrs.push_back("role = value_and_grad");
      break;
    case Function::Role::RuleInstance:
      attrs.push_back("role = rule_instance");
      break;
    case Function::Role::LoopBody:
      attrs.push_back("role = loop_body");
      break;
    }
    if (const auto &spec = fn.getGradSpec()) {
      attrs.push_back(
          ("grad = @" + llvm::Twine(formatIRName(spec->gradName))).str());
      std::string wrt = "wrt = [";
      for (size_t i = 0; i < spec->wrt.size(); ++i)
        wrt += (i ? ", " : "") + std::to_string(spec->wrt[i]);
      attrs.push_back(wrt + "]");
      if (!spec->fwdName.empty())
        attrs.push_back(
            ("fwd = @" + llvm::Twine(formatIRName(spec->fwdName))).str());
      if (!spec->bwdName.empty())
        attrs.push_back(
            ("bwd = @" + llvm::Twine(formatIRName(spec->bwdName))).str());
      if (!spec->valueAndGradName.empty())
        attrs.push_back(("value_and_grad = @" +
                         llvm::Twine(formatIRName(spec->valueAndGradName)))
                            .str());
      std::string loc = locStr(spec->loc);
      if (!loc.empty())
        attrs.push_back(("grad_loc = " + llvm::Twine(loc)).str());
    }
    // The function's own rule (@custom_grad or a grad block): its gradient.
    if (fn.getCustomGrad().isSet())
      attrs.push_back("custom_grad = " + ruleStr(fn.getCustomGrad()));
    if (attrs.empty())
      return;
    os << " attributes {" << llvm::join(attrs, ", ") << "}";
  }

  /// `loc("file":line:col)` when locations are printed and `loc` is known.
  std::string locStr(SourceLoc loc) const {
    if (!options.printLocations || !options.sourceManager || !loc.isValid())
      return "";
    PresumedLoc p = options.sourceManager->getPresumedLoc(loc);
    if (!p.isValid())
      return "";
    return ("loc(" + llvm::Twine(formatIRString(p.filename)) + ":" +
            llvm::Twine(p.line) + ":" + llvm::Twine(p.column) + ")")
        .str();
  }

  void printLoc(SourceLoc loc, llvm::StringRef separator) {
    std::string s = locStr(loc);
    if (!s.empty())
      os << separator << s;
  }

  /// A note is printed above the first op of each run of ops that share
  /// it; each of its lines becomes one `//` comment.
  void printNote(const Op &op, const std::string *&currentNote) {
    const std::string &note = op.getNote();
    bool sameRun = currentNote && *currentNote == note;
    currentNote = &note;
    if (!options.printNotes || note.empty() || sameRun)
      return;
    llvm::SmallVector<llvm::StringRef, 2> lines;
    llvm::StringRef(note).split(lines, '\n');
    for (llvm::StringRef line : lines)
      os << "  // " << line << "\n";
  }

  // op ::= (value (',' value)* '=')? opName operands attrDict? ':' types
  //        ruleAttr? location?
  void printOp(const Op &op, const ValueNamer &names) {
    os << "  ";
    for (size_t i = 0; i < op.getNumResults(); ++i)
      os << (i ? ", " : "") << names.get(op.getResult(i));
    if (op.getNumResults())
      os << " = ";
    os << op.getName();
    AttrList attrs = op.getAttrs();
    if (op.getKind() == OpKind::Call || op.getKind() == OpKind::ExternCall) {
      // `call @f(%a, %b)`: the callee attribute is written as a symbol.
      const AttrValue *callee = attrs.find("callee");
      const std::string *name =
          callee ? std::get_if<std::string>(callee) : nullptr;
      os << " @" << formatIRName(name ? *name : "");
      if (name)
        attrs.erase("callee");
      os << "(";
      for (size_t i = 0; i < op.getNumOperands(); ++i)
        os << (i ? ", " : "") << names.get(op.getOperand(i));
      os << ")";
    } else {
      for (size_t i = 0; i < op.getNumOperands(); ++i)
        os << (i ? ", " : " ") << names.get(op.getOperand(i));
    }
    printAttrDict(attrs);
    os << " : ";
    if (op.getNumResults() == 0)
      os << "()";
    for (size_t i = 0; i < op.getNumResults(); ++i)
      os << (i ? ", " : "") << typeStr(op.getResult(i));
    printRule(op.getGradRule());
    printLoc(op.getLoc(), " ");
    os << "\n";
  }

  // attrDict ::= '{' name '=' attrValue (',' name '=' attrValue)* '}'
  void printAttrDict(const AttrList &attrs) {
    if (attrs.empty())
      return;
    os << " {";
    bool first = true;
    for (const NamedAttr &a : attrs.entries()) {
      os << (first ? "" : ", ") << a.name << " = " << attrStr(a.value);
      first = false;
    }
    os << "}";
  }

  static std::string attrStr(const AttrValue &value) {
    if (const std::string *s = std::get_if<std::string>(&value))
      return formatIRString(*s);
    return attrValueStr(value);
  }

  // ruleAttr ::= 'rule' '(' '@' name ',' string ',' via (',' location)? ')'
  std::string ruleStr(const GradRuleAttr &rule) const {
    std::string s;
    llvm::raw_string_ostream rs(s);
    rs << "rule(@" << formatIRName(rule.function) << ", "
       << formatIRString(rule.ruleName) << ", ";
    bool bareVia = !rule.via.empty() && llvm::all_of(rule.via, [](char c) {
      return llvm::isAlnum(c) || c == '_';
    }) && !llvm::isDigit(rule.via.front());
    rs << (bareVia ? rule.via : formatIRString(rule.via));
    std::string loc = locStr(rule.annotationLoc);
    if (!loc.empty())
      rs << ", " << loc;
    rs << ")";
    return s;
  }

  void printRule(const GradRuleAttr &rule) {
    if (rule.isSet())
      os << " " << ruleStr(rule);
  }
};

} // namespace

void ir::printModule(const Module &module, llvm::raw_ostream &os,
                     const PrintOptions &options) {
  ModulePrinter(os, options).printModule(module);
}

void ir::printFunction(const Function &fn, llvm::raw_ostream &os,
                       const PrintOptions &options) {
  ModulePrinter(os, options).printFunction(fn);
}
