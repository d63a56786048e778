//===- Parser.h - Parsing .grad files ---------------------------*- C++ -*-===//
//
// A recursive-descent parser over the tokens of Lexer.h. It reports syntax
// errors through the DiagnosticEngine and recovers at the next line end or
// '}', so that one run shows several errors. It never fails to return a
// module: on errors the module holds what could be parsed.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_PARSE_PARSER_H
#define GRADC_PARSE_PARSER_H

#include "gradc/AST/AST.h"
#include "gradc/Basic/Diagnostic.h"

#include <memory>

namespace gradc {

/// Parses the buffer that starts at `bufferStart`.
std::unique_ptr<ast::Module> parseModule(const SourceManager &sm,
                                         SourceLoc bufferStart,
                                         DiagnosticEngine &diags);

} // namespace gradc

#endif // GRADC_PARSE_PARSER_H
