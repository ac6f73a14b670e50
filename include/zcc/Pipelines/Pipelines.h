//===- Pipelines.h - zcc's pass pipeline, in the library ---------*- C++ -*-===//
//
// zero-training-pipeline: the passes from an imported `zero` module to the
// `zrt` plan, in order, with typed options. zcc builds it from its flags
// and a DeepSpeed config; `zcc-opt --zero-training-pipeline='...'` runs the
// same pipeline on a module printed by `zcc --emit=mlir` (test/Pipelines).
// docs/runtime.md lists the passes.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_PIPELINES_PIPELINES_H
#define ZCC_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace zcc {

enum class LossKind { None, CrossEntropy };
enum class Precision { FP32, BF16, FP16 };
enum class Target { CPU, CUDA };
enum class RecomputePolicy { None, Layer, Selective };
enum class OptimizerKind { AdamW, SGD };
enum class OffloadDevice { None, CPU, NVMe };
/// Where AdamW runs: after the backward, or inside it (zero-optimizer-in-backward).
enum class InBackward { Auto, On, Off };

llvm::StringRef stringify(Precision p);
llvm::StringRef stringify(Target t);
llvm::StringRef stringify(RecomputePolicy r);
llvm::StringRef stringify(OptimizerKind o);
llvm::StringRef stringify(OffloadDevice d);

/// Every setting of the pipeline, with zcc's defaults (DeepSpeed's where it
/// has one). Sizes of -1 are DeepSpeed's "auto", resolved by the passes from
/// the model's hidden size.
struct TrainingPipelineOptions : public mlir::PassPipelineOptions<TrainingPipelineOptions> {
  template <typename T> using Opt = Option<T>;

  // The settings Settings.def declares as pipeline options (types, defaults
  // and help there; zcc's flags and Settings come from the same entries).
#define ZCC_PIPELINE_FLAG(member, type, dflt, option, flag, value, help)                           \
  Opt<type> member{*this, option, llvm::cl::desc(help), llvm::cl::init(dflt)};
#define ZCC_PIPELINE(member, type, dflt, option, help)                                             \
  Opt<type> member{*this, option, llvm::cl::desc(help), llvm::cl::init(dflt)};
#define ZCC_OPTION(member, type, dflt, option, help)                                               \
  Opt<type> member{*this, option, llvm::cl::desc(help), llvm::cl::init(dflt)};
#include "zcc/Pipelines/Settings.def"

  // The rest: enums zcc's Settings hold as strings, values derived from
  // several settings, and the driver's own.

  Opt<LossKind> loss{*this, "loss",
                     llvm::cl::desc("none: the graph's scalar output is the loss; cross-entropy: "
                                    "the logits against a new int64 input 'labels'"),
                     llvm::cl::init(LossKind::None),
                     llvm::cl::values(clEnumValN(LossKind::None, "none", "the graph's output"),
                                      clEnumValN(LossKind::CrossEntropy, "cross-entropy",
                                                 "mean cross-entropy, ignore -100"))};
  Opt<std::string> logits{*this, "logits",
                          llvm::cl::desc("cross-entropy: the output holding the logits "
                                         "(default: the first float output of rank >= 1)"),
                          llvm::cl::init("")};
  ListOption<std::string> auxLoss{*this, "aux-loss",
                                  llvm::cl::desc("NAME=COEF: COEF x the scalar output NAME is "
                                                 "added to the loss (repeatable)")};
  Opt<Precision> precision{
      *this, "precision", llvm::cl::desc("compute precision (float32 masters for 16-bit)"),
      llvm::cl::init(Precision::FP32),
      llvm::cl::values(clEnumValN(Precision::FP32, "fp32", "float32"),
                       clEnumValN(Precision::BF16, "bf16", "bfloat16 compute"),
                       clEnumValN(Precision::FP16, "fp16", "float16, dynamic loss scaling"))};
  Opt<Target> target{*this, "target", llvm::cl::desc("where the plan runs by default"),
                     llvm::cl::init(Target::CPU),
                     llvm::cl::values(clEnumValN(Target::CPU, "cpu", "the CPU"),
                                      clEnumValN(Target::CUDA, "cuda",
                                                 "NVIDIA GPUs: flash attention, padded GEMMs, "
                                                 "GEMM epilogues, generated kernels"))};
  Opt<bool> perDocument{*this, "per-document",
                        llvm::cl::desc("packed documents: attention stays inside each (the "
                                       "@forward input position_ids; every attention fused, "
                                       "on every target)"),
                        llvm::cl::init(false)};
  Opt<bool> fuseElementwise{*this, "fuse-elementwise",
                            llvm::cl::desc("cuda: generate kernels for elementwise trees"),
                            llvm::cl::init(true)};
  Opt<InBackward> optimizerInBackward{
      *this, "optimizer-in-backward",
      llvm::cl::desc("each parameter's AdamW inside the micro-step once its gradient is final, "
                     "where a step is one micro-step on one rank without clipping or fp16 "
                     "scaling (async on a second stream with target=cuda)"),
      llvm::cl::init(InBackward::Auto),
      llvm::cl::values(clEnumValN(InBackward::Auto, "auto", "on with target=cuda"),
                       clEnumValN(InBackward::On, "on", "on for every target"),
                       clEnumValN(InBackward::Off, "off", "AdamW after the backward"))};
  Opt<bool> train{*this, "train",
                  llvm::cl::desc("differentiate and add the optimizer (a model with trainable "
                                 "parameters); false: the forward only"),
                  llvm::cl::init(true)};
  Opt<bool> lower{*this, "lower",
                  llvm::cl::desc("plan memory and lower to zrt (false: stop at the zero IR)"),
                  llvm::cl::init(true)};
  Opt<RecomputePolicy> recompute{
      *this, "recompute", llvm::cl::desc("activation checkpointing"),
      llvm::cl::init(RecomputePolicy::None),
      llvm::cl::values(clEnumValN(RecomputePolicy::None, "none", "keep every activation"),
                       clEnumValN(RecomputePolicy::Layer, "layer", "each repeated block"),
                       clEnumValN(RecomputePolicy::Selective, "selective",
                                  "cheap ops from saved matmul outputs"))};
  Opt<OffloadDevice> offloadOptimizer{
      *this, "offload-optimizer", llvm::cl::desc("ZeRO-Offload of the optimizer state"),
      llvm::cl::init(OffloadDevice::None),
      llvm::cl::values(clEnumValN(OffloadDevice::None, "none", "on the device"),
                       clEnumValN(OffloadDevice::CPU, "cpu", "pinned host memory"),
                       clEnumValN(OffloadDevice::NVMe, "nvme", "swap files on NVMe"))};
  Opt<OffloadDevice> offloadParam{
      *this, "offload-param", llvm::cl::desc("stage 3: the parameter shards"),
      llvm::cl::init(OffloadDevice::None),
      llvm::cl::values(clEnumValN(OffloadDevice::None, "none", "on the device"),
                       clEnumValN(OffloadDevice::CPU, "cpu", "pinned host memory"),
                       clEnumValN(OffloadDevice::NVMe, "nvme", "swap files on NVMe"))};
  Opt<OptimizerKind> optimizer{
      *this, "optimizer", llvm::cl::desc("the optimizer"), llvm::cl::init(OptimizerKind::AdamW),
      llvm::cl::values(clEnumValN(OptimizerKind::AdamW, "adamw", "PyTorch's AdamW"),
                       clEnumValN(OptimizerKind::SGD, "sgd", "SGD with momentum"))};
};

/// Adds zero-training-pipeline's passes to |pm| (a ModuleOp pass manager).
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineOptions &options);

/// Registers `zero-training-pipeline` for zcc-opt and pass-pipeline strings.
void registerTrainingPipeline();

} // namespace zcc

#endif // ZCC_PIPELINES_PIPELINES_H
