//===- Train.cpp - zrun train's options and launch --------------------===//
//
// zrun train's flags (CLI11) and what it does once they are parsed: launch
// the job's processes (--nproc-per-node, --hostfile) or train this
// process's ranks (runtime/run). zrun.cpp dispatches to it.
//
//===----------------------------------------------------------------------===//
#include "Train.h"

#include <csignal>
#include <cstdlib>
#include <string>

using namespace zrt;

namespace zrun {

/// Adds `zrun train` and its options to |app|, into |c|.
void addTrain(CLI::App &app, Common &common, const std::string &planHelp, TrainCommand &c) {
  CLI::App *train = c.app = app.add_subcommand(
      "train", "run N optimizer steps; each consumes the next global batch (micro-batch x "
               "accumulation steps x world size samples) and logs one line");
  addCommon(train, common, planHelp);
  train->add_option("--steps", c.t.steps, "optimizer steps to run (required)")
      ->type_name("N")
      ->check(integer(1, "a positive integer"));
  optional(train, "--lr", c.t.lr, "base learning rate (default: the plan's, from zcc --lr)")
      ->type_name("LR")
      ->check(number(0, false, "a non-negative number"));
  optional(train, "--lr-schedule", c.t.lrSchedule,
           "constant (default); warmup-cosine (linear warmup from 0 over --warmup-steps, cosine "
           "to 0 at --total-steps); DeepSpeed's WarmupLR, WarmupDecayLR, WarmupCosineLR "
           "(docs/training.md)")
      ->type_name("S");
  optional(train, "--warmup-steps", c.t.warmupSteps, "warmup steps")
      ->type_name("N")
      ->check(integer(0, "a non-negative integer"));
  optional(train, "--total-steps", c.t.totalSteps, "the schedule's length (default: --steps)")
      ->type_name("N")
      ->check(integer(1, "a positive integer"));
  optional(train, "--warmup-type", c.warmupType, "log (DeepSpeed's default) or linear")
      ->type_name("log|linear")
      ->check(oneOf({"log", "linear"}, "log or linear"));
  optional(train, "--warmup-min-lr", c.t.warmupMinLr, "WarmupLR, WarmupDecayLR: the first lr")
      ->type_name("LR")
      ->check(number(0, false, "a non-negative number"));
  optional(train, "--warmup-min-ratio", c.t.warmupMinRatio, "WarmupCosineLR: the first lr / lr")
      ->type_name("R")
      ->check(number(0, false, "a non-negative number"));
  optional(train, "--cos-min-ratio", c.t.cosMinRatio, "WarmupCosineLR: the last lr / lr")
      ->type_name("R")
      ->check(number(0, false, "a non-negative number"));
  train
      ->add_option("--metrics", c.t.metrics,
                   "one JSON object per step (written atomically when the run ends)")
      ->type_name("FILE.jsonl");
  addTokenOptions(train, c.t.tokens);
  train
      ->add_option("--eval-data", c.t.evalData,
                   "evaluate this set every --eval-every steps: a token file (cut as --tokens "
                   "is) or NAME=FILE.npy per input; 'eval_loss' in the log and metrics")
      ->type_name("FILE.bin|NAME=FILE.npy")
      ->allow_extra_args(false);
  train
      ->add_option("--eval-prompt-mask", c.t.evalPromptMask,
                   "--eval-data's prompt mask (as --prompt-mask)")
      ->type_name("FILE");
  train
      ->add_option("--eval-every", c.t.evalEvery,
                   "steps between evaluations (default: once, after the last step)")
      ->type_name("N")
      ->check(integer(1, "a positive number of steps"));
  train
      ->add_option("--eval-batches", c.t.evalBatches,
                   "global batches per evaluation (default: the whole --eval-data)")
      ->type_name("K")
      ->check(integer(1, "a positive integer"));
  train
      ->add_option("--seed", c.t.seed,
                   "dropout's seed (default 42, as Hugging Face's Trainer): the same seed, the "
                   "same masks at any world size")
      ->type_name("SEED")
      ->check(integer(0, "a seed (a non-negative integer)"));
  train
      ->add_option("--shuffle", c.t.shuffleSeed,
                   "visit samples in a seeded random order, new each epoch")
      ->type_name("SEED")
      ->check(integer(0, "a seed (a non-negative integer)"));
  train
      ->add_option("--checkpoint-dir", c.t.checkpointDir,
                   "save checkpoints here (at the last step, and every --save-every)")
      ->type_name("DIR");
  train
      ->add_option("--save-every-minutes", c.t.saveEveryMinutes,
                   "also save when this many minutes have passed since the last save")
      ->type_name("M")
      ->check(number(0, true, "a positive number of minutes"));
  train->add_option("--save-every", c.t.saveEvery, "steps between checkpoints")
      ->type_name("K")
      ->check(integer(1, "a positive number of steps"));
  train
      ->add_option("--keep-last", c.t.keepLast,
                   "keep the newest N checkpoints (never the one 'latest' names; default: all)")
      ->type_name("N")
      ->check(integer(1, "a positive number of checkpoints"));
  train
      ->add_option("--resume", c.t.resume,
                   "continue from a checkpoint (a step-K directory, or a --checkpoint-dir: "
                   "its latest)")
      ->type_name("DIR");
  train->add_flag("--profile", c.t.profile,
                  "time every instruction (rank 0, steps after the first); print where a "
                  "step's time goes, by kind, shape and instruction");
  train
      ->add_option("--trace", c.t.trace,
                   "write the traced steps as a Chrome trace (Perfetto, chrome://tracing): a "
                   "track per rank and stream, every instruction a slice with its ONNX node, "
                   "bytes and FLOPs")
      ->type_name("FILE.json");
  train
      ->add_option("--dashboard", c.t.dashboard,
                   "keep a self-contained HTML page of the run up to date (loss, lr, grad norm, "
                   "loss scale, tokens/s, TFLOP/s or MFU, memory); opens with no network")
      ->type_name("FILE.html");
  train
      ->add_option("--tensorboard", c.t.tensorboard,
                   "write TensorBoard event files here (train/loss, train/learning_rate, "
                   "train/grad_norm, eval/loss, perf/..., one event a step)")
      ->type_name("DIR");
  train
      ->add_option("--memory-page", c.t.memoryPage,
                   "after the run, the plan's memory over the step (zcc --emit=memory-html) "
                   "with what this run measured")
      ->type_name("FILE.html");
  train
      ->add_option("--peak-tflops", c.t.peakTflops,
                   "a GPU's dense peak (e.g. 989.4 for H100/H200 bf16): --dashboard shows MFU "
                   "against it")
      ->type_name("TFLOPS")
      ->check(number(0, true, "a positive number of TFLOP/s"));
  train
      ->add_option("--trace-steps", c.traceSteps,
                   "the steps --trace records, 0-based: A (one step) or A:B (A to B-1; default "
                   "1:3)")
      ->type_name("A[:B]")
      ->check(check("A or A:B, steps with A < B", [](const std::string &v) {
        char *end = nullptr;
        long long a = std::strtoll(v.c_str(), &end, 10), b = a + 1;
        if (end == v.c_str() || a < 0)
          return false;
        if (*end == ':') {
          const char *second = end + 1;
          b = std::strtoll(second, &end, 10);
          if (end == second)
            return false;
        }
        return !*end && b > a;
      }));
  train
      ->add_option("--comm-timeout", c.t.commTimeout,
                   "seconds a collective may wait before the job stops (default 300)")
      ->type_name("SECONDS")
      ->check(number(0, true, "a positive number of seconds"));
  train->add_flag("--test-crash-in-save", c.testCrashInSave)->group(""); // tests only: hidden
  train->add_option("--test-slow-save", c.testSlowSave)->group("");      // tests only: hidden
  train->add_flag("--sync-save", c.t.syncSave,
                  "finish writing each checkpoint before the next step (default: periodic saves "
                  "are written while training goes on)");
  addLaunch(train, c.launch);
}

/// Runs `zrun train` as parsed into |c|: a launcher (--hostfile, or
/// --nproc-per-node), or this process's ranks; its exit code.
int runTrain(TrainCommand &c, Common &common, CLI::App *cmd, int argc, char **argv,
             const std::optional<LaunchEnv> &job, StopOnSignals &signals) {
  if (c.t.steps == 0)
    return usageError("train needs --steps N", "train");
  if ((c.t.saveEvery > 0 || c.t.saveEveryMinutes > 0) && c.t.checkpointDir.empty())
    return usageError(c.t.saveEvery > 0 ? "--save-every needs --checkpoint-dir"
                                        : "--save-every-minutes needs --checkpoint-dir",
                      "train");
  if (c.warmupType)
    c.t.warmupLog = *c.warmupType == "log";
  if (!c.traceSteps.empty()) {
    if (c.t.trace.empty())
      return usageError("--trace-steps goes with --trace FILE.json", "train");
    size_t colon = c.traceSteps.find(':');
    c.t.traceFrom = std::stoll(c.traceSteps.substr(0, colon));
    c.t.traceTo =
        colon == std::string::npos ? c.t.traceFrom + 1 : std::stoll(c.traceSteps.substr(colon + 1));
    if (c.t.traceFrom >= c.t.steps)
      return usageError("--trace-steps " + c.traceSteps + ": the run has steps 0 to " +
                            std::to_string(c.t.steps - 1) + " (--steps " +
                            std::to_string(c.t.steps) + ")",
                        "train");
  }
  c.t.crashInSave = c.testCrashInSave;
  c.t.slowSave = c.testSlowSave;
  c.t.stop = &signals.flag();
  int exitCode = 1;
  Restarts &restarts = c.launch.restarts;
  restarts.checkpointDir = c.t.checkpointDir;
  if (restarts.max > 0 && c.t.checkpointDir.empty())
    return usageError("--max-restarts needs --checkpoint-dir (a restart continues from the "
                      "job's last checkpoint there)",
                      "train");
  if (restarts.max > 0 && c.launch.nprocPerNode == 0 && c.launch.hosts.hostfile.empty() && !job)
    return usageError("--max-restarts restarts a launched job: add --nproc-per-node N or "
                      "--hostfile FILE",
                      "train");
  if (restarts.minNodes > 0 && c.launch.hosts.hostfile.empty())
    return usageError("--min-nodes needs --hostfile", "train");
  if (!job && !c.launch.hosts.hostfile.empty()) {
    // One `zrun train ... --nproc-per-node n` per node over ssh.
    c.launch.hosts.port = c.launch.masterPort;
    c.launch.hosts.argv =
        without(argc, argv,
                {"--hostfile", "--include", "--exclude", "--num_nodes", "--num_gpus",
                 "--master-port", "--nproc-per-node", "--max-restarts", "--min-nodes"},
                {"--dry-run"});
    c.launch.hosts.argv[0] = selfPath(argv[0]);
    restarts.planArg = positionalIndex(cmd, c.launch.hosts.argv);
    if (Status s = launchHosts(c.launch.hosts, restarts, exitCode); !s)
      return fail(s);
    return exitCode;
  }
  if (!job && c.launch.nprocPerNode > 0) {
    std::vector<std::string> rest =
        without(argc, argv, {"--nproc-per-node", "--master-port", "--max-restarts"}, {});
    restarts.planArg = positionalIndex(cmd, rest);
    if (Status s =
            launchLocal(rest, c.launch.nprocPerNode, c.launch.masterPort, restarts, exitCode);
        !s)
      return fail(s);
    return exitCode;
  }
  TrainOutcome outcome;
  if (Status s = zrt::train(common.run, c.t, job, outcome); !s)
    return fail(s);
  // Stopped by a signal: 0 after a checkpoint on SIGTERM (what a preempted
  // cluster job is expected to return), else 128 + the signal.
  if (outcome.stoppedBy)
    return outcome.stoppedBy == SIGTERM && !outcome.checkpoint.empty() ? 0
                                                                       : 128 + outcome.stoppedBy;
  return 0;
}

} // namespace zrun
