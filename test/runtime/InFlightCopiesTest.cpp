//===- InFlightCopiesTest.cpp - the copy stream's hazard bookkeeping ------===//
#include "exec/InFlightCopies.h"

#include <gtest/gtest.h>

using zrt::ByteRange;
using Copies = zrt::InFlightCopies<int>;

namespace {
char device[1024], host[1024];
} // namespace

TEST(InFlightCopies, ReadingTheSourceDoesNotWait) {
  Copies c;
  c.add(device, host, 256, 1);
  EXPECT_TRUE(c.takeConflicts({{device, 256, false}}).empty());
  EXPECT_EQ(c.size(), 1u);
}

TEST(InFlightCopies, WritingTheSourceWaits) {
  Copies c;
  c.add(device, host, 256, 1);
  EXPECT_EQ(c.takeConflicts({{device + 255, 8, true}}), std::vector<int>{1});
  EXPECT_TRUE(c.empty());
}

TEST(InFlightCopies, ReadingOrWritingTheTargetWaits) {
  Copies c;
  c.add(device, host, 256, 1);
  c.add(device + 256, host + 256, 256, 2);
  EXPECT_EQ(c.takeConflicts({{host + 300, 4, false}}), std::vector<int>{2});
  EXPECT_EQ(c.takeConflicts({{host, 1, true}}), std::vector<int>{1});
  EXPECT_TRUE(c.empty());
}

TEST(InFlightCopies, DisjointAndEmptyRangesDoNotWait) {
  Copies c;
  c.add(device, host, 256, 1);
  EXPECT_TRUE(c.takeConflicts({{device + 256, 256, true}, {host + 256, 16, true}}).empty());
  EXPECT_TRUE(c.takeConflicts({{host, 0, true}}).empty()); // zero bytes touch nothing
  EXPECT_EQ(c.size(), 1u);
}

TEST(InFlightCopies, PiecesWaitOnlyForTheirOwn) {
  // One large copy in four pieces (the executor's 64 MiB pieces): a chunk of
  // the host update that reads the second piece waits for that one only.
  Copies c;
  for (int k = 0; k < 4; ++k)
    c.add(device + 256 * k, host + 256 * k, 256, k);
  EXPECT_EQ(c.takeConflicts({{host + 256, 256, false}, {host + 512, 0, true}}),
            std::vector<int>{1});
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.takeConflicts({{host, 1024, false}}), (std::vector<int>{0, 2, 3}));
}

TEST(InFlightCopies, TakeAllKeepsIssueOrder) {
  Copies c;
  c.add(device, host, 8, 7);
  c.add(device + 8, host + 8, 8, 3);
  EXPECT_EQ(c.takeAll(), (std::vector<int>{7, 3}));
  EXPECT_TRUE(c.empty());
}
