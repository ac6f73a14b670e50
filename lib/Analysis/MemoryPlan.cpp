//===- MemoryPlan.cpp - where each tensor lives ---------------------------===//
#include "zcc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "zero/ZeroOps.h"

using namespace mlir;
using namespace zcc;

StringRef zcc::arenaName(ArenaKind arena) {
  switch (arena) {
  case ArenaKind::Device:
    return "device";
  case ArenaKind::State:
    return "state";
  case ArenaKind::Constant:
    return "constant";
  case ArenaKind::Input:
    return "input";
  case ArenaKind::Host:
    return "host";
  case ArenaKind::Nvme:
    return "nvme";
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

bool zcc::isViewOp(Operation *op) {
  if (isa<zero::ReshapeOp, zero::WaitOp>(op))
    return true;
  auto slice = dyn_cast<zero::SliceOp>(op);
  return slice && cast<RankedTensorType>(slice.getInput().getType()).getRank() == 1 &&
         slice.getStride()[0] == 1;
}

Value zcc::storageRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isViewOp(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

int64_t zcc::viewByteOffset(Value v) {
  int64_t offset = 0;
  while (Operation *def = v.getDefiningOp()) {
    if (!isViewOp(def))
      break;
    if (auto slice = dyn_cast<zero::SliceOp>(def))
      offset +=
          slice.getStart()[0] * storageBytes(RankedTensorType::get(
                                    {1}, cast<RankedTensorType>(v.getType()).getElementType()));
    v = def->getOperand(0);
  }
  return offset;
}

std::optional<Placement> zcc::getPlacement(Value v) {
  int64_t viewOffset = viewByteOffset(v);
  std::optional<Placement> root = getRootPlacement(storageRoot(v));
  if (root)
    root->offset += viewOffset;
  return root;
}

std::optional<Placement> zcc::getRootPlacement(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!func)
      return std::nullopt;
    if (auto off = func.getArgAttrOfType<IntegerAttr>(
            arg.getArgNumber(), zero::ZeroDialect::OffsetAttrHelper::getNameStr()))
      return Placement{ArenaKind::Input, off.getInt()};
    return std::nullopt;
  }
  Operation *op = v.getDefiningOp();
  if (auto load = dyn_cast<zero::LoadOp>(op)) {
    auto global = SymbolTable::lookupNearestSymbolFrom<zero::GlobalOp>(op, load.getGlobalAttr());
    if (!global)
      return std::nullopt;
    if (auto off = zero::attrs(global).getOffsetAttrHelper().getAttr(global))
      return Placement{
          zero::attrs(global).getNvmeAttrHelper().isAttrPresent(global)   ? ArenaKind::Nvme
          : zero::attrs(global).getHostAttrHelper().isAttrPresent(global) ? ArenaKind::Host
                                                                          : ArenaKind::State,
          off.getInt()};
    return std::nullopt;
  }
  auto offsets = zero::attrs(op).getOffsetsAttrHelper().getAttr(op);
  unsigned index = cast<OpResult>(v).getResultNumber();
  if (!offsets || (int64_t)index >= offsets.size())
    return std::nullopt;
  ArenaKind arena = isa<zero::ConstantOp>(op) ? ArenaKind::Constant : ArenaKind::Device;
  // Results written straight into a global's bytes (see zero-plan-memory).
  if (auto inState = zero::attrs(op).getInStateAttrHelper().getAttr(op))
    if ((int64_t)index < inState.size() && inState[index])
      arena = ArenaKind::State;
  // Per-result arenas where some are not the device's (offload: host values,
  // results written into host-resident globals).
  if (auto arenas = zero::attrs(op).getArenasAttrHelper().getAttr(op))
    if ((int64_t)index < arenas.size())
      arena = static_cast<ArenaKind>(arenas[index]);
  return Placement{arena, offsets[index]};
}

std::optional<ArenaSizes> zcc::getArenaSizes(ModuleOp module) {
  ArenaSizes sizes;
  if (auto host = zero::attrs(module).getHostArenaBytesAttrHelper().getAttr(module))
    sizes.host = host.getInt();
  for (auto [name, field] :
       {std::pair{zero::ZeroDialect::DeviceArenaBytesAttrHelper::getNameStr(), &sizes.device},
        {zero::ZeroDialect::StateArenaBytesAttrHelper::getNameStr(), &sizes.state},
        {zero::ZeroDialect::ConstantArenaBytesAttrHelper::getNameStr(), &sizes.constant},
        {zero::ZeroDialect::InputArenaBytesAttrHelper::getNameStr(), &sizes.input}}) {
    // (zero.host_arena_bytes is optional: plans without offload have none.)
    auto attr = module->getAttrOfType<IntegerAttr>(name);
    if (!attr)
      return std::nullopt;
    *field = attr.getInt();
  }
  return sizes;
}

FailureOr<std::string> zcc::elementBytes(ElementsAttr attr, Location loc) {
  auto type = cast<RankedTensorType>(attr.getType());
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return emitError(loc, "the weights of this tensor are missing (elided resource?)");
    ArrayRef<char> data = blob->getData();
    return std::string(data.data(), data.size());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return emitError(loc, "unsupported constant attribute ") << attr;
  std::string bytes;
  if (type.getElementType().isInteger(1)) {
    for (bool v : dense.getValues<bool>())
      bytes.push_back(v ? 1 : 0);
    return bytes;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    for (int64_t k = 0; k < type.getNumElements(); ++k)
      bytes.append(raw.data(), raw.size());
    return bytes;
  }
  return std::string(raw.data(), raw.size());
}
