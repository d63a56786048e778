//===- MangleTest.cpp - Names of generated code ---------------------------===//
//
// The naming rules both backends share (compiler/lib/Emit/Mangle.cpp): C
// symbols, module names, and DSL identifiers made valid, unreserved,
// unique C++ names.
//
//===----------------------------------------------------------------------===//

#include "gradc/Emit/Mangle.h"

#include "gtest/gtest.h"

using namespace gradc;
using namespace gradc::emit;

namespace {

TEST(MangleTest, ModuleNames) {
  EXPECT_EQ(moduleNameFromPath("dsl_examples/stack_override.grad"),
            "stack_override");
  EXPECT_EQ(moduleNameFromPath("nets/two-layer.net.grad"), "two_layer_net");
  EXPECT_EQ(sanitizeModuleName("2nets"), "gradc_2nets");
  EXPECT_EQ(sanitizeModuleName(""), "gradc_");
  EXPECT_EQ(sanitizeModuleName("my net"), "my_net");
}

TEST(MangleTest, Symbols) {
  EXPECT_EQ(cSymbolName("mlp", "loss_grad"), "mlp_loss_grad");
  EXPECT_EQ(cSymbolName("m", "f.rule"), "m_f_rule");
}

TEST(MangleTest, KeywordsAndReservedNames) {
  EXPECT_EQ(mangleIdentifier("int"), "int_");
  EXPECT_EQ(mangleIdentifier("delete"), "delete_");
  EXPECT_EQ(mangleIdentifier("class"), "class_");
  EXPECT_EQ(mangleIdentifier("and"), "and_");
  EXPECT_EQ(mangleIdentifier("std"), "std_");
  EXPECT_EQ(mangleIdentifier("gradc"), "gradc_");
  EXPECT_EQ(mangleIdentifier("NAN"), "NAN_");
  EXPECT_EQ(mangleIdentifier("int32_t"), "int32_t_");
  EXPECT_EQ(mangleIdentifier("GRADC_OK"), "GRADC_OK_");
  // Identifiers the implementation reserves.
  EXPECT_EQ(mangleIdentifier("a__b"), "a_0_b");
  EXPECT_EQ(mangleIdentifier("_X"), "v_X");
  EXPECT_EQ(mangleIdentifier("__x"), "_0_x");
  // Not identifiers at all.
  EXPECT_EQ(mangleIdentifier("2x"), "v2x");
  EXPECT_EQ(mangleIdentifier(""), "v");
  EXPECT_EQ(mangleIdentifier("d.x"), "d_x");
  // Ordinary names are kept.
  EXPECT_EQ(mangleIdentifier("d_h"), "d_h");
  EXPECT_EQ(mangleIdentifier("_x"), "_x");
  EXPECT_FALSE(isReservedName("logits"));
  EXPECT_TRUE(isReservedName("while"));
}

TEST(MangleTest, ScopeMakesNamesUnique) {
  NameScope scope;
  scope.reserve("i");
  EXPECT_TRUE(scope.isTaken("i"));
  EXPECT_EQ(scope.claim("x"), "x");
  EXPECT_EQ(scope.claim("x"), "x_1");
  EXPECT_EQ(scope.claim("x"), "x_2");
  EXPECT_EQ(scope.claim("int"), "int_");
  EXPECT_EQ(scope.claim("int"), "int_1");
  EXPECT_EQ(scope.claim("i"), "i_1");
  EXPECT_EQ(scope.claimFirstFree({"i", "j"}, "k"), "j");
  EXPECT_EQ(scope.claimFirstFree({"i", "j"}, "k"), "k");
}

} // namespace
