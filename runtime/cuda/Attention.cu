//===- Attention.cu - flash attention forward and backward ----------------===//
//
// zero.attention and zero.attention_grad (runtime/cpu/Attention.cpp has the
// reference). q [B, Sq, H, D], k and v [B, Sk, H, D], bias [B|1, H|1, Sq, Sk],
// lse [B, H, Sq]. Nothing of size Sq x Sk is stored: each block walks the
// key (or query) tiles with the scores in registers.
//
// 16-bit types, any head dimension that is a multiple of 8 up to 256 (rows
// 16-byte aligned): the kernels are instantiated for widths of every
// multiple of 16 up to 128 and of 32 up to 256 (kWidths); a head runs on the
// narrowest that holds it, its missing columns zeros in shared memory and
// never written out (96: its own width; 72: the 80-wide kernels). Tiles are
// copied in spans of power-of-two columns (loadTile). Above 128 columns the
// dk/dv kernels split the columns in halves over blockIdx.z (both halves
// recompute S^T and dP^T) so that their accumulators fit in registers.
// Tensor cores through mma.sync m16n8k16 (float accumulation), the FlashAttention-2
// scheme: a warp owns 16 query rows (the forward 32 at D = 64 and 128: each
// B fragment feeds two products), keeps its output in registers, and
// rescales its running sum when the row maximum grows; the probabilities go
// from the score accumulators straight into the A operand of the P.V
// product (the fragment layouts line up). Shared memory holds the block's
// rows and one 64-key tile of k and v, rows padded by 8 elements so that
// the fragment loads hit 32 different banks. A map of the mask's 64 x 64
// tiles (skip / plain / causal / bias) spares the kernels the masked tiles
// and the mask's reads where it is 0 or causal; blocks start longest first.
// tools/zrt-attention-bench times and checks them at model shapes.
//
// The backward recomputes the probabilities from lse (no atomics, so the
// result does not depend on scheduling): one kernel per 64-query block for
// dq, one per 64-key block for dk and dv, after a kernel that forms
// D = rowsum(dO * O).
//
// On Hopper (compute capability 9.0) at widths of 32 and more the same
// three kernels run on warpgroup MMAs instead (wgmma, sm_90a: the block's 4
// warps are one warpgroup taking 64 rows; operands from shared memory in
// the 128-byte swizzle, whole 64-column blocks, P and dS from registers, the
// products with them one wgmma of N = 16..64 per span of a 64-column block),
// the same blocks, order, masks and softmax (cuda/AttentionWgmma.cu);
// mma.sync serves other GPUs and width 16. The warp-specialised forward,
// dq and dk/dv (cuda/AttentionFa3.cu, AttentionFa3Bwd.cu: TMA, a producer
// warpgroup and two consumers over 128 rows, FlashAttention-3's scheme)
// take calls without a bias tensor where chosen (AttentionTiling 3-5) and,
// by default, the forward where it measured faster (warpSpecialisedForward:
// widths above 128, and from 80 without a causal mask).
// What the kernels share on the device is in cuda/AttentionDevice.cuh, what
// this file's kernels share with the wgmma ones in AttentionTiles.cuh.
// This file holds the mma.sync kernels and the launch; the mask's tile map
// and the backward's D = rowsum(dO * O) are cuda/AttentionMaps.cu's.
//
// float32 (and heads that are not a multiple of 8): a thread per row, the
// same arithmetic in plain float (cuda/AttentionSimt.cu), up to 256 columns;
// it is there for exactness tests and small models, not speed.
//
// Why our own kernels and not cuDNN's SDPA: cuDNN's fused attention is
// reached through its graph API, which the cudnn-frontend C++ headers
// wrap; those headers are not part of the CUDA or Debian packages here, and
// the backend descriptors alone would mean re-deriving the frontend's
// operation graph. These kernels are deterministic and match the reference
// on every plan (tools/gpu-check.sh).
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionTiles.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace zrt {
namespace {

using namespace attn;

/// c += a b for a 16x16 A (row-major fragment), a 16x8 B (column fragment),
/// float accumulators.
template <typename T>
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Four 8x8 16-bit matrices from shared memory (ldmatrix): lane i gives the
/// address of row i % 8 of matrix i / 8; register j holds matrix j's row
/// lane / 4, columns 2 (lane % 4) and the next.
__device__ __forceinline__ void ldmatrix(uint32_t r[4], const void *smem) {
  unsigned at = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

/// S[mr][nt] (MR blocks of 16 rows, 8 blocks of 8 columns: 64 columns) =
/// A B^T where A's 16 MR rows are aRows[r][d] and B's 64 rows are
/// tile[r][d], both in shared memory (stride D + kPad). Fragments come
/// through ldmatrix: A's 16 x 16 blocks per kk, B's for two column blocks
/// (nt, nt + 1) at a time, each B fragment used by MR products. Keeping A
/// in shared memory rather than registers (as FlashAttention-2 does) leaves
/// the registers to the accumulators: more blocks per SM.
template <typename T, int D, int MR>
__device__ __forceinline__ void scoresTile(const T *aRows, const T *tile, float s[MR][8][4]) {
  int lane = threadIdx.x & 31, matrix = lane >> 3, row = lane & 7;
  const T *aBase = aRows + (row + (matrix & 1) * 8) * (D + kPad) + (matrix >> 1) * 8;
  const T *bBase = tile + ((matrix >> 1) * 8 + row) * (D + kPad) + (matrix & 1) * 8;
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
      s[mr][nt][0] = s[mr][nt][1] = s[mr][nt][2] = s[mr][nt][3] = 0;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t af[MR][4];
#pragma unroll
    for (int mr = 0; mr < MR; ++mr)
      ldmatrix(af[mr], aBase + mr * 16 * (D + kPad) + kk * 16);
#pragma unroll
    for (int nt = 0; nt < 8; nt += 2) {
      uint32_t bf[4];
      ldmatrix(bf, bBase + nt * 8 * (D + kPad) + kk * 16);
#pragma unroll
      for (int mr = 0; mr < MR; ++mr) {
        mma<T>(s[mr][nt], af[mr], bf[0], bf[1]);
        mma<T>(s[mr][nt + 1], af[mr], bf[2], bf[3]);
      }
    }
  }
}

/// Four 8x8 16-bit matrices from shared memory, transposed (ldmatrix): lane
/// i gives the address of row i % 8 of matrix i / 8.
__device__ __forceinline__ void ldmatrixTrans(uint32_t r[4], const void *smem) {
  unsigned at = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

/// acc[mr][nd] (MR blocks of 16 rows x W) += P B where P (16 MR x 64) is in
/// score accumulators and B (64 x W) is columns [C0, C0 + W) of tile[r][d]
/// (rows of D + kPad): its B fragments come transposed through ldmatrix,
/// two column blocks of 8 at a time, each used by MR products.
template <typename T, int D, int MR, int C0 = 0, int W = D>
__device__ __forceinline__ void productTile(const float p[MR][8][4], const T *tile,
                                            float acc[MR][W / 8][4]) {
  int lane = threadIdx.x & 31, matrix = lane >> 3, row = lane & 7;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    uint32_t a[MR][4];
#pragma unroll
    for (int mr = 0; mr < MR; ++mr) {
      a[mr][0] = pack<T>(p[mr][2 * kk][0], p[mr][2 * kk][1]);
      a[mr][1] = pack<T>(p[mr][2 * kk][2], p[mr][2 * kk][3]);
      a[mr][2] = pack<T>(p[mr][2 * kk + 1][0], p[mr][2 * kk + 1][1]);
      a[mr][3] = pack<T>(p[mr][2 * kk + 1][2], p[mr][2 * kk + 1][3]);
    }
    const T *base = tile + (kk * 16 + (matrix & 1) * 8 + row) * (D + kPad) + (matrix >> 1) * 8 + C0;
#pragma unroll
    for (int nd = 0; nd < W / 8; nd += 2) {
      uint32_t bf[4];
      ldmatrixTrans(bf, base + nd * 8);
#pragma unroll
      for (int mr = 0; mr < MR; ++mr) {
        mma<T>(acc[mr][nd], a[mr], bf[0], bf[1]);
        mma<T>(acc[mr][nd + 1], a[mr], bf[2], bf[3]);
      }
    }
  }
}

/// The forward's and dq's blocks: 16 MR query rows per warp, kWarps warps,
/// so a block covers MR of the mask map's 64-row tiles. Blocks go
/// (b * H + h, query block) with the last query block first: under a
/// causal mask the blocks with the most key tiles start first and the
/// shortest ones fill the end (longest-first scheduling).
template <int MR> constexpr int kBlockRows = kWarps * 16 * MR;

/// Minimum blocks per SM for __launch_bounds__ of the forward and dq
/// kernels (so that the compiler may spend 65536 / (128 x blocks) registers
/// a thread): at D <= 64, 128 registers hold one 16-row block's
/// accumulators, 256 two; at D = 128 no bound (two blocks fit in shared
/// memory anyway).
template <int D, int MR> constexpr int minBlocks() { return D <= 64 ? 4 / MR : 1; }

/// Forward, tensor cores: block (b * H + h, query block, last first); the
/// next k/v tile is copied (cp.async) while this one is computed. A warp
/// whose rows the mask rules out of a tile skips its products.
template <typename T, int D, int MR>
__global__ void __launch_bounds__(kWarps * 32, minBlocks<D, MR>())
    flashForwardKernel(const T *q, const T *k, const T *v, const T *bias,
                       const unsigned char *tiles, T *out, float *lse, Dims m) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kTileElems = kTile * (D + kPad), kRows = kBlockRows<MR>;
  // q's rows (MR tiles), then k and v: two buffers each.
  T *qs = reinterpret_cast<T *>(smem), *ks = qs + MR * kTileElems, *vs = ks + 2 * kTileElems;
  int64_t b = blockIdx.x / m.h, h = blockIdx.x % m.h, kh = m.kvHead(h);
  int64_t qBlock = gridDim.y - 1 - blockIdx.y;
  int warp = threadIdx.x >> 5;
  int64_t row0 = qBlock * kRows + warp * 16 * MR;
  int64_t qTiles = (m.sq + kTile - 1) / kTile, qt0 = qBlock * MR,
          qt1 = qt0 + MR < qTiles ? qt0 + MR : qTiles, myTile = row0 / kTile; // row0 < sq: < qTiles
  const T *qw = qs + warp * 16 * MR * (D + kPad);                             // this warp's rows
  for (int i = 0; i < MR; ++i)
    loadTile<T, D, false>(q, m, b, h, qBlock * kRows + i * kTile, m.sq, Rows::Q,
                          qs + i * kTileElems);
  float o[MR][D / 8][4] = {};
  float mx[MR][2], l[MR][2]; // mx: log2 domain
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
    mx[mr][0] = mx[mr][1] = -INFINITY, l[mr][0] = l[mr][1] = 0;
  const float sl = m.scale * kLog2e;
  forKeyTiles<T, D, false>(
      tiles, m, b, h, kh, qt0, qt1, k, v, ks, vs, kTileElems, [&](int64_t cur, int buf) {
        int64_t key0 = cur * kTile;
        unsigned char kind = row0 < m.sq ? tiles[tileIndex(m, b, h, myTile, cur)] : kSkipTile;
        if (kind != kSkipTile) {
          float s[MR][8][4];
          scoresTile<T, D, MR>(qw, ks + buf * kTileElems, s);
          capScores<MR>(s, m);
          // The scores in the log2 domain, x = s scale log2(e) + mask log2(e):
          // tiles with mask values or keys past the end are scaled here (mul =
          // 1 after); interior tiles keep the raw scores and fold the scale
          // into the exponent's FFMA (max(s) scale = max(s scale), scale > 0).
          bool general = kind != kPlainTile || key0 + kTile > m.sk || !(sl > 0);
          float mul = general ? 1.0f : sl;
          if (general)
            maskScores<T, MR, false>(s, sl, kind, bias + m.biasRow(b, h, row0) + key0,
                                     maskFrame(m, b, row0, key0));
          onlineSoftmax<D, MR>(s, mul, mx, l, o);
          productTile<T, D, MR>(s, vs + buf * kTileElems, o);
        }
      });
  writeForward<T, D, MR>(o, mx, l, row0, b, h, m, out, lse);
}

/// Backward for dq, tensor cores: blocks as in the forward; k and v tiles
/// double-buffered.
template <typename T, int D, int MR>
__global__ void __launch_bounds__(kWarps * 32, minBlocks<D, MR>())
    flashBackwardDqKernel(const T *q, const T *k, const T *v, const T *bias,
                          const unsigned char *tiles, const float *lse, const float *dsum,
                          const T *g, T *dq, Dims m) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kTileElems = kTile * (D + kPad), kRows = kBlockRows<MR>;
  // q's and dO's rows (MR tiles each), then k and v: two buffers each.
  T *qs = reinterpret_cast<T *>(smem), *gs = qs + MR * kTileElems, *ks = gs + MR * kTileElems,
    *vs = ks + 2 * kTileElems;
  int64_t b = blockIdx.x / m.h, h = blockIdx.x % m.h, kh = m.kvHead(h);
  int64_t qBlock = gridDim.y - 1 - blockIdx.y;
  int warp = threadIdx.x >> 5;
  int64_t row0 = qBlock * kRows + warp * 16 * MR;
  int64_t qTiles = (m.sq + kTile - 1) / kTile, qt0 = qBlock * MR,
          qt1 = qt0 + MR < qTiles ? qt0 + MR : qTiles, myTile = row0 / kTile; // row0 < sq: < qTiles
  const T *qw = qs + warp * 16 * MR * (D + kPad), *gw = gs + warp * 16 * MR * (D + kPad);
  for (int i = 0; i < MR; ++i) {
    loadTile<T, D, false>(q, m, b, h, qBlock * kRows + i * kTile, m.sq, Rows::Q,
                          qs + i * kTileElems);
    loadTile<T, D, false>(g, m, b, h, qBlock * kRows + i * kTile, m.sq, Rows::Out,
                          gs + i * kTileElems);
  }
  float rowLse[MR][2], rowD[MR][2];
  queryRowStats<MR>(lse, dsum, row0, b, h, m, rowLse, rowD);
  float acc[MR][D / 8][4] = {};
  const float sl = m.scale * kLog2e;
  const float capInv = capInverse(m);
  forKeyTiles<T, D, false>(
      tiles, m, b, h, kh, qt0, qt1, k, v, ks, vs, kTileElems, [&](int64_t cur, int buf) {
        int64_t key0 = cur * kTile;
        unsigned char kind = row0 < m.sq ? tiles[tileIndex(m, b, h, myTile, cur)] : kSkipTile;
        if (kind != kSkipTile) {
          float s[MR][8][4], dp[MR][8][4];
          scoresTile<T, D, MR>(qw, ks + buf * kTileElems, s);
          scoresTile<T, D, MR>(gw, vs + buf * kTileElems, dp);
          capScores<MR>(s, m);
          queryProbs<T, MR, true>(s, rowLse, sl, kind != kPlainTile || key0 + kTile > m.sk, kind,
                                  bias + m.biasRow(b, h, row0) + key0, maskFrame(m, b, row0, key0),
                                  capInv, dp, rowD);
          productTile<T, D, MR>(s, ks + buf * kTileElems, acc);
        }
      });
  writeRows<T, D, MR>(acc, m.scale, row0, m.sq, m.d,
                      [&](int64_t row) { return dq + m.dqAt(b, row, h); });
}

/// Backward for dk and dv, tensor cores: block (b * Hk + kv head, key
/// tile, column half), the first key tiles first (under a causal mask they
/// meet the most query tiles); the scores transposed (a warp's 16 keys x 64
/// queries of a query tile); q and dO tiles double-buffered. With
/// grouped-query attention the block goes over the query heads that share
/// its k/v head one after the other, summing their contributions in its
/// accumulators (no atomics). (Splitting the group's heads over blocks,
/// with float partial sums added up by a second kernel, was measured on
/// Llama 3.2 1B's shape: 2% slower.)
template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, D <= 64 ? 3 : 1)
    flashBackwardDkvKernel(const T *q, const T *k, const T *v, const T *bias,
                           const unsigned char *tiles, const float *lse, const float *dsum,
                           const T *g, T *dk, T *dv, Dims m) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kTileElems = kTile * (D + kPad), W = kvGradColumns<D>();
  // k's and v's 64 rows, q and dO (two buffers each), then lse and D of
  // the query tiles.
  T *kb = reinterpret_cast<T *>(smem), *vb = kb + kTileElems, *qs = vb + kTileElems,
    *gs = qs + 2 * kTileElems;
  float *tileLse = reinterpret_cast<float *>(gs + 2 * kTileElems), *tileD = tileLse + 2 * kTile;
  const int64_t group = m.group();
  int64_t b = blockIdx.x / m.hk, kh = blockIdx.x % m.hk, h0 = kh * group; // the group's first head
  int64_t kTileIdx = blockIdx.y;
  int warp = threadIdx.x >> 5;
  int64_t key0 = kTileIdx * kTile + warp * 16;
  const T *kw = kb + warp * 16 * (D + kPad), *vw = vb + warp * 16 * (D + kPad);
  loadTile<T, D, false>(k, m, b, kh, kTileIdx * kTile, m.sk, Rows::K, kb);
  loadTile<T, D, false>(v, m, b, kh, kTileIdx * kTile, m.sk, Rows::K, vb);
  const float sl = m.scale * kLog2e;
  const float capInv = capInverse(m);
  forKvGradHalf<D>([&](auto half) {
    constexpr int C0 = decltype(half)::value;
    float dkAcc[1][W / 8][4] = {}, dvAcc[1][W / 8][4] = {};
    forQueryTiles<T, D, false>(
        tiles, m, b, h0, group, kTileIdx, q, g, lse, dsum, qs, gs, tileLse, tileD, kTileElems,
        [&](int64_t cur, int64_t h, int buf) {
          int64_t q0 = cur * kTile;
          unsigned char kind = tiles[tileIndex(m, b, h, cur, kTileIdx)];
          const float *curLse = tileLse + buf * kTile, *curD = tileD + buf * kTile;
          float s[1][8][4], dp[1][8][4];
          scoresTile<T, D, 1>(kw, qs + buf * kTileElems, s);  // S^T: keys x queries
          scoresTile<T, D, 1>(vw, gs + buf * kTileElems, dp); // dP^T
          capScores<1>(s, m);
          keyProbs<T>(s, curLse, sl,
                      kind != kPlainTile || q0 + kTile > m.sq || (kTileIdx + 1) * kTile > m.sk,
                      kind, bias + m.biasRow(b, h, q0) + key0, maskFrame(m, b, q0, key0)); // P^T
          keyDs(s, dp, curD, curLse, capInv);                                              // dS^T
          productTile<T, D, 1, C0, W>(s, gs + buf * kTileElems, dvAcc);
          productTile<T, D, 1, C0, W>(dp, qs + buf * kTileElems, dkAcc);
        });
    writeKeyGrads<T, C0, W>(dkAcc, dvAcc, key0, b, kh, m, dk, dv);
  });
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

/// ints[flag + k] (0 when left out): packed, mask kind, window, documents.
int64_t flagAt(bool backward, const KernelCall &c, size_t k) {
  size_t at = (backward ? 0 : 1) + k;
  return c.ints.size() > at ? c.ints[at] : 0;
}
bool isPacked(bool backward, const KernelCall &c) { return flagAt(backward, c, 0) != 0; }

Operands operandsOf(bool backward, const KernelCall &c) {
  bool packed = isPacked(backward, c);
  const TensorRef &x = c.in[0];
  int64_t es = dtypeSize(x.dtype);
  Operands a;
  a.type = x.dtype;
  int64_t b = x.shape[0], sq = x.shape[1], h = packed ? x.shape[3] : x.shape[2],
          d = packed ? x.shape[4] : x.shape[3], sk = packed ? sq : c.in[1].shape[1];
  int64_t mask = flagAt(backward, c, 1); // 0 bias, 1 causal, 2 none
  const TensorRef *bias = mask == 0 ? &c.in[packed ? 1 : 3] : nullptr;
  int64_t in = packed ? 3 * h * d : h * d;
  a.m = Dims{b,
             sq,
             sk,
             h,
             d,
             bias ? bias->shape[0] : 1,
             bias ? bias->shape[1] : 1,
             (float)c.floats[0],
             backward || c.ints[0] != 0,
             in,
             h * d,
             in};
  // Grouped-query attention: k and v [B, Sk, Hk, D], Hk dividing H.
  a.m.hk = packed ? h : c.in[1].shape[2];
  a.m.kvStride = a.m.kvGradStride = packed ? in : a.m.hk * d;
  a.q = x.data;
  a.k = packed ? x.data + h * d * es : c.in[1].data;
  a.v = packed ? x.data + 2 * h * d * es : c.in[2].data;
  a.m.causal = mask == 1;
  a.m.window = flagAt(backward, c, 2);
  a.m.softcap = c.floats.size() > 1 ? (float)c.floats[1] : 0.0f;
  // Packed documents: the positions are the last input; the tile map is one
  // per batch row (biasB = B; there is no bias then).
  if (flagAt(backward, c, 3) != 0) {
    a.m.positions = c.in.back().as<int64_t>();
    a.m.biasB = b;
  }
  a.bias = bias ? bias->data : nullptr;
  if (!backward) {
    a.o = c.out[0].data;
    a.lseOut = c.out[1].as<float>();
    return a;
  }
  int at = (packed ? 1 : 3) + (bias ? 1 : 0); // out, lse, dout
  a.out = c.in[at].data;
  a.lse = c.in[at + 1].as<float>();
  a.g = c.in[at + 2].data;
  a.dq = c.out[0].data;
  a.dk = packed ? c.out[0].data + h * d * es : c.out[1].data;
  a.dv = packed ? c.out[0].data + 2 * h * d * es : c.out[2].data;
  return a;
}

/// The tensor-core kernels' head widths. A head of d columns (a multiple of
/// 8) runs on the narrowest that holds it, the columns from d on zeros in
/// shared memory and never written out: every multiple of 16 up to 128 has
/// its own, and above 128 every multiple of 32 (a multiple of 16 there pads
/// 16 columns, 6-10% of its products: the dk/dv kernels split the columns
/// in halves of whole 16-column blocks above 128).
constexpr int kWidths[] = {16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256};
constexpr int kMaxWidth = 256;

/// Whether the tensor-core kernels take this call: 16-bit, d a multiple of 8
/// up to kMaxWidth, every row of every operand 16-byte aligned.
bool tensorCorePath(const Operands &a) {
  int64_t d = a.m.d;
  if ((a.type != DType::BF16 && a.type != DType::F16) || d % 8 != 0 || d < 8 || d > kMaxWidth)
    return false;
  for (const void *p : {(const void *)a.q, (const void *)a.k, (const void *)a.v,
                        (const void *)a.out, (const void *)a.g, (const void *)a.o,
                        (const void *)a.dq, (const void *)a.dk, (const void *)a.dv})
    if (p && !aligned16(p))
      return false;
  return true;
}

/// The narrowest width in kWidths that holds |d| columns (d <= kMaxWidth).
int kernelWidth(int64_t d) {
  for (int w : kWidths)
    if (d <= w)
      return w;
  return kMaxWidth;
}

/// f(integral_constant<int, W>) for W = kernelWidth(d) (tensorCorePath: d <=
/// kMaxWidth).
template <size_t I = 0, typename F> Status withWidth(int64_t d, F f) {
  constexpr int W = kWidths[I];
  if constexpr (I + 1 < std::size(kWidths)) {
    if (d > W)
      return withWidth<I + 1>(d, f);
  }
  return f(std::integral_constant<int, W>{});
}

template <typename T, int D, int MR>
Status launchForward(const Operands &a, const Pointers<T> &p, const unsigned char *tiles,
                     cudaStream_t st) {
  const Dims &m = a.m;
  size_t bytes = sizeof(T) * (MR + 4) * kTile * (D + kPad); // q; k and v, two buffers each
  ZRT_RETURN_IF_ERROR(setSmem(flashForwardKernel<T, D, MR>, bytes));
  dim3 grid((unsigned)(m.b * m.h), (unsigned)((m.sq + kBlockRows<MR> - 1) / kBlockRows<MR>));
  flashForwardKernel<T, D, MR><<<grid, kWarps * 32, bytes, st>>>(
      p.q, p.k, p.v, p.bias, tiles, reinterpret_cast<T *>(a.o), a.lseOut, m);
  return Status::ok();
}

/// Whether the forward of call |a| takes the warp-specialised kernel
/// (cuda/AttentionFa3.cu) for AttentionTiling's kernel number |k|: 3
/// always; by default (0) where it measured faster than the one-warpgroup
/// kernel (zrt-attention-bench --matrix --seqs 4096, 16 heads with every
/// k/v grouping, H100; docs/benchmarks.md): from width 80 under any mask
/// (causal D 80-128: +16-28%, above 128 +26-96%; no mask D 80-128: +42-57%)
/// and from 48 without a causal mask (D 48 +12%, D 64 +7%). Causal at D 48
/// and 64 it is 13-18% slower (its 128-key tiles halve the work of a
/// diagonal tile's block less well than the one-warpgroup kernel's 64-key
/// ones), and D = 32 either way 7-29%: the one-warpgroup kernel stays
/// there. (The rule is by width and mask, the kernels' own trade-offs: no
/// model's shape is named.) bf16 only by default: fp16 (wgmma's f16 forms)
/// has not been timed on a GPU.
bool warpSpecialisedForward(int k, const Operands &a) {
  const Dims &m = a.m;
  return k == 3 || (k == 0 && a.type == DType::BF16 && (m.d >= 80 || (!m.causal && m.d >= 48)));
}
/// Whether TMA can describe the forward's operands: 16-byte aligned bases
/// and row strides (cuTensorMapEncodeTiled's rules). A q, k or v that is a
/// slice at an odd offset (a fused projection with H * D not a multiple of
/// 8) takes the one-warpgroup kernel instead. The backward's also dO.
bool tmaDescribes(const Operands &a, bool backward = false) {
  auto aligned = [](const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return aligned(a.q) && aligned(a.k) && aligned(a.v) && (a.m.inStride * 2) % 16 == 0 &&
         (a.m.kvStride * 2) % 16 == 0 &&
         (!backward || (aligned(a.g) && (a.m.outStride * 2) % 16 == 0));
}
/// The warp-specialised dq: only when asked (kernels 3 and 5). It measured
/// slower than the one-warpgroup dq wherever it applies (D 128 causal:
/// 177-252 against 201-302 TFLOP/s for the whole backward on an H200).
bool warpSpecialisedDq(int k) { return k == 3 || k == 5; }
/// Whether the backward's dk/dv takes the warp-specialised kernel
/// (cuda/AttentionFa3Bwd.cu; every kernel width): 4 and 5 always; by
/// default (0) from width 80, where it measured faster than the
/// one-warpgroup kernel at every k/v grouping, causal or not (H100,
/// zrt-attention-bench --matrix, 4k tokens: docs/benchmarks.md): 10-30% at
/// D 80-128, 1.9-2.3x above 128 (the split blocks, where the one-warpgroup
/// kernel's column halves each recompute S^T and dP^T); at 32-64 the two
/// are within a few percent either way (the 64-key one-warpgroup blocks are
/// already short), so those keep it. bf16 only by default, as the forward.
bool warpSpecialisedDkv(int k, const Operands &a, int width) {
  return k == 4 || k == 5 || (k == 0 && a.type == DType::BF16 && width >= 80);
}

/// Whether the backward of call |a| at kernel width |width| takes the
/// warp-specialised dk/dv (the same rule launchTensorCore follows).
bool fa3DkvPath(const Operands &a, AttentionTiling tiling, int width) {
  return width >= 32 && tiling.bwdKernel != 1 && hopperGpu() && !a.bias && tmaDescribes(a, true) &&
         warpSpecialisedDkv(tiling.bwdKernel, a, width);
}

/// How many parts the warp-specialised dk/dv splits each k/v head's query
/// heads into (DkvParts): 1 where its blocks (batch x k/v heads x key
/// blocks of |keysPerBlock|) fill the GPU's multiprocessors once, else the
/// fewest parts, a divisor of the group, that do. A multi-query model
/// (Gemma 2B: 8 query heads on one k/v head, 4 x 1024 tokens, 64-key
/// blocks at D = 256) had 64 blocks for 132 multiprocessors, each going
/// over all 8 heads. The parts' float sums are added in order by a second
/// kernel: the result depends on the part count, so on the GPU's
/// multiprocessor count, never on timing. Where the blocks fill the GPU a
/// split measured slower (the Llama 1B and 8B shapes: docs/benchmarks.md).
int dkvParts(const Dims &m, int64_t keysPerBlock) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 1;
  const int64_t blocks = m.b * m.hk * ((m.sk + keysPerBlock - 1) / keysPerBlock), group = m.group();
  if (blocks == 0 || blocks >= sms)
    return 1;
  for (int64_t parts = 2; parts < group; ++parts)
    if (group % parts == 0 && blocks * parts >= sms)
      return (int)parts;
  return (int)group;
}

template <typename T, int D, int MR>
Status launchDq(const Operands &a, const Pointers<T> &p, const unsigned char *tiles,
                const float *dsum, cudaStream_t st) {
  const Dims &m = a.m;
  size_t bytes = sizeof(T) * (2 * MR + 4) * kTile * (D + kPad);
  ZRT_RETURN_IF_ERROR(setSmem(flashBackwardDqKernel<T, D, MR>, bytes));
  dim3 grid((unsigned)(m.b * m.h), (unsigned)((m.sq + kBlockRows<MR> - 1) / kBlockRows<MR>));
  flashBackwardDqKernel<T, D, MR><<<grid, kWarps * 32, bytes, st>>>(
      p.q, p.k, p.v, p.bias, tiles, a.lse, dsum, reinterpret_cast<const T *>(a.g),
      reinterpret_cast<T *>(a.dq), m);
  return Status::ok();
}

template <typename T, int D>
Status launchDkv(const Operands &a, const Pointers<T> &p, const unsigned char *tiles,
                 const float *dsum, cudaStream_t st) {
  const Dims &m = a.m;
  size_t bytes = sizeof(T) * 6 * kTile * (D + kPad) + 4 * kTile * sizeof(float);
  ZRT_RETURN_IF_ERROR(setSmem(flashBackwardDkvKernel<T, D>, bytes));
  dim3 grid((unsigned)(m.b * m.hk), (unsigned)((m.sk + kTile - 1) / kTile), D / kvGradColumns<D>());
  flashBackwardDkvKernel<T, D><<<grid, kWarps * 32, bytes, st>>>(
      p.q, p.k, p.v, p.bias, tiles, a.lse, dsum, reinterpret_cast<const T *>(a.g),
      reinterpret_cast<T *>(a.dk), reinterpret_cast<T *>(a.dv), m);
  return Status::ok();
}

/// Query rows per warp of the forward kernel (in blocks of 16) unless told
/// otherwise: two at D = 64 and 128 (one B fragment feeds two products:
/// half the shared-memory reads per FLOP; zrt-attention-bench on an H200,
/// docs/benchmarks.md: 5-8% faster at D = 128 and on GPT-2's shapes, 2% on
/// Llama 3.2 1B's), one elsewhere. The dq kernel keeps one: two measured
/// the same, and its three accumulator sets then spill at D = 128.
int defaultForwardRows(int64_t d) { return d == 64 || d == 128 ? 2 : 1; }

template <typename T, int D>
Status launchTensorCore(bool backward, const Operands &a, CudaContext &ctx, float *dsum,
                        unsigned char *tiles, DkvParts split, AttentionTiling tiling) {
  const Dims &m = a.m;
  cudaStream_t st = ctx.stream;
  auto in = [](const char *p) { return reinterpret_cast<const T *>(p); };
  Pointers<T> p{in(a.q), in(a.k), in(a.v), in(a.bias)};
  launchTileMap<T>(p.bias, tiles, m, st);
  // Two rows of 16 per warp only at D = 64 and 128, where they were
  // measured; the others keep one.
  constexpr bool kWide = D == 64 || D == 128;
  if (!backward) {
    if constexpr (D >= 32)
      if (tiling.fwdKernel != 1 && hopperGpu()) {
        // The warp-specialised kernel takes the structural masks; a bias
        // tensor keeps the one-warpgroup kernel.
        if (warpSpecialisedForward(tiling.fwdKernel, a) && !p.bias && tmaDescribes(a))
          return launchFa3Forward<T, D>(a, tiles, st);
        return launchForwardWgmma<T, D>(a, p, tiles, st);
      }
    int rows = tiling.fwdRows ? tiling.fwdRows : defaultForwardRows(D);
    if (kWide && rows == 2)
      return launchForward < T, D, kWide ? 2 : 1 > (a, p, tiles, st);
    return launchForward<T, D, 1>(a, p, tiles, st);
  }
  if constexpr (D >= 32)
    if (tiling.bwdKernel != 1 && hopperGpu()) {
      bool tma = !p.bias && tmaDescribes(a, true);
      return launchBackwardWgmma<T, D>(a, p, tiles, dsum, st,
                                       tma && warpSpecialisedDq(tiling.bwdKernel),
                                       fa3DkvPath(a, tiling, D), split);
    }
  ZRT_RETURN_IF_ERROR((launchDq<T, D, 1>(a, p, tiles, dsum, st)));
  return launchDkv<T, D>(a, p, tiles, dsum, st);
}

template <typename T>
Status launchTyped(bool backward, const Operands &a, CudaContext &ctx, AttentionTiling tiling) {
  const Dims &m = a.m;
  auto in = [](const char *p) { return reinterpret_cast<const T *>(p); };
  // Scratch: the backward's D = rowsum(dO * O), then a split dk/dv's
  // partial sums (DkvParts), then the mask's tile map.
  int64_t rows = backward ? m.b * m.h * m.sq : 0;
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  size_t dsumBytes = aligned(rows * sizeof(float));
  size_t mapBytes =
      (size_t)(m.biasB * m.biasH * ((m.sq + kTile - 1) / kTile) * ((m.sk + kTile - 1) / kTile));
  // The tensor-core kernels' width, 0 for the SIMT kernels.
  const int width = !std::is_same_v<T, float> && tensorCorePath(a) ? kernelWidth(m.d) : 0;
  DkvParts split;
  if (backward && width > 0 && fa3DkvPath(a, tiling, width))
    split.parts = tiling.dkvParts > 0 && m.group() % tiling.dkvParts == 0
                      ? tiling.dkvParts
                      : dkvParts(m, fa3DkvKeys(width));
  size_t partialBytes = aligned(dkvPartialElems(m, split.parts, width) * sizeof(float));
  ZRT_RETURN_IF_ERROR(ctx.reserve(std::max<size_t>(dsumBytes + partialBytes + mapBytes, 1)));
  char *scratch = static_cast<char *>(ctx.scratch);
  float *dsum = reinterpret_cast<float *>(scratch);
  split.partial = partialBytes ? reinterpret_cast<float *>(scratch + dsumBytes) : nullptr;
  unsigned char *tiles = reinterpret_cast<unsigned char *>(scratch + dsumBytes + partialBytes);
  if (backward && rows > 0)
    launchRowDot<T>(in(a.g), in(a.out), dsum, m, ctx.stream);
  if (m.b * m.h * std::max(m.sq, m.sk) == 0)
    return Status::ok();
  if constexpr (!std::is_same_v<T, float>) {
    if (width > 0)
      return withWidth(m.d, [&](auto w) {
        return launchTensorCore<T, decltype(w)::value>(backward, a, ctx, dsum, tiles, split,
                                                       tiling);
      });
  }
  return launchSimtAttention<T>(backward, a, dsum, ctx.stream);
}

} // namespace

bool hasAttentionKernel(bool backward, const KernelCall &c) {
  return c.in[0].shape.back() <= kMaxSimtD && (isPacked(backward, c) || c.in[0].shape.size() == 4);
}

Status launchAttention(bool backward, const KernelCall &c, CudaContext &ctx,
                       AttentionTiling tiling) {
  Operands a = operandsOf(backward, c);
  switch (a.type) {
  case DType::F32:
    return launchTyped<float>(backward, a, ctx, tiling);
  case DType::BF16:
    return launchTyped<__nv_bfloat16>(backward, a, ctx, tiling);
  default:
    return launchTyped<__half>(backward, a, ctx, tiling);
  }
}

} // namespace zrt
