//===- gradc-opt.cpp - STUB: to be written ---------------------------------===//
int main() { return 1; }
