//===- NpyFuzzer.cpp - libFuzzer target for .npy and token files ----------===//
//
// Arbitrary bytes as a .npy array (train/Npy.h) and as a token file of
// 2- and 4-byte tokens cut into sequences (train/Data.h's parseTokenLayout,
// the sequence length from the first byte), every sequence decoded.
//
//===----------------------------------------------------------------------===//
#include "train/Data.h"
#include "train/Npy.h"

#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size), error;
  zrt::NpyArray array;
  (void)zrt::parseNpy(bytes, array, error);
  if (size > 0) {
    int64_t seq = (int64_t)data[0] - 8; // includes 0 and negative lengths
    for (int width : {2, 4}) {
      zrt::TokenLayout layout;
      if (!zrt::parseTokenLayout(bytes.data(), bytes.size(), "tokens.bin", width, seq, layout))
        continue;
      std::vector<int64_t> x(layout.seq), y(layout.seq);
      for (int64_t i = 0; i < layout.sequences; ++i)
        zrt::readTokenSequence(layout, bytes.data(), i, x.data(), y.data());
    }
  }
  return 0;
}
