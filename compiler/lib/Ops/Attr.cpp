//===- Attr.cpp - Constant attributes of ops ------------------------------===//

#include "gradc/Ops/Attr.h"

#include "llvm/Support/ErrorHandling.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

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
