//===- ReverseMode.cpp - STUB: to be written ---------------------------------===//
#include "gradc/AD/ReverseMode.h"
using namespace gradc;
bool ad::differentiate(ir::Module &, DiagnosticEngine &) { return true; }
