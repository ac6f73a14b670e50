//===- DeepSpeedConfigFuzzer.cpp - libFuzzer target for DeepSpeed configs -===//
//
// Arbitrary bytes as a DeepSpeed JSON config (lib/Config): the shape checks
// (depth, duplicate keys), llvm::json's parser and every key's reader. Built
// by scripts/fuzz.sh with clang against LLVM's Support library (the
// compiler half); seeds: ../shared/ds_configs.
//
//===----------------------------------------------------------------------===//
#include "zcc/Config/DeepSpeedConfig.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto config = zcc::parseDeepSpeedConfig(text, "fuzz.json");
  if (!config)
    llvm::consumeError(config.takeError());
  return 0;
}
