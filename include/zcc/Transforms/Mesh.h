//===- Mesh.h - how the ZeRO passes split the data-parallel ranks -*- C++ -*-===//
//
// zero-partition records in `zero.partition` how the ranks hold the training
// state: sharded over every rank, or (MiCS / HSDP) over groups of consecutive
// ranks and replicated across them, and whether stage 3 keeps hpZ's
// secondary parameter shard inside a group. zero-optimizer reads it back.
// The collectives that reduce gradients in the comm type live here, so that
// both passes emit them alike.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TRANSFORMS_MESH_H
#define ZCC_TRANSFORMS_MESH_H

#include "zero/ZeroOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace zcc {

struct Mesh {
  int64_t world = 1;     ///< data-parallel ranks
  int64_t groupSize = 0; ///< consecutive ranks per mesh group (a node's); 0: no mesh
  int64_t shards = 1;    ///< the ranks sharded state is split over: world, or groupSize (MiCS)
  bool hpz = false;      ///< stage 3 re-gathers in the backward from a shard within the group
  /// ZeRO++ qgZ: gradients reduce-scattered as blockwise int8 through
  /// all-to-alls (hierarchical: in the group, then across)
  bool quantizedGradients = false;
  int64_t gradientBits = 8; ///< qgZ's bits per value: 8 or 4
  mlir::Type commType;      ///< what collectives move (float32 unless --comm-dtype)

  /// Shard over groups, replicate across them (MiCS / HSDP).
  bool replicated() const { return shards < world; }
  /// The group of the ranks that split the state between them.
  zero::CommGroup shardGroup() const {
    return replicated() ? zero::CommGroup::group : zero::CommGroup::world;
  }
  /// The ranks a collective over |g| spans.
  int64_t ranks(zero::CommGroup g) const {
    return g == zero::CommGroup::world   ? world
           : g == zero::CommGroup::group ? groupSize
                                         : world / groupSize;
  }
  /// 16-bit communication.
  bool narrow() const { return commType && !commType.isF32(); }

  /// The mesh zero-partition recorded on |module| (world 1 without one);
  /// failure, with an error on |module|, for a malformed record.
  static mlir::FailureOr<Mesh> of(mlir::ModuleOp module);
};

/// Elements per float32 scale of ZeRO++'s blockwise int8 quantization
/// (qwZ, qgZ): partitioned buckets are padded to whole blocks per rank.
constexpr int64_t kQuantBlock = 256;

/// The average over every rank of |grad| (float32 or the comm type), as the
/// rank's state needs it: with |shardElements| > 0 a 1-D |grad|
/// reduce-scattered to that many elements over the shard ranks and, under
/// MiCS, the shard then all-reduced across the groups; with 0 an all-reduce
/// over every rank. A 16-bit comm type rounds |grad| to it first (unless it
/// is of that type), a 16-bit |grad| with float32 communication is widened
/// first. Under qgZ the reduce-scatter is
/// blockwise int8 through all-to-alls, each rank summing what it receives in
/// float32: with a mesh of groups (hpZ) first inside the group, then across
/// the groups, so that only a group's share of the gradient leaves it.
/// Shards that are not a whole number of blocks are reduced as without qgZ.
/// The result has |resultType|'s elements (float32 when null).
mlir::Value averageOverRanks(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad,
                             int64_t shardElements, const Mesh &mesh, mlir::Type resultType = {});

} // namespace zcc

#endif // ZCC_TRANSFORMS_MESH_H
