//===- Trainer.h - the training step loop ------------------------*- C++ -*-===//
//
// One optimizer step: every micro-step of gradient accumulation (the data
// feeder fills the inputs, `micro_step` runs), the learning rate of the
// schedule, `apply`, and then the bookkeeping that the compiled step leaves
// to the host: the fp16 loss scale (DeepSpeed's dynamic scaler; a step that
// overflowed was skipped in place and does not advance the schedule), the
// loss averaged over the ranks, and checkpoints (every rank its shard,
// rank 0 the manifest). zrun's `train` parses flags, prints and writes
// metrics around it; test/runtime/TrainerTest.cpp trains through the CPU
// executor with it.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_TRAINER_H
#define ZRT_TRAIN_TRAINER_H

#include "comm/Communicator.h"
#include "exec/Interpreter.h"
#include "train/Data.h"
#include "train/LossScaler.h"
#include "train/Schedule.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace zrt {

struct TrainerConfig {
  int64_t steps = 0;           // train until this many steps are done
  Schedule schedule;           // validated by the caller
  std::string checkpointDir;   // empty: no checkpoints
  int64_t saveEvery = 0;       // and at the last step, when checkpointing
  double saveEveryMinutes = 0; // also when this long has passed since the last save (0: never)
  /// Periodic saves write in the background while training continues
  /// (the last one, and one on a signal, complete before run() returns).
  bool asyncSave = true;
  uint64_t planHash = 0;    // recorded in checkpoints
  int64_t shuffleSeed = -1; // recorded in checkpoints (-1: no shuffle)
  /// Dropout's seed (zrun --seed): micro-batch b of a plan with dropout gets
  /// [seed, b * micro-batch] as its "dropout_rng" (kernels/Philox.h).
  uint64_t dropoutSeed = 42;
  /// --resume: the checkpoint's manifest and directory (null: a fresh run).
  const plan::Checkpoint *resume = nullptr;
  std::string resumeDir;
  /// The checkpoint was saved by another plan of the same model: each rank
  /// reads its part through the manifest's logical layout.
  bool reshard = false;
  /// zrun --profile: the executors profile; the first step is a warm-up.
  bool profile = false;
  /// zrun --trace: steps [traceFrom, traceTo) are traced (ExecutorBase::
  /// traceStep); none when traceTo <= traceFrom.
  int64_t traceFrom = 0, traceTo = 0;
  /// The ranks are processes (NCCL): the loss is averaged with an
  /// all-reduce. Otherwise they are threads that share this trainer.
  bool ranksAreProcesses = false;
  /// Tests only (zrun's hidden --test-crash-in-save): the process kills
  /// itself (SIGKILL) with its first checkpoint written but not in place.
  bool crashInSave = false;
  /// Tests only (zrun's hidden --test-slow-save S): every save after the
  /// first of the run starts writing S seconds late (a save in flight that
  /// a test can kill).
  double slowSave = 0;
  /// Checkpoints kept (0: all); the one `latest` names is never removed.
  int64_t keepLast = 0;
  /// A signal handler's flag (the signal's number, or 0). The ranks agree
  /// after each step whether any of them saw it; then they save a
  /// checkpoint (when checkpointing and the step did not just save one) and
  /// run() returns ok with stoppedBy() set.
  const std::atomic<int> *stop = nullptr;
  /// --eval-data: the `eval` program runs over |evalBatches| global batches
  /// of this feeder after every |evalEvery|-th step; the mean loss is the
  /// step's evalLoss. Null: no evaluation.
  const DataFeeder *evalFeeder = nullptr;
  int64_t evalEvery = 0, evalBatches = 1;
};

/// What rank 0 reports after each step.
struct StepRecord {
  int64_t step = 0; // 0-based
  double loss = 0, lr = 0, gradNorm = 0, lossScale = 1, ms = 0, tokensPerSecond = 0;
  bool skipped = false;           // an fp16 overflow: parameters and state unchanged
  std::string note;               // what happened to the loss scale, if it overflowed
  double epoch = 0;               // passes over the data after this step (samples read / held)
  std::optional<double> evalLoss; // --eval-data, on the steps it evaluates
  double evalMs = 0;              // the evaluation's time (not in ms)
};

class Trainer {
public:
  /// Checks that |plan| trains: micro_step with a `loss` output, apply with
  /// an `lr` input and a `grad_norm` output, and the loss-scaling buffers
  /// when it scales the loss. |plan| and |feeder| outlive the trainer.
  static Status create(const plan::Plan &plan, const DataFeeder &feeder, TrainerConfig config,
                       std::unique_ptr<Trainer> &out);

  /// The first step this run trains (after --resume: the checkpoint's).
  int64_t firstStep() const { return firstStep_; }
  /// Tokens (elements of one sample of the first data input) per step,
  /// over the global batch.
  int64_t tokensPerStep() const { return tokens_; }
  /// Samples per optimizer step, over the global batch.
  int64_t samplesPerStep() const {
    return microBatch_ * plan_.training().grad_accum_steps() * plan_.world_size();
  }
  /// Steps rank 0 skipped on fp16 overflow in the last run.
  int64_t skippedSteps() const { return skipped_; }
  /// After run(): the signal that stopped it early (0: it ran every step),
  /// the steps done when it stopped, and the checkpoint saved then (empty:
  /// none).
  int stoppedBy() const { return stoppedBy_; }
  int64_t stoppedAt() const { return stoppedAt_; }
  const std::string &stopCheckpoint() const { return stopCheckpoint_; }

  /// Rank |rank|'s step loop on |executor| (the plan's world: |comm|, or
  /// null for one rank). After --resume it first loads the rank's state.
  /// Every rank of the world calls it, concurrently.
  Status run(int rank, ExecutorBase &executor, Communicator *comm);

  /// Called by rank 0 after every step, and after every checkpoint saved.
  std::function<void(const StepRecord &)> onStep;
  std::function<void(const std::string &checkpoint)> onCheckpoint;

private:
  Trainer(const plan::Plan &plan, const DataFeeder &feeder, TrainerConfig config)
      : plan_(plan), feeder_(feeder), config_(std::move(config)) {}

public:
  ~Trainer();

private:
  /// A save in flight on one rank: its state, copied when the step ended,
  /// written to disk by a thread while training goes on; the trainer state
  /// for the manifest, as it was then.
  struct PendingSave {
    std::thread writer;
    std::atomic<bool> done{false};
    Status status = Status::ok();
    int64_t stepsDone = 0;
    plan::Checkpoint manifest; // rank 0
  };
  /// Every rank starts writing its shard (a thread; waits for it when not
  /// |async|); rank 0 prepares the manifest. commitSave() makes it visible.
  Status save(int rank, ExecutorBase &executor, Communicator *comm, int64_t stepsDone,
              int64_t applied, const std::optional<LossScaler> &scaler, bool async);
  /// Once every rank's shard is written (|wait|: waits for this rank's):
  /// rank 0 writes the manifest and renames the checkpoint into place. All
  /// ranks call it together; |committed| says whether it happened.
  Status commitSave(int rank, Communicator *comm, bool wait, bool &committed);
  /// The mean of every rank's |value| (all ranks call it).
  Status meanOverRanks(int rank, Communicator *comm, double &value);
  /// The `eval` program's mean loss over the evaluation set.
  /// The evaluation loss; |stopSignal| nonzero (and |loss| meaningless)
  /// when a stop signal cut it short, the same on every rank.
  Status evaluate(int rank, ExecutorBase &executor, Communicator *comm, double &loss,
                  int &stopSignal);
  /// Whether a stop signal (SIGTERM, SIGINT, SIGHUP) reached any rank: the
  /// same |signal| on every rank (a collective when ranks are processes).
  Status agreeOnStop(int rank, Communicator *comm, int &signal);

  const plan::Plan &plan_;
  const DataFeeder &feeder_;
  TrainerConfig config_;
  const plan::Program *micro_ = nullptr, *apply_ = nullptr, *eval_ = nullptr;
  int lossBuffer_ = -1, lrBuffer_ = -1, normBuffer_ = -1, evalLossBuffer_ = -1;
  bool inBackward_ = false; // micro_step runs the optimizer (its lr, grad_norm)
  std::optional<LossScalerConfig> scaling_;
  int microScaleBuffer_ = -1, applyScaleBuffer_ = -1, overflowBuffer_ = -1;
  int dropoutRngBuffer_ = -1; // micro_step's "dropout_rng", if it has dropout
  int64_t firstStep_ = 0, tokens_ = 0, skipped_ = 0, microBatch_ = 1;
  int stoppedBy_ = 0;
  int64_t stoppedAt_ = 0;
  std::string stopCheckpoint_;
  std::vector<double> rankLoss_;                      // in-process ranks' losses of a step
  std::vector<double> rankValue_;                     // in-process ranks' values for meanOverRanks
  std::vector<std::unique_ptr<PendingSave>> pending_; // per rank: the save in flight
  std::chrono::steady_clock::time_point lastSave_;    // rank 0, for saveEveryMinutes
  int stopShared_ = 0; // rank 0's reading of the stop flag, for the others
};

} // namespace zrt

#endif // ZRT_TRAIN_TRAINER_H
