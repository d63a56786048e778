//===- Diagnostic.h - Reporting errors, warnings and notes ------*- C++ -*-===//
//
// Every problem that user input can cause is reported through a
// DiagnosticEngine, never printed directly: the driver decides whether it is
// printed clang-style or checked against `expected-*` comments (-verify).
//
//   diags.report(loc, diag::err_unknown_op) << name << suggestion;
//
// The diagnostic is emitted when the temporary returned by report() dies.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_BASIC_DIAGNOSTIC_H
#define GRADC_BASIC_DIAGNOSTIC_H

#include "gradc/Basic/SourceManager.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace gradc {

namespace diag {
enum ID : unsigned {
#define DIAG(ID, SEVERITY, FORMAT) ID,
#include "gradc/Basic/Diagnostics.def"
#undef DIAG
  NumDiagnostics
};
} // namespace diag

enum class Severity { Note, Warning, Error };

/// A fully formatted diagnostic.
struct Diagnostic {
  diag::ID id;
  Severity severity;
  SourceLoc loc;
  llvm::SmallVector<SourceRange, 2> ranges;
  std::string message;
};

class DiagnosticConsumer {
public:
  virtual ~DiagnosticConsumer();
  virtual void handle(const Diagnostic &diag) = 0;
  /// Called once when the driver is done; returns false if the consumer
  /// itself found a failure (the -verify consumer does).
  virtual bool finish() { return true; }
};

/// Prints diagnostics like clang: "file:line:col: error: message", the
/// source line, and a caret with the range underlined.
class TextDiagnosticPrinter : public DiagnosticConsumer {
public:
  TextDiagnosticPrinter(llvm::raw_ostream &os, const SourceManager &sm)
      : os(os), sm(sm) {}
  void handle(const Diagnostic &diag) override;

private:
  llvm::raw_ostream &os;
  const SourceManager &sm;
};

/// Implements -verify: collects the diagnostics and compares them with the
/// `expected-error`, `expected-warning` and `expected-note` comments of the
/// checked buffers. The comment syntax is
///
///   # expected-error {{text}}          on the line of the comment
///   # expected-error@+1 {{text}}       on the next line (also @-N, @N)
///   # expected-error@+1:17 {{text}}    ... and at column 17
///
/// `text` must occur in the message. Every diagnostic must be expected and
/// every expectation met.
class VerifyDiagnosticConsumer : public DiagnosticConsumer {
public:
  VerifyDiagnosticConsumer(llvm::raw_ostream &os, const SourceManager &sm)
      : os(os), sm(sm) {}
  /// Reads the expectations from the buffer that starts at `bufferStart`.
  void addExpectations(SourceLoc bufferStart);
  void handle(const Diagnostic &diag) override;
  bool finish() override;

private:
  struct Expectation {
    Severity severity;
    std::string bufferName;
    unsigned line;
    unsigned column; // 0: any column
    std::string text;
    unsigned commentLine;
    bool matched = false;
  };
  llvm::raw_ostream &os;
  const SourceManager &sm;
  std::vector<Expectation> expected;
  std::vector<Diagnostic> seen;
  bool malformed = false;
};

class DiagnosticEngine;

/// A diagnostic under construction; emitted by its destructor.
class InFlightDiagnostic {
public:
  InFlightDiagnostic(DiagnosticEngine &engine, SourceLoc loc, diag::ID id)
      : engine(&engine), loc(loc), id(id) {}
  InFlightDiagnostic(InFlightDiagnostic &&other)
      : engine(other.engine), loc(other.loc), id(other.id),
        args(std::move(other.args)), ranges(std::move(other.ranges)) {
    other.engine = nullptr;
  }
  InFlightDiagnostic(const InFlightDiagnostic &) = delete;
  ~InFlightDiagnostic();

  InFlightDiagnostic &operator<<(llvm::StringRef s) {
    args.push_back(s.str());
    return *this;
  }
  InFlightDiagnostic &operator<<(const std::string &s) {
    args.push_back(s);
    return *this;
  }
  InFlightDiagnostic &operator<<(const char *s) {
    args.push_back(s);
    return *this;
  }
  InFlightDiagnostic &operator<<(int64_t v) {
    args.push_back(std::to_string(v));
    return *this;
  }
  InFlightDiagnostic &operator<<(int v) { return *this << int64_t(v); }
  InFlightDiagnostic &operator<<(unsigned v) { return *this << int64_t(v); }
  InFlightDiagnostic &operator<<(size_t v) { return *this << int64_t(v); }
  /// A range to underline.
  InFlightDiagnostic &operator<<(SourceRange r) {
    ranges.push_back(r);
    return *this;
  }

private:
  DiagnosticEngine *engine;
  SourceLoc loc;
  diag::ID id;
  llvm::SmallVector<std::string, 4> args;
  llvm::SmallVector<SourceRange, 2> ranges;
};

class DiagnosticEngine {
public:
  DiagnosticEngine(const SourceManager &sm, DiagnosticConsumer &consumer)
      : sm(sm), consumer(&consumer) {}

  InFlightDiagnostic report(SourceLoc loc, diag::ID id) {
    return InFlightDiagnostic(*this, loc, id);
  }

  unsigned getNumErrors() const { return numErrors; }
  unsigned getNumWarnings() const { return numWarnings; }
  bool hadError() const { return numErrors != 0; }
  const SourceManager &getSourceManager() const { return sm; }

  /// Lets a caller (the driver's `--call` parser, say) route diagnostics
  /// elsewhere for a while.
  DiagnosticConsumer &getConsumer() { return *consumer; }
  void setConsumer(DiagnosticConsumer &c) { consumer = &c; }

  static Severity getSeverity(diag::ID id);
  static llvm::StringRef getFormat(diag::ID id);
  /// Substitutes %0, %1, ... in the format of `id`.
  static std::string formatMessage(diag::ID id,
                                   llvm::ArrayRef<std::string> args);

private:
  friend class InFlightDiagnostic;
  void emit(Diagnostic diag);

  const SourceManager &sm;
  DiagnosticConsumer *consumer;
  unsigned numErrors = 0;
  unsigned numWarnings = 0;
};

} // namespace gradc

#endif // GRADC_BASIC_DIAGNOSTIC_H
