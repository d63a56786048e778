//===- Lexer.cpp - Tokens of a .grad file ---------------------------------===//
//
// A hand-written lexer over one buffer. The parser pulls one token at a
// time (and buffers what it looks ahead at), so a lexical error is reported
// when the parser reaches it, in source order with the syntax errors.
//
// Newlines are tokens, collapsed so that a run of line ends, comments and
// blank lines yields one Newline, and none precedes the first real token.
// Bad input never stops the lexer: it reports, emits an Error token and
// continues with the next character.
//
//===----------------------------------------------------------------------===//

#include "gradc/Parse/Lexer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ConvertUTF.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

using namespace gradc;

llvm::StringRef gradc::getTokenSpelling(TokenKind kind) {
  switch (kind) {
  case TokenKind::Eof:
    return "end of file";
  case TokenKind::Newline:
    return "newline";
  case TokenKind::Error:
    return "invalid token";
  case TokenKind::Identifier:
    return "identifier";
  case TokenKind::Integer:
  case TokenKind::Float:
    return "number";
  case TokenKind::String:
    return "string";
  case TokenKind::KwFn:
    return "'fn'";
  case TokenKind::KwRule:
    return "'rule'";
  case TokenKind::KwLet:
    return "'let'";
  case TokenKind::KwReturn:
    return "'return'";
  case TokenKind::KwGrad:
    return "'grad'";
  case TokenKind::KwExtern:
    return "'extern'";
  case TokenKind::KwTrue:
    return "'true'";
  case TokenKind::KwFalse:
    return "'false'";
  case TokenKind::KwFor:
    return "'for'";
  case TokenKind::KwIf:
    return "'if'";
  case TokenKind::KwElse:
    return "'else'";
  case TokenKind::KwWhile:
    return "'while'";
  case TokenKind::LParen:
    return "'('";
  case TokenKind::RParen:
    return "')'";
  case TokenKind::LSquare:
    return "'['";
  case TokenKind::RSquare:
    return "']'";
  case TokenKind::LBrace:
    return "'{'";
  case TokenKind::RBrace:
    return "'}'";
  case TokenKind::Comma:
    return "','";
  case TokenKind::Colon:
    return "':'";
  case TokenKind::Equal:
    return "'='";
  case TokenKind::Arrow:
    return "'->'";
  case TokenKind::At:
    return "'@'";
  case TokenKind::Plus:
    return "'+'";
  case TokenKind::Minus:
    return "'-'";
  case TokenKind::Star:
    return "'*'";
  case TokenKind::Slash:
    return "'/'";
  case TokenKind::Less:
    return "'<'";
  case TokenKind::LessEqual:
    return "'<='";
  case TokenKind::Greater:
    return "'>'";
  case TokenKind::GreaterEqual:
    return "'>='";
  case TokenKind::EqualEqual:
    return "'=='";
  case TokenKind::ExclaimEqual:
    return "'!='";
  case TokenKind::DotDot:
    return "'..'";
  }
  return "token";
}

static bool isIdentStart(char c) { return llvm::isAlpha(c) || c == '_'; }
static bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_'; }

Token Lexer::make(TokenKind kind, size_t begin) {
  Token tok;
  tok.kind = kind;
  tok.text = text.slice(begin, pos);
  tok.loc = locOf(begin);
  tok.startsLine = atLineStart;
  atLineStart = false;
  newlineAllowed = kind != TokenKind::Newline;
  return tok;
}

void Lexer::skipDigits() {
  while (llvm::isDigit(peek()))
    ++pos;
}

// number  ::= digits [ '.' digits* ] [ exponent ]
//           | '.' digits [ exponent ]
// exponent ::= ('e' | 'E') [ '+' | '-' ] digits
Token Lexer::lexNumber() {
  size_t begin = pos;
  bool isFloat = false;
  skipDigits();
  // `0..T` is a range: the '.' after the digits starts a '..'.
  if (peek() == '.' && peek(1) != '.') {
    isFloat = true;
    ++pos;
    skipDigits();
  }
  bool badExponent = false;
  if (peek() == 'e' || peek() == 'E') {
    size_t digits = pos + 1;
    if (digits < text.size() && (text[digits] == '+' || text[digits] == '-'))
      ++digits;
    isFloat = true;
    pos = digits;
    badExponent = !llvm::isDigit(peek());
    skipDigits();
  }
  llvm::StringRef spelling = text.slice(begin, pos);
  SourceRange range(locOf(begin), locOf(pos));

  // `2x` or `1.5e3q`: one bad token, not a number followed by a name.
  if (isIdentChar(peek())) {
    size_t suffix = pos;
    while (isIdentChar(peek()))
      ++pos;
    diags.report(locOf(suffix), diag::err_lex_number_suffix)
        << text.slice(suffix, pos) << SourceRange(locOf(begin), locOf(pos));
    return make(TokenKind::Error, begin);
  }
  if (badExponent) {
    diags.report(locOf(begin), diag::err_lex_exponent_digits)
        << spelling << range;
    return make(TokenKind::Error, begin);
  }
  if (!isFloat) {
    int64_t value;
    if (spelling.getAsInteger(10, value)) {
      diags.report(locOf(begin), diag::err_lex_int_too_large)
          << spelling << range;
      return make(TokenKind::Error, begin);
    }
    return make(TokenKind::Integer, begin);
  }
  std::string copy = spelling.str();
  double value = std::strtod(copy.c_str(), nullptr);
  if (!std::isfinite(value)) {
    diags.report(locOf(begin), diag::err_lex_float_range) << spelling << range;
    return make(TokenKind::Error, begin);
  }
  return make(TokenKind::Float, begin);
}

Token Lexer::lexIdentifier() {
  size_t begin = pos;
  while (isIdentChar(peek()))
    ++pos;
  TokenKind kind = llvm::StringSwitch<TokenKind>(text.slice(begin, pos))
                       .Case("fn", TokenKind::KwFn)
                       .Case("rule", TokenKind::KwRule)
                       .Case("let", TokenKind::KwLet)
                       .Case("return", TokenKind::KwReturn)
                       .Case("grad", TokenKind::KwGrad)
                       .Case("extern", TokenKind::KwExtern)
                       .Case("true", TokenKind::KwTrue)
                       .Case("false", TokenKind::KwFalse)
                       .Case("for", TokenKind::KwFor)
                       .Case("if", TokenKind::KwIf)
                       .Case("else", TokenKind::KwElse)
                       .Case("while", TokenKind::KwWhile)
                       .Default(TokenKind::Identifier);
  return make(kind, begin);
}

// string ::= '"' { any character but '"' and newline } '"'
//
// Only `extern ... from "header.h"` takes a string: a file name, so no
// escapes are needed.
Token Lexer::lexString() {
  size_t begin = pos++;
  while (pos < text.size() && text[pos] != '"' && text[pos] != '\n')
    ++pos;
  if (pos == text.size() || text[pos] != '"') {
    diags.report(locOf(begin), diag::err_lex_unterminated_string)
        << SourceRange(locOf(begin), locOf(pos));
    return make(TokenKind::Error, begin);
  }
  ++pos;
  return make(TokenKind::String, begin);
}

/// Reports the character at `pos`: a whole UTF-8 sequence when it is one
/// (so that 'λ' is quoted as written), otherwise one byte, shown as \xNN
/// when it is not printable.
Token Lexer::lexBadCharacter() {
  size_t begin = pos;
  unsigned char c = static_cast<unsigned char>(text[pos]);
  unsigned length = 1;
  if (c >= 0x80) {
    unsigned n = llvm::getNumBytesForUTF8(c);
    const auto *p = reinterpret_cast<const llvm::UTF8 *>(text.data() + pos);
    if (n > 1 && pos + n <= text.size() && llvm::isLegalUTF8Sequence(p, p + n))
      length = n;
  }
  std::string shown;
  if (length > 1)
    shown = text.substr(pos, length).str();
  else if (llvm::isPrint(c))
    shown = std::string(1, c);
  else
    shown = {'\\', 'x', llvm::hexdigit(c >> 4), llvm::hexdigit(c & 15)};
  pos += length;
  diags.report(locOf(begin), diag::err_lex_unexpected_char)
      << shown << SourceRange(locOf(begin), locOf(pos));
  return make(TokenKind::Error, begin);
}

bool Lexer::lexPunctuation(Token &out) {
  size_t begin = pos;
  char c = peek(), next = peek(1);
  auto two = [&](TokenKind kind) {
    pos += 2;
    out = make(kind, begin);
    return true;
  };
  auto one = [&](TokenKind kind) {
    pos += 1;
    out = make(kind, begin);
    return true;
  };
  switch (c) {
  case '(':
    return one(TokenKind::LParen);
  case ')':
    return one(TokenKind::RParen);
  case '[':
    return one(TokenKind::LSquare);
  case ']':
    return one(TokenKind::RSquare);
  case '{':
    return one(TokenKind::LBrace);
  case '}':
    return one(TokenKind::RBrace);
  case ',':
    return one(TokenKind::Comma);
  case ':':
    return one(TokenKind::Colon);
  case '@':
    return one(TokenKind::At);
  case '+':
    return one(TokenKind::Plus);
  case '*':
    return one(TokenKind::Star);
  case '/':
    return one(TokenKind::Slash);
  case '-':
    return next == '>' ? two(TokenKind::Arrow) : one(TokenKind::Minus);
  case '=':
    return next == '=' ? two(TokenKind::EqualEqual) : one(TokenKind::Equal);
  case '<':
    return next == '=' ? two(TokenKind::LessEqual) : one(TokenKind::Less);
  case '>':
    return next == '=' ? two(TokenKind::GreaterEqual) : one(TokenKind::Greater);
  case '!':
    return next == '=' && two(TokenKind::ExclaimEqual);
  case '.':
    return next == '.' && two(TokenKind::DotDot);
  default:
    return false;
  }
}

Token Lexer::lex() {
  while (pos < text.size()) {
    char c = text[pos];
    if (c == '\n') {
      ++pos;
      // One Newline per run of line ends; none before the first token.
      bool emit = newlineAllowed;
      Token tok = make(TokenKind::Newline, pos - 1);
      atLineStart = true;
      if (emit)
        return tok;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++pos;
      continue;
    }
    if (c == '#') {
      while (pos < text.size() && text[pos] != '\n')
        ++pos;
      continue;
    }
    if (llvm::isDigit(c) || (c == '.' && llvm::isDigit(peek(1))))
      return lexNumber();
    if (isIdentStart(c))
      return lexIdentifier();
    if (c == '"')
      return lexString();
    Token tok;
    if (lexPunctuation(tok))
      return tok;
    return lexBadCharacter();
  }
  return make(TokenKind::Eof, pos);
}
