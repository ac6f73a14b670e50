//===- ScheduleTest.cpp - learning-rate schedules -------------------------===//
#include "train/Schedule.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zrt;

TEST(Schedule, WarmupCosineIsTheReferenceSchedule) {
  // references.json 'sched': lr 2e-3, warmup 5, cosine to 0 at step 20.
  Schedule s;
  s.name = "warmup-cosine";
  s.lr = 2e-3;
  s.warmupSteps = 5;
  s.totalSteps = 20;
  ASSERT_TRUE(s.validate());
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.at(2), 2e-3 * 2 / 5);
  EXPECT_DOUBLE_EQ(s.at(5), 2e-3);
  EXPECT_DOUBLE_EQ(s.at(10), 2e-3 * 0.5 * (1 + std::cos(M_PI * 5 / 15)));
  EXPECT_NEAR(s.at(20), 0.0, 1e-18);
}

TEST(Schedule, DeepSpeedWarmupLR) {
  Schedule s;
  s.name = "WarmupLR";
  s.lr = 1e-3;
  s.warmupMinLr = 1e-5;
  s.warmupSteps = 100;
  ASSERT_TRUE(s.validate());
  // log warmup: min + (max - min) * log(k + 1) / log(W), then max.
  EXPECT_DOUBLE_EQ(s.at(0), 1e-5);
  EXPECT_DOUBLE_EQ(s.at(9), 1e-5 + (1e-3 - 1e-5) * std::log(10.0) / std::log(100.0));
  EXPECT_DOUBLE_EQ(s.at(100), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(5000), 1e-3);
  s.warmupLog = false;
  EXPECT_DOUBLE_EQ(s.at(50), 1e-5 + (1e-3 - 1e-5) * 0.5);
}

TEST(Schedule, DeepSpeedWarmupDecayLR) {
  Schedule s;
  s.name = "WarmupDecayLR";
  s.lr = 1e-3;
  s.warmupSteps = 10;
  s.totalSteps = 110;
  s.warmupLog = false;
  ASSERT_TRUE(s.validate());
  EXPECT_DOUBLE_EQ(s.at(5), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(60), 1e-3 * 50.0 / 100.0);
  EXPECT_DOUBLE_EQ(s.at(110), 0.0);
  EXPECT_DOUBLE_EQ(s.at(200), 0.0);
}

TEST(Schedule, DeepSpeedWarmupCosineLR) {
  Schedule s;
  s.name = "WarmupCosineLR";
  s.lr = 1e-3;
  s.warmupSteps = 10;
  s.totalSteps = 110;
  s.warmupLog = false;
  s.warmupMinRatio = 0.1;
  s.cosMinRatio = 1e-4;
  ASSERT_TRUE(s.validate());
  EXPECT_DOUBLE_EQ(s.at(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(5), 1e-3 * (0.1 + 0.5 * 0.9));
  // After warmup: cos_min + (1 - cos_min) * (1 + cos(pi * (k - W + 1) / (T - W))) / 2
  EXPECT_DOUBLE_EQ(s.at(59), 1e-3 * (1e-4 + (1 - 1e-4) * 0.5));
  EXPECT_NEAR(s.at(109), 1e-3 * 1e-4, 1e-15);
}

TEST(Schedule, RejectsBadParameters) {
  Schedule s;
  s.name = "cosine-ish";
  EXPECT_NE(s.validate().message().find("expected constant, warmup-cosine"), std::string::npos);
  s.name = "WarmupDecayLR";
  s.warmupSteps = 10;
  s.totalSteps = 5;
  EXPECT_NE(s.validate().message().find("needs --total-steps greater than --warmup-steps"),
            std::string::npos);
}
