//===- MoeGemm.cu - grouped GEMMs on Hopper's wgmma ------------------------===//
//
// The experts' GEMMs of a dropless mixture of experts (cuda/MoeGemm.cuh):
// FlashAttention-3's block structure (cuda/AttentionTma.cuh) applied to a
// GEMM. A block of three warpgroups computes a 128 x 128 tile of one
// expert's result: the producer's one thread streams 64-wide slices of both
// operands through TMA into a ring of stages counted on mbarriers, each
// consumer warpgroup multiplies its 64 rows with wgmma and gives the stage
// back once its products are done.
//
// grouped_matmul (y = x W_e over expert e's rows): the rows are contiguous
// in expert order, so the x tile is an ordinary TMA box; rows past the
// expert's end are loaded (the next expert's) but never written. The grid
// covers ceil(m / 128) + experts row tiles, the most the offsets can make;
// a block finds its expert by a warp's scan of the offsets and returns if
// it has none. W_e [n, k] (transposed, nn.Linear's layout) is K-major like
// x; W_e [k, n] is read MN-major, as two 64-column products.
//
// grouped_matmul_rhs_grad (dW_e = left_e^T right_e): the sum runs over the
// expert's rows, 64 a stage; both operands are MN-major. The last stage's
// rows past the expert's end hold the next expert's rows: each consumer
// zeroes them in its own left block (its own shared memory) before the
// products, so they add nothing. An expert without rows writes zeros.
//
// Deterministic: every sum in a fixed order, no atomics.
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionTma.cuh"
#include "cuda/CudaKernels.h"
#include "cuda/MoeGemm.cuh"

namespace zrt {
namespace {
using namespace attn;

constexpr int kTileM = 128, kTileN = 128, kSliceK = 64;
constexpr int kStages = 6;
constexpr int kTileElems = kTileM * kSliceK; // each operand's stage: 128 x 64
constexpr size_t kSmemBytes = 2ull * kStages * kTileElems * 2 + 2 * kStages * 8 + 1024;
static_assert(kSmemBytes <= kFa3SmemLimit);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ int64_t offsetAt(const void *offsets, bool wide, int64_t e) {
  return wide ? static_cast<const int64_t *>(offsets)[e] : static_cast<const int32_t *>(offsets)[e];
}

/// d (64 x 64) (+)= A B over one 16-deep slice, both from shared memory;
/// |TA| / |TB|: the operand is MN-major (transposed).
template <typename T, int TA, int TB>
__device__ __forceinline__ void wgmma64(float d[32], uint64_t a, uint64_t b, int accumulate) {
#define ZRT_D32                                                                                    \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),     \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),   \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),   \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define ZRT_WGMMA64(type)                                                                          \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                     \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " {%0, %1, %2, %3, %4, %5, %6, "     \
  "%7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, "   \
  "%26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile(ZRT_WGMMA64("bf16") : ZRT_D32 : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
  else
    asm volatile(ZRT_WGMMA64("f16") : ZRT_D32 : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
#undef ZRT_WGMMA64
#undef ZRT_D32
}

/// The ring of stages: full[s] completes when stage s's loads land,
/// empty[s] when the consumers' eight warps are done with it.
struct Ring {
  uint64_t *full, *empty;
  __device__ static int stage(int it) { return it % kStages; }
  __device__ static unsigned parity(int it) { return (it / kStages) & 1; }
  __device__ void init() const {
    for (int s = 0; s < kStages; ++s) {
      mbarrierInit(&full[s], 1);
      mbarrierInit(&empty[s], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  /// The producer: waits until stage it's buffers are free and arms it for |bytes|.
  __device__ void acquire(int it, unsigned bytes) const {
    if (it >= kStages)
      mbarrierWait(&empty[stage(it)], parity(it) ^ 1);
    mbarrierExpect(&full[stage(it)], bytes);
  }
  /// A consumer warp gives stage |it| back (after its products are done).
  __device__ void release(int it) const {
    if ((threadIdx.x & 31) == 0)
      mbarrierArrive(&empty[stage(it)]);
  }
};

/// The block's smem: the two operands' rings, 1024-byte aligned (the
/// swizzle's period), then the barriers.
template <typename T> struct Smem {
  T *a, *b;
  Ring ring;
  __device__ explicit Smem(unsigned char *raw) {
    unsigned skew = (1024 - (smemAddress(raw) & 1023)) & 1023;
    a = reinterpret_cast<T *>(raw + skew);
    b = a + kStages * kTileElems;
    ring.full = reinterpret_cast<uint64_t *>(b + kStages * kTileElems);
    ring.empty = ring.full + kStages;
  }
};

/// Row tile |t| of a grouped GEMM: its expert (-1: none, the grid's
/// excess), first row and the expert's end; warp 0 scans the offsets 32
/// experts at a time, counting each expert's 128-row tiles.
struct RowTile {
  int expert;
  int64_t row, end;
};
__device__ void findRowTile(const void *offsets, bool wide, int64_t experts, int64_t t,
                            RowTile *out) {
  const int lane = threadIdx.x & 31;
  if (lane == 0)
    out->expert = -1;
  __syncwarp();
  int64_t before = 0;
  for (int64_t c = 0; c < experts; c += 32) {
    const int64_t e = c + lane;
    const int64_t lo = e < experts ? offsetAt(offsets, wide, e) : 0;
    const int64_t hi = e < experts ? offsetAt(offsets, wide, e + 1) : 0;
    const int64_t count = (hi - lo + kTileM - 1) / kTileM;
    int64_t incl = count;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      int64_t v = __shfl_up_sync(0xffffffff, incl, d);
      if (lane >= d)
        incl += v;
    }
    const int64_t excl = incl - count;
    if (count > 0 && t >= before + excl && t < before + incl) {
      out->expert = (int)e;
      out->row = lo + (t - before - excl) * kTileM;
      out->end = hi;
    }
    before += __shfl_sync(0xffffffff, incl, 31);
    if (before > t)
      break;
  }
}
#endif

/// grouped_matmul: block (n tile, row tile); see the file's comment.
template <typename T, bool KMajorB>
__global__ void __launch_bounds__(kFa3Threads, 1)
    groupedGemmKernel(const __grid_constant__ CUtensorMap xMap,
                      const __grid_constant__ CUtensorMap wMap, const void *offsets, bool wide,
                      int64_t experts, int64_t n, int64_t k, T *y) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char smemRaw[];
  const Smem<T> sm(smemRaw);
  __shared__ RowTile tile;
  const int wg = __shfl_sync(0xffffffff, (int)(threadIdx.x / 128), 0);
  if (threadIdx.x < 32)
    findRowTile(offsets, wide, experts, blockIdx.y, &tile);
  if (threadIdx.x == 0)
    sm.ring.init();
  __syncthreads();
  const int e = tile.expert;
  if (e < 0)
    return;
  const int64_t n0 = (int64_t)blockIdx.x * kTileN;
  const int slices = (int)((k + kSliceK - 1) / kSliceK);

  if (wg == 0) { // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0)
      for (int it = 0; it < slices; ++it) {
        const int s = Ring::stage(it);
        sm.ring.acquire(it, 2 * kTileElems * sizeof(T));
        tmaLoad(sm.a + s * kTileElems, &xMap, &sm.ring.full[s], it * kSliceK, 0, (int)tile.row, 0);
        T *bs = sm.b + s * kTileElems;
        if constexpr (KMajorB)
          tmaLoad(bs, &wMap, &sm.ring.full[s], it * kSliceK, 0, (int)n0, e);
        else
          for (int c = 0; c < 2; ++c)
            tmaLoad(bs + c * 64 * 64, &wMap, &sm.ring.full[s], (int)n0 + 64 * c, 0, it * kSliceK,
                    e);
      }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = wg - 1; // this consumer's 64 rows of the tile
  float acc[64];         // the first slice's products overwrite (scale-d 0)
  for (int it = 0; it < slices; ++it) {
    const int s = Ring::stage(it);
    mbarrierWait(&sm.ring.full[s], Ring::parity(it));
    const T *as = sm.a + s * kTileElems + cw * 64 * 64, *bs = sm.b + s * kTileElems;
    wgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kSliceK / 16; ++kk) {
      const uint64_t a = swizzledDesc(as) + 2 * kk;
      if constexpr (KMajorB) {
        wgmmaSS128<T>(acc, a, swizzledDesc(bs) + 2 * kk, it > 0 || kk > 0);
      } else {
        wgmma64<T, 0, 1>(acc, a, swizzledDesc(bs + kk * 16 * 64), it > 0 || kk > 0);
        wgmma64<T, 0, 1>(acc + 32, a, swizzledDesc(bs + 64 * 64 + kk * 16 * 64), it > 0 || kk > 0);
      }
    }
    // The accumulators stay in flight across the wait: nothing else may
    // define them until wgmmaWait<0> (ptxas would serialize the wgmmas).
    wgmmaCommit();
    wgmmaWait<1>();
    if (it > 0)
      sm.ring.release(it - 1);
  }
  wgmmaWait<0>();
  fenceOperands<64>(acc);
  const int warp = (threadIdx.x / 32) & 3;
  writeRows<T, kTileN, 1>(reinterpret_cast<const float(*)[kTileN / 8][4]>(acc), 1.0f,
                          tile.row + cw * 64 + warp * 16, tile.end, n - n0,
                          [&](int64_t r) { return y + r * n + n0; });
#endif
}

/// grouped_matmul_rhs_grad's product: block (q tile, p tile, expert).
template <typename T>
__global__ void __launch_bounds__(kFa3Threads, 1)
    groupedGradKernel(const __grid_constant__ CUtensorMap leftMap,
                      const __grid_constant__ CUtensorMap rightMap, const void *offsets, bool wide,
                      int64_t p, int64_t q, T *out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char smemRaw[];
  const Smem<T> sm(smemRaw);
  const int wg = __shfl_sync(0xffffffff, (int)(threadIdx.x / 128), 0);
  if (threadIdx.x == 0)
    sm.ring.init();
  __syncthreads();
  const int64_t e = blockIdx.z, p0 = (int64_t)blockIdx.y * kTileM,
                q0 = (int64_t)blockIdx.x * kTileN;
  const int64_t r0 = offsetAt(offsets, wide, e), r1 = offsetAt(offsets, wide, e + 1);
  const int chunks = (int)((r1 - r0 + kSliceK - 1) / kSliceK);

  if (wg == 0) { // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0)
      for (int it = 0; it < chunks; ++it) {
        const int s = Ring::stage(it);
        const int row = (int)(r0 + it * kSliceK);
        sm.ring.acquire(it, 2 * kTileElems * sizeof(T));
        for (int c = 0; c < 2; ++c) {
          tmaLoad(sm.a + s * kTileElems + c * 64 * 64, &leftMap, &sm.ring.full[s], (int)p0 + 64 * c,
                  0, row, 0);
          tmaLoad(sm.b + s * kTileElems + c * 64 * 64, &rightMap, &sm.ring.full[s],
                  (int)q0 + 64 * c, 0, row, 0);
        }
      }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = wg - 1, tid = threadIdx.x & 127;
  float acc[64]; // the first slice's products overwrite (scale-d 0)
  for (int it = 0; it < chunks; ++it) {
    const int s = Ring::stage(it);
    mbarrierWait(&sm.ring.full[s], Ring::parity(it));
    T *ls = sm.a + s * kTileElems + cw * 64 * 64;
    const T *rs = sm.b + s * kTileElems;
    const int64_t valid = r1 - (r0 + (int64_t)it * kSliceK);
    if (valid < kSliceK) { // the next expert's rows: zero them in this warpgroup's block
      // A row of a 64-column block is 128 bytes whichever way it is swizzled.
      uint4 *rows = reinterpret_cast<uint4 *>(ls);
      for (int i = tid; i < (kSliceK - (int)valid) * 8; i += 128)
        rows[valid * 8 + i] = make_uint4(0, 0, 0, 0);
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + cw) : "memory");
    }
    wgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kSliceK / 16; ++kk) {
      const uint64_t a = swizzledDesc(ls + kk * 16 * 64);
      wgmma64<T, 1, 1>(acc, a, swizzledDesc(rs + kk * 16 * 64), it > 0 || kk > 0);
      wgmma64<T, 1, 1>(acc + 32, a, swizzledDesc(rs + 64 * 64 + kk * 16 * 64), it > 0 || kk > 0);
    }
    // The accumulators stay in flight across the wait: nothing else may
    // define them until wgmmaWait<0> (ptxas would serialize the wgmmas).
    wgmmaCommit();
    wgmmaWait<1>();
    if (it > 0)
      sm.ring.release(it - 1);
  }
  wgmmaWait<0>();
  fenceOperands<64>(acc);
  if (chunks == 0) // an expert without rows
#pragma unroll
    for (int i = 0; i < 64; ++i)
      acc[i] = 0.f;
  const int warp = (threadIdx.x / 32) & 3;
  T *dst = out + e * p * q;
  writeRows<T, kTileN, 1>(reinterpret_cast<const float(*)[kTileN / 8][4]>(acc), 1.0f,
                          p0 + cw * 64 + warp * 16, p, q - q0,
                          [&](int64_t r) { return dst + r * q + q0; });
#endif
}

/// The TMA map of a row-major [batch, rows, cols] operand read in boxes of
/// 64 columns x |boxRows| rows (tensorMap's [B, S, heads = 1, d] form).
Status map3(CUtensorMap *map, const void *base, DType type, int64_t cols, int64_t rows,
            int64_t batch, int boxRows) {
  return tensorMap(map, base, type, cols, 1, rows, batch, cols, boxRows);
}

template <typename T> Status launchGemm(const GroupedOperands &g, cudaStream_t st) {
  CUtensorMap x, w;
  ZRT_RETURN_IF_ERROR(map3(&x, g.rows, g.type, g.k, g.m, 1, kTileM));
  if (g.transposeRhs)
    ZRT_RETURN_IF_ERROR(map3(&w, g.rhs, g.type, g.k, g.n, g.experts, kTileN));
  else
    ZRT_RETURN_IF_ERROR(map3(&w, g.rhs, g.type, g.n, g.k, g.experts, kSliceK));
  auto kernel = g.transposeRhs ? groupedGemmKernel<T, true> : groupedGemmKernel<T, false>;
  ZRT_RETURN_IF_ERROR(setSmem(kernel, kSmemBytes));
  dim3 grid((unsigned)((g.n + kTileN - 1) / kTileN),
            (unsigned)((g.m + kTileM - 1) / kTileM + g.experts));
  kernel<<<grid, kFa3Threads, kSmemBytes, st>>>(x, w, g.offsets, g.offsets64, g.experts, g.n, g.k,
                                                static_cast<T *>(g.out));
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? Status::ok() : errorf("grouped_matmul: ", cudaGetErrorString(err));
}

template <typename T> Status launchGrad(const GroupedOperands &g, cudaStream_t st) {
  CUtensorMap left, right;
  ZRT_RETURN_IF_ERROR(map3(&left, g.rows, g.type, g.k, g.m, 1, kSliceK));
  ZRT_RETURN_IF_ERROR(map3(&right, g.rhs, g.type, g.n, g.m, 1, kSliceK));
  ZRT_RETURN_IF_ERROR(setSmem(groupedGradKernel<T>, kSmemBytes));
  dim3 grid((unsigned)((g.n + kTileN - 1) / kTileN), (unsigned)((g.k + kTileM - 1) / kTileM),
            (unsigned)g.experts);
  groupedGradKernel<T><<<grid, kFa3Threads, kSmemBytes, st>>>(left, right, g.offsets, g.offsets64,
                                                              g.k, g.n, static_cast<T *>(g.out));
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? Status::ok()
                            : errorf("grouped_matmul_rhs_grad: ", cudaGetErrorString(err));
}

} // namespace

bool groupedWgmmaFits(const GroupedOperands &g) {
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const int64_t limit = INT32_MAX - 2 * kTileM;
  return (g.type == DType::BF16 || g.type == DType::F16) && g.k % 8 == 0 && g.n % 8 == 0 &&
         g.k > 0 && g.n > 0 && g.m < limit && g.k < limit && g.n < limit && g.experts < 65535 &&
         (g.m + kTileM - 1) / kTileM + g.experts < 65535 && aligned(g.rows) && aligned(g.rhs) &&
         hopperGpu();
}

Status launchGroupedWgmma(const GroupedOperands &g, cudaStream_t st) {
  return g.type == DType::BF16 ? launchGemm<__nv_bfloat16>(g, st) : launchGemm<__half>(g, st);
}

Status launchGroupedRhsGradWgmma(const GroupedOperands &g, cudaStream_t st) {
  return g.type == DType::BF16 ? launchGrad<__nv_bfloat16>(g, st) : launchGrad<__half>(g, st);
}

} // namespace zrt
