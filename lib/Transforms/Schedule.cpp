//===- Schedule.cpp - start/wait collectives and their overlap ------------===//
//
// See Passes.td (ZeroSchedule). The functions are straight-line blocks, so
// scheduling is moving ops within one block while keeping every operand
// defined before its use.
//
//===----------------------------------------------------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Analysis/ModelShape.h"
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>

#include <optional>

namespace zcc {
#define GEN_PASS_DEF_ZEROSCHEDULE
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc;
using namespace zcc::zero;

namespace {

bool isCommunication(Operation *op) {
  return isa<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp>(op);
}

/// The start of a bucket's gradient reduction: a reduce-scatter, or qgZ's
/// all-to-all of the quantized gradient's values (its first level: not of
/// what an earlier level's dequantization produced).
bool isReductionStart(Operation *op) {
  if (isa<ReduceScatterOp>(op))
    return true;
  auto exchange = dyn_cast<AllToAllOp>(op);
  auto q = exchange ? exchange.getInput().getDefiningOp<QuantizeOp>() : QuantizeOp();
  return q && exchange.getInput() == q.getValues() && !q.getInput().getDefiningOp<DequantizeOp>();
}

int64_t elements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

struct ZeroSchedulePass : zcc::impl::ZeroScheduleBase<ZeroSchedulePass> {
  using ZeroScheduleBase::ZeroScheduleBase;

  /// Every collective becomes async, followed by its wait.
  SmallVector<WaitOp> split(Block &block) {
    SmallVector<WaitOp> waits;
    SmallVector<Operation *> collectives;
    for (Operation &op : block)
      if (isCommunication(&op) && !op.hasAttr("async"))
        collectives.push_back(&op);
    for (Operation *op : collectives) {
      op->setAttr("async", UnitAttr::get(op->getContext()));
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      Value result = op->getResult(0);
      auto wait = WaitOp::create(b, op->getLoc(), result, op->getOperand(0));
      result.replaceAllUsesExcept(wait, wait);
      waits.push_back(wait);
    }
    return waits;
  }

  /// A gradient reduce-scatter's wait and the accumulation that reads it
  /// (load @g; add; store @g), if that is what follows it; a 16-bit
  /// reduction (--comm-dtype) widens the result first.
  static SmallVector<Operation *> accumulationAfter(WaitOp wait) {
    Value reduced = wait.getResult();
    if (!reduced.hasOneUse())
      return {};
    auto widening = dyn_cast<CastOp>(*reduced.getUsers().begin());
    if (widening) {
      reduced = widening.getResult();
      if (!reduced.hasOneUse())
        return {};
    }
    auto add = dyn_cast<AddOp>(*reduced.getUsers().begin());
    if (!add || !add.getResult().hasOneUse())
      return {};
    auto store = dyn_cast<StoreOp>(*add.getResult().getUsers().begin());
    Value other = add.getLhs() == reduced ? add.getRhs() : add.getLhs();
    auto load = other.getDefiningOp<LoadOp>();
    if (!store || !load || !load.getResult().hasOneUse() ||
        load.getGlobalAttr() != store.getGlobalAttr())
      return {};
    if (widening)
      return {load, wait, widening, add, store};
    return {load, wait, add, store};
  }

  /// What depends on qgZ's exchange |start| between it and |target|, in
  /// program order: its forward slice, with the waits of the scales'
  /// exchange and the accumulation's loads that feed it; empty if something
  /// outside the slice before |target| uses it (it cannot move then).
  static SmallVector<Operation *> dependentsBefore(AllToAllOp start, Operation *target) {
    llvm::SmallPtrSet<Operation *, 16> in{start};
    SmallVector<Operation *> chain;
    auto scales = start.getInput().getDefiningOp<QuantizeOp>().getScales();
    for (Operation *op = start->getNextNode(); op && op != target; op = op->getNextNode()) {
      bool depends = llvm::any_of(op->getOperands(), [&](Value v) {
        return v.getDefiningOp() && in.contains(v.getDefiningOp());
      });
      // The scales' exchange's wait (the exchange itself stays beside start).
      if (auto wait = dyn_cast<WaitOp>(op); wait && wait.getInput() == scales)
        depends = true;
      if (depends) {
        in.insert(op);
        chain.push_back(op);
      }
    }
    // The accumulation's load of the gradient it adds to.
    for (Operation *op : SmallVector<Operation *>(chain))
      for (Value v : op->getOperands())
        if (auto load = v.getDefiningOp<LoadOp>();
            load && load->hasOneUse() && start->isBeforeInBlock(load) && !in.contains(load)) {
          in.insert(load);
          chain.push_back(load);
        }
    for (Operation *op : chain)
      for (Operation *user : op->getUsers())
        if (!in.contains(user) && user->isBeforeInBlock(target))
          return {};
    llvm::sort(chain, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    return chain;
  }

  void overlap(Block &block, ArrayRef<WaitOp> waits) {
    // Waits as late as their first use; views of the result (a gathered
    // bucket's parameters) move down with them.
    for (WaitOp wait : waits) {
      SmallVector<Operation *> views;
      Operation *use = nullptr;
      SmallVector<Value> worklist{wait.getResult()};
      while (!worklist.empty())
        for (Operation *user : worklist.pop_back_val().getUsers()) {
          if (isViewOp(user)) {
            views.push_back(user);
            worklist.push_back(user->getResult(0));
          } else if (!use || user->isBeforeInBlock(use)) {
            use = user;
          }
        }
      if (!use)
        continue;
      llvm::sort(views, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      wait->moveBefore(use);
      for (Operation *view : views)
        view->moveBefore(use);
    }

    // Gradient reductions: the accumulation of bucket k waits until the
    // next bucket's reduce-scatter starts (or the end).
    SmallVector<WaitOp> reductions;
    for (WaitOp wait : waits)
      if (isReductionStart(wait.getStarted().getDefiningOp()))
        reductions.push_back(wait);
    llvm::sort(reductions, [](WaitOp a, WaitOp b) {
      return a.getStarted().getDefiningOp()->isBeforeInBlock(b.getStarted().getDefiningOp());
    });
    auto startOf = [&](size_t k) {
      return k < reductions.size() ? reductions[k].getStarted().getDefiningOp()
                                   : block.getTerminator();
    };
    for (size_t k = 0; k < reductions.size(); ++k) {
      Operation *target = startOf(k + 1);
      if (auto exchange = dyn_cast<AllToAllOp>(reductions[k].getStarted().getDefiningOp())) {
        // qgZ: everything after the exchange that depends on it (its waits,
        // the dequantization, a second level's exchange, the accumulation)
        // runs when the next bucket's reduction starts.
        SmallVector<Operation *> chain = dependentsBefore(exchange, target);
        for (Operation *op : chain)
          op->moveBefore(target);
        continue;
      }
      // MiCS / HSDP: the shard is then all-reduced across the groups. That
      // all-reduce starts when the next bucket's reduce-scatter does, and
      // the accumulation waits for it one bucket later still.
      // (The reduced shard feeds the all-reduce and, as the input it keeps
      // alive, the all-reduce's wait.)
      AllReduceOp across;
      WaitOp acrossWait;
      for (Operation *user : reductions[k].getResult().getUsers())
        if (auto a = dyn_cast<AllReduceOp>(user); a && !across)
          across = a;
      if (across && across->hasAttr("async") && across.getResult().hasOneUse())
        acrossWait = dyn_cast<WaitOp>(*across.getResult().getUsers().begin());
      if (acrossWait && llvm::all_of(reductions[k].getResult().getUsers(), [&](Operation *u) {
            return u == across || u == acrossWait;
          })) {
        SmallVector<Operation *> chain = accumulationAfter(acrossWait);
        if (chain.empty() || !chain.back()->isBeforeInBlock(target))
          continue;
        reductions[k]->moveBefore(target);
        across->moveBefore(target);
        for (Operation *op : chain)
          op->moveBefore(startOf(k + 2));
        continue;
      }
      SmallVector<Operation *> chain = accumulationAfter(reductions[k]);
      if (chain.empty())
        continue;
      if (!chain.back()->isBeforeInBlock(target))
        continue;
      for (Operation *op : chain)
        op->moveBefore(target);
    }

    // Parameter prefetch: a gather of a loaded (partitioned) bucket starts
    // right after an earlier gather's wait, as early as the gathers in
    // flight stay within the budget.
    // -1: DeepSpeed's "auto" prefetch bucket, 0.9 H^2.
    int64_t budget = std::min(autoSize(prefetchBucketSize, getOperation(), 0.9, 0),
                              maxLiveParameters.getValue());
    SmallVector<WaitOp> gathers;
    // (An offloaded shard is a load copied to the device, a 16-bit gather's
    // a load rounded (--comm-dtype): they move along.)
    // (hpZ's backward gather reads the secondary shard the forward kept:
    // nothing moves along, the start only.)
    auto loadOf = [](AllGatherOp g) -> std::optional<SmallVector<Operation *>> {
      Value input = g.getInput();
      SmallVector<Operation *> feed;
      if (input.getDefiningOp<LocalShardOp>())
        return feed;
      // qwZ: the int8 values' gather brings the quantization (and the
      // scales' gather, moved with it below); the scales' is not one of its own.
      if (auto q = input.getDefiningOp<QuantizeOp>()) {
        if (input != q.getValues() || !q->getResult(0).hasOneUse())
          return std::nullopt;
        feed.push_back(q);
        input = q.getInput();
      }
      if (auto rounding = input.getDefiningOp<CastOp>(); rounding && rounding->hasOneUse()) {
        feed.push_back(rounding);
        input = rounding.getInput();
      }
      if (auto t = input.getDefiningOp<TransferOp>(); t && t->hasOneUse()) {
        feed.push_back(t);
        input = t.getInput();
      }
      auto load = input.getDefiningOp<LoadOp>();
      if (!load)
        return std::nullopt;
      feed.push_back(load);
      std::reverse(feed.begin(), feed.end()); // in program order
      return feed;
    };
    for (WaitOp wait : waits)
      if (auto g = dyn_cast<AllGatherOp>(wait.getStarted().getDefiningOp()))
        if (loadOf(g))
          gathers.push_back(wait);
    llvm::sort(gathers, [](WaitOp a, WaitOp b) { return a->isBeforeInBlock(b); });
    for (size_t i = 1; i < gathers.size(); ++i) {
      int64_t inFlight = elements(gathers[i].getResult());
      int64_t earliest = -1;
      for (int64_t j = (int64_t)i - 1; j >= 0; --j) {
        if (inFlight > budget)
          break;
        earliest = j;
        inFlight += elements(gathers[j].getResult());
      }
      if (earliest < 0)
        continue;
      Operation *start = gathers[i].getStarted().getDefiningOp();
      SmallVector<Operation *> feed = *loadOf(cast<AllGatherOp>(start));
      Operation *after = gathers[earliest];
      // Not before what it gathers exists (a secondary shard).
      if (Operation *def = start->getOperand(0).getDefiningOp();
          feed.empty() && def && def->getBlock() == &block && after->isBeforeInBlock(def))
        after = def;
      if (!after->isBeforeInBlock(start))
        continue;
      for (Operation *op : feed) {
        op->moveAfter(after);
        after = op;
      }
      start->moveAfter(after);
      if (auto q = feed.empty() ? QuantizeOp() : dyn_cast<QuantizeOp>(feed.back()))
        for (Operation *user : q.getScales().getUsers())
          if (isa<AllGatherOp>(user))
            user->moveAfter(start);
    }
  }

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func.getBody().hasOneBlock())
        continue;
      Block &block = func.getBody().front();
      SmallVector<WaitOp> waits = split(block);
      if (overlapComm)
        overlap(block, waits);
    }
  }
};

} // namespace
