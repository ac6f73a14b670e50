//===- Mesh.cpp - how the ZeRO passes split the data-parallel ranks -------===//
#include "zcc/Transforms/Mesh.h"

using namespace mlir;
using namespace zcc;
using namespace zcc::zero;

FailureOr<Mesh> Mesh::of(ModuleOp module) {
  Mesh mesh;
  mesh.commType = Float32Type::get(module.getContext());
  auto partition = module->getAttrOfType<DictionaryAttr>("zero.partition");
  if (!partition)
    return mesh;
  auto world = partition.getAs<IntegerAttr>("world_size");
  if (!world || world.getInt() < 1)
    return module.emitError("zero.partition without a world size"), failure();
  mesh.world = mesh.shards = world.getInt();
  if (auto g = partition.getAs<IntegerAttr>("group_size"))
    mesh.groupSize = g.getInt();
  if (auto s = partition.getAs<IntegerAttr>("state_shards"))
    mesh.shards = s.getInt();
  if (auto h = partition.getAs<BoolAttr>("hpz"))
    mesh.hpz = h.getValue();
  if (auto t = partition.getAs<TypeAttr>("comm_type"))
    mesh.commType = t.getValue();
  bool grouped = mesh.replicated() || mesh.hpz;
  if (mesh.groupSize < 0 || (mesh.groupSize && mesh.world % mesh.groupSize) ||
      (grouped && !mesh.groupSize) || (mesh.shards != mesh.world && mesh.shards != mesh.groupSize))
    return module.emitError("zero.partition: a malformed mesh (world size ")
               << mesh.world << ", groups of " << mesh.groupSize << ", state over " << mesh.shards
               << " ranks)",
           failure();
  return mesh;
}

Value zcc::averageOverRanks(OpBuilder &b, Location loc, Value grad, int64_t shardElements,
                            const Mesh &mesh) {
  auto type = cast<RankedTensorType>(grad.getType());
  Type f32 = b.getF32Type();
  Type elem = mesh.narrow() ? mesh.commType : type.getElementType();
  if (elem != type.getElementType())
    grad = CastOp::create(b, loc, type.clone(elem), grad);
  if (shardElements == 0) {
    grad = AllReduceOp::create(b, loc, grad, CollectiveReduce::avg, mesh.world);
  } else {
    CommGroup shardGroup = mesh.shardGroup();
    grad = ReduceScatterOp::create(b, loc, RankedTensorType::get({shardElements}, elem), grad,
                                   CollectiveReduce::avg, mesh.ranks(shardGroup),
                                   /*async=*/false, shardGroup);
    // MiCS / HSDP: each group's shard is one replica of it; the average of
    // the groups' averages is the average over every rank.
    if (mesh.replicated())
      grad = AllReduceOp::create(b, loc, grad, CollectiveReduce::avg, mesh.ranks(CommGroup::across),
                                 /*async=*/false, CommGroup::across);
  }
  auto result = cast<RankedTensorType>(grad.getType());
  if (!result.getElementType().isF32())
    grad = CastOp::create(b, loc, result.clone(f32), grad);
  return grad;
}
