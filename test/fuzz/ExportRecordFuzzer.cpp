//===- ExportRecordFuzzer.cpp - libFuzzer target for ONNX export records --===//
//
// Arbitrary bytes as an ONNX model's metadata_props (zcc/Import/ExportRecord.h):
// records separated by NUL, each KEY=VALUE (the key up to the first '='), read
// against a model whose float initializers are w, b, wte, lm_head.weight and
// emb. Exercises the depth check, llvm::json's parser and every zcc.* key's
// reader. Built by scripts/fuzz.sh with clang against LLVM's Support library;
// seeds: test/fuzz/corpus/export-record (the records of examples/models).
//
//===----------------------------------------------------------------------===//
#include "zcc/Import/ExportRecord.h"

#include <cstdint>
#include <utility>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const llvm::StringSet<> floats = {"w", "b", "wte", "lm_head.weight", "emb"};
  llvm::StringRef rest(reinterpret_cast<const char *>(data), size);
  std::vector<std::pair<llvm::StringRef, llvm::StringRef>> metadata;
  while (!rest.empty()) {
    auto [record, tail] = rest.split('\0');
    metadata.push_back(record.split('='));
    rest = tail;
  }
  auto parsed = zcc::parseExportRecord(metadata, floats);
  if (!parsed)
    llvm::consumeError(parsed.takeError());
  return 0;
}
