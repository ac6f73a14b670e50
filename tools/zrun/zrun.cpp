//===- zrun.cpp - run a zcc plan ------------------------------------------===//
//
//   zrun eval PLAN --data NAME=FILE.npy ... [--batches K] [--output NAME=FILE.npy]
//                  [--print-memory]
//
// The runtime half of zcc: no LLVM/MLIR in this process. Everything is
// validated before anything runs; every error names what and where.
//
//===----------------------------------------------------------------------===//
#include "comm/Hostfile.h"
#include "cuda/CudaExecutor.h"
#include "exec/Executor.h"
#include "plan/PlanLoader.h"
#include "train/Checkpoint.h"
#include "train/Data.h"
#include "train/LossScaler.h"
#include "train/Npy.h"
#include "train/Schedule.h"
#include "train/Trainer.h"
#include "train/Weights.h"
#include "launch/Launch.h"
#include "exec/Profile.h"
#include "support/ByteSize.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <csignal>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace zrt;

namespace {

const char *kUsage =
    "usage: zrun eval  PLAN --data NAME=FILE.npy ... [--batches K] [--output NAME=FILE.npy]\n"
    "                  [--print-memory]\n"
    "       zrun train PLAN --data NAME=FILE.npy ... --steps N [--lr LR]\n"
    "                  [--lr-schedule S] [--warmup-steps N] [--total-steps N]\n"
    "                  [--warmup-type log|linear] [--warmup-min-lr LR]\n"
    "                  [--warmup-min-ratio R] [--cos-min-ratio R]\n"
    "                  [--metrics FILE.jsonl] [--print-memory] [--shuffle SEED]\n"
    "                  [--tokens FILE.bin [--token-bytes 2|4]]\n"
    "                  [--checkpoint-dir DIR [--save-every K]] [--resume DIR]\n"
    "                  [--backend cpu|cuda] [--nproc-per-node N [--master-port P]]\n"
    "                  [--comm-timeout SECONDS] [--profile]\n"
    "                  [--hostfile FILE [--include H[:GPUS]@..|--exclude ..] [--num_nodes N]\n"
    "                   [--num_gpus N] [--dry-run]]   (one zrun per node over ssh)\n"
    "       zrun devices   (whether --backend cuda can run here)\n"
    "       zrun kernels PLAN [--ptx DIR]  (its kernel kinds; which would run on the CUDA\n"
    "                            backend's host fallback; the generated kernels' PTX to DIR)\n"
    "       zrun export CHECKPOINT [--safetensors OUT.safetensors]\n"
    "                  [--onnx MODEL.onnx -o TRAINED.onnx]\n"
    "\n"
    "  eval    evaluates K global batches (default 1) and prints 'loss: <mean>'\n"
    "          --output NAME=FILE.npy writes the graph output NAME of the first batch\n"
    "  train   runs N optimizer steps; each consumes the next global batch\n"
    "          (micro-batch x accumulation steps samples) and logs one line\n"
    "          --lr LR                base learning rate (default: the plan's, from zcc --lr)\n"
    "          --lr-schedule S        constant (default); warmup-cosine: linear warmup from\n"
    "                                 0 over --warmup-steps, cosine to 0 at --total-steps\n"
    "                                 (default: --steps); DeepSpeed's WarmupLR, WarmupDecayLR,\n"
    "                                 WarmupCosineLR with their parameters (docs/training.md)\n"
    "          --metrics FILE.jsonl   one JSON object per step (written atomically at the end)\n"
    "          --shuffle SEED         visit samples in a seeded random order, new each epoch\n"
    "          --profile              time every instruction (rank 0, steps after the first);\n"
    "                                 print where a step's time goes, by kind and instruction\n"
    "          --tokens FILE.bin      token ids (uint16, or uint32 with --token-bytes 4; raw as\n"
    "                                 nanoGPT writes them or with llm.c's header) cut into\n"
    "                                 input_ids and labels shifted by one\n"
    "       zrun gradcheck PLAN --data NAME=FILE.npy ... [--param NAME] [--epsilon H]\n"
    "                  [--tolerance T]\n"
    "  gradcheck  compares micro_step's gradients with finite differences of the eval\n"
    "          loss along a random direction per parameter (first batch)\n"
    "  all     --data NAME=FILE.npy   an array of samples for the plan input NAME\n"
    "          --memory-budget SIZE   device memory a rank may use, e.g. 16GiB (default: the\n"
    "                                 plan's, from zcc --memory-budget): refused if exceeded\n"
    "          --weights MODEL.onnx   initial weights from this model's initializers (needed\n"
    "                                 by plans compiled with zcc --weights external)\n"
    "          --print-memory         prints the bytes allocated for the arenas\n"
    "          --cuda-graphs          --backend cuda: run one-rank programs as CUDA graphs\n"
    "                                 (captured on their second run; off by default)\n"
    "          --offload-chunk N      --backend cuda, zero-offload: elements per chunk of the\n"
    "                                 host optimizer (default 16M; 0: whole kernels)\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "zrun: error: %s\n%s", message.c_str(), kUsage);
  return 2;
}

int printUsage() {
  std::fputs(kUsage, stdout);
  return 0;
}

int fail(const Status &s) {
  std::fprintf(stderr, "zrun: error: %s\n", s.message().c_str());
  return 1;
}

/// Bytes of the arenas one rank allocates (what Executor::allocatedBytes says).
int64_t plannedBytes(const plan::Plan &plan) {
  return plan.device_arena_bytes() + plan.state_arena_bytes() + plan.constant_arena_bytes() +
         plan.input_arena_bytes() + plan.host_arena_bytes();
}

/// The CUDA backend's device allocation besides the arenas (its cuBLASLt
/// workspace, runtime/cuda/CudaExecutor.cu).
constexpr int64_t kCudaWorkspaceBytes = 32 << 20;

/// Rank |rank|'s executor on the chosen backend.

/// |weights| (zrun --weights), if any, replaces the plan's initial weights.
/// |device|: the GPU (-1: the rank's, rank % devices); |cuda|: the CUDA
/// backend's options.
std::unique_ptr<ExecutorBase> makeExecutor(const std::string &chosen, const plan::Plan &plan,
                                           int rank, Communicator *comm,
                                           const WeightFile *weights, Status &status,
                                           const CudaOptions &cuda, int device = -1) {
  std::string backend = !chosen.empty() ? chosen : plan.target() == "cuda" ? "cuda" : "cpu";
  std::unique_ptr<ExecutorBase> executor;
  status = Status::ok();
  // --memory-budget (the plan's, or zrun's): checked before anything is
  // allocated; the CUDA backend also keeps its kernel scratch within it.
  if (plan.memory_budget() > 0) {
    int64_t need = plannedBytes(plan) - plan.host_arena_bytes() +
                   (backend == "cuda" ? kCudaWorkspaceBytes : 0);
    if (need > plan.memory_budget()) {
      status = errorf("the plan needs ", showByteSize(need), " per rank",
                      backend == "cuda" ? " (arenas and the 32 MiB cuBLASLt workspace)" : "",
                      ", more than --memory-budget ", showByteSize(plan.memory_budget()),
                      "; compile with zcc --memory-budget SIZE --auto for a plan that fits");
      return nullptr;
    }
  }
  if (backend == "cuda")
    executor = makeCudaExecutor(plan, rank, comm, device, cuda, status);
  else
    executor = std::make_unique<Executor>(plan, rank, comm);
  if (status && weights) {
    int loaded = 0;
    status = loadWeights(plan, *weights, rank, *executor, loaded);
    if (status && rank == 0)
      std::fprintf(stderr, "zrun: %d weights loaded from %s\n", loaded, weights->path().c_str());
  }
  return status ? std::move(executor) : nullptr;
}

/// --weights FILE, opened and checked against the plan before any rank
/// starts (null without the flag). A plan compiled with zcc --weights
/// external cannot run without it, unless a checkpoint supplies the state.
Status openWeights(const std::string &path, const std::string &planPath, const plan::Plan &plan,
                   bool resuming, std::unique_ptr<WeightFile> &out) {
  if (path.empty()) {
    if (planNeedsWeights(plan) && !resuming)
      return errorf(planPath, ": the plan carries no weights (zcc --weights external); pass "
                              "--weights MODEL.onnx, the model it was compiled from");
    return Status::ok();
  }
  if (resuming) {
    std::fprintf(stderr, "zrun: --resume: the weights come from the checkpoint; --weights %s "
                         "is not read\n", path.c_str());
    return Status::ok();
  }
  out = std::make_unique<WeightFile>();
  ZRT_RETURN_IF_ERROR(WeightFile::open(path, *out));
  return checkWeights(plan, *out);
}

/// Prints which kernels ran natively on the GPU and which on the host
/// fallback (stderr, once per run), so that a slow kernel is never a surprise.
/// |ranksHere|: the ranks of this process (1 when launched as one rank).
void reportCudaStats(const std::string &chosen, const plan::Plan &plan, int ranksHere) {
  std::string backend = !chosen.empty() ? chosen : plan.target();
  if (backend != "cuda")
    return;
  CudaStats st = cudaStats();
  std::string fallback;
  for (const auto &[name, n] : st.fallback)
    fallback += (fallback.empty() ? "" : ", ") + name;
  std::fprintf(stderr, "zrun: cuda: %zu kernel kinds native, %zu on the host fallback%s%s\n",
               st.native.size(), st.fallback.size(), fallback.empty() ? "" : ": ",
               fallback.c_str());
  // Measured device memory next to the plan's arenas (what zcc's report
  // predicts per rank); with in-process ranks a device holds several.
  for (const auto &[device, bytes] : st.deviceBytes) {
    int per = std::max(1, ranksHere / std::max<int>(1, (int)st.deviceBytes.size()));
    std::fprintf(stderr,
                 "zrun: cuda: device %d: %lld bytes (%.3f GiB) allocated by zrun at most%s%s, "
                 "planned device arenas %lld bytes per rank (measured %+.2f%%)\n",
                 device, (long long)bytes, bytes / 1073741824.0, per > 1 ? ", for " : "",
                 per > 1 ? (std::to_string(per) + " ranks").c_str() : "",
                 (long long)(plannedBytes(plan) - plan.host_arena_bytes()),
                 100.0 * ((double)bytes / per - (plannedBytes(plan) - plan.host_arena_bytes())) /
                     (plannedBytes(plan) - plan.host_arena_bytes()));
  }
}

bool splitAssign(const std::string &arg, std::string &name, std::string &value) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return false;
  name = arg.substr(0, eq);
  value = arg.substr(eq + 1);
  return true;
}

/// Walks one command's arguments. The plan path, --data and --print-memory are
/// common to every command (common()); each command matches its own options
/// first with is() and reads their values with value()/integer()/number().
class Args {
public:
  Args(int argc, char **argv) : argc_(argc), argv_(argv) {}

  bool next() {
    if (++i_ >= argc_)
      return false;
    arg_ = argv_[i_];
    return true;
  }
  bool is(const char *flag) const { return arg_ == flag; }
  const std::string &arg() const { return arg_; }
  bool value(std::string &out) {
    if (i_ + 1 >= argc_)
      return false;
    out = argv_[++i_];
    return true;
  }
  bool integer(int64_t &out, int64_t min) {
    std::string v;
    char *end = nullptr;
    if (!value(v))
      return false;
    out = std::strtoll(v.c_str(), &end, 10);
    return !v.empty() && !*end && out >= min;
  }
  bool number(double &out, double min, bool strict) {
    std::string v;
    char *end = nullptr;
    if (!value(v))
      return false;
    out = std::strtod(v.c_str(), &end);
    return !v.empty() && !*end && (strict ? out > min : out >= min);
  }
  /// Handles the common arguments; returns an error message if the current
  /// one is malformed or unknown.
  std::optional<std::string> common() {
    std::string v, name, path;
    if (is("--data")) {
      if (!value(v) || !splitAssign(v, name, path))
        return std::string("--data expects NAME=FILE.npy");
      data.emplace_back(name, path);
    } else if (is("--print-memory")) {
      printMemory = true;
    } else if (is("--help") || is("-h")) {
      help = true;
    } else if (is("--memory-budget")) {
      std::optional<int64_t> bytes;
      if (!value(v) || !(bytes = parseByteSize(v)) || *bytes <= 0)
        return std::string("--memory-budget expects a size such as 16GiB, 1.5GB or 4096");
      memoryBudget = *bytes;
    } else if (is("--weights")) {
      if (!value(weights))
        return std::string("--weights expects an ONNX model");
    } else if (is("--backend")) {
      if (!value(backend) || (backend != "cpu" && backend != "cuda"))
        return std::string("--backend expects cpu or cuda");
    } else if (is("--cuda-graphs")) {
      cuda.graphs = true;
    } else if (is("--offload-chunk")) {
      int64_t n = -1;
      char *end = nullptr;
      if (!value(v) || v.empty() || (n = std::strtoll(v.c_str(), &end, 10)) < 0 || *end)
        return std::string("--offload-chunk expects a number of elements (0: whole kernels)");
      cuda.offloadChunk = n;
    } else if (!arg_.empty() && arg_[0] == '-') {
      return "unknown option '" + arg_ + "'";
    } else if (plan.empty()) {
      plan = arg_;
    } else {
      return "unexpected argument '" + arg_ + "'";
    }
    return std::nullopt;
  }

  std::string plan;
  std::vector<std::pair<std::string, std::string>> data;
  bool printMemory = false;
  bool help = false; // --help: the usage, on stdout, exit 0
  std::string weights; // --weights MODEL.onnx: initial weights from this model
  int64_t memoryBudget = 0; // --memory-budget: overrides the plan's
  std::string backend; // empty: the plan's target (zcc --target), else cpu
  CudaOptions cuda;    // --cuda-graphs, --offload-chunk

private:
  int argc_;
  char **argv_;
  int i_ = -1;
  std::string arg_;
};

/// zrun kernels PLAN: every kernel kind of the plan with its count, and
/// which instructions the CUDA backend would run on the host fallback; with
/// --ptx DIR, the compiler-generated kernels' PTX written out (for ptxas).
int kernelsCommand(int argc, char **argv) {
  Args args(argc, argv);
  std::string ptxDir; // --ptx DIR: write the plan's generated kernels
  while (args.next()) {
    if (args.is("--ptx")) {
      if (!args.value(ptxDir))
        return usageError("--ptx expects a directory");
    } else if (auto error = args.common()) {
      return usageError(*error);
    }
  }
  if (args.help)
    return printUsage();
  if (args.plan.empty())
    return usageError("missing PLAN");
  plan::Plan plan;
  if (Status s = loadPlan(args.plan, plan); !s)
    return fail(s);
  std::string why;
  bool cuda = cudaUsable(why) || why.find("built without") == std::string::npos;
  std::map<std::string, std::pair<int64_t, int64_t>> kinds; // name -> (count, fallback)
  for (const plan::Program &p : plan.programs())
    for (int i = 0; i < p.instructions_size(); ++i) {
      const plan::Instruction &inst = p.instructions(i);
      if (!inst.has_kernel())
        continue;
      bool native = cudaRunsNatively(plan, inst.kernel());
      auto &[n, fallback] = kinds[inst.kernel().name()];
      ++n;
      if (!native) {
        ++fallback;
        if (cuda) {
          std::string shapes;
          for (int b : inst.kernel().inputs()) {
            shapes += "[";
            for (int k = 0; k < plan.buffers(b).shape_size(); ++k)
              shapes += (k ? "x" : "") + std::to_string(plan.buffers(b).shape(k));
            shapes += "]";
          }
          std::printf("host fallback: %s:%d %s (%s) %s\n", p.name().c_str(), i,
                      inst.kernel().name().c_str(), inst.kernel().location().c_str(),
                      shapes.c_str());
        }
      }
    }
  if (!ptxDir.empty()) {
    // Each distinct generated kernel once, as DIR/kernel-N.ptx, for ptxas.
    std::set<std::string> seen;
    for (const plan::Program &p : plan.programs())
      for (const plan::Instruction &inst : p.instructions())
        if (inst.has_kernel() && !inst.kernel().code().empty() &&
            seen.insert(inst.kernel().code()).second) {
          std::string path = ptxDir + "/kernel-" + std::to_string(seen.size()) + ".ptx";
          std::ofstream f(path, std::ios::binary);
          f << inst.kernel().code();
          if (!f.flush())
            return fail(errorf("cannot write ", path));
        }
    std::printf("generated: %zu distinct kernels (PTX) written to %s\n", seen.size(),
                ptxDir.c_str());
  }
  int64_t total = 0, fallback = 0;
  for (const auto &[name, v] : kinds) {
    std::printf("%-24s %6lld%s\n", name.c_str(), (long long)v.first,
                !cuda ? "" : v.second ? ("  (" + std::to_string(v.second) + " on the host fallback)").c_str() : "");
    total += v.first;
    fallback += v.second;
  }
  if (cuda)
    std::printf("kernels: %lld in %zu kinds, %lld on the CUDA backend's host fallback\n",
                (long long)total, kinds.size(), (long long)fallback);
  else
    std::printf("kernels: %lld in %zu kinds (this zrun has no CUDA backend)\n", (long long)total,
                kinds.size());
  return 0;
}

int evalCommand(int argc, char **argv) {
  std::vector<std::pair<std::string, std::string>> outputs;
  int64_t batches = 1;
  Args args(argc, argv);
  while (args.next()) {
    if (args.is("--output")) {
      std::string v, name, path;
      if (!args.value(v) || !splitAssign(v, name, path))
        return usageError("--output expects NAME=FILE.npy");
      outputs.emplace_back(name, path);
    } else if (args.is("--batches")) {
      if (!args.integer(batches, 1))
        return usageError("--batches expects a positive integer");
    } else if (auto error = args.common()) {
      return usageError(*error);
    }
  }
  if (args.help)
    return printUsage();
  if (args.plan.empty())
    return usageError("missing PLAN");
  const std::string &planPath = args.plan;
  const auto &data = args.data;
  bool printMemory = args.printMemory;

  plan::Plan plan;
  if (Status s = loadPlan(planPath, plan); !s)
    return fail(s);
  if (args.memoryBudget > 0)
    plan.set_memory_budget(args.memoryBudget);
  const int world = plan.world_size();
  const plan::Program *program = findProgram(plan, "eval");
  if (!program)
    return fail(errorf(planPath, ": the plan has no 'eval' program"));
  DataFeeder feeder;
  if (Status s = feeder.load(data, plan, *program); !s)
    return fail(s);
  std::unique_ptr<WeightFile> weights;
  if (Status s = openWeights(args.weights, planPath, plan, /*resuming=*/false, weights); !s)
    return fail(s);
  int lossBuffer = namedBuffer(program, true, "loss");
  for (const auto &[name, path] : outputs)
    if (namedBuffer(program, true, name) < 0)
      return fail(errorf("--output ", name, ": the plan has no output named '", name, "'"));
  if (printMemory)
    std::printf("arena bytes: %lld%s\n", (long long)plannedBytes(plan),
                world > 1 ? " per rank" : "");

  // Batch k of rank r is the r-th slice of global batch k; the loss is the
  // mean over ranks and batches; --output writes rank 0's slice.
  std::vector<double> total(world, 0.0);
  auto evalRank = [&](int rank, Communicator *comm) -> Status {
    Status made;
    std::unique_ptr<ExecutorBase> owned =
        makeExecutor(args.backend, plan, rank, comm, weights.get(), made, args.cuda);
    ZRT_RETURN_IF_ERROR(made);
    ExecutorBase &executor = *owned;
    for (int64_t k = 0; k < batches; ++k) {
      feeder.feed(k * world + rank, executor, *program);
      ZRT_RETURN_IF_ERROR(executor.run(*program));
      if (lossBuffer >= 0)
        total[rank] += *executor.buffer(lossBuffer).as<float>();
      if (k == 0 && rank == 0)
        for (const auto &[name, path] : outputs) {
          TensorRef t = executor.buffer(namedBuffer(program, true, name));
          NpyArray array;
          array.dtype = t.dtype;
          array.shape = t.shape;
          array.data.assign(t.data, t.data + t.numel() * dtypeSize(t.dtype));
          std::string error;
          if (!writeNpy(path, array, error))
            return Status::error("--output " + name + ": " + error);
        }
    }
    return Status::ok();
  };
  if (Status s = runRanks(world, evalRank); !s)
    return fail(s);
  reportCudaStats(args.backend, plan, plan.world_size());
  if (lossBuffer >= 0) {
    double sum = 0;
    for (double t : total)
      sum += t;
    std::printf("loss: %.9g\n", sum / (batches * world));
  }
  return 0;
}

/// |job|: this process is one rank of a launched multi-process job.
int trainCommand(int argc, char **argv, const std::optional<LaunchEnv> &job) {
  const bool launched = job.has_value();
  const LaunchEnv launchEnv = job.value_or(LaunchEnv{});
  std::string metricsPath, tokenFile, v;
  int64_t steps = -1, shuffleSeed = -1, tokenBytes = 2, saveEvery = 0;
  double ncclTimeout = 300;
  std::string checkpointDir, resumeFrom;
  bool profile = false;
  bool haveTotal = false;
  double lr = -1;
  Schedule schedule;
  std::set<std::string> given; // schedule flags on the command line
  Args args(argc, argv);
  while (args.next()) {
    given.insert(args.arg());
    if (args.is("--steps")) {
      if (!args.integer(steps, 1))
        return usageError("--steps expects a positive integer");
    } else if (args.is("--shuffle")) {
      if (!args.integer(shuffleSeed, 0))
        return usageError("--shuffle expects a seed (a non-negative integer)");
    } else if (args.is("--tokens")) {
      if (!args.value(tokenFile))
        return usageError("--tokens expects a .bin file of token ids");
    } else if (args.is("--token-bytes")) {
      if (!args.integer(tokenBytes, 2) || (tokenBytes != 2 && tokenBytes != 4))
        return usageError("--token-bytes expects 2 (uint16) or 4 (uint32)");
    } else if (args.is("--warmup-steps")) {
      if (!args.integer(schedule.warmupSteps, 0))
        return usageError("--warmup-steps expects a non-negative integer");
    } else if (args.is("--total-steps")) {
      if (!args.integer(schedule.totalSteps, 1))
        return usageError("--total-steps expects a positive integer");
      haveTotal = true;
    } else if (args.is("--warmup-type")) {
      if (!args.value(v) || (v != "log" && v != "linear"))
        return usageError("--warmup-type expects log or linear");
      schedule.warmupLog = v == "log";
    } else if (args.is("--warmup-min-lr") || args.is("--warmup-min-ratio") ||
               args.is("--cos-min-ratio")) {
      double &target = args.is("--warmup-min-lr")      ? schedule.warmupMinLr
                       : args.is("--warmup-min-ratio") ? schedule.warmupMinRatio
                                                       : schedule.cosMinRatio;
      if (!args.number(target, 0, /*strict=*/false))
        return usageError(args.arg() + " expects a non-negative number");
    } else if (args.is("--lr")) {
      if (!args.number(lr, 0, /*strict=*/false))
        return usageError("--lr expects a non-negative number");
    } else if (args.is("--lr-schedule")) {
      if (!args.value(schedule.name))
        return usageError("--lr-schedule expects a name");
    } else if (args.is("--metrics")) {
      if (!args.value(metricsPath))
        return usageError("--metrics expects a file name");
    } else if (args.is("--checkpoint-dir")) {
      if (!args.value(checkpointDir))
        return usageError("--checkpoint-dir expects a directory");
    } else if (args.is("--save-every")) {
      if (!args.integer(saveEvery, 1))
        return usageError("--save-every expects a positive number of steps");
    } else if (args.is("--resume")) {
      if (!args.value(resumeFrom))
        return usageError("--resume expects a checkpoint directory");
    } else if (args.is("--profile")) {
      profile = true;
    } else if (args.is("--comm-timeout")) {
      if (!args.number(ncclTimeout, 0, /*strict=*/true))
        return usageError("--comm-timeout expects seconds");
    } else if (auto error = args.common()) {
      return usageError(*error);
    }
  }
  if (args.help)
    return printUsage();
  if (args.plan.empty())
    return usageError("missing PLAN");
  if (steps < 0)
    return usageError("train needs --steps N");
  if (!haveTotal)
    schedule.totalSteps = steps;
  const std::string &planPath = args.plan;
  const auto &data = args.data;
  bool printMemory = args.printMemory;

  plan::Plan plan;
  if (Status s = loadPlan(planPath, plan); !s)
    return fail(s);
  if (args.memoryBudget > 0)
    plan.set_memory_budget(args.memoryBudget);
  if (!plan.has_training())
    return fail(errorf(planPath, ": the plan does not train (its model has no trainable "
                                 "parameters; see zcc --trainable/--frozen)"));
  schedule.lr = lr < 0 ? plan.training().lr() : lr;
  if (plan.training().has_schedule() && !given.count("--lr-schedule")) {
    // The DeepSpeed config's scheduler (zcc --deepspeed); flags override it
    // field by field, and its "auto" steps (-1) are the flags'.
    const plan::LrSchedule &ps = plan.training().schedule();
    schedule.name = ps.name();
    if (lr < 0)
      schedule.lr = ps.lr();
    if (!given.count("--warmup-steps") && ps.warmup_steps() >= 0)
      schedule.warmupSteps = ps.warmup_steps();
    if (!haveTotal && ps.total_steps() > 0)
      schedule.totalSteps = ps.total_steps();
    if (!given.count("--warmup-type"))
      schedule.warmupLog = ps.warmup_log();
    if (!given.count("--warmup-min-lr"))
      schedule.warmupMinLr = ps.warmup_min_lr();
    if (!given.count("--warmup-min-ratio"))
      schedule.warmupMinRatio = ps.warmup_min_ratio();
    if (!given.count("--cos-min-ratio"))
      schedule.cosMinRatio = ps.cos_min_ratio();
  }
  if (Status s = schedule.validate(); !s)
    return usageError(s.message());
  const int world = plan.world_size();
  const plan::Program *micro = findProgram(plan, "micro_step");
  if (saveEvery > 0 && checkpointDir.empty())
    return usageError("--save-every needs --checkpoint-dir");
  uint64_t planHash = 0;
  if (!checkpointDir.empty() || !resumeFrom.empty())
    if (Status s = hashFile(planPath, planHash); !s)
      return fail(s);
  // --resume: the trainer state of the checkpoint; every rank then loads its
  // state arena. The plan must be the one that saved it.
  plan::Checkpoint resumed;
  std::string resumeDir;
  int64_t firstStep = 0;
  if (!resumeFrom.empty()) {
    if (Status s = findCheckpoint(resumeFrom, resumeDir); !s)
      return fail(s);
    if (Status s = readManifest(resumeDir, resumed); !s)
      return fail(s);
    if (resumed.plan_hash() != planHash || resumed.world_size() != world ||
        resumed.state_arena_bytes() != checkpointStateBytes(plan))
      return fail(errorf("--resume ", resumeDir, ": the checkpoint was saved by another plan (",
                         resumed.plan_source(), ", world size ", resumed.world_size(),
                         "); resume with the plan that saved it"));
    if (resumed.shuffle_seed() != shuffleSeed)
      return fail(errorf("--resume ", resumeDir, ": the run ", resumed.shuffle_seed() < 0
                                                                 ? std::string("did not shuffle")
                                                                 : "shuffled with seed " +
                                                                       std::to_string(resumed.shuffle_seed()),
                         "; pass the same --shuffle to continue the same data order"));
    firstStep = resumed.steps_done();
    if (firstStep >= steps)
      return fail(errorf("--resume ", resumeDir, ": the checkpoint is at step ", firstStep,
                         ", --steps ", steps, " asks for no more; raise --steps"));
    std::printf("resuming from %s: step %lld\n", resumeDir.c_str(), (long long)firstStep);
  }
  std::unique_ptr<WeightFile> weights;
  if (Status s = openWeights(args.weights, planPath, plan, !resumeDir.empty(), weights); !s)
    return fail(s);
  DataFeeder feeder;
  if (!tokenFile.empty() && !data.empty())
    return usageError("use --tokens or --data, not both");
  if (Status s = tokenFile.empty() ? feeder.load(data, plan, *micro)
                                   : feeder.loadTokens(tokenFile, (int)tokenBytes, plan, *micro);
      !s)
    return fail(s);
  if (shuffleSeed >= 0)
    feeder.shuffle((uint64_t)shuffleSeed);
  // The step loop (runtime/train/Trainer.h); zrun prints and writes metrics.
  TrainerConfig config;
  config.steps = steps;
  config.schedule = schedule;
  config.checkpointDir = checkpointDir;
  config.saveEvery = saveEvery;
  config.planHash = planHash;
  config.shuffleSeed = shuffleSeed;
  if (!resumeDir.empty()) {
    config.resume = &resumed;
    config.resumeDir = resumeDir;
  }
  config.profile = profile;
  config.ranksAreProcesses = launched;
  std::unique_ptr<Trainer> trainer;
  if (Status s = Trainer::create(plan, feeder, config, trainer); !s)
    return fail(errorf(planPath, ": ", s.message()));
  const int64_t tokens = trainer->tokensPerStep();
  const int64_t rankBytes = plannedBytes(plan);
  if (printMemory && (!launched || launchEnv.rank == 0))
    std::printf("arena bytes: %lld%s\n", (long long)rankBytes, world > 1 ? " per rank" : "");

  if (launched && launchEnv.world != world)
    return fail(errorf(planPath, ": the plan is for world size ", world, ", the launcher started ",
                       launchEnv.world, " ranks (", launchEnv.source, "); compile with --world-size ",
                       launchEnv.world));
  if (launched && (args.backend.empty() ? plan.target() : args.backend) != "cuda")
    return usageError("multi-process runs use NCCL: pass --backend cuda (or compile with "
                      "zcc --target cuda)");
  if (launched && launchEnv.rank != 0)
    metricsPath.clear(); // rank 0 logs and writes the metrics
  std::string tmpMetrics = metricsPath + ".tmp";
  FILE *metrics = nullptr;
  if (!metricsPath.empty() && !(metrics = std::fopen(tmpMetrics.c_str(), "w")))
    return fail(errorf("--metrics ", metricsPath, ": cannot write ", tmpMetrics));
  auto abandon = [&](const Status &s) {
    if (metrics) {
      std::fclose(metrics);
      std::remove(tmpMetrics.c_str());
    }
    return fail(s);
  };

  bool tty = isatty(fileno(stdout));
  bool scaling = plan.training().has_loss_scaling();
  double elapsed = 0;
  // Rank 0's log line, progress bar and metrics record of each step.
  trainer->onStep = [&](const StepRecord &r) {
    int64_t k = r.step;
    if (tty)
      std::printf("\r\033[K"); // clear the progress bar
    std::printf("step %lld/%lld | loss %.6f | lr %.3e | grad_norm %.4f", (long long)k + 1,
                (long long)steps, r.loss, r.lr, r.gradNorm);
    if (scaling)
      std::printf(" | loss_scale %.0f", r.lossScale);
    std::printf(" | %.1f ms | %.0f tokens/s%s\n", r.ms, r.tokensPerSecond, r.note.c_str());
    if (tty) {
      // A progress bar under the log lines, on a terminal only.
      elapsed += r.ms;
      int width = 30, done = (int)(width * (k + 1) / steps);
      double eta = elapsed / (k + 1) * (steps - k - 1) / 1000.0;
      std::printf("[%s%s] %lld/%lld, eta %.1f s", std::string(done, '#').c_str(),
                  std::string(width - done, '.').c_str(), (long long)k + 1, (long long)steps, eta);
      if (k + 1 == steps)
        std::printf("\n");
    }
    std::fflush(stdout);
    // JSON has no inf/NaN: an overflowed step's norm is null.
    char normText[32], lossText[32];
    if (std::isfinite(r.gradNorm))
      std::snprintf(normText, sizeof normText, "%.9g", r.gradNorm);
    else
      std::snprintf(normText, sizeof normText, "null");
    if (std::isfinite(r.loss))
      std::snprintf(lossText, sizeof lossText, "%.9g", r.loss);
    else
      std::snprintf(lossText, sizeof lossText, "null");
    if (metrics)
      std::fprintf(metrics,
                   "{\"step\": %lld, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, "
                   "\"loss_scale\": %.17g, \"skipped\": %s, \"tokens_per_s\": %.1f, "
                   "\"step_ms\": %.3f, \"peak_bytes\": %lld}\n",
                   (long long)k, lossText, r.lr, normText, r.lossScale,
                   r.skipped ? "true" : "false", r.tokensPerSecond, r.ms, (long long)rankBytes);
  };
  trainer->onCheckpoint = [](const std::string &dir) {
    std::printf("checkpoint: %s\n", dir.c_str());
    std::fflush(stdout);
  };
  auto trainRank = [&](int rank, Communicator *comm) -> Status {
    Status made;
    std::unique_ptr<ExecutorBase> executor =
        makeExecutor(args.backend, plan, rank, comm, weights.get(), made, args.cuda,
                     launched ? launchEnv.localRank : -1);
    ZRT_RETURN_IF_ERROR(made);
    ZRT_RETURN_IF_ERROR(trainer->run(rank, *executor, comm));
    if (rank == 0 && profile)
      printProfile(plan, executor->profile(),
                   std::max<int64_t>(1, steps - trainer->firstStep() - 1));
    return Status::ok();
  };
  Status ran = Status::ok();
  if (launched) {
    // This process is one rank; NCCL connects it to the others.
    std::unique_ptr<Communicator> comm;
    ran = makeNcclCommunicator(launchEnv, -1, ncclTimeout, comm);
    if (ran) {
      ran = trainRank(launchEnv.rank, comm.get());
      if (!ran) {
        comm->abort("rank failed");
        std::string prefix = "rank " + std::to_string(launchEnv.rank) + ": ";
        if (ran.message().rfind(prefix, 0) != 0) // name the rank once
          ran = Status::error(prefix + ran.message());
      }
    }
  } else {
    ran = runRanks(world, trainRank);
  }
  if (!ran)
    return abandon(ran);
  reportCudaStats(args.backend, plan, launched ? 1 : plan.world_size());
  if (int64_t skipped = trainer->skippedSteps())
    std::printf("%lld of %lld steps skipped on fp16 overflow\n", (long long)skipped,
                (long long)steps);
  if (metrics) {
    if (std::fclose(metrics) != 0 || std::rename(tmpMetrics.c_str(), metricsPath.c_str()) != 0) {
      std::remove(tmpMetrics.c_str());
      return fail(errorf("--metrics ", metricsPath, ": cannot write the file"));
    }
  }
  return 0;
}

/// Finite-difference check of the gradients that micro_step computes: for
/// every trainable parameter, the directional derivative of the eval loss
/// along a random unit direction, (L(p + h d) - L(p - h d)) / 2h, against
/// <grad, d>. Prints one line per parameter and the worst relative error.
int gradcheckCommand(int argc, char **argv) {
  std::string only;
  double h = 1e-2, tolerance = 1e-2;
  Args args(argc, argv);
  while (args.next()) {
    if (args.is("--param")) {
      if (!args.value(only))
        return usageError("--param expects a name (substring)");
    } else if (args.is("--epsilon") || args.is("--tolerance")) {
      if (!args.number(args.is("--epsilon") ? h : tolerance, 0, /*strict=*/true))
        return usageError(args.arg() + " expects a positive number");
    } else if (auto error = args.common()) {
      return usageError(*error);
    }
  }
  if (args.help)
    return printUsage();
  if (args.backend == "cuda")
    return usageError("gradcheck runs on the CPU backend");
  if (args.plan.empty())
    return usageError("missing PLAN");
  const std::string &planPath = args.plan;
  const auto &data = args.data;

  plan::Plan plan;
  if (Status s = loadPlan(planPath, plan); !s)
    return fail(s);
  if (args.memoryBudget > 0)
    plan.set_memory_budget(args.memoryBudget);
  if (plan.world_size() != 1)
    return fail(errorf(planPath, ": gradcheck runs world-size-1 plans (compile with "
                                 "--world-size 1)"));
  if (!plan.has_training())
    return fail(errorf(planPath, ": the plan does not train"));
  std::unique_ptr<WeightFile> weights;
  if (Status s = openWeights(args.weights, planPath, plan, /*resuming=*/false, weights); !s)
    return fail(s);
  Executor executor(plan);
  if (weights) {
    int loaded = 0;
    if (Status s = loadWeights(plan, *weights, 0, executor, loaded); !s)
      return fail(s);
  }
  const plan::Program *micro = executor.program("micro_step");
  const plan::Program *eval = executor.program("eval");
  DataFeeder microData, evalData;
  if (Status s = microData.load(data, plan, *micro); !s)
    return fail(s);
  if (Status s = evalData.load(data, plan, *eval); !s)
    return fail(s);
  int lossBuffer = namedBuffer(eval, true, "loss");
  microData.feed(0, executor, *micro);
  evalData.feed(0, executor, *eval);
  for (const plan::NamedBuffer &in : micro->inputs())
    if (in.name() == "loss_scale") // fp16 plans: unscaled gradients
      *executor.buffer(in.buffer()).as<float>() = 1.0f;
  if (Status s = executor.run(*micro); !s)
    return fail(s);
  auto lossAt = [&]() -> double {
    Status s = executor.run(*eval);
    return s ? *executor.buffer(lossBuffer).as<float>() : NAN;
  };
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal;
  double worst = 0;
  int checked = 0, failed = 0;
  // Every parameter at its place in its flat bucket (world size 1: the
  // buckets are whole).
  for (const plan::ParamLayout &l : plan.params()) {
    if (!only.empty() && l.name().find(only) == std::string::npos)
      continue;
    TensorRef p = executor.buffer(l.bucket()), g = executor.buffer(l.grad());
    p.data += l.offset() * sizeof(float);
    g.data += l.offset() * sizeof(float);
    p.shape.assign(l.shape().begin(), l.shape().end());
    g.shape = p.shape;
    const plan::ParamLayout &b = l;
    int64_t n = p.numel();
    std::vector<double> d(n);
    double norm = 0, analytic = 0;
    for (double &x : d) {
      x = normal(rng);
      norm += x * x;
    }
    norm = std::sqrt(norm);
    std::vector<float> saved(p.as<float>(), p.as<float>() + n);
    for (int64_t k = 0; k < n; ++k) {
      d[k] /= norm;
      analytic += g.as<float>()[k] * d[k];
    }
    auto shift = [&](double t) {
      for (int64_t k = 0; k < n; ++k)
        p.as<float>()[k] = (float)(saved[k] + t * d[k]);
    };
    shift(h);
    double up = lossAt();
    shift(-h);
    double down = lossAt();
    std::copy(saved.begin(), saved.end(), p.as<float>());
    double numeric = (up - down) / (2 * h);
    double err = std::fabs(analytic - numeric) / std::max(std::fabs(numeric), 1e-3);
    worst = std::max(worst, err);
    ++checked;
    failed += !(err <= tolerance);
    std::printf("%-60s analytic %+.6e numeric %+.6e rel %.2e%s\n", b.name().c_str(), analytic,
                numeric, err, err <= tolerance ? "" : "  FAIL");
  }
  std::printf("gradcheck: %d parameters, worst relative error %.2e, %d above %.0e\n", checked,
              worst, failed, tolerance);
  return failed ? 1 : 0;
}

} // namespace

/// zrun export CHECKPOINT [--safetensors OUT] [--onnx MODEL.onnx -o OUT.onnx]:
/// consolidates the ranks' shards into whole float32 tensors.
int exportCommand(int argc, char **argv) {
  std::string safetensors, onnxIn, onnxOut;
  Args args(argc, argv);
  while (args.next()) {
    if (args.is("--safetensors")) {
      if (!args.value(safetensors))
        return usageError("--safetensors expects an output file");
    } else if (args.is("--onnx")) {
      if (!args.value(onnxIn))
        return usageError("--onnx expects the model the plan was compiled from");
    } else if (args.is("-o")) {
      if (!args.value(onnxOut))
        return usageError("-o expects an output file");
    } else if (auto error = args.common()) {
      return usageError(*error);
    }
  }
  if (args.help)
    return printUsage();
  if (args.plan.empty())
    return usageError("export needs a checkpoint (a --checkpoint-dir or one of its step-K)");
  if (safetensors.empty() && onnxIn.empty())
    return usageError("export writes --safetensors OUT and/or --onnx MODEL.onnx -o OUT.onnx");
  if (onnxIn.empty() != onnxOut.empty())
    return usageError("--onnx MODEL.onnx and -o TRAINED.onnx go together");
  std::string dir;
  plan::Checkpoint manifest;
  if (Status s = findCheckpoint(args.plan, dir); !s)
    return fail(s);
  if (Status s = readManifest(dir, manifest); !s)
    return fail(s);
  std::vector<NamedTensor> tensors;
  if (Status s = consolidate(dir, manifest, tensors); !s)
    return fail(s);
  int trainable = 0;
  for (const NamedTensor &t : tensors)
    trainable += t.trainable;
  if (!safetensors.empty()) {
    if (Status s = writeSafetensors(safetensors, tensors, manifest); !s)
      return fail(s);
    std::printf("%s: %zu tensors (%d trained) after %lld steps\n", safetensors.c_str(),
                tensors.size(), trainable, (long long)manifest.steps_done());
  }
  if (!onnxIn.empty()) {
    int replaced = 0;
    if (Status s = writeTrainedOnnx(onnxIn, onnxOut, tensors, replaced); !s)
      return fail(s);
    std::printf("%s: %d initializers of %s replaced by the trained ones\n", onnxOut.c_str(),
                replaced, onnxIn.c_str());
  }
  return 0;
}

/// --hostfile and DeepSpeed's selection flags; the rest of the command is
/// what every node runs (runtime/launch/Launch.h).
int launchHostsCommand(int argc, char **argv) {
  HostLaunch launch;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  launch.argv.push_back(n > 0 ? std::string(self, n) : argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--hostfile") {
      if (!value(launch.hostfile))
        return usageError("--hostfile expects a file");
    } else if (a == "--include") {
      if (!value(launch.include))
        return usageError("--include expects host[:slots]@host...");
    } else if (a == "--exclude") {
      if (!value(launch.exclude))
        return usageError("--exclude expects host[:slots]@host...");
    } else if (a == "--num_nodes" || a == "--num_gpus" || a == "--master-port") {
      if (!value(v) || v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        return usageError(a + " expects a positive number");
      (a == "--num_nodes" ? launch.numNodes : a == "--num_gpus" ? launch.numGpus : launch.port) =
          std::atoi(v.c_str());
    } else if (a == "--dry-run") {
      launch.dryRun = true;
    } else {
      launch.argv.push_back(a);
    }
  }
  return launchHosts(launch);
}

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  // Under a launcher (or started by --nproc-per-node): one rank of a job.
  // Launched as one rank of a multi-process job (torchrun-style environment
  // or zrun --nproc-per-node): which one, and on which GPU.
  std::string envError;
  LaunchEnv launchEnv;
  bool launched = readLaunchEnv(launchEnv, envError);
  std::optional<LaunchEnv> job;
  if (launched)
    job = launchEnv;
  if (!envError.empty())
    return usageError("launcher environment: " + envError);
  for (int i = 2; i + 1 < argc && !launched; ++i)
    if (!std::strcmp(argv[i], "--hostfile"))
      return launchHostsCommand(argc, argv);
  for (int i = 2; i + 1 < argc && !launched; ++i)
    if (!std::strcmp(argv[i], "--nproc-per-node")) {
      int nproc = std::atoi(argv[i + 1]), port = 29500;
      for (int j = 2; j + 1 < argc; ++j)
        if (!std::strcmp(argv[j], "--master-port"))
          port = std::atoi(argv[j + 1]);
      if (nproc < 1 || nproc > 4096 || port < 1 || port > 65535)
        return usageError("--nproc-per-node expects 1-4096 processes, --master-port a port");
      std::vector<std::string> rest; // the command, without the launch flags
      for (int j = 0; j < argc; ++j) {
        if (!std::strcmp(argv[j], "--nproc-per-node") || !std::strcmp(argv[j], "--master-port")) {
          ++j;
          continue;
        }
        rest.push_back(argv[j]);
      }
      return launchLocal(rest, nproc, port);
    }
  try {
    if (command == "eval")
      return evalCommand(argc - 2, argv + 2);
    if (command == "train")
      return trainCommand(argc - 2, argv + 2, job);
    if (command == "gradcheck")
      return gradcheckCommand(argc - 2, argv + 2);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "zrun: error: out of memory allocating the plan's arenas\n");
    return 1;
  }
  if (command == "export")
    return exportCommand(argc - 2, argv + 2);
  if (command == "kernels")
    return kernelsCommand(argc - 2, argv + 2);
  if (command == "devices") {
    // Whether --backend cuda can run here (exit 0) or not (1, and why).
    std::string why;
    if (cudaUsable(why)) {
      std::printf("cuda: usable\n");
      return 0;
    }
    std::printf("cuda: %s\n", why.c_str());
    return 1;
  }
  return usageError("unknown command '" + command + "'");
}
