//===- Run.h - what zrun's commands do, without the command line -*- C++ -*-===//
//
// zrun parses arguments (tools/zrun/zrun.cpp, CLI11) and calls these; each
// command's body is here, in the runtime, where a test can call it:
//   evaluate   (zrun eval)      global batches through the `eval` program;
//   train      (zrun train)     the trainer (train/Trainer.h) with the step
//                               log, the metrics file, checkpoints, and the
//                               ranks in threads or launched processes;
//   gradcheck  (zrun gradcheck) gradients against finite differences;
//   kernelReport (zrun kernels) the plan's kernel kinds and which would run
//                               on the CUDA backend's host fallback.
// The options common to every command are RunOptions; what goes wrong is a
// Status that names the flag, file or instruction at fault.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_RUN_RUN_H
#define ZRT_RUN_RUN_H

#include "comm/Rendezvous.h"
#include "cuda/CudaExecutor.h"
#include "exec/Interpreter.h"
#include "train/Data.h"
#include "train/Schedule.h"
#include "train/Weights.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

/// NAME=FILE pairs of --data and --output, in command-line order.
using NamedFiles = std::vector<std::pair<std::string, std::string>>;

/// The options every command takes.
struct RunOptions {
  std::string plan;             // PLAN
  NamedFiles data;              // --data NAME=FILE.npy
  std::string weights;          // --weights MODEL.onnx (empty: the plan's)
  int64_t memoryBudget = 0;     // --memory-budget (0: the plan's)
  int64_t hostMemoryBudget = 0; // --host-memory-budget (0: the plan's)
  std::string backend;          // --backend cpu|cuda (empty: the plan's target)
  CudaOptions cuda;             // --cuda-graphs, --offload-chunk
  bool printMemory = false;     // --print-memory
  std::string nvmePath;         // --nvme-path DIR (empty: the plan's)
};

/// Bytes of the arenas one rank allocates (what ExecutorBase::allocatedBytes
/// says), host arena included.
int64_t plannedBytes(const plan::Plan &plan);

/// The backend a run uses: --backend, else the plan's target.
std::string backendOf(const RunOptions &options, const plan::Plan &plan);

/// Loads and validates PLAN; --memory-budget replaces the plan's budget.
Status loadRunPlan(const RunOptions &options, plan::Plan &plan);

/// --weights, opened and checked against the plan before any rank starts
/// (null without the flag). A plan compiled with zcc --weights external
/// cannot run without it, unless a checkpoint (|resuming|) supplies the state.
Status openWeights(const RunOptions &options, const plan::Plan &plan, bool resuming,
                   std::unique_ptr<WeightFile> &out);

/// Rank |rank|'s executor on the run's backend, with |weights| (if any)
/// loaded; the memory budget is checked before anything is allocated.
/// |device|: the GPU (-1: rank % device count).
Status makeExecutor(const RunOptions &options, const plan::Plan &plan, int rank, Communicator *comm,
                    const WeightFile *weights, int device, std::unique_ptr<ExecutorBase> &out);

/// On the CUDA backend, prints (stderr) which kernel kinds ran natively and
/// which on the host fallback, and the device memory measured against the
/// plan's arenas. |ranksHere|: the ranks of this process.
void reportCudaStats(const RunOptions &options, const plan::Plan &plan, int ranksHere);

//===--- eval -------------------------------------------------------------===//

struct EvalOptions {
  int64_t batches = 1; // --batches K: global batches
  NamedFiles outputs;  // --output NAME=FILE.npy: rank 0's slice of batch 0
                       // (an output, or an input as it was fed)
  TokenSource tokens;  // --tokens FILE.bin (path empty: --data)
};

/// Loads the data of |program|: the token file |tokens| (its path set), or
/// else the .npy files |data|.
Status loadData(const TokenSource &tokens, const NamedFiles &data, const plan::Plan &plan,
                const plan::Program &program, DataFeeder &feeder);

/// Batch k of rank r is the r-th slice of global batch k. |loss|: the mean
/// of the `loss` output over ranks and batches (none without one).
Status evaluate(const RunOptions &options, const EvalOptions &eval, std::optional<double> &loss);

//===--- train ------------------------------------------------------------===//

/// zrun train's own options. The schedule fields are set only when given:
/// a DeepSpeed scheduler in the plan (zcc --deepspeed) supplies the rest.
struct TrainOptions {
  int64_t steps = 0;
  std::optional<double> lr;
  std::optional<std::string> lrSchedule;
  std::optional<int64_t> warmupSteps, totalSteps;
  std::optional<bool> warmupLog;
  std::optional<double> warmupMinLr, warmupMinRatio, cosMinRatio;
  std::string metrics; // --metrics FILE.jsonl
  TokenSource tokens;  // --tokens FILE.bin (instead of --data), --token-bytes,
                       // --eos, --prompt-mask
  /// --eval-data: a token file (cut as --tokens is, with --eval-prompt-mask)
  /// or NAME=FILE.npy arrays; evaluated every --eval-every steps over
  /// --eval-batches global batches (0: all of it).
  std::vector<std::string> evalData;
  std::string evalPromptMask;
  int64_t evalEvery = 0, evalBatches = 0;
  int64_t shuffleSeed = -1;    // --shuffle SEED (-1: file order)
  int64_t seed = 42;           // --seed: dropout's
  std::string checkpointDir;   // --checkpoint-dir
  int64_t saveEvery = 0;       // --save-every
  double saveEveryMinutes = 0; // --save-every-minutes
  std::string resume;          // --resume
  bool profile = false;        // --profile
  /// --trace FILE.json: the Chrome trace of steps [traceFrom, traceTo)
  /// (--trace-steps A:B; default the second and third steps).
  std::string trace;
  int64_t traceFrom = 1, traceTo = 3;
  std::string dashboard;    // --dashboard FILE.html
  std::string tensorboard;  // --tensorboard DIR: TensorBoard event files
  std::string memoryPage;   // --memory-page FILE.html (written after the run)
  double peakTflops = 0;    // --peak-tflops: a GPU's dense peak, for MFU
  double commTimeout = 300; // --comm-timeout (NCCL, seconds)
  int64_t keepLast = 0;     // --keep-last N checkpoints (0: all)
  /// Set to a signal's number to stop after the step in flight
  /// (support/Signals.h's StopOnSignals::flag(); null: no signals).
  const std::atomic<int> *stop = nullptr;
  bool crashInSave = false; // test hook: SIGKILL in the middle of a save
  double slowSave = 0;      // test hook: saves after the first write this much later (s)
  bool syncSave = false;    // --sync-save
};

/// How a training run ended when it did not fail.
struct TrainOutcome {
  int stoppedBy = 0;      // the signal that stopped it after a step (0: all steps ran)
  int64_t stepsDone = 0;  // when stopped
  std::string checkpoint; // saved when it stopped (empty: none)
};

/// The learning-rate schedule of a run: the flags given, over the plan's
/// scheduler (zcc --deepspeed) field by field, over the defaults. Not
/// validated (Schedule::validate names the flag at fault).
Schedule resolveSchedule(const plan::Plan &plan, const TrainOptions &train);

/// Trains: every rank of the plan in a thread of this process, or, with
/// |job|, this process as one rank of a launched job (NCCL). Before any
/// step: every output is checked (--metrics is no input, device or
/// directory; --checkpoint-dir is writable and locked for the run). Rank 0
/// prints a line per step and appends it to --metrics (flushed); a run that
/// fails ends the file with a record of why. SIGTERM, SIGINT and SIGHUP stop
/// the run after the step in flight with a checkpoint (when checkpointing):
/// |outcome| says so; a second signal ends the process at once.
Status train(const RunOptions &options, const TrainOptions &train,
             const std::optional<LaunchEnv> &job, TrainOutcome &outcome);

//===--- comm-bench -------------------------------------------------------===//

/// zrun comm-bench: the collectives ZeRO runs, timed at a sweep of sizes
/// (nccl-tests' algorithm and bus bandwidth), each result checked.
struct CommBenchOptions {
  std::string backend = "cuda"; // cuda: NCCL on device buffers; cpu: Gloo on host ones
  std::vector<int64_t> sizes;   // bytes of each call's whole buffer
  CommType type = CommType::BF16;
  int iters = 20, warmup = 5;
  double commTimeout = 300;
};

struct CommBenchRow {
  BenchCollective op;
  int64_t bytes = 0;           // the whole buffer (a multiple of the ranks' count)
  double seconds = 0;          // a call, the mean over calls and ranks
  double algbw = 0, busbw = 0; // bytes a second; busbw: nccl-tests' factor applied
  bool correct = false;        // on every rank
};

/// Runs the sweep as one rank of a launched job (|job|: NCCL or Gloo
/// between processes) or alone (world 1); every rank gets the same |rows|.
Status commBench(const CommBenchOptions &options, const std::optional<LaunchEnv> &job,
                 std::vector<CommBenchRow> &rows);

/// "all_reduce", "all_gather", "reduce_scatter".
const char *benchCollectiveName(BenchCollective op);

//===--- gradcheck --------------------------------------------------------===//

struct GradCheckOptions {
  std::string param;       // --param: only parameters whose name contains it
  double epsilon = 1e-2;   // --epsilon: the finite-difference step
  double tolerance = 1e-2; // --tolerance: the largest relative error allowed
};

struct GradCheckResult {
  std::string name;
  double analytic = 0, numeric = 0;
  /// |analytic - numeric| beyond |resolution|, relative to the larger of the
  /// two; |resolution| what the float32 loss resolves of the difference
  /// quotient (4 ulps of the loss over 2 h).
  double relativeError = 0, resolution = 0;
};

/// Finite-difference check of micro_step's gradients (CPU backend, world
/// size 1, first batch): for every trainable parameter, the directional
/// derivative of micro_step's loss (the training one: dropout's mask
/// fixed, BatchNorm's batch statistics) along a random unit direction,
/// (L(p + h d) - L(p - h d)) / 2h, against <grad, d>.
Status gradcheck(const RunOptions &options, const GradCheckOptions &check,
                 std::vector<GradCheckResult> &results);

//===--- kernels ----------------------------------------------------------===//

struct KernelKind {
  int64_t count = 0, fallback = 0; // instructions; of them on the host fallback
};
struct FallbackInstruction {
  std::string program, kernel, location, shapes; // shapes: "[4x32][32]"
  int index = 0;
};
struct KernelReport {
  std::map<std::string, KernelKind> kinds; // by kernel name
  std::vector<FallbackInstruction> fallback;
};

/// Every kernel instruction of |plan| by kind; |native| says whether the
/// CUDA backend runs one on the device (cudaRunsNatively).
KernelReport kernelReport(const plan::Plan &plan,
                          const std::function<bool(const plan::Kernel &)> &native);

/// The compiler-generated kernels' PTX, each distinct one once, as
/// DIR/kernel-N.ptx (for ptxas); |written|: how many.
Status writeGeneratedPtx(const plan::Plan &plan, const std::string &dir, int &written);

} // namespace zrt

#endif // ZRT_RUN_RUN_H
