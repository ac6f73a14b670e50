//===- ExpertShards.cpp - expert parallelism's state in zero-partition ----===//
//
// See ExpertShards.h.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/ExpertShards.h"

#include "mlir/IR/Builders.h"

#include <functional>

using namespace mlir;
using namespace zcc;
using namespace zcc::zero;

DenseSet<Operation *> zcc::expertParameters(ArrayRef<std::pair<GlobalOp, GlobalOp>> params,
                                            ArrayRef<func::FuncOp> funcs, const Mesh &mesh,
                                            int64_t align) {
  DenseSet<Operation *> found;
  const int64_t ranks = mesh.shards;
  const CommGroup group = mesh.shardGroup();
  if (ranks < 2 || params.empty())
    return found;
  DenseSet<Operation *> candidates;
  for (auto [param, grad] : params)
    if (param.getTensorType().getNumElements() % (ranks * align) == 0)
      candidates.insert(param);
  // Whether every use of |v| ends in a local_shard over the state's ranks.
  std::function<bool(Value)> onlyChunks = [&](Value v) {
    if (v.use_empty())
      return false;
    for (Operation *user : v.getUsers()) {
      if (auto l = dyn_cast<LocalShardOp>(user)) {
        if (l.getWorldSize() != ranks || l.getGroup() != group)
          return false;
        continue;
      }
      if (!isa<CastOp, ReshapeOp>(user) || !onlyChunks(user->getResult(0)))
        return false;
    }
    return true;
  };
  auto module = params.front().first->getParentOfType<ModuleOp>();
  DenseMap<Operation *, bool> chunksOnly; // every load so far
  for (func::FuncOp func : funcs)
    func.walk([&](LoadOp load) {
      auto g = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
      if (!g || !candidates.contains(g))
        return;
      bool chunks = onlyChunks(load.getResult());
      auto [it, first] = chunksOnly.try_emplace(g, chunks);
      if (!first)
        it->second = it->second && chunks;
    });
  for (auto &[g, yes] : chunksOnly)
    if (yes)
      found.insert(g);
  return found;
}

LogicalResult zcc::shardExpertGradient(GlobalOp param, Value g, GlobalOp grad, const Mesh &mesh,
                                       SmallVectorImpl<Operation *> &dead) {
  Value v = g;
  auto widening = v ? v.getDefiningOp<CastOp>() : CastOp();
  if (widening)
    v = widening.getInput();
  auto reshape = v ? v.getDefiningOp<ReshapeOp>() : ReshapeOp();
  auto mul = reshape ? reshape.getInput().getDefiningOp<MulOp>() : MulOp();
  AllGatherOp gather;
  if (mul)
    for (Value operand : mul->getOperands())
      if (auto a = operand.getDefiningOp<AllGatherOp>())
        gather = a;
  if (!gather)
    return param.emitError("zero-partition: expert-parallel parameter ")
           << param.getSymName()
           << ": expected its gradient to be the all-gather of its chunks' (zero-autodiff's "
              "rule for local_shard)";
  OpBuilder b(g.getContext());
  b.setInsertionPointAfter(g.getDefiningOp());
  Location loc = param.getLoc();
  Value chunk = gather.getInput();
  auto chunkType = cast<RankedTensorType>(chunk.getType());
  auto f32 = b.getF32Type();
  if (!chunkType.getElementType().isF32())
    chunk = CastOp::create(b, loc, chunkType.clone(f32), chunk);
  Value inv = ConstantOp::create(b, loc,
                                 DenseElementsAttr::get(RankedTensorType::get({}, f32),
                                                        b.getF32FloatAttr(1.0f / mesh.shards)));
  chunk = MulOp::create(b, loc, chunk, inv);
  if (mesh.replicated()) // MiCS: the ranks that hold the same experts
    chunk = AllReduceOp::create(b, loc, chunk, CollectiveReduce::avg, mesh.ranks(CommGroup::across),
                                /*async=*/false, CommGroup::across);
  Type elem = grad.getTensorType().getElementType();
  if (elem != f32)
    chunk = CastOp::create(b, loc, chunkType.clone(elem), chunk);
  auto sym = FlatSymbolRefAttr::get(grad.getSymNameAttr());
  auto module = param->getParentOfType<ModuleOp>();
  if (zero::attrs(module).getGradientsWrittenAttrHelper().isAttrPresent(module)) {
    StoreOp::create(b, loc, chunk, sym); // one micro-step: nothing clears the bucket
  } else {
    Value acc = LoadOp::create(b, loc, grad.getType(), sym);
    StoreOp::create(b, loc, AddOp::create(b, loc, acc, chunk), sym);
  }
  if (widening)
    dead.push_back(widening);
  dead.append({reshape, mul, gather});
  return success();
}

void zcc::readExpertShard(LoadOp load, GlobalOp shard) {
  SmallVector<Operation *> chain, chunks; // the casts and reshapes, the local_shards
  SmallVector<Value> work{load.getResult()};
  while (!work.empty())
    for (Operation *user : work.pop_back_val().getUsers()) {
      (isa<LocalShardOp>(user) ? chunks : chain).push_back(user);
      if (!isa<LocalShardOp>(user))
        work.push_back(user->getResult(0));
    }
  OpBuilder b(load.getContext());
  for (Operation *l : chunks) {
    b.setInsertionPoint(l);
    Value mine = LoadOp::create(b, l->getLoc(), shard.getType(),
                                FlatSymbolRefAttr::get(shard.getSymNameAttr()));
    auto type = cast<RankedTensorType>(l->getResult(0).getType());
    if (type != mine.getType())
      mine = CastOp::create(b, l->getLoc(), type, mine);
    l->getResult(0).replaceAllUsesWith(mine);
    l->erase();
  }
  for (Operation *op : llvm::reverse(chain))
    if (op->use_empty())
      op->erase();
  load.erase();
}
