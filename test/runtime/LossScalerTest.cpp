//===- LossScalerTest.cpp - DeepSpeed's DynamicLossScaler, step by step ---===//
//
// Each expectation is DeepSpeed's update_scale (runtime/fp16/loss_scaler.py)
// worked by hand; the comments show the iteration and the rule that fires.
//
//===----------------------------------------------------------------------===//
#include "train/LossScaler.h"

#include <gtest/gtest.h>

using namespace zrt;

namespace {
LossScalerConfig config(double initial, int64_t window, int64_t hysteresis,
                        bool consecutive = false, double minScale = 1) {
  LossScalerConfig c;
  c.initialScale = initial;
  c.window = window;
  c.hysteresis = hysteresis;
  c.consecutiveHysteresis = consecutive;
  c.minScale = minScale;
  return c;
}
} // namespace

TEST(LossScaler, HalvesOnOverflowAndDoublesAfterTheWindow) {
  LossScaler s(config(16, 3, 1));
  EXPECT_EQ(s.scale(), 16);
  ASSERT_TRUE(s.update(true)); // iter 0: overflow, hysteresis 1 -> halve; last overflow 0
  EXPECT_EQ(s.scale(), 8);
  ASSERT_TRUE(s.update(false)); // iter 1: (1 - 0) % 3 != 0
  ASSERT_TRUE(s.update(false)); // iter 2
  EXPECT_EQ(s.scale(), 8);
  ASSERT_TRUE(s.update(false)); // iter 3: (3 - 0) % 3 == 0 -> double
  EXPECT_EQ(s.scale(), 16);
  ASSERT_TRUE(s.update(false)); // iter 4
  ASSERT_TRUE(s.update(false)); // iter 5
  EXPECT_EQ(s.scale(), 16);
  ASSERT_TRUE(s.update(false)); // iter 6: double again
  EXPECT_EQ(s.scale(), 32);
}

TEST(LossScaler, FirstWindowCountsFromIterationMinusOne) {
  // last_overflow_iter starts at -1: with window 2 the first doubling is at
  // iteration 1.
  LossScaler s(config(4, 2, 2));
  ASSERT_TRUE(s.update(false)); // iter 0: (0 + 1) % 2 != 0
  EXPECT_EQ(s.scale(), 4);
  ASSERT_TRUE(s.update(false)); // iter 1: (1 + 1) % 2 == 0
  EXPECT_EQ(s.scale(), 8);
}

TEST(LossScaler, HysteresisDelaysTheHalving) {
  LossScaler s(config(65536, 1000, 2));
  ASSERT_TRUE(s.update(true)); // hysteresis 2 -> 1, scale kept
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_EQ(s.remainingHysteresis(), 1);
  ASSERT_TRUE(s.update(true)); // hysteresis is 1 -> halve
  EXPECT_EQ(s.scale(), 32768);
  ASSERT_TRUE(s.update(false)); // not consecutive: hysteresis stays 1
  EXPECT_EQ(s.remainingHysteresis(), 1);
  ASSERT_TRUE(s.update(true)); // halves at once
  EXPECT_EQ(s.scale(), 16384);
}

TEST(LossScaler, ConsecutiveHysteresisRefillsAfterAGoodStep) {
  LossScaler s(config(1024, 1000, 2, /*consecutive=*/true));
  ASSERT_TRUE(s.update(true));  // 2 -> 1
  ASSERT_TRUE(s.update(false)); // refilled to 2
  EXPECT_EQ(s.remainingHysteresis(), 2);
  ASSERT_TRUE(s.update(true)); // 2 -> 1 again, scale kept
  EXPECT_EQ(s.scale(), 1024);
}

TEST(LossScaler, NeverBelowTheMinimumAndFailsThere) {
  LossScaler s(config(4, 1000, 1, false, /*minScale=*/2));
  ASSERT_TRUE(s.update(true)); // 4 -> 2
  EXPECT_EQ(s.scale(), 2);
  Status st = s.update(true); // at the minimum: DeepSpeed raises
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("minimum loss scale"), std::string::npos) << st.message();
}

TEST(LossScaler, StaticScaleNeverChanges) {
  LossScalerConfig c = config(65536, 1, 1);
  c.staticScale = 128;
  LossScaler s(c);
  EXPECT_FALSE(s.dynamic());
  EXPECT_EQ(s.scale(), 128);
  ASSERT_TRUE(s.update(true));
  ASSERT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 128);
}
