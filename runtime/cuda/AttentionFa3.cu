//===- AttentionFa3.cu - the warp-specialised attention forward on Hopper --===//
//
// zero.attention's forward on Hopper (sm_90a) as FlashAttention-3 runs it, for
// the structural masks (causal, sliding window, packed documents, none; soft-
// capping) at every tensor-core width from 32 to 256: a block of 128 query
// rows and three warpgroups. Warpgroup 0 is the producer: one thread loads
// the block's q rows once and the k and v tiles (KN keys: 128 up to D = 128,
// 64 above) into a two-stage ring through TMA (cp.async.bulk.tensor, the
// 128-byte swizzle written by the copy engine, rows and columns past the
// tensor's end zero-filled), each stage's arrival counted by an mbarrier.
// Warpgroups 1 and 2 each own 64 query rows and
//   - issue S_j = Q K_j^T (wgmma m64nKNk16, both operands in shared memory)
//     and, in the same turn, O += P_{j-1} V_{j-1} (P from registers): the two
//     consumers take turns issuing (named barriers), so that one's softmax
//     runs while the other's products do (FlashAttention-3's ping-pong);
//   - form P_j from S_j while P_{j-1} V_{j-1} is still running (the
//     intra-warpgroup overlap), then rescale O once that product is done,
//     and hand the stage back to the producer.
// The producer gives its registers to the consumers (setmaxnreg 24 / 240).
// The mask, soft-capping and output code is the one-warpgroup kernels'
// (AttentionDevice.cuh): the mask's 64 x 64 tile map decides which key tiles
// a block visits and which halves of a tile need the mask applied.
// Calls with a bias tensor keep the one-warpgroup kernel (cuda/Attention.cu).
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionDevice.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

namespace zrt {
namespace {

using namespace attn;

constexpr int kFa3Rows = 128;    // query rows a block: two consumer warpgroups of 64
constexpr int kFa3Threads = 384; // the producer warpgroup and two consumers

/// Keys a tile: 128 where the accumulators of a 128-key S and a D-wide O fit
/// in a consumer's registers (D <= 128), else 64.
template <int D> constexpr int fa3Keys() { return D <= 128 ? 128 : 64; }
/// 64-column swizzled blocks a row: a tile of R rows is ColBlocks blocks of
/// R x 64, each R rows of 128 bytes (TMA's box of 64 columns).
template <int D> constexpr int colBlocks() { return (D + 63) / 64; }

template <typename T, int D> constexpr size_t fa3SmemBytes() {
  return sizeof(T) * colBlocks<D>() * 64 * (kFa3Rows + 4 * fa3Keys<D>()) + 8 * 8 + 1024;
}

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
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, "
                 "%6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
                 "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, "
                 "%39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
                 "%55, %56, %57, %58, %59, %60, %61, %62, %63}"
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "r"(accumulate));
  else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, "
                 "%7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
                 "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, "
                 "%39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
                 "%55, %56, %57, %58, %59, %60, %61, %62, %63}"
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "r"(accumulate));
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
/// of the q tile (blocks |qBlock| elements apart), |k| the k tile (blocks
/// KN x 64).
template <typename T, int D, int KN>
__device__ __forceinline__ void issueScoresN(const T *q, const T *k, float *s) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint64_t a = swizzledDesc(q + (kk >> 2) * kFa3Rows * 64) + 2 * (kk & 3);
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

/// The forward: block (b * H + h, 128-query block, last first). See the
/// file's comment for the roles; |tiles| is the structural mask's map.
template <typename T, int D>
__global__ void __launch_bounds__(kFa3Threads, 1)
    fa3ForwardKernel(const __grid_constant__ CUtensorMap qMap,
                     const __grid_constant__ CUtensorMap kMap,
                     const __grid_constant__ CUtensorMap vMap, const unsigned char *tiles, T *out,
                     float *lse, Dims m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int KN = fa3Keys<D>(), NB = colBlocks<D>(), kHalves = KN / 64;
  constexpr int kQElems = NB * kFa3Rows * 64, kKvElems = NB * KN * 64;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  unsigned skew = (1024 - (smemAddress(smemRaw) & 1023)) & 1023; // the swizzle's period
  T *qs = reinterpret_cast<T *>(smemRaw + skew), *ks = qs + kQElems, *vs = ks + 2 * kKvElems;
  uint64_t *bars = reinterpret_cast<uint64_t *>(vs + 2 * kKvElems);
  uint64_t *qFull = bars, *kFull = bars + 1, *vFull = bars + 3, *empty = bars + 5;

  const int64_t b = blockIdx.x / m.h, h = blockIdx.x % m.h, kh = m.kvHead(h);
  const int64_t qBlock = gridDim.y - 1 - blockIdx.y; // longest first under a causal mask
  const int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  const int64_t tileCount = (m.sk + KN - 1) / KN;
  const int64_t qt0 = 2 * qBlock, qt1 = qt0 + 2 < qTiles ? qt0 + 2 : qTiles;
  // Whether any of this block's 64 x 64 map tiles under key tile |kn| keeps a key.
  auto live = [&](int64_t kn) {
    for (int64_t kt = kn * kHalves; kt < (kn + 1) * kHalves && kt < kTiles; ++kt)
      for (int64_t qt = qt0; qt < qt1; ++qt)
        if (tiles[tileIndex(m, b, h, qt, kt)] != kSkipTile)
          return true;
    return false;
  };
  auto nextLive = [&](int64_t from) {
    while (from < tileCount && !live(from))
      ++from;
    return from;
  };
  // Warp-uniform values (a shuffle's result) keep ptxas from treating the
  // roles' branches and the tile loop as divergent, which would serialize
  // the wgmmas.
  const int wg = __shfl_sync(0xffffffff, (int)(threadIdx.x / 128), 0);
  if (threadIdx.x == 0) {
    mbarrierInit(qFull, 1);
    for (int s = 0; s < 2; ++s) {
      mbarrierInit(&kFull[s], 1);
      mbarrierInit(&vFull[s], 1);
      mbarrierInit(&empty[s], 8); // the consumers' warps
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) { // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0) {
      mbarrierExpect(qFull, kQElems * sizeof(T));
#pragma unroll
      for (int c = 0; c < NB; ++c)
        tmaLoad(qs + c * kFa3Rows * 64, &qMap, qFull, c * 64, (int)h, (int)(qBlock * kFa3Rows),
                (int)b);
      int it = 0;
      for (int64_t kn = nextLive(0); kn < tileCount; kn = nextLive(kn + 1), ++it) {
        int st = it & 1;
        if (it >= 2)
          mbarrierWait(&empty[st], ((it >> 1) - 1) & 1);
        mbarrierExpect(&kFull[st], kKvElems * sizeof(T));
#pragma unroll
        for (int c = 0; c < NB; ++c)
          tmaLoad(ks + st * kKvElems + c * KN * 64, &kMap, &kFull[st], c * 64, (int)kh,
                  (int)(kn * KN), (int)b);
        mbarrierExpect(&vFull[st], kKvElems * sizeof(T));
#pragma unroll
        for (int c = 0; c < NB; ++c)
          tmaLoad(vs + st * kKvElems + c * KN * 64, &vMap, &vFull[st], c * 64, (int)kh,
                  (int)(kn * KN), (int)b);
      }
    }
    return;
  }

  // A consumer: 64 query rows, a warp's 16 from row0.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = wg - 1, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int64_t row0 = qBlock * kFa3Rows + cw * 64 + warp * 16;
  const int64_t maskRow0 = row0 < m.sq ? row0 : m.sq - 1; // rows past the end: row sq - 1's mask
  const int64_t qt = qt0 + cw < qTiles ? qt0 + cw : qTiles - 1;
  const T *qw = qs + cw * 64 * 64;
  const float sl = m.scale * kLog2e;
  float o[1][D / 8][4] = {};
  float mx[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {{0, 0}}; // mx: log2 domain
  float s[kHalves][8][4]; // 64-key halves, as maskScores takes them
  uint32_t pa[KN / 16][4];
  if (cw == 1)
    turnPass(1); // the first consumer issues first
  mbarrierWait(qFull, 0);
  // The mask and the online softmax of key tile |kn|'s scores in s
  // (FlashAttention-2's rescaling, one rescale of O a tile): P into s, the
  // new row maxima into mx, O's factor and P's row sums into alpha, sum.
  auto softmax = [&](int64_t kn, float alpha[2], float sum[2]) {
    bool general[kHalves];
    unsigned char kind[kHalves];
    bool anyGeneral = false;
#pragma unroll
    for (int hf = 0; hf < kHalves; ++hf) {
      int64_t kt = kn * kHalves + hf;
      kind[hf] = (unsigned char)__shfl_sync(
          0xffffffff, kt < kTiles ? (int)tiles[tileIndex(m, b, h, qt, kt)] : (int)kSkipTile, 0);
      general[hf] = kind[hf] != kPlainTile || (kt + 1) * kTile > m.sk || !(sl > 0);
      anyGeneral |= general[hf];
      capScores<1>(&s[hf], m);
    }
    float mul = sl; // the scale still to apply
    if (anyGeneral) {
      mul = 1.0f;
#pragma unroll
      for (int hf = 0; hf < kHalves; ++hf) {
        if (kind[hf] == kSkipTile) {
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              s[hf][nt][e] = -INFINITY;
        } else if (general[hf]) {
          MaskFrame f = maskFrame(m, b, maskRow0, kn * KN + hf * kTile);
          if (kind[hf] == kDocumentTile)
            maskHalf<true>(s[hf], sl, true, f);
          else
            maskHalf<false>(s[hf], sl, kind[hf] == kCausalTile, f);
        } else {
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              s[hf][nt][e] *= sl;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tileMax = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < KN / 8; ++nt)
        tileMax = fmaxf(tileMax, fmaxf(s[nt / 8][nt % 8][2 * r], s[nt / 8][nt % 8][2 * r + 1]));
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffff, tileMax, 1));
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffff, tileMax, 2));
      float newMax = fmaxf(mx[0][r], tileMax * mul);
      float base = newMax == -INFINITY ? 0.0f : newMax;
      alpha[r] = exp2Approx(mx[0][r] - base);
      sum[r] = 0;
#pragma unroll
      for (int nt = 0; nt < KN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float &x = s[nt / 8][nt % 8][2 * r + e];
          x = exp2Approx(fmaf(x, mul, -base));
          sum[r] += x;
        }
      mx[0][r] = newMax;
    }
  };
  // P (bf16/fp16) as the A operand of P V.
  auto packP = [&] {
#pragma unroll
    for (int kk = 0; kk < KN / 16; ++kk) {
      const float(*p)[4] = s[kk / 4] + 2 * (kk % 4); // keys 16 kk .. 16 kk + 15
      pa[kk][0] = pack<T>(p[0][0], p[0][1]);
      pa[kk][1] = pack<T>(p[0][2], p[0][3]);
      pa[kk][2] = pack<T>(p[1][0], p[1][1]);
      pa[kk][3] = pack<T>(p[1][2], p[1][3]);
    }
  };

  // The first live tile: S alone. Then, for each further tile j, S_j and
  // P_{j-1} V_{j-1} issued in one turn, P_j formed while the latter runs;
  // the last tile's P V at the end. No branch lies between a wgmma.fence and
  // the wgmmas after it (ptxas would serialize them).
  int64_t kn = __shfl_sync(0xffffffff, nextLive(0), 0);
  int it = 0, prev = 0;
  if (kn < tileCount) {
    mbarrierWait(&kFull[0], 0);
    turnWait(1 + cw);
    wgmmaFence();
    issueScoresN<T, D, KN>(qw, ks, &s[0][0][0]);
    wgmmaCommit();
    turnPass(2 - cw);
    wgmmaWait<0>();
    fenceOperands<KN / 2>(&s[0][0][0]);
    float alpha[2], sum[2];
    softmax(kn, alpha, sum);
    l[0][0] = sum[0];
    l[0][1] = sum[1];
    packP();
    kn = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    it = 1;
  }
  for (; kn < tileCount; ++it) {
    const int64_t next = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    const int st = it & 1;
    mbarrierWait(&kFull[st], (it >> 1) & 1);
    mbarrierWait(&vFull[prev], ((it - 1) >> 1) & 1); // V_{j-1}, loaded with K_{j-1}
    // O's rescaling and P's packing done before the fence (else the
    // compiler may move them after it).
    fenceOperands<D / 2>(&o[0][0][0]);
    fenceRegisters<KN / 4>(&pa[0][0]);
    turnWait(1 + cw);
    wgmmaFence();
    issueScoresN<T, D, KN>(qw, ks + st * kKvElems, &s[0][0][0]);
    wgmmaCommit();
    issueValues<T, D, KN>(pa, vs + prev * kKvElems, o[0]);
    wgmmaCommit();
    turnPass(2 - cw);
    wgmmaWait<1>();
    fenceOperands<KN / 2>(&s[0][0][0]);
    float alpha[2], sum[2];
    softmax(kn, alpha, sum);
    wgmmaWait<0>(); // P_{j-1} V_{j-1} done: rescale O, hand the stage back
    fenceOperands<D / 2>(&o[0][0][0]);
    if (lane == 0)
      mbarrierArrive(&empty[prev]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[0][r] = l[0][r] * alpha[r] + sum[r];
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        o[0][nd][2 * r] *= alpha[r];
        o[0][nd][2 * r + 1] *= alpha[r];
      }
    }
    packP();
    prev = st;
    kn = next;
  }
  if (it > 0) { // the last tile's P V
    mbarrierWait(&vFull[prev], ((it - 1) >> 1) & 1);
    fenceRegisters<KN / 4>(&pa[0][0]);
    wgmmaFence();
    issueValues<T, D, KN>(pa, vs + prev * kKvElems, o[0]);
    wgmmaCommit();
    wgmmaWait<0>();
    fenceOperands<D / 2>(&o[0][0][0]);
  }
  if (cw == 0)
    turnWait(1); // the second consumer's last pass
  writeForward<T, D, 1>(o, mx, l, row0, b, h, m, out, lse);
#endif
}

/// The backward's dq (D <= 128), the forward's structure: block (b * H + h,
/// 128-query block, last first), the producer loading q and dO once and the
/// k and v tiles of 64 keys into a two-stage ring; each consumer recomputes
/// S = Q K^T and dP = dO V^T for its 64 rows, P = 2^(S - lse), dS = P (dP -
/// D) (times the soft-cap's slope), and dq += dS K, the last issued in the
/// next tile's turn so that it runs while that tile's P and dS are formed.
template <typename T, int D>
__global__ void __launch_bounds__(kFa3Threads, 1)
    fa3DqKernel(const __grid_constant__ CUtensorMap qMap, const __grid_constant__ CUtensorMap gMap,
                const __grid_constant__ CUtensorMap kMap, const __grid_constant__ CUtensorMap vMap,
                const unsigned char *tiles, const float *lse, const float *dsum, T *dq, Dims m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int KN = kTile, NB = colBlocks<D>();
  constexpr int kQElems = NB * kFa3Rows * 64, kKvElems = NB * KN * 64;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  unsigned skew = (1024 - (smemAddress(smemRaw) & 1023)) & 1023;
  T *qs = reinterpret_cast<T *>(smemRaw + skew), *gs = qs + kQElems, *ks = gs + kQElems,
    *vs = ks + 2 * kKvElems;
  uint64_t *bars = reinterpret_cast<uint64_t *>(vs + 2 * kKvElems);
  uint64_t *qFull = bars, *kFull = bars + 1, *vFull = bars + 3, *empty = bars + 5;

  const int64_t b = blockIdx.x / m.h, h = blockIdx.x % m.h, kh = m.kvHead(h);
  const int64_t qBlock = gridDim.y - 1 - blockIdx.y;
  const int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  const int64_t qt0 = 2 * qBlock, qt1 = qt0 + 2 < qTiles ? qt0 + 2 : qTiles;
  auto nextLive = [&](int64_t from) {
    for (; from < kTiles; ++from)
      for (int64_t qt = qt0; qt < qt1; ++qt)
        if (tiles[tileIndex(m, b, h, qt, from)] != kSkipTile)
          return from;
    return kTiles;
  };
  const int wg = __shfl_sync(0xffffffff, (int)(threadIdx.x / 128), 0);
  if (threadIdx.x == 0) {
    mbarrierInit(qFull, 1);
    for (int s = 0; s < 2; ++s) {
      mbarrierInit(&kFull[s], 1);
      mbarrierInit(&vFull[s], 1);
      mbarrierInit(&empty[s], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) { // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0) {
      mbarrierExpect(qFull, 2 * kQElems * sizeof(T));
#pragma unroll
      for (int c = 0; c < NB; ++c) {
        tmaLoad(qs + c * kFa3Rows * 64, &qMap, qFull, c * 64, (int)h, (int)(qBlock * kFa3Rows),
                (int)b);
        tmaLoad(gs + c * kFa3Rows * 64, &gMap, qFull, c * 64, (int)h, (int)(qBlock * kFa3Rows),
                (int)b);
      }
      int it = 0;
      for (int64_t kn = nextLive(0); kn < kTiles; kn = nextLive(kn + 1), ++it) {
        int st = it & 1;
        if (it >= 2)
          mbarrierWait(&empty[st], ((it >> 1) - 1) & 1);
        mbarrierExpect(&kFull[st], kKvElems * sizeof(T));
#pragma unroll
        for (int c = 0; c < NB; ++c)
          tmaLoad(ks + st * kKvElems + c * KN * 64, &kMap, &kFull[st], c * 64, (int)kh,
                  (int)(kn * KN), (int)b);
        mbarrierExpect(&vFull[st], kKvElems * sizeof(T));
#pragma unroll
        for (int c = 0; c < NB; ++c)
          tmaLoad(vs + st * kKvElems + c * KN * 64, &vMap, &vFull[st], c * 64, (int)kh,
                  (int)(kn * KN), (int)b);
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = wg - 1, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int64_t row0 = qBlock * kFa3Rows + cw * 64 + warp * 16;
  const int64_t maskRow0 = row0 < m.sq ? row0 : m.sq - 1;
  const int64_t qt = qt0 + cw < qTiles ? qt0 + cw : qTiles - 1;
  const T *qw = qs + cw * 64 * 64, *gw = gs + cw * 64 * 64;
  const float sl = m.scale * kLog2e, capInv = capInverse(m);
  float rowLse[1][2], rowD[1][2];
  queryRowStats<1>(lse, dsum, row0, b, h, m, rowLse, rowD);
  float acc[1][D / 8][4] = {};
  float s[1][8][4], dp[1][8][4];
  uint32_t pds[KN / 16][4];
  // P, then dS = P (dP - D), of key tile |kn| into s.
  auto gradient = [&](int64_t kn) {
    unsigned char kind =
        (unsigned char)__shfl_sync(0xffffffff, (int)tiles[tileIndex(m, b, h, qt, kn)], 0);
    bool general = kind != kPlainTile || (kn + 1) * kTile > m.sk || !(sl > 0);
    capScores<1>(s, m);
    if (kind == kSkipTile) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[0][nt][e] = -INFINITY;
    } else if (general) {
      MaskFrame f = maskFrame(m, b, maskRow0, kn * KN);
      if (kind == kDocumentTile)
        maskHalf<true>(s[0], sl, true, f);
      else
        maskHalf<false>(s[0], sl, kind == kCausalTile, f);
    }
    const float mul = general || kind == kSkipTile ? 1.0f : sl;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2Approx(fmaf(s[0][nt][e], mul, -rowLse[0][e >> 1]));
        float ds = p * (dp[0][nt][e] - rowD[0][e >> 1]);
        if (capInv != 0.0f)
          ds *= capSlope(p, rowLse[0][e >> 1], capInv);
        s[0][nt][e] = ds;
      }
  };
  auto packDs = [&] {
#pragma unroll
    for (int kk = 0; kk < KN / 16; ++kk) {
      pds[kk][0] = pack<T>(s[0][2 * kk][0], s[0][2 * kk][1]);
      pds[kk][1] = pack<T>(s[0][2 * kk][2], s[0][2 * kk][3]);
      pds[kk][2] = pack<T>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      pds[kk][3] = pack<T>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    }
  };
  if (cw == 1)
    turnPass(1);
  mbarrierWait(qFull, 0);
  int64_t kn = __shfl_sync(0xffffffff, nextLive(0), 0);
  int it = 0, prev = 0;
  if (kn < kTiles) {
    mbarrierWait(&kFull[0], 0);
    mbarrierWait(&vFull[0], 0);
    turnWait(1 + cw);
    wgmmaFence();
    issueScoresN<T, D, KN>(qw, ks, &s[0][0][0]);
    issueScoresN<T, D, KN>(gw, vs, &dp[0][0][0]);
    wgmmaCommit();
    turnPass(2 - cw);
    wgmmaWait<0>();
    fenceOperands<32>(&s[0][0][0]);
    fenceOperands<32>(&dp[0][0][0]);
    gradient(kn);
    packDs();
    kn = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    it = 1;
  }
  for (; kn < kTiles; ++it) {
    const int64_t next = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    const int st = it & 1;
    mbarrierWait(&kFull[st], (it >> 1) & 1);
    mbarrierWait(&vFull[st], (it >> 1) & 1);
    fenceOperands<D / 2>(&acc[0][0][0]);
    fenceRegisters<KN / 4>(&pds[0][0]);
    turnWait(1 + cw);
    wgmmaFence();
    issueScoresN<T, D, KN>(qw, ks + st * kKvElems, &s[0][0][0]);
    issueScoresN<T, D, KN>(gw, vs + st * kKvElems, &dp[0][0][0]);
    wgmmaCommit();
    issueValues<T, D, KN>(pds, ks + prev * kKvElems, acc[0]); // dq += dS_{j-1} K_{j-1}
    wgmmaCommit();
    turnPass(2 - cw);
    wgmmaWait<1>();
    fenceOperands<32>(&s[0][0][0]);
    fenceOperands<32>(&dp[0][0][0]);
    gradient(kn); // while dS_{j-1} K_{j-1} runs
    wgmmaWait<0>();
    fenceOperands<D / 2>(&acc[0][0][0]);
    if (lane == 0)
      mbarrierArrive(&empty[prev]);
    packDs();
    prev = st;
    kn = next;
  }
  if (it > 0) {
    fenceRegisters<KN / 4>(&pds[0][0]);
    wgmmaFence();
    issueValues<T, D, KN>(pds, ks + prev * kKvElems, acc[0]);
    wgmmaCommit();
    wgmmaWait<0>();
    fenceOperands<D / 2>(&acc[0][0][0]);
  }
  if (cw == 0)
    turnWait(1);
  writeRows<T, D, 1>(acc, m.scale, row0, m.sq, m.d,
                     [&](int64_t row) { return dq + m.dqAt(b, row, h); });
#endif
}

/// cuTensorMapEncodeTiled through the runtime (no link to libcuda).
PFN_cuTensorMapEncodeTiled_v12000 encodeTiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

/// The TMA map of a [B, S, heads, d] operand (rows |rowStride| elements
/// apart) read in boxes of 64 columns x |boxRows| rows of one head, in the
/// 128-byte swizzle; boxes past the tensor's end read zeros.
Status tensorMap(CUtensorMap *map, const void *base, DType type, int64_t d, int64_t heads,
                 int64_t rows, int64_t batch, int64_t rowStride, int boxRows) {
  auto encode = encodeTiled();
  if (!encode)
    return errorf("attention: cuTensorMapEncodeTiled is not available from the driver");
  cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)heads, (cuuint64_t)rows, (cuuint64_t)batch};
  cuuint64_t strides[3] = {(cuuint64_t)d * 2, (cuuint64_t)rowStride * 2,
                           (cuuint64_t)(rows * rowStride) * 2};
  cuuint32_t box[4] = {64, 1, (cuuint32_t)boxRows, 1}, unit[4] = {1, 1, 1, 1};
  CUresult r = encode(
      map, type == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      4, const_cast<void *>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return errorf("attention: cuTensorMapEncodeTiled failed (", (int)r, ") for d ", d, ", rows ",
                  rows, ", row stride ", rowStride);
  return Status::ok();
}

} // namespace

template <typename T, int D>
Status launchFa3Forward(const Operands &a, const unsigned char *tiles, cudaStream_t st) {
  const Dims &m = a.m;
  constexpr int KN = fa3Keys<D>();
  CUtensorMap q, k, v;
  ZRT_RETURN_IF_ERROR(tensorMap(&q, a.q, a.type, m.d, m.h, m.sq, m.b, m.inStride, kFa3Rows));
  ZRT_RETURN_IF_ERROR(tensorMap(&k, a.k, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, KN));
  ZRT_RETURN_IF_ERROR(tensorMap(&v, a.v, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, KN));
  constexpr size_t bytes = fa3SmemBytes<T, D>();
  cudaError_t e = cudaFuncSetAttribute(fa3ForwardKernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess)
    return errorf("attention: ", cudaGetErrorString(e));
  dim3 grid((unsigned)(m.b * m.h), (unsigned)((m.sq + kFa3Rows - 1) / kFa3Rows));
  fa3ForwardKernel<T, D>
      <<<grid, kFa3Threads, bytes, st>>>(q, k, v, tiles, reinterpret_cast<T *>(a.o), a.lseOut, m);
  return Status::ok();
}

template <typename T, int D>
Status launchFa3Dq(const Operands &a, const unsigned char *tiles, const float *dsum,
                   cudaStream_t st) {
  static_assert(D <= 128, "the warp-specialised dq kernel holds D <= 128");
  const Dims &m = a.m;
  CUtensorMap q, g, k, v;
  ZRT_RETURN_IF_ERROR(tensorMap(&q, a.q, a.type, m.d, m.h, m.sq, m.b, m.inStride, kFa3Rows));
  ZRT_RETURN_IF_ERROR(tensorMap(&g, a.g, a.type, m.d, m.h, m.sq, m.b, m.outStride, kFa3Rows));
  ZRT_RETURN_IF_ERROR(tensorMap(&k, a.k, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, kTile));
  ZRT_RETURN_IF_ERROR(tensorMap(&v, a.v, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, kTile));
  constexpr size_t bytes = sizeof(T) * colBlocks<D>() * 64 * (2 * kFa3Rows + 4 * kTile) + 64 + 1024;
  cudaError_t e = cudaFuncSetAttribute(fa3DqKernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess)
    return errorf("attention: ", cudaGetErrorString(e));
  dim3 grid((unsigned)(m.b * m.h), (unsigned)((m.sq + kFa3Rows - 1) / kFa3Rows));
  fa3DqKernel<T, D><<<grid, kFa3Threads, bytes, st>>>(q, g, k, v, tiles, a.lse, dsum,
                                                      reinterpret_cast<T *>(a.dq), m);
  return Status::ok();
}

#define ZRT_FA3_WIDTH(T, D)                                                                        \
  template Status launchFa3Forward<T, D>(const Operands &, const unsigned char *, cudaStream_t);
#define ZRT_FA3_DQ_WIDTH(T, D)                                                                     \
  template Status launchFa3Dq<T, D>(const Operands &, const unsigned char *, const float *,        \
                                    cudaStream_t);
#define ZRT_FA3_WIDTHS(T)                                                                          \
  ZRT_FA3_WIDTH(T, 32)                                                                             \
  ZRT_FA3_WIDTH(T, 48)                                                                             \
  ZRT_FA3_WIDTH(T, 64)                                                                             \
  ZRT_FA3_WIDTH(T, 80)                                                                             \
  ZRT_FA3_WIDTH(T, 96)                                                                             \
  ZRT_FA3_WIDTH(T, 112)                                                                            \
  ZRT_FA3_WIDTH(T, 128)                                                                            \
  ZRT_FA3_WIDTH(T, 160)                                                                            \
  ZRT_FA3_WIDTH(T, 192)                                                                            \
  ZRT_FA3_WIDTH(T, 224)                                                                            \
  ZRT_FA3_WIDTH(T, 256)                                                                            \
  ZRT_FA3_DQ_WIDTH(T, 32)                                                                          \
  ZRT_FA3_DQ_WIDTH(T, 48)                                                                          \
  ZRT_FA3_DQ_WIDTH(T, 64)                                                                          \
  ZRT_FA3_DQ_WIDTH(T, 80)                                                                          \
  ZRT_FA3_DQ_WIDTH(T, 96)                                                                          \
  ZRT_FA3_DQ_WIDTH(T, 112)                                                                         \
  ZRT_FA3_DQ_WIDTH(T, 128)
ZRT_FA3_WIDTHS(__nv_bfloat16)
ZRT_FA3_WIDTHS(__half)

} // namespace zrt
