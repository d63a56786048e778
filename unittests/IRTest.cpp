//===- IRTest.cpp - Printer, parser and verifier on built IR --------------===//
//
// What textual tests cannot reach: IR built in C++ with names that repeat,
// notes, locations from another buffer, and the broken IR that only a
// buggy pass makes (missing operands, values of another function, ops
// without their results, attributes of the wrong kind), plus the
// "after pass" prefix of verifier messages.
//
//===----------------------------------------------------------------------===//

#include "gradc/IR/Builder.h"
#include "gradc/IR/IRParser.h"
#include "gradc/IR/Printer.h"
#include "gradc/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace gradc;
using namespace gradc::ir;

namespace {

/// Records every diagnostic's message (with its location, when valid).
class Collector : public DiagnosticConsumer {
public:
  explicit Collector(const SourceManager &sm) : sm(sm) {}
  void handle(const Diagnostic &d) override {
    std::string where =
        d.loc.isValid() ? sm.formatLoc(d.loc) + ": " : std::string();
    messages.push_back(where + d.message);
  }
  std::string all() const {
    std::string s;
    for (const std::string &m : messages)
      s += m + "\n";
    return s;
  }
  const SourceManager &sm;
  std::vector<std::string> messages;
};

TensorType f32(std::initializer_list<int64_t> dims) {
  TensorType t(DType::F32);
  for (int64_t d : dims)
    t.shape.push_back(Dim::known(d));
  return t;
}

std::string print(const Module &m, PrintOptions options = {}) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printModule(m, os, options);
  return s;
}

/// Verifies `m` and returns the messages, one per line.
std::string verify(const Module &m, llvm::StringRef afterPass = "") {
  SourceManager sm;
  Collector c(sm);
  DiagnosticEngine diags(sm, c);
  verifyModule(m, diags, afterPass);
  return c.all();
}

} // namespace

TEST(Printer, RepeatedNamesGetSuffixesAndTemporariesNumbers) {
  Module m;
  Function *fn = m.addFunction("f");
  Value *x = fn->addParam(f32({2}), "h");
  Builder b(*fn);
  Value *a = b.neg(x);
  a->setName("h");
  Value *t = b.unary(OpKind::Exp, a);
  Value *c = b.neg(t);
  c->setName("h");
  Value *d = b.add(c, c);
  d->setName("7"); // digits only: printed as a temporary
  fn->setReturns({d});
  EXPECT_EQ(print(m), "func @f(%h: f32[2]) -> f32[2] {\n"
                      "  %h.1 = neg %h : f32[2]\n"
                      "  %0 = exp %h.1 : f32[2]\n"
                      "  %h.2 = neg %0 : f32[2]\n"
                      "  %1 = add %h.2, %h.2 : f32[2]\n"
                      "  return %1\n"
                      "}\n");
}

TEST(Printer, NotesPrintOncePerRun) {
  Module m;
  Function *fn = m.addFunction("g");
  Value *x = fn->addParam(f32({}), "x");
  Builder b(*fn);
  b.setNote("gradient of 'exp' at f.grad:3:9");
  Value *a = b.unary(OpKind::Exp, x);
  Value *c = b.mul(a, x);
  b.setNote("");
  Value *d = b.neg(c);
  b.setNote("gradient of 'exp' at f.grad:3:9\nby rule 'r'");
  Value *e = b.neg(d);
  fn->setReturns({e});
  std::string expected = "func @g(%x: f32) -> f32 {\n"
                         "  // gradient of 'exp' at f.grad:3:9\n"
                         "  %0 = exp %x : f32\n"
                         "  %1 = mul %0, %x : f32\n"
                         "  %2 = neg %1 : f32\n"
                         "  // gradient of 'exp' at f.grad:3:9\n"
                         "  // by rule 'r'\n"
                         "  %3 = neg %2 : f32\n"
                         "  return %3\n"
                         "}\n";
  EXPECT_EQ(print(m), expected);
  PrintOptions noNotes;
  noNotes.printNotes = false;
  EXPECT_EQ(print(m, noNotes).find("//"), std::string::npos);
}

TEST(Printer, LocationsComeFromTheSourceManager) {
  SourceManager sm;
  SourceLoc start = sm.addBuffer("model.grad", "fn f(x: f32) -> f32 {\n"
                                               "  return exp(x)\n}\n");
  Module m;
  Function *fn = m.addFunction("f");
  fn->setLoc(start.getAdvanced(3));
  fn->setGradSpec({"f_grad", {0}, start, "", "", ""});
  Value *x = fn->addParam(f32({}), "x");
  Builder b(*fn);
  b.setLoc(start.getAdvanced(31)); // line 2, column 10
  Value *y = b.unary(OpKind::Exp, x);
  y->getDefiningOp()->getGradRule() = {"r.1", "r", "override", start};
  fn->setReturns({y});
  PrintOptions options;
  options.printLocations = true;
  options.sourceManager = &sm;
  EXPECT_EQ(print(m, options),
            "func @f(%x: f32) -> f32 attributes {grad = @f_grad, wrt = [0], "
            "grad_loc = loc(\"model.grad\":1:1)} loc(\"model.grad\":1:4) {\n"
            "  %0 = exp %x : f32 rule(@r.1, \"r\", override, "
            "loc(\"model.grad\":1:1)) loc(\"model.grad\":2:10)\n"
            "  return %0\n"
            "}\n");
  // Without a source manager, or without the option, no location prints.
  options.sourceManager = nullptr;
  EXPECT_EQ(print(m, options).find("loc("), std::string::npos);
}

TEST(Printer, PrintedModulesParseBackIdentically) {
  Module m;
  m.sourceName = "dir/with \"quotes\".grad";
  Function *fn = m.addFunction("weird name");
  fn->setRole(Function::Role::Grad);
  Value *x = fn->addParam(f32({2, 3}), "x y");
  Builder b(*fn);
  Value *s = b.sum(x, {1}, true);
  Value *c = b.constant(f32({2, 1}), {0.1, -1e-300});
  Value *z = b.div(s, c);
  Value *t = b.transposeLastTwo(z);
  fn->setReturns({t, x});
  std::string once = print(m);

  SourceManager sm;
  SourceLoc start = sm.addBuffer("printed.ir", once);
  Collector collector(sm);
  DiagnosticEngine diags(sm, collector);
  std::unique_ptr<Module> parsed = parseIR(sm, start, diags);
  ASSERT_TRUE(parsed) << collector.all();
  EXPECT_TRUE(verifyModule(*parsed, diags)) << collector.all();
  EXPECT_EQ(print(*parsed), once);
  EXPECT_EQ(parsed->sourceName, m.sourceName);
  EXPECT_EQ(parsed->getFunctions()[0]->getParam(0)->getName(), "x y");
}

TEST(Verifier, ReportsBrokenIRThatTextCannotExpress) {
  Module m;
  Function *f = m.addFunction("f");
  Function *g = m.addFunction("g");
  Value *x = f->addParam(f32({2}), "x");
  Value *gx = g->addParam(f32({2}), "gx");
  g->setReturns({gx});
  Builder b(*f);
  Value *a = b.neg(x);
  a->setName("a");
  // An operand erased by a buggy pass, and one from another function.
  a->getDefiningOp()->setOperand(0, nullptr);
  Value *c = b.add(x, x);
  c->setName("c");
  c->getDefiningOp()->setOperand(1, gx);
  // A good op, and one whose result count the op table contradicts.
  Op *d = f->createOp(OpKind::Neg, {x}, {f32({2})}, {}, SourceLoc(), {"d"});
  f->createOp(OpKind::Neg, {x}, {}, {}, SourceLoc());
  // Attributes of the wrong kind or unknown to the op.
  AttrList bad;
  bad.set("axis", 1.5);
  bad.set("color", int64_t(3));
  f->createOp(OpKind::Sum, {x}, {f32({})}, bad, SourceLoc(), {"s"});
  f->setReturns({d->getResult(), gx});
  std::string messages = verify(m);
  EXPECT_NE(messages.find("in function 'f': operand 0 of 'neg' (%a) is "
                          "missing"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find("in function 'f': operand 1 of 'add' (%c) is not "
                          "defined in this function"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find("in function 'f': attribute 'axis' of 'sum' (%s) "
                          "must be an integer or a list of integers"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find("'sum' (%s) has no attribute 'color'"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find("in function 'f': return value 1 is not defined "
                          "in this function"),
            std::string::npos)
      << messages;
  // The op without results is named by its position.
  EXPECT_NE(messages.find("'neg' (op 3) has 0 result(s), but its operands "
                          "give 1"),
            std::string::npos)
      << messages;
}

TEST(Verifier, NamesThePassThatBrokeTheModule) {
  Module m;
  Function *f = m.addFunction("f");
  Value *x = f->addParam(f32({2}), "x");
  Builder b(*f);
  Value *y = b.neg(x);
  y->setName("y");
  Value *z = b.unary(OpKind::Exp, y);
  z->setName("z");
  f->setReturns({z});
  EXPECT_EQ(verify(m, "cse"), "");
  // Move the exp before the neg that defines its operand.
  auto ops = f->takeOps();
  std::swap(ops[0], ops[1]);
  f->setOps(std::move(ops));
  EXPECT_EQ(verify(m, "cse"), "after pass 'cse': in function 'f': operand 0 "
                              "of 'exp' (%z) is used before it is defined\n");
  EXPECT_EQ(verify(m), "in function 'f': operand 0 of 'exp' (%z) is used "
                       "before it is defined\n");
  // gradc verifies differentiation and the pipeline at once (without
  // --verify-each): the message names them as a list.
  EXPECT_EQ(verify(m, "differentiate,canonicalize"),
            "after passes 'differentiate,canonicalize': in function 'f': "
            "operand 0 of 'exp' (%z) is used before it is defined\n");
}

TEST(Verifier, UnifiesSizeNames) {
  SizeBindings bindings;
  std::string conflict;
  TensorType param(DType::F32, {Dim::named("N"), Dim::known(2)});
  TensorType arg(DType::F32, {Dim::named("B"), Dim::known(2)});
  EXPECT_TRUE(unifyParamType(param, arg, bindings, conflict));
  EXPECT_EQ(bindings.at("N"), Dim::named("B"));
  TensorType other(DType::F32, {Dim::known(3), Dim::known(2)});
  EXPECT_FALSE(unifyParamType(param, other, bindings, conflict));
  EXPECT_EQ(conflict, "N");
  EXPECT_EQ(substituteSizes(TensorType(DType::F32, {Dim::named("N")}), bindings)
                .str(),
            "f32[B]");
  // A known size in the parameter must match exactly.
  SizeBindings fresh;
  conflict.clear();
  EXPECT_FALSE(unifyParamType(other, arg, fresh, conflict));
  EXPECT_EQ(conflict, "");
}
