//===- Quantize.cu - blockwise int8 quantization (ZeRO++ qwZ) -------------===//
//
// The CPU kernels' arithmetic (cpu/Quantize.cpp), bit for bit: one thread
// block per quantization block finds max |x|, scale = max / 127 and each
// q = x / scale rounded half to even (IEEE division and multiplication, as
// the CPU's), clamped to [-127, 127]; dequantize multiplies back.
//
//===----------------------------------------------------------------------===//
#include "cuda/DeviceFloat.h"
#include "cuda/KernelSupport.cuh"

namespace zrt::cuda {
namespace {

template <typename T>
__global__ void quantizeKernel(const T *in, int8_t *q, float *scales, int64_t block) {
  const int64_t base = (int64_t)blockIdx.x * block;
  float peak = 0;
  for (int64_t k = threadIdx.x; k < block; k += blockDim.x)
    peak = fmaxf(peak, fabsf(toF(in[base + k])));
  for (int off = 16; off > 0; off /= 2)
    peak = fmaxf(peak, __shfl_xor_sync(0xffffffffu, peak, off));
  __shared__ float warps[32];
  if (threadIdx.x % 32 == 0)
    warps[threadIdx.x / 32] = peak;
  __syncthreads();
  if (threadIdx.x < 32) {
    peak = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off /= 2)
      peak = fmaxf(peak, __shfl_xor_sync(0xffffffffu, peak, off));
    if (threadIdx.x == 0)
      warps[0] = peak;
  }
  __syncthreads();
  const float scale = __fdiv_rn(warps[0], 127.0f);
  if (threadIdx.x == 0)
    scales[blockIdx.x] = scale;
  for (int64_t k = threadIdx.x; k < block; k += blockDim.x) {
    float v = scale > 0 ? rintf(__fdiv_rn(toF(in[base + k]), scale)) : 0.0f;
    q[base + k] = (int8_t)fminf(127.0f, fmaxf(-127.0f, v));
  }
}

template <typename T>
__global__ void dequantizeKernel(const int8_t *q, const float *scales, T *out, int64_t block,
                                 int64_t n) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x)
    out[k] = fromF<T>(__fmul_rn((float)q[k], scales[k / block]));
}

} // namespace

bool supportsQuantize(const KernelCall &c) { return c.in[0].numel() / c.ints[0] < (1ll << 31); }
bool supportsDequantize(const KernelCall &) { return true; }

Status launchQuantize(const KernelCall &c, CudaContext &ctx) {
  const int64_t block = c.ints[0], blocks = c.in[0].numel() / block;
  if (blocks == 0)
    return Status::ok();
  int8_t *q = c.out[0].as<int8_t>();
  float *scales = c.out[1].as<float>();
  switch (c.in[0].dtype) {
  case DType::BF16:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<__nv_bfloat16>(), q, scales,
                                                        block);
    break;
  case DType::F16:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<__half>(), q, scales, block);
    break;
  default:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<float>(), q, scales, block);
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchDequantize(const KernelCall &c, CudaContext &ctx) {
  const int64_t n = c.out[0].numel(), block = c.ints[0];
  if (n == 0)
    return Status::ok();
  const int8_t *q = c.in[0].as<int8_t>();
  const float *scales = c.in[1].as<float>();
  switch (c.out[0].dtype) {
  case DType::BF16:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        q, scales, c.out[0].as<__nv_bfloat16>(), block, n);
    break;
  case DType::F16:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(q, scales, c.out[0].as<__half>(),
                                                                block, n);
    break;
  default:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(q, scales, c.out[0].as<float>(),
                                                                block, n);
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

} // namespace zrt::cuda
