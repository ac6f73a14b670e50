//===- NarrowFloat.h - bfloat16 and float16 storage -------------*- C++ -*-===//
//
// 16-bit floats in memory, float32 math: what the CPU kernels and the
// communicators (16-bit collectives, --comm-dtype) load and store. Stores
// round to nearest even, as GPU kernels and NCCL do.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_NARROWFLOAT_H
#define ZRT_SUPPORT_NARROWFLOAT_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

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

/// A float8 in memory (issue 54's emulation of Hopper's FP8): |E| exponent
/// and |M| mantissa bits with exponent bias |Bias|; |Finite| formats (OCP's
/// E4M3FN) have no infinities and one NaN pattern (S.1111.111), the others
/// (E5M2) IEEE's infinities and NaNs. Stores round to nearest even and
/// saturate: beyond the largest finite value (infinities included) they
/// give it, as `cvt.rn.satfinite` does; NaN stays NaN.
template <int E, int M, int Bias, bool Finite> struct Float8 {
  uint8_t bits;
  static constexpr int kTop = (1 << E) - 1;
  /// The largest finite code's magnitude bits, and the (quiet) NaN's.
  static constexpr uint8_t kMaxCode = Finite ? (uint8_t)((kTop << M) | ((1 << M) - 2))
                                             : (uint8_t)(((kTop - 1) << M) | ((1 << M) - 1));
  static constexpr uint8_t kNaN =
      Finite ? (uint8_t)((kTop << M) | ((1 << M) - 1)) : (uint8_t)((kTop << M) | (1 << (M - 1)));
  Float8() = default;
  Float8(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    const uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) {
      bits = sign | kNaN;
      return;
    }
    // The float8 quantum at the value's binade (the subnormal quantum below
    // the smallest normal); the value in quanta, rounded to nearest even.
    const int e = a ? (int)(a >> 23) - 127 : -200;
    const int quantumExp = std::max(e, 1 - Bias) - M; // log2 of the quantum
    uint32_t code;
    if (a >= 0x7f800000 || e > kTop + 1 - Bias) { // infinite, or far above the range
      code = kMaxCode;
    } else {
      // The significand with its implicit bit, in units of 2^sigExp.
      const uint64_t sig = a < 0x00800000 ? (uint64_t)a : (uint64_t)((a & 0x7fffff) | 0x800000);
      const int sigExp = a < 0x00800000 ? -149 : e - 23;
      const int shift = quantumExp - sigExp; // > 0: float32 is finer
      uint64_t q = 0;
      if (shift < 64) {
        q = sig >> shift;
        const uint64_t rem = sig & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
          ++q;
      }
      // q quanta: below 2^M a subnormal (exponent field 0), else a normal
      // whose field is its binade's; rounding up may carry into the next.
      uint32_t field = std::max(e, 1 - Bias) - (1 - Bias) + (q >= (uint64_t(1) << M) ? 1 : 0);
      if (q >= (uint64_t(2) << M)) {
        q >>= 1;
        ++field;
      }
      code = q < (uint64_t(1) << M) ? (uint32_t)q : (field << M) | (uint32_t)(q & ((1u << M) - 1));
      code = std::min<uint32_t>(code, kMaxCode);
    }
    bits = (uint8_t)(sign | code);
  }
  operator float() const {
    const uint32_t sign = (uint32_t)(bits & 0x80) << 24, mag = bits & 0x7f;
    const int e = (int)(mag >> M), m = (int)(mag & ((1 << M) - 1));
    if (Finite ? mag == kNaN : (e == kTop && m))
      return std::numeric_limits<float>::quiet_NaN();
    float v = !Finite && e == kTop ? std::numeric_limits<float>::infinity()
              : e == 0             ? std::ldexp((float)m, 1 - Bias - M)
                                   : std::ldexp((float)((1 << M) | m), e - Bias - M);
    return sign ? -v : v;
  }
};
/// OCP E4M3FN (max 448): the forward operands of FP8 GEMMs.
using F8E4M3 = Float8<4, 3, 7, true>;
/// E5M2 (max 57344, infinities): gradients, where range matters more.
using F8E5M2 = Float8<5, 2, 15, false>;

} // namespace zrt

#endif // ZRT_SUPPORT_NARROWFLOAT_H
