//===- SafetensorsFuzzer.cpp - libFuzzer target for safetensors files ------===//
//
// Arbitrary bytes as a .safetensors file (train/Weights.h's WeightFile, what
// zrun --weights reads from a checkpoint): the header parsed and checked
// against the file's size, then every tensor it declares checked and read
// as float32 (whole, and its second half as a stage-3 rank reads a slice).
// Seeds: test/fuzz/corpus/safetensors/.
//
//===----------------------------------------------------------------------===//
#include "train/Weights.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // WeightFile reads paths: the input goes to a file of this process's own.
  static const std::string path = "/tmp/zrt-fuzz-" + std::to_string(getpid()) + ".safetensors";
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  zrt::WeightFile weights;
  if (zrt::WeightFile::open(path, weights)) {
    std::vector<float> values;
    for (const std::string &name : weights.names()) {
      std::vector<int64_t> shape = weights.shape(name);
      int64_t n = 1;
      for (int64_t d : shape)
        n = d > 0 && n <= (int64_t(1) << 20) / d ? n * d : (d == 0 ? 0 : -1);
      if (n < 0 || !weights.check(name, shape))
        continue; // too large to read here, or refused
      (void)weights.read(name, shape, values);
      (void)weights.read(name, shape, values, n / 2, n - n / 2);
    }
  }
  std::remove(path.c_str());
  return 0;
}
