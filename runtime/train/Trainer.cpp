//===- Trainer.cpp - the training step loop -------------------------------===//
#include "train/Trainer.h"

#include "plan/PlanLoader.h"
#include "train/Checkpoint.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

using namespace zrt;

Status Trainer::create(const plan::Plan &plan, const DataFeeder &feeder, TrainerConfig config,
                       std::unique_ptr<Trainer> &out) {
  std::unique_ptr<Trainer> t(new Trainer(plan, feeder, std::move(config)));
  t->micro_ = findProgram(plan, "micro_step");
  t->apply_ = findProgram(plan, "apply");
  t->lossBuffer_ = namedBuffer(t->micro_, true, "loss");
  // zcc --optimizer-in-backward: micro_step updates the parameters (it takes
  // the step's lr and returns the norm; apply is empty) -- one micro-step a
  // step, which zcc checked.
  t->inBackward_ = namedBuffer(t->micro_, false, "lr") >= 0;
  const plan::Program *optimizer = t->inBackward_ ? t->micro_ : t->apply_;
  t->lrBuffer_ = namedBuffer(optimizer, false, "lr");
  t->normBuffer_ = namedBuffer(optimizer, true, "grad_norm");
  if (t->inBackward_ && plan.training().grad_accum_steps() > 1)
    return Status::error("the plan updates the parameters in micro_step (zcc "
                         "--optimizer-in-backward) but accumulates gradients over several "
                         "micro-steps: compile it again (zcc applies the update in the "
                         "backward only to steps of one micro-step)");
  if (!plan.has_training() || t->lossBuffer_ < 0 || t->lrBuffer_ < 0 || t->normBuffer_ < 0)
    return Status::error("the plan does not train: its programs lack micro_step's loss, or "
                         "apply's lr or grad_norm");
  // fp16: the dynamic loss scale, fed to both programs; apply says whether
  // the step overflowed (and was skipped in place). Every rank keeps a
  // scaler; their decisions agree because the overflow flag is global.
  if (plan.training().has_loss_scaling()) {
    const plan::LossScaling &ls = plan.training().loss_scaling();
    t->scaling_ = LossScalerConfig{ls.static_scale(), ls.initial_scale(),          ls.window(),
                                   ls.hysteresis(),   ls.consecutive_hysteresis(), ls.min_scale()};
    t->microScaleBuffer_ = namedBuffer(t->micro_, false, "loss_scale");
    t->applyScaleBuffer_ = namedBuffer(t->apply_, false, "loss_scale");
    t->overflowBuffer_ = namedBuffer(t->apply_, true, "overflow");
    if (t->microScaleBuffer_ < 0 || t->applyScaleBuffer_ < 0 || t->overflowBuffer_ < 0)
      return Status::error("the plan scales the loss but its programs lack loss_scale or "
                           "overflow");
  }
  t->dropoutRngBuffer_ = namedBuffer(t->micro_, false, "dropout_rng");
  int64_t world = plan.world_size();
  // Tokens per step: the elements of one sample of the first data input,
  // over the whole global batch.
  for (const plan::NamedBuffer &in : t->micro_->inputs())
    if (!isTrainerInput(in.name())) {
      int64_t n = 1;
      for (int64_t d : plan.buffers(in.buffer()).shape())
        n *= d;
      t->tokens_ = n * plan.training().grad_accum_steps() * world;
      t->microBatch_ =
          plan.buffers(in.buffer()).shape_size() > 0 ? plan.buffers(in.buffer()).shape(0) : 1;
      break;
    }
  if (t->config_.evalFeeder) {
    t->eval_ = findProgram(plan, "eval");
    t->evalLossBuffer_ = t->eval_ ? namedBuffer(t->eval_, true, "loss") : -1;
    if (t->evalLossBuffer_ < 0)
      return Status::error("--eval-data: the plan has no 'eval' program with a loss");
    if (t->config_.evalEvery < 1 || t->config_.evalBatches < 1)
      return Status::error("--eval-every and --eval-batches must be positive");
  }
  if (t->config_.resume)
    t->firstStep_ = t->config_.resume->steps_done();
  t->stoppedBy_ = 0;
  if (!t->config_.checkpointDir.empty() && t->config_.saveEvery < 0)
    return Status::error("the checkpoint interval must be positive");
  t->rankLoss_.assign(world, 0.0);
  t->rankValue_.assign(world, 0.0);
  t->pending_.resize(world);
  t->lastSave_ = std::chrono::steady_clock::now();
  out = std::move(t);
  return Status::ok();
}

Trainer::~Trainer() {
  for (auto &p : pending_)
    if (p && p->writer.joinable())
      p->writer.join();
}

Status Trainer::save(int rank, ExecutorBase &executor, Communicator *comm, int64_t stepsDone,
                     int64_t applied, const std::optional<LossScaler> &scaler, bool async) {
  auto sync = [&]() { return comm ? comm->barrier() : Status::ok(); };
  const std::string &root = config_.checkpointDir;
  std::string tmp;
  if (rank == 0)
    ZRT_RETURN_IF_ERROR(beginCheckpoint(root, stepsDone, tmp));
  ZRT_RETURN_IF_ERROR(sync());
  // The state as the step left it, copied to host memory; the disk write
  // goes on in a thread while the next steps run.
  std::unique_ptr<PendingSave> &p = pending_[rank];
  p = std::make_unique<PendingSave>();
  p->stepsDone = stepsDone;
  // The NVMe arena (a swap file) is not copied into memory: it goes from
  // the swap file into the checkpoint's file a piece at a time, now, before
  // the next step changes it; the rest is written behind the steps.
  auto state = std::make_shared<std::vector<char>>();
  const int64_t nvmeBytes = plan_.nvme_arena_bytes();
  ZRT_RETURN_IF_ERROR(executor.saveState(*state, /*withNvme=*/false));
  if (nvmeBytes > 0)
    ZRT_RETURN_IF_ERROR(writeRankTail(
        checkpointTmpDir(root, stepsDone), rank, (int64_t)state->size(), nvmeBytes,
        [&](int64_t at, char *data, int64_t n) { return executor.readNvme(at, data, n); }));
  if (rank == 0) {
    plan::Checkpoint m = describeCheckpoint(plan_, config_.planHash);
    m.set_steps_done(stepsDone);
    m.set_steps_applied(applied);
    m.set_shuffle_seed(config_.shuffleSeed);
    if (dropoutRngBuffer_ >= 0)
      m.set_dropout_seed(config_.dropoutSeed);
    if (scaler) {
      LossScaler::State st = scaler->state();
      m.set_loss_scale(st.scale);
      m.set_scaler_hysteresis(st.remainingHysteresis);
      m.set_scaler_iteration(st.iteration);
      m.set_scaler_last_overflow(st.lastOverflow);
    }
    p->manifest = std::move(m);
  }
  PendingSave *raw = p.get();
  // Every rank names the directory itself: as processes, only rank 0 ran
  // beginCheckpoint.
  std::string dir = checkpointTmpDir(root, stepsDone);
  double delay =
      config_.slowSave > 0 && stepsDone > firstStep_ + config_.saveEvery ? config_.slowSave : 0.0;
  raw->writer = std::thread([raw, state, dir, rank, delay, nvmeBytes]() {
    // The lowest CPU priority: the copy into the page cache yields to the
    // training's threads (Linux: a thread's own nice value).
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    if (delay > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    raw->status = writeRankState(dir, rank, *state, nvmeBytes);
    raw->done.store(true, std::memory_order_release);
  });
  if (!async) {
    bool committed = false;
    ZRT_RETURN_IF_ERROR(commitSave(rank, comm, /*wait=*/true, committed));
  }
  return Status::ok();
}

Status Trainer::commitSave(int rank, Communicator *comm, bool wait, bool &committed) {
  committed = false;
  std::unique_ptr<PendingSave> &p = pending_[rank];
  if (!p)
    return Status::ok();
  if (wait && p->writer.joinable())
    p->writer.join();
  // Every rank's shard is on disk, or the checkpoint stays invisible.
  double done = p->done.load(std::memory_order_acquire) ? 1.0 : 0.0;
  ZRT_RETURN_IF_ERROR(meanOverRanks(rank, comm, done));
  if (done < 1.0)
    return Status::ok();
  if (p->writer.joinable())
    p->writer.join();
  Status written = p->status;
  double failed = written ? 0.0 : 1.0;
  ZRT_RETURN_IF_ERROR(meanOverRanks(rank, comm, failed));
  int64_t stepsDone = p->stepsDone;
  plan::Checkpoint manifest = std::move(p->manifest);
  p.reset();
  if (!written)
    return written;
  if (failed > 0)
    return errorf("another rank could not write its part of checkpoint step-", stepsDone);
  auto sync = [&]() { return comm ? comm->barrier() : Status::ok(); };
  if (rank == 0) {
    std::function<void()> crash;
    if (config_.crashInSave)
      crash = [] {
        std::fprintf(stderr, "zrun: --test-crash-in-save: killed in the middle of a save\n");
        std::fflush(stderr);
        std::raise(SIGKILL);
      };
    ZRT_RETURN_IF_ERROR(finishCheckpoint(config_.checkpointDir,
                                         checkpointTmpDir(config_.checkpointDir, stepsDone),
                                         stepsDone, manifest, crash));
    if (config_.keepLast > 0)
      pruneCheckpoints(config_.checkpointDir, config_.keepLast);
    if (onCheckpoint)
      onCheckpoint(config_.checkpointDir + "/step-" + std::to_string(stepsDone));
  }
  committed = true;
  return sync();
}

Status Trainer::meanOverRanks(int rank, Communicator *comm, double &value) {
  const int world = plan_.world_size();
  if (world == 1)
    return Status::ok();
  if (config_.ranksAreProcesses) {
    float v = (float)value;
    ZRT_RETURN_IF_ERROR(comm->allReduce(&v, &v, 1, ReduceOp::Avg));
    value = v;
    return Status::ok();
  }
  rankValue_[rank] = value;
  ZRT_RETURN_IF_ERROR(comm->barrier());
  double sum = 0;
  for (double v : rankValue_)
    sum += v;
  ZRT_RETURN_IF_ERROR(comm->barrier()); // everyone has read rankValue_
  value = sum / world;
  return Status::ok();
}

Status Trainer::agreeOnStop(int rank, Communicator *comm, int &signal) {
  const int world = plan_.world_size();
  signal = config_.stop ? config_.stop->load() : 0;
  if (world > 1 && config_.ranksAreProcesses) {
    float v = signal ? 1.0f : 0.0f;
    ZRT_RETURN_IF_ERROR(comm->allReduce(&v, &v, 1, ReduceOp::Sum));
    if (v > 0 && !signal)
      signal = SIGTERM; // another rank's
  } else if (world > 1) {
    if (rank == 0)
      stopShared_ = signal;
    ZRT_RETURN_IF_ERROR(comm->barrier());
    signal = stopShared_;
    ZRT_RETURN_IF_ERROR(comm->barrier()); // everyone has read it
  }
  return Status::ok();
}

Status Trainer::evaluate(int rank, ExecutorBase &executor, Communicator *comm, double &loss,
                         int &stopSignal) {
  // Batch b of rank r: the r-th slice of the evaluation set's global batch b
  // (as zrun eval cuts it).
  const int world = plan_.world_size();
  loss = 0;
  stopSignal = 0;
  for (int64_t b = 0; b < config_.evalBatches; ++b) {
    // A long evaluation answers a stop signal between its batches, as the
    // training loop does between steps.
    if (b > 0) {
      ZRT_RETURN_IF_ERROR(agreeOnStop(rank, comm, stopSignal));
      if (stopSignal)
        return Status::ok();
    }
    const int64_t batch = b * world + rank;
    Status s = config_.evalFeeder->feed(batch, executor, *eval_);
    if (s)
      s = executor.run(*eval_);
    if (!s)
      return errorf(s.message(), " (evaluation batch ", b, " of rank ", rank, ": ",
                    config_.evalFeeder->samplesOf(batch, microBatch_), " of --eval-data)");
    loss += *executor.buffer(evalLossBuffer_).as<float>();
  }
  loss /= config_.evalBatches;
  return meanOverRanks(rank, comm, loss);
}

Status Trainer::run(int rank, ExecutorBase &executor, Communicator *comm) {
  const int world = plan_.world_size();
  const int64_t accum = plan_.training().grad_accum_steps(), steps = config_.steps;
  if (config_.profile)
    executor.enableProfiling();
  std::optional<LossScaler> scaler;
  if (scaling_)
    scaler.emplace(*scaling_);
  // The schedule advances on applied steps only: DeepSpeed does not step
  // its lr scheduler after an fp16 overflow.
  int64_t applied = 0, skipped = 0;
  if (config_.resume) {
    std::vector<char> state;
    if (config_.reshard) {
      // The plan's initial state (gradients zero, padding), with what this
      // rank owns of every value and optimizer state read in.
      ZRT_RETURN_IF_ERROR(executor.saveState(state));
      ZRT_RETURN_IF_ERROR(
          readReshardedState(plan_, *config_.resume, config_.resumeDir, rank, state));
    } else {
      // The NVMe arena streams from the checkpoint into the swap file.
      const int64_t nvmeBytes = plan_.nvme_arena_bytes();
      ZRT_RETURN_IF_ERROR(readRankState(
          config_.resumeDir, rank, checkpointStateBytes(plan_) - nvmeBytes, state, nvmeBytes,
          [&](int64_t at, char *data, int64_t n) { return executor.writeNvme(at, data, n); }));
    }
    ZRT_RETURN_IF_ERROR(executor.loadState(state, /*withNvme=*/config_.reshard));
    const plan::Checkpoint &r = *config_.resume;
    applied = r.steps_applied();
    if (scaler)
      scaler->restore(
          {r.loss_scale(), r.scaler_hysteresis(), r.scaler_iteration(), r.scaler_last_overflow()});
  }
  for (int64_t k = firstStep_; k < steps; ++k) {
    executor.traceStep(k >= config_.traceFrom && k < config_.traceTo ? k : -1);
    auto start = std::chrono::steady_clock::now();
    double scale = scaler ? scaler->scale() : 1.0;
    if (scaler) {
      *executor.buffer(microScaleBuffer_).as<float>() = (float)scale;
      *executor.buffer(applyScaleBuffer_).as<float>() = (float)scale;
    }
    double loss = 0;
    const double stepLr = config_.schedule.at(applied);
    if (inBackward_)
      *executor.buffer(lrBuffer_).as<float>() = (float)stepLr;
    for (int64_t a = 0; a < accum; ++a) {
      // Micro-batch a of step k: rank r takes the r-th slice of the
      // world's micro-batches.
      const int64_t batch = (k * accum + a) * world + rank;
      if (dropoutRngBuffer_ >= 0) {
        // The micro-batch's first sample's position in the data stream: the
        // same for a sample at any world size with the same global batch.
        int64_t *rng = executor.buffer(dropoutRngBuffer_).as<int64_t>();
        rng[0] = (int64_t)config_.dropoutSeed;
        rng[1] = batch * microBatch_;
      }
      Status s = feeder_.feed(batch, executor, *micro_);
      if (s)
        s = executor.run(*micro_);
      if (!s)
        return errorf(s.message(), " (step ", k, ", micro-batch ", a, " of rank ", rank, ": ",
                      feeder_.samplesOf(batch, microBatch_), " of the data)");
      loss += *executor.buffer(lossBuffer_).as<float>();
    }
    loss /= accum;
    if (!inBackward_)
      *executor.buffer(lrBuffer_).as<float>() = (float)stepLr;
    ZRT_RETURN_IF_ERROR(executor.run(*apply_));
    double norm = *executor.buffer(normBuffer_).as<float>();
    bool overflow = scaler && *executor.buffer(overflowBuffer_).as<float>() != 0;
    // Each rank's mean micro-batch loss; all ranks' micro-batches together
    // are the global batch.
    // With it, whether to stop (a signal): every rank decides the same.
    int stopSignal = config_.stop ? config_.stop->load() : 0;
    if (world > 1 && config_.ranksAreProcesses) {
      float v[2] = {(float)loss, stopSignal ? 1.0f : 0.0f};
      ZRT_RETURN_IF_ERROR(comm->allReduce(v, v, 2, ReduceOp::Avg));
      loss = v[0];
      if (v[1] > 0 && !stopSignal)
        stopSignal = SIGTERM; // another rank's
    } else if (world > 1) {
      rankLoss_[rank] = loss;
      if (rank == 0)
        stopShared_ = stopSignal;
      ZRT_RETURN_IF_ERROR(comm->barrier());
      loss = 0;
      for (double l : rankLoss_)
        loss += l;
      loss /= world;
      stopSignal = stopShared_;
      ZRT_RETURN_IF_ERROR(comm->barrier()); // everyone has read rankLoss_
    }
    StepRecord record;
    record.step = k;
    record.loss = loss;
    record.lr = stepLr;
    record.gradNorm = norm;
    record.lossScale = scale;
    record.skipped = overflow;
    record.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    record.tokensPerSecond = tokens_ / (record.ms / 1000.0);
    record.epoch = (double)(k + 1) * samplesPerStep() / std::max<int64_t>(1, feeder_.samples());
    if (overflow) {
      // The compiled step left parameters and optimizer state untouched.
      ++skipped;
      int64_t hysteresis = scaler->remainingHysteresis();
      if (Status s = scaler->update(true); !s)
        return errorf("step ", k, ": ", s.message());
      char buf[160];
      if (scaler->scale() != scale)
        std::snprintf(buf, sizeof buf, " | OVERFLOW, step skipped: loss scale %.0f -> %.0f", scale,
                      scaler->scale());
      else
        std::snprintf(buf, sizeof buf,
                      " | OVERFLOW, step skipped: loss scale %.0f kept, hysteresis %lld -> %lld",
                      scale, (long long)hysteresis, (long long)scaler->remainingHysteresis());
      record.note = buf;
    } else {
      if (!std::isfinite(loss) || !std::isfinite(norm))
        return errorf("step ", k, ": the ", std::isfinite(loss) ? "gradient norm" : "loss", " is ",
                      std::isfinite(loss) ? norm : loss,
                      " (diverged, NaN in the data, or no label counted: every label of the batch "
                      "-100); lower --lr or check the inputs");
      if (scaler)
        (void)scaler->update(false);
      ++applied;
    }
    // No evaluation once a stop signal came (the run ends after this step).
    if (config_.evalFeeder && (k + 1) % config_.evalEvery == 0 && !stopSignal) {
      auto evalStart = std::chrono::steady_clock::now();
      double evalLoss = 0;
      ZRT_RETURN_IF_ERROR(evaluate(rank, executor, comm, evalLoss, stopSignal));
      if (!stopSignal) {
        record.evalLoss = evalLoss;
        record.evalMs =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - evalStart)
                .count();
      } else {
        record.note += " | evaluation cut short by a stop signal";
      }
    }
    if (rank == 0 && onStep)
      onStep(record);
    // --profile: the first step warms up (cuBLASLt heuristics, lazy module
    // loading); the profile counts the steps after it.
    if (config_.profile && k == firstStep_ && steps - firstStep_ > 1)
      executor.resetProfile();
    bool checkpointing = !config_.checkpointDir.empty();
    // A save in flight becomes visible at the first step end where every
    // rank's shard is written.
    bool committed = false;
    if (checkpointing)
      ZRT_RETURN_IF_ERROR(commitSave(rank, comm, /*wait=*/false, committed));
    // --save-every-minutes: rank 0's clock decides for every rank.
    double timeUp = 0;
    if (checkpointing && config_.saveEveryMinutes > 0) {
      if (rank == 0)
        timeUp =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - lastSave_).count() >=
                    config_.saveEveryMinutes * 60
                ? 1.0
                : 0.0;
      ZRT_RETURN_IF_ERROR(meanOverRanks(rank, comm, timeUp));
    }
    bool last = k + 1 == steps || stopSignal;
    bool saving = checkpointing && ((config_.saveEvery > 0 && (k + 1) % config_.saveEvery == 0) ||
                                    last || timeUp > 0);
    if (saving) {
      // One save in flight at a time: the previous one completes first.
      ZRT_RETURN_IF_ERROR(commitSave(rank, comm, /*wait=*/true, committed));
      ZRT_RETURN_IF_ERROR(
          save(rank, executor, comm, k + 1, applied, scaler, config_.asyncSave && !last));
      if (rank == 0)
        lastSave_ = std::chrono::steady_clock::now();
    }
    if (stopSignal && k + 1 < steps) {
      if (rank == 0) {
        stoppedBy_ = stopSignal;
        stoppedAt_ = k + 1;
        if (saving)
          stopCheckpoint_ = config_.checkpointDir + "/step-" + std::to_string(k + 1);
        skipped_ = skipped;
      }
      return Status::ok();
    }
  }
  if (rank == 0)
    skipped_ = skipped;
  bool committed = false;
  return commitSave(rank, comm, /*wait=*/true, committed);
}
