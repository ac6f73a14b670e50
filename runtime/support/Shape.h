//===- Shape.h - NumPy broadcasting, shared by both halves -------*- C++ -*-===//
//
// Header-only and dependency-free, so that the compiler (dialect verifiers,
// import-time folding) and the runtime (kernel checks) apply one rule.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_SHAPE_H
#define ZRT_SUPPORT_SHAPE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace zrt {

/// The NumPy broadcast of shapes |a| and |b| into |out| (any containers of
/// int64_t with size(), operator[], assign()); false if a pair of dimensions
/// is neither equal nor 1.
template <typename A, typename B, typename Out>
bool broadcastShapes(const A &a, const B &b, Out &out) {
  size_t na = a.size(), nb = b.size(), rank = std::max(na, nb);
  out.assign(rank, 1);
  for (size_t k = 0; k < rank; ++k) {
    int64_t x = k < rank - na ? 1 : a[k - (rank - na)];
    int64_t y = k < rank - nb ? 1 : b[k - (rank - nb)];
    if (x != y && x != 1 && y != 1)
      return false;
    out[k] = x == 1 ? y : x;
  }
  return true;
}

} // namespace zrt

#endif // ZRT_SUPPORT_SHAPE_H
