//===- AttentionWgmma.cu - the one-warpgroup wgmma attention kernels -----===//
//
// zero.attention's forward, dq and dk/dv on Hopper's warpgroup MMAs with one
// warpgroup a block (sm_90a; cuda/Attention.cu chooses): the mma.sync
// kernels' blocks, order, masks and softmax (cuda/AttentionTiles.cuh), the
// tiles in wgmma's 128-byte swizzle.
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionTiles.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace zrt {
namespace {

using namespace attn;

//===----------------------------------------------------------------------===//
// Hopper: wgmma (sm_90a)
//===----------------------------------------------------------------------===//

// The forward, dq and dk/dv kernels again on warpgroup MMAs
// (wgmma.mma_async m64n64k16, float accumulation): the block's 4 warps are
// one warpgroup over 64 rows (queries, or keys for dk/dv). Score products
// (S = Q K^T, dP = dO V^T and their transposes) read both operands from
// shared memory, where tiles sit in the 128-byte swizzle (loadTile);
// the products with P or dS take them from registers as the A operand (the
// accumulators' fragments line up as with mma.sync) and read V, K, dO or Q
// MN-major. The accumulators have mma.sync's layout per warp (16 rows
// each), so the mask, softmax and gradient code is the mma.sync kernels'.
// Built for sm_90a only (Attention.cu's own gencode, runtime/CMakeLists.txt);
// launched where the device is compute capability 9.0.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // the wgmma kernels' products

/// Issues s (64 x 64: this warp's 16 rows in mma.sync's accumulator
/// layout) = A B^T as one commit group, A's 64 rows and B's 64 rows
/// swizzled tiles of D columns in shared memory (both K-major). The caller
/// fences before (wgmmaFence) and waits.
template <typename T, int D>
__device__ __forceinline__ void issueScores(const T *a, const T *b, float s[1][8][4]) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmmaSS<T>(&s[0][0][0], swizzledDesc(a + (kk >> 2) * kSwBlock) + 2 * (kk & 3),
               swizzledDesc(b + (kk >> 2) * kSwBlock) + 2 * (kk & 3), kk > 0);
  wgmmaCommit();
  fenceOperands<32>(&s[0][0][0]);
}

/// acc (columns [C0, C0 + W) of a 64-row product, this warp's 16 rows) += P
/// B over one k-slice of 16 keys: B's rows [16 kk, 16 kk + 16) of a swizzled
/// tile read MN-major, one wgmma a span of columns inside a 64-column block
/// (wgmma's start address moves along the 128-byte row as it does along K
/// for K-major operands: the swizzle is a function of the address).
template <typename T, int C0, int W, int C = C0>
__device__ __forceinline__ void issueSpans(const uint32_t a[4], const T *tile, int kk,
                                           float acc[1][W / 8][4]) {
  if constexpr (C < C0 + W) {
    constexpr int kEnd = (C / 64 + 1) * 64 < C0 + W ? (C / 64 + 1) * 64 : C0 + W;
    wgmmaRS<T, kEnd - C>(&acc[0][(C - C0) / 8][0], a,
                         swizzledDesc(tile + (C / 64) * kSwBlock + kk * 16 * 64) + (C % 64) / 8);
    issueSpans<T, C0, W, kEnd>(a, tile, kk, acc);
  }
}

/// Issues acc (64 x W, this warp's 16 rows) += P B as one commit group
/// (fenced first: |a| was just written), P packed by packA and B (64 x W)
/// columns [C0, C0 + W) of a swizzled tile read MN-major. The caller waits.
template <typename T, int C0, int W>
__device__ __forceinline__ void issueProduct(const uint32_t a[4][4], const T *tile,
                                             float acc[1][W / 8][4]) {
  wgmmaFence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    issueSpans<T, C0, W>(a[kk], tile, kk, acc);
  wgmmaCommit();
  fenceOperands<W / 2>(&acc[0][0][0]);
}

/// s = A B^T (issueScores), waited for.
template <typename T, int D>
__device__ __forceinline__ void scoresWgmma(const T *a, const T *b, float s[1][8][4]) {
  wgmmaFence();
  issueScores<T, D>(a, b, s);
  wgmmaWait<0>();
  fenceOperands<32>(&s[0][0][0]);
}

/// acc += P B (issueProduct over B's D columns), waited for.
template <typename T, int D>
__device__ __forceinline__ void productWgmma(const float p[1][8][4], const T *tile,
                                             float acc[1][D / 8][4]) {
  uint32_t a[4][4]; // every register formed before the MMAs start
  packA<T>(p, a);
  issueProduct<T, 0, D>(a, tile, acc);
  wgmmaWait<0>();
  fenceOperands<D / 2>(&acc[0][0][0]);
}
#endif

/// Forward with wgmma: block (b * H + h, 64-query block, last first), one
/// warpgroup; k/v tiles double-buffered with cp.async as in
/// flashForwardKernel. At D = 64, 128 registers: four blocks a SM (as
/// before loadTile's per-tile addresses took a few more). A FlashAttention-3
/// style pipelined loop (S_{i+1} issued before P_i V_i, K and V buffered a
/// step apart), with Q from registers or not, measured 1-3% faster at D =
/// 128 and 10% slower at D = 64 (more registers: three blocks a SM) before
/// the loads' address math was fixed, and slower at every shape after
/// (docs/benchmarks.md): not kept.
template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, D <= 64    ? 4
                                               : D <= 128 ? 2
                                                          : 1)
    flashForwardWgmmaKernel(const T *q, const T *k, const T *v, const T *bias,
                            const unsigned char *tiles, T *out, float *lse, Dims m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char smemRaw[];
  constexpr int kTileElems = kSwTileElems<D>;
  // 1024-byte aligned (the swizzle's period): q, then k and v, two buffers each.
  unsigned skew = (1024 - ((unsigned)__cvta_generic_to_shared(smemRaw) & 1023)) & 1023;
  T *qs = reinterpret_cast<T *>(smemRaw + skew), *ks = qs + kTileElems, *vs = ks + 2 * kTileElems;
  const HeadBlock hb = headBlock(m.h, (m.sq + kTile - 1) / kTile, true);
  int64_t b = hb.b, h = hb.h, kh = m.kvHead(h), qBlock = hb.block;
  int warp = threadIdx.x >> 5;
  int64_t row0 = qBlock * kTile + warp * 16;
  // Rows past the end still take part in the MMAs; their mask is row
  // sq - 1's and nothing of them is written.
  int64_t maskRow0 = row0 < m.sq ? row0 : m.sq - 1;
  loadTile<T, D, true>(q, m, b, h, qBlock * kTile, m.sq, Rows::Q, qs);
  float o[1][D / 8][4] = {};
  float mx[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {{0, 0}}; // mx: log2 domain
  const float sl = m.scale * kLog2e;
  forKeyTiles<T, D, true>(
      tiles, m, b, h, kh, qBlock, qBlock + 1, k, v, ks, vs, kTileElems, [&](int64_t cur, int buf) {
        int64_t key0 = cur * kTile;
        unsigned char kind = tiles[tileIndex(m, b, h, qBlock, cur)]; // not kSkipTile
        const T *kt = ks + buf * kTileElems, *vt = vs + buf * kTileElems;
        float s[1][8][4];
        scoresWgmma<T, D>(qs, kt, s);
        capScores<1>(s, m);
        bool general = kind != kPlainTile || key0 + kTile > m.sk || !(sl > 0);
        float mul = general ? 1.0f : sl;
        if (general)
          maskScores<T, 1, false>(s, sl, kind, bias + m.biasRow(b, h, maskRow0) + key0,
                                  maskFrame(m, b, maskRow0, key0));
        onlineSoftmax<D, 1>(s, mul, mx, l, o);
        productWgmma<T, D>(s, vt, o);
      });
  writeForward<T, D, 1>(o, mx, l, row0, b, h, m, out, lse);
#endif
}

/// Backward for dq with wgmma: flashBackwardDqKernel's blocks and steps,
/// S = Q K^T and dP = dO V^T from swizzled tiles, dq += dS K with K read
/// MN-major.
template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, D <= 64    ? 3
                                               : D <= 128 ? 2
                                                          : 1)
    flashBackwardDqWgmmaKernel(const T *q, const T *k, const T *v, const T *bias,
                               const unsigned char *tiles, const float *lse, const float *dsum,
                               const T *g, T *dq, Dims m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char smemRaw[];
  constexpr int kTileElems = kSwTileElems<D>;
  // 1024-byte aligned: q and dO, then k and v, two buffers each.
  unsigned skew = (1024 - ((unsigned)__cvta_generic_to_shared(smemRaw) & 1023)) & 1023;
  T *qs = reinterpret_cast<T *>(smemRaw + skew), *gs = qs + kTileElems, *ks = gs + kTileElems,
    *vs = ks + 2 * kTileElems;
  const HeadBlock hb = headBlock(m.h, (m.sq + kTile - 1) / kTile, true);
  int64_t b = hb.b, h = hb.h, kh = m.kvHead(h), qBlock = hb.block;
  int warp = threadIdx.x >> 5;
  int64_t row0 = qBlock * kTile + warp * 16;
  int64_t maskRow0 = row0 < m.sq ? row0 : m.sq - 1; // rows past the end: row sq - 1's mask
  loadTile<T, D, true>(q, m, b, h, qBlock * kTile, m.sq, Rows::Q, qs);
  loadTile<T, D, true>(g, m, b, h, qBlock * kTile, m.sq, Rows::Out, gs);
  float rowLse[1][2], rowD[1][2];
  queryRowStats<1>(lse, dsum, row0, b, h, m, rowLse, rowD);
  float acc[1][D / 8][4] = {};
  const float sl = m.scale * kLog2e;
  const float capInv = capInverse(m);
  forKeyTiles<T, D, true>(
      tiles, m, b, h, kh, qBlock, qBlock + 1, k, v, ks, vs, kTileElems, [&](int64_t cur, int buf) {
        int64_t key0 = cur * kTile;
        unsigned char kind = tiles[tileIndex(m, b, h, qBlock, cur)]; // not kSkipTile
        const T *kt = ks + buf * kTileElems, *vt = vs + buf * kTileElems;
        float s[1][8][4], dp[1][8][4];
        // S and dP as two groups: P is formed while dP's MMAs run.
        wgmmaFence();
        issueScores<T, D>(qs, kt, s);
        issueScores<T, D>(gs, vt, dp);
        wgmmaWait<1>();
        fenceOperands<32>(&s[0][0][0]);
        capScores<1>(s, m);
        queryProbs<T, 1, false>(s, rowLse, sl, kind != kPlainTile || key0 + kTile > m.sk, kind,
                                bias + m.biasRow(b, h, maskRow0) + key0,
                                maskFrame(m, b, maskRow0, key0));
        wgmmaWait<0>();
        fenceOperands<32>(&dp[0][0][0]);
        queryDs(s, dp, rowD, rowLse, capInv);
        productWgmma<T, D>(s, kt, acc);
      });
  writeRows<T, D, 1>(acc, m.scale, row0, m.sq, m.d,
                     [&](int64_t row) { return dq + m.dqAt(b, row, h); });
#endif
}

/// Backward for dk and dv with wgmma: flashBackwardDkvKernel's blocks and
/// steps (a warpgroup's 64 keys), S^T = K Q^T and dP^T = V dO^T from
/// swizzled tiles, dv += P^T dO and dk += dS^T Q with dO and Q read
/// MN-major.
template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, D <= 64 ? 3 : 1)
    flashBackwardDkvWgmmaKernel(const T *q, const T *k, const T *v, const T *bias,
                                const unsigned char *tiles, const float *lse, const float *dsum,
                                const T *g, T *dk, T *dv, Dims m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char smemRaw[];
  constexpr int kTileElems = kSwTileElems<D>;
  // 1024-byte aligned: k's and v's 64 rows, q and dO (two buffers each),
  // then lse and D of the query tiles.
  unsigned skew = (1024 - ((unsigned)__cvta_generic_to_shared(smemRaw) & 1023)) & 1023;
  T *kb = reinterpret_cast<T *>(smemRaw + skew), *vb = kb + kTileElems, *qs = vb + kTileElems,
    *gs = qs + 2 * kTileElems;
  float *tileLse = reinterpret_cast<float *>(gs + 2 * kTileElems), *tileD = tileLse + 2 * kTile;
  const int64_t group = m.group();
  int64_t b = blockIdx.x / m.hk, kh = blockIdx.x % m.hk, h0 = kh * group; // the group's first head
  int64_t kTileIdx = blockIdx.y;
  int warp = threadIdx.x >> 5;
  int64_t key0 = kTileIdx * kTile + warp * 16;
  loadTile<T, D, true>(k, m, b, kh, kTileIdx * kTile, m.sk, Rows::K, kb);
  loadTile<T, D, true>(v, m, b, kh, kTileIdx * kTile, m.sk, Rows::K, vb);
  const float sl = m.scale * kLog2e;
  const float capInv = capInverse(m);
  forKvGradHalf<D>([&](auto half) {
    constexpr int C0 = decltype(half)::value, W = kvGradColumns<D>();
    float dkAcc[1][W / 8][4] = {}, dvAcc[1][W / 8][4] = {};
    forQueryTiles<T, D, true>(
        tiles, m, b, h0, group, kTileIdx, q, g, lse, dsum, qs, gs, tileLse, tileD, kTileElems,
        [&](int64_t cur, int64_t h, int buf) {
          int64_t q0 = cur * kTile;
          unsigned char kind = tiles[tileIndex(m, b, h, cur, kTileIdx)];
          const float *curLse = tileLse + buf * kTile, *curD = tileD + buf * kTile;
          const T *qt = qs + buf * kTileElems, *gt = gs + buf * kTileElems;
          float s[1][8][4], dp[1][8][4];
          // Four groups, each product's inputs formed while the one before
          // runs: S^T and dP^T; P^T (dP^T's MMAs running); dv += P^T dO;
          // dS^T (dv's MMAs running); dk += dS^T Q.
          wgmmaFence();
          issueScores<T, D>(kb, qt, s);  // S^T: keys x queries
          issueScores<T, D>(vb, gt, dp); // dP^T
          wgmmaWait<1>();
          fenceOperands<32>(&s[0][0][0]);
          capScores<1>(s, m);
          keyProbs<T>(s, curLse, sl,
                      kind != kPlainTile || q0 + kTile > m.sq || (kTileIdx + 1) * kTile > m.sk,
                      kind, bias + m.biasRow(b, h, q0) + key0, maskFrame(m, b, q0, key0));
          uint32_t pa[4][4], dsa[4][4];
          packA<T>(s, pa);
          issueProduct<T, C0, W>(pa, gt, dvAcc);
          // W <= 64 (168 registers a thread at D = 64): dv's MMAs finish
          // before dS^T is formed, or P^T's registers would have to live
          // beside it.
          wgmmaWait<W <= 64 ? 0 : 1>();
          fenceOperands<32>(&dp[0][0][0]);
          keyDs(s, dp, curD, curLse, capInv);
          packA<T>(dp, dsa);
          issueProduct<T, C0, W>(dsa, qt, dkAcc);
          wgmmaWait<0>();
          fenceOperands<W / 2>(&dvAcc[0][0][0]);
          fenceOperands<W / 2>(&dkAcc[0][0][0]);
        });
    writeKeyGrads<T, C0, W>(dkAcc, dvAcc, key0, b, kh, m, dk, dv);
  });
#endif
}

} // namespace

template <typename T, int D>
Status launchForwardWgmma(const Operands &a, const attn::Pointers<T> &p, const unsigned char *tiles,
                          cudaStream_t st) {
  const Dims &m = a.m;
  size_t bytes = sizeof(T) * 5 * kSwTileElems<D> + 1024; // q; k and v, two buffers each; alignment
  ZRT_RETURN_IF_ERROR(setSmem(flashForwardWgmmaKernel<T, D>, bytes));
  dim3 grid = headBlockGrid(m.b * m.h, (m.sq + kTile - 1) / kTile);
  flashForwardWgmmaKernel<T, D><<<grid, kWarps * 32, bytes, st>>>(
      p.q, p.k, p.v, p.bias, tiles, reinterpret_cast<T *>(a.o), a.lseOut, m);
  return Status::ok();
}

template <typename T, int D>
Status launchBackwardWgmma(const Operands &a, const attn::Pointers<T> &p,
                           const unsigned char *tiles, const float *dsum, cudaStream_t st,
                           bool wsDq, bool wsDkv, DkvParts split) {
  const Dims &m = a.m;
  if constexpr (D <= 128) {
    if (wsDq) // dq by the warp-specialised kernel (no bias tensor)
      ZRT_RETURN_IF_ERROR((launchFa3Dq<T, D>(a, tiles, dsum, st)));
  } else {
    wsDq = false;
  }
  if (wsDkv) // dk and dv likewise (every width)
    ZRT_RETURN_IF_ERROR((launchFa3Dkv<T, D>(a, tiles, dsum, split, st)));
  if (!wsDq) {
    size_t dqBytes = sizeof(T) * 6 * kSwTileElems<D> + 1024; // q, dO; k and v, two buffers each
    ZRT_RETURN_IF_ERROR(setSmem(flashBackwardDqWgmmaKernel<T, D>, dqBytes));
    dim3 dqGrid = headBlockGrid(m.b * m.h, (m.sq + kTile - 1) / kTile);
    flashBackwardDqWgmmaKernel<T, D><<<dqGrid, kWarps * 32, dqBytes, st>>>(
        p.q, p.k, p.v, p.bias, tiles, a.lse, dsum, reinterpret_cast<const T *>(a.g),
        reinterpret_cast<T *>(a.dq), m);
  }
  if (wsDkv)
    return Status::ok();
  // k, v; q and dO, two buffers each; lse and D, two buffers each
  size_t kvBytes = sizeof(T) * 6 * kSwTileElems<D> + 4 * kTile * sizeof(float) + 1024;
  ZRT_RETURN_IF_ERROR(setSmem(flashBackwardDkvWgmmaKernel<T, D>, kvBytes));
  dim3 kvGrid((unsigned)(m.b * m.hk), (unsigned)((m.sk + kTile - 1) / kTile),
              D / kvGradColumns<D>());
  flashBackwardDkvWgmmaKernel<T, D><<<kvGrid, kWarps * 32, kvBytes, st>>>(
      p.q, p.k, p.v, p.bias, tiles, a.lse, dsum, reinterpret_cast<const T *>(a.g),
      reinterpret_cast<T *>(a.dk), reinterpret_cast<T *>(a.dv), m);
  return Status::ok();
}

#define ZRT_WGMMA_WIDTH(T, D)                                                                      \
  template Status launchForwardWgmma<T, D>(const Operands &, const attn::Pointers<T> &,            \
                                           const unsigned char *, cudaStream_t);                   \
  template Status launchBackwardWgmma<T, D>(const Operands &, const attn::Pointers<T> &,           \
                                            const unsigned char *, const float *, cudaStream_t,    \
                                            bool, bool, DkvParts);
#define ZRT_WGMMA_WIDTHS(T)                                                                        \
  ZRT_WGMMA_WIDTH(T, 32)                                                                           \
  ZRT_WGMMA_WIDTH(T, 48)                                                                           \
  ZRT_WGMMA_WIDTH(T, 64)                                                                           \
  ZRT_WGMMA_WIDTH(T, 80)                                                                           \
  ZRT_WGMMA_WIDTH(T, 96)                                                                           \
  ZRT_WGMMA_WIDTH(T, 112)                                                                          \
  ZRT_WGMMA_WIDTH(T, 128)                                                                          \
  ZRT_WGMMA_WIDTH(T, 160)                                                                          \
  ZRT_WGMMA_WIDTH(T, 192)                                                                          \
  ZRT_WGMMA_WIDTH(T, 224)                                                                          \
  ZRT_WGMMA_WIDTH(T, 256)
ZRT_WGMMA_WIDTHS(__nv_bfloat16)
ZRT_WGMMA_WIDTHS(__half)

} // namespace zrt
