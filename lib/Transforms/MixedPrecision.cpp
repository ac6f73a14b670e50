//===- MixedPrecision.cpp - 16-bit compute, float32 masters ---------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <cmath>

namespace zcc {
#define GEN_PASS_DEF_ZEROMIXEDPRECISION
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {
RankedTensorType withElement(Type t, Type element) {
  auto rt = cast<RankedTensorType>(t);
  return RankedTensorType::get(rt.getShape(), element);
}

struct ZeroMixedPrecisionPass : zcc::impl::ZeroMixedPrecisionBase<ZeroMixedPrecisionPass> {
  using ZeroMixedPrecisionBase::ZeroMixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (precision != "bf16" && precision != "fp16") {
      module.emitError("zero-mixed-precision: precision '")
          << precision << "': expected bf16 or fp16";
      return signalPassFailure();
    }
    bool fp16 = precision == "fp16";
    if (fp16 && (lossScale < 0 || initialScalePower < 0 || initialScalePower > 63 ||
                 lossScaleWindow < 1 || hysteresis < 1 || !(minLossScale > 0))) {
      module.emitError("zero-mixed-precision: fp16 loss scaling needs loss-scale >= 0, "
                       "initial-scale-power in [0, 63], loss-scale-window >= 1, hysteresis >= 1 "
                       "and min-loss-scale > 0");
      return signalPassFailure();
    }
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError("zero-mixed-precision: the module has no @forward function");
      return signalPassFailure();
    }
    OpBuilder b(func.getContext());
    Type low = fp16 ? Type(b.getF16Type()) : Type(b.getBF16Type());
    Block &block = func.getBody().front();

    // Casts of the float32 sources (arguments, loads, constants) to bf16.
    DenseSet<Operation *> inserted;
    auto castAfter = [&](Value v, Location loc) {
      auto t = cast<RankedTensorType>(v.getType());
      if (!t.getElementType().isF32())
        return;
      auto c = CastOp::create(b, loc, withElement(t, low), v);
      v.replaceAllUsesExcept(c, c);
      inserted.insert(c);
    };
    b.setInsertionPointToStart(&block);
    for (BlockArgument arg : block.getArguments())
      castAfter(arg, func.getLoc());
    SmallVector<Operation *> sources;
    for (Operation &op : block)
      if (isa<LoadOp, ConstantOp>(op))
        sources.push_back(&op);
    for (Operation *op : sources) {
      b.setInsertionPointAfter(op);
      if (fp16)
        if (auto c = dyn_cast<ConstantOp>(op))
          saturateToHalf(c);
      castAfter(op->getResult(0), op->getLoc());
    }

    // Every other op computes in 16 bits; the cross-entropy loss stays float32,
    // and so do the ops that read it (an auxiliary loss added to it, in float32).
    for (Operation &op : block) {
      if (inserted.contains(&op) || isa<LoadOp, ConstantOp, CrossEntropyOp, func::ReturnOp>(op))
        continue;
      auto elementOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); };
      if (auto store = dyn_cast<StoreOp>(op)) {
        // A buffer's update (BatchNorm's running statistics) is stored in
        // the buffer's own type.
        auto global = SymbolTable::lookupNearestSymbolFrom<GlobalOp>(store, store.getGlobalAttr());
        Value v = store.getValue();
        if (global && elementOf(v) != global.getTensorType().getElementType()) {
          b.setInsertionPoint(store);
          store.getValueMutable().assign(
              CastOp::create(b, op.getLoc(),
                             withElement(v.getType(), global.getTensorType().getElementType()), v));
        }
        continue;
      }
      if (llvm::any_of(op.getOperands(), [&](Value v) { return elementOf(v).isF32(); })) {
        b.setInsertionPoint(&op);
        for (OpOperand &use : op.getOpOperands())
          if (elementOf(use.get()) == low)
            use.set(CastOp::create(b, op.getLoc(), withElement(use.get().getType(), b.getF32Type()),
                                   use.get()));
        continue;
      }
      for (Value r : op.getResults())
        if (cast<RankedTensorType>(r.getType()).getElementType().isF32())
          r.setType(withElement(r.getType(), low));
    }

    // A 16-bit loss goes back to float32; other outputs stay 16-bit.
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    b.setInsertionPoint(ret);
    for (unsigned k = 0; k < ret.getNumOperands(); ++k) {
      Value v = ret.getOperand(k);
      if (func.getResultAttr(k, zcc::zero::ZeroDialect::LossAttrHelper::getNameStr()) &&
          cast<RankedTensorType>(v.getType()).getElementType() == low)
        ret.setOperand(k,
                       CastOp::create(b, v.getLoc(), withElement(v.getType(), b.getF32Type()), v));
    }
    func.setFunctionType(b.getFunctionType(func.getArgumentTypes(), ret.getOperandTypes()));
    if (failed(verify(func)))
      return signalPassFailure();
    if (fp16)
      zcc::zero::attrs(module).getLossScalingAttrHelper().setAttr(
          module, zcc::zero::LossScalingAttr::get(module.getContext(), double(lossScale),
                                                  initialScalePower, lossScaleWindow, hysteresis,
                                                  consecutiveHysteresis, double(minLossScale)));
  }

  /// float32 constants beyond float16's range become +-65504 (float32's
  /// lowest, the usual mask value, would round to -inf, and -inf * 0 is NaN).
  static void saturateToHalf(ConstantOp c) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr || !attr.getElementType().isF32())
      return;
    constexpr float kMax = 65504.0f;
    bool any = false;
    for (APFloat v : attr.getValues<APFloat>())
      if (v.isFinite() && std::fabs(v.convertToFloat()) > kMax)
        any = true;
    if (!any)
      return;
    auto clamped = attr.mapValues(attr.getElementType(), [&](const APFloat &v) {
      float f = v.convertToFloat();
      if (v.isFinite() && std::fabs(f) > kMax)
        f = std::copysign(kMax, f);
      return APFloat(f).bitcastToAPInt();
    });
    c.setValueAttr(clamped);
  }
};
} // namespace
