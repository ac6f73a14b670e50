//===- PlanStats.h - what the report and the scaling model count -*- C++ -*-===//
//
// Figures of a lowered plan (a zrt module) that zcc --emit=report
// (Report.cpp) and the scaling model (Scaling.cpp) both read: the tokens and
// matmul FLOPs of a step, the ranks a collective spans and the bytes it
// sends. Private to lib/Target/Plan.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_LIB_TARGET_PLAN_PLANSTATS_H
#define ZCC_LIB_TARGET_PLAN_PLANSTATS_H

#include "zcc/Target/Plan.h"
#include "zero/ZeroOps.h"
#include "zrt/ZrtOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace zcc::plan_stats {

using TypeMap = llvm::DenseMap<mlir::StringAttr, mlir::RankedTensorType>;

/// Tokens (elements of the first int64 data input, else samples) one rank
/// processes per optimizer step.
int64_t tokensPerRankStep(mlir::ModuleOp module, int64_t accum);

/// Expert parallelism: for the offsets buffer of each moe_route that routes
/// one rank's experts, the share of its static rows a rank uses on average
/// (tokens x k / P of the P tokens x min(k, E / P) the plan holds).
using RoutedShare = llvm::DenseMap<mlir::StringAttr, double>;
RoutedShare routedShares(mlir::ModuleOp module, const TypeMap &typeOf);

/// A matmul-family or convolution kernel's FLOPs (2 x batch x M x N x K; a
/// convolution's 2 x outputs x C/G x K..), else 0; a grouped GEMM over a
/// rank's routed rows counts the rows it uses on average (|share|).
double matmulFlops(zcc::zrt::KernelOp kernel, const TypeMap &typeOf,
                   const RoutedShare *share = nullptr);

/// The plan's ranks and mesh (zero.partition): how many ranks a collective
/// spans.
struct Ranks {
  int64_t world = 1, groupSize = 0;
  explicit Ranks(mlir::ModuleOp module) {
    if (auto partition = zcc::zero::attrs(module).getPartitionAttrHelper().getAttr(module)) {
      world = partition.getWorldSize();
      groupSize = partition.getGroupSize();
    }
  }
  /// zero.CommGroup: 0 every rank, 1 a mesh group, 2 across the groups.
  int64_t of(int64_t group) const {
    return group == 0 || groupSize == 0 ? world : group == 1 ? groupSize : world / groupSize;
  }
};

/// Bytes one rank sends in ring collective |c| over the ranks its group
/// spans, its hops, and its kind (0 all-reduce, 1 reduce-scatter, 2
/// all-gather, 3 all-to-all; -1 for what moves nothing): PlanStats.cpp.
double ringBytes(zcc::zrt::CollectiveOp c, const TypeMap &typeOf, const Ranks &ranks, int &kind,
                 double &hops);

/// Gradient-accumulation steps of a compiled module (1 if not training).
int64_t accumSteps(mlir::ModuleOp module);

/// The scaling model's lines of the report (and its figures into |out|):
/// Scaling.cpp.
void printScaling(mlir::ModuleOp module, llvm::raw_ostream &os, const ScalingModel &model,
                  llvm::json::Object &out);

} // namespace zcc::plan_stats

#endif // ZCC_LIB_TARGET_PLAN_PLANSTATS_H
