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

namespace zrt::cuda {
namespace {

template <typename T>
__global__ void quantizeKernel(const T *in, int8_t *q, float *scales, int64_t block, int bits,
                               int64_t n, int64_t outer, int64_t inner) {
  const int64_t base = (int64_t)blockIdx.x * block;
  // qgZ's reordering (chunks outer x inner read in inner x outer order): a
  // block lies in one chunk, so its source is contiguous.
  if (outer * inner > 1) {
    const int64_t chunk = n / (outer * inner);
    const int64_t g = base / (outer * chunk), a = base / chunk % outer;
    in += (a * inner + g) * chunk + base % chunk - base;
  }
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
  const float levels = bits == 8 ? 127.0f : 7.0f;
  const float scale = __fdiv_rn(warps[0], levels);
  if (threadIdx.x == 0)
    scales[blockIdx.x] = scale;
  auto level = [&](int64_t k) {
    float v = scale > 0 ? rintf(__fdiv_rn(toF(in[base + k]), scale)) : 0.0f;
    return (int8_t)fminf(levels, fmaxf(-levels, v));
  };
  if (bits == 8) {
    for (int64_t k = threadIdx.x; k < block; k += blockDim.x)
      q[base + k] = level(k);
    return;
  }
  for (int64_t k = 2 * threadIdx.x; k < block; k += 2 * blockDim.x)
    q[(base + k) / 2] = (int8_t)((level(k) & 0xF) | (uint8_t)((level(k + 1) & 0xF) << 4));
}

/// Quantized element k of |q| (|bits| per element).
__device__ int quantized(const int8_t *q, int64_t k, int bits) {
  if (bits == 8)
    return q[k];
  int8_t b = q[k / 2];
  int nibble = k % 2 ? ((uint8_t)b >> 4) : (b & 0xF); // two's complement in 4 bits
  return nibble >= 8 ? nibble - 16 : nibble;
}

template <typename T>
__global__ void dequantizeKernel(const int8_t *q, const float *scales, T *out, int64_t block,
                                 int64_t n, int64_t parts, bool average, int bits) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x) {
    float acc = __fmul_rn((float)quantized(q, k, bits), scales[k / block]);
    for (int64_t p = 1; p < parts; ++p) {
      int64_t at = p * n + k;
      acc = __fadd_rn(acc, __fmul_rn((float)quantized(q, at, bits), scales[at / block]));
    }
    out[k] = fromF<T>(average ? __fdiv_rn(acc, (float)parts) : acc);
  }
}

} // namespace

bool supportsQuantize(const KernelCall &c) { return c.in[0].numel() / c.ints[0] < (1ll << 31); }
bool supportsDequantize(const KernelCall &) { return true; }

Status launchQuantize(const KernelCall &c, CudaContext &ctx) {
  const int64_t block = c.ints[0], blocks = c.in[0].numel() / block;
  const int bits = c.ints.size() >= 2 ? (int)c.ints[1] : 8;
  const int64_t n = c.in[0].numel();
  const int64_t outer = c.ints.size() == 4 ? c.ints[2] : 1,
                inner = c.ints.size() == 4 ? c.ints[3] : 1;
  if (blocks == 0)
    return Status::ok();
  int8_t *q = c.out[0].as<int8_t>();
  float *scales = c.out[1].as<float>();
  switch (c.in[0].dtype) {
  case DType::BF16:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<__nv_bfloat16>(), q, scales,
                                                        block, bits, n, outer, inner);
    break;
  case DType::F16:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<__half>(), q, scales, block,
                                                        bits, n, outer, inner);
    break;
  default:
    quantizeKernel<<<blocks, kThreads, 0, ctx.stream>>>(c.in[0].as<float>(), q, scales, block, bits,
                                                        n, outer, inner);
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchDequantize(const KernelCall &c, CudaContext &ctx) {
  const int64_t n = c.out[0].numel(), block = c.ints[0];
  const int64_t parts = c.ints.size() > 1 ? c.ints[1] : 1;
  const bool average = c.ints.size() > 1 && c.ints[2];
  const int bits = c.ints.size() == 4 ? (int)c.ints[3] : 8;
  if (n == 0)
    return Status::ok();
  const int8_t *q = c.in[0].as<int8_t>();
  const float *scales = c.in[1].as<float>();
  switch (c.out[0].dtype) {
  case DType::BF16:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        q, scales, c.out[0].as<__nv_bfloat16>(), block, n, parts, average, bits);
    break;
  case DType::F16:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(q, scales, c.out[0].as<__half>(),
                                                                block, n, parts, average, bits);
    break;
  default:
    dequantizeKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(q, scales, c.out[0].as<float>(),
                                                                block, n, parts, average, bits);
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

} // namespace zrt::cuda
