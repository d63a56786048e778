//===- GradRegistry.cpp - Built-in gradient rules by op -------------------===//
//
// The registry is an array indexed by OpKind, filled by one explicit call
// per family of rules (lib/AD/Rules/*.cpp).
//
//===----------------------------------------------------------------------===//

#include "gradc/AD/GradRegistry.h"

#include <cassert>

using namespace gradc;
using namespace gradc::ad;

void GradRegistry::add(OpKind kind, GradRuleFn rule) {
  GradRuleFn &slot = rules[static_cast<size_t>(kind)];
  assert(!slot && "two built-in rules for one op");
  slot = rule;
}

GradRuleFn GradRegistry::lookup(OpKind kind) const {
  return rules[static_cast<size_t>(kind)];
}

GradRegistry GradRegistry::createBuiltin() {
  GradRegistry registry;
  registerElementwiseGrads(registry);
  registerReduceGrads(registry);
  registerLinalgGrads(registry);
  registerLayoutGrads(registry);
  registerLossGrads(registry);
  return registry;
}
