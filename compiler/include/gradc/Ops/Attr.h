//===- Attr.h - Constant attributes of ops ----------------------*- C++ -*-===//
//
// The compile-time arguments of an op (`axis = 1`, `keepdims = true`,
// a reshape's target shape, a constant's values, a callee's name). Sema
// produces them from keyword and trailing positional arguments; the op
// table normalises them (defaults filled in, negative axes resolved), so
// later phases read one canonical form.
//
//===----------------------------------------------------------------------===//

#ifndef GRADC_OPS_ATTR_H
#define GRADC_OPS_ATTR_H

#include "gradc/Ops/Types.h"

#include "llvm/ADT/Hashing.h"

#include <string>
#include <variant>
#include <vector>

namespace gradc {

/// One attribute value. `Shape` holds dimensions that may be size names.
using AttrValue = std::variant<int64_t, bool, double, std::vector<int64_t>,
                               std::vector<double>, Shape, std::string>;

struct NamedAttr {
  std::string name;
  AttrValue value;
};

/// An ordered list of named attributes; order is kept for printing, and
/// the op table always stores them in its declared order.
class AttrList {
public:
  bool has(llvm::StringRef name) const { return find(name) != nullptr; }
  const AttrValue *find(llvm::StringRef name) const;
  AttrValue *find(llvm::StringRef name);
  void set(llvm::StringRef name, AttrValue value);
  void erase(llvm::StringRef name);

  int64_t getInt(llvm::StringRef name) const;
  bool getBool(llvm::StringRef name) const;
  double getFloat(llvm::StringRef name) const;
  const std::vector<int64_t> &getInts(llvm::StringRef name) const;
  const std::vector<double> &getFloats(llvm::StringRef name) const;
  const Shape &getShape(llvm::StringRef name) const;
  const std::string &getString(llvm::StringRef name) const;

  const std::vector<NamedAttr> &entries() const { return attrs; }
  bool empty() const { return attrs.empty(); }
  bool operator==(const AttrList &o) const;

private:
  std::vector<NamedAttr> attrs;
};

/// Prints a value as the textual IR spells it: `1`, `true`, `[0, 1]`,
/// `[2, N]`, `"name"`. Floats print so that they read back bit-exactly.
std::string attrValueStr(const AttrValue &value);

/// Whether two values print alike (attrValueStr): the same alternative and
/// the same value, doubles bit for bit except that every NaN is alike.
/// What cse and canonicalize compare, without making the strings.
bool sameAttrText(const AttrValue &a, const AttrValue &b);

/// The bits that decide how a double prints: its own, or the one quiet
/// NaN's for every NaN. cse and canonicalize compare doubles by these.
uint64_t printedDoubleBits(double v);

/// A hash that agrees with sameAttrText.
llvm::hash_code hashAttrValue(const AttrValue &value);

/// Shortest decimal that reads back to the same double (or float).
std::string formatDouble(double v);
std::string formatFloat(float v);

} // namespace gradc

#endif // GRADC_OPS_ATTR_H
