//===- Recompute.cpp - activation checkpointing in @micro_step ------------===//
//
// @micro_step is the forward (up to the op defining the loss) followed by the
// backward. A forward value the backward reads lives from its definition to
// its last backward use: the activations. This pass clones forward ops into
// the backward so that the backward reads the clones and the originals die
// after their last forward use:
//
//   layer      each repeated block is a segment; its inputs (values from
//              earlier segments) are the checkpoints; the segment's ops that
//              produce what its backward reads are cloned, in order, before
//              the first backward op that reads one of them. Collectives
//              in a segment (expert parallelism's) are not cloned: their
//              results stay saved, as checkpoints are.
//   selective  a forward value the backward reads, made by a cheap op
//              (elementwise, cast, layout, norm), is recomputed before its
//              first backward use from values that stay saved anyway (read
//              by the backward, or parameters and constants), through a cone
//              of at most kMaxCone cheap ops.
//
// The clones are the same ops on the same operands, so every value, and the
// training trajectory, is bit-identical to the plain plan's.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

namespace zcc {
#define GEN_PASS_DEF_ZERORECOMPUTE
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

constexpr int kMaxCone = 8;

/// "transformer.h.3" for "transformer.h.3.attn.c_attn.weight": the name up to
/// its first all-digit component; empty when there is none.
std::string layerKey(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  std::string key;
  for (StringRef p : parts) {
    key += (key.empty() ? "" : ".") + p.str();
    if (!p.empty() && llvm::all_of(p, [](char c) { return c >= '0' && c <= '9'; }))
      return key;
  }
  return "";
}

/// Elementwise ops (the trait), casts, layout and norms: cheap to run again.
bool isCheap(Operation *op) {
  return isElementwise(op) || isa<CastOp, ReshapeOp, TransposeOp, ExpandOp, SliceOp, ConcatOp,
                                  SplitOp, CmpOp, LayerNormOp, RmsNormOp>(op);
}

/// Values that are free to read at any point: parameters and constants (loads
/// and constants are not activations) and the step's arguments.
bool isFree(Value v) {
  Operation *def = v.getDefiningOp();
  return !def || isa<LoadOp, ConstantOp>(def);
}

class Recomputer {
public:
  Recomputer(func::FuncOp step) : step(step) {
    Block &block = step.getBody().front();
    ret = cast<func::ReturnOp>(block.getTerminator());
    loss = ret.getOperand(0);
    int64_t i = 0;
    for (Operation &op : block)
      order[&op] = i++;
    boundary = loss.getDefiningOp() ? order[loss.getDefiningOp()] : -1;
  }

  bool inForward(Operation *op) const { return order.lookup(op) <= boundary; }
  /// A use by the backward (the return of the loss is not one).
  bool isBackwardUse(OpOperand &use) const {
    Operation *user = use.getOwner();
    return user != ret && order.count(user) && order.lookup(user) > boundary;
  }
  bool readByBackward(Value v) const {
    return llvm::any_of(v.getUses(), [&](OpOperand &u) { return isBackwardUse(u); });
  }
  /// The first backward op reading any of |values| (in the original order).
  Operation *firstBackwardUser(ArrayRef<Value> values) const {
    Operation *first = nullptr;
    for (Value v : values)
      for (OpOperand &u : v.getUses())
        if (isBackwardUse(u) && (!first || order.lookup(u.getOwner()) < order.lookup(first)))
          first = u.getOwner();
    return first;
  }
  /// Points the backward uses of |v| (not the clones) at |replacement|.
  void redirect(Value v, Value replacement, const DenseSet<Operation *> &clones) {
    v.replaceUsesWithIf(replacement, [&](OpOperand &u) {
      return !clones.contains(u.getOwner()) && isBackwardUse(u);
    });
  }

  /// --recompute layer. Returns the number of segments recomputed.
  FailureOr<int> layers(std::string &note) {
    auto module = step->getParentOfType<ModuleOp>();
    // Segments: forward ops in order; a new one starts where an op reads a
    // parameter of another block (loads and constants belong to none).
    struct Segment {
      std::string key;
      SmallVector<Operation *> ops;
    };
    SmallVector<Segment> segments;
    DenseMap<Operation *, int> segmentOf;
    // The parameter a value is (a load, or a cast/layout op of one: mixed
    // precision casts every parameter right after its load).
    std::function<GlobalOp(Value)> paramOf = [&](Value v) -> GlobalOp {
      Operation *def = v.getDefiningOp();
      if (auto load = dyn_cast_if_present<LoadOp>(def))
        return module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
      if (isa_and_present<CastOp, ReshapeOp, TransposeOp, ExpandOp>(def))
        return paramOf(def->getOperand(0));
      return nullptr;
    };
    for (Operation &op : step.getBody().front()) {
      if (!inForward(&op))
        break;
      if (isa<LoadOp, ConstantOp>(op))
        continue;
      // Ops on parameters and constants only belong to no block.
      if (llvm::all_of(op.getOperands(), [&](Value v) { return isFree(v) || paramOf(v); }))
        continue;
      std::optional<std::string> key;
      for (Value operand : op.getOperands())
        if (GlobalOp global = paramOf(operand)) {
          key = layerKey(global.getSymName());
          break;
        }
      if (segments.empty() || (key && *key != segments.back().key))
        segments.push_back({key.value_or(""), {}});
      segments.back().ops.push_back(&op);
      segmentOf[&op] = segments.size() - 1;
    }
    llvm::StringSet<> blocks;
    for (const Segment &s : segments)
      if (!s.key.empty())
        blocks.insert(s.key);
    if (blocks.size() < 2) {
      note = "no repeated blocks found (no parameter names with a layer index such as "
             "'h.0.' or 'layers.0.'): nothing recomputed";
      return 0;
    }

    // Plan every segment on the original program, then clone.
    struct Work {
      SmallVector<Operation *> ops; // to clone, in order
      SmallVector<Value> recomputed;
      Operation *before = nullptr;
    };
    SmallVector<Work> work;
    for (auto [index, s] : llvm::enumerate(segments)) {
      if (s.key.empty())
        continue; // embeddings, the head and the loss are not blocks
      // What the backward reads from this segment, except its outputs to
      // later segments: those are the next segments' checkpoints.
      SmallVector<Value> wanted;
      for (Operation *op : s.ops)
        for (Value r : op->getResults()) {
          if (r == loss || !readByBackward(r))
            continue;
          bool checkpoint = llvm::any_of(r.getUsers(), [&](Operation *user) {
            auto it = segmentOf.find(user);
            return it != segmentOf.end() && it->second != (int)index;
          });
          if (!checkpoint)
            wanted.push_back(r);
        }
      if (wanted.empty())
        continue;
      // The segment's ops those values depend on.
      DenseSet<Operation *> needed;
      SmallVector<Operation *> stack;
      for (Value v : wanted)
        stack.push_back(v.getDefiningOp());
      while (!stack.empty()) {
        Operation *op = stack.pop_back_val();
        auto it = segmentOf.find(op);
        // A collective's result (expert parallelism's gathered tokens) is
        // kept, not communicated again: the segment's clones read it.
        if (it == segmentOf.end() || it->second != (int)index || !isMemoryEffectFree(op) ||
            !needed.insert(op).second)
          continue;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp())
            stack.push_back(def);
      }
      Work w;
      for (Operation *op : s.ops)
        if (needed.contains(op)) {
          if (!isMemoryEffectFree(op))
            return op->emitError("zero-recompute: cannot recompute an op with side effects");
          w.ops.push_back(op);
        }
      w.recomputed = wanted;
      w.before = firstBackwardUser(wanted);
      work.push_back(std::move(w));
    }
    for (Work &w : work)
      clone(w.ops, w.recomputed, w.before);
    note =
        std::to_string(work.size()) + " of " + std::to_string(blocks.size()) + " blocks recomputed";
    return (int)work.size();
  }

  /// --recompute selective. Returns the number of values recomputed.
  int selective() {
    // The forward values the backward reads, in forward order.
    SmallVector<Value> read;
    DenseSet<Value> readSet;
    for (Operation &op : step.getBody().front()) {
      if (!inForward(&op))
        break;
      for (Value r : op.getResults())
        if (r != loss && !isFree(r) && readByBackward(r)) {
          read.push_back(r);
          readSet.insert(r);
        }
    }
    // A value is kept (the backward reads the original) or recomputed
    // through its cone: the cheap ops between it and kept or free values.
    // A value whose last forward use comes after the forward's last GEMM is
    // read again at the very start of the backward (the head and the loss lie
    // between): recomputing it frees nothing and its cone's temporaries would
    // add to the peak there.
    int64_t lastGemm = -1;
    for (Operation &op : step.getBody().front()) {
      if (!inForward(&op))
        break;
      if (isa<MatmulOp>(op))
        lastGemm = order[&op];
    }
    auto usedUpToTheHead = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation *user) {
        return inForward(user) && order.lookup(user) >= lastGemm;
      });
    };
    DenseSet<Value> recomputed;
    SmallVector<std::pair<Value, SmallVector<Operation *>>> plan;
    for (Value v : read) {
      Operation *def = v.getDefiningOp();
      if (!isCheap(def) || usedUpToTheHead(v))
        continue;
      llvm::SetVector<Operation *> cone;
      if (!collectCone(def, readSet, recomputed, cone))
        continue;
      SmallVector<Operation *> ops(cone.begin(), cone.end());
      llvm::sort(ops, [&](Operation *a, Operation *b) { return order[a] < order[b]; });
      recomputed.insert(v);
      plan.push_back({v, std::move(ops)});
    }
    for (auto &[v, ops] : plan)
      clone(ops, {v}, firstBackwardUser({v}));
    return (int)plan.size();
  }

private:
  /// Adds |op| and the cheap ops it needs (operands neither free nor kept)
  /// to |cone|; false if that takes more than kMaxCone ops or a non-cheap one.
  bool collectCone(Operation *op, const DenseSet<Value> &read, const DenseSet<Value> &recomputed,
                   llvm::SetVector<Operation *> &cone) {
    if (!isCheap(op) || !isMemoryEffectFree(op))
      return false;
    if (!cone.insert(op))
      return true;
    if ((int)cone.size() > kMaxCone)
      return false;
    for (Value operand : op->getOperands()) {
      if (isFree(operand) || (read.contains(operand) && !recomputed.contains(operand)))
        continue; // saved for the backward anyway (or free)
      if (!collectCone(operand.getDefiningOp(), read, recomputed, cone))
        return false;
    }
    return true;
  }

  /// Clones |ops| (in order) before |before| and points the backward uses of
  /// |values| at the clones.
  void clone(ArrayRef<Operation *> ops, ArrayRef<Value> values, Operation *before) {
    OpBuilder b(before);
    IRMapping map;
    DenseSet<Operation *> clones;
    for (Operation *op : ops)
      clones.insert(b.clone(*op, map));
    for (Value v : values)
      redirect(v, map.lookup(v), clones);
  }

  func::FuncOp step;
  func::ReturnOp ret;
  Value loss;
  DenseMap<Operation *, int64_t> order;
  int64_t boundary = -1;
};

struct ZeroRecompute : zcc::impl::ZeroRecomputeBase<ZeroRecompute> {
  using ZeroRecomputeBase::ZeroRecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (policy == "none")
      return;
    if (policy != "layer" && policy != "selective") {
      module.emitError("zero-recompute: policy '") << policy << "' is not none, layer or selective";
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!step)
      return; // eval-only plans have no backward
    Recomputer r(step);
    Builder b(module.getContext());
    std::string note;
    int count = 0;
    if (policy == "layer") {
      auto done = r.layers(note);
      if (failed(done))
        return signalPassFailure();
      count = *done;
      if (count == 0)
        mlir::emitWarning(step.getLoc(), "--recompute layer: ") << note;
    } else {
      count = r.selective();
      note = std::to_string(count) + " values recomputed";
    }
    zcc::zero::attrs(module).getRecomputeAttrHelper().setAttr(
        module, b.getDictionaryAttr({b.getNamedAttr("policy", b.getStringAttr(policy)),
                                     b.getNamedAttr("note", b.getStringAttr(note))}));
  }
};

} // namespace
