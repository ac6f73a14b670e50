//===- TracePageFuzzer.cpp - libFuzzer target for zrun trace-page inputs ---===//
//
// Arbitrary bytes as a Chrome trace for `zrun trace-page` (exec/Trace.h's
// writeTracePage): the JSON parsed (its depth checked first), its events
// validated and merged, and the timeline page rendered with the data
// embedded in it. Seeds: test/fuzz/corpus/trace-page/.
//
//===----------------------------------------------------------------------===//
#include "exec/Trace.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string in = "/tmp/zrt-fuzz-trace-" + std::to_string(getpid()) + ".json",
                           out = "/tmp/zrt-fuzz-trace-" + std::to_string(getpid()) + ".html";
  FILE *f = std::fopen(in.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  size_t slices = 0;
  (void)zrt::writeTracePage({in}, out, slices);
  std::remove(out.c_str());
  return 0;
}
