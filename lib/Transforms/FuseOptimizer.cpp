//===- ParamCopies.cpp - mixed precision's parameter copies as state ------===//
//
// Mixed precision casts every parameter to 16 bits at the start of each
// micro-step: a pass over the float32 parameters (4 bytes read, 2 written a
// parameter) that repeats what the optimizer could have written as it
// produced the parameters. This pass keeps the 16-bit copies as training
// state instead: a `param_copy` global beside each bucket that AdamW writes
// (its fourth result) when it writes the bucket, and the micro-step and
// eval programs load the copies where they cast. A `refresh` program casts
// the buckets into the copies; the runtime runs it whenever the state is
// written from outside the programs (initial values, weights, a resumed
// checkpoint). See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"
#include "zcc/Transforms/StateGlobals.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROFUSEOPTIMIZER
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

ElementsAttr zeros(RankedTensorType type) {
  return DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(), 0.0));
}

/// A new AdamW like |u| with a parameter copy of |copyType| and/or the
/// gradient's sum of squares, reading |grad| scaled by |scale| (u's own
/// where null); |u|'s results replaced by its, |u| erased.
AdamWOp rebuild(AdamWOp u, Type copyType, bool sumSquares, Value grad = {}, Value scale = {}) {
  OpBuilder b(u);
  auto fused = AdamWOp::create(b, u.getLoc(), u.getParam(), grad ? grad : u.getGrad(), u.getM(),
                               u.getV(), u.getLr(), u.getStep(), u.getBeta1().convertToDouble(),
                               u.getBeta2().convertToDouble(), u.getEpsilon().convertToDouble(),
                               u.getWeightDecay().convertToDouble(), u.getSkip(), copyType,
                               sumSquares, scale ? scale : u.getGradScale());
  u.getNewParam().replaceAllUsesWith(fused.getNewParam());
  u.getNewM().replaceAllUsesWith(fused.getNewM());
  u.getNewV().replaceAllUsesWith(fused.getNewV());
  if (Value copy = u.getNewParamCopy())
    copy.replaceAllUsesWith(fused.getNewParamCopy());
  if (Value sum = u.getGradSumSquares())
    sum.replaceAllUsesWith(fused.getGradSumSquares());
  u.erase();
  return fused;
}

struct ZeroFuseOptimizer : zcc::impl::ZeroFuseOptimizerBase<ZeroFuseOptimizer> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply)
      return;
    // Offloaded state (zero-offload) is updated on the host: not here.
    for (auto global : module.getOps<GlobalOp>())
      if (zcc::zero::attrs(global).getHostAttrHelper().isAttrPresent(global))
        return;
    fuseParamCopies(module, apply);
    fuseSumSquares(apply);
    fuseGradScale(apply);
  }

  /// AdamW reading `mul(cast?(g), coef)`, coef a scalar (clipping's factor,
  /// the loss scale's inverse): it reads g and multiplies as it goes, rounded
  /// as the multiply was; the float32 copy of the gradients is not written.
  void fuseGradScale(func::FuncOp apply) {
    SmallVector<AdamWOp> updates;
    apply.walk([&](AdamWOp u) { updates.push_back(u); });
    for (AdamWOp u : updates) {
      auto mul = u.getGrad().getDefiningOp<MulOp>();
      if (u.getGradScale() || u.getGradSumSquares() || !mul || !mul->hasOneUse())
        continue;
      Value x = mul.getLhs(), coef = mul.getRhs();
      auto coefType = cast<RankedTensorType>(coef.getType());
      if (coefType.getRank() != 0 || !coefType.getElementType().isF32() ||
          x.getType() != u.getGrad().getType())
        continue;
      CastOp widen = x.getDefiningOp<CastOp>();
      if (widen) {
        Type from = cast<RankedTensorType>(widen.getInput().getType()).getElementType();
        if (!widen->hasOneUse() || !(from.isF16() || from.isBF16()))
          widen = {};
      }
      Value grad = widen ? widen.getInput() : x;
      rebuild(u, u.getNewParamCopy() ? u.getNewParamCopy().getType() : Type(),
              /*sumSquares=*/false, grad, coef);
      mul.erase();
      if (widen)
        widen.erase();
    }
  }

  /// The gradient norm's `reduce sum_squares` of exactly the gradient an
  /// AdamW reads, where nothing the AdamW reads depends on the norm (no
  /// clipping, no loss-scale overflow test): the AdamW forms it; what reads
  /// the sum (the other buckets' sums, a cross-rank all-reduce, the square
  /// root the step reports) moves after the AdamW, in its order.
  void fuseSumSquares(func::FuncOp apply) {
    SmallVector<AdamWOp> updates;
    apply.walk([&](AdamWOp u) { updates.push_back(u); });
    Block &block = apply.getBody().front();
    for (AdamWOp u : updates) {
      if (u.getGradSumSquares() || u->getBlock() != &block)
        continue;
      auto in = cast<RankedTensorType>(u.getGrad().getType());
      ReduceOp reduce;
      for (Operation *user : u.getGrad().getUsers()) {
        auto r = dyn_cast<ReduceOp>(user);
        if (r && r->getBlock() == &block && r.getKind() == ReduceKind::sum_squares &&
            !r.getKeepdims() && (int64_t)r.getAxes().size() == in.getRank() &&
            cast<RankedTensorType>(r.getType()).getElementType().isF32()) {
          reduce = r;
          break;
        }
      }
      if (!reduce)
        continue;
      // Everything that reads the sum, transitively (the return aside).
      llvm::SetVector<Operation *> readers;
      SmallVector<Value> worklist{reduce.getResult()};
      while (!worklist.empty()) {
        Value v = worklist.pop_back_val();
        for (Operation *user : v.getUsers())
          if (!user->hasTrait<mlir::OpTrait::IsTerminator>() && readers.insert(user))
            llvm::append_range(worklist, user->getResults());
      }
      // None of it may feed the AdamW (clipping, an overflow's skip), or
      // live in another block.
      bool blocked = readers.contains(u.getOperation());
      for (Operation *op : readers)
        blocked |= op->getBlock() != &block || llvm::any_of(u->getOperands(), [&](Value operand) {
                     return operand.getDefiningOp() == op;
                   });
      if (blocked)
        continue;
      AdamWOp fused = rebuild(u, u.getNewParamCopy() ? u.getNewParamCopy().getType() : Type(),
                              /*sumSquares=*/true);
      reduce.getResult().replaceAllUsesWith(fused.getGradSumSquares());
      reduce.erase();
      SmallVector<Operation *> moved(readers.begin(), readers.end());
      llvm::sort(moved, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      Operation *after = fused;
      for (Operation *op : moved)
        if (op->isBeforeInBlock(fused)) {
          op->moveAfter(after);
          after = op;
        }
    }
  }

  void fuseParamCopies(ModuleOp module, func::FuncOp apply) {
    // Buckets whose new value apply stores straight from AdamW (one rank's
    // whole bucket: stages 0-2 on one rank), and the 16-bit type their
    // members are cast to by the programs.
    struct Bucket {
      GlobalOp global;
      AdamWOp update;
      StoreOp store;
      Type half; // the copies' element type; null until a cast is seen
      GlobalOp copy;
    };
    llvm::MapVector<StringAttr, Bucket> buckets;
    apply.walk([&](StoreOp store) {
      auto update = store.getValue().getDefiningOp<AdamWOp>();
      auto global = module.lookupSymbol<GlobalOp>(store.getGlobalAttr());
      if (!update || update.getNewParam() != store.getValue() || update.getNewParamCopy() ||
          !global || global.getBucket() || global.getShardOfAttr() ||
          global.getRole() != GlobalRole::param)
        return;
      buckets[global.getSymNameAttr()] = Bucket{global, update, store, Type(), GlobalOp()};
    });
    if (buckets.empty())
      return;

    // The casts of bucket members to 16 bits, in every program but apply.
    struct MemberCast {
      CastOp cast;
      GlobalOp member;
      Bucket *bucket;
    };
    SmallVector<MemberCast> casts;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func == apply)
        continue;
      func.walk([&](CastOp c) {
        auto load = c.getInput().getDefiningOp<LoadOp>();
        auto to = cast<RankedTensorType>(c.getType()).getElementType();
        if (!load || !to.isBF16() && !to.isF16() ||
            !cast<RankedTensorType>(c.getInput().getType()).getElementType().isF32())
          return;
        auto member = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
        if (!member || !member.getBucketAttr())
          return;
        auto it = buckets.find(member.getBucketAttr().getAttr());
        if (it == buckets.end())
          return;
        Bucket &bucket = it->second;
        if (bucket.half && bucket.half != to) {
          bucket.half = NoneType::get(module.getContext()); // two 16-bit types: left alone
          return;
        }
        if (!bucket.half)
          bucket.half = to;
        casts.push_back({c, member, &bucket});
      });
    }

    OpBuilder b(module.getContext());
    DenseMap<Operation *, GlobalOp> memberCopies;
    for (auto &[name, bucket] : buckets) {
      if (!bucket.half || isa<NoneType>(bucket.half))
        continue;
      // The copies' bucket, after the bucket; zeros until refresh writes it.
      b.setInsertionPointAfter(bucket.global);
      auto type = RankedTensorType::get(bucket.global.getTensorType().getShape(), bucket.half);
      bucket.copy = GlobalOp::create(
          b, bucket.global.getLoc(),
          zcc::uniqueGlobalName(module, (bucket.global.getSymName() + ".copy").str()),
          GlobalRole::param_copy, false, type, zeros(type));
      // AdamW writes the copy with the bucket.
      AdamWOp fused = rebuild(bucket.update, type, /*sumSquares=*/false);
      bucket.update = fused;
      b.setInsertionPointAfter(bucket.store);
      StoreOp::create(b, bucket.store.getLoc(), fused.getNewParamCopy(),
                      FlatSymbolRefAttr::get(bucket.copy.getSymNameAttr()));
    }

    // Each member's copy: a global at the member's offset in the copies'
    // bucket; the casts become loads of it.
    for (MemberCast &mc : casts) {
      Bucket &bucket = *mc.bucket;
      if (!bucket.copy)
        continue;
      GlobalOp &copy = memberCopies[mc.member];
      if (!copy)
        copy =
            zcc::createMemberSlice(module, mc.member, ".copy", GlobalRole::param_copy, bucket.copy);
      b.setInsertionPoint(mc.cast);
      auto load = LoadOp::create(b, mc.cast.getLoc(), mc.cast.getType(),
                                 FlatSymbolRefAttr::get(copy.getSymNameAttr()));
      Operation *input = mc.cast.getInput().getDefiningOp();
      mc.cast.getResult().replaceAllUsesWith(load.getResult());
      mc.cast.erase();
      if (input->use_empty())
        input->erase();
    }

    // refresh: every copied bucket cast into its copies (after what
    // zero-optimizer's refresh already does: the sharded masters' copies).
    auto refresh = module.lookupSymbol<func::FuncOp>("refresh");
    if (!refresh) {
      b.setInsertionPointToEnd(module.getBody());
      refresh = func::FuncOp::create(b, module.getLoc(), "refresh", b.getFunctionType({}, {}));
      OpBuilder end = OpBuilder::atBlockEnd(refresh.addEntryBlock());
      func::ReturnOp::create(end, module.getLoc());
    }
    Block *body = &refresh.getBody().front();
    b.setInsertionPoint(body->getTerminator());
    for (auto &[name, bucket] : buckets) {
      if (!bucket.copy)
        continue;
      Location loc = bucket.global.getLoc();
      auto load = LoadOp::create(b, loc, bucket.global.getTensorType(),
                                 FlatSymbolRefAttr::get(bucket.global.getSymNameAttr()));
      auto half = CastOp::create(b, loc, bucket.copy.getTensorType(), load.getResult());
      StoreOp::create(b, loc, half.getResult(),
                      FlatSymbolRefAttr::get(bucket.copy.getSymNameAttr()));
    }
    if (body->getOperations().size() == 1)
      refresh.erase(); // nothing was copied
  }
};

} // namespace
