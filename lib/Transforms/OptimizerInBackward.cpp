//===- OptimizerInBackward.cpp - AdamW per parameter inside the micro-step ===//
//
// A step of one micro-step on one rank with nothing that needs every
// gradient before any update (no accumulation, clipping, fp16 loss scale or
// offload) does not need a gradient bucket: each parameter's AdamW can run as
// soon as its gradient is formed and its parameter read for the last time.
// This pass moves `@apply`'s bucket-wide AdamW into `@micro_step` as one
// update per bucket member. The gradients then live from their GEMM to their
// update instead of the whole backward (the bucket's bytes leave the peak),
// and on the GPU the updates, memory-bound, run on a second stream beside
// the backward's compute-bound GEMMs. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Transforms/Passes.h"
#include "zcc/Transforms/StateGlobals.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROOPTIMIZERINBACKWARD
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;
using zcc::isViewOp;
using zcc::programOrder;

namespace {

/// A bucket's AdamW in @apply: its state globals and the globals its
/// results are stored to.
struct BucketUpdate {
  AdamWOp op;
  GlobalOp param, grad, m, v, copy; // copy: null without a 16-bit copy
};

/// One member's update: where its gradient is formed in @micro_step and
/// the member's globals.
struct MemberUpdate {
  BucketUpdate *bucket;
  int64_t offset;
  RankedTensorType type;
  Value grad;           // the gradient (the concat's piece without its reshapes)
  GlobalOp param, copy; // existing members of the bucket and its copy
  Operation *after;     // the update goes after this op
  int index;            // member order (the norm adds in this order)
};

GlobalOp storedGlobal(ModuleOp module, Value v) {
  for (Operation *user : v.getUsers())
    if (auto store = dyn_cast<StoreOp>(user))
      return module.lookupSymbol<GlobalOp>(store.getGlobalAttr());
  return {};
}

FlatSymbolRefAttr ref(GlobalOp g) { return FlatSymbolRefAttr::get(g.getSymNameAttr()); }

GlobalOp loadedGlobal(ModuleOp module, Value v) {
  auto load = v.getDefiningOp<LoadOp>();
  return load ? module.lookupSymbol<GlobalOp>(load.getGlobalAttr()) : GlobalOp();
}

/// GEMM FLOPs that hide one parameter's update: an update moves 28 bytes a
/// parameter (p, m, v read and written, a 16-bit gradient read and copy
/// written); an H200 runs about 170 bf16 GEMM FLOPs in the time it moves a
/// byte (650 TFLOP/s, 3.8 TB/s), and beside GEMMs an update gets about half
/// the memory bandwidth: 2 x 28 x 170.
constexpr double kFlopsPerUpdatedParam = 2 * 28 * 170;

struct ZeroOptimizerInBackward : zcc::impl::ZeroOptimizerInBackwardBase<ZeroOptimizerInBackward> {
  using ZeroOptimizerInBackwardBase::ZeroOptimizerInBackwardBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!micro || !apply || !eligible(module, apply))
      return;
    SmallVector<BucketUpdate> buckets;
    if (!matchApply(module, apply, buckets))
      return;
    SmallVector<MemberUpdate> members;
    if (!matchMembers(module, micro, buckets, members))
      return;
    rewrite(module, micro, apply, buckets, members);
  }

  /// One micro-step a step on one rank (module attributes).
  static bool eligible(ModuleOp module, func::FuncOp apply) {
    auto training = zcc::zero::attrs(module).getTrainingAttrHelper().getAttr(module);
    auto partition = zcc::zero::attrs(module).getPartitionAttrHelper().getAttr(module);
    if (!training || !partition)
      return false;
    if (zcc::zero::gradAccumSteps(module) != 1 || partition.getWorldSize() != 1)
      return false;
    // fp16's loss scale: @apply also returns the overflow flag.
    return apply.getNumArguments() == 1 && apply.getNumResults() == 1;
  }

  /// @apply is exactly: loads, the step count's increment, AdamWs reading
  /// bucket loads directly (no scale, no skip) with their sums of squares,
  /// stores of their results, the norm (adds and a square root), return.
  static bool matchApply(ModuleOp module, func::FuncOp apply,
                         SmallVectorImpl<BucketUpdate> &buckets) {
    Value lr = apply.getArgument(0);
    for (Operation &op : apply.getBody().front()) {
      if (!isa<LoadOp, StoreOp, ConstantOp, AddOp, SqrtOp, ElementwiseOp, AdamWOp, func::ReturnOp>(
              op))
        return false;
      auto u = dyn_cast<AdamWOp>(op);
      if (!u)
        continue;
      if (u.getSkip() || u.getGradScale() || !u.getGradSumSquares() || u.getLr() != lr)
        return false;
      BucketUpdate b{u,
                     loadedGlobal(module, u.getParam()),
                     loadedGlobal(module, u.getGrad()),
                     loadedGlobal(module, u.getM()),
                     loadedGlobal(module, u.getV()),
                     {}};
      if (!b.param || !b.grad || !b.m || !b.v || b.grad.getRole() != GlobalRole::grad ||
          storedGlobal(module, u.getNewParam()) != b.param ||
          storedGlobal(module, u.getNewM()) != b.m || storedGlobal(module, u.getNewV()) != b.v)
        return false;
      if (Value copy = u.getNewParamCopy()) {
        b.copy = storedGlobal(module, copy);
        if (!b.copy)
          return false;
      }
      buckets.push_back(b);
    }
    if (buckets.empty())
      return false;
    // One step count, stored by @apply.
    Value step = buckets.front().op.getStep();
    if (llvm::any_of(buckets, [&](BucketUpdate &b) { return b.op.getStep() != step; }))
      return false;
    return llvm::any_of(apply.getBody().front(), [&](Operation &op) {
      auto store = dyn_cast<StoreOp>(op);
      return store && store.getValue() == step;
    });
  }

  /// Each bucket's gradient in @micro_step: `store concat(pieces), @grad`
  /// at the end, one piece per member at its offset (padding between them
  /// is left out); the member's parameter (and copy) globals.
  static bool matchMembers(ModuleOp module, func::FuncOp micro,
                           MutableArrayRef<BucketUpdate> buckets,
                           SmallVectorImpl<MemberUpdate> &members) {
    DenseMap<StringAttr, SmallVector<GlobalOp>> byBucket;
    for (GlobalOp g : module.getOps<GlobalOp>())
      if (auto b = g.getBucketAttr())
        byBucket[b.getAttr()].push_back(g);
    for (BucketUpdate &b : buckets) {
      StoreOp store;
      for (Operation &op : micro.getBody().front())
        if (auto s = dyn_cast<StoreOp>(op);
            s && s.getGlobalAttr().getAttr() == b.grad.getSymNameAttr()) {
          if (store)
            return false;
          store = s;
        }
      if (!store)
        return false;
      // The pieces at their offsets: a concat's, or the stored value whole
      // (a member alone in its bucket: the embedding's gradient, flattened).
      DenseMap<int64_t, Value> pieceAt;
      if (auto concat = store.getValue().getDefiningOp<ConcatOp>()) {
        if (!concat->hasOneUse())
          return false;
        int64_t at = 0;
        for (Value piece : concat.getInputs()) {
          pieceAt[at] = piece;
          at += cast<RankedTensorType>(piece.getType()).getNumElements();
        }
      } else {
        pieceAt[0] = store.getValue();
      }
      DenseMap<int64_t, GlobalOp> copyAt;
      if (b.copy)
        for (GlobalOp g : byBucket.lookup(b.copy.getSymNameAttr()))
          copyAt[*g.getBucketOffset()] = g;
      for (GlobalOp p : byBucket.lookup(b.param.getSymNameAttr())) {
        int64_t offset = *p.getBucketOffset();
        Value piece = pieceAt.lookup(offset);
        if (!piece ||
            cast<RankedTensorType>(piece.getType()).getNumElements() !=
                p.getTensorType().getNumElements() ||
            (b.copy && !copyAt.count(offset)))
          return false;
        // The gradient itself, not its flattening right before the concat.
        while (auto reshape = piece.getDefiningOp<ReshapeOp>())
          piece = reshape.getInput();
        members.push_back({&b, offset, p.getTensorType(), piece, p, copyAt.lookup(offset), nullptr,
                           (int)members.size()});
      }
    }
    return !members.empty();
  }

  /// The last op of |block| that reads one of |globals| (through loads and
  /// the views of what they load).
  static Operation *lastRead(Block &block, const DenseSet<StringAttr> &globals,
                             const DenseMap<Operation *, int64_t> &index) {
    Operation *last = nullptr;
    auto later = [&](Operation *op) {
      if (!last || index.lookup(op) > index.lookup(last))
        last = op;
    };
    for (Operation &op : block) {
      auto load = dyn_cast<LoadOp>(op);
      if (!load || !globals.contains(load.getGlobalAttr().getAttr()))
        continue;
      later(load);
      SmallVector<Value> worklist{load.getResult()};
      while (!worklist.empty())
        for (Operation *user : worklist.pop_back_val().getUsers()) {
          later(user);
          if (isViewOp(user))
            worklist.push_back(user->getResult(0));
        }
    }
    return last;
  }

  void rewrite(ModuleOp module, func::FuncOp micro, func::FuncOp apply,
               MutableArrayRef<BucketUpdate> buckets, MutableArrayRef<MemberUpdate> members) {
    Block &block = micro.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Location loc = apply.getLoc();
    OpBuilder b(module.getContext());
    auto scalar = RankedTensorType::get({}, b.getF32Type());

    // lr: a new input of @micro_step.
    unsigned lrIndex = micro.getNumArguments();
    (void)micro.insertArgument(
        lrIndex, scalar,
        b.getDictionaryAttr(b.getNamedAttr(zcc::zero::ZeroDialect::InputAttrHelper::getNameStr(),
                                           b.getStringAttr("lr"))),
        loc);
    Value lr = micro.getArgument(lrIndex);

    // The step count's increment, cloned to the top of @micro_step.
    AdamWOp first = buckets.front().op;
    IRMapping map;
    map.map(apply.getArgument(0), lr);
    b.setInsertionPointToStart(&block);
    SetVector<Operation *> stepOps;
    SmallVector<Value> worklist{first.getStep()};
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || !stepOps.insert(def))
        continue;
      for (Value operand : def->getOperands())
        worklist.push_back(operand);
    }
    StoreOp stepStore;
    for (Operation &op : apply.getBody().front()) {
      if (stepOps.contains(&op)) {
        b.clone(op, map);
        continue;
      }
      // The store of the new count.
      auto store = dyn_cast<StoreOp>(op);
      if (store && store.getValue() == first.getStep())
        stepStore = cast<StoreOp>(b.clone(op, map));
    }
    assert(stepStore && "matchApply found the count's store");
    // The updates read the count from its global (which nothing else in the
    // program writes): an async update reads it after the program has moved
    // on.
    Value step = LoadOp::create(b, loc, scalar, stepStore.getGlobalAttr());

    // Where each update goes: after its gradient piece and the last read of
    // its parameter or copy.
    DenseMap<Operation *, int64_t> index = programOrder(block);
    for (MemberUpdate &m : members) {
      DenseSet<StringAttr> globals{m.param.getSymNameAttr(), m.bucket->param.getSymNameAttr()};
      if (m.copy) {
        globals.insert(m.copy.getSymNameAttr());
        globals.insert(m.bucket->copy.getSymNameAttr());
      }
      Operation *after = m.grad.getDefiningOp();
      if (Operation *read = lastRead(block, globals, index);
          read && (!after || index.lookup(read) > index.lookup(after)))
        after = read;
      m.after = after;
    }

    // The updates, in program order of their places (member order where
    // they share one).
    SmallVector<MemberUpdate *> order;
    for (MemberUpdate &m : members)
      order.push_back(&m);
    auto place = [&](const MemberUpdate *m) { return m->after ? index.lookup(m->after) : -1; };
    llvm::stable_sort(
        order, [&](const MemberUpdate *a, const MemberUpdate *c) { return place(a) < place(c); });
    SmallVector<Value> sums(members.size());
    SmallVector<SmallVector<AdamWOp>> groups;
    Operation *cursor = nullptr;
    int64_t lastPlace = -2;
    for (MemberUpdate *m : order) {
      if (place(m) != lastPlace) {
        if (m->after)
          b.setInsertionPointAfter(m->after);
        else
          b.setInsertionPointToStart(&block);
        // After the step count's increment, which is at the top.
        if (Operation *def = step.getDefiningOp(); def && index.lookup(def) >= place(m))
          b.setInsertionPointAfter(def);
        groups.emplace_back();
        lastPlace = place(m);
      } else {
        b.setInsertionPointAfter(cursor);
      }
      AdamWOp u = m->bucket->op;
      Location at = m->param.getLoc();
      auto gradType = RankedTensorType::get(
          m->type.getShape(), cast<RankedTensorType>(m->grad.getType()).getElementType());
      Value grad = m->grad.getType() == gradType
                       ? m->grad
                       : Value(ReshapeOp::create(b, at, gradType, m->grad));
      Value param = LoadOp::create(b, at, m->type, ref(m->param));
      // MEMBER.adam_m / .adam_v: the member's slices of the bucket's moments.
      GlobalOp mg =
          zcc::createMemberSlice(module, m->param, ".adam_m", GlobalRole::adam_m, m->bucket->m);
      GlobalOp vg =
          zcc::createMemberSlice(module, m->param, ".adam_v", GlobalRole::adam_v, m->bucket->v);
      Value mv = LoadOp::create(b, at, m->type, ref(mg));
      Value vv = LoadOp::create(b, at, m->type, ref(vg));
      Type copyType = m->copy ? m->copy.getTensorType() : Type();
      auto update =
          AdamWOp::create(b, at, param, grad, mv, vv, lr, step, u.getBeta1().convertToDouble(),
                          u.getBeta2().convertToDouble(), u.getEpsilon().convertToDouble(),
                          u.getWeightDecay().convertToDouble(), Value(), copyType,
                          /*sumSquares=*/true);
      StoreOp::create(b, at, update.getNewParam(), ref(m->param));
      StoreOp::create(b, at, update.getNewM(), ref(mg));
      cursor = StoreOp::create(b, at, update.getNewV(), ref(vg));
      if (m->copy)
        cursor = StoreOp::create(b, at, update.getNewParamCopy(), ref(m->copy));
      sums[m->index] = update.getGradSumSquares();
      groups.back().push_back(update);
    }

    // Async: a group's waits (which keep its gradients alive) go before the
    // first later group that starts after enough GEMM work to hide the
    // group's update, or before the norm. Joining at the very next group
    // would stall the compute stream behind a large update (Llama 3 8B's
    // LM head, 525M parameters, about 4 ms, is followed at once by the final
    // norm's); waiting only at the end would keep every gradient alive.
    b.setInsertionPoint(ret);
    if (async) {
      // GEMM FLOPs before each op: 2 x N x numel(lhs) for the matmul family
      // (N the result's last dimension: batched, transposed and weight-
      // gradient forms alike).
      DenseMap<Operation *, double> flopsBefore;
      double flops = 0;
      for (Operation &op : block) {
        flopsBefore[&op] = flops;
        if (isa<MatmulOp, MatmulBiasOp, MatmulAddOp, MatmulBiasGeluOp, MatmulGeluGradOp,
                MatmulBgradOp>(op) &&
            op.getNumOperands() >= 2 && op.getNumResults() >= 1) {
          auto a = cast<RankedTensorType>(op.getOperand(0).getType());
          auto c = cast<RankedTensorType>(op.getResult(0).getType());
          flops += 2.0 * (double)c.getShape().back() * (double)a.getNumElements();
        }
      }
      SmallVector<Operation *> starts;
      for (auto &group : groups)
        starts.push_back(firstOpOfGroup(group));
      for (size_t g = 0; g < groups.size(); ++g) {
        double params = 0;
        for (AdamWOp u : groups[g]) {
          u->setAttr("async", b.getUnitAttr());
          params += (double)u.getParam().getType().getNumElements();
        }
        double launched = flopsBefore.lookup(groups[g].back());
        OpBuilder wb(module.getContext());
        wb.setInsertionPoint(ret);
        for (size_t later = g + 1; later < groups.size(); ++later)
          if (flopsBefore.lookup(starts[later]) - launched >= kFlopsPerUpdatedParam * params) {
            wb.setInsertionPoint(starts[later]);
            break;
          }
        for (AdamWOp u : groups[g]) {
          Value sum = u.getGradSumSquares();
          auto wait = WaitOp::create(wb, u.getLoc(), sum, u.getGrad());
          sum.replaceAllUsesExcept(wait.getResult(), wait);
          for (Value &s : sums)
            if (s == sum)
              s = wait.getResult();
        }
      }
    }

    // grad_norm: the members' sums of squares, in member order, summed in
    // one reduce (double accumulation on both targets), then its root.
    b.setInsertionPoint(ret);
    SmallVector<Value> pieces;
    auto one = RankedTensorType::get({1}, b.getF32Type());
    for (Value s : sums)
      pieces.push_back(ReshapeOp::create(b, loc, one, s));
    Value all = pieces.size() == 1
                    ? pieces.front()
                    : ConcatOp::create(b, loc, pieces, b.getI64IntegerAttr(0)).getResult();
    Value total = ReduceOp::create(b, loc, ReduceKind::sum, all, ArrayRef<int64_t>{0},
                                   /*keepdims=*/false);
    Value norm = SqrtOp::create(b, loc, total);
    SmallVector<Value> results(ret.getOperands());
    results.push_back(norm);
    unsigned normIndex = micro.getNumResults();
    (void)micro.insertResult(
        normIndex, scalar,
        b.getDictionaryAttr(b.getNamedAttr(zcc::zero::ZeroDialect::OutputAttrHelper::getNameStr(),
                                           b.getStringAttr("grad_norm"))));
    ret->setOperands(results);

    // The gradient buckets are no longer written: their stores and packing go.
    for (BucketUpdate &u : buckets) {
      for (Operation &op : llvm::make_early_inc_range(block))
        if (auto store = dyn_cast<StoreOp>(op);
            store && store.getGlobalAttr().getAttr() == u.grad.getSymNameAttr()) {
          Operation *concat = store.getValue().getDefiningOp();
          store.erase();
          if (concat && concat->use_empty())
            eraseDeadPieces(concat);
        }
    }

    // @apply keeps its lr input and does nothing; its norm is @micro_step's.
    Block &applyBlock = apply.getBody().front();
    applyBlock.getTerminator()->setOperands({});
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(applyBlock)))
      if (!isa<func::ReturnOp>(op))
        op.erase();
    (void)apply.eraseResult(0);

    // The buckets lose their gradient globals (and zero.buckets its names).
    if (auto list = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module)) {
      SmallVector<Attribute> entries;
      for (auto d : list.getAsRange<zcc::zero::BucketAttr>())
        entries.push_back(zcc::zero::BucketAttr::get(
            module.getContext(), d.getMembers(), d.getParam(), /*grad=*/FlatSymbolRefAttr(),
            d.getSize(), d.getParamSharded(), d.getGradSharded(), d.getBackwardGather(),
            d.getCopy()));
      zcc::zero::attrs(module).getBucketsAttrHelper().setAttr(module, b.getArrayAttr(entries));
    }
    for (BucketUpdate &u : buckets) {
      for (GlobalOp g : llvm::make_early_inc_range(module.getOps<GlobalOp>()))
        if (auto of = g.getBucketAttr(); of && of.getAttr() == u.grad.getSymNameAttr() &&
                                         SymbolTable::symbolKnownUseEmpty(g, module))
          g.erase();
      if (SymbolTable::symbolKnownUseEmpty(u.grad, module))
        u.grad.erase();
    }

    zcc::zero::attrs(module).getOptimizerInBackwardAttrHelper().setAttr(
        module, b.getDictionaryAttr({b.getNamedAttr("updates", b.getI64IntegerAttr(members.size())),
                                     b.getNamedAttr("async", b.getBoolAttr(async))}));
  }

  static Operation *firstOpOfGroup(ArrayRef<AdamWOp> group) {
    // The update's operands: its reshape of the gradient and its loads come
    // right before it.
    Operation *first = group.front();
    while (Operation *prev = first->getPrevNode()) {
      if (!isa<LoadOp, ReshapeOp>(prev) ||
          llvm::none_of(prev->getUsers(), [&](Operation *u) { return u == group.front(); }))
        break;
      first = prev;
    }
    return first;
  }

  /// The concat packing the gradients, and the reshapes and casts that only
  /// it read (the gradients themselves are now read by their updates).
  static void eraseDeadPieces(Operation *concat) {
    SmallVector<Operation *> worklist{concat};
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!op->use_empty())
        continue;
      SmallVector<Operation *> defs;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && isa<ReshapeOp, CastOp>(def))
          defs.push_back(def);
      op->erase();
      worklist.append(defs.begin(), defs.end());
    }
  }
};

} // namespace
