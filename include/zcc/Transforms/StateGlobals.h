//===- StateGlobals.h - globals the passes add beside the model's -*- C++ -*-===//
//
// Helpers shared by the passes that add training state next to a bucket's
// members (zero-partition's packed buckets, zero-fuse-optimizer's 16-bit
// copies, zero-optimizer-in-backward's moment slices).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TRANSFORMS_STATEGLOBALS_H
#define ZCC_TRANSFORMS_STATEGLOBALS_H

#include "zero/ZeroOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace zcc {

/// BASE, or BASE.K (the first K from 1) where the module already has BASE.
std::string uniqueGlobalName(mlir::ModuleOp module, llvm::StringRef base);

/// A zero-initialized global of |role| holding |member|'s slice of |bucket|
/// (its shape, the bucket's element type, at the member's bucket offset),
/// named MEMBER + |suffix| (made unique), placed after |member|.
zero::GlobalOp createMemberSlice(mlir::ModuleOp module, zero::GlobalOp member,
                                 llvm::StringRef suffix, zero::GlobalRole role,
                                 zero::GlobalOp bucket);

/// The initial value of a flat float32 bucket of |size| elements: each
/// (parameter, offset) member's initial bytes at its offset, zeros elsewhere
/// (a sharded bucket holds every rank's; each keeps its shard). Members that
/// are all zero splats (zcc --weights external) give a zero splat, without
/// materializing the bytes; otherwise a resource blob keyed |name|.
mlir::FailureOr<mlir::ElementsAttr>
packBucketInitialValue(llvm::ArrayRef<std::pair<zero::GlobalOp, int64_t>> members, int64_t size,
                       llvm::StringRef name);

} // namespace zcc

#endif // ZCC_TRANSFORMS_STATEGLOBALS_H
