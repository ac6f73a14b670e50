//===- Settings.cpp - merging zcc's flags with a DeepSpeed config ---------===//
#include "Settings.h"

#include "zcc/Pipelines/Pipelines.h"

#include "llvm/Support/FormatVariadic.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <tuple>

using namespace llvm;

namespace zcc {
namespace {

Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

template <typename T> std::string show(const T &v) { return formatv("{0}", v).str(); }
std::string show(bool v) { return v ? "true" : "false"; }
std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// The config's value if it has one (a conflicting explicit flag is an
/// error), else the flag's.
template <typename T>
Error merge(T &out, bool flagGiven, const T &flagValue, const std::optional<T> &configValue,
            StringRef flag, StringRef key, StringRef path) {
  if (!configValue) {
    out = flagValue;
    return Error::success();
  }
  if (flagGiven && !(flagValue == *configValue))
    return fail(flag + " " + show(flagValue) + " conflicts with " + key + " = " +
                show(*configValue) + " in " + path +
                "; give one of them (or set the key to "
                "\"auto\")");
  out = *configValue;
  return Error::success();
}

} // namespace

Expected<Settings> resolveSettings(const FlagValues &flags, const DeepSpeedConfig *config,
                                   function_ref<void(const std::string &)> warn) {
  const Settings &f = flags.settings;
  if (!config)
    return f;
  const DeepSpeedConfig &c = *config;
  StringRef path = c.path;
  for (const std::string &w : c.warnings)
    warn(w);
  Settings s = f;
  // The keys that map one to one (Settings.def's ZCC_DEEPSPEED entries).
  // ZeRO's sizes are in elements (DeepSpeed's unit); "auto" is -1.
  auto sizeFlag = [&](int64_t &out, bool given, int64_t flagValue, const std::optional<double> &v,
                      StringRef flag, StringRef key) -> Error {
    std::optional<int64_t> cv;
    if (v && !c.isAuto(key))
      cv = (int64_t)*v;
    if (Error e = merge(out, given, flagValue, cv, flag, key, path))
      return e;
    if (!given && c.isAuto(key))
      out = -1;
    return Error::success();
  };
#define ZCC_DEEPSPEED(member, flag, config, key)                                                   \
  if (Error e = merge(s.member, flags.given(flag), f.member, c.config, "--" flag, key, path))      \
    return std::move(e);
#define ZCC_DEEPSPEED_SIZE(member, flag, config, key)                                              \
  if (Error e = sizeFlag(s.member, flags.given(flag), f.member, c.config, "--" flag, key))         \
    return std::move(e);
#include "zcc/Pipelines/Settings.def"

  // Batch sizes: DeepSpeed's rule train_batch_size = micro * accumulation *
  // world size; any two give the third. Flags fill "auto".
  std::optional<int64_t> tb = c.trainBatchSize, mb = c.microBatchPerGpu,
                         ga = c.gradientAccumulationSteps;
  if (Error e = merge(s.microBatch, flags.given("micro-batch"), f.microBatch, mb, "--micro-batch",
                      "train_micro_batch_size_per_gpu", path))
    return std::move(e);
  if (Error e = merge(s.gradAccum, flags.given("grad-accum"), f.gradAccum, ga, "--grad-accum",
                      "gradient_accumulation_steps", path))
    return std::move(e);
  if (flags.given("micro-batch"))
    mb = s.microBatch;
  if (flags.given("grad-accum"))
    ga = s.gradAccum;
  int64_t w = s.worldSize;
  if (tb) {
    if (mb && ga) {
      if (*tb != *mb * *ga * w)
        return fail(formatv("{0}: train_batch_size {1} != train_micro_batch_size_per_gpu {2} * "
                            "gradient_accumulation_steps {3} * world size {4}; fix one of them",
                            path, *tb, *mb, *ga, w));
    } else if (mb) {
      if (*tb % (*mb * w))
        return fail(formatv("{0}: train_batch_size {1} is not a multiple of "
                            "train_micro_batch_size_per_gpu {2} * world size {3}",
                            path, *tb, *mb, w));
      s.gradAccum = *tb / (*mb * w);
    } else if (ga) {
      if (*tb % (*ga * w))
        return fail(formatv("{0}: train_batch_size {1} is not a multiple of "
                            "gradient_accumulation_steps {2} * world size {3}",
                            path, *tb, *ga, w));
      s.microBatch = *tb / (*ga * w);
    } else {
      if (*tb % w)
        return fail(formatv("{0}: train_batch_size {1} is not a multiple of the world size {2}",
                            path, *tb, w));
      s.microBatch = *tb / w;
      s.gradAccum = 1;
    }
  }

  // A step of more micro-steps than this never ends in practice (a typo:
  // 1e9); zrun refuses such plans too.
  constexpr int64_t kMaxGradAccum = 65536;
  if (s.gradAccum > kMaxGradAccum)
    return fail(formatv("gradient accumulation {0} (--grad-accum or {1}'s "
                        "gradient_accumulation_steps): more than {2} micro-steps per optimizer "
                        "step",
                        s.gradAccum, path.empty() ? std::string("the config") : path.str(),
                        kMaxGradAccum));

  // Precision.
  std::optional<std::string> precision;
  if (c.fp16Enabled.value_or(false))
    precision = "fp16";
  else if (c.bf16Enabled.value_or(false))
    precision = "bf16";
  if (flags.given("precision") && precision && f.precision != *precision)
    return fail("--precision " + f.precision + " conflicts with " +
                (*precision == "bf16" ? "bf16.enabled" : "fp16.enabled") + " = true in " + path +
                "; give one of them");
  if (Error e = merge(s.precision, flags.given("precision"), f.precision, precision, "--precision",
                      precision == "bf16" ? "bf16.enabled" : "fp16.enabled", path))
    return std::move(e);

  // Optimizer. DeepSpeed builds its AdamW with FusedAdam's defaults, whose
  // weight decay is 0 (PyTorch's AdamW has 0.01): a config with an optimizer
  // section and no weight_decay decays nothing.
  std::optional<double> decay = c.weightDecay;
  if (c.optimizer && !decay && !flags.given("weight-decay") &&
      !c.isAuto("optimizer.params.weight_decay"))
    decay = 0.0;
  if (Error e = merge(s.weightDecay, flags.given("weight-decay"), f.weightDecay, decay,
                      "--weight-decay", "optimizer.params.weight_decay", path))
    return std::move(e);
  if (Error e = merge(s.beta1, flags.given("betas"), f.beta1, c.beta1, "--betas",
                      "optimizer.params.betas[0]", path))
    return std::move(e);
  if (Error e = merge(s.beta2, flags.given("betas"), f.beta2, c.beta2, "--betas",
                      "optimizer.params.betas[1]", path))
    return std::move(e);
  if (s.optimizer == "adamw" && (c.momentum || c.nesterov))
    warn((path + ": key 'optimizer.params.momentum'/'nesterov': AdamW has no momentum; "
                 "ignored")
             .str());

  // Scheduler: stored in the plan, run by zrun (whose flags override it).
  if (c.scheduler) {
    s.schedule = *c.scheduler;
    bool byRatio = *c.scheduler == "WarmupCosineLR";
    if (byRatio)
      s.scheduleLr = s.lr; // a ratio of the optimizer's lr
    else if (c.warmupMaxLr)
      s.scheduleLr = *c.warmupMaxLr;
    else
      s.scheduleLr =
          c.isAuto("scheduler.params.warmup_max_lr") ? s.lr : 1e-3; // DeepSpeed's default
    s.warmupMinLr = c.warmupMinLr.value_or(0.0);
    s.warmupMinRatio = c.warmupMinRatio.value_or(0.0);
    s.cosMinRatio = c.cosMinRatio.value_or(1e-4);
    s.warmupLog = c.warmupType.value_or("log") == "log";
    s.warmupSteps = c.warmupNumSteps                                ? *c.warmupNumSteps
                    : c.isAuto("scheduler.params.warmup_num_steps") ? -1
                                                                    : 1000;
    s.totalSteps = c.totalNumSteps ? *c.totalNumSteps : -1;
    if (*c.scheduler != "WarmupLR" && !c.totalNumSteps &&
        !c.isAuto("scheduler.params.total_num_steps"))
      return fail(path + ": key 'scheduler.params.total_num_steps': " + *c.scheduler +
                  " needs it (or \"auto\": zrun's --steps)");
    if (s.totalSteps > 0 && s.warmupSteps >= 0 && *c.scheduler != "WarmupLR" &&
        s.totalSteps <= s.warmupSteps)
      return fail(formatv("{0}: key 'scheduler.params.total_num_steps': {1} must exceed "
                          "warmup_num_steps {2}",
                          path, s.totalSteps, s.warmupSteps));
  }

  if (c.activationCheckpointing) {
    if (flags.given("recompute") && f.recompute != "layer")
      return fail("--recompute " + f.recompute + " conflicts with activation_checkpointing in " +
                  path +
                  " (DeepSpeed's checkpointing of each block: --recompute layer); give "
                  "one of them");
    s.recompute = "layer";
    if (c.partitionActivations.value_or(false))
      warn((path + ": key 'activation_checkpointing.partition_activations': checkpoints are "
                   "not partitioned over the ranks (each rank keeps its own micro-batch's)")
               .str());
    if (c.cpuCheckpointing.value_or(false))
      warn((path + ": key 'activation_checkpointing.cpu_checkpointing': checkpoints stay in "
                   "device memory")
               .str());
  }
  if (c.offloadOptimizer) {
    std::optional<std::string> device = c.offloadOptimizer->device;
    if (Error e =
            merge(s.offloadOptimizer, flags.given("offload-optimizer"), f.offloadOptimizer, device,
                  "--offload-optimizer", "zero_optimization.offload_optimizer.device", path))
      return std::move(e);
    if (Error e =
            merge(s.nvmePath, flags.given("nvme-path"), f.nvmePath, c.offloadOptimizer->nvmePath,
                  "--nvme-path", "zero_optimization.offload_optimizer.nvme_path", path))
      return std::move(e);
  }
  if (c.subGroupSize && !flags.given("nvme-chunk"))
    s.nvmeChunk = *c.subGroupSize;
  if (c.aioBlockSize)
    s.nvmeBlockSize = *c.aioBlockSize;
  if (c.aioQueueDepth)
    s.nvmeQueueDepth = *c.aioQueueDepth;
  if (c.offloadParam) {
    std::optional<std::string> device = c.offloadParam->device;
    if (Error e = merge(s.offloadParam, flags.given("offload-param"), f.offloadParam, device,
                        "--offload-param", "zero_optimization.offload_param.device", path))
      return std::move(e);
    // One swap-file directory serves both (zrun keeps one file a rank).
    if (c.offloadParam->nvmePath && !c.offloadParam->nvmePath->empty()) {
      if (s.nvmePath.empty())
        s.nvmePath = *c.offloadParam->nvmePath;
      else if (s.nvmePath != *c.offloadParam->nvmePath)
        return fail(path + ": key 'zero_optimization.offload_param.nvme_path' (" +
                    *c.offloadParam->nvmePath + ") differs from the optimizer's (" + s.nvmePath +
                    "): zcc keeps one swap file a rank; give both the same directory");
    }
  }
  if (s.zeroStage < 3 && c.offloadParam && c.offloadParam->device != "none")
    return fail(path + ": key 'zero_optimization.offload_param' needs stage 3 (DeepSpeed "
                       "offloads parameters only with stage 3)");
  if (c.offloadParam && c.offloadParam->device != "none" && s.offloadOptimizer == "none")
    return fail(path + ": key 'zero_optimization.offload_param' needs offload_optimizer too "
                       "(device cpu or nvme): zcc runs the update where the parameter shards "
                       "live");
  return s;
}

int64_t meshGroup(int64_t size, int64_t world, bool hpz) {
  return size <= (hpz ? 1 : 0) || size == world ? 0 : size;
}

namespace {
/// An error message built with <<.
/// A setting's value as an error message shows it: a string quoted.
std::string shown(const std::string &v) { return "'" + v + "'"; }
template <typename T> std::string shown(const T &v) { return show(v); }

struct Msg {
  std::string text;
  template <typename T> Msg &operator<<(const T &x) {
    raw_string_ostream(text) << x;
    return *this;
  }
  operator Error() const { return fail(text); }
};
} // namespace

Error checkSettings(const Settings &S) {
  // Each setting's own range (Settings.def's ZCC_CHECK entries).
#define ZCC_CHECK(member, flag, valid, expected)                                                   \
  if (const auto &v = S.member; !(valid))                                                          \
    return Msg() << "--" flag " " << shown(v) << ": expected " expected;
#include "zcc/Pipelines/Settings.def"
  // Settings checked together.
  if (S.gradAccumDtype != "auto" && S.gradAccumDtype != "fp32" &&
      (S.gradAccumDtype != "bf16" || S.precision != "bf16") &&
      (S.gradAccumDtype != "fp16" || S.precision != "fp16")) {
    return Msg() << "--grad-accum-dtype (data_types.grad_accum_dtype) '" << S.gradAccumDtype
                 << "' with --precision " << S.precision
                 << ": expected auto, fp32, or the 16-bit type the model trains in";
  }
  if (S.offloadOptimizer != "none" && S.zeroStage < 1) {
    return Msg() << "--offload-optimizer " << S.offloadOptimizer
                 << " needs ZeRO stage 1, 2 or 3 (as DeepSpeed's offload_optimizer); give "
                    "--zero-stage";
  }
  if ((S.offloadOptimizer == "nvme" || S.offloadParam == "nvme") && S.nvmePath.empty()) {
    return Msg() << "--offload-" << (S.offloadOptimizer == "nvme" ? "optimizer" : "param")
                 << " nvme needs --nvme-path DIR (the directory "
                    "of the swap files, on the NVMe drive; zrun --nvme-path can change it)";
  }
  if (S.offloadParam != "none" && (S.zeroStage != 3 || S.offloadOptimizer == "none")) {
    return Msg() << "--offload-param " << S.offloadParam
                 << " needs ZeRO stage 3 (as DeepSpeed's "
                    "offload_param) and --offload-optimizer cpu or nvme (the update runs where "
                    "the parameters live)";
  }
  const int64_t mics = meshGroup(S.micsShardSize, S.worldSize, false),
                hpz = meshGroup(S.hpzPartitionSize, S.worldSize, true);
  if (mics == 1) {
    return Msg() << "--mics-shard-size 1 keeps the whole state on every rank: that "
                    "is --zero-stage 0 (give a group of 2 or more ranks)";
  }
  for (auto [flag, size, g] : {std::tuple{"--mics-shard-size", S.micsShardSize, mics},
                               std::tuple{"--hpz-partition-size", S.hpzPartitionSize, hpz}}) {
    if (g && (S.worldSize % g || g > S.worldSize)) {
      return Msg() << flag << " " << size << ": the groups must divide --world-size " << S.worldSize
                   << " (a node's ranks: --world-size is nodes x ranks per node)";
    }
  }
  if (mics && hpz) {
    return Msg() << "--mics-shard-size and --hpz-partition-size exclude each other "
                    "(as in DeepSpeed): MiCS replicates the state across groups, hpZ shards it "
                    "over every rank; give one";
  }
  if (mics && S.zeroStage < 1) {
    return Msg() << "--mics-shard-size shards the optimizer state: it needs "
                    "--zero-stage 1, 2 or 3 (got 0)";
  }
  if (S.quantizedWeights && S.zeroStage != 3) {
    return Msg() << "--quantized-weights (qwZ) quantizes the gathers of stage 3's "
                    "partitioned parameters: it needs --zero-stage 3 (got "
                 << S.zeroStage << ")";
  }
  if (S.quantizedGradients && S.zeroStage < 1) {
    return Msg() << "--quantized-gradients (qgZ) quantizes the reduce-scatter of "
                    "partitioned gradients: it needs --zero-stage 1, 2 or 3 (got 0, which "
                    "all-reduces them)";
  }
  if (S.moeEpSize > 1) {
    if (S.moeDispatch == "dense")
      return Msg() << "--moe-ep-size " << S.moeEpSize
                   << " splits the experts of routed (dropless) blocks over the ranks; "
                      "--moe-dispatch dense runs every expert on every rank: leave one out";
    if (S.moeCapacityFactor > 0)
      return Msg() << "--moe-ep-size " << S.moeEpSize
                   << " routes dropless (the all-gather dispatch); --moe-capacity-factor is for "
                      "one rank's experts: leave one of them out";
    const int64_t group = mics ? mics : hpz;
    if (S.moeEpSize != S.worldSize && S.moeEpSize != group)
      return Msg() << "--moe-ep-size " << S.moeEpSize << ": expected the world size ("
                   << S.worldSize
                   << ") or the mesh's group size (--mics-shard-size or --hpz-partition-size"
                   << (group ? ", here " + std::to_string(group) : std::string())
                   << "): expert-parallel groups are consecutive ranks";
  }
  if (hpz && S.zeroStage != 3) {
    return Msg() << "--hpz-partition-size keeps a secondary partition of stage 3's "
                    "parameters: it needs --zero-stage 3 (got "
                 << S.zeroStage << ")";
  }
  return Error::success();
}

void setPipelineOptions(TrainingPipelineOptions &o, const Settings &S, StringRef recompute) {
  // The pipeline options Settings.def declares with the setting's own type.
#define ZCC_PIPELINE_FLAG(member, type, dflt, option, flag, value, help) o.member = S.member;
#define ZCC_PIPELINE(member, type, dflt, option, help) o.member = S.member;
#include "zcc/Pipelines/Settings.def"
  // The ZCC_FLAG settings, converted.
  o.precision = S.precision == "bf16"   ? Precision::BF16
                : S.precision == "fp16" ? Precision::FP16
                                        : Precision::FP32;
  o.recompute = recompute == "layer"       ? RecomputePolicy::Layer
                : recompute == "selective" ? RecomputePolicy::Selective
                                           : RecomputePolicy::None;
  o.micsShardSize = meshGroup(S.micsShardSize, S.worldSize, false);
  o.hpzPartitionSize = meshGroup(S.hpzPartitionSize, S.worldSize, true);
  o.quantizedWeights = S.quantizedWeights && S.worldSize > 1;
  o.quantizedGradients = S.quantizedGradients && S.worldSize > 1;
  o.offloadOptimizer = S.offloadOptimizer == "cpu"    ? OffloadDevice::CPU
                       : S.offloadOptimizer == "nvme" ? OffloadDevice::NVMe
                                                      : OffloadDevice::None;
  o.offloadParam = S.offloadParam == "cpu"    ? OffloadDevice::CPU
                   : S.offloadParam == "nvme" ? OffloadDevice::NVMe
                                              : OffloadDevice::None;
  o.optimizer = S.optimizer == "sgd" ? OptimizerKind::SGD : OptimizerKind::AdamW;
  if (S.schedule) {
    o.schedule = *S.schedule;
    o.scheduleLr = S.scheduleLr;
    o.warmupSteps = S.warmupSteps;
    o.totalSteps = S.totalSteps;
    o.warmupMinLr = S.warmupMinLr;
    o.warmupLog = S.warmupLog;
    o.warmupMinRatio = S.warmupMinRatio;
    o.cosMinRatio = S.cosMinRatio;
  }
}

} // namespace zcc
