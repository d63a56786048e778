//===- EmitCpp.cpp - STUB: to be written ---------------------------------===//

namespace gradc {}
