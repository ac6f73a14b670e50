//===- Optimizer.cpp - @apply: clipping and AdamW -------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <limits>

namespace zcc {
#define GEN_PASS_DEF_ZEROOPTIMIZER
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {
struct ZeroOptimizerPass : zcc::impl::ZeroOptimizerBase<ZeroOptimizerPass> {
  using ZeroOptimizerBase::ZeroOptimizerBase;

  /// A zero-initialized global next to |after|.
  GlobalOp zeroGlobal(OpBuilder &b, Operation *after, StringRef name, GlobalRole role,
                      RankedTensorType type) {
    b.setInsertionPointAfter(after);
    return GlobalOp::create(b, after->getLoc(), name, role, /*trainable=*/false, type,
                            DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
  }

  Value load(OpBuilder &b, Location loc, GlobalOp g) {
    return LoadOp::create(b, loc, g.getTensorType(), FlatSymbolRefAttr::get(g.getSymNameAttr()));
  }
  void store(OpBuilder &b, Location loc, Value v, GlobalOp g) {
    StoreOp::create(b, loc, v, FlatSymbolRefAttr::get(g.getSymNameAttr()));
  }
  Value scalar(OpBuilder &b, Location loc, double v) {
    auto t = RankedTensorType::get({}, b.getF32Type());
    return ConstantOp::create(b, loc, DenseElementsAttr::get(t, b.getF32FloatAttr(v)));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<GlobalOp, GlobalOp>> params; // (param, grad)
    for (auto g : module.getOps<GlobalOp>())
      if (g.getTrainable())
        if (auto grad = module.lookupSymbol<GlobalOp>((g.getSymName() + ".grad").str()))
          params.push_back({g, grad});
    if (params.empty()) {
      module.emitError("zero-optimizer: no parameter has a gradient (run zero-autodiff)");
      return signalPassFailure();
    }
    for (auto [p, g] : params)
      if (!isa<Float32Type>(p.getTensorType().getElementType())) {
        p.emitError("zero-optimizer: AdamW supports float32 parameters (mixed precision "
                    "keeps float32 masters)");
        return signalPassFailure();
      }

    OpBuilder b(module.getBodyRegion());
    Location loc = module.getLoc();
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    GlobalOp stepGlobal = zeroGlobal(b, params.back().second, "optimizer.step", GlobalRole::step, f32);
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError("zero-optimizer: unknown optimizer '") << optimizer << "' (adamw or sgd)";
      return signalPassFailure();
    }
    bool sgd = optimizer == "sgd";
    // AdamW: first and second moments; SGD: the momentum buffer (if any).
    SmallVector<std::pair<GlobalOp, GlobalOp>> moments;
    for (auto [p, g] : params) {
      if (sgd) {
        GlobalOp buf = momentum != 0
                           ? zeroGlobal(b, g, (p.getSymName() + ".momentum").str(),
                                        GlobalRole::adam_m, p.getTensorType())
                           : GlobalOp();
        moments.push_back({buf, GlobalOp()});
        continue;
      }
      GlobalOp m = zeroGlobal(b, g, (p.getSymName() + ".adam_m").str(), GlobalRole::adam_m,
                              p.getTensorType());
      GlobalOp v = zeroGlobal(b, m, (p.getSymName() + ".adam_v").str(), GlobalRole::adam_v,
                              p.getTensorType());
      moments.push_back({m, v});
    }

    // @apply(lr) -> grad_norm, or with fp16 loss scaling
    // @apply(lr, loss_scale) -> (grad_norm, overflow).
    bool scaled = module->hasAttr("zero.loss_scaling");
    b.setInsertionPointToEnd(module.getBody());
    SmallVector<Type> inputs{f32}, outputs{f32};
    if (scaled) {
      inputs.push_back(f32);
      outputs.push_back(f32);
    }
    auto apply = func::FuncOp::create(b, loc, "apply", b.getFunctionType(inputs, outputs));
    apply.setArgAttr(0, "zero.input", b.getStringAttr("lr"));
    apply.setResultAttr(0, "zero.output", b.getStringAttr("grad_norm"));
    if (scaled) {
      apply.setArgAttr(1, "zero.input", b.getStringAttr("loss_scale"));
      apply.setResultAttr(1, "zero.output", b.getStringAttr("overflow"));
    }
    Block *body = apply.addEntryBlock();
    b.setInsertionPointToStart(body);
    Value lr = body->getArgument(0);

    SmallVector<Value> grads;
    Value sumSq;
    for (auto [p, g] : params) {
      Value grad = load(b, loc, g);
      grads.push_back(grad);
      SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, p.getTensorType().getRank()));
      Value sq = ReduceOp::create(b, loc, ReduceKind::sum, MulOp::create(b, loc, grad, grad), all,
                                  /*keepdims=*/false);
      sumSq = sumSq ? Value(AddOp::create(b, loc, sumSq, sq)) : sq;
    }
    Value norm = SqrtOp::create(b, loc, sumSq);
    Value invScale, skip, overflow;
    if (scaled) {
      // The gradients are scaled by loss_scale: unscale the norm; an inf or
      // NaN anywhere makes it non-finite (norm < inf is false for both).
      invScale = DivOp::create(b, loc, scalar(b, loc, 1.0), body->getArgument(1));
      norm = MulOp::create(b, loc, norm, invScale);
      Value finite = CmpOp::create(b, loc, CmpPredicate::lt, norm,
                                   scalar(b, loc, std::numeric_limits<double>::infinity()));
      skip = NotOp::create(b, loc, finite);
      overflow = WhereOp::create(b, loc, skip, scalar(b, loc, 1.0), scalar(b, loc, 0.0));
    }
    // The step counts applied steps only (bias correction after a skip).
    Value increment = scalar(b, loc, 1.0);
    if (scaled)
      increment = SubOp::create(b, loc, increment, overflow);
    Value step = AddOp::create(b, loc, load(b, loc, stepGlobal), increment);
    store(b, loc, step, stepGlobal);
    Value coef = invScale;
    if (gradClip > 0) {
      // clip_grad_norm_: g *= min(1, max_norm / (norm + 1e-6))
      Value clip = DivOp::create(b, loc, scalar(b, loc, gradClip),
                                 AddOp::create(b, loc, norm, scalar(b, loc, 1e-6)));
      clip = MinOp::create(b, loc, clip, scalar(b, loc, 1.0));
      coef = coef ? Value(MulOp::create(b, loc, clip, coef)) : clip;
    }
    if (coef)
      for (Value &grad : grads)
        grad = MulOp::create(b, loc, grad, coef);
    for (auto [k, pg] : llvm::enumerate(params)) {
      auto [p, g] = pg;
      auto [m, v] = moments[k];
      if (sgd) {
        // Without momentum the buffer stays zero: pass zeros, drop the result.
        Value buf = m ? load(b, loc, m)
                      : Value(ConstantOp::create(b, loc, DenseElementsAttr::get(
                                                          p.getTensorType(), b.getF32FloatAttr(0))));
        auto update = SgdOp::create(b, loc, p.getType(), p.getType(), load(b, loc, p), grads[k],
                                    buf, lr, skip, b.getF64FloatAttr(momentum),
                                    b.getF64FloatAttr(weightDecay),
                                    nesterov ? b.getUnitAttr() : UnitAttr());
        store(b, loc, update.getNewParam(), p);
        if (m)
          store(b, loc, update.getNewMomentumBuffer(), m);
        FillOp::create(b, loc, FlatSymbolRefAttr::get(g.getSymNameAttr()), b.getF64FloatAttr(0.0));
        continue;
      }
      auto update = AdamWOp::create(b, loc, load(b, loc, p), grads[k], load(b, loc, m),
                                    load(b, loc, v), lr, step, beta1, beta2, epsilon,
                                    weightDecay, skip);
      store(b, loc, update.getNewParam(), p);
      store(b, loc, update.getNewM(), m);
      store(b, loc, update.getNewV(), v);
      FillOp::create(b, loc, FlatSymbolRefAttr::get(g.getSymNameAttr()), b.getF64FloatAttr(0.0));
    }
    SmallVector<Value> results{norm};
    if (scaled)
      results.push_back(overflow);
    func::ReturnOp::create(b, loc, results);
  }
};
} // namespace
