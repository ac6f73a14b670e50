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

/// 2^x by the special-function unit (ex2.approx.ftz: relative error ~2^-22;
/// 2^-inf = 0): one instruction where expf takes about eight. The attention
/// softmax folds scale * log2(e) into one FFMA per score, as FlashAttention
/// does; the cross-entropy rows take exp(d) as 2^(d log2(e)).
__device__ __forceinline__ float exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

} // namespace zrt

#endif // ZRT_CUDA_DEVICEFLOAT_H
