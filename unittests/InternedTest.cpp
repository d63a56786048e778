//===- InternedTest.cpp - Interned strings and rare vectors ---------------===//

#include "gradc/Basic/Interned.h"
#include "gradc/Loops/LoopIR.h"
#include "gradc/Ops/Types.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

using namespace gradc;

TEST(InternedString, SameTextSamePointer) {
  std::string n = "N";
  InternedString a(n), b("N"), m("M");
  n = "X"; // the interned copy does not depend on the caller's string
  EXPECT_EQ(a, b);
  EXPECT_NE(a, m);
  EXPECT_EQ(a.ref().data(), b.ref().data());
  EXPECT_EQ(a.ref(), "N");
  EXPECT_EQ(m.str(), "M");
  EXPECT_EQ(a.size(), 1u);
  EXPECT_FALSE(a.empty());
}

TEST(InternedString, EmptyIsTheDefault) {
  InternedString e, f("");
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e, f);
  EXPECT_EQ(e.ref(), "");
  EXPECT_NE(e, InternedString("a"));
}

TEST(InternedString, FromManyThreads) {
  std::vector<InternedString> seen(8);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < seen.size(); ++t)
    threads.emplace_back([&seen, t] {
      for (int i = 0; i < 1000; ++i)
        InternedString("size" + std::to_string(i));
      seen[t] = InternedString("shared");
    });
  for (std::thread &t : threads)
    t.join();
  for (InternedString s : seen)
    EXPECT_EQ(s, seen[0]);
  EXPECT_EQ(seen[0].ref(), "shared");
}

TEST(InternedString, DimsCompareByName) {
  EXPECT_EQ(Dim::named("B"), Dim::named(std::string("B")));
  EXPECT_NE(Dim::named("B"), Dim::named("C"));
  EXPECT_NE(Dim::named("B"), Dim::known(0));
  EXPECT_TRUE(Dim::known(3).isKnown());
  EXPECT_EQ(Dim::named("B").getName(), "B");
  EXPECT_EQ(Dim::named("B").str(), "B");
}

TEST(RareVector, EmptyUntilTheFirstElement) {
  loops::RareVector<int> v;
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.size(), 0u);
  EXPECT_EQ(v.begin(), v.end());
  v.push_back(1);
  v.emplace_back(3);
  int two[] = {2};
  v.insert(v.begin() + 1, std::begin(two), std::end(two));
  EXPECT_EQ(llvm::ArrayRef<int>(v), llvm::ArrayRef<int>({1, 2, 3}));
  loops::RareVector<int> copy = v;
  copy[0] = 7;
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(copy.size(), 3u);
  v = std::vector<int>{};
  EXPECT_TRUE(v.empty());
  v = {4, 5};
  EXPECT_EQ(v.size(), 2u);
  v.insert(v.end(), copy.begin(), copy.end());
  EXPECT_EQ(llvm::ArrayRef<int>(v), llvm::ArrayRef<int>({4, 5, 7, 2, 3}));
  v.clear();
  EXPECT_TRUE(v.empty());
  v.assign(copy.begin(), copy.begin() + 2);
  EXPECT_EQ(llvm::ArrayRef<int>(v), llvm::ArrayRef<int>({7, 2}));
  v.assign(copy.begin(), copy.begin());
  EXPECT_TRUE(v.empty());
}
