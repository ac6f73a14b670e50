//===- BenchSupport.h - what the kernel benchmarks share ---------*- C++ -*-===//
//
// zrt-attention-bench and zrt-moe-bench: failing with the program's name
// (a CUDA error, a kernel's Status), and bfloat16 conversions on the host.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TOOLS_BENCHSUPPORT_H
#define ZCC_TOOLS_BENCHSUPPORT_H

#include "support/Status.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zrt::bench {

/// The program's name in its error messages (main sets it).
inline const char *&programName() {
  static const char *name = "bench";
  return name;
}
[[noreturn]] inline void fail(const char *what, const char *why) {
  std::fprintf(stderr, "%s: %s: %s\n", programName(), what, why);
  std::exit(2);
}
inline void checkCuda(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    fail(what, cudaGetErrorString(e));
}
inline void check(const Status &s, const char *what) {
  if (!s.isOk())
    fail(what, s.message().c_str());
}

/// float -> bfloat16, rounded to nearest even (NaN stays NaN).
inline uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f))
    return 0x7fc0;
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
inline float fromBf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace zrt::bench

#define CHECK_CUDA(x) ::zrt::bench::checkCuda((x), #x)

#endif // ZCC_TOOLS_BENCHSUPPORT_H
