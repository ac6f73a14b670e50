//===- KernelSupport.h - what the CPU kernel families share ------*- C++ -*-===//
//
// Private to runtime/cpu: operand checks, broadcasting, 16-bit float storage
// (bfloat16 and float16 computed in float32, rounded to nearest even on
// store, as GPU kernels do), the elementwise thread pool, and the
// declarations of every kernel's check and run functions, one pair per entry
// of kernels/Kernels.def (cpu/KernelTable.cpp puts them in the table).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPU_KERNELSUPPORT_H
#define ZRT_CPU_KERNELSUPPORT_H

#include "cpu/Kernels.h"
#include "support/Shape.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace zrt::cpu {

#define ZRT_KERNEL(Id, Name)                                                                       \
  std::string check##Id(const KernelCall &c);                                                      \
  Status run##Id(const KernelCall &c);
#include "kernels/Kernels.def"

using Shape = std::vector<int64_t>;

std::string shapeStr(const Shape &s);
/// "float32[2x3]": a tensor's type and shape, for messages.
std::string describe(const TensorRef &t);

inline bool broadcastShape(const Shape &a, const Shape &b, Shape &out) {
  return zrt::broadcastShapes(a, b, out);
}

/// Normalizes a possibly negative gather index |j| into [0, dim).
Status gatherIndex(int64_t &j, int64_t dim);

/// Element strides of |in| seen from |out|'s index space (0 where broadcast).
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out);

/// Calls fn(outIndex, offsets...) for every element of |out|, with the flat
/// offsets of each broadcast operand.
template <size_t N, typename Fn>
void forEachBroadcast(const Shape &out, const std::array<Shape, N> &ins, Fn fn) {
  int64_t n = 1;
  for (int64_t d : out)
    n *= d;
  std::array<std::vector<int64_t>, N> strides;
  bool same = true;
  for (size_t i = 0; i < N; ++i) {
    strides[i] = broadcastStrides(ins[i], out);
    same &= ins[i] == out;
  }
  std::array<int64_t, N> off{};
  if (same) { // fast path: no broadcasting
    for (int64_t k = 0; k < n; ++k) {
      off.fill(k);
      fn(k, off);
    }
    return;
  }
  std::vector<int64_t> coord(out.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    fn(k, off);
    for (int64_t d = (int64_t)out.size() - 1; d >= 0; --d) {
      for (size_t i = 0; i < N; ++i)
        off[i] += strides[i][d];
      if (++coord[d] < out[d])
        break;
      for (size_t i = 0; i < N; ++i)
        off[i] -= strides[i][d] * coord[d];
      coord[d] = 0;
    }
  }
}

inline int64_t numelOf(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// outer x dim x inner decomposition around |axis|.
void around(const Shape &s, int64_t axis, int64_t &outer, int64_t &dim, int64_t &inner);

//===----------------------------------------------------------------------===//
// bfloat16 storage, float32 math
//===----------------------------------------------------------------------===//

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

inline bool isFloatStorage(DType d) {
  return d == DType::F32 || d == DType::BF16 || d == DType::F16;
}
inline bool isNarrowFloat(DType d) { return d == DType::BF16 || d == DType::F16; }

/// Element k of a bfloat16 or float16 tensor as float, and the reverse.
float loadNarrow(const TensorRef &t, int64_t k);
void storeNarrow(const TensorRef &t, int64_t k, float v);

/// Calls fn(T{}) with T = float, BF16 or F16 for |dtype| (a float storage type).
template <typename Fn> Status dispatchFloat(DType dtype, Fn fn) {
  if (dtype == DType::BF16)
    return fn(BF16{});
  if (dtype == DType::F16)
    return fn(F16{});
  return fn(float{});
}

/// Runs a float32 kernel on a call whose float operands may be bfloat16:
/// bfloat16 inputs are widened to float32 copies, bfloat16 outputs computed
/// in float32 and rounded back. The arithmetic is the float32 kernel's.
Status viaFloat32(const KernelCall &c, Status (*run)(const KernelCall &));

//===----------------------------------------------------------------------===//
// Checks: an empty string when the call is well-formed, else what is wrong.
//===----------------------------------------------------------------------===//

std::string arity(const KernelCall &c, size_t nin, size_t nout);
std::string checkBinary(const KernelCall &c, std::initializer_list<DType> dtypes, bool boolResult);
std::string checkUnary(const KernelCall &c, DType dtype);
/// One float storage type (float32 or bfloat16) in and out, one shape.
std::string checkUnaryFloat(const KernelCall &c);
std::string checkInts(const KernelCall &c, size_t n);
inline bool validAxis(int64_t axis, size_t rank) { return axis >= 0 && axis < (int64_t)rank; }

/// Runs fn(begin, end) over [0, n) in blocks on every core (on the caller
/// alone below 256K elements). For elementwise work only: which thread runs
/// which block varies.
void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &fn);

} // namespace zrt::cpu

#endif // ZRT_CPU_KERNELSUPPORT_H
