//===- Quantization.h - blockwise int8/int4 layout shared by CPU and CUDA -*- C++ -*-===//
//
// The quantize / dequantize kernels' attributes and index arithmetic
// (cpu/Quantize.cpp, cuda/Quantize.cu): both backends read the ints the same
// way and must agree bit for bit on where a value is read from and how a
// 4-bit value is packed. Plain C++ for both halves of the build (as
// Philox.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_QUANTIZATION_H
#define ZRT_KERNELS_QUANTIZATION_H

#include <cstdint>
#include <vector>

#ifndef ZRT_HOST_DEVICE
#if defined(__CUDACC__)
#define ZRT_HOST_DEVICE __host__ __device__
#else
#define ZRT_HOST_DEVICE
#endif
#endif

namespace zrt {

/// quantize's ints: the block size, then optionally the bits (8), then
/// optionally A and G (qgZ's reordering: the input's A x G chunks quantized
/// in G x A order, chunk a * G + g at position g * A + a).
struct QuantizeAttrs {
  int64_t block = 0, bits = 8, outer = 1, inner = 1;
  static QuantizeAttrs of(const std::vector<int64_t> &ints) {
    QuantizeAttrs a;
    a.block = ints.empty() ? 0 : ints[0];
    if (ints.size() >= 2)
      a.bits = ints[1];
    if (ints.size() == 4)
      a.outer = ints[2], a.inner = ints[3];
    return a;
  }
};

/// dequantize's ints: the block size, then optionally parts, average (0/1)
/// and the bits.
struct DequantizeAttrs {
  int64_t block = 0, parts = 1, bits = 8;
  bool average = false;
  static DequantizeAttrs of(const std::vector<int64_t> &ints) {
    DequantizeAttrs a;
    a.block = ints.empty() ? 0 : ints[0];
    if (ints.size() >= 3)
      a.parts = ints[1], a.average = ints[2] != 0;
    if (ints.size() == 4)
      a.bits = ints[3];
    return a;
  }
};

/// The largest quantized magnitude at |bits| (symmetric: [-L, L]).
ZRT_HOST_DEVICE inline float quantizeLevels(int64_t bits) { return bits == 8 ? 127.0f : 7.0f; }

/// Where quantized element |at| (of n) is read from when the input is
/// outer x inner chunks quantized in inner x outer order (the identity
/// without chunks).
ZRT_HOST_DEVICE inline int64_t quantizeSource(int64_t at, int64_t n, int64_t outer, int64_t inner) {
  if (outer * inner <= 1)
    return at;
  const int64_t chunk = n / (outer * inner);
  const int64_t g = at / (outer * chunk), a = at / chunk % outer;
  return (a * inner + g) * chunk + at % chunk;
}

/// The byte holding two 4-bit values, |even| in the low nibble.
ZRT_HOST_DEVICE inline int8_t packNibbles(int even, int odd) {
  return (int8_t)((even & 0xF) | ((odd & 0xF) << 4));
}

/// Quantized element |k| of |q| (|bits| per element; 4: two's complement
/// nibbles, element 2i low).
ZRT_HOST_DEVICE inline int quantizedValue(const int8_t *q, int64_t k, int64_t bits) {
  if (bits == 8)
    return q[k];
  const uint8_t b = (uint8_t)q[k / 2];
  const int nibble = k % 2 ? b >> 4 : b & 0xF;
  return nibble >= 8 ? nibble - 16 : nibble;
}

} // namespace zrt

#endif // ZRT_KERNELS_QUANTIZATION_H
