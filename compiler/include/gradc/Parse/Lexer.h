//===- Lexer.h - Tokens of a .grad file -------------------------*- C++ -*-===//
//
// Splits a source buffer into tokens for the parser. Newlines matter in the
// language (a statement ends at a line end), so the lexer emits one Newline
// token for each run of line ends, comments and blank lines; the parser
// ignores them inside parentheses and brackets. Every token also records
// whether it is the first on its line, which lets the parser resynchronise
// at a line start after an error inside parentheses.
//
// A character that cannot start a token, a malformed number or an out-of-
// range literal is reported through the DiagnosticEngine and becomes an
// Error token, so that the parser can fail quietly on it without reporting
// a second error for the same place.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_PARSE_LEXER_H
#define GRADC_PARSE_LEXER_H

#include "gradc/Basic/Diagnostic.h"

#include "llvm/ADT/StringRef.h"

namespace gradc {

enum class TokenKind : uint8_t {
  Eof,
  Newline,
  Error, ///< already reported by the lexer
  Identifier,
  Integer, ///< `12`: digits only
  Float,   ///< `2.0`, `.5`, `1e-3`, `2.5e+3`
  String,  ///< `"shrink.h"`: the quotes included; no escapes, one line
  // Keywords.
  KwFn,
  KwRule,
  KwLet,
  KwReturn,
  KwGrad,
  KwExtern,
  KwTrue,
  KwFalse,
  KwFor,
  KwIf,
  KwElse,
  KwWhile,
  // Punctuation.
  LParen,
  RParen,
  LSquare,
  RSquare,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Equal,
  Arrow,
  At,
  Plus,
  Minus,
  Star,
  Slash,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  EqualEqual,
  ExclaimEqual,
  DotDot, ///< `..` in a loop's range
};

/// How a token kind is written, for messages: "'('", "identifier".
llvm::StringRef getTokenSpelling(TokenKind kind);

struct Token {
  TokenKind kind = TokenKind::Eof;
  /// The characters of the token (empty for Eof; "\n" for Newline).
  llvm::StringRef text;
  SourceLoc loc;
  /// True when no other token precedes this one on its line.
  bool startsLine = false;

  bool is(TokenKind k) const { return kind == k; }
  bool isNot(TokenKind k) const { return kind != k; }
  SourceLoc getEndLoc() const { return loc.getAdvanced(text.size()); }
  SourceRange getRange() const { return SourceRange(loc, getEndLoc()); }
};

/// Produces the tokens of one buffer on demand, so that the lexer's
/// diagnostics interleave with the parser's in source order. After the end
/// of the buffer, lex() keeps returning one Eof token located one past the
/// last character.
class Lexer {
public:
  Lexer(const SourceManager &sm, SourceLoc bufferStart, DiagnosticEngine &diags)
      : text(sm.getBufferText(bufferStart)), start(bufferStart), diags(diags) {
    // A UTF-8 byte-order mark (editors on Windows write one) is not text.
    if (text.starts_with("\xEF\xBB\xBF"))
      pos = 3;
  }

  Token lex();

private:
  SourceLoc locOf(size_t offset) const {
    return start.getAdvanced(static_cast<uint32_t>(offset));
  }
  char peek(size_t ahead = 0) const {
    return pos + ahead < text.size() ? text[pos + ahead] : '\0';
  }
  Token make(TokenKind kind, size_t begin);
  Token lexNumber();
  Token lexIdentifier();
  Token lexString();
  Token lexBadCharacter();
  bool lexPunctuation(Token &out);
  void skipDigits();

  llvm::StringRef text;
  SourceLoc start;
  DiagnosticEngine &diags;
  size_t pos = 0;
  bool atLineStart = true;
  /// No Newline before the first token or after another Newline.
  bool newlineAllowed = false;
};

} // namespace gradc

#endif // GRADC_PARSE_LEXER_H
