//===- SourceManagerTest.cpp - Locations map back to lines ----------------===//

#include "gradc/Basic/SourceManager.h"

#include <gtest/gtest.h>

using namespace gradc;

TEST(SourceManager, LineAndColumnOfEachCharacter) {
  SourceManager sm;
  SourceLoc a = sm.addBuffer("a.grad", "ab\ncd\n");
  SourceLoc b = sm.addBuffer("b.grad", "xyz");
  PresumedLoc p = sm.getPresumedLoc(a.getAdvanced(4));
  EXPECT_EQ(p.filename, "a.grad");
  EXPECT_EQ(p.line, 2u);
  EXPECT_EQ(p.column, 2u);
  EXPECT_EQ(p.lineText, "cd");
  PresumedLoc q = sm.getPresumedLoc(b.getAdvanced(2));
  EXPECT_EQ(q.filename, "b.grad");
  EXPECT_EQ(q.line, 1u);
  EXPECT_EQ(q.column, 3u);
  // One past the end of a buffer is still in it (end-of-file errors).
  EXPECT_EQ(sm.getPresumedLoc(a.getAdvanced(6)).line, 3u);
  EXPECT_FALSE(sm.getPresumedLoc(SourceLoc()).isValid());
}
