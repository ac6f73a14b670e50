//===- Optimizer.cpp - @apply: clipping and AdamW -------------------------===//
#include "zcc/Transforms/Mesh.h"
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <limits>

namespace zcc {
#define GEN_PASS_DEF_ZEROOPTIMIZER
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc;
using namespace zcc::zero;

namespace {
struct ZeroOptimizerPass : zcc::impl::ZeroOptimizerBase<ZeroOptimizerPass> {
  using ZeroOptimizerBase::ZeroOptimizerBase;
  bool writesWholeGradients = false;

  /// A zero-initialized global next to |after|.
  GlobalOp zeroGlobal(OpBuilder &b, Operation *after, StringRef name, GlobalRole role,
                      RankedTensorType type) {
    b.setInsertionPointAfter(after);
    return GlobalOp::create(
        b, after->getLoc(), name, role, /*trainable=*/false, type,
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

  /// What the optimizer updates: a parameter global with its gradient, or,
  /// after zero-partition, a flat bucket (possibly sharded over the ranks).
  struct Unit {
    GlobalOp param, grad;
    bool paramSharded = false; // the global holds this rank's shard only
    bool gradSharded = false;  // likewise for the gradient accumulator
    bool stateSharded = false; // optimizer state (and the update) per shard
    RankedTensorType stateType;
    GlobalOp m, v; // AdamW moments, or SGD's momentum buffer in m
    /// Mixed precision's 16-bit working bucket, whole on every rank, when
    /// |param| is the rank's float32 master shard (zero-partition).
    GlobalOp copy;
  };

  LogicalResult collectUnits(ModuleOp module, SmallVectorImpl<Unit> &units, Mesh &mesh) {
    auto of = Mesh::of(module);
    if (failed(of))
      return failure();
    mesh = *of;
    if (auto buckets = zero::attrs(module).getBucketsAttrHelper().getAttr(module)) {
      auto partition = zero::attrs(module).getPartitionAttrHelper().getAttr(module);
      if (!partition)
        return module.emitError("zero-optimizer: zero.buckets without zero.partition");
      for (auto d : buckets.getAsRange<zero::BucketAttr>()) {
        Unit u;
        u.param = module.lookupSymbol<GlobalOp>(d.getParam());
        u.grad = d.getGrad() ? module.lookupSymbol<GlobalOp>(d.getGrad()) : GlobalOp();
        if (!u.param || !u.grad)
          return module.emitError("zero-optimizer: a bucket without its parameter or gradient "
                                  "global: ")
                 << d;
        if (FlatSymbolRefAttr c = d.getCopy()) {
          u.copy = module.lookupSymbol<GlobalOp>(c);
          if (!u.copy)
            return module.emitError("zero-optimizer: no working copy ") << c;
        }
        u.paramSharded = d.getParamSharded();
        u.gradSharded = d.getGradSharded();
        u.stateSharded = partition.getStage() >= 1 && mesh.shards > 1;
        u.stateType =
            RankedTensorType::get({u.stateSharded ? d.getSize() / mesh.shards : d.getSize()},
                                  u.param.getTensorType().getElementType());
        units.push_back(u);
      }
      return success();
    }
    for (auto g : module.getOps<GlobalOp>())
      if (g.getTrainable())
        if (auto grad = module.lookupSymbol<GlobalOp>((g.getSymName() + ".grad").str())) {
          Unit u;
          u.param = g;
          u.grad = grad;
          u.stateType = g.getTensorType();
          units.push_back(u);
        }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Unit> units;
    Mesh mesh; // zero-partition's ranks and comm-dtype
    if (failed(collectUnits(module, units, mesh)))
      return signalPassFailure();
    const int64_t world = mesh.world;
    if (units.empty()) {
      module.emitError("zero-optimizer: no parameter has a gradient (run zero-autodiff)");
      return signalPassFailure();
    }
    // zero-partition stores a one-micro-step step's gradients whole.
    writesWholeGradients =
        zero::attrs(module).getGradientsWrittenAttrHelper().isAttrPresent(module);
    for (Unit &u : units)
      if (!isa<Float32Type>(u.param.getTensorType().getElementType())) {
        u.param.emitError("zero-optimizer: AdamW supports float32 parameters (mixed precision "
                          "keeps float32 masters)");
        return signalPassFailure();
      }
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError("zero-optimizer: unknown optimizer '") << optimizer << "' (adamw or sgd)";
      return signalPassFailure();
    }
    bool sgd = optimizer == "sgd";

    OpBuilder b(module.getBodyRegion());
    Location loc = module.getLoc();
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    Operation *after = units.back().grad;
    for (auto g : module.getOps<GlobalOp>())
      after = g;
    GlobalOp stepGlobal = zeroGlobal(b, after, "optimizer.step", GlobalRole::step, f32);
    // AdamW: first and second moments; SGD: the momentum buffer (if any).
    after = stepGlobal;
    for (Unit &u : units) {
      if (sgd) {
        if (momentum != 0)
          after = u.m = zeroGlobal(b, after, (u.param.getSymName() + ".momentum").str(),
                                   GlobalRole::adam_m, u.stateType);
        continue;
      }
      after = u.m = zeroGlobal(b, after, (u.param.getSymName() + ".adam_m").str(),
                               GlobalRole::adam_m, u.stateType);
      after = u.v = zeroGlobal(b, after, (u.param.getSymName() + ".adam_v").str(),
                               GlobalRole::adam_v, u.stateType);
    }

    // @apply(lr) -> grad_norm, or with fp16 loss scaling
    // @apply(lr, loss_scale) -> (grad_norm, overflow).
    bool scaled = zero::attrs(module).getLossScalingAttrHelper().isAttrPresent(module);
    b.setInsertionPointToEnd(module.getBody());
    SmallVector<Type> inputs{f32}, outputs{f32};
    if (scaled) {
      inputs.push_back(f32);
      outputs.push_back(f32);
    }
    auto apply = func::FuncOp::create(b, loc, "apply", b.getFunctionType(inputs, outputs));
    apply.setArgAttr(0, zero::ZeroDialect::InputAttrHelper::getNameStr(), b.getStringAttr("lr"));
    apply.setResultAttr(0, zero::ZeroDialect::OutputAttrHelper::getNameStr(),
                        b.getStringAttr("grad_norm"));
    if (scaled) {
      apply.setArgAttr(1, zero::ZeroDialect::InputAttrHelper::getNameStr(),
                       b.getStringAttr("loss_scale"));
      apply.setResultAttr(1, zero::ZeroDialect::OutputAttrHelper::getNameStr(),
                          b.getStringAttr("overflow"));
    }
    Block *body = apply.addEntryBlock();
    b.setInsertionPointToStart(body);
    Value lr = body->getArgument(0);

    // The gradients this rank updates with: averaged over the ranks (stage
    // 0: all-reduce; stage 1: reduce-scatter; stages 2-3 reduced them during
    // the backward already).
    SmallVector<Value> grads;
    Value sumSq;
    bool anySharded = false;
    for (Unit &u : units) {
      Value grad = load(b, loc, u.grad);
      if (!u.gradSharded && world > 1)
        grad =
            averageOverRanks(b, loc, grad, u.stateSharded ? u.stateType.getNumElements() : 0, mesh);
      anySharded |= u.stateSharded;
      grads.push_back(grad);
      auto gt = cast<RankedTensorType>(grad.getType());
      SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, gt.getRank()));
      Value sq = ReduceOp::create(b, loc, ReduceKind::sum_squares, grad, all, /*keepdims=*/false);
      sumSq = sumSq ? Value(AddOp::create(b, loc, sumSq, sq)) : sq;
    }
    // Sharded gradients: the squares of every rank's shard add up.
    // (MiCS: every group holds all shards; the sum runs inside one.)
    if (anySharded)
      sumSq =
          AllReduceOp::create(b, loc, sumSq, CollectiveReduce::sum, mesh.ranks(mesh.shardGroup()),
                              /*async=*/false, mesh.shardGroup());
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
    // A 16-bit gradient bucket (zero-partition) feeds AdamW as it is; the
    // clipped or unscaled gradient, and SGD's, are float32.
    for (Value &grad : grads) {
      auto type = cast<RankedTensorType>(grad.getType());
      if ((coef || sgd) && !type.getElementType().isF32())
        grad = CastOp::create(b, loc, type.clone(b.getF32Type()), grad);
    }
    if (coef)
      for (Value &grad : grads)
        grad = MulOp::create(b, loc, grad, coef);
    for (auto [k, u] : llvm::enumerate(units)) {
      // This rank's part of the parameters; a replicated bucket whose state
      // is sharded updates its local chunk, then gathers the whole again.
      Value param = load(b, loc, u.param);
      bool gatherAfter = !u.paramSharded && u.stateSharded;
      if (gatherAfter)
        param = LocalShardOp::create(b, loc, u.stateType, param, mesh.ranks(mesh.shardGroup()),
                                     mesh.shardGroup());
      // A working copy: the update also writes the shard rounded to 16 bits.
      RankedTensorType copyType;
      if (u.copy)
        copyType = u.stateType.clone(u.copy.getTensorType().getElementType());
      Value newParam, newCopy;
      if (sgd) {
        // Without momentum the buffer stays zero: pass zeros, drop the result.
        Value buf = u.m ? load(b, loc, u.m)
                        : Value(ConstantOp::create(
                              b, loc, DenseElementsAttr::get(u.stateType, b.getF32FloatAttr(0))));
        auto update =
            SgdOp::create(b, loc, u.stateType, u.stateType, param, grads[k], buf, lr, skip,
                          b.getF64FloatAttr(momentum), b.getF64FloatAttr(weightDecay),
                          nesterov ? b.getUnitAttr() : UnitAttr());
        newParam = update.getNewParam();
        if (u.m)
          store(b, loc, update.getNewMomentumBuffer(), u.m);
        if (u.copy)
          newCopy = CastOp::create(b, loc, copyType, newParam);
      } else {
        auto update = AdamWOp::create(b, loc, param, grads[k], load(b, loc, u.m), load(b, loc, u.v),
                                      lr, step, beta1, beta2, epsilon, weightDecay, skip, copyType);
        newParam = update.getNewParam();
        newCopy = update.getNewParamCopy();
        store(b, loc, update.getNewM(), u.m);
        store(b, loc, update.getNewV(), u.v);
      }
      // The 16-bit shards gathered into every rank's working copy (what
      // DeepSpeed's bf16 optimizer gathers: half the bytes of the masters).
      if (u.copy)
        store(b, loc,
              AllGatherOp::create(b, loc, u.copy.getTensorType(), newCopy,
                                  mesh.ranks(mesh.shardGroup()), /*async=*/false,
                                  mesh.shardGroup()),
              u.copy);
      if (gatherAfter)
        newParam =
            AllGatherOp::create(b, loc, u.param.getType(), newParam, mesh.ranks(mesh.shardGroup()),
                                /*async=*/false, mesh.shardGroup());
      store(b, loc, newParam, u.param);
      // Cleared for the next step's accumulation; a step of one micro-step
      // writes its gradients whole (zero-partition), so nothing to clear.
      if (!writesWholeGradients)
        FillOp::create(b, loc, FlatSymbolRefAttr::get(u.grad.getSymNameAttr()),
                       b.getF64FloatAttr(0.0));
    }
    SmallVector<Value> results{norm};
    if (scaled)
      results.push_back(overflow);
    func::ReturnOp::create(b, loc, results);
    buildRefresh(module, units, mesh);
  }

  /// The `refresh` program: every working copy rebuilt from the master
  /// shards (cast, all-gathered). The runtime runs it whenever the state was
  /// written from outside the programs (initial values, weights, a resumed
  /// checkpoint); zero-fuse-optimizer adds its own copies to it.
  void buildRefresh(ModuleOp module, MutableArrayRef<Unit> units, const Mesh &mesh) {
    if (llvm::none_of(units, [](const Unit &u) { return bool(u.copy); }))
      return;
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto refresh = func::FuncOp::create(b, loc, "refresh", b.getFunctionType({}, {}));
    b.setInsertionPointToStart(refresh.addEntryBlock());
    for (Unit &u : units) {
      if (!u.copy)
        continue;
      Value half =
          CastOp::create(b, loc, u.stateType.clone(u.copy.getTensorType().getElementType()),
                         load(b, loc, u.param));
      store(b, loc,
            AllGatherOp::create(b, loc, u.copy.getTensorType(), half, mesh.ranks(mesh.shardGroup()),
                                /*async=*/false, mesh.shardGroup()),
            u.copy);
    }
    func::ReturnOp::create(b, loc);
  }
};
} // namespace
