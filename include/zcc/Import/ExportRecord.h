//===- ExportRecord.h - the zcc.* metadata of an exported ONNX model -*- C++ -*-===//
//
// tools/zcc-export writes an export record into the ONNX model's
// metadata_props (docs/finetune.md): which float initializers are the
// module's parameters (`zcc.parameters`), their names in the module
// (`zcc.names`), tied groups (`zcc.tied`), embeddings' padding rows
// (`zcc.padding_idx`), a mixture of experts' auxiliary loss coefficient
// (`zcc.aux_loss`) and the source config.json (`zcc.config`). Each value is
// JSON from a file a user hands zcc, so it is untrusted: this reader checks
// depth before parsing and every shape after, and is independent of MLIR so
// that libFuzzer can drive it alone (test/fuzz/ExportRecordFuzzer.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_IMPORT_EXPORTRECORD_H
#define ZCC_IMPORT_EXPORTRECORD_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zcc {

/// The parsed record; a member is empty (or nullopt) when its key is absent.
struct ExportRecord {
  /// zcc.parameters: the float initializers that train.
  std::optional<std::vector<std::string>> parameters;
  /// zcc.names: initializer -> the module's parameter name (JSON object order is not kept).
  std::optional<std::vector<std::pair<std::string, std::string>>> names;
  /// zcc.tied: groups of two or more parameter names.
  std::optional<std::vector<std::vector<std::string>>> tied;
  /// zcc.padding_idx: embedding table -> its padding row.
  std::vector<std::pair<std::string, int64_t>> paddingIdx;
  /// zcc.aux_loss: graph output -> coefficient.
  std::optional<std::vector<std::pair<std::string, double>>> auxLoss;
  /// zcc.config: the source config.json, verbatim (a JSON object).
  std::optional<std::string> config;
};

/// Reads the `zcc.*` entries of |metadata| (key, value pairs in file order;
/// other keys are ignored). |floatInitializers| are the model's float
/// initializers, which the names in the record must be. The error reads
/// "metadata 'KEY' WHAT (the export record tools/zcc-export writes;
/// re-export the model)", with untrusted text clipped.
llvm::Expected<ExportRecord>
parseExportRecord(llvm::ArrayRef<std::pair<llvm::StringRef, llvm::StringRef>> metadata,
                  const llvm::StringSet<> &floatInitializers);

} // namespace zcc

#endif // ZCC_IMPORT_EXPORTRECORD_H
