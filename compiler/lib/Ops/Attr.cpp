//===- Attr.cpp - Constant attributes of ops ------------------------------===//

#include "gradc/Ops/Attr.h"

#include "llvm/Support/ErrorHandling.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace gradc;

const AttrValue *AttrList::find(llvm::StringRef name) const {
  for (const NamedAttr &a : attrs)
    if (a.name == name)
      return &a.value;
  return nullptr;
}

AttrValue *AttrList::find(llvm::StringRef name) {
  for (NamedAttr &a : attrs)
    if (a.name == name)
      return &a.value;
  return nullptr;
}

void AttrList::set(llvm::StringRef name, AttrValue value) {
  if (AttrValue *v = find(name)) {
    *v = std::move(value);
    return;
  }
  attrs.push_back({name.str(), std::move(value)});
}

void AttrList::erase(llvm::StringRef name) {
  std::erase_if(attrs, [&](const NamedAttr &a) { return a.name == name; });
}

template <typename T>
static const T &getAs(const AttrList &list, llvm::StringRef name) {
  const AttrValue *v = list.find(name);
  assert(v && "attribute missing; the op table should have filled it in");
  assert(std::holds_alternative<T>(*v) && "attribute has another kind");
  return std::get<T>(*v);
}

int64_t AttrList::getInt(llvm::StringRef name) const {
  return getAs<int64_t>(*this, name);
}
bool AttrList::getBool(llvm::StringRef name) const {
  return getAs<bool>(*this, name);
}
double AttrList::getFloat(llvm::StringRef name) const {
  return getAs<double>(*this, name);
}
const std::vector<int64_t> &AttrList::getInts(llvm::StringRef name) const {
  return getAs<std::vector<int64_t>>(*this, name);
}
const std::vector<double> &AttrList::getFloats(llvm::StringRef name) const {
  return getAs<std::vector<double>>(*this, name);
}
const Shape &AttrList::getShape(llvm::StringRef name) const {
  return getAs<Shape>(*this, name);
}
const std::string &AttrList::getString(llvm::StringRef name) const {
  return getAs<std::string>(*this, name);
}

bool AttrList::operator==(const AttrList &o) const {
  if (attrs.size() != o.attrs.size())
    return false;
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name != o.attrs[i].name || attrs[i].value != o.attrs[i].value)
      return false;
  return true;
}

uint64_t gradc::printedDoubleBits(double v) {
  if (std::isnan(v))
    v = std::numeric_limits<double>::quiet_NaN();
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

bool gradc::sameAttrText(const AttrValue &a, const AttrValue &b) {
  if (a.index() != b.index())
    return false;
  if (const auto *x = std::get_if<double>(&a))
    return printedDoubleBits(*x) == printedDoubleBits(std::get<double>(b));
  if (const auto *x = std::get_if<std::vector<double>>(&a)) {
    const auto &y = std::get<std::vector<double>>(b);
    if (x->size() != y.size())
      return false;
    for (size_t i = 0; i < x->size(); ++i)
      if (printedDoubleBits((*x)[i]) != printedDoubleBits(y[i]))
        return false;
    return true;
  }
  return a == b;
}

llvm::hash_code gradc::hashAttrValue(const AttrValue &value) {
  struct Hasher {
    llvm::hash_code operator()(int64_t v) { return llvm::hash_value(v); }
    llvm::hash_code operator()(bool v) { return llvm::hash_value(v); }
    llvm::hash_code operator()(double v) {
      return llvm::hash_value(printedDoubleBits(v));
    }
    llvm::hash_code operator()(const std::vector<int64_t> &v) {
      return llvm::hash_combine_range(v.begin(), v.end());
    }
    llvm::hash_code operator()(const std::vector<double> &v) {
      llvm::hash_code h = llvm::hash_value(v.size());
      for (double d : v)
        h = llvm::hash_combine(h, printedDoubleBits(d));
      return h;
    }
    llvm::hash_code operator()(const Shape &v) {
      return llvm::hash_combine_range(v.begin(), v.end());
    }
    llvm::hash_code operator()(const std::string &v) {
      return llvm::hash_value(v);
    }
  };
  return llvm::hash_combine(value.index(), std::visit(Hasher{}, value));
}

std::string gradc::formatDouble(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  // The shortest of %.1g .. %.17g that reads back exactly.
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string gradc::formatFloat(float v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, double(v));
    if (std::strtof(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string gradc::attrValueStr(const AttrValue &value) {
  struct Printer {
    std::string operator()(int64_t v) { return std::to_string(v); }
    std::string operator()(bool v) { return v ? "true" : "false"; }
    std::string operator()(double v) { return formatDouble(v); }
    std::string operator()(const std::vector<int64_t> &v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<double> &v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + formatDouble(v[i]);
      return s + "]";
    }
    std::string operator()(const Shape &v) { return shapeStr(v); }
    std::string operator()(const std::string &v) { return "\"" + v + "\""; }
  };
  return std::visit(Printer{}, value);
}
