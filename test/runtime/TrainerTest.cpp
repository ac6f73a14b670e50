//===- TrainerTest.cpp - the step loop, through the CPU executor ----------===//
//
// A hand-written plan (no compiler: this test runs in the runtime-only build
// too) of the model loss = sum(w * x) over a batch of two 4-vectors, whose
// gradient is the batch's column sums, trained with SGD: after every step
// the trainer must report the loss, learning rate and gradient norm that
// the same arithmetic in double gives, and a run resumed from a checkpoint
// must continue bit for bit. With two in-process ranks (an all-reduce of
// the gradient in apply) the reported loss is the ranks' mean.
//
//===----------------------------------------------------------------------===//
#include "train/Trainer.h"
#include "exec/Executor.h"
#include "plan/PlanLoader.h"
#include "support/Files.h"
#include "train/Checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include <unistd.h>

using namespace zrt;
namespace fs = std::filesystem;

namespace {

bool readRegularFileForTest(const std::string &path, std::string &out) {
  return (bool)readRegularFile(path, out);
}

constexpr int kBatch = 2, kWidth = 4, kSamples = 8;

plan::Buffer *addBuffer(plan::Plan &p, const std::string &name, plan::Arena arena, int64_t offset,
                        std::vector<int64_t> shape) {
  plan::Buffer *b = p.add_buffers();
  b->set_name(name);
  b->set_arena(arena);
  b->set_offset(offset);
  b->set_dtype(plan::F32);
  for (int64_t d : shape)
    b->add_shape(d);
  return b;
}

void kernel(plan::Program *p, const std::string &name, std::vector<int> in, std::vector<int> out,
            std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
  plan::Kernel *k = p->add_instructions()->mutable_kernel();
  k->set_name(name);
  for (int i : in)
    k->add_inputs(i);
  for (int o : out)
    k->add_outputs(o);
  for (int64_t i : ints)
    k->add_ints(i);
  for (double f : floats)
    k->add_floats(f);
}

/// w [4] (1, 2, 3, 4), x [2, 4] per rank; micro_step: loss = sum(w * x),
/// g = column sums of x; apply: (all-reduce avg of g over the ranks), SGD
/// with lr, grad_norm = |g|.
plan::Plan linearPlan(int world, double lr) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  p.set_world_size(world);
  p.set_source("trainer-test");
  p.set_micro_batch(kBatch);
  p.set_target("cpu");
  enum { W, G, Buf, X, Lr, T, Loss, N2, Norm, Gavg, GG };
  plan::Buffer *w = addBuffer(p, "w", plan::STATE, 0, {kWidth});
  w->set_trainable(true);
  w->set_role("param");
  std::vector<float> init = {1, 2, 3, 4};
  w->set_initial_data(std::string(reinterpret_cast<const char *>(init.data()), 16));
  plan::Buffer *grad0 = addBuffer(p, "w.grad", plan::STATE, 64, {kWidth});
  grad0->set_role("grad");
  grad0->set_fill(0);
  plan::Buffer *momentum = addBuffer(p, "w.momentum", plan::STATE, 128, {kWidth});
  momentum->set_role("sgd_buf");
  momentum->set_fill(0);
  addBuffer(p, "x", plan::INPUT, 0, {kBatch, kWidth});
  addBuffer(p, "lr", plan::INPUT, 64, {});
  addBuffer(p, "t", plan::DEVICE, 0, {kBatch, kWidth});
  addBuffer(p, "loss", plan::DEVICE, 64, {});
  addBuffer(p, "n2", plan::DEVICE, 128, {});
  addBuffer(p, "norm", plan::DEVICE, 192, {});
  addBuffer(p, "g.avg", plan::DEVICE, 256, {kWidth});
  addBuffer(p, "gg", plan::DEVICE, 320, {kWidth});
  p.set_state_arena_bytes(192);
  p.set_input_arena_bytes(128);
  p.set_device_arena_bytes(384);

  plan::Program *micro = p.add_programs();
  micro->set_name("micro_step");
  kernel(micro, "mul", {W, X}, {T});
  kernel(micro, "reduce", {T}, {Loss}, {0, 0, 0, 1});
  kernel(micro, "reduce", {X}, {G}, {0, 0, 0});
  auto *in = micro->add_inputs();
  in->set_name("x");
  in->set_buffer(X);
  auto *out = micro->add_outputs();
  out->set_name("loss");
  out->set_buffer(Loss);

  plan::Program *apply = p.add_programs();
  apply->set_name("apply");
  int grad = G;
  if (world > 1) {
    plan::Collective *c = apply->add_instructions()->mutable_collective();
    c->set_kind(plan::Collective::ALL_REDUCE);
    c->set_reduce(plan::Collective::AVG);
    c->set_input(G);
    c->set_output(Gavg);
    grad = Gavg;
  }
  kernel(apply, "sgd", {W, grad, Buf, Lr}, {W, Buf}, {0}, {0.0, 0.0});
  kernel(apply, "mul", {grad, grad}, {GG});
  kernel(apply, "reduce", {GG}, {N2}, {0, 0, 0});
  kernel(apply, "sqrt", {N2}, {Norm});
  in = apply->add_inputs();
  in->set_name("lr");
  in->set_buffer(Lr);
  out = apply->add_outputs();
  out->set_name("grad_norm");
  out->set_buffer(Norm);
  p.mutable_training()->set_grad_accum_steps(1);
  p.mutable_training()->set_lr(lr);
  p.mutable_training()->set_optimizer("sgd");
  return p;
}

/// Sample s of the data: x[s][j] = (s + 1) * 0.25 - j * 0.125.
float sample(int s, int j) { return (float)((s + 1) * 0.25 - j * 0.125); }

std::string writeData(const fs::path &dir) {
  NpyArray a;
  a.shape = {kSamples, kWidth};
  std::vector<float> v;
  for (int s = 0; s < kSamples; ++s)
    for (int j = 0; j < kWidth; ++j)
      v.push_back(sample(s, j));
  a.data.assign(reinterpret_cast<const char *>(v.data()),
                reinterpret_cast<const char *>(v.data()) + v.size() * 4);
  std::string path = (dir / "x.npy").string(), error;
  EXPECT_TRUE(writeNpy(path, a, error)) << error;
  return path;
}

struct TrainedRun {
  std::vector<StepRecord> records;
  std::vector<std::string> checkpoints;
  Status status = Status::ok();
};

/// Trains |plan| on every rank (threads, one in-process group).
TrainedRun train(const plan::Plan &plan, const DataFeeder &feeder, TrainerConfig config) {
  TrainedRun run;
  std::unique_ptr<Trainer> trainer;
  run.status = Trainer::create(plan, feeder, config, trainer);
  if (!run.status)
    return run;
  trainer->onStep = [&](const StepRecord &r) { run.records.push_back(r); };
  trainer->onCheckpoint = [&](const std::string &dir) { run.checkpoints.push_back(dir); };
  int world = plan.world_size();
  InProcessGroup group(world);
  std::vector<Status> results(world, Status::ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm = world > 1 ? group.communicator(r) : nullptr;
      Executor executor(plan, r, comm.get());
      results[r] = trainer->run(r, executor, comm.get());
      if (!results[r] && comm)
        comm->abort("rank failed");
    });
  for (std::thread &t : threads)
    t.join();
  for (const Status &s : results)
    if (!s && run.status)
      run.status = s;
  return run;
}

class TrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zrt-trainer-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    data_ = writeData(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string data_;
};

} // namespace

TEST_F(TrainerTest, StepsFollowTheArithmetic) {
  const double lr = 0.05;
  plan::Plan plan = linearPlan(1, lr);
  ASSERT_TRUE(validatePlan(plan)) << validatePlan(plan).message();
  DataFeeder feeder;
  ASSERT_TRUE(feeder.load({{"x", data_}}, plan, plan.programs(0)));
  TrainerConfig config;
  config.steps = 6;
  config.schedule.lr = lr;
  config.schedule.totalSteps = 6;
  TrainedRun run = train(plan, feeder, config);
  ASSERT_TRUE(run.status) << run.status.message();
  ASSERT_EQ(run.records.size(), 6u);
  // The same step in double: batch k is samples 2k, 2k+1 (mod 8).
  double w[kWidth] = {1, 2, 3, 4};
  for (int k = 0; k < 6; ++k) {
    double loss = 0, g[kWidth] = {0, 0, 0, 0}, norm = 0;
    for (int b = 0; b < kBatch; ++b)
      for (int j = 0; j < kWidth; ++j) {
        double x = sample((kBatch * k + b) % kSamples, j);
        loss += w[j] * x;
        g[j] += x;
      }
    for (int j = 0; j < kWidth; ++j) {
      w[j] -= lr * g[j];
      norm += g[j] * g[j];
    }
    const StepRecord &r = run.records[k];
    EXPECT_EQ(r.step, k);
    EXPECT_NEAR(r.loss, loss, 1e-5 * std::max(1.0, std::fabs(loss))) << "step " << k;
    EXPECT_NEAR(r.gradNorm, std::sqrt(norm), 1e-5) << "step " << k;
    EXPECT_DOUBLE_EQ(r.lr, lr);
    EXPECT_FALSE(r.skipped);
  }
}

TEST_F(TrainerTest, ResumeContinuesBitForBit) {
  plan::Plan plan = linearPlan(1, 0.05);
  DataFeeder feeder;
  ASSERT_TRUE(feeder.load({{"x", data_}}, plan, plan.programs(0)));
  TrainerConfig config;
  config.steps = 7;
  config.schedule.name = "warmup-cosine";
  config.schedule.lr = 0.05;
  config.schedule.warmupSteps = 2;
  config.schedule.totalSteps = 7;
  TrainedRun full = train(plan, feeder, config);
  ASSERT_TRUE(full.status) << full.status.message();

  config.checkpointDir = (dir_ / "ck").string();
  config.saveEvery = 3;
  config.steps = 4;
  TrainedRun first = train(plan, feeder, config);
  ASSERT_TRUE(first.status) << first.status.message();
  ASSERT_EQ(first.checkpoints.size(), 2u); // step 3, and the last step (4)
  EXPECT_EQ(first.checkpoints[0], config.checkpointDir + "/step-3");

  plan::Checkpoint manifest;
  std::string resumeDir, note;
  ASSERT_TRUE(
      openCheckpoint("--resume", config.checkpointDir + "/step-3", resumeDir, manifest, note));
  EXPECT_EQ(note, "");
  EXPECT_EQ(manifest.steps_done(), 3);
  TrainerConfig resumed = config;
  resumed.checkpointDir.clear();
  resumed.steps = 7;
  resumed.resume = &manifest;
  resumed.resumeDir = resumeDir;
  TrainedRun rest = train(plan, feeder, resumed);
  ASSERT_TRUE(rest.status) << rest.status.message();
  ASSERT_EQ(rest.records.size(), 4u);
  for (int k = 3; k < 7; ++k) {
    const StepRecord &a = full.records[k], &b = rest.records[k - 3];
    EXPECT_EQ(b.step, k);
    EXPECT_EQ(a.loss, b.loss) << "step " << k; // bit for bit
    EXPECT_EQ(a.gradNorm, b.gradNorm) << "step " << k;
    EXPECT_EQ(a.lr, b.lr) << "step " << k;
  }
}

TEST_F(TrainerTest, RanksAverageTheLoss) {
  const double lr = 0.05;
  plan::Plan plan = linearPlan(2, lr);
  ASSERT_TRUE(validatePlan(plan)) << validatePlan(plan).message();
  DataFeeder feeder;
  ASSERT_TRUE(feeder.load({{"x", data_}}, plan, plan.programs(0)));
  TrainerConfig config;
  config.steps = 3;
  config.schedule.lr = lr;
  config.schedule.totalSteps = 3;
  TrainedRun run = train(plan, feeder, config);
  ASSERT_TRUE(run.status) << run.status.message();
  ASSERT_EQ(run.records.size(), 3u);
  // Step k: rank r reads global micro-batch 2k + r (samples 2(2k+r), +1);
  // the loss is the ranks' mean, the update the mean gradient.
  double w[kWidth] = {1, 2, 3, 4};
  for (int k = 0; k < 3; ++k) {
    double loss = 0, g[kWidth] = {0, 0, 0, 0}, norm = 0;
    for (int r = 0; r < 2; ++r)
      for (int b = 0; b < kBatch; ++b)
        for (int j = 0; j < kWidth; ++j) {
          double x = sample((kBatch * (2 * k + r) + b) % kSamples, j);
          loss += w[j] * x / 2;
          g[j] += x / 2;
        }
    for (int j = 0; j < kWidth; ++j) {
      w[j] -= lr * g[j];
      norm += g[j] * g[j];
    }
    EXPECT_NEAR(run.records[k].loss, loss, 1e-5 * std::max(1.0, std::fabs(loss))) << "step " << k;
    EXPECT_NEAR(run.records[k].gradNorm, std::sqrt(norm), 1e-5) << "step " << k;
  }
}

TEST_F(TrainerTest, RefusesAPlanThatDoesNotTrain) {
  plan::Plan plan = linearPlan(1, 0.05);
  plan.mutable_programs(1)->mutable_outputs()->Clear(); // no grad_norm
  DataFeeder feeder;
  ASSERT_TRUE(feeder.load({{"x", data_}}, plan, plan.programs(0)));
  std::unique_ptr<Trainer> trainer;
  Status s = Trainer::create(plan, feeder, TrainerConfig{}, trainer);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("grad_norm"), std::string::npos) << s.message();
}

namespace {
/// Saves checkpoints of a two-rank run after steps 2, 4 and 6 into
/// |dir|/ck; returns the root.
std::string savedCheckpoints(const fs::path &dir, const std::string &data) {
  plan::Plan plan = linearPlan(2, 0.05);
  DataFeeder feeder;
  EXPECT_TRUE(feeder.load({{"x", data}}, plan, plan.programs(0)));
  TrainerConfig config;
  config.steps = 6;
  config.schedule.lr = 0.05;
  config.schedule.totalSteps = 6;
  config.checkpointDir = (dir / "ck").string();
  config.saveEvery = 2;
  TrainedRun run = train(plan, feeder, config);
  EXPECT_TRUE(run.status) << run.status.message();
  return config.checkpointDir;
}

void flipBytes(const std::string &path, int64_t at, int count) {
  std::string bytes;
  ASSERT_TRUE(readRegularFileForTest(path, bytes));
  for (int k = 0; k < count && at + k < (int64_t)bytes.size(); ++k)
    bytes[at + k] = (char)~bytes[at + k];
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

/// Rewrites |dir|/manifest.pb after |edit|, with a valid checksum (as a
/// hand-edited or maliciously made manifest would have).
void editManifest(const std::string &dir, const std::function<void(plan::Checkpoint &)> &edit) {
  plan::Checkpoint m;
  std::string bytes;
  ASSERT_TRUE(readRegularFileForTest(dir + "/manifest.pb", bytes));
  ASSERT_TRUE(m.ParseFromString(bytes));
  edit(m);
  // A version-1 manifest, which has no checksums (the field checks alone
  // must refuse it): its checksums cleared too, or the version would count
  // as damaged.
  m.set_version(1);
  m.clear_rank_checksums();
  m.set_manifest_checksum(0);
  FILE *f = std::fopen((dir + "/manifest.pb").c_str(), "wb");
  ASSERT_TRUE(f);
  std::string out = m.SerializeAsString();
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
}
} // namespace

TEST_F(TrainerTest, ADamagedShardFallsBackToThePreviousCheckpoint) {
  std::string root = savedCheckpoints(dir_, data_);
  std::string dir, note;
  plan::Checkpoint m;
  ASSERT_TRUE(openCheckpoint("--resume", root, dir, m, note));
  EXPECT_EQ(dir, root + "/step-6");
  // 64 bytes of rank 1's shard flipped: step-6 is refused, step-4 is used.
  flipBytes(root + "/step-6/rank-1.bin", 0, 64);
  ASSERT_TRUE(openCheckpoint("--resume", root, dir, m, note));
  EXPECT_EQ(dir, root + "/step-4");
  EXPECT_EQ(m.steps_done(), 4);
  EXPECT_NE(note.find("rank-1.bin: checksum mismatch"), std::string::npos) << note;
  EXPECT_NE(note.find("step-4, the newest complete checkpoint"), std::string::npos) << note;
  // Named explicitly, the damaged step is an error, not a fallback.
  Status s = openCheckpoint("--resume", root + "/step-6", dir, m, note);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
  // The manifest itself damaged, and then missing: step-4 again.
  flipBytes(root + "/step-6/rank-1.bin", 0, 64); // repaired
  flipBytes(root + "/step-6/manifest.pb", 20, 4);
  ASSERT_TRUE(openCheckpoint("--resume", root, dir, m, note));
  EXPECT_EQ(dir, root + "/step-4");
  fs::remove(root + "/step-6/manifest.pb");
  ASSERT_TRUE(openCheckpoint("--resume", root, dir, m, note));
  EXPECT_EQ(dir, root + "/step-4");
  // 'latest' gone: the newest complete step.
  fs::remove(root + "/latest");
  ASSERT_TRUE(openCheckpoint("--resume", root, dir, m, note));
  EXPECT_EQ(dir, root + "/step-4");
  EXPECT_NE(note.find("has no 'latest'"), std::string::npos) << note;
}

TEST_F(TrainerTest, ManifestFieldsAreValidatedBeforeUse) {
  std::string root = savedCheckpoints(dir_, data_);
  struct Case {
    const char *what;
    std::function<void(plan::Checkpoint &)> edit;
    const char *message;
  };
  // The hand-written plan has no parameter layouts: a tensor like the ones
  // zcc's plans list (w, 4 floats at the start of the state arena).
  auto tensor0 = [](plan::Checkpoint &m) {
    if (m.tensors_size() == 0) {
      plan::CheckpointTensor *t = m.add_tensors();
      t->set_name("w");
      t->add_shape(4);
      t->set_trainable(true);
    }
    return m.mutable_tensors(0);
  };
  std::vector<Case> cases = {
      {"a valid tensor (the control)", [&](plan::Checkpoint &m) { tensor0(m); }, ""},
      {"negative steps", [](plan::Checkpoint &m) { m.set_steps_done(-1); }, "steps_done -1"},
      {"huge negative steps", [](plan::Checkpoint &m) { m.set_steps_done(INT64_MIN); },
       "steps_done"},
      {"a 2^40 shape", [&](plan::Checkpoint &m) { tensor0(m)->set_shape(0, 1ll << 40); },
       "outside the state arena"},
      {"an overflowing shape",
       [&](plan::Checkpoint &m) {
         tensor0(m)->clear_shape();
         for (int k = 0; k < 4; ++k)
           tensor0(m)->add_shape(1ll << 20);
       },
       "invalid shape"},
      {"state_offset near INT64_MAX",
       [&](plan::Checkpoint &m) { tensor0(m)->set_state_offset(INT64_MAX - 2); }, "invalid layout"},
      {"a world of 0", [](plan::Checkpoint &m) { m.set_world_size(0); }, "world size 0"},
      {"a NaN loss scale", [](plan::Checkpoint &m) { m.set_loss_scale(NAN); }, "loss scaler"},
  };
  for (const Case &c : cases) {
    std::string dir = (dir_ / (std::string("m-") + std::to_string(&c - cases.data()))).string();
    fs::copy(root + "/step-4", dir);
    editManifest(dir, c.edit);
    plan::Checkpoint m;
    Status s = readManifest(dir, m);
    std::vector<NamedTensor> tensors;
    if (!*c.message) { // the control: read and consolidated
      ASSERT_TRUE(s) << s.message();
      ASSERT_TRUE(consolidate(dir, m, tensors));
      ASSERT_EQ(tensors.size(), 1u);
      // w after 4 SGD steps of two ranks (gradients averaged), in double.
      double w[kWidth] = {1, 2, 3, 4};
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < kWidth; ++j) {
          double g = 0;
          for (int r = 0; r < 2; ++r)
            for (int b = 0; b < kBatch; ++b)
              g += sample(((k * 2 + r) * kBatch + b) % kSamples, j) / 2;
          w[j] -= 0.05 * g;
        }
      for (int j = 0; j < kWidth; ++j)
        EXPECT_NEAR(tensors[0].data[j], w[j], 1e-5) << "w[" << j << "] after 4 steps";
      continue;
    }
    ASSERT_FALSE(s) << c.what;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.what << ": " << s.message();
    EXPECT_FALSE(consolidate(dir, m, tensors)) << c.what; // it validates too
  }
}
