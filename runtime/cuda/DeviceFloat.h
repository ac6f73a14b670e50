//===- DeviceFloat.h - float <-> storage type conversions on the GPU -*- CUDA -*-===//
//
// Kernels compute in float on float32, bfloat16 and float16 storage: toF
// widens an element, fromF rounds a float back (to nearest even). Shared by
// the CUDA kernel files.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_DEVICEFLOAT_H
#define ZRT_CUDA_DEVICEFLOAT_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace zrt {

template <typename T> __device__ __forceinline__ float toF(T v);
template <> __device__ __forceinline__ float toF<float>(float v) { return v; }
template <> __device__ __forceinline__ float toF<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <> __device__ __forceinline__ float toF<__half>(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T fromF(float v);
template <> __device__ __forceinline__ float fromF<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half fromF<__half>(float v) { return __float2half_rn(v); }

} // namespace zrt

#endif // ZRT_CUDA_DEVICEFLOAT_H
