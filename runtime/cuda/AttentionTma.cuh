//===- AttentionTma.cuh - what the warp-specialised attention kernels share -*- CUDA -*-===//
//
// The pieces of FlashAttention-3's structure the warp-specialised kernels
// (cuda/AttentionFa3.cu: the forward and dq; cuda/AttentionFa3Bwd.cu: dk and
// dv) share: a block of three warpgroups (a producer and two consumers),
// TMA loads counted on mbarriers into 128-byte-swizzled tiles of R x 64
// blocks, the consumers' turns (named barriers), the score products over
// such tiles, and the TMA map of an operand (tensorMap, host).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_ATTENTIONTMA_CUH
#define ZRT_CUDA_ATTENTIONTMA_CUH

#include "cuda/AttentionDevice.cuh"

#include <cuda.h>

#include <cstdint>

namespace zrt {

/// The TMA map of a [B, S, heads, d] operand (rows |rowStride| elements
/// apart) read in boxes of 64 columns x |boxRows| rows of one head, in the
/// 128-byte swizzle; boxes past the tensor's end read zeros
/// (cuda/AttentionFa3.cu).
Status tensorMap(CUtensorMap *map, const void *base, DType type, int64_t d, int64_t heads,
                 int64_t rows, int64_t batch, int64_t rowStride, int boxRows);

namespace attn {
constexpr int kFa3Rows = 128;            // query rows a block: two consumer warpgroups of 64
constexpr int kFa3Threads = 384;         // the producer warpgroup and two consumers
constexpr size_t kFa3SmemLimit = 232448; // a block's shared memory on sm_90 (227 KB)
/// 64-column swizzled blocks a row: a tile of R rows is ColBlocks blocks of
/// R x 64, each R rows of 128 bytes (TMA's box of 64 columns).
template <int D> constexpr int colBlocks() { return (D + 63) / 64; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t smemAddress(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbarrierInit(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemAddress(bar)), "r"(count)
               : "memory");
}
/// Arrives on |bar| and adds |bytes| to the transfers it waits for.
__device__ __forceinline__ void mbarrierExpect(uint64_t *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemAddress(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarrierArrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smemAddress(bar)) : "memory");
}
/// Waits until phase |parity| of |bar| has completed.
__device__ __forceinline__ void mbarrierWait(uint64_t *bar, unsigned parity) {
  asm volatile("{\n.reg .pred done;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT;\n}\n" ::"r"(smemAddress(bar)),
               "r"(parity)
               : "memory");
}
/// A box of the 4-d tensor |map| at (c0, c1, c2, c3) into |dst|, counted on |bar|.
__device__ __forceinline__ void tmaLoad(void *dst, const CUtensorMap *map, uint64_t *bar, int c0,
                                        int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smemAddress(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
               "r"(smemAddress(bar))
               : "memory");
}
/// This block's |count| bytes of the mask map from |first|: copied to
/// |smem| by the whole block where they fit its |cap| bytes (a __syncthreads
/// must follow before they are read), else read in place. The kernels look
/// the map up once or twice a tile on their critical paths; shared memory
/// answers in ~30 cycles where global memory takes hundreds.
__device__ __forceinline__ const unsigned char *blockMap(const unsigned char *tiles, int64_t first,
                                                         int64_t count, unsigned char *smem,
                                                         size_t cap) {
  if (count > (int64_t)cap)
    return tiles + first;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    smem[i] = tiles[first + i];
  return smem;
}
/// The consumers' turns: named barriers 1 and 2, 256 threads each.
__device__ __forceinline__ void turnWait(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void turnPass(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

/// d (64 x 128, this thread's 64) = A B^T (+ d if |accumulate|), A and B
/// K-major 16-column slices in shared memory.
template <typename T>
__device__ __forceinline__ void wgmmaSS128(float d[64], uint64_t a, uint64_t b, int accumulate) {
  // The 64 accumulators as operands %0-%63 (both element types' asm).
#define ZRT_WGMMA_D64                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),     \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),   \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),   \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),   \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),   \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),   \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),   \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define ZRT_WGMMA_M64N128K16(type)                                                                 \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                     \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type " {%0, %1, %2, %3, %4, %5, %6, "    \
  "%7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, "   \
  "%26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "     \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "     \
  "%62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile(ZRT_WGMMA_M64N128K16("bf16") : ZRT_WGMMA_D64 : "l"(a), "l"(b), "r"(accumulate));
  else
    asm volatile(ZRT_WGMMA_M64N128K16("f16") : ZRT_WGMMA_D64 : "l"(a), "l"(b), "r"(accumulate));
#undef ZRT_WGMMA_M64N128K16
#undef ZRT_WGMMA_D64
}

/// Keeps the compiler from moving the definitions of |N| registers past
/// this point (fenceOperands for 32-bit integers).
template <int N> __device__ __forceinline__ void fenceRegisters(uint32_t *x) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+r"(x[i])::"memory");
}

/// s = s scale log2(e) over a warp's 16 rows x 64 keys of a structural
/// mask's tile (maskScores without the bias): -inf for keys past the end,
/// with |causal| above the diagonal or outside the window, with |Docs|
/// before the query's document.
template <bool Docs>
__device__ __forceinline__ void maskHalf(float s[8][4], float sl, bool causal, const MaskFrame &f) {
  const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  int first[2] = {0, 0};
  if constexpr (Docs) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int qi = g + 8 * r, q = qi < f.rowsLeft ? qi : f.rowsLeft - 1;
      first[r] = qi + f.diag - (int)f.positions[q];
    }
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int qi = g + 8 * (e >> 1), kj = nt * 8 + t * 2 + (e & 1);
      bool masked = kj >= f.keysLeft ||
                    (causal && (kj > qi + f.diag || kj <= qi + f.diag - f.window)) ||
                    (Docs && kj < first[e >> 1]);
      s[nt][e] = masked ? -INFINITY : s[nt][e] * sl;
    }
}

/// Issues s (64 x KN) = Q K^T over D columns: |q| this warpgroup's 64 rows
/// of the q tile (blocks QR x 64: a tile of QR rows), |k| the k tile (blocks
/// KN x 64).
template <typename T, int D, int KN, int QR = kFa3Rows>
__device__ __forceinline__ void issueScoresN(const T *q, const T *k, float *s) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint64_t a = swizzledDesc(q + (kk >> 2) * QR * 64) + 2 * (kk & 3);
    uint64_t b = swizzledDesc(k + (kk >> 2) * KN * 64) + 2 * (kk & 3);
    if constexpr (KN == 128)
      wgmmaSS128<T>(s, a, b, kk > 0);
    else
      wgmmaSS<T>(s, a, b, kk > 0);
  }
}

/// Issues o (64 x D) += P V: P packed (pa: KN / 16 slices of 16 keys, mma.sync's
/// A fragments), V the v tile read MN-major, one wgmma a 64-column block
/// (narrower where D ends inside one).
template <typename T, int D, int KN, int C = 0>
__device__ __forceinline__ void issueValueBlocks(const uint32_t a[4], const T *v, int kk,
                                                 float o[D / 8][4]) {
  if constexpr (C < D) {
    constexpr int W = D - C < 64 ? D - C : 64;
    wgmmaRS<T, W>(&o[C / 8][0], a, swizzledDesc(v + (C / 64) * KN * 64 + kk * 16 * 64));
    issueValueBlocks<T, D, KN, C + 64>(a, v, kk, o);
  }
}
template <typename T, int D, int KN>
__device__ __forceinline__ void issueValues(const uint32_t pa[KN / 16][4], const T *v,
                                            float o[D / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < KN / 16; ++kk)
    issueValueBlocks<T, D, KN>(pa[kk], v, kk, o);
}
#endif

} // namespace attn
} // namespace zrt

#endif // ZRT_CUDA_ATTENTIONTMA_CUH
