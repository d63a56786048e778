//===- Diagnostic.cpp - Reporting errors, warnings and notes --------------===//
//
// Formats diagnostics from Diagnostics.def and hands them to a consumer:
// the clang-style text printer, or the -verify checker.
//
//===----------------------------------------------------------------------===//

#include "gradc/Basic/Diagnostic.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace gradc;

namespace {
struct DiagInfo {
  Severity severity;
  const char *format;
};
constexpr DiagInfo diagTable[] = {
#define DIAG(ID, SEVERITY, FORMAT) {Severity::SEVERITY, FORMAT},
#include "gradc/Basic/Diagnostics.def"
#undef DIAG
};
} // namespace

DiagnosticConsumer::~DiagnosticConsumer() = default;

Severity DiagnosticEngine::getSeverity(diag::ID id) {
  return diagTable[id].severity;
}

llvm::StringRef DiagnosticEngine::getFormat(diag::ID id) {
  return diagTable[id].format;
}

std::string DiagnosticEngine::formatMessage(diag::ID id,
                                            llvm::ArrayRef<std::string> args) {
  llvm::StringRef format = getFormat(id);
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '%' && i + 1 < format.size() && llvm::isDigit(format[i + 1])) {
      unsigned index = format[++i] - '0';
      if (index < args.size())
        out += args[index];
      continue;
    }
    out += c;
  }
  return out;
}

InFlightDiagnostic::~InFlightDiagnostic() {
  if (!engine)
    return;
  Diagnostic diag;
  diag.id = id;
  diag.severity = DiagnosticEngine::getSeverity(id);
  diag.loc = loc;
  diag.ranges = std::move(ranges);
  diag.message = DiagnosticEngine::formatMessage(id, args);
  engine->emit(std::move(diag));
}

void DiagnosticEngine::emit(Diagnostic diag) {
  if (diag.severity == Severity::Error)
    ++numErrors;
  else if (diag.severity == Severity::Warning)
    ++numWarnings;
  consumer->handle(diag);
}

//===----------------------------------------------------------------------===//
// TextDiagnosticPrinter
//===----------------------------------------------------------------------===//

static llvm::StringRef severityName(Severity s) {
  switch (s) {
  case Severity::Note:
    return "note";
  case Severity::Warning:
    return "warning";
  case Severity::Error:
    return "error";
  }
  return "error";
}

void TextDiagnosticPrinter::handle(const Diagnostic &diag) {
  PresumedLoc p = sm.getPresumedLoc(diag.loc);
  if (!p.isValid()) {
    os << "gradc: " << severityName(diag.severity) << ": " << diag.message
       << "\n";
    os.flush();
    return;
  }
  os << p.filename << ":" << p.line << ":" << p.column << ": "
     << severityName(diag.severity) << ": " << diag.message << "\n";

  // The source line, tabs expanded to one space so the caret lines up.
  std::string line = p.lineText.str();
  std::replace(line.begin(), line.end(), '\t', ' ');
  os << line << "\n";

  // Underline the ranges that lie on this line, then put the caret.
  std::string marks(std::max<size_t>(line.size(), p.column), ' ');
  for (const SourceRange &r : diag.ranges) {
    PresumedLoc b = sm.getPresumedLoc(r.begin);
    PresumedLoc e = sm.getPresumedLoc(r.end);
    if (!b.isValid() || b.line != p.line || b.filename != p.filename)
      continue;
    unsigned endCol =
        (e.isValid() && e.line == p.line) ? e.column : line.size() + 1;
    for (unsigned c = b.column; c < endCol && c - 1 < marks.size(); ++c)
      marks[c - 1] = '~';
  }
  marks[p.column - 1] = '^';
  os << llvm::StringRef(marks).rtrim() << "\n";
  os.flush();
}

//===----------------------------------------------------------------------===//
// VerifyDiagnosticConsumer
//===----------------------------------------------------------------------===//

void VerifyDiagnosticConsumer::addExpectations(SourceLoc bufferStart) {
  llvm::StringRef text = sm.getBufferText(bufferStart);
  llvm::StringRef name = sm.getBufferName(bufferStart);
  unsigned lineNo = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    ++lineNo;
    size_t pos = 0;
    while ((pos = line.find("expected-", pos)) != llvm::StringRef::npos) {
      llvm::StringRef s = line.drop_front(pos + 9);
      pos += 9;
      Expectation e;
      if (s.consume_front("error"))
        e.severity = Severity::Error;
      else if (s.consume_front("warning"))
        e.severity = Severity::Warning;
      else if (s.consume_front("note"))
        e.severity = Severity::Note;
      else
        continue;
      e.bufferName = name.str();
      e.commentLine = lineNo;
      e.line = lineNo;
      e.column = 0;
      if (s.consume_front("@")) {
        bool relPlus = s.consume_front("+");
        bool relMinus = !relPlus && s.consume_front("-");
        unsigned n = 0;
        if (s.consumeInteger(10, n)) {
          os << name << ":" << lineNo << ": malformed expected-* line number\n";
          malformed = true;
          continue;
        }
        e.line = relPlus ? lineNo + n : relMinus ? lineNo - n : n;
        if (s.consume_front(":") && s.consumeInteger(10, e.column)) {
          os << name << ":" << lineNo << ": malformed expected-* column\n";
          malformed = true;
          continue;
        }
      }
      s = s.ltrim();
      size_t open = s.find("{{");
      size_t close = s.find("}}");
      if (!s.starts_with("{{") || close == llvm::StringRef::npos) {
        os << name << ":" << lineNo << ": expected-* needs {{text}}\n";
        malformed = true;
        continue;
      }
      e.text = s.slice(open + 2, close).str();
      expected.push_back(std::move(e));
    }
  }
}

void VerifyDiagnosticConsumer::handle(const Diagnostic &diag) {
  seen.push_back(diag);
}

bool VerifyDiagnosticConsumer::finish() {
  bool ok = !malformed;
  for (const Diagnostic &d : seen) {
    PresumedLoc p = sm.getPresumedLoc(d.loc);
    auto match = std::find_if(
        expected.begin(), expected.end(), [&](const Expectation &e) {
          return !e.matched && e.severity == d.severity && p.isValid() &&
                 e.bufferName == p.filename && e.line == p.line &&
                 (e.column == 0 || e.column == p.column) &&
                 llvm::StringRef(d.message).contains(e.text);
        });
    if (match != expected.end()) {
      match->matched = true;
      continue;
    }
    ok = false;
    os << "error: unexpected " << severityName(d.severity) << " at "
       << sm.formatLoc(d.loc) << ": " << d.message << "\n";
  }
  for (const Expectation &e : expected) {
    if (e.matched)
      continue;
    ok = false;
    os << "error: expected " << severityName(e.severity) << " not seen at "
       << e.bufferName << ":" << e.line;
    if (e.column)
      os << ":" << e.column;
    os << " (comment on line " << e.commentLine << "): " << e.text << "\n";
  }
  os.flush();
  return ok;
}
