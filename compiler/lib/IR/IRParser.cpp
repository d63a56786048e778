//===- IRParser.cpp - Reading the textual form of the IR ------------------===//
//
// A lexer and a recursive-descent parser for the text that Printer.cpp
// writes (docs/IR.md). Attribute values are read according to the op
// table's AttrKind for their name, so `[0, 1]` becomes a list of integers
// for `perm`, a Shape for `shape` and a list of doubles for `value`, which
// is what makes print(parse(print(M))) equal print(M).
//
// Operand names are resolved when the function's closing brace is reached,
// so a use before the defining line parses; the verifier reports it with
// the op's location. After an error the parser skips to the next line and
// goes on, and names defined by a broken line are not reported again as
// undefined.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/IRParser.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstdlib>

using namespace gradc;
using namespace gradc::ir;

namespace {

//===----------------------------------------------------------------------===//
// Lexer
//===----------------------------------------------------------------------===//

enum class Tok {
  Eof,
  Error,
  Ident,     // func, f32, add, N, true
  Symbol,    // @name or @"name"
  ValueName, // %name or %"name"
  String,    // "text"
  Number,    // 12, -3, 0.5, 1e-3
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Equal,
  Arrow,
  Minus,
};

struct Token {
  Tok kind = Tok::Eof;
  llvm::StringRef spelling;
  std::string value; // decoded name or string contents
  size_t offset = 0;
  bool startsLine = false; // first token on its line
  bool isInteger = false;  // a Number without '.' or exponent
};

class Lexer {
public:
  Lexer(llvm::StringRef text, SourceLoc start, DiagnosticEngine &diags)
      : text(text), start(start), diags(diags) {}

  Token next() {
    bool newLine = pos == 0;
    skipSpaceAndComments(newLine);
    Token tok;
    tok.offset = pos;
    tok.startsLine = newLine;
    if (pos >= text.size()) {
      tok.kind = Tok::Eof;
      return tok;
    }
    char c = text[pos];
    if (llvm::isAlpha(c) || c == '_')
      lexIdent(tok);
    else if (llvm::isDigit(c) || (c == '-' && pos + 1 < text.size() &&
                                  llvm::isDigit(text[pos + 1])))
      lexNumber(tok);
    else if (c == '@' || c == '%')
      lexName(tok, c == '@' ? Tok::Symbol : Tok::ValueName);
    else if (c == '"')
      lexString(tok);
    else
      lexPunct(tok);
    tok.spelling = text.slice(tok.offset, pos);
    return tok;
  }

  SourceLoc locAt(size_t offset) const { return start.getAdvanced(offset); }

private:
  llvm::StringRef text;
  SourceLoc start;
  DiagnosticEngine &diags;
  size_t pos = 0;

  void skipSpaceAndComments(bool &newLine) {
    while (pos < text.size()) {
      char c = text[pos];
      if (c == '\n') {
        newLine = true;
        ++pos;
      } else if (llvm::isSpace(c)) {
        ++pos;
      } else if (c == '/' && pos + 1 < text.size() && text[pos + 1] == '/') {
        while (pos < text.size() && text[pos] != '\n')
          ++pos;
      } else {
        return;
      }
    }
  }

  static bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_'; }
  static bool isNameChar(char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.';
  }

  void lexIdent(Token &tok) {
    tok.kind = Tok::Ident;
    while (pos < text.size() && isIdentChar(text[pos]))
      ++pos;
    tok.value = text.slice(tok.offset, pos).str();
  }

  size_t scanDigits() {
    size_t begin = pos;
    while (pos < text.size() && llvm::isDigit(text[pos]))
      ++pos;
    return pos - begin;
  }

  // number ::= '-'? digit+ ('.' digit+)? ([eE] [+-]? digit+)?
  void lexNumber(Token &tok) {
    tok.kind = Tok::Number;
    tok.isInteger = true;
    if (text[pos] == '-')
      ++pos;
    scanDigits();
    bool ok = true;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      tok.isInteger = false;
      ok &= scanDigits() != 0;
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      tok.isInteger = false;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      ok &= scanDigits() != 0;
    }
    while (pos < text.size() && isNameChar(text[pos])) {
      ++pos;
      ok = false;
    }
    if (!ok) {
      diags.report(locAt(tok.offset), diag::err_ir_bad_number)
          << text.slice(tok.offset, pos);
      tok.kind = Tok::Error;
    }
  }

  // name ::= [A-Za-z0-9_.]+ | string
  void lexName(Token &tok, Tok kind) {
    ++pos; // '@' or '%'
    if (pos < text.size() && text[pos] == '"') {
      Token str;
      str.offset = pos;
      lexString(str);
      tok.kind = str.kind == Tok::Error ? Tok::Error : kind;
      tok.value = std::move(str.value);
      return;
    }
    size_t begin = pos;
    while (pos < text.size() && isNameChar(text[pos]))
      ++pos;
    if (pos == begin) {
      diags.report(locAt(tok.offset), diag::err_ir_expected)
          << ("a name after '" + text.slice(tok.offset, pos) + "'").str()
          << describeHere();
      tok.kind = Tok::Error;
      return;
    }
    tok.kind = kind;
    tok.value = text.slice(begin, pos).str();
  }

  std::string describeHere() const {
    if (pos >= text.size())
      return "end of file";
    return ("'" + llvm::Twine(text[pos]) + "'").str();
  }

  // string ::= '"' (char | '\"' | '\\' | '\n' | '\t' | '\' hex hex)* '"'
  void lexString(Token &tok) {
    ++pos; // '"'
    tok.kind = Tok::String;
    while (pos < text.size() && text[pos] != '"' && text[pos] != '\n') {
      char c = text[pos++];
      if (c != '\\') {
        tok.value += c;
        continue;
      }
      if (pos >= text.size())
        break;
      char e = text[pos++];
      if (e == 'n') {
        tok.value += '\n';
      } else if (e == 't') {
        tok.value += '\t';
      } else if (llvm::isHexDigit(e) && pos < text.size() &&
                 llvm::isHexDigit(text[pos])) {
        tok.value += char(llvm::hexDigitValue(e) * 16 +
                          llvm::hexDigitValue(text[pos++]));
      } else {
        tok.value += e; // '\"', '\\'
      }
    }
    if (pos >= text.size() || text[pos] != '"') {
      diags.report(locAt(tok.offset), diag::err_ir_unterminated_string);
      tok.kind = Tok::Error;
      return;
    }
    ++pos;
  }

  void lexPunct(Token &tok) {
    char c = text[pos++];
    switch (c) {
    case '(':
      tok.kind = Tok::LParen;
      return;
    case ')':
      tok.kind = Tok::RParen;
      return;
    case '[':
      tok.kind = Tok::LBracket;
      return;
    case ']':
      tok.kind = Tok::RBracket;
      return;
    case '{':
      tok.kind = Tok::LBrace;
      return;
    case '}':
      tok.kind = Tok::RBrace;
      return;
    case ',':
      tok.kind = Tok::Comma;
      return;
    case ':':
      tok.kind = Tok::Colon;
      return;
    case '=':
      tok.kind = Tok::Equal;
      return;
    case '-':
      if (pos < text.size() && text[pos] == '>') {
        ++pos;
        tok.kind = Tok::Arrow;
      } else {
        tok.kind = Tok::Minus;
      }
      return;
    default:
      break;
    }
    diags.report(locAt(tok.offset), diag::err_ir_unexpected_char)
        << std::string(1, c);
    tok.kind = Tok::Error;
  }
};

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

/// An operand or return value named before its definition was seen.
struct PendingUse {
  Op *op; // null for a return value
  unsigned index;
  std::string name;
  SourceLoc loc;
};

/// Per-function name scope.
struct FunctionScope {
  Function *fn = nullptr;
  llvm::StringMap<std::pair<Value *, SourceLoc>> values;
  llvm::StringSet<> poisoned; // names of lines that failed to parse
  std::vector<PendingUse> uses;
  std::vector<TensorType> declaredResults;
  SourceLoc returnLoc;
  bool hadError = false;
};

class IRParser {
public:
  IRParser(const SourceManager &sm, SourceLoc bufferStart,
           DiagnosticEngine &diags)
      : lexer(sm.getBufferText(bufferStart), bufferStart, diags), diags(diags) {
    advance();
  }

  // module ::= ('module' string)? function*
  std::unique_ptr<Module> parseModule() {
    auto module = std::make_unique<Module>();
    unsigned errorsBefore = diags.getNumErrors();
    if (isIdent("module")) {
      advance();
      if (tok.kind == Tok::String) {
        module->sourceName = tok.value;
        advance();
      } else {
        expected("a file name string after 'module'");
      }
    }
    while (tok.kind != Tok::Eof) {
      bool ok =
          isIdent("extern") ? parseExtern(*module) : parseFunction(*module);
      if (!ok)
        skipToNextFunction();
    }
    if (diags.getNumErrors() != errorsBefore)
      return nullptr;
    return module;
  }

private:
  Lexer lexer;
  DiagnosticEngine &diags;
  Token tok;
  FunctionScope scope;

  //===--------------------------------------------------------------------===//
  // Token helpers
  //===--------------------------------------------------------------------===//

  void advance() { tok = lexer.next(); }
  SourceLoc loc() const { return lexer.locAt(tok.offset); }
  bool isIdent(llvm::StringRef word) const {
    return tok.kind == Tok::Ident && tok.value == word;
  }

  std::string describe(const Token &t) const {
    switch (t.kind) {
    case Tok::Eof:
      return "end of file";
    case Tok::Error:
      return "an invalid token";
    default:
      return ("'" + t.spelling + "'").str();
    }
  }

  /// Reports "expected WHAT, got TOKEN"; a lexer error token was already
  /// reported, so it is not reported twice.
  bool expected(llvm::StringRef what) {
    if (tok.kind != Tok::Error)
      diags.report(loc(), diag::err_ir_expected) << what << describe(tok);
    return false;
  }

  bool consume(Tok kind) {
    if (tok.kind != kind)
      return false;
    advance();
    return true;
  }

  bool expect(Tok kind, llvm::StringRef what) {
    if (consume(kind))
      return true;
    return expected(what);
  }

  bool expectIdent(llvm::StringRef word) {
    if (isIdent(word)) {
      advance();
      return true;
    }
    return expected(("'" + word + "'").str());
  }

  /// Recovery inside a function: skip to the first token of a later line.
  void skipToNextLine() {
    do
      advance();
    while (tok.kind != Tok::Eof && !tok.startsLine);
  }

  /// Recovery between functions: skip to a `func` that starts a line.
  void skipToNextFunction() {
    while (tok.kind != Tok::Eof &&
           !(tok.startsLine && (isIdent("func") || isIdent("extern"))))
      advance();
  }

  //===--------------------------------------------------------------------===//
  // Types, numbers and locations
  //===--------------------------------------------------------------------===//

  // type ::= dtype ('[' (dim (',' dim)*)? ']')?
  // dim  ::= integer | name
  bool parseType(TensorType &type) {
    if (tok.kind != Tok::Ident)
      return expected("a type");
    std::optional<DType> dtype = parseDType(tok.value);
    if (!dtype) {
      diags.report(loc(), diag::err_ir_unknown_dtype) << tok.value;
      return false;
    }
    advance();
    type = TensorType(*dtype);
    if (!consume(Tok::LBracket))
      return true;
    if (consume(Tok::RBracket))
      return true;
    do {
      if (tok.kind == Tok::Ident) {
        type.shape.push_back(Dim::named(tok.value));
        advance();
        continue;
      }
      SourceLoc dimLoc = loc();
      int64_t size = 0;
      if (!parseInteger(size, "a dimension (a size or a size name)"))
        return false;
      if (size < 0) {
        diags.report(dimLoc, diag::err_ir_negative_dim) << size;
        return false;
      }
      type.shape.push_back(Dim::known(size));
    } while (consume(Tok::Comma));
    return expect(Tok::RBracket, "',' or ']' in a shape");
  }

  bool parseInteger(int64_t &value, llvm::StringRef what) {
    if (tok.kind != Tok::Number || !tok.isInteger)
      return expected(what);
    if (tok.spelling.getAsInteger(10, value)) {
      diags.report(loc(), diag::err_ir_bad_number) << tok.spelling;
      return false;
    }
    advance();
    return true;
  }

  // float ::= number | 'inf' | '-' 'inf' | 'nan'
  bool parseFloat(double &value) {
    if (tok.kind == Tok::Number) {
      value = std::strtod(tok.spelling.str().c_str(), nullptr);
      advance();
      return true;
    }
    bool negative = consume(Tok::Minus);
    if (isIdent("inf") || (!negative && isIdent("nan"))) {
      value = tok.value == "nan" ? NAN : negative ? -INFINITY : INFINITY;
      advance();
      return true;
    }
    return expected("a number");
  }

  // location ::= 'loc' '(' string ':' integer ':' integer ')'
  // Read for syntax only: parsed IR is located in its own text.
  bool parseLocation() {
    if (!expectIdent("loc") || !expect(Tok::LParen, "'(' after 'loc'"))
      return false;
    if (tok.kind != Tok::String)
      return expected("a file name string in 'loc'");
    advance();
    int64_t line = 0, column = 0;
    return expect(Tok::Colon, "':' in 'loc'") &&
           parseInteger(line, "a line number") &&
           expect(Tok::Colon, "':' in 'loc'") &&
           parseInteger(column, "a column number") &&
           expect(Tok::RParen, "')' after a location");
  }

  //===--------------------------------------------------------------------===//
  // Functions
  //===--------------------------------------------------------------------===//

  /// The name a value gets from its printed name: `%3` means none.
  static std::string valueNameFromText(llvm::StringRef text) {
    if (!text.empty() && llvm::all_of(text, llvm::isDigit))
      return "";
    return text.str();
  }

  bool defineValue(llvm::StringRef name, Value *v, SourceLoc where) {
    auto [it, inserted] = scope.values.try_emplace(name, v, where);
    if (inserted)
      return true;
    diags.report(where, diag::err_ir_redefined_value)
        << ("%" + name).str() << scope.fn->getName();
    diags.report(it->second.second, diag::note_ir_previous_definition)
        << ("%" + name).str();
    return false;
  }

  // extern     ::= 'extern' '@' name '(' (param (',' param)*)? ')' '->'
  //                results 'from' string externAttr* location?
  // externAttr ::= 'void' | 'no_gradient'
  bool parseExtern(Module &module) {
    advance(); // 'extern'
    if (tok.kind != Tok::Symbol)
      return expected("an extern function name ('@name')");
    ExternDecl decl;
    decl.name = tok.value;
    decl.loc = loc();
    advance();
    if (!expect(Tok::LParen, "'(' after the function name"))
      return false;
    if (!consume(Tok::RParen)) {
      do {
        if (tok.kind != Tok::ValueName)
          return expected("a parameter ('%name')");
        decl.paramNames.push_back(valueNameFromText(tok.value));
        advance();
        TensorType type;
        if (!expect(Tok::Colon, "':' after the parameter name") ||
            !parseType(type))
          return false;
        decl.paramTypes.push_back(type);
      } while (consume(Tok::Comma));
      if (!expect(Tok::RParen, "',' or ')' after a parameter"))
        return false;
    }
    if (!expect(Tok::Arrow, "'->' after the parameters"))
      return false;
    scope = FunctionScope();
    if (!parseResultTypes())
      return false;
    decl.resultTypes = scope.declaredResults;
    if (!expectIdent("from"))
      return false;
    if (tok.kind != Tok::String)
      return expected("a header name string after 'from'");
    decl.header = tok.value;
    advance();
    while (isIdent("void") || isIdent("no_gradient")) {
      if (isIdent("void"))
        decl.returnsStatus = false;
      else
        decl.noGradient = true;
      advance();
    }
    if (isIdent("loc") && !parseLocation())
      return false;
    module.externs.push_back(std::move(decl));
    return true;
  }

  // function ::= 'func' '@' name '(' (param (',' param)*)? ')' '->' results
  //              fnAttrs? location? '{' statement* return '}'
  // param    ::= '%' name ':' type
  // results  ::= type | '(' (type (',' type)*)? ')'
  bool parseFunction(Module &module) {
    if (!expectIdent("func"))
      return false;
    if (tok.kind != Tok::Symbol)
      return expected("a function name ('@name')");
    scope = FunctionScope();
    scope.fn = module.addFunction(tok.value);
    scope.fn->setLoc(loc());
    advance();
    if (!expect(Tok::LParen, "'(' after the function name"))
      return false;
    if (!consume(Tok::RParen)) {
      do {
        if (tok.kind != Tok::ValueName)
          return expected("a parameter ('%name')");
        std::string name = tok.value;
        SourceLoc where = loc();
        advance();
        TensorType type;
        if (!expect(Tok::Colon, "':' after the parameter name") ||
            !parseType(type))
          return false;
        Value *p = scope.fn->addParam(type, valueNameFromText(name));
        if (!defineValue(name, p, where))
          return false;
      } while (consume(Tok::Comma));
      if (!expect(Tok::RParen, "',' or ')' after a parameter"))
        return false;
    }
    if (!expect(Tok::Arrow, "'->' after the parameters") || !parseResultTypes())
      return false;
    if (isIdent("attributes") && !parseFunctionAttrs())
      return false;
    if (isIdent("loc") && !parseLocation())
      return false;
    if (!expect(Tok::LBrace, "'{' to open the function body"))
      return false;
    return parseBody();
  }

  bool parseResultTypes() {
    TensorType type;
    if (!consume(Tok::LParen)) {
      if (!parseType(type))
        return false;
      scope.declaredResults.push_back(type);
      return true;
    }
    if (consume(Tok::RParen))
      return true;
    do {
      if (!parseType(type))
        return false;
      scope.declaredResults.push_back(type);
    } while (consume(Tok::Comma));
    return expect(Tok::RParen, "',' or ')' after a result type");
  }

  // fnAttrs ::= 'attributes' '{' fnAttr (',' fnAttr)* '}'
  // fnAttr  ::= 'role' '=' ('user' | 'grad' | 'fwd' | 'bwd'
  //                        | 'value_and_grad' | 'rule_instance')
  //           | 'grad' '=' '@' name | 'wrt' '=' '[' integers ']'
  //           | 'fwd' '=' '@' name | 'bwd' '=' '@' name
  //           | 'value_and_grad' '=' '@' name
  //           | 'grad_loc' '=' location | 'custom_grad' '=' ruleAttr
  bool parseFunctionAttrs() {
    advance(); // 'attributes'
    if (!expect(Tok::LBrace, "'{' after 'attributes'"))
      return false;
    Function::GradSpec spec;
    bool hasGrad = false;
    // The first of 'wrt', 'fwd' and 'bwd' seen: they belong to a 'grad'.
    std::string specKey;
    SourceLoc specKeyLoc;
    do {
      if (tok.kind != Tok::Ident)
        return expected("a function attribute name");
      std::string key = tok.value;
      SourceLoc keyLoc = loc();
      advance();
      if (!expect(Tok::Equal, ("'=' after '" + llvm::Twine(key) + "'").str()))
        return false;
      bool specPart = key == "wrt" || key == "fwd" || key == "bwd" ||
                      key == "value_and_grad";
      if (specPart && specKey.empty()) {
        specKey = key;
        specKeyLoc = keyLoc;
      }
      if (key == "role") {
        if (!parseRole())
          return false;
      } else if (key == "grad" || key == "fwd" || key == "bwd" ||
                 key == "value_and_grad") {
        if (tok.kind != Tok::Symbol)
          return expected(
              ("a function name ('@name') for '" + llvm::Twine(key) + "'")
                  .str());
        if (key == "grad") {
          spec.gradName = tok.value;
          spec.loc = keyLoc;
          hasGrad = true;
        } else {
          (key == "fwd"   ? spec.fwdName
           : key == "bwd" ? spec.bwdName
                          : spec.valueAndGradName) = tok.value;
        }
        advance();
      } else if (key == "wrt") {
        if (!parseWrt(spec.wrt))
          return false;
      } else if (key == "grad_loc") {
        if (!parseLocation())
          return false;
      } else if (key == "custom_grad") {
        GradRuleAttr rule;
        if (!isIdent("rule"))
          return expected("'rule(...)' after 'custom_grad ='");
        if (!parseRule(rule))
          return false;
        scope.fn->setCustomGrad(std::move(rule));
      } else {
        diags.report(keyLoc, diag::err_ir_unknown_fn_attr) << key;
        return false;
      }
    } while (consume(Tok::Comma));
    if (!expect(Tok::RBrace, "',' or '}' after a function attribute"))
      return false;
    if (!specKey.empty() && !hasGrad) {
      diags.report(specKeyLoc, diag::err_ir_wrt_without_grad)
          << specKey << scope.fn->getName();
      return false;
    }
    if (hasGrad)
      scope.fn->setGradSpec(std::move(spec));
    return true;
  }

  bool parseRole() {
    if (tok.kind != Tok::Ident)
      return expected("a role");
    static const std::pair<const char *, Function::Role> roles[] = {
        {"user", Function::Role::User},
        {"grad", Function::Role::Grad},
        {"fwd", Function::Role::Forward},
        {"bwd", Function::Role::Backward},
        {"value_and_grad", Function::Role::ValueAndGrad},
        {"rule_instance", Function::Role::RuleInstance},
        {"loop_body", Function::Role::LoopBody}};
    for (const auto &[name, role] : roles)
      if (tok.value == name) {
        scope.fn->setRole(role);
        advance();
        return true;
      }
    diags.report(loc(), diag::err_ir_unknown_role) << tok.value;
    return false;
  }

  bool parseWrt(std::vector<unsigned> &wrt) {
    if (!expect(Tok::LBracket, "'[' after 'wrt ='"))
      return false;
    if (consume(Tok::RBracket))
      return true;
    do {
      SourceLoc where = loc();
      int64_t index = 0;
      if (!parseInteger(index, "a parameter index"))
        return false;
      if (index < 0 || index > int64_t(~0u)) {
        diags.report(where, diag::err_ir_wrt_negative)
            << scope.fn->getName() << index;
        return false;
      }
      wrt.push_back(unsigned(index));
    } while (consume(Tok::Comma));
    return expect(Tok::RBracket, "',' or ']' in 'wrt'");
  }

  // body ::= statement* 'return' (value (',' value)*)? '}'
  bool parseBody() {
    while (!isIdent("return")) {
      if (tok.kind == Tok::Eof || tok.kind == Tok::RBrace) {
        if (!scope.hadError)
          expected("'return' before the end of the function");
        consume(Tok::RBrace);
        return finishFunction(/*hasReturn=*/false);
      }
      size_t before = tok.offset;
      if (!parseOp()) {
        scope.hadError = true;
        // Resume at the next line; a line that ended where the error was
        // found has already been left.
        if (!tok.startsLine || tok.kind == Tok::Error || tok.offset == before)
          skipToNextLine();
      }
    }
    scope.returnLoc = loc();
    advance(); // 'return'
    llvm::SmallVector<Value *, 2> returns;
    if (tok.kind == Tok::ValueName) {
      do {
        if (tok.kind != Tok::ValueName) {
          expected("a value ('%name') after ','");
          scope.hadError = true;
          scope.fn->setReturns(returns);
          finishFunction(/*hasReturn=*/false);
          return false;
        }
        scope.uses.push_back(
            {nullptr, unsigned(returns.size()), tok.value, loc()});
        returns.push_back(nullptr);
        advance();
      } while (consume(Tok::Comma));
    }
    scope.fn->setReturns(returns);
    if (!expect(Tok::RBrace, "'}' after 'return'")) {
      finishFunction(/*hasReturn=*/true);
      return false;
    }
    return finishFunction(/*hasReturn=*/true);
  }

  /// Resolves the names used in the function and checks the declared
  /// result types against the returned values.
  bool finishFunction(bool hasReturn) {
    bool ok = !scope.hadError;
    bool returnsResolved = true;
    for (const PendingUse &use : scope.uses) {
      auto it = scope.values.find(use.name);
      if (it == scope.values.end()) {
        if (!scope.poisoned.contains(use.name))
          diags.report(use.loc, diag::err_ir_undefined_value)
              << ("%" + llvm::Twine(use.name)).str();
        ok = false;
        if (!use.op)
          returnsResolved = false;
        continue;
      }
      if (use.op)
        use.op->setOperand(use.index, it->second.first);
      else if (use.index < scope.fn->getReturns().size())
        scope.fn->setReturn(use.index, it->second.first);
    }
    if (hasReturn && returnsResolved && !checkReturnTypes())
      ok = false;
    return ok;
  }

  bool checkReturnTypes() {
    llvm::ArrayRef<Value *> returns = scope.fn->getReturns();
    bool same = returns.size() == scope.declaredResults.size();
    for (size_t i = 0; same && i < returns.size(); ++i)
      same = returns[i]->getType() == scope.declaredResults[i];
    if (same)
      return true;
    auto list = [](auto types) {
      std::string s = "(";
      for (size_t i = 0; i < types.size(); ++i)
        s += (i ? ", " : "") + types[i];
      return s + ")";
    };
    std::vector<std::string> declared, actual;
    for (const TensorType &t : scope.declaredResults)
      declared.push_back(t.str());
    for (const Value *v : returns)
      actual.push_back(v->getType().str());
    diags.report(scope.returnLoc, diag::err_ir_return_types)
        << scope.fn->getName() << list(declared) << list(actual);
    return false;
  }

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  static const OpInfo *findOp(llvm::StringRef name) {
    for (const OpInfo &info : getAllOps())
      if (name == info.name)
        return &info;
    return nullptr;
  }

  // op       ::= (value (',' value)* '=')? opName opArgs attrDict? ':' types
  //              ruleAttr? location?
  // opArgs   ::= (value (',' value)*)?          for every op but call
  //            | '@' name '(' (value (',' value)*)? ')'   for call
  // types    ::= '(' ')' | type (',' type)*
  bool parseOp() {
    llvm::SmallVector<std::pair<std::string, SourceLoc>, 2> resultNames;
    if (tok.kind == Tok::ValueName) {
      do {
        if (tok.kind != Tok::ValueName)
          return expected("a result name ('%name') after ','");
        resultNames.push_back({tok.value, loc()});
        scope.poisoned.insert(tok.value);
        advance();
      } while (consume(Tok::Comma));
      if (!expect(Tok::Equal, "'=' after the result names"))
        return false;
    }
    if (tok.kind != Tok::Ident)
      return expected("an op name");
    const OpInfo *info = findOp(tok.value);
    if (!info) {
      diags.report(loc(), diag::err_ir_unknown_op) << tok.value;
      return false;
    }
    SourceLoc opLoc = loc();
    advance();

    AttrList attrs;
    llvm::SmallVector<std::pair<std::string, SourceLoc>, 3> operands;
    if (info->kind == OpKind::Call || info->kind == OpKind::ExternCall) {
      if (tok.kind != Tok::Symbol)
        return expected("the callee ('@name') after 'call'");
      attrs.set("callee", tok.value);
      advance();
      if (!expect(Tok::LParen, "'(' after the callee"))
        return false;
      if (!consume(Tok::RParen)) {
        if (!parseOperandList(operands) ||
            !expect(Tok::RParen, "',' or ')' after an argument"))
          return false;
      }
    } else if (tok.kind == Tok::ValueName) {
      if (!parseOperandList(operands))
        return false;
    }
    if (tok.kind == Tok::LBrace && !parseAttrDict(*info, attrs))
      return false;
    if (!expect(Tok::Colon, "':' before the result types"))
      return false;
    llvm::SmallVector<TensorType, 2> types;
    if (consume(Tok::LParen)) {
      if (!expect(Tok::RParen, "')' after '(' (an op without results)"))
        return false;
    } else {
      do {
        TensorType type;
        if (!parseType(type))
          return false;
        types.push_back(type);
      } while (consume(Tok::Comma));
    }
    GradRuleAttr rule;
    if (isIdent("rule") && !parseRule(rule))
      return false;
    if (isIdent("loc") && !parseLocation())
      return false;
    if (!tok.startsLine && tok.kind != Tok::Eof)
      return expected("the end of the line after an op");
    if (types.size() != resultNames.size()) {
      diags.report(opLoc, diag::err_ir_result_names)
          << info->name << types.size() << resultNames.size();
      return false;
    }

    std::vector<std::string> names;
    for (const auto &[name, where] : resultNames)
      names.push_back(valueNameFromText(name));
    llvm::SmallVector<Value *, 3> placeholders(operands.size(), nullptr);
    Op *op = scope.fn->createOp(info->kind, placeholders, types,
                                std::move(attrs), opLoc, names);
    op->getGradRule() = std::move(rule);
    for (size_t i = 0; i < operands.size(); ++i)
      scope.uses.push_back(
          {op, unsigned(i), operands[i].first, operands[i].second});
    bool ok = true;
    for (size_t i = 0; i < resultNames.size(); ++i) {
      scope.poisoned.erase(resultNames[i].first);
      ok &= defineValue(resultNames[i].first, op->getResult(i),
                        resultNames[i].second);
    }
    return ok;
  }

  bool parseOperandList(
      llvm::SmallVectorImpl<std::pair<std::string, SourceLoc>> &operands) {
    do {
      if (tok.kind != Tok::ValueName)
        return expected("an operand ('%name')");
      operands.push_back({tok.value, loc()});
      advance();
    } while (consume(Tok::Comma));
    return true;
  }

  // ruleAttr ::= 'rule' '(' '@' name ',' string ',' (name | string)
  //              (',' location)? ')'
  bool parseRule(GradRuleAttr &rule) {
    rule.annotationLoc = loc();
    advance(); // 'rule'
    if (!expect(Tok::LParen, "'(' after 'rule'"))
      return false;
    if (tok.kind != Tok::Symbol)
      return expected("the rule's function ('@name')");
    rule.function = tok.value;
    advance();
    if (!expect(Tok::Comma, "',' after the rule's function"))
      return false;
    if (tok.kind != Tok::String)
      return expected("the rule's name (a string)");
    rule.ruleName = tok.value;
    // The printed name of an inline grad block (IRGen's).
    rule.gradBlock =
        llvm::StringRef(rule.ruleName).starts_with("grad block of");
    advance();
    if (!expect(Tok::Comma, "',' after the rule's name"))
      return false;
    if (tok.kind != Tok::Ident && tok.kind != Tok::String)
      return expected("'override' or 'custom_grad'");
    rule.via = tok.value;
    advance();
    if (consume(Tok::Comma) && !parseLocation())
      return false;
    return expect(Tok::RParen, "')' after the rule");
  }

  //===--------------------------------------------------------------------===//
  // Attributes
  //===--------------------------------------------------------------------===//

  // attrDict ::= '{' (name '=' attrValue (',' name '=' attrValue)*)? '}'
  bool parseAttrDict(const OpInfo &info, AttrList &attrs) {
    advance(); // '{'
    if (consume(Tok::RBrace))
      return true;
    do {
      if (tok.kind != Tok::Ident)
        return expected("an attribute name");
      std::string name = tok.value;
      SourceLoc nameLoc = loc();
      const AttrInfo *attr = info.findAttr(name);
      if (!attr) {
        diags.report(nameLoc, diag::err_ir_unknown_attr) << info.name << name;
        return false;
      }
      if (attrs.has(name)) {
        diags.report(nameLoc, diag::err_ir_duplicate_attr) << name;
        return false;
      }
      advance();
      if (!expect(Tok::Equal, "'=' after the attribute name"))
        return false;
      AttrValue value;
      if (!parseAttrValue(info, *attr, value))
        return false;
      attrs.set(name, std::move(value));
    } while (consume(Tok::Comma));
    return expect(Tok::RBrace, "',' or '}' after an attribute");
  }

  static const char *kindDescription(AttrKind kind) {
    switch (kind) {
    case AttrKind::Int:
      return "an integer";
    case AttrKind::Axes:
      return "an integer or a list of integers";
    case AttrKind::IntList:
      return "a list of integers";
    case AttrKind::Bool:
      return "'true' or 'false'";
    case AttrKind::Shape:
    case AttrKind::Dim:
      return "a list of sizes and size names";
    case AttrKind::Floats:
      return "a list of numbers";
    case AttrKind::Symbol:
      return "a string";
    }
    return "a value";
  }

  bool kindError(const OpInfo &info, const AttrInfo &attr) {
    if (tok.kind != Tok::Error)
      diags.report(loc(), diag::err_ir_attr_kind)
          << attr.name << info.name << kindDescription(attr.kind);
    return false;
  }

  // attrValue ::= integer | 'true' | 'false' | string | '@' name
  //             | '[' (element (',' element)*)? ']'
  bool parseAttrValue(const OpInfo &info, const AttrInfo &attr,
                      AttrValue &value) {
    switch (attr.kind) {
    case AttrKind::Int:
    case AttrKind::Axes: {
      if (attr.kind == AttrKind::Axes && tok.kind == Tok::LBracket)
        return parseIntList(info, attr, value);
      if (tok.kind != Tok::Number || !tok.isInteger)
        return kindError(info, attr);
      int64_t v = 0;
      if (!parseInteger(v, "an integer"))
        return false;
      value = v;
      return true;
    }
    case AttrKind::IntList:
      return parseIntList(info, attr, value);
    case AttrKind::Bool:
      if (!isIdent("true") && !isIdent("false"))
        return kindError(info, attr);
      value = tok.value == "true";
      advance();
      return true;
    case AttrKind::Shape:
    case AttrKind::Dim:
      return parseShapeValue(info, attr, value);
    case AttrKind::Floats:
      return parseFloatList(info, attr, value);
    case AttrKind::Symbol:
      if (tok.kind != Tok::String && tok.kind != Tok::Symbol)
        return kindError(info, attr);
      value = tok.value;
      advance();
      return true;
    }
    return kindError(info, attr);
  }

  bool parseIntList(const OpInfo &info, const AttrInfo &attr,
                    AttrValue &value) {
    if (!consume(Tok::LBracket))
      return kindError(info, attr);
    std::vector<int64_t> ints;
    if (!consume(Tok::RBracket)) {
      do {
        if (tok.kind != Tok::Number || !tok.isInteger)
          return kindError(info, attr);
        int64_t v = 0;
        if (!parseInteger(v, "an integer"))
          return false;
        ints.push_back(v);
      } while (consume(Tok::Comma));
      if (!expect(Tok::RBracket, "',' or ']' in a list"))
        return false;
    }
    value = std::move(ints);
    return true;
  }

  bool parseShapeValue(const OpInfo &info, const AttrInfo &attr,
                       AttrValue &value) {
    if (!consume(Tok::LBracket))
      return kindError(info, attr);
    Shape shape;
    if (!consume(Tok::RBracket)) {
      do {
        if (tok.kind == Tok::Ident) {
          shape.push_back(Dim::named(tok.value));
          advance();
          continue;
        }
        if (tok.kind != Tok::Number || !tok.isInteger)
          return kindError(info, attr);
        int64_t v = 0;
        if (!parseInteger(v, "a size"))
          return false;
        shape.push_back(Dim::known(v));
      } while (consume(Tok::Comma));
      if (!expect(Tok::RBracket, "',' or ']' in a shape"))
        return false;
    }
    value = std::move(shape);
    return true;
  }

  bool parseFloatList(const OpInfo &info, const AttrInfo &attr,
                      AttrValue &value) {
    if (!consume(Tok::LBracket))
      return kindError(info, attr);
    std::vector<double> floats;
    if (!consume(Tok::RBracket)) {
      do {
        double v = 0;
        if (!parseFloat(v))
          return false;
        floats.push_back(v);
      } while (consume(Tok::Comma));
      if (!expect(Tok::RBracket, "',' or ']' in a list"))
        return false;
    }
    value = std::move(floats);
    return true;
  }
};

} // namespace

std::unique_ptr<Module> ir::parseIR(const SourceManager &sm,
                                    SourceLoc bufferStart,
                                    DiagnosticEngine &diags) {
  return IRParser(sm, bufferStart, diags).parseModule();
}
