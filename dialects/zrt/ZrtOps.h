//===- ZrtOps.h - the plan dialect -------------------------------*- C++ -*-===//
#ifndef ZCC_DIALECTS_ZRT_ZRTOPS_H
#define ZCC_DIALECTS_ZRT_ZRTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"

#include "zrt/ZrtDialect.h.inc"
#include "zrt/ZrtEnums.h.inc"

#define GET_OP_CLASSES
#include "zrt/ZrtOps.h.inc"

namespace zcc::zrt {
/// The zrt dialect of |op|'s context, whose generated helpers read and write
/// its discardable attributes typed (ZrtOps.td's discardableAttrs).
inline ZrtDialect &attrs(mlir::Operation *op) {
  if (auto *dialect = op->getContext()->getLoadedDialect<ZrtDialect>())
    return *dialect;
  return *op->getContext()->getOrLoadDialect<ZrtDialect>();
}
/// The bytes a rank of a converted module allocates for |arena|, as
/// convert-zero-to-zrt records them (the dialect's <arena>_arena_bytes
/// attributes); -1 where not recorded.
int64_t arenaBytes(mlir::Operation *module, Arena arena);
/// Records |bytes| for |arena|.
void setArenaBytes(mlir::Operation *module, Arena arena, mlir::IntegerAttr bytes);
} // namespace zcc::zrt

#endif // ZCC_DIALECTS_ZRT_ZRTOPS_H
