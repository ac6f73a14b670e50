//===- SafetensorsIndexFuzzer.cpp - libFuzzer target for safetensors indexes ===//
//
// Arbitrary bytes as a Hugging Face checkpoint folder's
// model.safetensors.index.json (train/Weights.h's WeightFile, what zrun
// --weights FOLDER reads), beside one small valid shard, shard.safetensors
// (a float32 "w" [2]), that the index may name: the index parsed, its
// weight_map checked, the shards it names opened and their tensors read.
// Seeds: test/fuzz/corpus/safetensors-index/.
//
//===----------------------------------------------------------------------===//
#include "train/Weights.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A folder of this process's own, made once: the shard, then the index.
  static const std::string dir = [] {
    std::string d = "/tmp/zrt-fuzz-index-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    const char header[] = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    uint64_t n = sizeof header - 1;
    FILE *f = std::fopen((d + "/shard.safetensors").c_str(), "wb");
    std::fwrite(&n, 8, 1, f);
    std::fwrite(header, 1, n, f);
    float w[2] = {1.5f, -2.0f};
    std::fwrite(w, sizeof w, 1, f);
    std::fclose(f);
    return d;
  }();
  FILE *f = std::fopen((dir + "/model.safetensors.index.json").c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  zrt::WeightFile weights;
  if (zrt::WeightFile::open(dir, weights)) {
    std::vector<float> values;
    for (const std::string &name : weights.names()) {
      std::vector<int64_t> shape = weights.shape(name);
      if (weights.check(name, shape))
        (void)weights.read(name, shape, values);
    }
  }
  return 0;
}
