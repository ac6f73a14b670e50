//===- Run.cpp - the options every command shares; eval; kernels ----------===//
#include "run/Run.h"

#include "cuda/CudaExecutor.h" // cudaUsable
#include "launch/Launch.h"
#include "plan/PlanLoader.h"
#include "support/ByteSize.h"
#include "train/Data.h"
#include "train/Npy.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

using namespace zrt;

namespace {
/// The CUDA backend's device allocation besides the arenas (its cuBLASLt
/// workspace, runtime/cuda/CudaExecutor.cu).
constexpr int64_t kCudaWorkspaceBytes = 32 << 20;
} // namespace

int64_t zrt::plannedBytes(const plan::Plan &plan) {
  return plan.device_arena_bytes() + plan.state_arena_bytes() + plan.constant_arena_bytes() +
         plan.input_arena_bytes() + plan.host_arena_bytes();
}

std::string zrt::backendOf(const RunOptions &options, const plan::Plan &plan) {
  if (!options.backend.empty())
    return options.backend;
  if (plan.target() != "cuda")
    return "cpu";
  // A plan compiled for CUDA (zcc --target cuda, as docs/finetune.md's) on a
  // machine without a usable GPU: the CPU backend runs every plan, so run it
  // there and say so once, rather than fail on the driver.
  static const bool usable = [] {
    std::string why;
    bool ok = cudaUsable(why);
    if (!ok)
      std::fprintf(stderr,
                   "zrun: the plan is compiled for CUDA (zcc --target cuda), but "
                   "%s: running it on the CPU backend (as --backend cpu; --backend cuda insists "
                   "on the GPU)\n",
                   why.c_str());
    return ok;
  }();
  return usable ? "cuda" : "cpu";
}

Status zrt::loadRunPlan(const RunOptions &options, plan::Plan &plan) {
  ZRT_RETURN_IF_ERROR(loadPlan(options.plan, plan));
  if (options.memoryBudget > 0)
    plan.set_memory_budget(options.memoryBudget);
  if (options.hostMemoryBudget > 0)
    plan.set_host_memory_budget(options.hostMemoryBudget);
  return Status::ok();
}

Status zrt::openWeights(const RunOptions &options, const plan::Plan &plan, bool resuming,
                        std::unique_ptr<WeightFile> &out) {
  out.reset();
  if (options.weights.empty()) {
    if (planNeedsWeights(plan) && !resuming)
      return errorf(options.plan, ": the plan carries no weights (zcc --weights external); "
                                  "pass --weights MODEL.onnx, the model it was compiled from");
    return Status::ok();
  }
  if (resuming) {
    std::fprintf(stderr,
                 "zrun: --resume: the weights come from the checkpoint; --weights %s is not "
                 "read\n",
                 options.weights.c_str());
    return Status::ok();
  }
  auto weights = std::make_unique<WeightFile>();
  ZRT_RETURN_IF_ERROR(WeightFile::open(options.weights, *weights));
  ZRT_RETURN_IF_ERROR(checkWeights(plan, *weights));
  out = std::move(weights);
  return Status::ok();
}

Status zrt::makeExecutor(const RunOptions &options, const plan::Plan &plan, int rank,
                         Communicator *comm, const WeightFile *weights, int device,
                         std::unique_ptr<ExecutorBase> &out) {
  const bool cuda = backendOf(options, plan) == "cuda";
  // The budget (the plan's, or zrun's) is checked before anything is
  // allocated; the CUDA backend also keeps its kernel scratch within it.
  if (plan.memory_budget() > 0) {
    int64_t need = plannedBytes(plan) - plan.host_arena_bytes() + (cuda ? kCudaWorkspaceBytes : 0);
    if (need > plan.memory_budget())
      return errorf("the plan needs ", showByteSize(need), " per rank",
                    cuda ? " (arenas and the 32 MiB cuBLASLt workspace)" : "",
                    ", more than --memory-budget ", showByteSize(plan.memory_budget()),
                    "; compile with zcc --memory-budget SIZE --auto for a plan that fits");
  }
  if (plan.host_memory_budget() > 0 && plan.host_arena_bytes() > plan.host_memory_budget())
    return errorf("the plan needs ", showByteSize(plan.host_arena_bytes()),
                  " of pinned host memory per rank (offloaded state and its staging buffers), "
                  "more than --host-memory-budget ",
                  showByteSize(plan.host_memory_budget()),
                  plan.nvme_arena_bytes() > 0
                      ? "; compile with a smaller zcc --nvme-chunk (the host holds a few chunks "
                        "of the update at a time)"
                      : "; compile with zcc --offload-optimizer nvme (or --auto --nvme-path DIR) "
                        "to keep the optimizer state on disk");
  Status status = Status::ok();
  std::unique_ptr<ExecutorBase> executor;
  if (cuda)
    executor = makeCudaExecutor(plan, rank, comm, device, options.cuda, status);
  else if ((status = checkBlasMemory()))
    executor = std::make_unique<Executor>(plan, rank, comm);
  ZRT_RETURN_IF_ERROR(status);
  ZRT_RETURN_IF_ERROR(executor->openNvme(options.nvmePath, rank));
  if (const SwapFile *f = executor->swapFile(); f && rank == 0)
    std::fprintf(stderr, "zrun: NVMe: %s, %s per rank, %s, %s, %s requests, %d in flight%s\n",
                 f->path().c_str(), showByteSize(f->size()).c_str(),
                 f->direct() ? "O_DIRECT" : "buffered (the filesystem has no O_DIRECT)",
                 f->uring() ? "io_uring" : "pread/pwrite (no io_uring here)",
                 showByteSize(f->options().blockSize).c_str(), f->options().queueDepth,
                 f->reusedStale() ? "; a stale file of an earlier run was reused" : "");
  if (weights) {
    int loaded = 0;
    ZRT_RETURN_IF_ERROR(loadWeights(plan, *weights, rank, *executor, loaded));
    if (rank == 0)
      std::fprintf(stderr, "zrun: %d weights loaded from %s\n", loaded, weights->path().c_str());
  }
  out = std::move(executor);
  return Status::ok();
}

void zrt::reportCudaStats(const RunOptions &options, const plan::Plan &plan, int ranksHere) {
  if (backendOf(options, plan) != "cuda")
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
  const int64_t planned = plannedBytes(plan) - plan.host_arena_bytes();
  for (const auto &[device, bytes] : st.deviceBytes) {
    int per = std::max(1, ranksHere / std::max<int>(1, (int)st.deviceBytes.size()));
    std::string ranks = per > 1 ? ", for " + std::to_string(per) + " ranks" : "";
    std::fprintf(stderr,
                 "zrun: cuda: device %d: %lld bytes (%.3f GiB) allocated by zrun at most%s, "
                 "planned device arenas %lld bytes per rank (measured %+.2f%%)\n",
                 device, (long long)bytes, bytes / 1073741824.0, ranks.c_str(), (long long)planned,
                 100.0 * ((double)bytes / per - planned) / planned);
  }
}

//===--- eval -------------------------------------------------------------===//

Status zrt::loadData(const TokenSource &tokens, const NamedFiles &data, const plan::Plan &plan,
                     const plan::Program &program, DataFeeder &feeder) {
  if (!tokens.path.empty() && !data.empty())
    return errorf("use ", tokens.flag, " or --data, not both");
  if (tokens.path.empty() && (tokens.eos >= 0 || !tokens.promptMask.empty()))
    return errorf(tokens.eos >= 0 ? "--eos" : tokens.maskFlag.c_str(), " goes with ", tokens.flag,
                  " FILE.bin (a token file)");
  return tokens.path.empty() ? feeder.load(data, plan, program)
                             : feeder.loadTokens(tokens, plan, program);
}

Status zrt::evaluate(const RunOptions &options, const EvalOptions &eval,
                     std::optional<double> &loss) {
  plan::Plan plan;
  ZRT_RETURN_IF_ERROR(loadRunPlan(options, plan));
  const int world = plan.world_size();
  const plan::Program *program = findProgram(plan, "eval");
  if (!program)
    return errorf(options.plan, ": the plan has no 'eval' program");
  DataFeeder feeder;
  ZRT_RETURN_IF_ERROR(loadData(eval.tokens, options.data, plan, *program, feeder));
  std::unique_ptr<WeightFile> weights;
  ZRT_RETURN_IF_ERROR(openWeights(options, plan, /*resuming=*/false, weights));
  int lossBuffer = namedBuffer(program, true, "loss");
  // --output NAME: an output after the run, or an input as it was fed.
  std::vector<std::pair<int, std::string>> written, fed;
  for (const auto &[name, path] : eval.outputs) {
    if (int b = namedBuffer(program, true, name); b >= 0)
      written.push_back({b, path});
    else if (int b = namedBuffer(program, false, name); b >= 0 && !isTrainerInput(name))
      fed.push_back({b, path});
    else
      return errorf("--output ", name, ": the plan has no output or input named '", name, "'");
  }
  if (options.printMemory)
    std::printf("arena bytes: %lld%s\n", (long long)plannedBytes(plan),
                world > 1 ? " per rank" : "");

  std::vector<double> total(world, 0.0);
  auto evalRank = [&](int rank, Communicator *comm) -> Status {
    std::unique_ptr<ExecutorBase> executor;
    ZRT_RETURN_IF_ERROR(
        makeExecutor(options, plan, rank, comm, weights.get(), /*device=*/-1, executor));
    auto write = [&](const std::vector<std::pair<int, std::string>> &buffers) -> Status {
      for (const auto &[buffer, path] : buffers) {
        TensorRef t = executor->buffer(buffer);
        NpyArray array;
        array.dtype = t.dtype;
        array.shape = t.shape;
        array.data.assign(t.data, t.data + t.numel() * dtypeSize(t.dtype));
        std::string error;
        if (!writeNpy(path, array, error))
          return errorf("--output ", path, ": ", error);
      }
      return Status::ok();
    };
    for (int64_t k = 0; k < eval.batches; ++k) {
      if (Status s = feeder.feed(k * world + rank, *executor, *program); !s)
        return errorf(s.message(), " (batch ", k, " of rank ", rank, ")");
      if (k == 0 && rank == 0)
        ZRT_RETURN_IF_ERROR(write(fed));
      ZRT_RETURN_IF_ERROR(executor->run(*program));
      if (lossBuffer >= 0)
        total[rank] += *executor->buffer(lossBuffer).as<float>();
      if (k == 0 && rank == 0)
        ZRT_RETURN_IF_ERROR(write(written));
    }
    return Status::ok();
  };
  ZRT_RETURN_IF_ERROR(runRanks(world, evalRank));
  reportCudaStats(options, plan, world);
  loss.reset();
  if (lossBuffer >= 0) {
    double sum = 0;
    for (double t : total)
      sum += t;
    loss = sum / (eval.batches * world);
  }
  return Status::ok();
}

//===--- kernels ----------------------------------------------------------===//

KernelReport zrt::kernelReport(const plan::Plan &plan,
                               const std::function<bool(const plan::Kernel &)> &native) {
  KernelReport report;
  for (const plan::Program &p : plan.programs())
    for (int i = 0; i < p.instructions_size(); ++i) {
      const plan::Instruction &inst = p.instructions(i);
      if (!inst.has_kernel())
        continue;
      KernelKind &kind = report.kinds[inst.kernel().name()];
      ++kind.count;
      if (native(inst.kernel()))
        continue;
      ++kind.fallback;
      FallbackInstruction f{p.name(), inst.kernel().name(), inst.kernel().location(), "", i};
      for (int b : inst.kernel().inputs()) {
        f.shapes += "[";
        for (int k = 0; k < plan.buffers(b).shape_size(); ++k)
          f.shapes += (k ? "x" : "") + std::to_string(plan.buffers(b).shape(k));
        f.shapes += "]";
      }
      report.fallback.push_back(std::move(f));
    }
  return report;
}

Status zrt::writeGeneratedPtx(const plan::Plan &plan, const std::string &dir, int &written) {
  std::set<std::string> seen;
  for (const plan::Program &p : plan.programs())
    for (const plan::Instruction &inst : p.instructions()) {
      if (!inst.has_kernel() || inst.kernel().code().empty() ||
          !seen.insert(inst.kernel().code()).second)
        continue;
      std::string path = dir + "/kernel-" + std::to_string(seen.size()) + ".ptx";
      std::ofstream f(path, std::ios::binary);
      f << inst.kernel().code();
      if (!f.flush())
        return errorf("--ptx ", dir, ": cannot write ", path);
    }
  written = (int)seen.size();
  return Status::ok();
}
