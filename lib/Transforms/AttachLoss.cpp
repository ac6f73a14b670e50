//===- AttachLoss.cpp - make @forward return the loss ---------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROATTACHLOSS
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {
struct ZeroAttachLossPass : zcc::impl::ZeroAttachLossBase<ZeroAttachLossPass> {
  using ZeroAttachLossBase::ZeroAttachLossBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      getOperation().emitError("zero-attach-loss: the module has no @forward function");
      return signalPassFailure();
    }
    if (loss != "none" && loss != "cross-entropy") {
      func.emitError("unknown loss '") << loss << "' (use cross-entropy or none)";
      return signalPassFailure();
    }
    auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    auto isScalarFloat = [](Type t) {
      auto rt = cast<RankedTensorType>(t);
      return rt.getRank() == 0 && isa<FloatType>(rt.getElementType());
    };

    if (loss == "none") {
      for (auto [k, v] : llvm::enumerate(returnOp.getOperands()))
        if (isScalarFloat(v.getType())) {
          func.setResultAttr(k, "zero.loss", UnitAttr::get(&getContext()));
          return;
        }
      func.emitError("the model has no scalar floating-point output to use as the loss; "
                     "for a model that outputs logits, compile with --loss cross-entropy");
      return signalPassFailure();
    }

    // Cross-entropy against new labels.
    int logitsIndex = -1;
    for (auto [k, v] : llvm::enumerate(returnOp.getOperands())) {
      auto rt = cast<RankedTensorType>(v.getType());
      if (rt.getRank() >= 1 && isa<FloatType>(rt.getElementType())) {
        logitsIndex = k;
        break;
      }
    }
    if (logitsIndex < 0) {
      func.emitError("--loss cross-entropy needs a floating-point output of rank >= 1 "
                     "(the logits); the model has none");
      return signalPassFailure();
    }
    Value logits = returnOp.getOperand(logitsIndex);
    auto logitsType = cast<RankedTensorType>(logits.getType());
    auto labelsType = RankedTensorType::get(logitsType.getShape().drop_back(),
                                            IntegerType::get(&getContext(), 64));
    for (unsigned k = 0; k < func.getNumArguments(); ++k)
      if (auto name = func.getArgAttrOfType<StringAttr>(k, "zero.input");
          name && name.getValue() == "labels") {
        func.emitError("the model already has an input named 'labels'");
        return signalPassFailure();
      }

    OpBuilder b(returnOp);
    unsigned argIndex = func.getNumArguments();
    if (failed(func.insertArgument(
            argIndex, labelsType,
            b.getDictionaryAttr(b.getNamedAttr("zero.input", b.getStringAttr("labels"))),
            func.getLoc())))
      return signalPassFailure();
    Value labels = func.getArgument(argIndex);
    Value ce =
        CrossEntropyOp::create(b, logits.getLoc(), RankedTensorType::get({}, b.getF32Type()),
                               logits, labels, b.getI64IntegerAttr(ignoreIndex), IntegerAttr());
    SmallVector<Value> results{ce};
    llvm::append_range(results, returnOp.getOperands());
    SmallVector<DictionaryAttr> resultAttrs{
        b.getDictionaryAttr({b.getNamedAttr("zero.output", b.getStringAttr("loss")),
                             b.getNamedAttr("zero.loss", b.getUnitAttr())})};
    for (unsigned k = 0; k < func.getNumResults(); ++k)
      resultAttrs.push_back(func.getResultAttrDict(k));
    returnOp->setOperands(results);
    func.setFunctionType(
        b.getFunctionType(func.getArgumentTypes(), ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }
};
} // namespace
