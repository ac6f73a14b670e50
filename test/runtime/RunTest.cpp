//===- RunTest.cpp - zrun's commands as library calls (runtime/run) -------===//
#include "run/Run.h"

#include <gtest/gtest.h>

using namespace zrt;

namespace {
/// A plan that trains with lr 1e-3 and, if |deepspeed|, DeepSpeed's
/// WarmupDecayLR from its config (zcc --deepspeed), total steps "auto".
plan::Plan trainingPlan(bool deepspeed) {
  plan::Plan p;
  p.mutable_training()->set_lr(1e-3);
  if (deepspeed) {
    plan::LrSchedule *s = p.mutable_training()->mutable_schedule();
    s->set_name("WarmupDecayLR");
    s->set_lr(3e-4);
    s->set_warmup_steps(10);
    s->set_total_steps(-1);
    s->set_warmup_min_lr(1e-6);
    s->set_warmup_log(true);
  }
  return p;
}
} // namespace

TEST(ResolveSchedule, WithoutAFlagOrConfigTheRunIsConstantAtThePlansLr) {
  TrainOptions t;
  t.steps = 50;
  Schedule s = resolveSchedule(trainingPlan(false), t);
  EXPECT_EQ(s.name, "constant");
  EXPECT_DOUBLE_EQ(s.lr, 1e-3);
  EXPECT_EQ(s.totalSteps, 50);
}

TEST(ResolveSchedule, TheConfigsSchedulerWithAutoStepsFromTheFlags) {
  TrainOptions t;
  t.steps = 40;
  Schedule s = resolveSchedule(trainingPlan(true), t);
  EXPECT_EQ(s.name, "WarmupDecayLR");
  EXPECT_DOUBLE_EQ(s.lr, 3e-4);
  EXPECT_EQ(s.warmupSteps, 10);
  EXPECT_EQ(s.totalSteps, 40); // "auto": --steps
  EXPECT_DOUBLE_EQ(s.warmupMinLr, 1e-6);
  EXPECT_TRUE(s.validate());
}

TEST(ResolveSchedule, FlagsOverrideTheConfigFieldByField) {
  TrainOptions t;
  t.steps = 40;
  t.lr = 5e-4;
  t.warmupSteps = 4;
  t.warmupLog = false;
  t.totalSteps = 100;
  Schedule s = resolveSchedule(trainingPlan(true), t);
  EXPECT_EQ(s.name, "WarmupDecayLR"); // kept
  EXPECT_DOUBLE_EQ(s.lr, 5e-4);
  EXPECT_EQ(s.warmupSteps, 4);
  EXPECT_FALSE(s.warmupLog);
  EXPECT_EQ(s.totalSteps, 100);
  EXPECT_DOUBLE_EQ(s.warmupMinLr, 1e-6); // kept
}

TEST(ResolveSchedule, AScheduleFlagReplacesTheConfigsScheduler) {
  TrainOptions t;
  t.steps = 20;
  t.lrSchedule = "warmup-cosine";
  t.warmupSteps = 5;
  Schedule s = resolveSchedule(trainingPlan(true), t);
  EXPECT_EQ(s.name, "warmup-cosine");
  EXPECT_DOUBLE_EQ(s.lr, 1e-3); // the plan's lr, not the config scheduler's
  EXPECT_EQ(s.warmupSteps, 5);
  EXPECT_EQ(s.totalSteps, 20);
  EXPECT_DOUBLE_EQ(s.warmupMinLr, 0.0); // not the config's
}

TEST(KernelReport, CountsKindsAndTheInstructionsOnTheHostFallback) {
  plan::Plan p;
  plan::Buffer *b = p.add_buffers();
  b->add_shape(4);
  b->add_shape(32);
  plan::Program *prog = p.add_programs();
  prog->set_name("eval");
  for (const char *name : {"matmul", "relu", "matmul"}) {
    plan::Kernel *k = prog->add_instructions()->mutable_kernel();
    k->set_name(name);
    k->add_inputs(0);
    k->set_location("node_" + std::string(name));
  }
  KernelReport r = kernelReport(p, [](const plan::Kernel &k) { return k.name() != "relu"; });
  ASSERT_EQ(r.kinds.size(), 2u);
  EXPECT_EQ(r.kinds["matmul"].count, 2);
  EXPECT_EQ(r.kinds["matmul"].fallback, 0);
  EXPECT_EQ(r.kinds["relu"].count, 1);
  EXPECT_EQ(r.kinds["relu"].fallback, 1);
  ASSERT_EQ(r.fallback.size(), 1u);
  EXPECT_EQ(r.fallback[0].program, "eval");
  EXPECT_EQ(r.fallback[0].index, 1);
  EXPECT_EQ(r.fallback[0].shapes, "[4x32]");
}
