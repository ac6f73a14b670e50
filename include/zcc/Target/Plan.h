//===- Plan.h - zrt module -> plan file, and the memory report ---*- C++ -*-===//
#ifndef ZCC_TARGET_PLAN_H
#define ZCC_TARGET_PLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace zcc {

struct PlanWriterOptions {
  /// zcc --weights external: weights (float32 trainable parameters, frozen
  /// buffers, stage-3 parameter shards) are marked `external` and carry no
  /// bytes; zrun --weights MODEL.onnx supplies them at start.
  bool externalWeights = false;
  /// The command line that compiled the module (without -o), recorded in
  /// the plan.
  std::vector<std::string> command;
};

/// Serializes a module produced by convert-zero-to-zrt as plan.proto bytes.
mlir::LogicalResult writePlan(mlir::ModuleOp module, llvm::raw_ostream &os,
                              const PlanWriterOptions &options = {});

/// Prints the per-rank memory table of a module produced by
/// convert-zero-to-zrt: parameters, frozen buffers, constants, inputs,
/// activations and the peak, each in bytes and MiB.
mlir::LogicalResult printReport(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace zcc

#endif // ZCC_TARGET_PLAN_H
