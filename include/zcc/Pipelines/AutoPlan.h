//===- AutoPlan.h - the plan that fits a memory budget -----------*- C++ -*-===//
//
// zcc --memory-budget SIZE --auto (and --recompute auto): candidate plans,
// from the fastest by an estimate of step time, each compiled with the
// caller's pipeline until one's planned peak fits. The search is here; the
// caller says how to compile a candidate and how much device memory a
// compiled module needs (docs/memory.md).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_PIPELINES_AUTOPLAN_H
#define ZCC_PIPELINES_AUTOPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace zcc {

/// One candidate: a ZeRO stage, a recompute policy (none, selective, layer)
/// and an offload (none; cpu: the optimizer; cpu+param: and stage 3's
/// parameter shards).
struct AutoCandidate {
  int64_t stage = 0;
  std::string recompute = "none", offload = "none";
  double cost = 1;       // estimated step time relative to the plain plan
  int64_t peak = -1;     // planned device bytes per rank, once compiled
  int64_t hostPeak = -1; // planned pinned host bytes per rank (the host arena)
};

/// What the search may vary: a setting the user fixed (a flag, or a key of
/// the DeepSpeed config) stays as given.
struct AutoPlanRequest {
  int64_t budget = 0;     // device bytes per rank
  int64_t hostBudget = 0; // pinned host bytes per rank (0: no limit)
  bool nvme = false;      // --nvme-path given: the optimizer state may go to NVMe
  int64_t worldSize = 1;  // stages vary only with more than one rank
  int64_t stage = 0;      // the given stage, when fixed
  std::string recompute = "none";
  std::string offloadOptimizer = "none", offloadParam = "none";
  bool stageFixed = false, recomputeFixed = false, offloadFixed = false;
};

/// Compiles |module| (a clone of the imported module) as |candidate|.
using CompileCandidate =
    llvm::function_ref<mlir::LogicalResult(mlir::ModuleOp module, const AutoCandidate &)>;
/// Device (or pinned host) bytes a rank of a compiled module allocates.
using PlannedPeak = llvm::function_ref<int64_t(mlir::ModuleOp module)>;

/// The fastest candidate whose planned peaks fit the budgets (device, and
/// host where given), compiled, with
/// `zero.auto` saying why; a line per candidate tried goes to |log|. Failure
/// (an error on |log|, naming the smallest candidate and what it lacks)
/// when none fits or a candidate fails to compile.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
chooseAutoPlan(mlir::ModuleOp imported, const AutoPlanRequest &request, CompileCandidate compile,
               PlannedPeak peak, PlannedPeak hostPeak, llvm::raw_ostream &log);

} // namespace zcc

#endif // ZCC_PIPELINES_AUTOPLAN_H
