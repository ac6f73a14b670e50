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
    std::optional<zcc::zero::Precision> p = zcc::zero::symbolizePrecision(precision);
    std::optional<zcc::zero::Target> t = zcc::zero::symbolizeTarget(target);
    if (!p || !t) {
      m.emitError() << "zero-training-config: precision must be fp32, bf16 or fp16 and target cpu "
                       "or cuda, got '"
                    << precision << "' and '" << target << "'";
      return signalPassFailure();
    }
    zcc::zero::attrs(m).getPrecisionAttrHelper().setAttr(
        m, zcc::zero::PrecisionAttr::get(m.getContext(), *p));
    zcc::zero::attrs(m).getTargetAttrHelper().setAttr(
        m, zcc::zero::TargetAttr::get(m.getContext(), *t));
    if (!train) {
      // Nothing trains: every function is inference (no dropout, BatchNorm's
      // running statistics).
      for (Operation &op : m.getBody()->getOperations())
        zcc::zero::selectMode(&op, /*training=*/false);
      return;
    }
    zcc::zero::ScheduleAttr sched;
    if (!schedule.empty())
      sched = zcc::zero::ScheduleAttr::get(m.getContext(), schedule, double(scheduleLr),
                                           warmupSteps, totalSteps, double(warmupMinLr), warmupLog,
                                           double(warmupMinRatio), double(cosMinRatio));
    zcc::zero::attrs(m).getTrainingAttrHelper().setAttr(
        m, zcc::zero::TrainingAttr::get(m.getContext(), gradAccum, optimizer, double(lr),
                                        double(beta1), double(beta2), double(epsilon),
                                        double(weightDecay), double(gradClip), sched));
  }
};
} // namespace
