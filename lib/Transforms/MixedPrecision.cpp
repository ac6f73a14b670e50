//===- MixedPrecision.cpp - bfloat16 compute, float32 masters -------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

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

struct ZeroMixedPrecisionPass
    : zcc::impl::ZeroMixedPrecisionBase<ZeroMixedPrecisionPass> {
  using ZeroMixedPrecisionBase::ZeroMixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (precision != "bf16") {
      module.emitError("zero-mixed-precision: precision '")
          << precision << "' is not supported (bf16; fp16 with loss scaling comes later)";
      return signalPassFailure();
    }
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError("zero-mixed-precision: the module has no @forward function");
      return signalPassFailure();
    }
    OpBuilder b(func.getContext());
    Type bf16 = b.getBF16Type();
    Block &block = func.getBody().front();

    // Casts of the float32 sources (arguments, loads, constants) to bf16.
    DenseSet<Operation *> inserted;
    auto castAfter = [&](Value v, Location loc) {
      auto t = cast<RankedTensorType>(v.getType());
      if (!t.getElementType().isF32())
        return;
      auto c = CastOp::create(b, loc, withElement(t, bf16), v);
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
      castAfter(op->getResult(0), op->getLoc());
    }

    // Every other op computes in bf16; the cross-entropy loss stays float32.
    for (Operation &op : block) {
      if (inserted.contains(&op) || isa<LoadOp, ConstantOp, CrossEntropyOp, func::ReturnOp>(op))
        continue;
      for (Value r : op.getResults())
        if (cast<RankedTensorType>(r.getType()).getElementType().isF32())
          r.setType(withElement(r.getType(), bf16));
    }

    // A bf16 loss goes back to float32; other outputs stay bf16.
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    b.setInsertionPoint(ret);
    for (unsigned k = 0; k < ret.getNumOperands(); ++k) {
      Value v = ret.getOperand(k);
      if (func.getResultAttr(k, "zero.loss") &&
          cast<RankedTensorType>(v.getType()).getElementType().isBF16())
        ret.setOperand(k, CastOp::create(b, v.getLoc(), withElement(v.getType(), b.getF32Type()), v));
    }
    func.setFunctionType(b.getFunctionType(func.getArgumentTypes(), ret.getOperandTypes()));
    if (failed(verify(func)))
      return signalPassFailure();
  }
};
} // namespace
