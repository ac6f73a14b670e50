//===- KernelCall.h - a kernel's operands, for every backend ----*- C++ -*-===//
//
// What a plan instruction hands its kernel, on the CPU (cpu/Kernels.h) and
// the GPU (cuda/CudaKernels.h) alike: typed views of arena memory and the
// integer and float attributes (their meaning per kernel: cpu/Kernels.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_KERNELCALL_H
#define ZRT_KERNELS_KERNELCALL_H

#include "support/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// A tensor the kernels see: a typed, row-major view of arena memory.
struct TensorRef {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  char *data = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  template <typename T> T *as() const { return reinterpret_cast<T *>(data); }
};

struct KernelCall {
  std::vector<TensorRef> in, out;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  /// Device code the compiler generated for the call (plan Kernel.code:
  /// PTX), or null; the CPU kernels compute from ints instead.
  const std::string *code = nullptr;
};

} // namespace zrt

#endif // ZRT_KERNELS_KERNELCALL_H
