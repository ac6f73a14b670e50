//===- MemoryPlan.h - where each tensor lives --------------------*- C++ -*-===//
//
// The placement rules shared by zero-plan-memory (which decides offsets) and
// convert-zero-to-zrt / the report (which read them back).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_ANALYSIS_MEMORYPLAN_H
#define ZCC_ANALYSIS_MEMORYPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace zcc {

/// The arenas of a plan (runtime/plan/plan.proto).
enum class ArenaKind { Device, State, Constant, Input };

/// Name used in attributes and reports ("device", "state", ...).
llvm::StringRef arenaName(ArenaKind arena);

/// Alignment of every placement, in bytes (a cache line; enough for SIMD and
/// for cuBLASLt later).
constexpr int64_t kArenaAlignment = 64;

/// Storage size of a ranked tensor (i1 takes a byte per element).
int64_t storageBytes(mlir::Type type);

/// Rounds |bytes| up to kArenaAlignment.
inline int64_t alignArena(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

struct Placement {
  ArenaKind arena;
  int64_t offset;
};

/// Returns the value whose storage |v| uses: itself, or the operand of the
/// chain of views (zero.reshape) it comes from.
mlir::Value storageRoot(mlir::Value v);

/// The position of every op of |block| in program order.
llvm::DenseMap<mlir::Operation *, int64_t> programOrder(mlir::Block &block);

/// Reads the placement zero-plan-memory recorded for |v| (through views);
/// nullopt if the value has none (the pass did not run, or the IR changed).
std::optional<Placement> getPlacement(mlir::Value v);

/// Per-rank arena sizes that zero-plan-memory recorded on the module.
struct ArenaSizes {
  int64_t device = 0, state = 0, constant = 0, input = 0;
  int64_t total() const { return device + state + constant + input; }
};
std::optional<ArenaSizes> getArenaSizes(mlir::ModuleOp module);

} // namespace zcc

#endif // ZCC_ANALYSIS_MEMORYPLAN_H
