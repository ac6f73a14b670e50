//===- OnnxImporter.h - ONNX to zero dialect ---------------------*- C++ -*-===//
#ifndef ZCC_IMPORT_ONNXIMPORTER_H
#define ZCC_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace zcc {

struct OnnxImportOptions {
  /// Binds the leading dimension of every graph input that leaves it symbolic.
  std::optional<int64_t> microBatch;
  /// Full static shapes for named graph inputs (--input-shape NAME=AxB).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Float initializers whose names match `trainable` (default: all) and do not
  /// match `frozen` become trainable parameters; the others are frozen buffers.
  std::string trainableRegex;
  std::string frozenRegex;
  /// PyTorch nn.Embedding padding indices, by initializer name: ONNX drops
  /// them; gathers from these tables leave that row without gradient.
  llvm::StringMap<int64_t> paddingIdx;
  /// Constant subgraphs whose results have at most this many elements are
  /// evaluated at import; larger ones are imported as ops on constants.
  int64_t maxFoldElements = int64_t(1) << 22;
  /// zcc --weights external: the values of float initializers (parameters and
  /// frozen buffers, which become globals) are not read; the globals start as
  /// zeros and the plan marks them external (zrun --weights supplies them).
  /// Large models then compile without reading their weights at all.
  bool skipWeightData = false;
  /// zcc --per-document: @forward takes "position_ids" [batch, sequence] (each
  /// token's position in its packed document) besides the token input, and
  /// reads it wherever the graph casts the token positions 0..S-1 to float
  /// (RoPE) or gathers rows with them (learned position embeddings).
  bool perDocument = false;
  /// zcc --batch-norm: how BatchNormalization trains. Train (PyTorch's
  /// model.train(), the default): each rank's micro-batch statistics, the
  /// running statistics (frozen buffers) updated with the node's momentum
  /// in @micro_step and read by @forward (evaluation). Sync: SyncBatchNorm,
  /// the statistics over all |worldSize| data-parallel ranks. Eval (PyTorch's
  /// model.eval(), a frozen-BatchNorm fine-tune): the running statistics,
  /// fixed.
  enum class BatchNorm { Train, Sync, Eval } batchNorm = BatchNorm::Train;
  int64_t worldSize = 1;
};

/// Imports the ONNX model at |path| (binary .onnx, or the ONNX text format for
/// .onnxtxt/.onnxtext/.txt) into a module holding `zero.global`s for its float
/// initializers and `func.func @forward` for its graph. Errors are reported as
/// MLIR diagnostics naming the file, node and what to do; returns null then.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxFile(llvm::StringRef path, const OnnxImportOptions &options, mlir::MLIRContext *context);

/// The ONNX op types (default domain) that the importer accepts.
llvm::ArrayRef<llvm::StringRef> supportedOnnxOps();

} // namespace zcc

#endif // ZCC_IMPORT_ONNXIMPORTER_H
