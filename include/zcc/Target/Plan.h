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

/// The scaling model the report adds (zcc --link, docs/zero.md): each
/// collective a ring over a link per GPU (NVLink within a node, the
/// inter-node network across nodes, a latency per hop), the matmuls at a
/// sustained FLOP rate, and the plan's order: collectives one after another
/// on their stream, overlapping compute up to their waits.
struct ScalingModel {
  double nvlinkBytesPerSecond = 370e9, ibBytesPerSecond = 50e9, hopSeconds = 5e-6;
  int64_t gpusPerNode = 8;
  double flopsPerSecond = 400e12;
};

/// The scaling model's prediction for a compiled module (seconds a step):
/// the compute-only step, all communication, the part of it left exposed,
/// the step, and the nodes W ranks take.
struct ScalingEstimate {
  double compute = 0, communication = 0, exposed = 0, step = 0;
  int64_t world = 1, nodes = 1;
  double bandwidth = 0;      // bytes/s a GPU of the link the collectives cross
  double groupBandwidth = 0; // ... and a mesh group's (NVLink when groups tile the nodes)
  /// Communication and its exposed part by kind: all-reduce,
  /// reduce-scatter, all-gather.
  double byKind[4] = {0, 0, 0, 0}, exposedByKind[4] = {0, 0, 0, 0};
};
ScalingEstimate estimateScaling(mlir::ModuleOp module, const ScalingModel &model);

/// Reads --link's "nvlink=370GB/s,ib=50GB/s,hop=5us" (any of the three,
/// GB/s or TB/s, us or ms) into |model|: "" if it parses, else what is wrong.
std::string parseLink(llvm::StringRef spec, ScalingModel &model);

/// Prints the per-rank memory table of a module produced by
/// convert-zero-to-zrt: parameters, frozen buffers, constants, inputs,
/// activations and the peak, each in bytes and MiB; with |scaling|, the
/// predicted step time at the plan's world size. With |json|, the same
/// figures as one JSON object (zcc --emit=report --format json).
mlir::LogicalResult printReport(mlir::ModuleOp module, llvm::raw_ostream &os,
                                const ScalingModel *scaling = nullptr, bool json = false);

} // namespace zcc

#endif // ZCC_TARGET_PLAN_H
