//===- Passes.h - zero dialect passes ----------------------------*- C++ -*-===//
#ifndef ZCC_TRANSFORMS_PASSES_H
#define ZCC_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "zero/ZeroOps.h"

namespace zcc {

#define GEN_PASS_DECL
#include "zcc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zcc/Transforms/Passes.h.inc"

} // namespace zcc

#endif // ZCC_TRANSFORMS_PASSES_H
