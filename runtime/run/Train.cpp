//===- Train.cpp - zrun train: the trainer with its log, metrics and ranks ===//
#include "run/Run.h"

#include "cuda/CudaExecutor.h" // cudaStats
#include "exec/Profile.h"
#include "exec/Trace.h"
#include "launch/Launch.h"
#include "observe/MemoryMap.h"
#include "plan/PlanLoader.h"
#include "support/ByteSize.h"
#include "support/Files.h"
#include "support/Signals.h" // signalName
#include "support/SwapFile.h"
#include "train/Checkpoint.h"
#include "train/Dashboard.h"
#include "train/Data.h"
#include "train/Metrics.h"
#include "train/TensorBoard.h"
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
  auto given = [](auto &field, const auto &flag) {
    if (flag)
      field = *flag;
  };
  given(s.name, t.lrSchedule);
  given(s.lr, t.lr);
  given(s.warmupSteps, t.warmupSteps);
  given(s.totalSteps, t.totalSteps);
  given(s.warmupLog, t.warmupLog);
  given(s.warmupMinLr, t.warmupMinLr);
  given(s.warmupMinRatio, t.warmupMinRatio);
  given(s.cosMinRatio, t.cosMinRatio);
  return s;
}

namespace {

/// --resume: the checkpoint's manifest, and whether this plan saved it
/// (|samePlan|: the ranks' bytes load as they are) or is another plan of the
/// same model that its logical layout fits; and that the run continues the
/// same data order.
Status checkResume(const plan::Plan &plan, uint64_t planHash, const TrainOptions &t,
                   const std::string &dir, const plan::Checkpoint &resumed, bool &samePlan) {
  samePlan = resumed.plan_hash() == planHash && resumed.world_size() == plan.world_size() &&
             resumed.state_arena_bytes() == checkpointStateBytes(plan);
  if (!samePlan)
    ZRT_RETURN_IF_ERROR(checkReshard(plan, resumed, dir));
  if (resumed.shuffle_seed() != t.shuffleSeed)
    return errorf("--resume ", dir, ": the run ",
                  resumed.shuffle_seed() < 0
                      ? std::string("did not shuffle")
                      : "shuffled with seed " + std::to_string(resumed.shuffle_seed()),
                  "; pass the same --shuffle to continue the same data order");
  if (resumed.has_dropout_seed() &&
      namedBuffer(findProgram(plan, "micro_step"), false, "dropout_rng") >= 0 &&
      resumed.dropout_seed() != (uint64_t)t.seed)
    return errorf("--resume ", dir, ": the run's dropout seed was ", resumed.dropout_seed(),
                  "; pass --seed ", resumed.dropout_seed(), " to continue the same masks");
  if (resumed.steps_done() >= t.steps)
    return errorf("--resume ", dir, ": the checkpoint is at step ", resumed.steps_done(),
                  ", --steps ", t.steps, " asks for no more; raise --steps");
  return Status::ok();
}

} // namespace

Status zrt::train(const RunOptions &options, const TrainOptions &t,
                  const std::optional<LaunchEnv> &job, TrainOutcome &outcome) {
  outcome = TrainOutcome();
  const bool rankZero = !job || job->rank == 0; // logs, writes metrics, locks
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
  config.saveEveryMinutes = t.saveEveryMinutes;
  config.shuffleSeed = t.shuffleSeed;
  config.dropoutSeed = (uint64_t)t.seed;
  config.profile = t.profile;
  if (!t.trace.empty()) {
    // A run shorter than the default window traces what it has after its
    // first step (or its only step).
    config.traceFrom = std::min(t.traceFrom, std::max<int64_t>(0, t.steps - 1));
    config.traceTo = std::min(t.traceTo, t.steps);
  }
  config.ranksAreProcesses = job.has_value();
  config.crashInSave = t.crashInSave;
  config.slowSave = t.slowSave;
  config.asyncSave = !t.syncSave;
  config.keepLast = t.keepLast;
  const int world = plan.world_size();
  if (job && job->world != world)
    return errorf(options.plan, ": the plan is for world size ", world, ", the launcher started ",
                  job->world, " ranks (", job->source, "); compile with --world-size ", job->world);
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
    bool samePlan = true;
    ZRT_RETURN_IF_ERROR(checkResume(plan, config.planHash, t, config.resumeDir, resumed, samePlan));
    config.resume = &resumed;
    config.reshard = !samePlan;
    if (rankZero && samePlan)
      std::printf("resuming from %s: step %lld\n", config.resumeDir.c_str(),
                  (long long)resumed.steps_done());
    else if (rankZero)
      std::printf("resuming from %s: step %lld, saved by another plan (%s, world size %d, ZeRO "
                  "stage %d), resharded to this one (world size %d, stage %d)\n",
                  config.resumeDir.c_str(), (long long)resumed.steps_done(),
                  resumed.plan_source().c_str(), resumed.world_size(), resumed.zero_stage(),
                  plan.world_size(), plan.zero_stage());
  }
  std::unique_ptr<WeightFile> weights;
  ZRT_RETURN_IF_ERROR(openWeights(options, plan, config.resume != nullptr, weights));
  const plan::Program *micro = findProgram(plan, "micro_step");
  DataFeeder feeder;
  ZRT_RETURN_IF_ERROR(loadData(t.tokens, options.data, plan, *micro, feeder));
  if (t.shuffleSeed >= 0)
    feeder.shuffle((uint64_t)t.shuffleSeed);
  // --eval-data: a token file cut as --tokens is, or NAME=FILE.npy arrays.
  DataFeeder evalFeeder;
  if (!t.evalData.empty()) {
    const plan::Program *eval = findProgram(plan, "eval");
    if (!eval)
      return errorf("--eval-data: ", options.plan, " has no 'eval' program");
    TokenSource evalTokens;
    NamedFiles evalArrays;
    for (const std::string &item : t.evalData) {
      size_t eq = item.find('=');
      if (eq == std::string::npos && evalTokens.path.empty() && t.evalData.size() == 1)
        evalTokens.path = item;
      else if (eq != std::string::npos && eq > 0)
        evalArrays.push_back({item.substr(0, eq), item.substr(eq + 1)});
      else
        return errorf("--eval-data ", item,
                      ": give one token file (FILE.bin) or NAME=FILE.npy "
                      "arrays, one per input");
    }
    if (!evalTokens.path.empty()) {
      evalTokens.bytesPerToken = t.tokens.bytesPerToken;
      evalTokens.eos = t.tokens.eos;
      evalTokens.promptMask = t.evalPromptMask;
      evalTokens.flag = "--eval-data";
      evalTokens.maskFlag = "--eval-prompt-mask";
    } else if (!t.evalPromptMask.empty()) {
      return errorf("--eval-prompt-mask goes with --eval-data FILE.bin (a token file)");
    }
    ZRT_RETURN_IF_ERROR(loadData(evalTokens, evalArrays, plan, *eval, evalFeeder));
    config.evalFeeder = &evalFeeder;
    config.evalEvery = t.evalEvery > 0 ? t.evalEvery : t.steps;
    int64_t global = planMicroBatch(plan) * world;
    config.evalBatches = t.evalBatches > 0 ? t.evalBatches : evalFeeder.batchesIn(global);
  } else if (t.evalEvery || t.evalBatches || !t.evalPromptMask.empty()) {
    return errorf("--eval-every, --eval-batches and --eval-prompt-mask go with --eval-data");
  }
  config.stop = t.stop; // SIGTERM, SIGINT, SIGHUP: stop after the step in flight
  std::unique_ptr<Trainer> trainer;
  if (Status s = Trainer::create(plan, feeder, config, trainer); !s)
    return errorf(options.plan, ": ", s.message());
  // Less data than one step reads: every step repeats samples (the feeder
  // wraps around), which is rarely what was meant.
  if (rankZero && feeder.samples() < trainer->samplesPerStep())
    std::fprintf(stderr,
                 "zrun: warning: the data holds %lld sample%s, fewer than one step's %lld "
                 "(micro-batch x accumulation x ranks): each step reads some of them more than "
                 "once (%.1f epochs a step)\n",
                 (long long)feeder.samples(), feeder.samples() == 1 ? "" : "s",
                 (long long)trainer->samplesPerStep(),
                 (double)trainer->samplesPerStep() / std::max<int64_t>(1, feeder.samples()));

  // Every output checked before the first step (OutputPaths: not an input,
  // not inside a folder read whole or a checkpoint, not another output's
  // file, not a device, directory or symlink); the checkpoint directory
  // locked for the run.
  OutputPaths outputs;
  for (const std::string &in :
       {options.plan, options.weights, t.tokens.path, t.tokens.promptMask, t.evalPromptMask})
    outputs.addInput(in);
  for (const std::string &item : t.evalData)
    outputs.addInput(item.substr(item.find('=') + 1));
  for (const auto &[name, path] : options.data)
    outputs.addInput(path);
  std::error_code ec;
  if (!options.weights.empty() && std::filesystem::is_directory(options.weights, ec))
    outputs.addInputFolder(options.weights); // a Hugging Face checkpoint folder
  if (!config.resumeDir.empty()) {
    outputs.addInputFolder(config.resumeDir);
    outputs.addCheckpointRoot(std::filesystem::path(config.resumeDir).parent_path().string());
  }
  if (!t.checkpointDir.empty())
    outputs.addCheckpointRoot(t.checkpointDir);
  DirectoryLock lock;
  if (rankZero && !t.checkpointDir.empty()) {
    ZRT_RETURN_IF_ERROR(checkOutputDirectory("--checkpoint-dir", t.checkpointDir));
    ZRT_RETURN_IF_ERROR(lock.acquire("--checkpoint-dir", t.checkpointDir));
  }
  const std::string tracePath = job ? rankTracePath(t.trace, job->rank) : t.trace;
  if (!tracePath.empty())
    ZRT_RETURN_IF_ERROR(outputs.claim("--trace", tracePath));
  MetricsFile metrics;
  if (rankZero && !t.metrics.empty()) {
    ZRT_RETURN_IF_ERROR(outputs.claim("--metrics", t.metrics));
    // A resumed run continues its metrics; a fresh one starts them.
    ZRT_RETURN_IF_ERROR(metrics.open(t.metrics, /*append=*/config.resume != nullptr));
  }
  const int64_t rankBytes = plannedBytes(plan);
  // What --dashboard and --memory-page show as measured: the arenas each
  // rank of this process allocated (as planned), and on the GPU the most
  // device memory in use at a program's end.
  auto measure = [&, world] {
    std::vector<MeasuredMemory> out;
    out.push_back({job         ? "rank " + std::to_string(job->rank) + " allocated"
                   : world > 1 ? "each of " + std::to_string(world) + " ranks allocated"
                               : "rank 0 allocated",
                   rankBytes});
    for (const auto &[device, bytes] : cudaStats().deviceBytes)
      out.push_back({"GPU " + std::to_string(device) + " in use", bytes});
    return out;
  };
  const double stepFlops = stepMatmulFlops(plan); // one rank's, per step
  Dashboard dashboard;
  if (rankZero && !t.dashboard.empty()) {
    ZRT_RETURN_IF_ERROR(outputs.claim("--dashboard", t.dashboard));
    ZRT_RETURN_IF_ERROR(dashboard.open(t.dashboard, {options.plan, backendOf(options, plan), &plan,
                                                     t.steps, stepFlops, t.peakTflops, measure}));
  }
  if (rankZero && !t.memoryPage.empty())
    ZRT_RETURN_IF_ERROR(outputs.claim("--memory-page", t.memoryPage));
  TensorBoardWriter tensorboard;
  if (rankZero && !t.tensorboard.empty()) {
    ZRT_RETURN_IF_ERROR(outputs.claimFolder("--tensorboard", t.tensorboard));
    ZRT_RETURN_IF_ERROR(checkOutputDirectory("--tensorboard", t.tensorboard));
    ZRT_RETURN_IF_ERROR(tensorboard.open(t.tensorboard));
  }
  if (options.printMemory && rankZero)
    std::printf("arena bytes: %lld%s\n", (long long)rankBytes, world > 1 ? " per rank" : "");
  StepLog log(t.steps, plan.training().has_loss_scaling());
  int64_t stepsDone = trainer->firstStep();
  trainer->onStep = [&](const StepRecord &r) {
    log.print(r);
    metrics.write(r, rankBytes);
    double tflops = r.ms > 0 ? stepFlops / (r.ms * 1e-3) / 1e12 : 0;
    double mfu = t.peakTflops > 0 ? tflops / t.peakTflops : 0;
    dashboard.step(r, rankBytes, tflops, mfu);
    tensorboard.write(r, rankBytes, tflops, mfu);
    stepsDone = r.step + 1;
  };
  trainer->onCheckpoint = [](const std::string &dir) {
    std::printf("checkpoint: %s\n", dir.c_str());
    std::fflush(stdout);
  };
  std::vector<RankTrace> traces(job ? 1 : world); // --trace: this process's ranks
  auto trainRank = [&](int rank, Communicator *comm) -> Status {
    std::unique_ptr<ExecutorBase> executor;
    ZRT_RETURN_IF_ERROR(makeExecutor(options, plan, rank, comm, weights.get(),
                                     job ? job->localRank : -1, executor));
    ZRT_RETURN_IF_ERROR(trainer->run(rank, *executor, comm));
    traces[job ? 0 : rank] = {rank, executor->takeTrace()};
    if (rank == 0)
      for (const std::string &line : executor->tuningReport())
        std::printf("%s\n", line.c_str());
    if (rank == 0 && t.profile)
      printProfile(plan, executor->profile(),
                   std::max<int64_t>(1, t.steps - trainer->firstStep() - 1));
    if (const SwapFile *f = executor->swapFile(); f && rank == 0)
      std::fprintf(stderr,
                   "zrun: NVMe: rank 0 read %s and wrote %s of its swap file (%s of it "
                   "through the bounce buffer: unaligned)\n",
                   showByteSize(f->bytesRead()).c_str(), showByteSize(f->bytesWritten()).c_str(),
                   showByteSize(f->bytesBounced()).c_str());
    return Status::ok();
  };
  Status ran = Status::ok();
  if (job) {
    // This process is one rank; NCCL (CUDA) or Gloo (CPU) connects it to
    // the others.
    std::unique_ptr<Communicator> comm;
    ran = backendOf(options, plan) == "cuda" ? makeNcclCommunicator(*job, -1, t.commTimeout, comm)
                                             : makeGlooCommunicator(*job, t.commTimeout, comm);
    if (ran && !(ran = trainRank(job->rank, comm.get()))) {
      comm->abort("rank failed");
      std::string prefix = "rank " + std::to_string(job->rank) + ": ";
      if (ran.message().rfind(prefix, 0) != 0) // name the rank once
        ran = Status::error(prefix + ran.message());
    }
  } else {
    ran = runRanks(world, trainRank);
  }
  if (!ran) {
    metrics.end("failed", stepsDone, ran.message());
    (void)dashboard.close("failed", ran.message());
    return ran;
  }
  if (!tracePath.empty()) {
    ZRT_RETURN_IF_ERROR(
        writeTrace(tracePath, plan, traces, backendOf(options, plan), options.plan));
    if (rankZero)
      std::printf("trace: %s (steps %lld to %lld%s)\n", tracePath.c_str(),
                  (long long)config.traceFrom, (long long)config.traceTo - 1,
                  job && world > 1 ? "; the other ranks beside it as NAME.rankN.json" : "");
  }
  reportCudaStats(options, plan, job ? 1 : world);
  if (int64_t skipped = trainer->skippedSteps())
    std::printf("%lld of %lld steps skipped on fp16 overflow\n", (long long)skipped,
                (long long)t.steps);
  if (int sig = trainer->stoppedBy()) {
    outcome.stoppedBy = sig;
    outcome.stepsDone = trainer->stoppedAt();
    outcome.checkpoint = trainer->stopCheckpoint();
    std::string reason = std::string(signalName(sig)) + " after step " +
                         std::to_string(outcome.stepsDone) +
                         (outcome.checkpoint.empty() ? "; no checkpoint (no --checkpoint-dir)"
                                                     : "; checkpoint " + outcome.checkpoint);
    metrics.end("stopped", outcome.stepsDone, reason);
    ZRT_RETURN_IF_ERROR(dashboard.close("stopped", reason));
    if (rankZero)
      std::fprintf(stderr, "zrun: stopped by %s\n", reason.c_str());
  }
  if (rankZero)
    if (std::string summary = log.summary(); !summary.empty())
      std::printf("zrun: %s\n", summary.c_str());
  ZRT_RETURN_IF_ERROR(dashboard.close("finished"));
  ZRT_RETURN_IF_ERROR(tensorboard.close());
  if (rankZero && !t.memoryPage.empty()) {
    std::string html = memoryPageHtml(plan, options.plan, measure());
    if (Status s = writeFileAtomically(t.memoryPage, html.data(), html.size()); !s)
      return errorf("--memory-page ", t.memoryPage, ": ", s.message());
  }
  return metrics.close();
}
