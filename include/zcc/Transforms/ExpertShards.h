//===- ExpertShards.h - expert parallelism's state in zero-partition -*- C++ -*-===//
//
// zero-moe-dispatch --moe-ep-size P multiplies each rank's tokens by its
// chunk of every stacked expert matrix: a zero.local_shard over P ranks of
// the (replicated) stack, whose gradient autodiff all-gathers from every
// rank's chunk gradient, over P. When P is the number of ranks the state is
// split over (stages 1-3: the world, or MiCS's groups), zero-partition keeps
// only the rank's chunk: a bucket of its own, never gathered, whose gradient
// is the rank's chunk gradient (docs/zero.md). These are its pieces.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TRANSFORMS_EXPERTSHARDS_H
#define ZCC_TRANSFORMS_EXPERTSHARDS_H

#include "zcc/Transforms/Mesh.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace zcc {

/// The parameters of |params| (parameter, gradient) that every function of |funcs| reads only as
/// this rank's chunk (loads that reach zero.local_shard over |mesh|'s shard
/// ranks, through casts and reshapes), whose chunks are whole multiples of
/// |align| elements.
llvm::DenseSet<mlir::Operation *>
expertParameters(llvm::ArrayRef<std::pair<zero::GlobalOp, zero::GlobalOp>> params,
                 llvm::ArrayRef<mlir::func::FuncOp> funcs, const Mesh &mesh, int64_t align);

/// Accumulates into |grad| (the shard bucket's gradient global) the rank's
/// chunk gradient of |param| found in |g|, @micro_step's gradient of the
/// whole stack (the all-gather of the chunks' gradients over P, widened by
/// mixed precision): divided by P and, under MiCS, averaged across the
/// groups. A step of one micro-step (zero.gradients_written) stores it
/// instead. The ops |g| came from go to |dead| (erase them once unused).
mlir::LogicalResult shardExpertGradient(zero::GlobalOp param, mlir::Value g, zero::GlobalOp grad,
                                        const Mesh &mesh,
                                        llvm::SmallVectorImpl<mlir::Operation *> &dead);

/// |load| of an expert parameter: each local_shard it reaches becomes a load
/// of |shard| (the bucket holding this rank's chunk), cast as the chunk was;
/// the load and the casts and reshapes between are erased.
void readExpertShard(zero::LoadOp load, zero::GlobalOp shard);

} // namespace zcc

#endif // ZCC_TRANSFORMS_EXPERTSHARDS_H
