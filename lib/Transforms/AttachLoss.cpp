//===- AttachLoss.cpp - make @forward return the loss ---------------------===//
#include "zcc/Transforms/Passes.h"

#include <cmath>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

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
      mlir::emitError(func.getLoc(), "unknown loss '") << loss << "' (use cross-entropy or none)";
      return signalPassFailure();
    }
    auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    auto isScalarFloat = [](Type t) {
      auto rt = cast<RankedTensorType>(t);
      return rt.getRank() == 0 && isa<FloatType>(rt.getElementType());
    };
    auto outputName = [&](unsigned k) {
      auto name = func.getResultAttrOfType<StringAttr>(
          k, zcc::zero::ZeroDialect::OutputAttrHelper::getNameStr());
      return name ? name.getValue() : StringRef();
    };
    auto outputNames = [&] {
      std::string all;
      for (unsigned k = 0; k < func.getNumResults(); ++k)
        all += (k ? ", " : "") + outputName(k).str() + " " +
               llvm::formatv("{0}", func.getResultTypes()[k]).str();
      return all;
    };

    // The auxiliary losses: NAME=COEF, each a scalar float output.
    // NAME=COEF from --aux-loss, or else the export record's (zero.aux_loss,
    // written by tools/zcc-export for a mixture of experts).
    struct Spec {
      std::string name;
      double coef;
      std::string text; // as given, for messages
    };
    SmallVector<Spec> specs;
    for (const std::string &spec : auxLoss) {
      auto [name, coefText] = StringRef(spec).rsplit('=');
      double coef;
      if (name.empty() || coefText.getAsDouble(coef) || !std::isfinite(coef)) {
        mlir::emitError(func.getLoc(), "--aux-loss '")
            << spec << "': expected NAME=COEF with a finite COEF, e.g. aux_loss=0.02";
        return signalPassFailure();
      }
      specs.push_back({name.str(), coef, spec});
    }
    if (specs.empty())
      if (auto recorded =
              zcc::zero::attrs(getOperation()).getAuxLossAttrHelper().getAttr(getOperation()))
        for (NamedAttribute entry : recorded)
          specs.push_back({entry.getName().str(),
                           cast<FloatAttr>(entry.getValue()).getValueAsDouble(),
                           entry.getName().str() + " (the export record's zcc.aux_loss)"});
    SmallVector<std::pair<unsigned, double>> aux;
    for (const Spec &spec : specs) {
      const std::string &name = spec.name;
      int index = -1;
      for (unsigned k = 0; k < func.getNumResults(); ++k)
        if (outputName(k) == name)
          index = k;
      if (index < 0 || !isScalarFloat(func.getResultTypes()[index])) {
        mlir::emitError(func.getLoc(), "--aux-loss '")
            << spec.text << "': the model has no scalar floating-point output named '" << name
            << "' (its outputs: " << outputNames() << ")";
        return signalPassFailure();
      }
      aux.push_back({(unsigned)index, spec.coef});
    }
    auto isAux = [&](unsigned k) {
      return llvm::any_of(aux, [&](auto &a) { return a.first == k; });
    };

    OpBuilder b(returnOp);
    Value lossValue;
    if (loss == "none") {
      int index = -1;
      for (auto [k, v] : llvm::enumerate(returnOp.getOperands()))
        if (isScalarFloat(v.getType()) && !isAux(k)) {
          index = k;
          break;
        }
      if (index < 0) {
        mlir::emitError(func.getLoc(),
                        "the model has no scalar floating-point output to use as the loss; "
                        "for a model that outputs logits, compile with --loss cross-entropy");
        return signalPassFailure();
      }
      if (aux.empty()) {
        func.setResultAttr(index, zcc::zero::ZeroDialect::LossAttrHelper::getNameStr(),
                           UnitAttr::get(&getContext()));
        return;
      }
      lossValue = returnOp.getOperand(index);
    } else {
      // Cross-entropy against new labels.
      int logitsIndex = -1;
      for (auto [k, v] : llvm::enumerate(returnOp.getOperands())) {
        auto rt = cast<RankedTensorType>(v.getType());
        bool isLogits = rt.getRank() >= 1 && isa<FloatType>(rt.getElementType());
        if (logits.empty() ? isLogits : outputName(k) == logits) {
          if (!isLogits) {
            mlir::emitError(func.getLoc(), "--logits ")
                << logits << ": the output is " << v.getType()
                << ", not floating-point logits of rank >= 1 [N..., C]";
            return signalPassFailure();
          }
          logitsIndex = k;
          break;
        }
      }
      if (logitsIndex < 0) {
        if (!logits.empty())
          mlir::emitError(func.getLoc(), "--logits ")
              << logits << ": the model has no output of that name (its "
              << "outputs: " << outputNames() << ")";
        else
          mlir::emitError(func.getLoc(),
                          "--loss cross-entropy needs a floating-point output of rank >= 1 "
                          "(the logits); the model has none");
        return signalPassFailure();
      }
      // A scalar float output that no loss term takes (a mixture of
      // experts' load-balancing loss without --aux-loss) trains nothing:
      // said, since the router then learns from the language loss alone.
      for (unsigned k = 0; k < func.getNumResults(); ++k)
        if ((int)k != logitsIndex && isScalarFloat(func.getResultTypes()[k]) && !isAux(k))
          mlir::emitWarning(func.getLoc(), "output '")
              << outputName(k)
              << "' is a scalar that no loss term takes, so it trains nothing; if it is an "
                 "auxiliary loss (a mixture of experts' load balancing), add it with --aux-loss "
              << outputName(k) << "=COEF (Hugging Face's router_aux_loss_coef, 0.02 for Mixtral)";
      Value logitsValue = returnOp.getOperand(logitsIndex);
      auto logitsType = cast<RankedTensorType>(logitsValue.getType());
      auto labelsType = RankedTensorType::get(logitsType.getShape().drop_back(),
                                              IntegerType::get(&getContext(), 64));
      for (unsigned k = 0; k < func.getNumArguments(); ++k)
        if (auto name = func.getArgAttrOfType<StringAttr>(
                k, zcc::zero::ZeroDialect::InputAttrHelper::getNameStr());
            name && name.getValue() == "labels") {
          mlir::emitError(func.getLoc(), "the model already has an input named 'labels'");
          return signalPassFailure();
        }
      unsigned argIndex = func.getNumArguments();
      if (failed(func.insertArgument(argIndex, labelsType,
                                     b.getDictionaryAttr(b.getNamedAttr(
                                         zcc::zero::ZeroDialect::InputAttrHelper::getNameStr(),
                                         b.getStringAttr("labels"))),
                                     func.getLoc())))
        return signalPassFailure();
      Value labels = func.getArgument(argIndex);
      lossValue = CrossEntropyOp::create(b, logitsValue.getLoc(),
                                         RankedTensorType::get({}, b.getF32Type()), logitsValue,
                                         labels, b.getI64IntegerAttr(ignoreIndex), IntegerAttr());
    }
    // loss + sum of coef x aux, in float32.
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    auto toF32 = [&](Value v) {
      return v.getType() == f32 ? v : Value(CastOp::create(b, v.getLoc(), f32, v));
    };
    lossValue = toF32(lossValue);
    for (auto [index, coef] : aux) {
      Value a = toF32(returnOp.getOperand(index));
      Value c = ConstantOp::create(b, a.getLoc(),
                                   DenseElementsAttr::get(f32, b.getF32FloatAttr((float)coef)));
      lossValue = AddOp::create(b, a.getLoc(), lossValue, MulOp::create(b, a.getLoc(), a, c));
    }
    SmallVector<Value> results{lossValue};
    llvm::append_range(results, returnOp.getOperands());
    SmallVector<DictionaryAttr> resultAttrs{b.getDictionaryAttr(
        {b.getNamedAttr(zcc::zero::ZeroDialect::OutputAttrHelper::getNameStr(),
                        b.getStringAttr("loss")),
         b.getNamedAttr(zcc::zero::ZeroDialect::LossAttrHelper::getNameStr(), b.getUnitAttr())})};
    for (unsigned k = 0; k < func.getNumResults(); ++k)
      resultAttrs.push_back(func.getResultAttrDict(k));
    returnOp->setOperands(results);
    func.setFunctionType(
        b.getFunctionType(func.getArgumentTypes(), ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }
};
} // namespace
