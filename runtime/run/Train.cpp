//===- Train.cpp - zrun train: the trainer with its log, metrics and ranks ===//
#include "run/Run.h"

#include "exec/Profile.h"
#include "launch/Launch.h"
#include "plan/PlanLoader.h"
#include "train/Checkpoint.h"
#include "train/Data.h"
#include "train/Metrics.h"
#include "train/Trainer.h"

#include <algorithm>
#include <cstdio>

using namespace zrt;

Schedule zrt::resolveSchedule(const plan::Plan &plan, const TrainOptions &t) {
  Schedule s;
  s.lr = plan.training().lr();
  s.totalSteps = t.steps;
  if (plan.training().has_schedule() && !t.lrSchedule) {
    // The DeepSpeed config's scheduler (zcc --deepspeed); its "auto" steps
    // (-1) are the flags'.
    const plan::LrSchedule &ps = plan.training().schedule();
    s.name = ps.name();
    s.lr = ps.lr();
    if (ps.warmup_steps() >= 0)
      s.warmupSteps = ps.warmup_steps();
    if (ps.total_steps() > 0)
      s.totalSteps = ps.total_steps();
    s.warmupLog = ps.warmup_log();
    s.warmupMinLr = ps.warmup_min_lr();
    s.warmupMinRatio = ps.warmup_min_ratio();
    s.cosMinRatio = ps.cos_min_ratio();
  }
  // The flags given override field by field.
  if (t.lrSchedule)
    s.name = *t.lrSchedule;
  if (t.lr)
    s.lr = *t.lr;
  if (t.warmupSteps)
    s.warmupSteps = *t.warmupSteps;
  if (t.totalSteps)
    s.totalSteps = *t.totalSteps;
  if (t.warmupLog)
    s.warmupLog = *t.warmupLog;
  if (t.warmupMinLr)
    s.warmupMinLr = *t.warmupMinLr;
  if (t.warmupMinRatio)
    s.warmupMinRatio = *t.warmupMinRatio;
  if (t.cosMinRatio)
    s.cosMinRatio = *t.cosMinRatio;
  return s;
}

namespace {

/// --resume: the checkpoint's manifest, refused unless this plan saved it
/// and the run continues the same data order.
Status checkResume(const plan::Plan &plan, uint64_t planHash, const TrainOptions &t,
                   const std::string &dir, const plan::Checkpoint &resumed) {
  if (resumed.plan_hash() != planHash || resumed.world_size() != plan.world_size() ||
      resumed.state_arena_bytes() != checkpointStateBytes(plan))
    return errorf("--resume ", dir, ": the checkpoint was saved by another plan (",
                  resumed.plan_source(), ", world size ", resumed.world_size(),
                  "); resume with the plan that saved it");
  if (resumed.shuffle_seed() != t.shuffleSeed)
    return errorf("--resume ", dir, ": the run ",
                  resumed.shuffle_seed() < 0
                      ? std::string("did not shuffle")
                      : "shuffled with seed " + std::to_string(resumed.shuffle_seed()),
                  "; pass the same --shuffle to continue the same data order");
  if (resumed.steps_done() >= t.steps)
    return errorf("--resume ", dir, ": the checkpoint is at step ", resumed.steps_done(),
                  ", --steps ", t.steps, " asks for no more; raise --steps");
  return Status::ok();
}

} // namespace

Status zrt::train(const RunOptions &options, const TrainOptions &t,
                  const std::optional<LaunchEnv> &job) {
  plan::Plan plan;
  ZRT_RETURN_IF_ERROR(loadRunPlan(options, plan));
  if (!plan.has_training())
    return errorf(options.plan, ": the plan does not train (its model has no trainable "
                                "parameters; see zcc --trainable/--frozen)");
  TrainerConfig config;
  config.steps = t.steps;
  config.schedule = resolveSchedule(plan, t);
  ZRT_RETURN_IF_ERROR(config.schedule.validate());
  config.checkpointDir = t.checkpointDir;
  config.saveEvery = t.saveEvery;
  config.shuffleSeed = t.shuffleSeed;
  config.profile = t.profile;
  config.ranksAreProcesses = job.has_value();
  config.crashInSave = t.crashInSave;
  const int world = plan.world_size();
  if (job && job->world != world)
    return errorf(options.plan, ": the plan is for world size ", world, ", the launcher started ",
                  job->world, " ranks (", job->source, "); compile with --world-size ", job->world);
  if (job && backendOf(options, plan) != "cuda")
    return errorf("multi-process runs use NCCL: pass --backend cuda (or compile with "
                  "zcc --target cuda)");
  if (!t.checkpointDir.empty() || !t.resume.empty())
    ZRT_RETURN_IF_ERROR(hashFile(options.plan, config.planHash));
  // --resume: the trainer state of the checkpoint; every rank then loads its
  // state arena.
  plan::Checkpoint resumed;
  if (!t.resume.empty()) {
    std::string note;
    ZRT_RETURN_IF_ERROR(openCheckpoint("--resume", t.resume, config.resumeDir, resumed, note));
    if (!note.empty())
      std::fprintf(stderr, "zrun: --resume: %s\n", note.c_str());
    ZRT_RETURN_IF_ERROR(checkResume(plan, config.planHash, t, config.resumeDir, resumed));
    config.resume = &resumed;
    std::printf("resuming from %s: step %lld\n", config.resumeDir.c_str(),
                (long long)resumed.steps_done());
  }
  std::unique_ptr<WeightFile> weights;
  ZRT_RETURN_IF_ERROR(openWeights(options, plan, config.resume != nullptr, weights));
  const plan::Program *micro = findProgram(plan, "micro_step");
  DataFeeder feeder;
  ZRT_RETURN_IF_ERROR(t.tokens.empty() ? feeder.load(options.data, plan, *micro)
                                       : feeder.loadTokens(t.tokens, t.tokenBytes, plan, *micro));
  if (t.shuffleSeed >= 0)
    feeder.shuffle((uint64_t)t.shuffleSeed);
  std::unique_ptr<Trainer> trainer;
  if (Status s = Trainer::create(plan, feeder, config, trainer); !s)
    return errorf(options.plan, ": ", s.message());

  const bool rankZero = !job || job->rank == 0; // logs and writes the metrics
  const int64_t rankBytes = plannedBytes(plan);
  if (options.printMemory && rankZero)
    std::printf("arena bytes: %lld%s\n", (long long)rankBytes, world > 1 ? " per rank" : "");
  MetricsFile metrics; // abandoned (removed) unless committed
  ZRT_RETURN_IF_ERROR(metrics.open(rankZero ? t.metrics : ""));
  StepLog log(t.steps, plan.training().has_loss_scaling());
  trainer->onStep = [&](const StepRecord &r) {
    log.print(r);
    metrics.write(r, rankBytes);
  };
  trainer->onCheckpoint = [](const std::string &dir) {
    std::printf("checkpoint: %s\n", dir.c_str());
    std::fflush(stdout);
  };
  auto trainRank = [&](int rank, Communicator *comm) -> Status {
    std::unique_ptr<ExecutorBase> executor;
    ZRT_RETURN_IF_ERROR(makeExecutor(options, plan, rank, comm, weights.get(),
                                     job ? job->localRank : -1, executor));
    ZRT_RETURN_IF_ERROR(trainer->run(rank, *executor, comm));
    if (rank == 0 && t.profile)
      printProfile(plan, executor->profile(),
                   std::max<int64_t>(1, t.steps - trainer->firstStep() - 1));
    return Status::ok();
  };
  if (job) {
    // This process is one rank; NCCL connects it to the others.
    std::unique_ptr<Communicator> comm;
    ZRT_RETURN_IF_ERROR(makeNcclCommunicator(*job, -1, t.commTimeout, comm));
    if (Status s = trainRank(job->rank, comm.get()); !s) {
      comm->abort("rank failed");
      std::string prefix = "rank " + std::to_string(job->rank) + ": ";
      if (s.message().rfind(prefix, 0) == 0) // name the rank once
        return s;
      return Status::error(prefix + s.message());
    }
  } else {
    ZRT_RETURN_IF_ERROR(runRanks(world, trainRank));
  }
  reportCudaStats(options, plan, job ? 1 : world);
  if (int64_t skipped = trainer->skippedSteps())
    std::printf("%lld of %lld steps skipped on fp16 overflow\n", (long long)skipped,
                (long long)t.steps);
  return metrics.commit();
}
