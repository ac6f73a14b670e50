//===- Quantize.cu - blockwise int8/int4 quantization (ZeRO++ qwZ, qgZ) ---===//
//
// The CPU kernels' arithmetic (cpu/Quantize.cpp), bit for bit: one thread
// block per quantization block finds max |x|, scale = max / L (127 for 8
// bits, 7 for 4) and each q = x / scale rounded half to even (IEEE division
// and multiplication, as the CPU's), clamped to [-L, L], 4-bit values packed
// two a byte (a thread writes a byte); dequantize multiplies back, summing
// qgZ's parts in order in float32 (no fused multiply-add, as the CPU).
//
//===----------------------------------------------------------------------===//
#include "cuda/DeviceFloat.h"
#include "cuda/KernelSupport.cuh"
#include "kernels/Quantization.h"

namespace zrt::cuda {
namespace {

template <typename T>
__global__ void quantizeKernel(const T *in, int8_t *q, float *scales, QuantizeAttrs a, int64_t n) {
  const int64_t block = a.block, base = (int64_t)blockIdx.x * block;
  // qgZ's reordering: a block lies in one chunk, so its source is contiguous.
  in += quantizeSource(base, n, a.outer, a.inner) - base;
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
  const float levels = quantizeLevels(a.bits);
  const float scale = __fdiv_rn(warps[0], levels);
  if (threadIdx.x == 0)
    scales[blockIdx.x] = scale;
  auto level = [&](int64_t k) {
    float v = scale > 0 ? rintf(__fdiv_rn(toF(in[base + k]), scale)) : 0.0f;
    return (int8_t)fminf(levels, fmaxf(-levels, v));
  };
  if (a.bits == 8) {
    for (int64_t k = threadIdx.x; k < block; k += blockDim.x)
      q[base + k] = level(k);
    return;
  }
  for (int64_t k = 2 * threadIdx.x; k < block; k += 2 * blockDim.x)
    q[(base + k) / 2] = packNibbles(level(k), level(k + 1));
}

template <typename T>
__global__ void dequantizeKernel(const int8_t *q, const float *scales, T *out, DequantizeAttrs a,
                                 int64_t n) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x) {
    float acc = __fmul_rn((float)quantizedValue(q, k, a.bits), scales[k / a.block]);
    for (int64_t p = 1; p < a.parts; ++p) {
      int64_t at = p * n + k;
      acc = __fadd_rn(acc, __fmul_rn((float)quantizedValue(q, at, a.bits), scales[at / a.block]));
    }
    out[k] = fromF<T>(a.average ? __fdiv_rn(acc, (float)a.parts) : acc);
  }
}

} // namespace

bool supportsQuantize(const KernelCall &c) { return c.in[0].numel() / c.ints[0] < (1ll << 31); }
bool supportsDequantize(const KernelCall &) { return true; }

Status launchQuantize(const KernelCall &c, CudaContext &ctx) {
  const QuantizeAttrs a = QuantizeAttrs::of(c.ints);
  const int64_t n = c.in[0].numel(), blocks = n / a.block;
  if (blocks == 0)
    return Status::ok();
  int8_t *q = c.out[0].as<int8_t>();
  float *scales = c.out[1].as<float>();
  switch (c.in[0].dtype) {
  case DType::BF16:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<__nv_bfloat16>(), q, scales, a,
                                                        n);
    break;
  case DType::F16:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<__half>(), q, scales, a, n);
    break;
  default:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<float>(), q, scales, a, n);
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchDequantize(const KernelCall &c, CudaContext &ctx) {
  const DequantizeAttrs a = DequantizeAttrs::of(c.ints);
  const int64_t n = c.out[0].numel();
  if (n == 0)
    return Status::ok();
  const int8_t *q = c.in[0].as<int8_t>();
  const float *scales = c.in[1].as<float>();
  switch (c.out[0].dtype) {
  case DType::BF16:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(q, scales,
                                                                c.out[0].as<__nv_bfloat16>(), a, n);
    break;
  case DType::F16:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(q, scales, c.out[0].as<__half>(), a,
                                                                n);
    break;
  default:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(q, scales, c.out[0].as<float>(), a,
                                                                n);
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

} // namespace zrt::cuda
