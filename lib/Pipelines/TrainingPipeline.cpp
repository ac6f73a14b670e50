//===- TrainingPipeline.cpp - zero-training-pipeline ----------------------===//
//
// The order, and why (docs/runtime.md has each pass):
//   settings first (zero-training-config), then import clean-up
//   (canonicalize, zero-recognize-patterns, cse), the loss, mixed precision,
//   the CUDA target's forward fusions (before differentiation: their ops
//   have gradient rules), autodiff, recompute, ZeRO partitioning, the
//   optimizer (which reads the partition), the communication schedule,
//   offload (after the schedule: the copies follow the accumulations where
//   they ended up), the epilogue/cast/elementwise fusions (after
//   differentiation: no gradient rule needs them), memory planning and the
//   lowering to zrt.
//
//===----------------------------------------------------------------------===//
#include "zcc/Pipelines/Pipelines.h"

#include "zcc/Conversion/Passes.h"
#include "zcc/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

llvm::StringRef zcc::stringify(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "fp32";
}
llvm::StringRef zcc::stringify(Target t) { return t == Target::CUDA ? "cuda" : "cpu"; }
llvm::StringRef zcc::stringify(RecomputePolicy r) {
  switch (r) {
  case RecomputePolicy::None:
    return "none";
  case RecomputePolicy::Layer:
    return "layer";
  case RecomputePolicy::Selective:
    return "selective";
  }
  return "none";
}
llvm::StringRef zcc::stringify(OptimizerKind o) {
  return o == OptimizerKind::SGD ? "sgd" : "adamw";
}
llvm::StringRef zcc::stringify(OffloadDevice d) {
  return d == OffloadDevice::CPU ? "cpu" : d == OffloadDevice::NVMe ? "nvme" : "none";
}

void zcc::buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineOptions &o) {
  bool cuda = o.target == Target::CUDA;
  ZeroTrainingConfigOptions config;
  config.precision = stringify(o.precision).str();
  config.target = stringify(o.target).str();
  config.train = o.train;
  config.gradAccum = o.gradAccum;
  config.lr = o.lr;
  config.optimizer = stringify(o.optimizer).str();
  config.beta1 = o.beta1;
  config.beta2 = o.beta2;
  config.epsilon = o.eps;
  config.weightDecay = o.weightDecay;
  config.gradClip = o.gradClip;
  config.schedule = o.schedule;
  config.scheduleLr = o.scheduleLr;
  config.warmupSteps = o.warmupSteps;
  config.totalSteps = o.totalSteps;
  config.warmupMinLr = o.warmupMinLr;
  config.warmupLog = o.warmupLog;
  config.warmupMinRatio = o.warmupMinRatio;
  config.cosMinRatio = o.cosMinRatio;
  pm.addPass(createZeroTrainingConfig(config));

  pm.addPass(createCanonicalizerPass());
  pm.addPass(createZeroRecognizePatterns());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // A plan always has a loss; the zero IR only when one is asked for.
  if (o.loss != LossKind::None || o.lower || !o.auxLoss.empty()) {
    ZeroAttachLossOptions loss;
    loss.loss = o.loss == LossKind::CrossEntropy ? "cross-entropy" : "none";
    loss.logits = o.logits.getValue();
    loss.auxLoss.assign(o.auxLoss.begin(), o.auxLoss.end());
    pm.addPass(createZeroAttachLoss(loss));
  }
  if (o.precision != Precision::FP32) {
    ZeroMixedPrecisionOptions mp;
    mp.precision = stringify(o.precision).str();
    mp.lossScale = o.lossScale;
    mp.initialScalePower = o.initialScalePower;
    mp.lossScaleWindow = o.lossScaleWindow;
    mp.hysteresis = o.hysteresis;
    mp.consecutiveHysteresis = o.consecutiveHysteresis;
    mp.minLossScale = o.minLossScale;
    pm.addPass(createZeroMixedPrecision(mp));
  }
  // The GPU's attention as one flash-attention kernel; vocabulary-sized
  // GEMM outputs padded to aligned rows.
  // Packed documents (--per-document) take fused attention on every target:
  // the fused op is what keeps each query inside its document.
  if (cuda || o.perDocument) {
    ZeroFuseAttentionOptions fa;
    if (o.perDocument)
      fa.documents = "position_ids";
    pm.addPass(createZeroFuseAttention(fa));
  }
  if (cuda)
    pm.addPass(createZeroPadGemms());
  // Layout: transposes sunk below RoPE and other elementwise chains cancel
  // against attention's (or each other) before the backward is derived.
  pm.addPass(createZeroPropagateTransposes());
  if (o.train) {
    ZeroAutodiffOptions ad;
    ad.gradAccum = o.gradAccum;
    pm.addPass(createZeroAutodiff(ad));
    if (o.recompute != RecomputePolicy::None) {
      ZeroRecomputeOptions rc;
      rc.policy = stringify(o.recompute).str();
      pm.addPass(createZeroRecompute(rc));
    }
    ZeroPartitionOptions part;
    part.stage = o.zeroStage;
    part.worldSize = o.worldSize;
    part.reduceBucketSize = o.reduceBucketSize;
    part.allgatherBucketSize = o.allgatherBucketSize;
    part.persistenceThreshold = o.persistenceThreshold;
    part.commDtype = o.commDtype;
    part.gradAccumDtype = o.gradAccumDtype;
    part.micsShardSize = o.micsShardSize;
    part.hpzPartitionSize = o.hpzPartitionSize;
    part.maxReuseDistance = o.maxReuseDistance;
    part.quantizedWeights = o.quantizedWeights;
    part.quantizedGradients = o.quantizedGradients;
    part.quantizedGradientBits = o.quantizedGradientBits;
    pm.addPass(createZeroPartition(part));
    ZeroOptimizerOptions opt;
    opt.optimizer = stringify(o.optimizer).str();
    opt.momentum = o.momentum;
    opt.nesterov = o.nesterov;
    opt.beta1 = o.beta1;
    opt.beta2 = o.beta2;
    opt.epsilon = o.eps;
    opt.weightDecay = o.weightDecay;
    opt.gradClip = o.gradClip;
    pm.addPass(createZeroOptimizer(opt));
    ZeroScheduleOptions sched;
    sched.overlapComm = o.overlapComm;
    sched.prefetchBucketSize = o.prefetchBucketSize;
    sched.maxLiveParameters = o.maxLiveParameters;
    pm.addPass(createZeroSchedule(sched));
    if (o.offloadOptimizer != OffloadDevice::None) {
      ZeroOffloadOptions off;
      off.device = stringify(o.offloadOptimizer).str();
      off.param = stringify(o.offloadParam).str();
      off.nvmePath = o.nvmePath;
      off.nvmeBlockSize = o.nvmeBlockSize;
      off.nvmeQueueDepth = o.nvmeQueueDepth;
      off.nvmeChunk = o.nvmeChunk;
      pm.addPass(createZeroOffload(off));
    }
  }
  if (o.lower) {
    ZeroFuseEpiloguesOptions epilogues;
    epilogues.gelu = cuda;
    epilogues.add = cuda;
    pm.addPass(createZeroFuseEpilogues(epilogues));
    if (o.train)
      pm.addPass(createZeroFuseOptimizer());
    pm.addPass(createZeroGroupCasts());
    if (cuda && o.fuseElementwise)
      pm.addPass(createZeroFuseElementwise());
    // After the fusions, whose windows the updates would widen.
    if (o.train && (o.optimizerInBackward == InBackward::On ||
                    (o.optimizerInBackward == InBackward::Auto && cuda))) {
      ZeroOptimizerInBackwardOptions inBackward;
      inBackward.async = cuda;
      pm.addPass(createZeroOptimizerInBackward(inBackward));
    }
    pm.addPass(createZeroPlanMemory());
    pm.addPass(createConvertZeroToZrt());
  }
}

void zcc::registerTrainingPipeline() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "zero-training-pipeline",
      "zcc's pipeline: an imported zero module to a zrt plan (the passes of docs/runtime.md)",
      buildTrainingPipeline);
}
