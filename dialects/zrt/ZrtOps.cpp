//===- ZrtOps.cpp - the plan dialect --------------------------------------===//
#include "zrt/ZrtOps.h"

#include "kernels/KernelId.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace zcc::zrt;

#include "zrt/ZrtDialect.cpp.inc"
#include "zrt/ZrtEnums.cpp.inc"

void ZrtDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zrt/ZrtOps.cpp.inc"
      >();
}

LogicalResult BufferOp::verify() {
  // I64Attr's accessor is unsigned: read the signed value.
  if (getOffsetAttr().getInt() < 0)
    return emitOpError("offset must be non-negative, got ") << getOffsetAttr().getInt();
  // The host arena's offloaded state (zero-offload) starts from values too;
  // NVMe state from zeros (the moments), or a parameter shard's values
  // (offload_param nvme: zrun writes them into the swap file at start).
  bool hasData =
      getArena() == Arena::state || getArena() == Arena::constant || getArena() == Arena::host;
  if (getArena() == Arena::nvme && getInitialValue()) {
    auto splat = dyn_cast<SplatElementsAttr>(*getInitialValue());
    if (!getShardOfAttr() && (!splat || !isa<FloatType>(splat.getElementType()) ||
                              !splat.getSplatValue<APFloat>().isPosZero()))
      return emitOpError("NVMe buffers start at zero, or are parameter shards");
    hasData = true;
  }
  if (getInitialValue() && !hasData)
    return emitOpError("only state, constant, host and NVMe buffers have initial values");
  if (auto shardOf = getShardOfAttr()) {
    auto t = cast<RankedTensorType>(getType());
    if ((getArena() != Arena::state && getArena() != Arena::host && getArena() != Arena::nvme) ||
        t.getRank() != 1 || t.getNumElements() <= 0 || shardOf.getInt() % t.getNumElements())
      return emitOpError("a shard is a 1-D state (or offloaded host or NVMe) buffer whose size "
                         "divides shard_of");
    if (getInitialValue() &&
        cast<ShapedType>(getInitialValue()->getType()).getNumElements() != shardOf.getInt())
      return emitOpError("a shard's initial value holds all ") << shardOf.getInt() << " elements";
  } else if (getInitialValue() && getInitialValue()->getType() != getType()) {
    return emitOpError("initial value type ")
           << getInitialValue()->getType() << " does not match " << getType();
  }
  if (getView() && getInitialValue())
    return emitOpError("a view has no initial value");
  if (getTrainable() && getArena() != Arena::state)
    return emitOpError("only state buffers can be trainable");
  return success();
}

LogicalResult KernelOp::verify() {
  if (getName().empty())
    return emitOpError("needs a kernel name");
  // The runtime's kernels (runtime/kernels/Kernels.def): a plan that names
  // another would be refused by zrun's validator; say so at compile time.
  if (!::zrt::lookupKernel(getName().str()))
    return emitOpError("unknown kernel '")
           << getName() << "' (known: " << ::zrt::kernelNameList() << ")";
  return success();
}

LogicalResult KernelOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  for (ArrayAttr list : {getInputs(), getOutputs()})
    for (Attribute a : list) {
      auto sym = cast<FlatSymbolRefAttr>(a);
      if (!symbolTable.lookupNearestSymbolFrom<BufferOp>(*this, sym.getAttr()))
        return emitOpError("refers to ") << sym << ", which is not a zrt.buffer";
    }
  return success();
}

LogicalResult CopyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  BufferOp buffers[2];
  FlatSymbolRefAttr syms[2] = {getSourceAttr(), getTargetAttr()};
  for (int k = 0; k < 2; ++k) {
    buffers[k] = symbolTable.lookupNearestSymbolFrom<BufferOp>(*this, syms[k].getAttr());
    if (!buffers[k])
      return emitOpError("refers to ") << syms[k] << ", which is not a zrt.buffer";
  }
  auto a = cast<RankedTensorType>(buffers[0].getType()),
       b = cast<RankedTensorType>(buffers[1].getType());
  if (a.getElementType() != b.getElementType() || a.getNumElements() != b.getNumElements())
    return emitOpError("copies ") << a << " into " << b << " of another size or type";
  return success();
}

LogicalResult CollectiveOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  for (FlatSymbolRefAttr sym : {getInputAttr(), getOutputAttr()})
    if (!symbolTable.lookupNearestSymbolFrom<BufferOp>(*this, sym.getAttr()))
      return emitOpError("refers to ") << sym << ", which is not a zrt.buffer";
  return success();
}

/// The name of |arena|'s bytes attribute.
static StringAttr arenaBytesName(Operation *module, Arena arena) {
  ZrtDialect &d = attrs(module);
  switch (arena) {
  case Arena::device:
    return d.getDeviceArenaBytesAttrHelper().getName();
  case Arena::state:
    return d.getStateArenaBytesAttrHelper().getName();
  case Arena::constant:
    return d.getConstantArenaBytesAttrHelper().getName();
  case Arena::input:
    return d.getInputArenaBytesAttrHelper().getName();
  case Arena::host:
    return d.getHostArenaBytesAttrHelper().getName();
  case Arena::nvme:
    return d.getNvmeArenaBytesAttrHelper().getName();
  }
  llvm_unreachable("an Arena case");
}

int64_t zcc::zrt::arenaBytes(Operation *module, Arena arena) {
  auto bytes = module->getAttrOfType<IntegerAttr>(arenaBytesName(module, arena));
  return bytes ? bytes.getInt() : -1;
}

void zcc::zrt::setArenaBytes(Operation *module, Arena arena, IntegerAttr bytes) {
  module->setAttr(arenaBytesName(module, arena), bytes);
}

#define GET_OP_CLASSES
#include "zrt/ZrtOps.cpp.inc"
