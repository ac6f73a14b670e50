//===- ManifestFuzzer.cpp - libFuzzer target for checkpoint manifests -----===//
//
// Arbitrary bytes as a checkpoint's manifest.pb: parsed, its checksum and
// every field validated (train/Checkpoint.h); a manifest that validates is
// consolidated from zero-filled shards of the sizes it names, since
// validation promises that export then reads nothing out of bounds and
// allocates no more than the shards hold. Seeds: test/fuzz/corpus/manifest/.
//
//===----------------------------------------------------------------------===//
#include "train/Checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  zrt::plan::Checkpoint manifest;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (!zrt::parseManifest(bytes, "manifest.pb", manifest))
    return 0;
  // Keep runs small (a manifest may name shards of up to 1 PiB): what is
  // fuzzed is the validation, not the size of a zero-filled copy.
  if (manifest.state_arena_bytes() * manifest.world_size() > (int64_t(1) << 20))
    return 0;
  std::vector<std::string> ranks(manifest.world_size(),
                                 std::string(manifest.state_arena_bytes(), '\0'));
  std::vector<zrt::NamedTensor> tensors;
  (void)zrt::consolidateShards("ck", manifest, ranks, tensors);
  return 0;
}
