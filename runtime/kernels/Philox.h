//===- Philox.h - the dropout mask's counter-based generator -----*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011; the generator of cuRAND and of PyTorch's CUDA dropout): four
// 32-bit words of a counter, encrypted under a 64-bit key in ten rounds,
// give four random words. Nothing is carried from one call to the next, so
// element e's bits depend on (key, counter) alone: the CPU and CUDA kernels
// compute the same mask, any thread in any order, and a recomputed or
// backward dropout reproduces the forward's exactly.
//
// Dropout's use (docs/models.md, "Dropout"): the key is the run's seed
// (zrun --seed); the counter is (element-in-sample / 4, sample position in
// the data stream, the Dropout node's key). An element is kept when the top
// 24 bits of its word are at least round(ratio * 2^24).
//
// Plain C++ with no library: both halves of the build include it (host code
// and CUDA device code).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_PHILOX_H
#define ZRT_KERNELS_PHILOX_H

#include <cstdint>

#if defined(__CUDACC__)
#define ZRT_HOST_DEVICE __host__ __device__
#else
#define ZRT_HOST_DEVICE
#endif

namespace zrt {

struct PhiloxWords {
  uint32_t w[4];
};

ZRT_HOST_DEVICE inline PhiloxWords philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                              uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// Dropout's parameters for one tensor of |samples| samples (its leading
/// elements: numel / samples per sample).
struct DropoutMask {
  uint64_t seed = 0;      // zrun --seed
  uint64_t position = 0;  // the stream position of the tensor's first sample
  uint32_t key = 0;       // the Dropout node's (zcc: a hash of its output's name)
  uint32_t threshold = 0; // round(ratio * 2^24): words below it drop
  int64_t perSample = 1;  // elements per sample

  /// The words of element |e|'s group: elements 4j..4j+3 of a sample share
  /// one (when a sample's size is a multiple of 4, four consecutive
  /// elements of the tensor do).
  ZRT_HOST_DEVICE PhiloxWords groupWords(int64_t e) const {
    uint64_t sample = position + (uint64_t)(e / perSample);
    uint64_t group = (uint64_t)(e % perSample) >> 2;
    return philox4x32((uint32_t)group, (uint32_t)(group >> 32) ^ (uint32_t)(sample >> 32),
                      (uint32_t)sample, key, (uint32_t)seed, (uint32_t)(seed >> 32));
  }
  /// Whether a word keeps its element.
  ZRT_HOST_DEVICE bool keeps(uint32_t word) const { return (word >> 8) >= threshold; }
  /// Whether element |e| of the tensor is kept.
  ZRT_HOST_DEVICE bool keep(int64_t e) const { return keeps(groupWords(e).w[(e % perSample) & 3]); }
};

/// round(ratio * 2^24) for 0 <= ratio < 1.
inline uint32_t dropoutThreshold(double ratio) { return (uint32_t)(ratio * 16777216.0 + 0.5); }

/// The scale of a kept element, 1 / (1 - ratio), as every kernel computes it.
inline float dropoutScale(double ratio) { return (float)(1.0 / (1.0 - ratio)); }

} // namespace zrt

#endif // ZRT_KERNELS_PHILOX_H
