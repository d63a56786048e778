//===- Literal.cpp - Values written on the command line -------------------===//
//
// A small hand-written scanner for `name(lit, ...)` call texts, the
// conversion of literals into tensors of a declared element type, and the
// printer of tensors as nested bracket lists. Numbers keep their spelling
// until the element type is known, so `0.1` for an f32 parameter is read
// with strtof (the nearest float), never via a double first.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Literal.h"

#include "gradc/Ops/Attr.h"

#include "llvm/ADT/StringExtras.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

using namespace gradc;
using namespace gradc::ir;

namespace {

/// Recursive-descent parser over the call text; positions are 0-based
/// columns into `text`.
class CallParser {
public:
  explicit CallParser(llvm::StringRef text) : text(text) {}

  // call ::= name '(' (literal (',' literal)*)? ')'
  bool parseCall(std::string &callee, std::vector<Literal> &args) {
    skipSpace();
    if (!parseName(callee))
      return false;
    skipSpace();
    if (!expect('(', "expected '(' after the function name"))
      return false;
    skipSpace();
    if (!consume(')')) {
      do {
        Literal lit;
        if (!parseLiteral(lit))
          return false;
        args.push_back(std::move(lit));
        skipSpace();
      } while (consume(','));
      if (!expect(')', "expected ',' or ')' after an argument"))
        return false;
    }
    skipSpace();
    if (pos != text.size())
      return fail("unexpected text after the call");
    return true;
  }

  const std::string &getError() const { return error; }
  size_t getErrorColumn() const { return errorColumn; }

private:
  static constexpr unsigned maxNesting = 64;
  llvm::StringRef text;
  size_t pos = 0;
  unsigned depth = 0;
  std::string error;
  size_t errorColumn = 0;

  bool atEnd() const { return pos >= text.size(); }
  char peek() const { return peekAt(pos); }
  char peekAt(size_t at) const { return at >= text.size() ? '\0' : text[at]; }

  void skipSpace() {
    while (!atEnd() && llvm::isSpace(text[pos]))
      ++pos;
  }

  bool consume(char c) {
    if (peek() != c)
      return false;
    ++pos;
    return true;
  }

  bool fail(llvm::StringRef message) { return failAt(pos, message); }
  bool failAt(size_t column, llvm::StringRef message) {
    error = message.str();
    errorColumn = column;
    return false;
  }

  bool expect(char c, llvm::StringRef message) {
    if (consume(c))
      return true;
    return fail(message);
  }

  static bool isNameStart(char c) { return llvm::isAlpha(c) || c == '_'; }
  static bool isNameChar(char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.';
  }

  // name ::= [A-Za-z_] [A-Za-z0-9_.]*
  bool parseName(std::string &name) {
    if (!isNameStart(peek()))
      return fail("expected a function name");
    size_t start = pos;
    while (isNameChar(peek()))
      ++pos;
    name = text.slice(start, pos).str();
    return true;
  }

  // literal ::= number | 'true' | 'false' | '[' (literal (',' literal)*)? ']'
  bool parseLiteral(Literal &lit) {
    skipSpace();
    lit.column = pos;
    char c = peek();
    if (c == '[')
      return parseList(lit);
    if (c == '-' || llvm::isDigit(c))
      return parseNumber(lit);
    if (isNameStart(c)) {
      size_t start = pos;
      while (isNameChar(peek()))
        ++pos;
      llvm::StringRef word = text.slice(start, pos);
      if (word == "inf" || word == "nan") {
        // Non-finite floats read back as `gradc run` prints them.
        lit.kind = Literal::Kind::Number;
        lit.isNonFinite = true;
        lit.text = word.str();
        return true;
      }
      if (word == "true" || word == "false") {
        lit.kind = Literal::Kind::Bool;
        lit.boolValue = word == "true";
        return true;
      }
      return failAt(start, "expected a number, 'true', 'false' or a list, "
                           "got '" +
                               word.str() + "'");
    }
    if (atEnd())
      return fail("expected an argument, got the end of the call");
    return fail(std::string("expected a number, 'true', 'false' or a list, "
                            "got '") +
                c + "'");
  }

  bool parseList(Literal &lit) {
    lit.kind = Literal::Kind::List;
    // Deeper nesting than any tensor needs would only exhaust the stack.
    if (++depth > maxNesting)
      return fail("lists are nested more than " + std::to_string(maxNesting) +
                  " deep");
    ++pos; // '['
    skipSpace();
    if (consume(']')) {
      --depth;
      return true;
    }
    do {
      Literal element;
      if (!parseLiteral(element))
        return false;
      lit.elements.push_back(std::move(element));
      skipSpace();
    } while (consume(','));
    --depth;
    return expect(']', "expected ',' or ']' in a list");
  }

  size_t scanDigits() {
    size_t start = pos;
    while (llvm::isDigit(peek()))
      ++pos;
    return pos - start;
  }

  // number ::= '-'? digit+ ('.' digit+)? ([eE] [+-]? digit+)?
  //          | '-'? 'inf' | 'nan'
  bool parseNumber(Literal &lit) {
    size_t start = pos;
    lit.kind = Literal::Kind::Number;
    lit.isInteger = true;
    consume('-');
    if (text.substr(pos).starts_with("inf") && !isNameChar(peekAt(pos + 3))) {
      pos += 3;
      lit.isInteger = false;
      lit.isNonFinite = true;
      lit.text = text.slice(start, pos).str();
      return true;
    }
    if (scanDigits() == 0)
      return fail("expected digits in a number");
    if (consume('.')) {
      lit.isInteger = false;
      if (scanDigits() == 0)
        return fail("expected digits after '.' in a number");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos;
      lit.isInteger = false;
      if (peek() == '+' || peek() == '-')
        ++pos;
      if (scanDigits() == 0)
        return fail("expected digits in the exponent of a number");
    }
    if (isNameChar(peek()))
      return fail("unexpected character in a number");
    lit.text = text.slice(start, pos).str();
    return true;
  }
};

/// Converts literals to tensors: first the shape from the nesting, then
/// each leaf in row-major order.
class TensorBuilder {
public:
  TensorBuilder(DType dtype, Tensor &out, std::string &error,
                size_t &errorColumn)
      : dtype(dtype), out(out), error(error), errorColumn(errorColumn) {}

  bool build(const Literal &lit) {
    out = Tensor();
    out.dtype = dtype;
    // The shape is read along the first element at each depth; every other
    // list is then checked against it.
    for (const Literal *l = &lit; l->isList(); l = &l->elements.front()) {
      out.shape.push_back(l->elements.size());
      if (l->elements.empty())
        break;
    }
    return addElements(lit, 0);
  }

private:
  DType dtype;
  Tensor &out;
  std::string &error;
  size_t &errorColumn;

  bool fail(const Literal &lit, std::string message) {
    error = std::move(message);
    errorColumn = lit.column;
    return false;
  }

  bool addElements(const Literal &lit, size_t depth) {
    if (depth == out.shape.size()) {
      if (lit.isList())
        return fail(lit, "ragged list: expected " + describeLeaf() +
                             " here, got a list");
      return addLeaf(lit);
    }
    if (!lit.isList())
      return fail(lit, "ragged list: expected a list of " +
                           std::to_string(out.shape[depth]) +
                           " elements here, got " + quoted(lit));
    if (int64_t(lit.elements.size()) != out.shape[depth])
      return fail(lit, "ragged list: expected " +
                           std::to_string(out.shape[depth]) +
                           " elements here, got " +
                           std::to_string(lit.elements.size()));
    for (const Literal &element : lit.elements)
      if (!addElements(element, depth + 1))
        return false;
    return true;
  }

  std::string describeLeaf() const {
    return dtype == DType::Bool ? "'true' or 'false'" : "a number";
  }
  static std::string boolText(const Literal &lit) {
    return lit.boolValue ? "true" : "false";
  }
  /// A leaf's spelling in quotes.
  static std::string quoted(const Literal &lit) {
    std::string s = "'";
    s += lit.isBool() ? boolText(lit) : lit.text;
    s += "'";
    return s;
  }

  bool addLeaf(const Literal &lit) {
    std::string type = dtypeName(dtype).str();
    if (dtype == DType::Bool) {
      if (!lit.isBool())
        return fail(lit, "expected 'true' or 'false' for bool, got '" +
                             lit.text + "'");
      out.data.push_back(lit.boolValue ? 1.0 : 0.0);
      return true;
    }
    if (lit.isBool())
      return fail(lit, "expected a number for " + type + ", got '" +
                           boolText(lit) + "'");
    switch (dtype) {
    case DType::F32: {
      errno = 0;
      float v = std::strtof(lit.text.c_str(), nullptr);
      if (std::isinf(v) && !lit.isNonFinite)
        return fail(lit, "number '" + lit.text + "' is out of range for f32");
      out.data.push_back(double(v));
      return true;
    }
    case DType::F64: {
      double v = std::strtod(lit.text.c_str(), nullptr);
      if (std::isinf(v) && !lit.isNonFinite)
        return fail(lit, "number '" + lit.text + "' is out of range for f64");
      out.data.push_back(v);
      return true;
    }
    case DType::I32: {
      if (!lit.isInteger)
        return fail(lit, "expected an integer for i32, got '" + lit.text + "'");
      errno = 0;
      long long v = std::strtoll(lit.text.c_str(), nullptr, 10);
      if (errno == ERANGE || v < std::numeric_limits<int32_t>::min() ||
          v > std::numeric_limits<int32_t>::max())
        return fail(lit, "integer '" + lit.text + "' is out of range for i32");
      out.data.push_back(double(v));
      return true;
    }
    case DType::Bool:
      break;
    }
    return false;
  }
};

/// Integral values below 10^15 print as plain integers (`1000`, not the
/// `1e+03` that the shortest round-tripping form would give); every other
/// float prints in that shortest form.
std::optional<std::string> formatIntegral(double v) {
  if (!(std::fabs(v) < 1e15) || v != std::trunc(v))
    return std::nullopt;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f", v);
  return std::string(buf);
}

std::string formatElement(DType dtype, double v) {
  switch (dtype) {
  case DType::F32:
    if (auto s = formatIntegral(v))
      return *s;
    return formatFloat(float(v));
  case DType::F64:
    if (auto s = formatIntegral(v))
      return *s;
    return formatDouble(v);
  case DType::I32:
    return std::to_string(int64_t(v));
  case DType::Bool:
    return v != 0 ? "true" : "false";
  }
  return "?";
}

/// Prints the elements of `t` from `offset`, for the axes from `depth` on.
void printLevel(const Tensor &t, size_t depth, int64_t offset,
                llvm::raw_ostream &os) {
  if (depth == t.shape.size()) {
    os << formatElement(t.dtype, t.data[offset]);
    return;
  }
  int64_t stride = 1;
  for (size_t i = depth + 1; i < t.shape.size(); ++i)
    stride *= t.shape[i];
  os << '[';
  for (int64_t i = 0; i < t.shape[depth]; ++i) {
    if (i)
      os << ", ";
    printLevel(t, depth + 1, offset + i * stride, os);
  }
  os << ']';
}

} // namespace

bool ir::parseCallLiteral(llvm::StringRef text, std::string &callee,
                          std::vector<Literal> &args, std::string &error,
                          size_t &errorColumn) {
  callee.clear();
  args.clear();
  CallParser parser(text);
  if (parser.parseCall(callee, args))
    return true;
  error = parser.getError();
  errorColumn = parser.getErrorColumn();
  return false;
}

bool ir::literalToTensor(const Literal &lit, DType dtype, Tensor &out,
                         std::string &error, size_t *errorColumn) {
  size_t column = 0;
  TensorBuilder builder(dtype, out, error, column);
  bool ok = builder.build(lit);
  if (!ok && errorColumn)
    *errorColumn = column;
  return ok;
}

void ir::printTensor(const Tensor &t, llvm::raw_ostream &os) {
  if (int64_t(t.data.size()) != t.numElements()) {
    os << "<malformed tensor>";
    return;
  }
  printLevel(t, 0, 0, os);
}

std::string ir::tensorToString(const Tensor &t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printTensor(t, os);
  return s;
}
