//===- TrainingConfig.cpp - the step's settings as module attributes ------===//
//
// zero-training-config: what zcc's flags and a DeepSpeed config decided,
// recorded on the module for the passes and the plan writer that read it
// (zero.precision, zero.target, zero.training). A pass rather than the
// driver, so that `zcc-opt --zero-training-pipeline` builds the same module
// as zcc.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"
#include "zero/ZeroOps.h"

#include "mlir/IR/Builders.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROTRAININGCONFIG
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;

namespace {
struct ZeroTrainingConfigPass : zcc::impl::ZeroTrainingConfigBase<ZeroTrainingConfigPass> {
  using ZeroTrainingConfigBase::ZeroTrainingConfigBase;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    Builder b(m.getContext());
    zcc::zero::attrs(m).getPrecisionAttrHelper().setAttr(m, b.getStringAttr(precision));
    zcc::zero::attrs(m).getTargetAttrHelper().setAttr(m, b.getStringAttr(target));
    if (!train) {
      // Nothing trains: every function is inference, without dropout.
      for (Operation &op : m.getBody()->getOperations())
        zcc::zero::eraseDropout(&op);
      return;
    }
    SmallVector<NamedAttribute> training{
        b.getNamedAttr("grad_accum_steps", b.getI64IntegerAttr(gradAccum)),
        b.getNamedAttr("lr", b.getF64FloatAttr(lr)),
        b.getNamedAttr("optimizer", b.getStringAttr(optimizer)),
        b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)),
        b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)),
        b.getNamedAttr("eps", b.getF64FloatAttr(epsilon)),
        b.getNamedAttr("weight_decay", b.getF64FloatAttr(weightDecay)),
        b.getNamedAttr("grad_clip", b.getF64FloatAttr(gradClip))};
    if (!schedule.empty())
      training.push_back(b.getNamedAttr(
          "schedule", b.getDictionaryAttr(
                          {b.getNamedAttr("name", b.getStringAttr(schedule)),
                           b.getNamedAttr("lr", b.getF64FloatAttr(scheduleLr)),
                           b.getNamedAttr("warmup_steps", b.getI64IntegerAttr(warmupSteps)),
                           b.getNamedAttr("total_steps", b.getI64IntegerAttr(totalSteps)),
                           b.getNamedAttr("warmup_min_lr", b.getF64FloatAttr(warmupMinLr)),
                           b.getNamedAttr("warmup_log", b.getBoolAttr(warmupLog)),
                           b.getNamedAttr("warmup_min_ratio", b.getF64FloatAttr(warmupMinRatio)),
                           b.getNamedAttr("cos_min_ratio", b.getF64FloatAttr(cosMinRatio))})));
    zcc::zero::attrs(m).getTrainingAttrHelper().setAttr(m, b.getDictionaryAttr(training));
  }
};
} // namespace
