//===- Partition.cpp - ZeRO stages as a rewrite of the training step ------===//
//
// See Passes.td (ZeroPartition) for what each stage becomes. The pass works
// on the straight-line @forward and @micro_step that zero-autodiff built:
//   1. buckets: trainable parameters in first-use order, packed flat;
//   2. gradients: each micro-step's per-parameter gradients packed into the
//      bucket layout, then accumulated (stages 0-1) or reduce-scattered and
//      accumulated as shards (stages 2-3);
//   3. stage 3: partitioned buckets are all-gathered where the forward and
//      the backward first need them; parameters become views of the
//      gathered bytes;
//   4. mixed precision on several ranks (stages 1-3): a replicated bucket's
//      float32 masters are sharded, and the programs read the members as
//      views of a 16-bit working copy of the whole bucket.
//
//===----------------------------------------------------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Analysis/ModelShape.h"
#include "zcc/Transforms/ExpertShards.h"
#include "zcc/Transforms/Mesh.h"
#include "zcc/Transforms/Passes.h"
#include "zcc/Transforms/StateGlobals.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROPARTITION
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc;
using namespace zcc::zero;

namespace {

/// Parameters start at multiples of this many elements in a bucket (64 bytes
/// of float32, the arena alignment).
constexpr int64_t kAlign = 16;

int64_t alignUp(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

struct Member {
  GlobalOp param, grad;
  int64_t offset = 0, numel = 0;
};

struct Bucket {
  SmallVector<Member> members;
  int64_t used = 0, size = 0; // elements: filled, and padded total
  bool paramSharded = false;  // stage 3: partitioned, gathered where used
  GlobalOp param, grad;
  /// Mixed precision's 16-bit working bucket (replicated), when |param| is
  /// the rank's float32 master shard (stages 1-3 on several ranks).
  GlobalOp copy;
  /// The param global holds this rank's shard only.
  bool masterSharded() const { return paramSharded || copy; }
  /// One stacked expert parameter whose shard is the rank's chunk, never
  /// gathered (expert parallelism, ExpertShards.h).
  bool expert = false;
};

struct ZeroPartitionPass : zcc::impl::ZeroPartitionBase<ZeroPartitionPass> {
  // The options with "auto" (-1) resolved for this module.
  int64_t reduceCap = 0, allgatherCap = 0, persistence = 0;
  using ZeroPartitionBase::ZeroPartitionBase;

  ModuleOp module;
  int64_t world = 1;
  /// How the ranks split the state (MiCS, hpZ) and the element type
  /// collectives move (comm-dtype; float32 by default).
  Mesh mesh;
  Type commType;

  Value zeros(OpBuilder &b, Location loc, int64_t n, Type elem = Type()) {
    elem = elem ? elem : b.getF32Type();
    auto t = RankedTensorType::get({n}, elem);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(t, b.getFloatAttr(elem, 0)));
  }

  /// A 1-D view of elements [offset, offset + n) of |flat|, reshaped to |type|.
  Value viewOf(OpBuilder &b, Location loc, Value flat, int64_t offset, RankedTensorType type) {
    int64_t n = type.getNumElements();
    Value s = SliceOp::create(b, loc, RankedTensorType::get({n}, type.getElementType()), flat,
                              b.getDenseI64ArrayAttr({offset}),
                              b.getDenseI64ArrayAttr({offset + n}), b.getDenseI64ArrayAttr({1}));
    return ReshapeOp::create(b, loc, type, s);
  }

  /// The trainable parameters that have gradients, in the order @micro_step
  /// first loads them.
  SmallVector<std::pair<GlobalOp, GlobalOp>> paramsInUseOrder(func::FuncOp micro) {
    SmallVector<std::pair<GlobalOp, GlobalOp>> params;
    DenseSet<Operation *> seen;
    micro.walk([&](LoadOp load) {
      auto g = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
      if (!g || !g.getTrainable() || !seen.insert(g).second)
        return;
      if (auto grad = module.lookupSymbol<GlobalOp>((g.getSymName() + ".grad").str()))
        params.push_back({g, grad});
    });
    return params;
  }

  SmallVector<Bucket> formBuckets(ArrayRef<std::pair<GlobalOp, GlobalOp>> params,
                                  const DenseSet<Operation *> &experts) {
    int64_t cap = reduceCap;
    if (stage == 1 || stage == 2)
      cap = std::min<int64_t>(cap, allgatherCap);
    SmallVector<Bucket> buckets;
    // The open bucket of each kind (replicated, partitioned).
    int open[2] = {-1, -1};
    for (auto [param, grad] : params) {
      int64_t n = param.getTensorType().getNumElements();
      if (experts.contains(param)) { // a bucket of its own, its chunks the experts'
        Bucket &bucket = buckets.emplace_back();
        bucket.paramSharded = bucket.expert = true;
        bucket.members.push_back({param, grad, 0, n});
        bucket.used = n;
        continue;
      }
      bool sharded = stage == 3 && n >= persistence;
      int &k = open[sharded];
      if (k < 0 || (buckets[k].used > 0 && buckets[k].used + alignUp(n, kAlign) > cap)) {
        buckets.emplace_back();
        buckets.back().paramSharded = sharded;
        k = buckets.size() - 1;
      }
      Bucket &bucket = buckets[k];
      bucket.members.push_back({param, grad, bucket.used, n});
      bucket.used += alignUp(n, kAlign);
    }
    for (Bucket &bucket : buckets)
      bucket.size =
          bucket.expert
              ? bucket.used
              : alignUp(bucket.used,
                        (quantizedWeights || quantizedGradients ? kQuantBlock : kAlign) * world);
    return buckets;
  }

  /// The type gradients accumulate in across micro-steps, given the 16-bit
  /// type |narrow| every gradient widens (null: a float32 model). As
  /// DeepSpeed's data_types.grad_accum_dtype: by default the model's 16-bit
  /// type, float32 for bf16 at stage 0 (its BF16_Optimizer) and for float32
  /// models.
  FailureOr<Type> accumulationType(Type narrow) {
    MLIRContext *ctx = &getContext();
    if (gradAccumDtype == "auto") {
      if (!narrow || (stage == 0 && narrow.isBF16()))
        return Type(Float32Type::get(ctx));
      return narrow;
    }
    if (gradAccumDtype == "fp32")
      return Type(Float32Type::get(ctx));
    Type t = gradAccumDtype == "bf16"   ? Type(BFloat16Type::get(ctx))
             : gradAccumDtype == "fp16" ? Type(Float16Type::get(ctx))
                                        : Type();
    if (!t) {
      module.emitError("zero-partition: grad-accum-dtype must be auto, fp32, bf16 or fp16, got '")
          << gradAccumDtype << "'";
      return failure();
    }
    if (t != narrow) {
      module.emitError("zero-partition: grad-accum-dtype ")
          << gradAccumDtype << " needs a model that trains in it (--precision " << gradAccumDtype
          << "); this one's gradients are " << (narrow ? "of another 16-bit type" : "float32")
          << ": use fp32 (or auto)";
      return failure();
    }
    return t;
  }

  /// Replaces the per-parameter accumulation `store(add(load @p.grad, g))` of
  /// @micro_step by one flat accumulation per bucket.
  LogicalResult rewriteGradients(func::FuncOp micro, MutableArrayRef<Bucket> buckets) {
    Block &block = micro.getBody().front();
    DenseMap<Operation *, Value> gradOf; // @p.grad global -> g
    SmallVector<Operation *> dead;
    for (Operation &op : block) {
      auto store = dyn_cast<StoreOp>(op);
      if (!store)
        continue;
      auto global = module.lookupSymbol<GlobalOp>(store.getGlobalAttr());
      if (!global || global.getRole() != GlobalRole::grad)
        continue;
      auto add = store.getValue().getDefiningOp<AddOp>();
      auto load = add ? add.getLhs().getDefiningOp<LoadOp>() : LoadOp();
      if (!load || load.getGlobalAttr() != store.getGlobalAttr() || !add->hasOneUse())
        return store.emitError("zero-partition: expected @micro_step to accumulate the gradient "
                               "as store(add(load @p.grad, g)) (run zero-autodiff first)");
      gradOf[global] = add.getRhs();
      dead.append({store, add, load});
    }
    // Mixed precision widens the 16-bit gradients where autodiff stored them
    // all, after the backward's last kernel: each widening moves up to its
    // input, so that a bucket is packed and reduce-scattered as soon as its
    // last gradient exists (overlapping the rest of the backward with
    // --overlap-comm), not every bucket at the end.
    for (auto &[global, g] : gradOf)
      if (auto cast = g.getDefiningOp<CastOp>())
        if (Operation *def = cast.getInput().getDefiningOp(); def && def->getBlock() == &block)
          cast->moveAfter(def);
    DenseMap<Operation *, int64_t> order = programOrder(block);
    OpBuilder b(&getContext());
    bool writesWholeGradients = gradAccumSteps(module) == 1 && (stage < 2 || world == 1);
    if (writesWholeGradients)
      zero::attrs(module).getGradientsWrittenAttrHelper().setAttr(module, b.getUnitAttr());
    // Every gradient the widening of one 16-bit value (mixed precision's
    // backward: the matmuls produce the 16-bit gradients of the 16-bit
    // weight copies): |narrow| is that type.
    Type narrow;
    for (auto &[global, g] : gradOf) {
      auto cast = g.getDefiningOp<CastOp>();
      Type from = cast ? cast.getInput().getType().getElementType() : Type();
      if (!cast || from.isF32() || !isa<FloatType>(from) || (narrow && narrow != from)) {
        narrow = Type();
        break;
      }
      narrow = from;
    }
    auto accum = accumulationType(narrow);
    if (failed(accum))
      return failure();
    bool reduced = stage >= 2 && world > 1;
    // What the bucket holds and what its pieces are packed in:
    // - a step's gradients written whole, all widenings of |narrow|: the
    //   16-bit values, exactly what a float32 bucket would hold, at half the
    //   memory and traffic (the concatenation writes them in place; AdamW
    //   reads them as they are, zero-optimizer);
    // - reduce-scattered in the backward (stages 2-3): packed in the comm
    //   type (widenings of it as they are, others rounded), the rank's
    //   shard accumulated in the accumulation type, or stored in the comm
    //   type when nothing accumulates;
    // - otherwise accumulated whole in the accumulation type (16-bit
    //   pieces packed as they are).
    Type bucketType = *accum, pieceType;
    if (writesWholeGradients && narrow) {
      bucketType = pieceType = narrow;
    } else if (reduced) {
      pieceType = commType;
      if (gradAccumSteps(module) == 1)
        bucketType = commType;
    } else {
      pieceType = *accum;
    }
    if (pieceType && pieceType.isF32())
      pieceType = Type();
    SmallVector<Operation *> expertDead; // the gathers of expert chunks' gradients
    for (Bucket &bucket : buckets) {
      if (bucket.expert) {
        Member &m = bucket.members.front();
        Value g = gradOf.lookup(m.grad);
        gradOf.erase(m.grad);
        if (failed(shardExpertGradient(m.param, g, bucket.grad, mesh, expertDead)))
          return failure();
        continue;
      }
      if (!bucketType.isF32()) {
        auto type = bucket.grad.getTensorType().clone(bucketType);
        bucket.grad.setType(type);
        bucket.grad.setInitialValueAttr(
            DenseElementsAttr::get(type, b.getFloatAttr(bucketType, 0.0)));
      }
      // After the last gradient of the bucket is computed.
      Operation *last = nullptr;
      for (Member &m : bucket.members)
        if (Value g = gradOf.lookup(m.grad))
          if (Operation *def = g.getDefiningOp())
            if (!last || order[def] > order[last])
              last = def;
      if (last)
        b.setInsertionPointAfter(last);
      else
        b.setInsertionPoint(block.getTerminator());
      Location loc = bucket.members.front().param.getLoc();
      SmallVector<Value> pieces;
      int64_t at = 0;
      for (Member &m : bucket.members) {
        if (m.offset > at)
          pieces.push_back(zeros(b, loc, m.offset - at, pieceType));
        Value g = gradOf.lookup(m.grad);
        if (g && pieceType) {
          auto widening = g.getDefiningOp<CastOp>();
          g = widening && widening.getInput().getType().getElementType() == pieceType
                  ? widening.getInput()
                  : Value(CastOp::create(b, loc,
                                         cast<RankedTensorType>(g.getType()).clone(pieceType), g));
        }
        auto flatType = RankedTensorType::get({m.numel}, pieceType ? pieceType : b.getF32Type());
        pieces.push_back(g ? Value(ReshapeOp::create(b, loc, flatType, g))
                           : zeros(b, loc, m.numel, pieceType));
        at = m.offset + m.numel;
      }
      if (bucket.size > at)
        pieces.push_back(zeros(b, loc, bucket.size - at, pieceType));
      Value flat =
          pieces.size() == 1 ? pieces.front() : Value(ConcatOp::create(b, loc, pieces, /*axis=*/0));
      if (reduced)
        flat = averageOverRanks(b, loc, flat, bucket.grad.getTensorType().getNumElements(), mesh,
                                bucketType);
      else if (cast<RankedTensorType>(flat.getType()).getElementType() != bucketType)
        flat = CastOp::create(b, loc, bucket.grad.getTensorType(), flat);
      auto sym = FlatSymbolRefAttr::get(bucket.grad.getSymNameAttr());
      // One micro-step per step and no reduce-scatter to overlap: the
      // gradients are written, not added to zeros (zero-optimizer then
      // clears nothing; the memory planner lets the concatenation write
      // into the bucket). zero-schedule overlaps a reduce-scatter with the
      // backward by sinking its wait and accumulation: that form stays.
      if (writesWholeGradients) {
        StoreOp::create(b, loc, flat, sym);
        continue;
      }
      Value acc = LoadOp::create(b, loc, bucket.grad.getType(), sym);
      StoreOp::create(b, loc, AddOp::create(b, loc, acc, flat), sym);
    }
    for (Operation *op : dead)
      op->erase();
    for (Operation *op : expertDead) // last use first
      if (op->use_empty())
        op->erase();
    // The widenings a 16-bit bucket or reduce-scatter does without.
    if (pieceType)
      for (auto &[global, g] : gradOf)
        if (Operation *cast = g.getDefiningOp(); cast && cast->use_empty())
          cast->erase();
    return success();
  }

  /// Stage 3, @micro_step: a forward value computed from a partitioned
  /// parameter alone by pure one-operand ops (mixed precision's cast to 16
  /// bits, a transpose) that the backward reads again is recomputed there,
  /// before its first backward use, from the parameter: the backward then
  /// gathers the parameter again (ZeRO-3) instead of keeping the forward's
  /// copy alive from the forward to the backward. As DeepSpeed's
  /// stage3_max_reuse_distance, a copy whose backward use comes within
  /// |maxReuseDistance| elements of other parameters' uses stays.
  void recomputeParameterCopies(Block &block, Operation *boundary,
                                const DenseSet<Operation *> &partitioned) {
    DenseMap<Operation *, int64_t> order = programOrder(block);
    int64_t limit = order[boundary];
    DenseMap<Value, GlobalOp> paramOf; // forward values of a partitioned parameter alone
    SmallVector<Operation *> copies;
    for (Operation &op : block) {
      if (order[&op] > limit)
        break;
      if (auto load = dyn_cast<LoadOp>(op)) {
        if (auto g = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
            g && partitioned.contains(g))
          paramOf[load.getResult()] = g;
        continue;
      }
      if (op.getNumOperands() == 1 && op.getNumResults() == 1 && op.getNumRegions() == 0 &&
          isMemoryEffectFree(&op) && paramOf.count(op.getOperand(0))) {
        paramOf[op.getResult(0)] = paramOf.lookup(op.getOperand(0));
        copies.push_back(&op);
      }
    }
    // Each parameter's first use on either side: where its elements are
    // used, for the reuse distance.
    DenseMap<Operation *, std::pair<int64_t, int64_t>> firstUse; // param -> (forward, backward)
    for (auto &[value, param] : paramOf)
      for (Operation *user : value.getUsers()) {
        if (user->getNumResults() == 1 && paramOf.count(user->getResult(0)) && order[user] <= limit)
          continue; // a copy: its own uses count
        auto [it, _] = firstUse.try_emplace(param, INT64_MAX, INT64_MAX);
        int64_t at = order[user];
        int64_t &first = at > limit ? it->second.second : it->second.first;
        first = std::min(first, at);
      }
    SmallVector<std::pair<int64_t, int64_t>> events; // (position, elements)
    for (auto &[param, at] : firstUse)
      for (int64_t pos : {at.first, at.second})
        if (pos != INT64_MAX)
          events.push_back({pos, cast<GlobalOp>(param).getTensorType().getNumElements()});
    llvm::sort(events);
    auto usedBetween = [&](int64_t from, int64_t to, GlobalOp self) {
      int64_t n = 0;
      for (auto [pos, elements] : events)
        if (pos > from && pos < to)
          n += elements;
      // (this parameter's own uses do not count)
      auto at = firstUse.lookup(self);
      for (int64_t pos : {at.first, at.second})
        if (pos > from && pos < to && pos != INT64_MAX)
          n -= self.getTensorType().getNumElements();
      return n;
    };
    int64_t distance = maxReuseDistance < 0 ? 1000000000 : maxReuseDistance.getValue();
    OpBuilder b(&getContext());
    for (Operation *op : copies) {
      SmallVector<OpOperand *> later;
      for (OpOperand &use : op->getResult(0).getUses())
        if (order.lookup(use.getOwner()) > limit)
          later.push_back(&use);
      if (later.empty())
        continue;
      Operation *first = later.front()->getOwner();
      for (OpOperand *use : later)
        if (order[use->getOwner()] < order[first])
          first = use->getOwner();
      if (usedBetween(order[op], order[first], paramOf.lookup(op->getResult(0))) < distance)
        continue; // reused soon enough: kept
      // The chain from the load, cloned in order before |first|.
      SmallVector<Operation *> chain{op};
      while (!isa<LoadOp>(chain.back()->getOperand(0).getDefiningOp()))
        chain.push_back(chain.back()->getOperand(0).getDefiningOp());
      b.setInsertionPoint(first);
      IRMapping map;
      Operation *clone = nullptr;
      for (Operation *link : llvm::reverse(chain))
        clone = b.clone(*link, map);
      for (OpOperand *use : later)
        use->set(clone->getResult(0));
    }
  }

  /// Mixed precision: the 16-bit type that every load of |bucket|'s members
  /// in |funcs| is cast to (and only cast to), or null.
  Type workingType(Bucket &bucket, ArrayRef<func::FuncOp> funcs) {
    DenseSet<Operation *> members;
    for (Member &m : bucket.members)
      members.insert(m.param);
    Type half;
    bool mixed = true;
    for (func::FuncOp func : funcs)
      func.walk([&](LoadOp load) {
        auto g = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
        if (!g || !members.contains(g))
          return;
        for (Operation *user : load->getUsers()) {
          auto c = dyn_cast<CastOp>(user);
          Type to = c ? c.getType().getElementType() : Type();
          if (!to || !(to.isBF16() || to.isF16()) || (half && half != to))
            mixed = false;
          else
            half = to;
        }
      });
    return mixed ? half : Type();
  }

  /// The loads of |bucket|'s members in |func| (straight-line: program
  /// order), each with its member.
  SmallVector<std::pair<LoadOp, Member *>> memberLoads(func::FuncOp func, Bucket &bucket) {
    DenseMap<Operation *, Member *> memberOf;
    for (Member &m : bucket.members)
      memberOf[m.param] = &m;
    SmallVector<std::pair<LoadOp, Member *>> loads;
    func.walk([&](LoadOp load) {
      if (auto g = module.lookupSymbol<GlobalOp>(load.getGlobalAttr()))
        if (Member *m = memberOf.lookup(g))
          loads.push_back({load, m});
    });
    return loads;
  }

  /// Mixed precision with sharded masters: the casts of members to 16 bits
  /// in |func| become views of the bucket's working copy.
  void readWorkingCopies(func::FuncOp func, MutableArrayRef<Bucket> buckets) {
    OpBuilder b(&getContext());
    for (Bucket &bucket : buckets) {
      if (!bucket.copy)
        continue;
      for (auto [load, m] : memberLoads(func, bucket)) {
        for (Operation *user : llvm::make_early_inc_range(load->getUsers())) {
          auto c = cast<CastOp>(user);
          b.setInsertionPoint(c);
          Value flat = LoadOp::create(b, c.getLoc(), bucket.copy.getType(),
                                      FlatSymbolRefAttr::get(bucket.copy.getSymNameAttr()));
          c.getResult().replaceAllUsesWith(viewOf(b, c.getLoc(), flat, m->offset, c.getType()));
          c.erase();
        }
        load.erase();
      }
    }
  }

  /// Stage 3: the members of partitioned buckets become views of an
  /// all-gather placed before their first forward use and another before
  /// their first backward use (ops after |boundary|).
  void gatherPartitioned(func::FuncOp func, MutableArrayRef<Bucket> buckets, Operation *boundary,
                         DenseSet<Operation *> *gatheredInBackward = nullptr) {
    Block &block = func.getBody().front();
    DenseMap<Operation *, int64_t> order = programOrder(block);
    int64_t limit = boundary ? order[boundary] : INT64_MAX;
    OpBuilder b(&getContext());
    for (Bucket &bucket : buckets) {
      if (!bucket.paramSharded || bucket.expert)
        continue;
      SmallVector<std::pair<LoadOp, Member *>> loads = memberLoads(func, bucket);
      if (loads.empty())
        continue;
      // The first use on each side of the boundary.
      Operation *firsts[2] = {nullptr, nullptr};
      for (auto [load, m] : loads)
        for (Operation *user : load->getUsers()) {
          Operation *&first = firsts[order[user] > limit];
          if (!first || order[user] < order[first])
            first = user;
        }
      // A 16-bit comm type: the shard rounded, gathered, viewed in it.
      Type elem = world > 1 && mesh.narrow() ? commType : b.getF32Type();
      CommGroup shardGroup = mesh.shardGroup();
      // hpZ: the forward keeps the gathered bucket's chunk of this rank's
      // group (in the gathered type), and the backward gathers it back
      // inside the group.
      Value secondary;
      for (int side = 0; side < 2; ++side) {
        Operation *first = firsts[side];
        if (!first)
          continue;
        if (side == 1 && gatheredInBackward)
          gatheredInBackward->insert(bucket.param);
        b.setInsertionPoint(first);
        Location loc = first->getLoc();
        auto fullType = RankedTensorType::get({bucket.size}, elem);
        Value flat;
        if (secondary) {
          flat = AllGatherOp::create(b, loc, fullType, secondary, mesh.ranks(CommGroup::group),
                                     /*async=*/false, CommGroup::group);
        } else {
          flat = LoadOp::create(b, loc, bucket.param.getType(),
                                FlatSymbolRefAttr::get(bucket.param.getSymNameAttr()));
          if (world > 1 && quantizedWeights) {
            // qwZ: the shard's int8 values and its blocks' scales gathered,
            // dequantized into the gathered type.
            int64_t ranks = mesh.ranks(shardGroup), shard = bucket.size / ranks;
            auto quantized = QuantizeOp::create(
                b, loc, RankedTensorType::get({shard}, b.getI8Type()),
                RankedTensorType::get({shard / kQuantBlock}, b.getF32Type()), flat, kQuantBlock,
                /*bits=*/8, /*chunks=*/nullptr);
            Value values =
                AllGatherOp::create(b, loc, RankedTensorType::get({bucket.size}, b.getI8Type()),
                                    quantized.getValues(), ranks, /*async=*/false, shardGroup);
            Value scales = AllGatherOp::create(
                b, loc, RankedTensorType::get({bucket.size / kQuantBlock}, b.getF32Type()),
                quantized.getScales(), ranks, /*async=*/false, shardGroup);
            flat = DequantizeOp::create(b, loc, fullType, values, scales, kQuantBlock);
          } else if (world > 1) {
            int64_t ranks = mesh.ranks(shardGroup);
            if (elem != cast<RankedTensorType>(flat.getType()).getElementType())
              flat =
                  CastOp::create(b, loc, RankedTensorType::get({bucket.size / ranks}, elem), flat);
            flat = AllGatherOp::create(b, loc, fullType, flat, ranks, /*async=*/false, shardGroup);
          }
          if (side == 0 && mesh.hpz && firsts[1] && gatheredInBackward) {
            int64_t ranks = mesh.ranks(CommGroup::group);
            secondary =
                LocalShardOp::create(b, loc, RankedTensorType::get({bucket.size / ranks}, elem),
                                     flat, ranks, CommGroup::group);
          }
        }
        for (auto [load, m] : loads) {
          Value view, wide;
          for (OpOperand &use : llvm::make_early_inc_range(load->getUses())) {
            bool backward = order[use.getOwner()] > limit;
            if (backward != (side == 1))
              continue;
            if (!view)
              view = viewOf(b, loc, flat, m->offset, m->param.getTensorType().clone(elem));
            // A cast to the gathered type reads the view; other uses, and
            // every use of a float32 gather, the float32 parameter.
            auto cast = dyn_cast<CastOp>(use.getOwner());
            if (cast && cast.getType() == view.getType()) {
              cast.getResult().replaceAllUsesWith(view);
              continue; // the cast dies below, with the load
            }
            if (view.getType() == load.getType()) {
              use.set(view);
              continue;
            }
            if (!wide)
              wide = CastOp::create(b, loc, load.getType(), view);
            use.set(wide);
          }
        }
      }
      for (auto [load, m] : loads) {
        // Casts whose results now read a 16-bit view.
        for (Operation *user : llvm::make_early_inc_range(load->getUsers()))
          if (isa<CastOp>(user) && user->use_empty())
            user->erase();
        load.erase();
      }
    }
  }

  void runOnOperation() override {
    module = getOperation();
    world = worldSize;
    if (stage < 0 || stage > 3 || world < 1) {
      module.emitError("zero-partition: stage must be 0-3 and world-size >= 1, got stage ")
          << stage << ", world size " << world;
      return signalPassFailure();
    }
    // The mesh: MiCS / HSDP shards the state over groups of consecutive
    // ranks; hpZ keeps stage 3's backward gathers inside them.
    mesh.world = mesh.shards = world;
    auto groupOk = [&](int64_t g) { return g >= 2 && g < world && world % g == 0; };
    if (micsShardSize != 0 && hpzPartitionSize != 0) {
      module.emitError("zero-partition: mics-shard-size and hpz-partition-size exclude each "
                       "other (as in DeepSpeed)");
      return signalPassFailure();
    }
    if (micsShardSize != 0) {
      if (stage < 1 || !groupOk(micsShardSize)) {
        module.emitError("zero-partition: mics-shard-size ")
            << micsShardSize << " needs ZeRO stage 1-3 (got " << stage
            << ") and a group of at least 2 ranks that divides world-size " << world
            << " and is smaller than it";
        return signalPassFailure();
      }
      mesh.groupSize = mesh.shards = micsShardSize;
    }
    if (quantizedWeights && stage != 3) {
      module.emitError("zero-partition: quantized-weights (qwZ) quantizes stage 3's parameter "
                       "gathers; got stage ")
          << stage;
      return signalPassFailure();
    }
    if (quantizedGradients && stage < 1) {
      module.emitError("zero-partition: quantized-gradients (qgZ) quantizes the gradient "
                       "reduce-scatters of stages 1-3; got stage ")
          << stage;
      return signalPassFailure();
    }
    if (quantizedGradientBits != 8 && quantizedGradientBits != 4) {
      module.emitError("zero-partition: quantized-gradient-bits must be 8 or 4, got ")
          << quantizedGradientBits;
      return signalPassFailure();
    }
    mesh.quantizedGradients = quantizedGradients;
    mesh.gradientBits = quantizedGradientBits;
    if (hpzPartitionSize != 0) {
      if (stage != 3 || !groupOk(hpzPartitionSize)) {
        module.emitError("zero-partition: hpz-partition-size ")
            << hpzPartitionSize << " needs ZeRO stage 3 (got " << stage
            << ") and a group of at least 2 ranks that divides world-size " << world
            << " and is smaller than it";
        return signalPassFailure();
      }
      mesh.groupSize = hpzPartitionSize;
      mesh.hpz = true;
    }
    if (commDtype == "fp32") {
      commType = Float32Type::get(&getContext());
    } else if (commDtype == "bf16") {
      commType = BFloat16Type::get(&getContext());
    } else if (commDtype == "fp16") {
      commType = Float16Type::get(&getContext());
    } else {
      module.emitError("zero-partition: comm-dtype must be fp32, bf16 or fp16, got '")
          << commDtype << "'";
      return signalPassFailure();
    }
    mesh.commType = commType;
    // -1: DeepSpeed's "auto", from the model's hidden size H (H^2 per
    // bucket, 10 H for the persistence threshold).
    reduceCap = autoSize(reduceBucketSize, module, 1.0, 0);
    allgatherCap = autoSize(allgatherBucketSize, module, 1.0, 0);
    persistence = autoSize(persistenceThreshold, module, 0, 10.0);
    if (reduceBucketSize == 0 || allgatherBucketSize == 0 || reduceBucketSize < -1 ||
        allgatherBucketSize < -1 || persistenceThreshold < -1) {
      module.emitError("zero-partition: bucket sizes must be >= 1 and the persistence "
                       "threshold >= 0 (or -1: auto, from the hidden size)");
      return signalPassFailure();
    }
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!micro || !forward) {
      module.emitError("zero-partition: needs @forward and @micro_step (run zero-autodiff)");
      return signalPassFailure();
    }
    if (module.lookupSymbol<func::FuncOp>("apply")) {
      module.emitError("zero-partition runs before zero-optimizer");
      return signalPassFailure();
    }
    auto params = paramsInUseOrder(micro);
    for (auto [p, g] : params)
      if (!p.getTensorType().getElementType().isF32()) {
        p.emitError("zero-partition: trainable parameters must be float32 (mixed precision "
                    "keeps float32 masters), got ")
            << p.getType();
        return signalPassFailure();
      }
    DenseSet<Operation *> experts; // expert parallelism's chunks (ExpertShards.h)
    if (stage >= 1)
      experts = expertParameters(params, {forward, micro}, mesh, kAlign);
    SmallVector<Bucket> buckets = formBuckets(params, experts);

    // The bucket globals, after the last global.
    OpBuilder b(&getContext());
    Operation *lastGlobal = nullptr;
    for (auto g : module.getOps<GlobalOp>())
      lastGlobal = g;
    b.setInsertionPointAfter(lastGlobal);
    auto f32 = b.getF32Type();
    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      std::string name = (zero::ZeroDialect::getDialectNamespace() + ".bucket" + Twine(k)).str();
      Location loc = bucket.members.front().param.getLoc();
      int64_t shard = bucket.size / mesh.shards;
      // Mixed precision with the state sharded: the float32 masters are
      // sharded as a stage-3 bucket's are, beside a 16-bit working copy of
      // the whole bucket.
      Type half;
      if (!bucket.paramSharded && stage >= 1 && mesh.shards > 1)
        half = workingType(bucket, {forward, micro});
      if (bucket.paramSharded || half) {
        SmallVector<std::pair<GlobalOp, int64_t>> members;
        for (Member &m : bucket.members)
          members.push_back({m.param, m.offset});
        auto init = packBucketInitialValue(members, bucket.size, name);
        if (failed(init))
          return signalPassFailure();
        bucket.param = GlobalOp::create(b, loc, name, GlobalRole::param, /*trainable=*/false,
                                        RankedTensorType::get({shard}, f32), *init);
        bucket.param.setShardOfAttr(b.getI64IntegerAttr(bucket.size));
        if (half) { // zeros until the refresh program writes it (zero-optimizer)
          auto type = RankedTensorType::get({bucket.size}, half);
          bucket.copy = GlobalOp::create(b, loc, name + ".copy", GlobalRole::param_copy,
                                         /*trainable=*/false, type,
                                         DenseElementsAttr::get(type, b.getFloatAttr(half, 0)));
        }
      } else {
        auto type = RankedTensorType::get({bucket.size}, f32);
        bucket.param = GlobalOp::create(b, loc, name, GlobalRole::param, /*trainable=*/false, type,
                                        DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
        for (Member &m : bucket.members) {
          m.param.setBucketAttr(FlatSymbolRefAttr::get(bucket.param.getSymNameAttr()));
          m.param.setBucketOffsetAttr(b.getI64IntegerAttr(m.offset));
        }
      }
      auto gradType =
          RankedTensorType::get({stage >= 2 || bucket.expert ? shard : bucket.size}, f32);
      bucket.grad = GlobalOp::create(b, loc, name + ".grad", GlobalRole::grad,
                                     /*trainable=*/false, gradType,
                                     DenseElementsAttr::get(gradType, b.getF32FloatAttr(0)));
    }

    if (failed(rewriteGradients(micro, buckets)))
      return signalPassFailure();
    // The loss is the last forward value of @micro_step.
    auto ret = cast<func::ReturnOp>(micro.getBody().front().getTerminator());
    Operation *boundary = ret.getOperand(0).getDefiningOp();
    gatherPartitioned(forward, buckets, nullptr);
    DenseSet<Operation *> partitioned, gatheredInBackward;
    for (Bucket &bucket : buckets)
      if (bucket.paramSharded && !bucket.expert)
        for (Member &m : bucket.members)
          partitioned.insert(m.param);
    recomputeParameterCopies(micro.getBody().front(), boundary, partitioned);
    gatherPartitioned(micro, buckets, boundary, &gatheredInBackward);
    readWorkingCopies(forward, buckets);
    readWorkingCopies(micro, buckets);
    for (func::FuncOp func : {forward, micro}) // expert buckets: the chunk is the shard
      for (Bucket &bucket : buckets)
        if (bucket.expert)
          for (auto [load, m] : memberLoads(func, bucket))
            readExpertShard(load, bucket.param);

    // The per-parameter gradient globals, and the partitioned parameters,
    // are gone.
    SmallVector<Attribute> described;
    for (Bucket &bucket : buckets) {
      SmallVector<Attribute> members;
      for (Member &m : bucket.members)
        members.push_back(zero::BucketMemberAttr::get(b.getContext(), m.param.getSymNameAttr(),
                                                      m.offset, m.param.getType()));
      // The param global holds this rank's shard (a stage-3 partition, or
      // sharded masters beside the 16-bit working copy zero-optimizer
      // writes); stage 3: whether the backward reads (and gathers again)
      // the bucket.
      described.push_back(zero::BucketAttr::get(
          b.getContext(), b.getArrayAttr(members),
          FlatSymbolRefAttr::get(bucket.param.getSymNameAttr()),
          FlatSymbolRefAttr::get(bucket.grad.getSymNameAttr()), bucket.size, bucket.masterSharded(),
          stage >= 2 || bucket.expert, gatheredInBackward.contains(bucket.param),
          bucket.copy ? FlatSymbolRefAttr::get(bucket.copy.getSymNameAttr())
                      : FlatSymbolRefAttr()));
      for (Member &m : bucket.members) {
        m.grad.erase();
        if (bucket.masterSharded())
          m.param.erase();
      }
    }
    zero::attrs(module).getPartitionAttrHelper().setAttr(
        module,
        zero::PartitionAttr::get(b.getContext(), stage, world, reduceCap, allgatherCap, persistence,
                                 commType, mesh.groupSize, mesh.shards, mesh.hpz, quantizedWeights,
                                 quantizedGradients, quantizedGradientBits));
    zero::attrs(module).getBucketsAttrHelper().setAttr(module, b.getArrayAttr(described));
  }
};

} // namespace
