//===- Settings.h - the training settings of one zcc run ---------*- C++ -*-===//
//
// zcc's flags and a DeepSpeed config (--deepspeed) describe the same things.
// resolveSettings merges them: a flag fills what the config leaves out or
// sets to "auto"; a flag given explicitly that disagrees with an explicit
// config value is an error naming both (as HuggingFace's integration refuses
// mismatched TrainingArguments), never a silent choice.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TOOLS_SETTINGS_H
#define ZCC_TOOLS_SETTINGS_H

#include "zcc/Config/DeepSpeedConfig.h"
#include "zcc/Pipelines/Pipelines.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace zcc {

struct Settings {
  int64_t microBatch = 0; // 0: the model's own batch dimension
  int64_t gradAccum = 1;
  int64_t worldSize = 1;
  std::string precision = "fp32";
  std::string optimizer = "adamw";
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01;
  double momentum = 0;
  bool nesterov = false;
  double gradClip = 0;
  // fp16 (DeepSpeed's defaults)
  double lossScale = 0, minLossScale = 1;
  int64_t initialScalePower = 16, lossScaleWindow = 1000, hysteresis = 2;
  bool consecutiveHysteresis = false;
  // The DeepSpeed scheduler, if any; -1 steps: "auto" (zrun's flags decide).
  std::optional<std::string> schedule;
  double scheduleLr = 0, warmupMinLr = 0, warmupMinRatio = 0, cosMinRatio = 1e-4;
  int64_t warmupSteps = 1000, totalSteps = -1;
  bool warmupLog = true;
  // zero_optimization (DeepSpeed's defaults; -1: "auto", resolved from the
  // model's hidden size H by the passes as HuggingFace does)
  int64_t zeroStage = 0;
  int64_t reduceBucketSize = 500000000, allgatherBucketSize = 500000000;
  int64_t prefetchBucketSize = 50000000, persistenceThreshold = 100000;
  int64_t maxLiveParameters = 1000000000, maxReuseDistance = 1000000000;
  bool overlapComm = false;
  // What collectives move (communication_data_type): fp32, bf16 or fp16.
  std::string commDtype = "fp32";
  // What gradients accumulate in across micro-steps (data_types.
  // grad_accum_dtype): auto, fp32, bf16 or fp16.
  std::string gradAccumDtype = "auto";
  // The device mesh (0: none): MiCS / HSDP's shard group, or hpZ's
  // secondary partition (mics_shard_size, zero_hpz_partition_size).
  int64_t micsShardSize = 0, hpzPartitionSize = 0;
  // ZeRO++ qwZ: stage 3's gathers in blockwise int8 (zero_quantized_weights).
  bool quantizedWeights = false;
  // ZeRO++ qgZ: gradient reduce-scatters in blockwise int8 through
  // all-to-alls (zero_quantized_gradients).
  bool quantizedGradients = false;
  // Activation checkpointing: none, layer, selective (zero-recompute).
  std::string recompute = "none";
  // ZeRO-Offload of the optimizer: none or cpu (zero-offload).
  std::string offloadOptimizer = "none";
  std::string offloadParam = "none"; // stage 3, with offloadOptimizer cpu
  // offloadOptimizer nvme (ZeRO-Infinity): the swap files' directory
  // (offload_optimizer.nvme_path) and the aio section's request size and
  // queue depth (0: the runtime's 1 MiB and 8).
  std::string nvmePath;
  int64_t nvmeBlockSize = 0, nvmeQueueDepth = 0;
  // The update's chunk on NVMe, in elements (zero_optimization.sub_group_size).
  int64_t nvmeChunk = 16777216;
};

/// What the flags say, and which were on the command line: |given| asks
/// the option itself (zcc: cl::opt's occurrence count), by its name without
/// dashes ("zero-stage"; "betas" for beta1 and beta2).
struct FlagValues {
  Settings settings;
  std::function<bool(llvm::StringRef flag)> given = [](llvm::StringRef) { return false; };
};

/// Merges the flags with |config| (if any) and checks the result. Warnings
/// (unknown keys, settings zcc does not act on yet) go to |warn|.
llvm::Expected<Settings> resolveSettings(const FlagValues &flags, const DeepSpeedConfig *config,
                                         llvm::function_ref<void(const std::string &)> warn);

/// Checks resolved settings on their own and against each other (ranges,
/// the stages each ZeRO feature needs, the mesh groups): the first problem,
/// as a message that names the flag and what to give.
llvm::Error checkSettings(const Settings &settings);

/// The mesh group size --mics-shard-size or --hpz-partition-size |size| asks
/// for at |world| ranks: 0 (off) for DeepSpeed's off values (mics -1,
/// hpZ 0 or 1) and for a group of every rank, which is plain ZeRO.
int64_t meshGroup(int64_t size, int64_t world, bool hpz);

/// Sets the pipeline's options that |settings| decide in |options|, with
/// recomputation |recompute| (--recompute's, or a candidate of --auto); the
/// driver sets its own (target, loss, what to emit).
void setPipelineOptions(TrainingPipelineOptions &options, const Settings &settings,
                        llvm::StringRef recompute);

} // namespace zcc

#endif // ZCC_TOOLS_SETTINGS_H
