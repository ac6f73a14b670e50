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

namespace {
/// Pass |Options|'s options that Settings.def says the pipeline hands over
/// unchanged (its ZCC_FEEDS entries); the caller sets the converted ones.
template <typename Options> Options passOptions(const zcc::TrainingPipelineOptions &o) {
  Options p;
#define ZCC_FEEDS(member, Pass, passMember)                                                        \
  if constexpr (std::is_same_v<Options, zcc::Zero##Pass##Options>)                                 \
    p.passMember = o.member;
#include "zcc/Pipelines/Settings.def"
  return p;
}
} // namespace

void zcc::buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineOptions &o) {
  bool cuda = o.target == Target::CUDA;
  auto config = passOptions<ZeroTrainingConfigOptions>(o);
  config.precision = stringify(o.precision).str();
  config.target = stringify(o.target).str();
  config.optimizer = stringify(o.optimizer).str();
  config.train = o.train; // the pass's default is the forward alone (zcc-opt)
  pm.addPass(createZeroTrainingConfig(config));

  pm.addPass(createCanonicalizerPass());
  pm.addPass(createZeroRecognizePatterns());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Dropless unless asked for the exported dense form (both targets have
  // the grouped GEMMs: runtime/cpu/Moe.cpp, runtime/cuda/Moe.cu).
  if (o.moeDispatch != "dense")
    pm.addPass(createZeroMoeDispatch(passOptions<ZeroMoeDispatchOptions>(o)));
  // A plan always has a loss; the zero IR only when one is asked for.
  if (o.loss != LossKind::None || o.lower || !o.auxLoss.empty()) {
    ZeroAttachLossOptions loss;
    loss.loss = o.loss == LossKind::CrossEntropy ? "cross-entropy" : "none";
    loss.logits = o.logits.getValue();
    loss.auxLoss.assign(o.auxLoss.begin(), o.auxLoss.end());
    pm.addPass(createZeroAttachLoss(loss));
  }
  if (o.precision != Precision::FP32) {
    auto mp = passOptions<ZeroMixedPrecisionOptions>(o);
    mp.precision = stringify(o.precision).str();
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
    pm.addPass(createZeroAutodiff(passOptions<ZeroAutodiffOptions>(o)));
    if (o.recompute != RecomputePolicy::None) {
      ZeroRecomputeOptions rc;
      rc.policy = stringify(o.recompute).str();
      pm.addPass(createZeroRecompute(rc));
    }
    pm.addPass(createZeroPartition(passOptions<ZeroPartitionOptions>(o)));
    auto opt = passOptions<ZeroOptimizerOptions>(o);
    opt.optimizer = stringify(o.optimizer).str();
    pm.addPass(createZeroOptimizer(opt));
    pm.addPass(createZeroSchedule(passOptions<ZeroScheduleOptions>(o)));
    if (o.offloadOptimizer != OffloadDevice::None) {
      auto off = passOptions<ZeroOffloadOptions>(o);
      off.device = stringify(o.offloadOptimizer).str();
      off.param = stringify(o.offloadParam).str();
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
