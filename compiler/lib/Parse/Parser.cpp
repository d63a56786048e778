//===- Parser.cpp - Recursive-descent parser ------------------------------===//
//
// Builds the AST of a .grad file from the tokens of Lexer.h. The grammar
// (docs/Grammar.md has all of it) is LL(1) except for keyword arguments,
// which need one token of look-ahead (`name =`).
//
// Newlines: the lexer emits them; a statement ends at one. Inside ( ) and
// [ ] they are ignored: the parser counts the open groups and skips Newline
// tokens while the count is positive. The closing token of a group is
// consumed after the count drops, so a newline after `)` still ends the
// statement.
//
// Errors: every parse function that fails has reported why (or met an
// Error token the lexer reported) and returns null/false; callers only
// propagate. The statement and declaration loops then resynchronise at the
// next line end or '}' (statements) or at the next top-level `fn`, `rule`
// or `@` outside any braces (declarations), always consuming at least one
// token, so that no input can make the parser loop. Recursion is capped at
// kMaxNesting levels, and so is the height of every expression tree, so
// that later phases may recurse over expressions freely.
//
//===----------------------------------------------------------------------===//

#include "gradc/Parse/Parser.h"

#include "gradc/Parse/Lexer.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <deque>

using namespace gradc;
using namespace gradc::ast;

namespace {

/// Deepest nesting of groups and unary operators, and tallest expression
/// tree, that the parser accepts.
constexpr unsigned kMaxNesting = 256;

/// An expression with what its parents need to know about it: its range
/// including any parentheses around it, and its height, which is bounded.
struct ParsedExpr {
  ExprPtr expr; ///< null after an error (already reported)
  SourceRange range;
  unsigned height = 0;
  explicit operator bool() const { return expr != nullptr; }
};

class Parser {
public:
  Parser(const SourceManager &sm, SourceLoc bufferStart,
         DiagnosticEngine &diags)
      : lexer(sm, bufferStart, diags), bufferStart(bufferStart), diags(diags) {}

  std::unique_ptr<Module> parseModule();

private:
  //===--------------------------------------------------------------------===//
  // Tokens
  //===--------------------------------------------------------------------===//

  /// The token at index `i`, lexing up to it on demand. A deque keeps
  /// references to earlier tokens valid while it grows.
  const Token &tokenAt(size_t i) {
    while (tokens.size() <= i) {
      if (!tokens.empty() && tokens.back().is(TokenKind::Eof))
        return tokens.back();
      tokens.push_back(lexer.lex());
    }
    return tokens[i];
  }
  const Token &tok() { return tokenAt(pos); }
  bool is(TokenKind kind) { return tok().is(kind); }
  bool isNameToken() { return is(TokenKind::Identifier); }
  bool atLineEnd() {
    return is(TokenKind::Newline) || is(TokenKind::Eof) ||
           is(TokenKind::RBrace);
  }

  /// The n-th token after the current one, as the parser will see it
  /// (newlines skipped inside groups).
  const Token &peekAhead(unsigned n) {
    size_t i = pos;
    while (n > 0 && tokenAt(i).isNot(TokenKind::Eof)) {
      ++i;
      if (groupDepth > 0)
        while (tokenAt(i).is(TokenKind::Newline))
          ++i;
      --n;
    }
    return tokenAt(i);
  }

  /// Consumes the current token and returns its location. `prevEnd`
  /// tracks the end of the last token that is not a Newline.
  SourceLoc consume() {
    const Token &t = tok();
    SourceLoc loc = t.loc;
    if (t.isNot(TokenKind::Newline))
      prevEnd = t.getEndLoc();
    if (t.isNot(TokenKind::Eof))
      ++pos;
    skipIgnoredNewlines();
    return loc;
  }

  bool consumeIf(TokenKind kind) {
    if (!is(kind))
      return false;
    consume();
    return true;
  }

  void skipIgnoredNewlines() {
    if (groupDepth > 0)
      while (is(TokenKind::Newline))
        ++pos;
  }

  void skipNewlines() {
    while (is(TokenKind::Newline))
      consume();
  }

  /// Where to report that something is missing: right after the previous
  /// token when the current one is on a later line, else at the current
  /// one.
  SourceLoc expectedLoc() {
    bool later =
        is(TokenKind::Newline) || is(TokenKind::Eof) || tok().startsLine;
    return later && prevEnd.isValid() ? prevEnd : tok().loc;
  }

  /// Reports "expected WHAT" (unless the current token is an Error token,
  /// which the lexer has reported already). Always returns false.
  bool errorExpected(llvm::StringRef what) {
    if (!is(TokenKind::Error))
      diags.report(expectedLoc(), diag::err_expected_token) << what;
    return false;
  }
  bool errorExpectedAfter(llvm::StringRef what, llvm::StringRef after) {
    if (!is(TokenKind::Error))
      diags.report(expectedLoc(), diag::err_expected_token_after)
          << what << after;
    return false;
  }
  bool errorExpectedName(llvm::StringRef what) {
    if (!is(TokenKind::Error))
      diags.report(expectedLoc(), diag::err_expected_name) << what;
    return false;
  }

  /// Consumes a `kind` token, or reports "expected 'X' after CONTEXT".
  bool expect(TokenKind kind, llvm::StringRef after) {
    if (consumeIf(kind))
      return true;
    return errorExpectedAfter(getTokenSpelling(kind), after);
  }

  bool parseIdent(Ident &out, llvm::StringRef what) {
    if (!isNameToken())
      return errorExpectedName(what);
    out.name = tok().text.str();
    out.range = tok().getRange();
    consume();
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Groups and nesting
  //===--------------------------------------------------------------------===//

  /// An open `(` or `[`: newlines are ignored until close().
  class Group {
  public:
    Group(Parser &p, TokenKind close) : p(p), closeKind(close) {
      ++p.groupDepth;
      openTok = p.tok();
      p.consume();
    }
    ~Group() { leave(); }
    SourceLoc openLoc() const { return openTok.loc; }

    /// Consumes the closing token, or reports that it is missing with a
    /// note at the opening one. `end` is one past the closing token.
    bool close(SourceLoc &end) {
      leave();
      if (p.is(closeKind)) {
        end = p.tok().getEndLoc();
        p.consume();
        return true;
      }
      if (!p.is(TokenKind::Error)) {
        p.diags.report(p.expectedLoc(), diag::err_expected_closing)
            << getTokenSpelling(closeKind).drop_front().drop_back()
            << openTok.text;
        p.diags.report(openTok.loc, diag::note_opening_here) << openTok.text;
      }
      return false;
    }

  private:
    void leave() {
      if (!left)
        --p.groupDepth;
      left = true;
    }
    Parser &p;
    TokenKind closeKind;
    Token openTok;
    bool left = false;
  };

  /// Counts the nesting of groups, calls and unary operators, through
  /// which every recursion of the expression parser passes; ok() is false
  /// (after one report) beyond the cap.
  class NestingGuard {
  public:
    explicit NestingGuard(Parser &p) : p(p) {
      if (++p.nesting > kMaxNesting)
        p.diags.report(p.tok().loc, diag::err_nesting_too_deep) << kMaxNesting;
    }
    ~NestingGuard() { --p.nesting; }
    bool ok() const { return p.nesting <= kMaxNesting; }

  private:
    Parser &p;
  };

  /// Parses `elem { ',' elem }` unless the current token is `close`.
  bool parseCommaList(TokenKind close, llvm::function_ref<bool()> elem) {
    if (is(close))
      return true;
    do {
      if (!elem())
        return false;
    } while (consumeIf(TokenKind::Comma));
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Declarations
  //===--------------------------------------------------------------------===//

  bool parseDecl(std::vector<DeclPtr> &decls);
  bool parseAnnotation(Annotation &out);
  bool parseAnnotations(std::vector<Annotation> &out);
  DeclPtr parseFn(std::vector<Annotation> annotations, SourceLoc begin);
  DeclPtr parseExtern(std::vector<Annotation> annotations, SourceLoc begin);
  DeclPtr parseRule(std::vector<Annotation> annotations, SourceLoc begin);
  bool parseUntypedParams(std::vector<Param> &params, llvm::StringRef after);
  bool parseFnSignature(FnDecl &fn, SourceLoc &end);
  void recoverAtBody();
  bool parseTypedParam(std::vector<Param> &params);
  bool parseResults(FnDecl &fn, SourceLoc &end);
  bool parseGradBlock(GradBlock &out);
  bool parseBlock(std::vector<StmtPtr> &body, SourceLoc &end);
  bool startsDecl();
  void skipToNextDecl(size_t startPos);

  //===--------------------------------------------------------------------===//
  // Types, statements and expressions
  //===--------------------------------------------------------------------===//

  bool parseType(TypeExpr &out);
  bool parseDim(TypeExpr &type);
  StmtPtr parseStmt();
  StmtPtr parseLet(std::vector<Annotation> annotations);
  StmtPtr parseReturn();
  void skipToStmtEnd(size_t startPos);

  ParsedExpr parseExpr();
  ParsedExpr parseAdditive();
  ParsedExpr parseMultiplicative();
  ParsedExpr parseMatMul();
  ParsedExpr parseUnary();
  ParsedExpr parsePostfix();
  ParsedExpr parseCall(ParsedExpr callee);
  ParsedExpr parseIndex(ParsedExpr base);
  bool isSliceSubscript();
  bool parseSliceAxes(SliceExpr &slice);
  bool parseSliceBound(SliceBound &bound, llvm::StringRef after);
  ParsedExpr parsePrimary();
  ParsedExpr parseParenExpr();
  ParsedExpr parseListExpr();
  ParsedExpr parseFor();
  bool parseLoopRange(ForExpr &loop);
  bool parseLoopCarries(ForExpr &loop, unsigned &height);
  bool parseLoopBody(ForExpr &loop, SourceLoc &end, unsigned &height) {
    return parseBlock(loop.body, loop.value, "a loop body", end, height);
  }
  ParsedExpr parseIf();
  ParsedExpr parseWhile();
  bool parseBlock(std::vector<StmtPtr> &body, ExprPtr &value,
                  llvm::StringRef what, SourceLoc &end, unsigned &height);
  /// After an error in a loop: skips the rest of its line, and a `{ ... }`
  /// body that starts on it, so that the body's `}` does not end the
  /// enclosing block.
  void skipBrokenLoop() {
    int depth = 0;
    while (!is(TokenKind::Eof)) {
      if (is(TokenKind::RBrace) && depth == 0)
        return;
      if (is(TokenKind::Newline) && depth == 0)
        return;
      depth += is(TokenKind::LBrace);
      depth -= is(TokenKind::RBrace);
      consume();
    }
  }
  bool isContextualKeyword(llvm::StringRef word) {
    return is(TokenKind::Identifier) && tok().text == word;
  }
  ParsedExpr makeBinary(BinaryOp op, SourceLoc opLoc, ParsedExpr lhs,
                        ParsedExpr rhs);
  ParsedExpr finish(ExprPtr expr, unsigned height);

  Lexer lexer;
  std::deque<Token> tokens;
  size_t pos = 0;
  SourceLoc prevEnd;
  SourceLoc bufferStart;
  unsigned groupDepth = 0;
  unsigned nesting = 0;
  DiagnosticEngine &diags;
};

} // namespace

//===----------------------------------------------------------------------===//
// Module and declarations
//===----------------------------------------------------------------------===//

// module ::= { newline | decl newline }
std::unique_ptr<Module> Parser::parseModule() {
  auto module = std::make_unique<Module>();
  module->bufferStart = bufferStart;
  while (true) {
    skipNewlines();
    if (is(TokenKind::Eof))
      break;
    size_t start = pos;
    if (!parseDecl(module->decls)) {
      skipToNextDecl(start);
      continue;
    }
    if (is(TokenKind::Newline) || is(TokenKind::Eof))
      continue;
    if (!is(TokenKind::Error))
      diags.report(tok().loc, diag::err_expected_newline) << "declaration";
    skipToNextDecl(start);
  }
  return module;
}

/// Skips to a `fn`, `rule` or `@` that starts a line outside any braces,
/// consuming at least one token.
void Parser::skipToNextDecl(size_t startPos) {
  int braces = 0;
  if (pos == startPos && !is(TokenKind::Eof)) {
    braces += is(TokenKind::LBrace) - is(TokenKind::RBrace);
    consume();
  }
  while (!is(TokenKind::Eof)) {
    bool declStart = is(TokenKind::KwFn) || is(TokenKind::KwExtern) ||
                     is(TokenKind::KwRule) || is(TokenKind::At);
    if (declStart && braces <= 0 && tok().startsLine)
      return;
    braces += is(TokenKind::LBrace) - is(TokenKind::RBrace);
    consume();
  }
}

// decl ::= { annotation [newline] } ( fnDecl | externDecl | ruleDecl )
bool Parser::parseDecl(std::vector<DeclPtr> &decls) {
  SourceLoc begin = tok().loc;
  std::vector<Annotation> annotations;
  if (!parseAnnotations(annotations))
    return false;
  DeclPtr decl;
  if (is(TokenKind::KwFn)) {
    decl = parseFn(std::move(annotations), begin);
  } else if (is(TokenKind::KwExtern)) {
    decl = parseExtern(std::move(annotations), begin);
  } else if (is(TokenKind::KwRule)) {
    decl = parseRule(std::move(annotations), begin);
  } else if (!annotations.empty()) {
    if (!is(TokenKind::Error))
      diags.report(tok().loc, diag::err_annotation_target)
          << getTokenSpelling(tok().kind);
    return false;
  } else {
    if (!is(TokenKind::Error))
      diags.report(tok().loc, diag::err_expected_decl)
          << getTokenSpelling(tok().kind);
    return false;
  }
  if (!decl)
    return false;
  decls.push_back(std::move(decl));
  return true;
}

// annotations ::= { annotation [newline] }
bool Parser::parseAnnotations(std::vector<Annotation> &out) {
  while (is(TokenKind::At)) {
    Annotation a;
    if (!parseAnnotation(a))
      return false;
    out.push_back(std::move(a));
    skipNewlines();
  }
  return true;
}

// annotation    ::= '@' annotationName [ '(' [ annotationArg
//                   { ',' annotationArg } ] ')' ]
// annotationArg ::= name [ '=' ( name | integer ) ]
//
// The name may be a keyword (`@grad`); Sema judges which names exist.
bool Parser::parseAnnotation(Annotation &out) {
  SourceLoc begin = consume(); // '@'
  bool keyword =
      tok().kind >= TokenKind::KwFn && tok().kind <= TokenKind::KwFalse;
  if (!isNameToken() && !keyword)
    return errorExpectedName("annotation");
  out.name.name = tok().text.str();
  out.name.range = tok().getRange();
  SourceLoc end = tok().getEndLoc();
  consume();
  if (is(TokenKind::LParen)) {
    out.hasParens = true;
    Group group(*this, TokenKind::RParen);
    bool ok = parseCommaList(TokenKind::RParen, [&] {
      AnnotationArg arg;
      Ident first;
      if (!parseIdent(first, "annotation argument"))
        return false;
      arg.range = first.range;
      if (consumeIf(TokenKind::Equal)) {
        arg.key = std::move(first);
        // `every = 100` in @checkpoint: the value keeps its spelling, and
        // Sema reads the number from it.
        if (is(TokenKind::Integer)) {
          arg.value.name = tok().text.str();
          arg.value.range = tok().getRange();
          consume();
        } else if (!parseIdent(arg.value, "annotation argument")) {
          return false;
        }
        arg.range.end = arg.value.range.end;
      } else {
        arg.value = std::move(first);
      }
      out.args.push_back(std::move(arg));
      return true;
    });
    if (!ok || !group.close(end))
      return false;
  }
  out.range = SourceRange(begin, end);
  return true;
}

// fnDecl    ::= 'fn' name '(' [ param { ',' param } ] ')' [newline] '->'
//               results block [ [newline] gradBlock ]
// param     ::= name ':' type
// gradBlock ::= 'grad' '(' [ name { ',' name } ] ')' block
DeclPtr Parser::parseFn(std::vector<Annotation> annotations, SourceLoc begin) {
  SourceLoc fnLoc = consume(); // 'fn'
  // The declaration is built at the end, when its range is known; collect
  // the parts in a scratch node first.
  FnDecl scratch{SourceRange()};
  SourceLoc sigEnd;
  if (!parseFnSignature(scratch, sigEnd)) {
    recoverAtBody();
    return nullptr;
  }
  std::vector<StmtPtr> body;
  SourceLoc end;
  if (!parseBlock(body, end))
    return nullptr;

  std::optional<GradBlock> gradBlock;
  if (peekAhead(0).is(TokenKind::Newline) && peekAhead(1).is(TokenKind::KwGrad))
    consume();
  if (is(TokenKind::KwGrad)) {
    gradBlock.emplace();
    if (!parseGradBlock(*gradBlock))
      return nullptr;
    end = gradBlock->range.end;
  }

  auto fn = std::make_unique<FnDecl>(SourceRange(begin, end));
  fn->annotations = std::move(annotations);
  fn->name = std::move(scratch.name);
  fn->params = std::move(scratch.params);
  fn->body = std::move(body);
  fn->results = std::move(scratch.results);
  fn->returnsTuple = scratch.returnsTuple;
  fn->gradBlock = std::move(gradBlock);
  fn->signatureRange = SourceRange(fnLoc, sigEnd);
  return fn;
}

// externDecl ::= 'extern' 'fn' name '(' [ param { ',' param } ] ')'
//                [newline] '->' results 'from' string
//
// `from` is a name, not a keyword, everywhere else.
DeclPtr Parser::parseExtern(std::vector<Annotation> annotations,
                            SourceLoc begin) {
  SourceLoc externLoc = consume(); // 'extern'
  if (!is(TokenKind::KwFn)) {
    errorExpectedAfter("'fn'", "'extern'");
    return nullptr;
  }
  consume();
  FnDecl scratch{SourceRange()};
  SourceLoc sigEnd;
  if (!parseFnSignature(scratch, sigEnd))
    return nullptr;
  if (!is(TokenKind::Identifier) || tok().text != "from") {
    errorExpectedAfter("'from \"header\"'", "the signature of an extern");
    return nullptr;
  }
  consume();
  if (!is(TokenKind::String)) {
    errorExpectedAfter("a header name in quotes", "'from'");
    return nullptr;
  }
  Token header = tok();
  consume();

  auto fn = std::make_unique<FnDecl>(SourceRange(begin, header.getEndLoc()));
  fn->annotations = std::move(annotations);
  fn->name = std::move(scratch.name);
  fn->params = std::move(scratch.params);
  fn->results = std::move(scratch.results);
  fn->returnsTuple = scratch.returnsTuple;
  fn->signatureRange = SourceRange(externLoc, sigEnd);
  fn->isExtern = true;
  fn->header = header.text.drop_front().drop_back().str();
  fn->headerRange = header.getRange();
  return fn;
}

bool Parser::parseFnSignature(FnDecl &fn, SourceLoc &end) {
  if (!parseIdent(fn.name, "function"))
    return false;
  if (!is(TokenKind::LParen))
    return errorExpectedAfter("'('", "function name");
  {
    Group group(*this, TokenKind::RParen);
    SourceLoc paramsEnd;
    if (!parseCommaList(TokenKind::RParen,
                        [&] { return parseTypedParam(fn.params); }) ||
        !group.close(paramsEnd))
      return false;
  }
  // The result may go on the next line: a signature has no statement to end.
  skipNewlines();
  return expect(TokenKind::Arrow, "the parameters") && parseResults(fn, end);
}

/// After an error in a signature, skips to its body and parses it for the
/// errors in it, unless a declaration starts first.
void Parser::recoverAtBody() {
  while (!is(TokenKind::Eof)) {
    if (is(TokenKind::LBrace)) {
      std::vector<StmtPtr> body;
      SourceLoc end;
      parseBlock(body, end);
      return;
    }
    bool declStart = is(TokenKind::KwFn) || is(TokenKind::KwExtern) ||
                     is(TokenKind::KwRule) || is(TokenKind::At);
    if (declStart && tok().startsLine)
      return;
    consume();
  }
}

bool Parser::parseTypedParam(std::vector<Param> &params) {
  Param p;
  if (!parseIdent(p.name, "parameter"))
    return false;
  if (!expect(TokenKind::Colon, "parameter name"))
    return false;
  p.type.emplace();
  if (!parseType(*p.type))
    return false;
  params.push_back(std::move(p));
  return true;
}

// results ::= type | '(' type { ',' type } ')'
bool Parser::parseResults(FnDecl &fn, SourceLoc &end) {
  if (!is(TokenKind::LParen)) {
    TypeExpr t;
    if (!parseType(t))
      return false;
    end = t.range.end;
    fn.results.push_back(std::move(t));
    return true;
  }
  fn.returnsTuple = true;
  Group group(*this, TokenKind::RParen);
  bool ok = parseCommaList(TokenKind::RParen, [&] {
    TypeExpr t;
    if (!parseType(t))
      return false;
    fn.results.push_back(std::move(t));
    return true;
  });
  if (!ok)
    return false;
  if (fn.results.empty() && is(TokenKind::RParen)) {
    diags.report(tok().loc, diag::err_expected_type);
    return false;
  }
  return group.close(end);
}

// untypedParams ::= '(' [ name { ',' name } ] ')'
bool Parser::parseUntypedParams(std::vector<Param> &params,
                                llvm::StringRef after) {
  if (!is(TokenKind::LParen))
    return errorExpectedAfter("'('", after);
  Group group(*this, TokenKind::RParen);
  bool ok = parseCommaList(TokenKind::RParen, [&] {
    Param p;
    if (!parseIdent(p.name, "parameter"))
      return false;
    params.push_back(std::move(p));
    return true;
  });
  SourceLoc end;
  return ok && group.close(end);
}

bool Parser::parseGradBlock(GradBlock &out) {
  SourceLoc begin = consume(); // 'grad'
  if (!parseUntypedParams(out.params, "'grad'")) {
    recoverAtBody();
    return false;
  }
  SourceLoc end;
  if (!parseBlock(out.body, end))
    return false;
  out.range = SourceRange(begin, end);
  return true;
}

// ruleDecl ::= 'rule' name '(' [ name { ',' name } ] ')' block
DeclPtr Parser::parseRule(std::vector<Annotation> annotations,
                          SourceLoc begin) {
  consume(); // 'rule'
  Ident name;
  std::vector<Param> params;
  if (!parseIdent(name, "rule") || !parseUntypedParams(params, "rule name")) {
    recoverAtBody();
    return nullptr;
  }
  std::vector<StmtPtr> body;
  SourceLoc end;
  if (!parseBlock(body, end))
    return nullptr;
  auto rule = std::make_unique<RuleDecl>(SourceRange(begin, end));
  rule->annotations = std::move(annotations);
  rule->name = std::move(name);
  rule->params = std::move(params);
  rule->body = std::move(body);
  return rule;
}

/// True at a `fn` or `rule` that starts a line, or at annotations that
/// start a line and precede one: a declaration, not a statement.
bool Parser::startsDecl() {
  if (!tok().startsLine)
    return false;
  size_t i = pos;
  // Skip `@name(...)` groups and newlines; parentheses balance, so an
  // annotation cannot hide a `fn` in its arguments.
  while (tokenAt(i).is(TokenKind::At) || tokenAt(i).is(TokenKind::Newline)) {
    i += tokenAt(i).is(TokenKind::At) ? 2 : 1;
    if (tokenAt(i).isNot(TokenKind::LParen))
      continue;
    for (int parens = 0; tokenAt(i).isNot(TokenKind::Eof); ++i) {
      parens += tokenAt(i).is(TokenKind::LParen);
      parens -= tokenAt(i).is(TokenKind::RParen);
      if (parens == 0) {
        ++i;
        break;
      }
    }
  }
  return tokenAt(i).is(TokenKind::KwFn) || tokenAt(i).is(TokenKind::KwExtern) ||
         tokenAt(i).is(TokenKind::KwRule);
}

// block ::= [newline] '{' { newline | stmt ( newline | &'}' ) } '}'
//
// A block that reaches the end of the file, or a declaration at the start
// of a line, misses its '}': the error names the '{' it should close, and
// the declaration is left for the module loop.
bool Parser::parseBlock(std::vector<StmtPtr> &body, SourceLoc &end) {
  skipNewlines();
  if (!is(TokenKind::LBrace))
    return errorExpected("'{'");
  Token open = tok();
  consume();
  while (true) {
    skipNewlines();
    if (is(TokenKind::RBrace)) {
      end = tok().getEndLoc();
      consume();
      return true;
    }
    if (is(TokenKind::Eof) || startsDecl()) {
      diags.report(is(TokenKind::Eof) ? tok().loc : expectedLoc(),
                   diag::err_expected_closing)
          << "}"
          << "{";
      diags.report(open.loc, diag::note_opening_here) << "{";
      return false;
    }
    size_t start = pos;
    StmtPtr stmt = parseStmt();
    if (!stmt) {
      skipToStmtEnd(start);
      continue;
    }
    body.push_back(std::move(stmt));
    if (atLineEnd())
      continue;
    if (!is(TokenKind::Error))
      diags.report(tok().loc, diag::err_expected_newline) << "statement";
    skipToStmtEnd(start);
  }
}

/// Skips to the end of the line or to a '}', consuming at least one token
/// (but never a '}' or the end of the file).
void Parser::skipToStmtEnd(size_t startPos) {
  if (pos == startPos && !atLineEnd())
    consume();
  while (!is(TokenKind::Eof) && !is(TokenKind::RBrace)) {
    if (is(TokenKind::Newline)) {
      consume();
      return;
    }
    if (tok().startsLine)
      return;
    consume();
  }
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// type ::= dtype [ '[' dim { ',' dim } ']' ]
// dtype ::= 'f32' | 'f64' | 'i32' | 'bool'
bool Parser::parseType(TypeExpr &out) {
  if (!isNameToken()) {
    if (!is(TokenKind::Error))
      diags.report(expectedLoc(), diag::err_expected_type);
    return false;
  }
  std::optional<DType> dtype = parseDType(tok().text);
  if (!dtype) {
    diags.report(tok().loc, diag::err_unknown_dtype)
        << tok().text << tok().getRange();
    return false;
  }
  out.dtype = *dtype;
  out.range = tok().getRange();
  consume();
  if (!is(TokenKind::LSquare))
    return true;
  Group group(*this, TokenKind::RSquare);
  do {
    if (!parseDim(out))
      return false;
  } while (consumeIf(TokenKind::Comma));
  return group.close(out.range.end);
}

// dim ::= integer | name
bool Parser::parseDim(TypeExpr &type) {
  DimExpr d;
  d.range = tok().getRange();
  if (is(TokenKind::Integer)) {
    int64_t size = 0;
    tok().text.getAsInteger(10, size); // the lexer checked the range
    d.dim = Dim::known(size);
  } else if (isNameToken()) {
    d.dim = Dim::named(tok().text);
  } else {
    if (!is(TokenKind::Error))
      diags.report(expectedLoc(), diag::err_expected_dim);
    return false;
  }
  consume();
  type.dims.push_back(std::move(d));
  return true;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

// stmt ::= { annotation [newline] } letStmt | returnStmt
StmtPtr Parser::parseStmt() {
  std::vector<Annotation> annotations;
  if (!parseAnnotations(annotations))
    return nullptr;
  if (is(TokenKind::KwLet))
    return parseLet(std::move(annotations));
  if (!annotations.empty()) {
    if (!is(TokenKind::Error))
      diags.report(tok().loc, diag::err_annotation_target)
          << getTokenSpelling(tok().kind);
    return nullptr;
  }
  if (is(TokenKind::KwReturn))
    return parseReturn();
  if (!is(TokenKind::Error))
    diags.report(tok().loc, diag::err_expected_stmt)
        << getTokenSpelling(tok().kind);
  return nullptr;
}

// letStmt ::= 'let' ( name | '(' name { ',' name } ')' ) [ ':' type ]
//             '=' expr
StmtPtr Parser::parseLet(std::vector<Annotation> annotations) {
  SourceLoc begin = consume(); // 'let'
  std::vector<Ident> names;
  bool destructures = is(TokenKind::LParen);
  if (destructures) {
    Group group(*this, TokenKind::RParen);
    bool ok = parseCommaList(TokenKind::RParen, [&] {
      Ident n;
      if (!parseIdent(n, "variable"))
        return false;
      names.push_back(std::move(n));
      return true;
    });
    if (ok && names.empty()) {
      errorExpectedName("variable");
      return nullptr;
    }
    SourceLoc end;
    if (!ok || !group.close(end))
      return nullptr;
  } else {
    Ident n;
    if (!parseIdent(n, "variable"))
      return nullptr;
    names.push_back(std::move(n));
  }
  std::optional<TypeExpr> type;
  if (is(TokenKind::Colon)) {
    if (destructures) {
      diags.report(tok().loc, diag::err_let_destructure_type);
      return nullptr;
    }
    consume();
    type.emplace();
    if (!parseType(*type))
      return nullptr;
  }
  if (!expect(TokenKind::Equal, type ? "the type" : "the name"))
    return nullptr;
  ParsedExpr value = parseExpr();
  if (!value)
    return nullptr;
  auto let = std::make_unique<LetStmt>(SourceRange(begin, value.range.end));
  let->annotations = std::move(annotations);
  let->names = std::move(names);
  let->destructures = destructures;
  let->declaredType = std::move(type);
  let->value = std::move(value.expr);
  return let;
}

// returnStmt ::= 'return' expr
StmtPtr Parser::parseReturn() {
  SourceLoc begin = consume(); // 'return'
  ParsedExpr value = parseExpr();
  if (!value)
    return nullptr;
  return std::make_unique<ReturnStmt>(SourceRange(begin, value.range.end),
                                      std::move(value.expr));
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

static std::optional<BinaryOp> getComparisonOp(TokenKind kind) {
  switch (kind) {
  case TokenKind::Less:
    return BinaryOp::Lt;
  case TokenKind::LessEqual:
    return BinaryOp::Le;
  case TokenKind::Greater:
    return BinaryOp::Gt;
  case TokenKind::GreaterEqual:
    return BinaryOp::Ge;
  case TokenKind::EqualEqual:
    return BinaryOp::Eq;
  case TokenKind::ExclaimEqual:
    return BinaryOp::Ne;
  default:
    return std::nullopt;
  }
}

/// Records the height of a new node; a tree taller than kMaxNesting is an
/// error, so that later phases may recurse over it.
ParsedExpr Parser::finish(ExprPtr expr, unsigned height) {
  ParsedExpr result;
  result.range = expr->getRange();
  result.height = height;
  if (height > kMaxNesting) {
    diags.report(expr->getLoc(), diag::err_nesting_too_deep) << kMaxNesting;
    return ParsedExpr();
  }
  result.expr = std::move(expr);
  return result;
}

ParsedExpr Parser::makeBinary(BinaryOp op, SourceLoc opLoc, ParsedExpr lhs,
                              ParsedExpr rhs) {
  SourceRange range(lhs.range.begin, rhs.range.end);
  unsigned height = std::max(lhs.height, rhs.height) + 1;
  return finish(std::make_unique<BinaryExpr>(
                    range, op, opLoc, std::move(lhs.expr), std::move(rhs.expr)),
                height);
}

// expr ::= additive [ compareOp additive ]
// compareOp ::= '<' | '<=' | '>' | '>=' | '==' | '!='
//
// Comparisons do not associate: `a < b < c` is an error.
ParsedExpr Parser::parseExpr() {
  ParsedExpr lhs = parseAdditive();
  if (!lhs)
    return lhs;
  std::optional<BinaryOp> op = getComparisonOp(tok().kind);
  if (!op)
    return lhs;
  SourceLoc opLoc = consume();
  ParsedExpr rhs = parseAdditive();
  if (!rhs)
    return rhs;
  if (getComparisonOp(tok().kind)) {
    diags.report(tok().loc, diag::err_chained_comparison)
        << SourceRange(lhs.range.begin, tok().getEndLoc());
    return ParsedExpr();
  }
  return makeBinary(*op, opLoc, std::move(lhs), std::move(rhs));
}

// additive ::= multiplicative { ( '+' | '-' ) multiplicative }
ParsedExpr Parser::parseAdditive() {
  ParsedExpr lhs = parseMultiplicative();
  while (lhs && (is(TokenKind::Plus) || is(TokenKind::Minus))) {
    BinaryOp op = is(TokenKind::Plus) ? BinaryOp::Add : BinaryOp::Sub;
    SourceLoc opLoc = consume();
    ParsedExpr rhs = parseMultiplicative();
    if (!rhs)
      return rhs;
    lhs = makeBinary(op, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

// multiplicative ::= matmul { ( '*' | '/' ) matmul }
ParsedExpr Parser::parseMultiplicative() {
  ParsedExpr lhs = parseMatMul();
  while (lhs && (is(TokenKind::Star) || is(TokenKind::Slash))) {
    BinaryOp op = is(TokenKind::Star) ? BinaryOp::Mul : BinaryOp::Div;
    SourceLoc opLoc = consume();
    ParsedExpr rhs = parseMatMul();
    if (!rhs)
      return rhs;
    lhs = makeBinary(op, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

// matmul ::= unary { '@' unary }
ParsedExpr Parser::parseMatMul() {
  ParsedExpr lhs = parseUnary();
  while (lhs && is(TokenKind::At)) {
    SourceLoc opLoc = consume();
    ParsedExpr rhs = parseUnary();
    if (!rhs)
      return rhs;
    lhs = makeBinary(BinaryOp::MatMul, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

// unary ::= '-' unary | postfix
//
// A '-' written directly before a number literal is folded into it
// (`-1` is the NumberExpr -1), so that attributes such as `axis = -1` are
// plain literals for Sema.
ParsedExpr Parser::parseUnary() {
  if (!is(TokenKind::Minus))
    return parsePostfix();
  NestingGuard guard(*this);
  if (!guard.ok())
    return ParsedExpr();
  SourceLoc opLoc = consume();
  SourceLoc operandLoc = tok().loc;
  ParsedExpr operand = parseUnary();
  if (!operand)
    return operand;
  SourceRange range(opLoc, operand.range.end);
  auto *number = llvm::dyn_cast<NumberExpr>(operand.expr.get());
  bool bareLiteral = number && number->value >= 0 &&
                     operand.range.begin == operandLoc &&
                     number->getRange().begin == operandLoc &&
                     number->getRange().end == operand.range.end;
  if (bareLiteral)
    return finish(
        std::make_unique<NumberExpr>(range, -number->value, number->isInteger),
        operand.height);
  return finish(
      std::make_unique<UnaryExpr>(range, opLoc, std::move(operand.expr)),
      operand.height + 1);
}

// postfix ::= primary { '(' callArgs ')' | '[' index ']' }
ParsedExpr Parser::parsePostfix() {
  ParsedExpr e = parsePrimary();
  while (e) {
    if (is(TokenKind::LParen))
      e = parseCall(std::move(e));
    else if (is(TokenKind::LSquare))
      e = parseIndex(std::move(e));
    else
      break;
  }
  return e;
}

// callArgs ::= [ callArg { ',' callArg } ]
// callArg  ::= name '=' expr | expr
//
// Positional arguments come first.
ParsedExpr Parser::parseCall(ParsedExpr callee) {
  auto *name = llvm::dyn_cast<NameExpr>(callee.expr.get());
  if (!name || callee.range.begin != name->getRange().begin) {
    diags.report(tok().loc, diag::err_call_non_name) << callee.range;
    return ParsedExpr();
  }
  NestingGuard guard(*this);
  if (!guard.ok())
    return ParsedExpr();
  Ident calleeName{name->name, name->getRange()};
  std::vector<ExprPtr> args;
  std::vector<KeywordArg> keywordArgs;
  unsigned height = 1;
  Group group(*this, TokenKind::RParen);
  bool ok = parseCommaList(TokenKind::RParen, [&] {
    bool isKeyword = isNameToken() && peekAhead(1).is(TokenKind::Equal);
    if (!isKeyword) {
      SourceLoc argLoc = tok().loc;
      ParsedExpr arg = parseExpr();
      if (!arg)
        return false;
      if (!keywordArgs.empty()) {
        const KeywordArg &kw = keywordArgs.back();
        diags.report(argLoc, diag::err_positional_after_keyword) << arg.range;
        diags.report(kw.name.range.begin, diag::note_keyword_arg_here)
            << kw.name.name;
      }
      height = std::max(height, arg.height + 1);
      args.push_back(std::move(arg.expr));
      return true;
    }
    KeywordArg kw;
    parseIdent(kw.name, "argument");
    consume(); // '='
    ParsedExpr value = parseExpr();
    if (!value)
      return false;
    for (const KeywordArg &prev : keywordArgs) {
      if (prev.name.name != kw.name.name)
        continue;
      diags.report(kw.name.range.begin, diag::err_duplicate_keyword_arg)
          << kw.name.name << kw.name.range;
      diags.report(prev.name.range.begin, diag::note_previous_keyword_arg)
          << prev.name.name;
      break;
    }
    height = std::max(height, value.height + 1);
    kw.value = std::move(value.expr);
    keywordArgs.push_back(std::move(kw));
    return true;
  });
  SourceLoc end;
  if (!ok || !group.close(end))
    return ParsedExpr();
  auto call = std::make_unique<CallExpr>(SourceRange(callee.range.begin, end),
                                         std::move(calleeName));
  call->args = std::move(args);
  call->keywordArgs = std::move(keywordArgs);
  return finish(std::move(call), height);
}

// index ::= [ '-' ] integer | expr | slice
//
// An integer literal indexes a list, a tuple or a tensor's first axis; any
// other expression (`xs[t]`, `xs[t + 1]`) indexes a tensor's first axis
// and Sema checks that it is an i32 scalar.
ParsedExpr Parser::parseIndex(ParsedExpr base) {
  Group group(*this, TokenKind::RSquare);
  if (isSliceSubscript()) {
    SourceLoc begin = base.range.begin;
    unsigned height = base.height + 1;
    auto e = std::make_unique<SliceExpr>(SourceRange(begin, begin),
                                         std::move(base.expr));
    SourceLoc end;
    if (!parseSliceAxes(*e) || !group.close(end))
      return ParsedExpr();
    auto slice = std::make_unique<SliceExpr>(SourceRange(begin, end),
                                             std::move(e->base));
    slice->axes = std::move(e->axes);
    return finish(std::move(slice), height);
  }
  SourceLoc indexBegin = tok().loc;
  bool literal = is(TokenKind::Integer) ||
                 (is(TokenKind::Minus) && peekAhead(1).is(TokenKind::Integer));
  if (literal &&
      !peekAhead(is(TokenKind::Minus) ? 2 : 1).is(TokenKind::RSquare))
    literal = false;
  if (!literal) {
    ParsedExpr index = parseExpr();
    if (!index)
      return index;
    SourceRange indexRange = index.range;
    SourceLoc end;
    if (!group.close(end))
      return ParsedExpr();
    unsigned height = std::max(base.height, index.height) + 1;
    auto e = std::make_unique<IndexExpr>(SourceRange(base.range.begin, end),
                                         std::move(base.expr), 0, indexRange);
    e->indexExpr = std::move(index.expr);
    return finish(std::move(e), height);
  }
  bool negative = consumeIf(TokenKind::Minus);
  int64_t value = 0;
  tok().text.getAsInteger(10, value); // the lexer checked the range
  SourceRange indexRange(indexBegin, tok().getEndLoc());
  consume();
  SourceLoc end;
  if (!group.close(end))
    return ParsedExpr();
  unsigned height = base.height + 1;
  return finish(std::make_unique<IndexExpr>(
                    SourceRange(base.range.begin, end), std::move(base.expr),
                    negative ? -value : value, indexRange),
                height);
}

/// Whether the subscript that starts at the current token is a slice:
/// its first entry, a bound at most, is followed by ':' or ','.
bool Parser::isSliceSubscript() {
  unsigned n = 0;
  if (peekAhead(n).is(TokenKind::Minus))
    ++n;
  if (peekAhead(n).is(TokenKind::Integer) ||
      peekAhead(n).is(TokenKind::Identifier))
    ++n;
  return peekAhead(n).is(TokenKind::Colon) || peekAhead(n).is(TokenKind::Comma);
}

// slice      ::= sliceAxis { ',' sliceAxis }
// sliceAxis  ::= [ sliceBound ] ':' [ sliceBound ]
// sliceBound ::= [ '-' ] integer | name
bool Parser::parseSliceAxes(SliceExpr &slice) {
  do {
    SliceAxis axis;
    axis.range = SourceRange(tok().loc, tok().loc);
    if (!is(TokenKind::Colon) && !parseSliceBound(axis.lo, ""))
      return false;
    if (!expect(TokenKind::Colon, "the start of a slice"))
      return false;
    axis.range.end = prevEnd;
    if (!is(TokenKind::Comma) && !is(TokenKind::RSquare)) {
      if (!parseSliceBound(axis.hi, "':'"))
        return false;
      axis.range.end = prevEnd;
    }
    slice.axes.push_back(axis);
  } while (consumeIf(TokenKind::Comma));
  return true;
}

bool Parser::parseSliceBound(SliceBound &bound, llvm::StringRef after) {
  SourceLoc begin = tok().loc;
  bool negative = is(TokenKind::Minus) && peekAhead(1).is(TokenKind::Integer);
  if (negative)
    consume();
  if (is(TokenKind::Integer)) {
    tok().text.getAsInteger(10, bound.value); // the lexer checked the range
    if (negative)
      bound.value = -bound.value;
  } else if (isNameToken()) {
    bound.name = tok().text.str();
  } else {
    return after.empty()
               ? errorExpected("an integer or a size name")
               : errorExpectedAfter("an integer or a size name", after);
  }
  bound.present = true;
  bound.range = SourceRange(begin, tok().getEndLoc());
  consume();
  return true;
}

// primary ::= integer | float | 'true' | 'false' | name
//           | '(' expr ')' | '(' expr ',' expr { ',' expr } ')'
//           | '[' [ expr { ',' expr } ] ']'
ParsedExpr Parser::parsePrimary() {
  const Token &t = tok();
  switch (t.kind) {
  case TokenKind::Integer:
  case TokenKind::Float: {
    std::string spelling = t.text.str();
    double value = std::strtod(spelling.c_str(), nullptr);
    bool isInteger = t.is(TokenKind::Integer);
    SourceRange range = t.getRange();
    consume();
    return finish(std::make_unique<NumberExpr>(range, value, isInteger), 1);
  }
  case TokenKind::KwTrue:
  case TokenKind::KwFalse: {
    bool value = t.is(TokenKind::KwTrue);
    SourceRange range = t.getRange();
    consume();
    return finish(std::make_unique<BoolExpr>(range, value), 1);
  }
  case TokenKind::Identifier: {
    SourceRange range = t.getRange();
    std::string name = t.text.str();
    consume();
    return finish(std::make_unique<NameExpr>(range, std::move(name)), 1);
  }
  case TokenKind::LParen:
    return parseParenExpr();
  case TokenKind::LSquare:
    return parseListExpr();
  case TokenKind::KwFor:
    return parseFor();
  case TokenKind::KwIf:
    return parseIf();
  case TokenKind::KwWhile:
    return parseWhile();
  default:
    if (!is(TokenKind::Error))
      diags.report(expectedLoc(), diag::err_expected_expr);
    return ParsedExpr();
  }
}

// '(' expr ')' keeps the inner node (with the parentheses in its range for
// its parents); '(' expr ',' expr ... ')' is a TupleExpr.
ParsedExpr Parser::parseParenExpr() {
  NestingGuard guard(*this);
  if (!guard.ok())
    return ParsedExpr();
  Group group(*this, TokenKind::RParen);
  SourceLoc begin = group.openLoc();
  ParsedExpr first = parseExpr();
  if (!first)
    return first;
  if (!is(TokenKind::Comma)) {
    SourceLoc end;
    if (!group.close(end))
      return ParsedExpr();
    first.range = SourceRange(begin, end);
    return first;
  }
  std::vector<ExprPtr> elements;
  unsigned height = first.height + 1;
  elements.push_back(std::move(first.expr));
  while (consumeIf(TokenKind::Comma)) {
    ParsedExpr e = parseExpr();
    if (!e)
      return e;
    height = std::max(height, e.height + 1);
    elements.push_back(std::move(e.expr));
  }
  SourceLoc end;
  if (!group.close(end))
    return ParsedExpr();
  auto tuple = std::make_unique<TupleExpr>(SourceRange(begin, end));
  tuple->elements = std::move(elements);
  return finish(std::move(tuple), height);
}

// '[' [ expr { ',' expr } ] ']'
ParsedExpr Parser::parseListExpr() {
  NestingGuard guard(*this);
  if (!guard.ok())
    return ParsedExpr();
  Group group(*this, TokenKind::RSquare);
  SourceLoc begin = group.openLoc();
  std::vector<ExprPtr> elements;
  unsigned height = 1;
  bool ok = parseCommaList(TokenKind::RSquare, [&] {
    ParsedExpr e = parseExpr();
    if (!e)
      return false;
    height = std::max(height, e.height + 1);
    elements.push_back(std::move(e.expr));
    return true;
  });
  SourceLoc end;
  if (!ok || !group.close(end))
    return ParsedExpr();
  auto list = std::make_unique<ListExpr>(SourceRange(begin, end));
  list->elements = std::move(elements);
  return finish(std::move(list), height);
}

// forExpr ::= 'for' name 'in' integer '..' ( integer | name )
//             [ 'carry' '(' name '=' expr { ',' name '=' expr } ')' ]
//             loopBody
//
// `in` and `carry` are words only here: elsewhere they remain names.
ParsedExpr Parser::parseFor() {
  NestingGuard guard(*this);
  if (!guard.ok())
    return ParsedExpr();
  SourceLoc begin = consume(); // 'for'
  auto loop = std::make_unique<ForExpr>(SourceRange(begin, begin));
  if (!parseIdent(loop->index, "loop index")) {
    skipBrokenLoop();
    return ParsedExpr();
  }
  if (!isContextualKeyword("in")) {
    errorExpectedAfter("'in'", "the loop index");
    skipBrokenLoop();
    return ParsedExpr();
  }
  consume();
  unsigned height = 1;
  SourceLoc end;
  if (!parseLoopRange(*loop) || !parseLoopCarries(*loop, height) ||
      !parseLoopBody(*loop, end, height)) {
    skipBrokenLoop();
    return ParsedExpr();
  }
  auto *raw = loop.get();
  ExprPtr expr = std::move(loop);
  // The range runs from 'for' to the body's '}'.
  auto ranged = std::make_unique<ForExpr>(SourceRange(begin, end));
  std::swap(ranged->index, raw->index);
  ranged->start = raw->start;
  ranged->startRange = raw->startRange;
  ranged->end = raw->end;
  ranged->endRange = raw->endRange;
  ranged->carries = std::move(raw->carries);
  ranged->body = std::move(raw->body);
  ranged->value = std::move(raw->value);
  return finish(std::move(ranged), height);
}

// whileExpr ::= 'while' expr 'max' ( integer | name )
//               'carry' '(' name '=' expr { ',' name '=' expr } ')'
//               loopBody
//
// A bounded while: while the bool scalar `expr` of the carries holds, and
// at most N times, the body computes new carries. The parser writes it as
// the loop `for _ in 0..N carry (...) { if expr { body } else { carries } }`
// (ForExpr::isWhile, IfExpr::whileBody): once the condition fails, the
// carries no longer change, so the condition stays false and the remaining
// steps pass them through. `max` is a word only here.
ParsedExpr Parser::parseWhile() {
  NestingGuard guard(*this);
  if (!guard.ok())
    return ParsedExpr();
  SourceLoc begin = consume(); // 'while'
  auto fail = [&] {
    skipBrokenLoop();
    return ParsedExpr();
  };
  ParsedExpr cond = parseExpr();
  if (!cond)
    return fail();
  unsigned height = cond.height + 2;
  if (!isContextualKeyword("max")) {
    errorExpectedAfter("'max'", "the condition of 'while'");
    return fail();
  }
  consume();
  ForExpr bound(SourceRange(begin, begin));
  bound.endRange = tok().getRange();
  if (is(TokenKind::Integer)) {
    int64_t size = 0;
    tok().text.getAsInteger(10, size); // the lexer checked the range
    bound.end = Dim::known(size);
  } else if (isNameToken()) {
    bound.end = Dim::named(tok().text);
  } else {
    errorExpectedAfter("an integer or a size name", "'max'");
    return fail();
  }
  consume();
  if (!isContextualKeyword("carry")) {
    errorExpectedAfter("'carry'", "the bound of 'while'");
    return fail();
  }
  auto body = std::make_unique<IfExpr>(SourceRange(begin, begin));
  SourceLoc end;
  if (!parseLoopCarries(bound, height) ||
      !parseBlock(body->thenBranch.body, body->thenBranch.value, "a loop body",
                  end, height))
    return fail();

  auto ifExpr = std::make_unique<IfExpr>(SourceRange(begin, end));
  ifExpr->whileBody = true;
  ifExpr->cond = std::move(cond.expr);
  ifExpr->thenBranch = std::move(body->thenBranch);
  ifExpr->elseLoc = begin;
  // The else branch: the carries as they are.
  std::vector<ExprPtr> names;
  for (const LoopCarry &c : bound.carries)
    names.push_back(std::make_unique<NameExpr>(c.name.range, c.name.name));
  if (names.size() == 1) {
    ifExpr->elseBranch.value = std::move(names.front());
  } else {
    auto tuple = std::make_unique<TupleExpr>(SourceRange(begin, begin));
    tuple->elements = std::move(names);
    ifExpr->elseBranch.value = std::move(tuple);
  }

  auto loop = std::make_unique<ForExpr>(SourceRange(begin, end));
  loop->isWhile = true;
  loop->index = Ident{"step", SourceRange(begin, begin)};
  loop->start = 0;
  loop->startRange = bound.endRange;
  loop->end = bound.end;
  loop->endRange = bound.endRange;
  loop->carries = std::move(bound.carries);
  loop->value = std::move(ifExpr);
  return finish(std::move(loop), height);
}

// range ::= integer '..' ( integer | name )
bool Parser::parseLoopRange(ForExpr &loop) {
  if (!is(TokenKind::Integer))
    return errorExpectedAfter("an integer", "'in'");
  tok().text.getAsInteger(10, loop.start); // the lexer checked the range
  loop.startRange = tok().getRange();
  consume();
  if (!expect(TokenKind::DotDot, "the start of the range"))
    return false;
  loop.endRange = tok().getRange();
  if (is(TokenKind::Integer)) {
    int64_t size = 0;
    tok().text.getAsInteger(10, size);
    loop.end = Dim::known(size);
  } else if (isNameToken()) {
    loop.end = Dim::named(tok().text);
  } else {
    return errorExpectedAfter("an integer or a size name", "'..'");
  }
  consume();
  return true;
}

// carries ::= 'carry' '(' name '=' expr { ',' name '=' expr } ')'
bool Parser::parseLoopCarries(ForExpr &loop, unsigned &height) {
  if (!isContextualKeyword("carry"))
    return true;
  consume();
  if (!is(TokenKind::LParen))
    return errorExpectedAfter("'('", "'carry'");
  Group group(*this, TokenKind::RParen);
  bool ok = parseCommaList(TokenKind::RParen, [&] {
    LoopCarry carry;
    if (!parseIdent(carry.name, "carry") ||
        !expect(TokenKind::Equal, "the carry's name"))
      return false;
    ParsedExpr init = parseExpr();
    if (!init)
      return false;
    height = std::max(height, init.height + 1);
    carry.init = std::move(init.expr);
    loop.carries.push_back(std::move(carry));
    return true;
  });
  SourceLoc end;
  return ok && group.close(end);
}

// block ::= [newline] '{' { newline | stmt newline } expr [newline] '}'
//
// A loop body or a branch of `if` (`what` names it): its statements are
// `let`s; its last line is its value. Inside the braces newlines separate
// statements even when the loop itself sits in parentheses.
bool Parser::parseBlock(std::vector<StmtPtr> &body, ExprPtr &value,
                        llvm::StringRef what, SourceLoc &end,
                        unsigned &height) {
  unsigned outerGroups = groupDepth;
  groupDepth = 0;
  auto restore = llvm::make_scope_exit([&] {
    groupDepth = outerGroups;
    skipIgnoredNewlines();
  });
  skipNewlines();
  if (!is(TokenKind::LBrace))
    return errorExpected("'{'");
  Token open = tok();
  consume();
  // After an error inside the braces: skip to the '}' that closes them.
  auto fail = [&] {
    for (int depth = 0; !is(TokenKind::Eof) && !startsDecl(); consume()) {
      if (is(TokenKind::RBrace) && depth-- == 0) {
        consume();
        break;
      }
      depth += is(TokenKind::LBrace);
    }
    return false;
  };
  while (true) {
    skipNewlines();
    if (is(TokenKind::RBrace) || is(TokenKind::Eof) || startsDecl()) {
      if (!value) {
        errorExpected("the value of " + what.str());
        return fail();
      }
      if (!is(TokenKind::RBrace)) {
        diags.report(expectedLoc(), diag::err_expected_closing) << "}"
                                                                << "{";
        diags.report(open.loc, diag::note_opening_here) << "{";
        return false;
      }
      end = tok().getEndLoc();
      consume();
      return true;
    }
    if (value) {
      diags.report(tok().loc, diag::err_loop_value_not_last) << what;
      return fail();
    }
    if (is(TokenKind::KwLet) || is(TokenKind::At)) {
      size_t start = pos;
      StmtPtr stmt = parseStmt();
      if (!stmt) {
        skipToStmtEnd(start);
        continue;
      }
      body.push_back(std::move(stmt));
    } else {
      ParsedExpr last = parseExpr();
      if (!last)
        return fail();
      height = std::max(height, last.height + 1);
      value = std::move(last.expr);
    }
    if (!atLineEnd()) {
      if (!is(TokenKind::Error))
        diags.report(tok().loc, diag::err_expected_newline) << "statement";
      return fail();
    }
  }
}

// ifExpr ::= 'if' expr block 'else' ( block | ifExpr )
//
// `else if` makes the else branch a block whose value is the next `if`.
ParsedExpr Parser::parseIf() {
  NestingGuard guard(*this);
  if (!guard.ok())
    return ParsedExpr();
  SourceLoc begin = consume(); // 'if'
  auto e = std::make_unique<IfExpr>(SourceRange(begin, begin));
  unsigned height = 1;
  SourceLoc end;
  ParsedExpr cond = parseExpr();
  if (!cond) {
    skipBrokenLoop();
    return ParsedExpr();
  }
  height = std::max(height, cond.height + 1);
  e->cond = std::move(cond.expr);
  if (!parseBlock(e->thenBranch.body, e->thenBranch.value, "a branch", end,
                  height)) {
    skipBrokenLoop();
    return ParsedExpr();
  }
  if (!is(TokenKind::KwElse)) {
    errorExpectedAfter("'else'", "the first branch of 'if'");
    return ParsedExpr();
  }
  e->elseLoc = consume();
  if (is(TokenKind::KwIf)) {
    ParsedExpr next = parseIf();
    if (!next)
      return ParsedExpr();
    height = std::max(height, next.height + 1);
    end = next.expr->getRange().end;
    e->elseBranch.value = std::move(next.expr);
  } else if (!parseBlock(e->elseBranch.body, e->elseBranch.value, "a branch",
                         end, height)) {
    skipBrokenLoop();
    return ParsedExpr();
  }
  // The range runs from 'if' to the last '}'.
  auto ranged = std::make_unique<IfExpr>(SourceRange(begin, end));
  ranged->cond = std::move(e->cond);
  ranged->thenBranch = std::move(e->thenBranch);
  ranged->elseBranch = std::move(e->elseBranch);
  ranged->elseLoc = e->elseLoc;
  return finish(std::move(ranged), height);
}

std::unique_ptr<Module> gradc::parseModule(const SourceManager &sm,
                                           SourceLoc bufferStart,
                                           DiagnosticEngine &diags) {
  return Parser(sm, bufferStart, diags).parseModule();
}
