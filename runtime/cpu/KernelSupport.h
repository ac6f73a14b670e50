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
#include "support/NarrowFloat.h"
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
