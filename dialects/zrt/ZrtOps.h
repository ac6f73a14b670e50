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

#endif // ZCC_DIALECTS_ZRT_ZRTOPS_H
