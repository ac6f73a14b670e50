//===- MemoryPlan.cpp - where each tensor lives ---------------------------===//
#include "zcc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "zero/ZeroOps.h"

using namespace mlir;
using namespace zcc;

StringRef zcc::arenaName(ArenaKind arena) {
  switch (arena) {
  case ArenaKind::Device: return "device";
  case ArenaKind::State: return "state";
  case ArenaKind::Constant: return "constant";
  case ArenaKind::Input: return "input";
  }
  return "?";
}

int64_t zcc::storageBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * std::max<int64_t>(1, (bits + 7) / 8);
}

DenseMap<Operation *, int64_t> zcc::programOrder(Block &block) {
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : block)
    index[&op] = n++;
  return index;
}

Value zcc::storageRoot(Value v) {
  while (auto view = v.getDefiningOp<zero::ReshapeOp>())
    v = view.getInput();
  return v;
}

std::optional<Placement> zcc::getPlacement(Value v) {
  v = storageRoot(v);
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!func)
      return std::nullopt;
    if (auto off = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), "zero.offset"))
      return Placement{ArenaKind::Input, off.getInt()};
    return std::nullopt;
  }
  Operation *op = v.getDefiningOp();
  if (auto load = dyn_cast<zero::LoadOp>(op)) {
    auto global = SymbolTable::lookupNearestSymbolFrom<zero::GlobalOp>(op, load.getGlobalAttr());
    if (!global)
      return std::nullopt;
    if (auto off = global->getAttrOfType<IntegerAttr>("zero.offset"))
      return Placement{ArenaKind::State, off.getInt()};
    return std::nullopt;
  }
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("zero.offsets");
  unsigned index = cast<OpResult>(v).getResultNumber();
  if (!offsets || (int64_t)index >= offsets.size())
    return std::nullopt;
  ArenaKind arena = isa<zero::ConstantOp>(op) ? ArenaKind::Constant : ArenaKind::Device;
  // Results written straight into a global's bytes (see zero-plan-memory).
  if (auto inState = op->getAttrOfType<DenseI64ArrayAttr>("zero.in_state"))
    if ((int64_t)index < inState.size() && inState[index])
      arena = ArenaKind::State;
  return Placement{arena, offsets[index]};
}

std::optional<ArenaSizes> zcc::getArenaSizes(ModuleOp module) {
  ArenaSizes sizes;
  for (auto [name, field] : {std::pair{"zero.device_arena_bytes", &sizes.device},
                             {"zero.state_arena_bytes", &sizes.state},
                             {"zero.constant_arena_bytes", &sizes.constant},
                             {"zero.input_arena_bytes", &sizes.input}}) {
    auto attr = module->getAttrOfType<IntegerAttr>(name);
    if (!attr)
      return std::nullopt;
    *field = attr.getInt();
  }
  return sizes;
}
