//===- Mesh.cpp - how the ZeRO passes split the data-parallel ranks -------===//
#include "zcc/Transforms/Mesh.h"

using namespace mlir;
using namespace zcc;
using namespace zcc::zero;

FailureOr<Mesh> Mesh::of(ModuleOp module) {
  Mesh mesh;
  mesh.commType = Float32Type::get(module.getContext());
  auto partition = zero::attrs(module).getPartitionAttrHelper().getAttr(module);
  if (!partition)
    return mesh;
  if (partition.getWorldSize() < 1)
    return module.emitError("zero.partition without a world size"), failure();
  mesh.world = partition.getWorldSize();
  mesh.groupSize = partition.getGroupSize();
  mesh.shards = partition.getStateShards();
  mesh.hpz = partition.getHpz();
  mesh.quantizedGradients = partition.getQuantizedGradients();
  mesh.gradientBits = partition.getQuantizedGradientBits();
  mesh.commType = partition.getCommType();
  bool grouped = mesh.replicated() || mesh.hpz;
  if (mesh.groupSize < 0 || (mesh.groupSize && mesh.world % mesh.groupSize) ||
      (grouped && !mesh.groupSize) || (mesh.shards != mesh.world && mesh.shards != mesh.groupSize))
    return module.emitError("zero.partition: a malformed mesh (world size ")
               << mesh.world << ", groups of " << mesh.groupSize << ", state over " << mesh.shards
               << " ranks)",
           failure();
  return mesh;
}

/// One level of qgZ: |grad| (1-D, |ranks| chunks) quantized, its values and
/// scales exchanged by all-to-alls over |group|, and the chunks this rank
/// received averaged in float32 (zero.dequantize with parts).
static Value quantizedAverage(OpBuilder &b, Location loc, Value grad, int64_t ranks,
                              CommGroup group, int64_t bits, DenseI64ArrayAttr chunks = {}) {
  int64_t n = cast<RankedTensorType>(grad.getType()).getNumElements();
  auto q = QuantizeOp::create(b, loc, RankedTensorType::get({n * bits / 8}, b.getI8Type()),
                              RankedTensorType::get({n / kQuantBlock}, b.getF32Type()), grad,
                              kQuantBlock, bits, chunks);
  Value values = AllToAllOp::create(b, loc, q.getValues(), ranks, /*async=*/false, group);
  Value scales = AllToAllOp::create(b, loc, q.getScales(), ranks, /*async=*/false, group);
  return DequantizeOp::create(b, loc, RankedTensorType::get({n / ranks}, b.getF32Type()), values,
                              scales, kQuantBlock, ranks, /*average=*/true, bits);
}

/// qgZ's reduce-scatter of |grad| to this rank's shard (see averageOverRanks).
static Value quantizedReduceScatter(OpBuilder &b, Location loc, Value grad, const Mesh &mesh) {
  CommGroup shardGroup = mesh.shardGroup();
  // Plain or MiCS: one level over the ranks that split the state.
  if (mesh.replicated() || !mesh.groupSize)
    return quantizedAverage(b, loc, grad, mesh.ranks(shardGroup), shardGroup, mesh.gradientBits);
  // A mesh of A groups of G (hpZ): rank a * G + g keeps chunk a * G + g.
  // Quantized with the chunks reordered as [G][A] (chunk a * G + g at
  // g * A + a: zero.quantize's chunks, read in place), the group all-to-all
  // hands local rank g its A chunks averaged over the group, and the across
  // all-to-all hands group a its own chunk of those.
  int64_t groups = mesh.ranks(CommGroup::across), perGroup = mesh.groupSize;
  Value inGroup = quantizedAverage(b, loc, grad, perGroup, CommGroup::group, mesh.gradientBits,
                                   b.getDenseI64ArrayAttr({groups, perGroup}));
  return quantizedAverage(b, loc, inGroup, groups, CommGroup::across, mesh.gradientBits);
}

Value zcc::averageOverRanks(OpBuilder &b, Location loc, Value grad, int64_t shardElements,
                            const Mesh &mesh, Type resultType) {
  auto type = cast<RankedTensorType>(grad.getType());
  Type f32 = resultType ? resultType : b.getF32Type();
  if (mesh.quantizedGradients && shardElements > 0 && shardElements % kQuantBlock == 0) {
    grad = quantizedReduceScatter(b, loc, grad, mesh);
    // MiCS / HSDP: the group's average all-reduced across the groups.
    if (mesh.replicated()) {
      if (mesh.narrow())
        grad = CastOp::create(b, loc, RankedTensorType::get({shardElements}, mesh.commType), grad);
      grad = AllReduceOp::create(b, loc, grad, CollectiveReduce::avg, mesh.ranks(CommGroup::across),
                                 /*async=*/false, CommGroup::across);
      if (mesh.narrow())
        grad = CastOp::create(b, loc, RankedTensorType::get({shardElements}, b.getF32Type()), grad);
    }
    if (!cast<RankedTensorType>(grad.getType()).getElementType().isF32() || !f32.isF32())
      grad = CastOp::create(b, loc, RankedTensorType::get({shardElements}, f32), grad);
    return grad;
  }
  Type elem = mesh.commType ? mesh.commType : Type(b.getF32Type());
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
  if (result.getElementType() != f32)
    grad = CastOp::create(b, loc, result.clone(f32), grad);
  return grad;
}
