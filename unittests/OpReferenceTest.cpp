//===- OpReferenceTest.cpp - The op table of the docs matches the code ----===//
//
// docs/LanguageReference.md lists every op a program can call in one
// table. Its columns for the name, the operands, the attributes, the
// gradient and the summary are what the op table says; this test renders
// those cells from the op table (attributes that only the IR sets are
// left out) and checks that the docs hold exactly
// those rows, so the reference cannot drift from the code. (The result
// column is prose and is not checked.) On a mismatch it prints the row it
// expected, to paste into the docs.
//
//===----------------------------------------------------------------------===//

#include "gradc/Ops/OpTable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <map>

using namespace gradc;

namespace {

/// `s` in backquotes. (Built by appending: GCC 12 warns wrongly about
/// `"`" + s`.)
std::string code(llvm::StringRef s) {
  std::string out(1, '`');
  out += s;
  out += '`';
  return out;
}

llvm::StringRef kindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "int";
  case AttrKind::Axes:
    return "axes";
  case AttrKind::IntList:
    return "int list";
  case AttrKind::Bool:
    return "bool";
  case AttrKind::Shape:
    return "shape";
  case AttrKind::Dim:
    return "size";
  case AttrKind::Floats:
    return "floats";
  case AttrKind::Symbol:
    return "symbol";
  }
  return "?";
}

std::string operandsCell(const OpInfo &op) {
  std::vector<std::string> names;
  for (const char *name : op.operandNames)
    names.push_back(op.variadic ? "list " + code(name) : code(name));
  return llvm::join(names, ", ");
}

std::string attributesCell(const OpInfo &op) {
  std::vector<std::string> attrs;
  for (const AttrInfo &a : op.attrs)
    if (a.kind != AttrKind::Floats && a.kind != AttrKind::Symbol) // IR-only
      attrs.push_back(code(a.name) + " (" + kindName(a.kind).str() +
                      (a.required ? ", required" : "") + ")");
  return attrs.empty() ? "" : llvm::join(attrs, ", ");
}

std::string gradientCell(const OpInfo &op) {
  if (!op.isDifferentiable())
    return "none: " + std::string(op.nonDiffReason);
  if (op.differentiableOperands.empty())
    return "yes";
  std::vector<std::string> to;
  for (unsigned i = 0; i < op.operandNames.size(); ++i)
    if (op.isOperandDifferentiable(i))
      to.push_back(code(op.operandNames[i]));
  return "to " + llvm::join(to, ", ");
}

/// A '|' in a Markdown table cell is written '\|'.
std::string escapePipes(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += '\\';
    out += c;
  }
  return out;
}

/// The cells of one row: name, operands, attributes, (result), gradient,
/// summary. The result cell is left empty: it is not checked.
std::vector<std::string> expectedCells(const OpInfo &op) {
  return {code(op.name),    operandsCell(op),       attributesCell(op), "",
          gradientCell(op), escapePipes(op.summary)};
}

/// The rows of the op table in the docs, by op name.
std::map<std::string, std::vector<std::string>>
readDocRows(llvm::StringRef text) {
  std::map<std::string, std::vector<std::string>> rows;
  bool inTable = false;
  llvm::SmallVector<llvm::StringRef, 32> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (line.starts_with("| op | operands | attributes | result |")) {
      inTable = true;
      continue;
    }
    if (!inTable)
      continue;
    if (!line.starts_with("|"))
      break;
    if (line.starts_with("| ---"))
      continue;
    llvm::SmallVector<llvm::StringRef, 8> parts;
    line.trim().drop_front().drop_back().split(parts, " | ");
    std::vector<std::string> cells;
    for (llvm::StringRef p : parts)
      cells.push_back(p.trim().str());
    if (!cells.empty())
      rows[llvm::StringRef(cells[0]).trim('`').str()] = cells;
  }
  return rows;
}

} // namespace

TEST(OpReference, DocsTableMatchesOpTable) {
  std::string path =
      std::string(GRADC_SOURCE_DIR) + "/docs/LanguageReference.md";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(buffer)) << "cannot read " << path;
  auto rows = readDocRows((*buffer)->getBuffer());

  size_t visible = 0;
  for (const OpInfo &op : getAllOps()) {
    if (!op.userVisible) {
      EXPECT_EQ(rows.count(op.name), 0u)
          << op.name << " is internal but has a row in the docs";
      continue;
    }
    ++visible;
    std::vector<std::string> want = expectedCells(op);
    std::string row = "| " + want[0] + " | " + want[1] + " | " + want[2] +
                      " | (result) | " + want[4] + " | " + want[5] + " |";
    auto it = rows.find(op.name);
    if (it == rows.end()) {
      ADD_FAILURE() << "no row for " << op.name << "; expected\n" << row;
      continue;
    }
    const std::vector<std::string> &got = it->second;
    if (got.size() != want.size()) {
      ADD_FAILURE() << "wrong cell count; expected\n" << row;
      continue;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (i == 3) // the result column is prose
        continue;
      EXPECT_EQ(got[i], want[i]) << "row of " << op.name << "; expected\n"
                                 << row;
    }
  }
  EXPECT_EQ(rows.size(), visible) << "the docs list ops the table lacks";
}
