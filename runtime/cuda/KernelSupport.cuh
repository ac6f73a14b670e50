//===- KernelSupport.cuh - what the CUDA kernel families share ---*- CUDA -*-===//
//
// Private to runtime/cuda's kernel files: launch geometry, broadcasting
// index maps, the float dispatch over float32/bfloat16/float16 storage,
// block reductions for row kernels, the error slot, and the declarations of
// every kernel's supports/launch pair, one per entry of kernels/Kernels.def
// (cuda/KernelTable.cu puts them in the table). The helpers have internal
// linkage: each kernel file gets its own copy of the device code it uses.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_KERNELSUPPORT_CUH
#define ZRT_CUDA_KERNELSUPPORT_CUH

#include "cuda/CudaCheck.h"
#include "cuda/CudaKernels.h"
#include "cuda/DeviceFloat.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace zrt::cuda {

#define ZRT_KERNEL(Id, Name)                                                                       \
  bool supports##Id(const KernelCall &c);                                                          \
  Status launch##Id(const KernelCall &c, CudaContext &ctx);
#include "kernels/Kernels.def"

namespace {

constexpr int kMaxRank = 8;
constexpr int kThreads = 256;

inline int blocksFor(int64_t n) {
  return (int)std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 4));
}

/// The output's shape and each input's element strides over it (0 where the
/// input broadcasts), aligned from the right as NumPy does.
struct Broadcast {
  int rank = 0;
  int64_t shape[kMaxRank];
  int64_t stride[2][kMaxRank];
};

inline bool makeBroadcast(const std::vector<int64_t> &out,
                          const std::vector<std::vector<int64_t>> &ins, Broadcast &b) {
  if (out.size() > (size_t)kMaxRank || ins.size() > 2)
    return false;
  b.rank = (int)out.size();
  for (int d = 0; d < b.rank; ++d)
    b.shape[d] = out[d];
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::vector<int64_t> &in = ins[i];
    int lead = b.rank - (int)in.size();
    int64_t stride = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      int id = d - lead;
      if (id < 0 || in[id] == 1) {
        b.stride[i][d] = 0;
      } else {
        b.stride[i][d] = stride;
      }
      if (id >= 0)
        stride *= in[id];
    }
  }
  return true;
}

inline bool isFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

/// Whether every operand's rank fits the index maps (kMaxRank).
inline bool ranksFit(const KernelCall &c) {
  for (const std::vector<TensorRef> *list : {&c.in, &c.out})
    for (const TensorRef &t : *list)
      if (t.shape.size() > (size_t)kMaxRank)
        return false;
  return true;
}

/// Up to three broadcast inputs.
struct Broadcast3 {
  int rank = 0;
  int64_t shape[kMaxRank];
  int64_t stride[3][kMaxRank];
};

inline Broadcast3 makeBroadcast3(const std::vector<int64_t> &out,
                                 const std::vector<std::vector<int64_t>> &ins) {
  Broadcast3 b;
  b.rank = (int)out.size();
  for (int d = 0; d < b.rank; ++d)
    b.shape[d] = out[d];
  for (size_t i = 0; i < ins.size(); ++i) {
    int lead = b.rank - (int)ins[i].size();
    int64_t stride = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      int id = d - lead;
      b.stride[i][d] = (id < 0 || ins[i][id] == 1) ? 0 : stride;
      if (id >= 0)
        stride *= ins[i][id];
    }
  }
  return b;
}

__device__ __forceinline__ void offsets3(const Broadcast3 &d, int64_t i, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    int64_t c = i % d.shape[k];
    i /= d.shape[k];
    off[0] += c * d.stride[0][k];
    off[1] += c * d.stride[1][k];
    off[2] += c * d.stride[2][k];
  }
}

#define ZRT_GRID_LOOP(i, n)                                                                        \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

template <typename T> __device__ __forceinline__ double loadD(const T *p, int64_t k) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>)
    return (double)toF(p[k]);
  else
    return (double)p[k];
}

__device__ void recordError(long long *info, long long code, long long value, long long position,
                            long long bound, long long ignore) {
  if (atomicCAS((unsigned long long *)&info[0], 0ULL, (unsigned long long)code) == 0) {
    info[1] = value;
    info[2] = position;
    info[3] = bound;
    info[4] = ignore;
  }
}

//===----------------------------------------------------------------------===//
// Row kernels: one block per row, float32/double accumulation as the CPU
//===----------------------------------------------------------------------===//

constexpr int kRowThreads = 256;

__device__ double blockSum(double v) {
  __shared__ double shared[32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffff, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < (int)(blockDim.x + 31) / 32; ++w)
      total += shared[w];
    shared[0] = total;
  }
  __syncthreads();
  return shared[0];
}

__device__ float blockMax(float v) {
  __shared__ float shared[32];
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int w = 0; w < (int)(blockDim.x + 31) / 32; ++w)
      m = fmaxf(m, shared[w]);
    shared[0] = m;
  }
  __syncthreads();
  return shared[0];
}

/// Row r of an outer x dim x inner tensor: elements base + j * inner.

#define ZRT_FLOAT_DISPATCH(DT, T, ...)                                                             \
  switch (DT) {                                                                                    \
  case DType::F32: {                                                                               \
    using T = float;                                                                               \
    __VA_ARGS__;                                                                                   \
    break;                                                                                         \
  }                                                                                                \
  case DType::BF16: {                                                                              \
    using T = __nv_bfloat16;                                                                       \
    __VA_ARGS__;                                                                                   \
    break;                                                                                         \
  }                                                                                                \
  default: {                                                                                       \
    using T = __half;                                                                              \
    __VA_ARGS__;                                                                                   \
    break;                                                                                         \
  }                                                                                                \
  }

inline void around(const std::vector<int64_t> &s, int64_t axis, int64_t &outer, int64_t &dim,
                   int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= s[d];
  dim = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d)
    inner *= s[d];
}

inline std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = (int64_t)s.size() - 2; d >= 0; --d)
    st[d] = st[d + 1] * s[d + 1];
  return st;
}

/// where and expand: bytes moved by element size.
__global__ void selectKernel(const unsigned char *cond, const char *a, const char *b, char *o,
                             Broadcast3 d, int64_t n, int es) {
  ZRT_GRID_LOOP(i, n) {
    int64_t off[3];
    offsets3(d, i, off);
    const char *src = (!cond || cond[off[0]]) ? a + off[1] * es : b + off[2] * es;
    for (int k = 0; k < es; ++k)
      o[i * es + k] = src[k];
  }
}

} // namespace
} // namespace zrt::cuda

#endif // ZRT_CUDA_KERNELSUPPORT_CUH
