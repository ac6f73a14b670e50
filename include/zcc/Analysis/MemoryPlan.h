//===- MemoryPlan.h - where each tensor lives --------------------*- C++ -*-===//
//
// The placement rules shared by zero-plan-memory (which decides offsets) and
// convert-zero-to-zrt / the report (which read them back).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_ANALYSIS_MEMORYPLAN_H
#define ZCC_ANALYSIS_MEMORYPLAN_H

#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>

namespace zcc {

/// The arenas of a plan (runtime/plan/plan.proto).
enum class ArenaKind { Device, State, Constant, Input, Host, Nvme };

/// NVMe arena placements (zero-offload to nvme) are aligned for O_DIRECT.
constexpr int64_t kNvmeAlignment = 4096;
inline int64_t alignNvme(int64_t bytes) {
  return (bytes + kNvmeAlignment - 1) / kNvmeAlignment * kNvmeAlignment;
}

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

/// Ops whose result is a view of their (first) operand's bytes (no kernel,
/// no memory): zero.reshape, zero.wait (the started collective's buffer), and
/// a zero.slice of a 1-D tensor with stride 1 (a contiguous range, as a
/// parameter inside its flat ZeRO bucket).
bool isViewOp(mlir::Operation *op);

/// Returns the value whose storage |v| uses: itself, or the operand of the
/// chain of views it comes from.
mlir::Value storageRoot(mlir::Value v);

/// Where |v|'s bytes start inside its storage root's (0 but for slices).
int64_t viewByteOffset(mlir::Value v);

/// The position of every op of |block| in program order.
llvm::DenseMap<mlir::Operation *, int64_t> programOrder(mlir::Block &block);

/// Reads the placement zero-plan-memory recorded for |v| (through views);
/// nullopt if the value has none (the pass did not run, or the IR changed).
std::optional<Placement> getPlacement(mlir::Value v);
/// The same for a storage root (no view offset).
std::optional<Placement> getRootPlacement(mlir::Value v);

/// Per-rank arena sizes that zero-plan-memory recorded on the module.
struct ArenaSizes {
  int64_t device = 0, state = 0, constant = 0, input = 0, host = 0;
  int64_t total() const { return device + state + constant + input; }
};
std::optional<ArenaSizes> getArenaSizes(mlir::ModuleOp module);

/// The little-endian bytes of a constant or initial value (i1 as a byte per
/// element; splats expanded); an error at |loc| if they are not available.
mlir::FailureOr<std::string> elementBytes(mlir::ElementsAttr attr, mlir::Location loc);

} // namespace zcc

#endif // ZCC_ANALYSIS_MEMORYPLAN_H
