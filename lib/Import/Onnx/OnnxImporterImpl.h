//===- OnnxImporterImpl.h - the ONNX importer's state ------------*- C++ -*-===//
//
// Shared by OnnxImporter.cpp (model, nodes, folding), OnnxInputs.cpp
// (initializers, inputs) and the emitters of OnnxOps.def (OnnxOps.cpp and
// its neighbours: each ONNX op into zero ops).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_LIB_IMPORT_ONNX_ONNXIMPORTERIMPL_H
#define ZCC_LIB_IMPORT_ONNX_ONNXIMPORTERIMPL_H

#include "HostTensor.h"
#include "OnnxUtils.h"
#include "zcc/Import/OnnxImporter.h"
#include "zero/ZeroOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <memory>
#include <optional>

namespace zcc::onnx_import {
using namespace mlir;

/// A value of the ONNX graph during import: known on the host, or an SSA
/// value of the function being built.
struct Entry {
  std::shared_ptr<HostTensor> constant;
  Value value;
  int32_t onnxType = kUndefined;
  /// Bounds [lo, hi] of every element of an integer or boolean tensor that is
  /// not a constant, where the importer knows them (rangeOf, OnnxImporter.cpp).
  std::optional<std::pair<int64_t, int64_t>> range;
};

class OnnxImporter {
public:
  OnnxImporter(MLIRContext *ctx, StringRef path, const OnnxImportOptions &options)
      : ctx(ctx), builder(ctx), path(path.str()), options(options) {}

  OwningOpRef<ModuleOp> run(const onnx::ModelProto &model);

  // Diagnostics.
  InFlightDiagnostic fileError() { return emitError(FileLineColLoc::get(ctx, path, 0, 0)); }
  InFlightDiagnostic nodeError(const onnx::NodeProto &node) {
    // The tools print the node name and op type from the location.
    return emitError(nodeLoc(node));
  }
  std::string nodeName(const onnx::NodeProto &node) {
    return node.name().empty() ? "#" + std::to_string(nodeIndex) : node.name();
  }
  Location nodeLoc(const onnx::NodeProto &node) {
    return NameLoc::get(StringAttr::get(ctx, nodeName(node) + ":" + node.op_type()),
                        FileLineColLoc::get(ctx, path, 0, 0));
  }

  // Types and constants.
  Type elementType(int32_t onnxType);
  DenseElementsAttr toAttr(const HostTensor &t);
  Value materialize(Entry &e, Location loc);

  // Model parts.
  LogicalResult importInitializers(const onnx::GraphProto &graph);
  LogicalResult importInputs(const onnx::GraphProto &graph, func::FuncOp &func);
  LogicalResult importNode(const onnx::NodeProto &node);
  LogicalResult emitNode(const onnx::NodeProto &node, SmallVectorImpl<Entry *> &inputs,
                         SmallVectorImpl<Value> &results);
  bool readExternalData(const onnx::TensorProto &t, std::string &bytes);

  MLIRContext *ctx;
  OpBuilder builder;
  std::string path;
  const OnnxImportOptions &options;
  ModuleOp module;
  Block *body = nullptr;
  int64_t opset = 0;
  int64_t nodeIndex = 0;
  llvm::StringMap<Entry> values;
  llvm::StringMap<std::vector<Entry>> sequences;
  llvm::StringMap<zero::GlobalOp> globals;
  SmallVector<std::string> globalOrder; // initializer order, for readable IR
  llvm::StringMap<Value> loads;
  unsigned numTrainable = 0, numFrozen = 0;
  /// The export record's parameters (metadata `zcc.parameters`, written by
  /// tools/zcc-export from named_parameters()): without --trainable, only
  /// these float initializers train; the others are buffers.
  std::optional<llvm::StringSet<>> recordedParameters;
  /// Whether float initializer |name| trains: --trainable (or the record, or
  /// every one) and not --frozen.
  bool isTrainableName(const std::string &name, llvm::Regex &trainable, llvm::Regex &frozen) const;
  /// Buffers a BatchNormalization updates (its running statistics): one
  /// node each.
  llvm::StringSet<> updatedBuffers;
  llvm::StringSet<> paddingUsed; // --padding-idx tables that a Gather reads
  /// --padding-idx, and the export record's zcc.padding_idx where the flags do
  /// not name the table (paddingFromRecord holds those).
  llvm::StringMap<int64_t> paddingIdx;
  llvm::StringSet<> paddingFromRecord;
  /// @forward (importInputs makes it).
  func::FuncOp forward;
  /// Samples per micro-batch: the first graph input's leading dimension.
  int64_t batchSamples = 1;
  /// @forward's "dropout_rng" input (tensor<2xi64>: the seed and the stream
  /// position of the micro-batch's first sample), added by the first
  /// Dropout that trains.
  Value dropoutRng(Location loc);
  Value dropoutRngArg;
  /// zcc --per-document: @forward's position_ids [B, S], and how many nodes
  /// read it in place of the constant positions 0..S-1 (positionsFor).
  Value documentPositions;
  int64_t positionReaders = 0;
  LogicalResult addDocumentPositions();
  /// The positions in the layout of |constant| when it is the token
  /// positions 0..S-1 (plus a constant) along its last axis ([1 or B, 1, ...,
  /// S]), else null.
  Value positionsFor(const HostTensor &constant, Location loc);
};

} // namespace zcc::onnx_import

#endif // ZCC_LIB_IMPORT_ONNX_ONNXIMPORTERIMPL_H
