//===- Passes.h - zero dialect passes ----------------------------*- C++ -*-===//
#ifndef ZCC_TRANSFORMS_PASSES_H
#define ZCC_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "zero/ZeroOps.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace zcc {

/// What zero-fuse-elementwise's code generation needs in the context: the
/// NVVM target, the LLVM IR translations and the to-LLVM conversion
/// interfaces of the dialects its kernels use.
void registerCodegenInterfaces(mlir::DialectRegistry &registry);

#define GEN_PASS_DECL
#include "zcc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zcc/Transforms/Passes.h.inc"

} // namespace zcc

#endif // ZCC_TRANSFORMS_PASSES_H
