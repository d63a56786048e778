//===- Literal.h - Values written on the command line -----------*- C++ -*-===//
//
// `gradc run --call 'f([1, 2], true)'` and `gradc-opt --call` name a
// function and give its arguments as literals: numbers, `true`/`false` and
// nested bracket lists. This file parses such a call, turns a literal into
// a tensor of a parameter's element type (the shape comes from the
// nesting), and prints tensors back in the same notation, which is the
// output format that SPEC.md fixes for `gradc run`.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_IR_LITERAL_H
#define GRADC_IR_LITERAL_H

#include "gradc/IR/Interpreter.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <string>
#include <vector>

namespace gradc::ir {

/// A value written in a `--call`: a number, true/false, or a nested list.
struct Literal {
  enum class Kind { Number, Bool, List };
  Kind kind = Kind::Number;
  /// For a number: its spelling (`-1.5`, `2e-3`), kept so that it can be
  /// converted to the parameter's element type without double rounding.
  std::string text;
  /// For a number: whether it was written as an integer (no `.`, no
  /// exponent), which an i32 parameter requires.
  bool isInteger = false;
  /// For a number: whether it is `inf`, `-inf` or `nan`, which only a
  /// floating-point parameter accepts (a finite spelling beyond the
  /// type's range is an error, not an infinity).
  bool isNonFinite = false;
  /// For a bool: its value.
  bool boolValue = false;
  /// For a list: its elements.
  std::vector<Literal> elements;
  /// 0-based column of the literal's first character in the call text.
  size_t column = 0;

  bool isNumber() const { return kind == Kind::Number; }
  bool isBool() const { return kind == Kind::Bool; }
  bool isList() const { return kind == Kind::List; }
};

/// Parses `name(lit, lit, ...)`. On error returns false with a message and
/// the 0-based column.
///
///   call    ::= name '(' (literal (',' literal)*)? ')'
///   literal ::= number | 'true' | 'false' | '[' (literal (',' literal)*)? ']'
///   number  ::= '-'? digit+ ('.' digit+)? ([eE] [+-]? digit+)?
///             | '-'? 'inf' | 'nan'
///   name    ::= [A-Za-z_] [A-Za-z0-9_.]*
///
/// Whitespace may appear between any two tokens.
bool parseCallLiteral(llvm::StringRef text, std::string &callee,
                      std::vector<Literal> &args, std::string &error,
                      size_t &errorColumn);

/// Makes a tensor of element type `dtype` from a literal; the shape comes
/// from the nesting (ragged lists, bools for floats etc. are errors). When
/// `errorColumn` is given it receives the column of the offending part.
bool literalToTensor(const Literal &lit, DType dtype, Tensor &out,
                     std::string &error, size_t *errorColumn = nullptr);

/// Prints a tensor as SPEC.md says: nested bracket lists `[[1, 2], [1, 2]]`,
/// a scalar bare; f32 values so they round-trip (formatFloat), f64 likewise
/// (formatDouble), ints as ints, bools true/false; integral floats below
/// 10^15 print as integers (`[3, 4]`, `1000`), `-0` keeps its sign, and
/// infinities and NaN print as `inf`, `-inf` and `nan`.
void printTensor(const Tensor &t, llvm::raw_ostream &os);

/// The same, into a string.
std::string tensorToString(const Tensor &t);

} // namespace gradc::ir

#endif // GRADC_IR_LITERAL_H
