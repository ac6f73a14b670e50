//===- GroupCasts.cpp - mixed precision's casts in one launch ------------===//
//
// Mixed precision casts every parameter to bf16 at the start of a step and
// widens every bf16 gradient on its way into the fp32 gradient bucket: two
// casts per parameter, each its own kernel launch and, for the gradients, a
// float32 copy that the bucket's concat copies again. This pass gives each
// run of parameter casts one zero.cast_many and each bucket's packing one
// zero.cast_concat. Runs after autodiff and scheduling, on the final
// programs. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROGROUPCASTS
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// A cast between two different float types.
bool isFloatCast(CastOp c) {
  Type from = elementOf(c.getInput()), to = elementOf(c.getResult());
  return isa<FloatType>(from) && isa<FloatType>(to) && from != to;
}

struct ZeroGroupCasts : zcc::impl::ZeroGroupCastsBase<ZeroGroupCasts> {
  void runOnOperation() override {
    SmallVector<ConcatOp> concats;
    getOperation().walk([&](ConcatOp c) { concats.push_back(c); });
    for (ConcatOp c : concats)
      groupConcat(c);
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *b : blocks)
      groupRuns(*b);
  }

  /// concat(reshape?(cast(x_i)) ..., axis 0) -> cast_concat(x_i ...): pieces
  /// that are not (flattened) single-use casts go in as they are.
  void groupConcat(ConcatOp concat) {
    auto out = cast<RankedTensorType>(concat.getType());
    if (out.getRank() != 1 || !isa<FloatType>(out.getElementType()))
      return;
    SmallVector<Value> pieces;
    SmallVector<Operation *> dead; // users before their producers
    int casts = 0;
    for (Value v : concat.getInputs()) {
      Value x = v;
      auto reshape = x.getDefiningOp<ReshapeOp>();
      if (reshape && reshape->hasOneUse())
        x = reshape.getInput();
      auto c = x.getDefiningOp<CastOp>();
      if (c && c->hasOneUse() && isFloatCast(c) && (x != v || reshape == nullptr)) {
        if (x != v)
          dead.push_back(reshape);
        dead.push_back(c);
        pieces.push_back(c.getInput());
        ++casts;
      } else {
        pieces.push_back(v);
      }
    }
    if (casts < 2)
      return;
    OpBuilder b(concat);
    auto fused = CastConcatOp::create(b, concat.getLoc(), out, pieces);
    concat.replaceAllUsesWith(fused.getResult());
    concat.erase();
    for (Operation *op : dead)
      op->erase();
  }

  /// Runs of float casts of one (source, target) pair with only loads and
  /// constants between them, none of which reads a cast of the run: one
  /// cast_many where the last cast was (its inputs exist there, and the
  /// first reader of any result comes after it).
  void groupRuns(Block &block) {
    SmallVector<CastOp> run;
    llvm::SmallPtrSet<Operation *, 16> inRun;
    auto flush = [&] {
      if (run.size() >= 2) {
        SmallVector<Value> inputs;
        SmallVector<Type> types;
        for (CastOp c : run) {
          inputs.push_back(c.getInput());
          types.push_back(c.getType());
        }
        OpBuilder b(run.back());
        auto many = CastManyOp::create(b, run.back().getLoc(), types, inputs);
        for (auto [c, result] : llvm::zip(run, many.getResults())) {
          c.getResult().replaceAllUsesWith(result);
          c.erase();
        }
      }
      run.clear();
      inRun.clear();
    };
    auto readsRun = [&](Operation &op) {
      return llvm::any_of(op.getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && inRun.contains(def);
      });
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto c = dyn_cast<CastOp>(op);
      if (c && isFloatCast(c)) {
        if (!run.empty() &&
            (elementOf(run[0].getInput()) != elementOf(c.getInput()) ||
             elementOf(run[0].getResult()) != elementOf(c.getResult()) || readsRun(op)))
          flush();
        run.push_back(c);
        inRun.insert(c);
        continue;
      }
      if (readsRun(op) || !isa<LoadOp, ConstantOp>(op))
        flush();
    }
    flush();
  }
};

} // namespace
