//===- LaunchTest.cpp - the elastic launcher's plan choice ----------------===//
#include "launch/Launch.h"
#include "plan/PlanLoader.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace zrt;

namespace {

/// A temporary directory of plan headers (what planForWorld reads; none is a
/// whole plan, which it never loads when micro_batch is recorded).
class PlanDir : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/zrt-launch-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  /// Writes DIR/|name| for |world| ranks, |micro| samples per micro-step,
  /// |accum| accumulation steps, compiled from |source| by |command|; with a
  /// 1 MiB buffer, which the header reader skips.
  std::string write(const std::string &name, int world, int micro, int accum,
                    const std::string &source = "m.onnx", std::vector<std::string> command = {}) {
    plan::Plan p;
    p.set_version(kPlanVersion);
    p.set_world_size(world);
    p.set_micro_batch(micro);
    p.set_source(source);
    p.set_target("cpu");
    p.mutable_training()->set_grad_accum_steps(accum);
    plan::Buffer *b = p.add_buffers();
    b->set_name("weights");
    b->set_initial_data(std::string(1 << 20, '\1'));
    for (const std::string &a : command)
      p.add_command(a);
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << p.SerializeAsString();
    return path;
  }

  std::string dir_;
};

const std::vector<std::string> kCommand = {
    "zcc", "m.onnx", "--micro-batch", "1", "--world-size=4", "--loss", "cross-entropy"};

TEST_F(PlanDir, TheHeaderHasTheSmallFieldsOnly) {
  std::string a = write("a.zplan", 4, 1, 1, "m.onnx", kCommand);
  plan::Plan h;
  ASSERT_TRUE(loadPlanHeader(a, h));
  EXPECT_EQ(h.world_size(), 4);
  EXPECT_EQ(h.micro_batch(), 1);
  EXPECT_EQ(h.source(), "m.onnx");
  EXPECT_EQ(h.training().grad_accum_steps(), 1);
  EXPECT_EQ(h.command_size(), (int)kCommand.size());
  EXPECT_EQ(h.buffers_size(), 0);
  std::ofstream(dir_ + "/junk.zplan") << "\xff\xff\xff\xff not a plan";
  Status s = loadPlanHeader(dir_ + "/junk.zplan", h);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("not a plan file"), std::string::npos) << s.message();
}

TEST_F(PlanDir, TheSamePlanForItsOwnWorldSize) {
  std::string a = write("a.zplan", 4, 1, 1, "m.onnx", kCommand);
  std::string found;
  ASSERT_TRUE(planForWorld(a, 4, found));
  EXPECT_EQ(found, a);
}

TEST_F(PlanDir, APlanBesideItWithTheSameModelAndSamplesPerStep) {
  std::string a = write("a.zplan", 4, 1, 1, "m.onnx", kCommand);
  write("b-other-model.zplan", 2, 2, 1, "other.onnx");
  write("c-fewer-samples.zplan", 2, 1, 1);
  std::string d = write("d.zplan", 2, 1, 2);
  write("e.zplan", 2, 2, 1); // also fits; d comes first by name
  std::string found;
  ASSERT_TRUE(planForWorld(a, 2, found));
  EXPECT_EQ(found, d);
}

TEST_F(PlanDir, WithoutOneTheErrorGivesTheZccCommand) {
  std::string a = write("a.zplan", 4, 1, 1, "m.onnx", kCommand);
  std::string found;
  Status s = planForWorld(a, 2, found);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("no plan for 2 ranks beside " + a + " (m.onnx, 4 samples per step)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("zcc m.onnx --micro-batch 1 --world-size=2 --loss cross-entropy "
                             "--grad-accum 2 -o " +
                             dir_ + "/a-w2.zplan"),
            std::string::npos)
      << s.message();
  // 4 samples per step cannot be split over 3 ranks.
  s = planForWorld(a, 3, found);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("none can keep 4 samples per step on 3 ranks"), std::string::npos)
      << s.message();
}

} // namespace

namespace {

// A job whose rank dies of a signal from outside, while a peer that saw it
// die exits with an error first: the launcher names the killed one.
TEST(Supervise, AChildKilledFromOutsideIsTheCauseNotThePeerReapedFirst) {
  pid_t peer = fork();
  if (peer == 0)
    _exit(1);
  // Ignoring SIGTERM from its first instruction (inherited): it outlives
  // the launcher's SIGTERM, whenever that comes.
  auto before = signal(SIGTERM, SIG_IGN);
  pid_t victim = fork();
  if (victim == 0) {
    usleep(200 * 1000);
    raise(SIGKILL);
    _exit(0);
  }
  signal(SIGTERM, before);
  testing::internal::CaptureStderr();
  int code = superviseChildren({peer, victim}, {"rank 0", "rank 1"});
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_NE(said.find("rank 1 was killed by signal 9; the others were stopped"), std::string::npos)
      << said;
}

// A child that dies of the launcher's own SIGTERM is not the cause.
TEST(Supervise, TheLaunchersOwnSignalIsNotACause) {
  pid_t first = fork();
  if (first == 0)
    _exit(3);
  pid_t other = fork();
  if (other == 0) {
    pause(); // SIGTERM's default action ends it
    _exit(0);
  }
  testing::internal::CaptureStderr();
  int code = superviseChildren({first, other}, {"rank 0", "rank 1"});
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 3);
  EXPECT_NE(said.find("rank 0 failed (exit 3); the others were stopped"), std::string::npos)
      << said;
}

} // namespace
