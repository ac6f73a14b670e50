//===- NarrowFloat.h - bfloat16 and float16 storage -------------*- C++ -*-===//
//
// 16-bit floats in memory, float32 math: what the CPU kernels and the
// communicators (16-bit collectives, --comm-dtype) load and store. Stores
// round to nearest even, as GPU kernels and NCCL do.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_NARROWFLOAT_H
#define ZRT_SUPPORT_NARROWFLOAT_H

#include <cstdint>
#include <cstring>

namespace zrt {

/// A bfloat16 in memory. Kernels compute in float32 and round results to
/// nearest even on store, as GPU bf16 kernels do.
struct BF16 {
  uint16_t bits;
  BF16() = default;
  BF16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) // NaN: keep it a quiet NaN
      bits = (uint16_t)((u >> 16) | 0x40);
    else
      bits = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  operator float() const {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// An IEEE binary16 in memory; float32 math, round to nearest even on store.
struct F16 {
  uint16_t bits;
  F16() = default;
  F16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax > 0x7f800000) { // NaN
      bits = (uint16_t)(sign | 0x7e00);
    } else if (ax >= 0x477ff000) { // >= 65520 rounds to infinity
      bits = (uint16_t)(sign | 0x7c00);
    } else if (ax < 0x38800000) { // below 2^-14: subnormal or zero
      uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
      int shift = 126 - (int)e;
      if (shift > 24) {
        bits = (uint16_t)sign;
      } else {
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
          ++h;
        bits = (uint16_t)(sign | h);
      }
    } else {
      uint32_t h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffff) >> 13), rem = ax & 0x1fff;
      if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        ++h;
      bits = (uint16_t)(sign | h);
    }
  }
  operator float() const {
    uint32_t sign = (uint32_t)(bits & 0x8000) << 16, e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
    uint32_t x;
    if (e == 0) {
      float v = (float)m * 5.9604644775390625e-8f; // m * 2^-24
      return sign ? -v : v;
    }
    x = e == 31 ? sign | 0x7f800000 | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

} // namespace zrt

#endif // ZRT_SUPPORT_NARROWFLOAT_H
