//===- DeepSpeedConfig.h - reading DeepSpeed JSON configs --------*- C++ -*-===//
//
// `zcc --deepspeed FILE.json` accepts the configs DeepSpeed users already
// have. Every value is optional: absent and "auto" both leave the setting to
// zcc's flags (as HuggingFace's integration fills "auto" from its
// TrainingArguments); `isAuto` records which were "auto" so that the driver
// can resolve the model-dependent ones (bucket sizes from the hidden size).
// Wrong types and impossible values are errors naming the key; unknown keys
// are listed (unknownKeys, with the closest known key) for the driver to
// refuse unless --allow-unknown-keys; keys that change nothing in zcc are
// warnings.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_CONFIG_DEEPSPEEDCONFIG_H
#define ZCC_CONFIG_DEEPSPEEDCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zcc {

struct DeepSpeedOffload {
  std::string device = "none"; // none, cpu, nvme
  bool pinMemory = false;
  std::optional<std::string> nvmePath; // nvme_path
};

struct DeepSpeedConfig {
  std::string path;

  // Batch sizes.
  std::optional<int64_t> trainBatchSize, microBatchPerGpu, gradientAccumulationSteps;

  // optimizer: {type, params}
  std::optional<std::string> optimizer; // "adamw" or "sgd"
  std::optional<double> lr, beta1, beta2, eps, weightDecay, momentum;
  std::optional<bool> nesterov;

  // scheduler: {type, params}
  std::optional<std::string> scheduler; // WarmupLR, WarmupDecayLR, WarmupCosineLR
  std::optional<double> warmupMinLr, warmupMaxLr, warmupMinRatio, cosMinRatio;
  std::optional<int64_t> warmupNumSteps, totalNumSteps;
  std::optional<std::string> warmupType; // log, linear

  std::optional<double> gradientClipping;

  // communication_data_type: what gradient reductions (and zcc's stage-3
  // gathers) move, "fp32", "fp16" or "bf16".
  std::optional<std::string> communicationDataType;
  // data_types.grad_accum_dtype: what gradients accumulate in across
  // micro-steps, "fp32", "fp16" or "bf16" (absent: zcc-partition's auto).
  std::optional<std::string> gradAccumDtype;

  // fp16 / bf16
  std::optional<bool> fp16Enabled, bf16Enabled;
  std::optional<double> lossScale, minLossScale;
  std::optional<int64_t> initialScalePower, lossScaleWindow, hysteresis;
  std::optional<bool> consecutiveHysteresis;

  // zero_optimization
  std::optional<int64_t> zeroStage;
  std::optional<double> reduceBucketSize, allgatherBucketSize, prefetchBucketSize,
      paramPersistenceThreshold, maxLiveParameters, maxReuseDistance, subGroupSize;
  std::optional<bool> overlapComm, contiguousGradients, reduceScatter, allgatherPartitions;
  std::optional<DeepSpeedOffload> offloadOptimizer, offloadParam;
  // aio (NVMe offload's I/O): block_size, queue_depth.
  std::optional<int64_t> aioBlockSize, aioQueueDepth;
  // The device mesh (zcc --mics-shard-size, --hpz-partition-size): DeepSpeed's
  // off values are -1 and 1.
  std::optional<int64_t> micsShardSize, hpzPartitionSize;
  std::optional<bool> quantizedWeights;   // zero_quantized_weights (qwZ)
  std::optional<bool> quantizedGradients; // zero_quantized_gradients (qgZ)

  // activation_checkpointing (present: zcc --recompute layer)
  bool activationCheckpointing = false;
  std::optional<bool> partitionActivations, cpuCheckpointing;

  /// Dotted keys whose value was "auto", e.g. "zero_optimization.reduce_bucket_size".
  llvm::StringSet<> autoKeys;
  /// Warnings: keys DeepSpeed has that change nothing in zcc.
  std::vector<std::string> warnings;
  /// Keys neither DeepSpeed's schema (as zcc knows it) nor zcc has, each
  /// with a "did you mean" from edit distance where one is close: errors
  /// unless zcc --allow-unknown-keys (a typo such as "zero_optimisation"
  /// would silently train at stage 0).
  std::vector<std::string> unknownKeys;

  bool isAuto(llvm::StringRef key) const { return autoKeys.contains(key); }
};

/// Reads and validates a DeepSpeed JSON config. Errors say the file and the
/// dotted key, what was expected and what was found.
llvm::Expected<DeepSpeedConfig> readDeepSpeedConfig(llvm::StringRef path);
/// The same for a config's text (|path| for messages; test/fuzz).
llvm::Expected<DeepSpeedConfig> parseDeepSpeedConfig(llvm::StringRef text, llvm::StringRef path);

} // namespace zcc

#endif // ZCC_CONFIG_DEEPSPEEDCONFIG_H
