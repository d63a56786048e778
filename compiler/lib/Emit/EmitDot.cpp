//===- EmitDot.cpp - Graphviz view of forward and backward graphs ---------===//
//
// Writes a module as a Graphviz digraph. Each function is a cluster; each
// parameter a box, each op an ellipse labelled with its result names, its
// op and its result types; each use an edge. Ops made by differentiation
// are coloured by their origin, and a legend explains the colours.
//
// The origin is the op's provenance (ir::Provenance), which lib/AD sets
// beside the note; the note itself is only the tooltip.
// test/Emit/dot-*.grad pins the pairing.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/EmitDot.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

using namespace gradc;
using namespace gradc::emit;

GradOrigin emit::classifyGradOrigin(const ir::Op &op) {
  switch (op.getProvenance()) {
  case ir::Provenance::Source:
    return GradOrigin::Forward;
  case ir::Provenance::Seed:
    return GradOrigin::Seed;
  case ir::Provenance::BuiltIn:
    return GradOrigin::BuiltIn;
  case ir::Provenance::Override:
    return GradOrigin::Override;
  case ir::Provenance::CustomGrad:
  case ir::Provenance::GradBlock:
    return GradOrigin::CustomGrad;
  }
  return GradOrigin::Forward;
}

namespace {

struct OriginStyle {
  const char *fill;
  const char *label;
};

OriginStyle styleOf(GradOrigin origin) {
  switch (origin) {
  case GradOrigin::Forward:
    return {"white", "forward"};
  case GradOrigin::Seed:
    return {"gray90", "seed, cotangents, zero gradients"};
  case GradOrigin::BuiltIn:
    return {"lightblue", "gradient: built-in rule"};
  case GradOrigin::Override:
    return {"orange", "gradient: rule from @override"};
  case GradOrigin::CustomGrad:
    return {"plum", "gradient: @custom_grad rule or grad block"};
  }
  return {"white", ""};
}

/// `prefix` followed by `n`. (Spelled out: GCC 12 warns falsely about
/// `"literal" + std::string` under -Wrestrict.)
std::string prefixed(llvm::StringRef prefix, size_t n) {
  std::string s = prefix.str();
  s += std::to_string(n);
  return s;
}

/// Escapes a string for a double-quoted Graphviz label.
std::string escape(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

class DotWriter {
public:
  explicit DotWriter(llvm::raw_ostream &os) : os(os) {}

  void writeModule(const ir::Module &module) {
    os << "digraph gradc {\n";
    os << "  rankdir=TB;\n";
    os << "  node [fontname=\"monospace\", fontsize=10];\n";
    unsigned index = 0;
    for (const auto &fn : module.getFunctions())
      if (fn->getRole() != ir::Function::Role::RuleInstance)
        writeFunction(*fn, index++);
    writeLegend();
    os << "}\n";
  }

private:
  std::string nameOf(const ir::Value *v) {
    auto it = ids.find(v);
    if (it != ids.end())
      return it->second;
    std::string id = prefixed("v", ids.size());
    ids[v] = id;
    return id;
  }

  static std::string displayName(const ir::Value *v) {
    std::string name = "%";
    name += v->getName();
    return name;
  }

  void writeFunction(const ir::Function &fn, unsigned index) {
    os << "  subgraph cluster_" << index << " {\n";
    os << "    label=\"" << escape(fn.getName()) << "\";\n";
    for (const ir::Value *p : fn.getParams())
      os << "    " << nameOf(p) << " [shape=box, label=\""
         << escape(displayName(p) + " : " + p->getType().str()) << "\"];\n";
    for (const auto &op : fn.getOps())
      writeOp(*op);
    std::string ret = prefixed("ret", index);
    os << "    " << ret << " [shape=doubleoctagon, label=\"return\"];\n";
    for (const ir::Value *v : fn.getReturns())
      os << "    " << nameOf(v) << " -> " << ret << ";\n";
    os << "  }\n";
  }

  void writeOp(const ir::Op &op) {
    // One node per op, named after its first result (or a fresh id).
    std::string node = op.getNumResults() ? nameOf(op.getResult(0))
                                          : prefixed("op", ids.size());
    for (unsigned i = 1; i < op.getNumResults(); ++i)
      ids[op.getResult(i)] = node;
    // Lines are escaped one by one and joined with Graphviz's "\n".
    // Named results read `%h = tanh`; temporaries just `tanh`.
    std::string head;
    for (unsigned i = 0; i < op.getNumResults(); ++i) {
      if (op.getResult(i)->getName().empty())
        continue;
      if (!head.empty())
        head += ", ";
      head += displayName(op.getResult(i));
    }
    if (!head.empty())
      head += " = ";
    head += op.getName();
    if (op.getKind() == OpKind::Constant) {
      head += ' ';
      head += attrValueStr(*op.getAttrs().find("value"));
    }
    if (op.getKind() == OpKind::Call) {
      head += " @";
      head += op.getCallee();
    }
    std::string label = escape(head);
    for (const ir::Value *r : op.getResults())
      label += "\\n" + escape(r->getType().str());
    OriginStyle style = styleOf(classifyGradOrigin(op));
    os << "    " << node << " [label=\"" << label
       << "\", style=filled, fillcolor=" << style.fill;
    if (!op.getNote().empty())
      os << ", tooltip=\"" << escape(op.getNote()) << "\"";
    os << "];\n";
    for (const ir::Value *v : op.getOperands())
      os << "    " << nameOf(v) << " -> " << node << ";\n";
  }

  void writeLegend() {
    os << "  subgraph cluster_legend {\n";
    os << "    label=\"legend\";\n";
    const GradOrigin origins[] = {GradOrigin::Forward, GradOrigin::Seed,
                                  GradOrigin::BuiltIn, GradOrigin::Override,
                                  GradOrigin::CustomGrad};
    for (GradOrigin o : origins) {
      OriginStyle s = styleOf(o);
      os << "    legend_" << static_cast<int>(o)
         << " [shape=box, style=filled, fillcolor=" << s.fill << ", label=\""
         << s.label << "\"];\n";
    }
    os << "  }\n";
  }

  llvm::raw_ostream &os;
  llvm::DenseMap<const ir::Value *, std::string> ids;
};

} // namespace

void emit::emitDot(const ir::Module &module, llvm::raw_ostream &os) {
  DotWriter(os).writeModule(module);
}
