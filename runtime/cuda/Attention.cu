//===- Attention.cu - flash attention forward and backward ----------------===//
//
// zero.attention and zero.attention_grad (runtime/cpu/Attention.cpp has the
// reference). q [B, Sq, H, D], k and v [B, Sk, H, D], bias [B|1, H|1, Sq, Sk],
// lse [B, H, Sq]. Nothing of size Sq x Sk is stored: each block walks the
// key (or query) tiles with the scores in registers.
//
// 16-bit types, head dimensions 16/32/64/128 (rows 16-byte aligned): tensor
// cores through mma.sync m16n8k16 (float accumulation), the FlashAttention-2
// scheme: a warp owns 16 query rows of a 64-row block, keeps its q fragments
// and output in registers, and rescales its running sum when the row maximum
// grows; the probabilities go from the score accumulators straight into the
// A operand of the P.V product (the fragment layouts line up). Shared memory
// holds one 64-key tile of k and v (v transposed), rows padded by 8 elements
// so that the fragment loads hit 32 different banks.
//
// The backward recomputes the probabilities from lse (no atomics, so the
// result does not depend on scheduling): one kernel per 64-query block for
// dq, one per 64-key block for dk and dv, after a kernel that forms
// D = rowsum(dO * O).
//
// float32 (and any other shape): a thread per row, the same arithmetic in
// plain float (cuda/AttentionSimt.cu); it is there for exactness tests and
// small models, not speed.
//
// Why our own kernels and not cuDNN's SDPA: cuDNN's fused attention is
// reached through its graph API, which the cudnn-frontend C++ headers
// wrap; those headers are not part of the CUDA or Debian packages here, and
// the backend descriptors alone would mean re-deriving the frontend's
// operation graph. These kernels are ~400 lines, deterministic, and match
// the reference on every plan (tools/gpu-check.sh).
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionShape.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace zrt {
namespace {

constexpr int kTile = 64; // rows (queries or keys) per block and per tile
constexpr int kWarps = 4; // 16 rows each
constexpr int kPad = 8;   // shared-memory row padding, elements

/// What the mask holds in each 64 x 64 tile: map[((bb * Hb + hb) * qTiles +
/// qt) * kTiles + kt] is kSkipTile where every element is -inf (the upper
/// triangle of a causal mask: the kernels skip the tile), kPlainTile where
/// every element is 0 (below the diagonal: the kernels do not read the mask),
/// else kBiasTile.
enum : unsigned char { kSkipTile = 0, kPlainTile = 1, kBiasTile = 2 };
__host__ __device__ inline int64_t tileIndex(const Dims &m, int64_t b, int64_t h, int64_t qt,
                                             int64_t kt) {
  int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  return (((m.biasB == 1 ? 0 : b) * m.biasH + (m.biasH == 1 ? 0 : h)) * qTiles + qt) * kTiles + kt;
}

template <typename T> __global__ void tileMapKernel(const T *bias, unsigned char *map, Dims m) {
  int64_t kt = blockIdx.x, qt = blockIdx.y, bh = blockIdx.z;
  const T *base = bias + (bh * m.sq + qt * 64) * m.sk + kt * 64;
  int rows = m.sq - qt * 64 < 64 ? (int)(m.sq - qt * 64) : 64;
  int cols = m.sk - kt * 64 < 64 ? (int)(m.sk - kt * 64) : 64;
  bool finite = false, nonzero = false;
  for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
    float x = toF(base[(int64_t)(e / cols) * m.sk + e % cols]);
    finite |= x != -INFINITY;
    nonzero |= x != 0.0f;
  }
  finite = __syncthreads_or(finite);
  nonzero = __syncthreads_or(nonzero);
  if (threadIdx.x == 0)
    map[(bh * ((m.sq + 63) / 64) + qt) * ((m.sk + 63) / 64) + kt] = !finite   ? kSkipTile
                                                                    : nonzero ? kBiasTile
                                                                              : kPlainTile;
}

/// Two floats as one 32-bit register of two 16-bit values (lo at the lower
/// address), rounded to nearest even by one cvt.rn.*x2.f32.
template <typename T> __device__ __forceinline__ uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&pair);
  } else {
    __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&pair);
  }
}
/// 2^x by the special-function unit (ex2.approx.ftz: relative error ~2^-22;
/// 2^-inf = 0). The softmax works in the log2 domain, scale * log2(e)
/// folded into one FFMA per score, as FlashAttention does.
__device__ __forceinline__ float exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

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

/// Starts copying 16 bytes from global to shared memory (cp.async; zeros
/// when !valid), to be waited for with cpAsyncWait.
__device__ __forceinline__ void cpAsync16(void *smem, const void *gmem, bool valid) {
  unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most |N| of the committed groups are still in flight.
template <int N> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// Starts copying a 64-row tile of a [.., S, H, D] tensor (rows [row0, row0 +
/// 64) of head |h|) to tile[r][d] (stride D + kPad); rows past |rows| are zero.
template <typename T, int D>
__device__ __forceinline__ void loadTileAsync(const T *x, const Dims &m, int64_t b, int64_t h,
                                              int64_t row0, int64_t rows, Rows which, T *tile) {
  constexpr int V = 8; // elements per 16 bytes
  for (int k = threadIdx.x; k < kTile * D / V; k += blockDim.x) {
    int r = k / (D / V), c = (k % (D / V)) * V;
    int64_t row = row0 + r;
    bool valid = row < rows;
    int64_t at = m.at(which, b, valid ? row : 0, h);
    cpAsync16(tile + r * (D + kPad) + c, x + at + c, valid);
  }
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

/// S[nt] (16 rows x 8 columns each, 8 of them: 64 columns) = A B^T where
/// A's 16 rows are aRows[r][d] and B's 64 rows are tile[r][d], both in
/// shared memory (stride D + kPad). Fragments come through ldmatrix: A's
/// 16 x 16 block per kk, B's for two column blocks (nt, nt + 1) at a time.
/// Keeping A in shared memory rather than registers (as FlashAttention-2
/// does) leaves the registers to the accumulators: more blocks per SM.
template <typename T, int D>
__device__ __forceinline__ void scoresTile(const T *aRows, const T *tile, float s[8][4]) {
  int lane = threadIdx.x & 31, matrix = lane >> 3, row = lane & 7;
  const T *aBase = aRows + (row + (matrix & 1) * 8) * (D + kPad) + (matrix >> 1) * 8;
  const T *bBase = tile + ((matrix >> 1) * 8 + row) * (D + kPad) + (matrix & 1) * 8;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t af[4];
    ldmatrix(af, aBase + kk * 16);
#pragma unroll
    for (int nt = 0; nt < 8; nt += 2) {
      uint32_t bf[4];
      ldmatrix(bf, bBase + nt * 8 * (D + kPad) + kk * 16);
      mma<T>(s[nt], af, bf[0], bf[1]);
      mma<T>(s[nt + 1], af, bf[2], bf[3]);
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

/// acc[nd] (16 rows x D) += P B where P (16 x 64) is in score accumulators
/// and B (64 x D) is tile[r][d]: its B fragments come transposed through
/// ldmatrix, two column blocks of 8 at a time.
template <typename T, int D>
__device__ __forceinline__ void productTile(const float p[8][4], const T *tile,
                                            float acc[D / 8][4]) {
  int lane = threadIdx.x & 31, matrix = lane >> 3, row = lane & 7;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    uint32_t a[4] = {pack<T>(p[2 * kk][0], p[2 * kk][1]), pack<T>(p[2 * kk][2], p[2 * kk][3]),
                     pack<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                     pack<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    const T *base = tile + (kk * 16 + (matrix & 1) * 8 + row) * (D + kPad) + (matrix >> 1) * 8;
#pragma unroll
    for (int nd = 0; nd < D / 8; nd += 2) {
      uint32_t bf[4];
      ldmatrixTrans(bf, base + nd * 8);
      mma<T>(acc[nd], a, bf[0], bf[1]);
      mma<T>(acc[nd + 1], a, bf[2], bf[3]);
    }
  }
}

/// The next tile at or after |from| that the mask does not rule out
/// (|count| when none); the same for the whole block.
__device__ __forceinline__ int64_t nextTile(const unsigned char *tiles, const Dims &m, int64_t b,
                                            int64_t h, int64_t from, int64_t count, bool overKeys,
                                            int64_t fixed) {
  for (int64_t i = from; i < count; ++i)
    if (tiles[overKeys ? tileIndex(m, b, h, fixed, i) : tileIndex(m, b, h, i, fixed)])
      return i;
  return count;
}

/// Forward, tensor cores: block (query tile, b * H + h). The next k/v tile
/// is copied (cp.async) while this one is computed.
template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, D <= 64 ? 4 : 1)
    flashForwardKernel(const T *q, const T *k, const T *v, const T *bias,
                       const unsigned char *tiles, T *out, float *lse, Dims m) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kTileElems = kTile * (D + kPad);
  // q's 64 rows, then k and v: two buffers each.
  T *qs = reinterpret_cast<T *>(smem), *ks = qs + kTileElems, *vs = ks + 2 * kTileElems;
  int64_t b = blockIdx.y / m.h, h = blockIdx.y % m.h, kh = m.kvHead(h);
  int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  int64_t row0 = blockIdx.x * kTile + warp * 16, kTiles = (m.sk + kTile - 1) / kTile;
  const T *qw = qs + warp * 16 * (D + kPad); // this warp's rows
  loadTileAsync<T, D>(q, m, b, h, blockIdx.x * kTile, m.sq, Rows::Q, qs);
  float o[D / 8][4] = {};
  float mx[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0}; // mx: log2 domain
  const float sl = m.scale * kLog2e;
  const T *biasRows[2];
  for (int half = 0; half < 2; ++half) {
    int64_t row = min(row0 + g + 8 * half, m.sq - 1);
    biasRows[half] = bias + m.biasRow(b, h, row);
  }
  int64_t cur = nextTile(tiles, m, b, h, 0, kTiles, true, blockIdx.x);
  if (cur < kTiles) {
    loadTileAsync<T, D>(k, m, b, kh, cur * kTile, m.sk, Rows::K, ks);
    loadTileAsync<T, D>(v, m, b, kh, cur * kTile, m.sk, Rows::K, vs);
  }
  cpAsyncCommit();
  for (int buf = 0; cur < kTiles; buf ^= 1) {
    int64_t next = nextTile(tiles, m, b, h, cur + 1, kTiles, true, blockIdx.x);
    if (next < kTiles) {
      loadTileAsync<T, D>(k, m, b, kh, next * kTile, m.sk, Rows::K, ks + (buf ^ 1) * kTileElems);
      loadTileAsync<T, D>(v, m, b, kh, next * kTile, m.sk, Rows::K, vs + (buf ^ 1) * kTileElems);
    }
    cpAsyncCommit();
    cpAsyncWait<1>();
    __syncthreads();
    int64_t key0 = cur * kTile;
    bool withBias = tiles[tileIndex(m, b, h, blockIdx.x, cur)] == kBiasTile;
    float s[8][4];
    scoresTile<T, D>(qw, ks + buf * kTileElems, s);
    // The scores in the log2 domain, x = s scale log2(e) [+ bias log2(e)]:
    // tiles with mask values or keys past the end are scaled here (mul = 1
    // after); interior tiles keep the raw scores and fold the scale into
    // the exponent's FFMA (max(s) scale = max(s scale) for scale > 0).
    bool general = withBias || key0 + kTile > m.sk || !(sl > 0);
    float mul = general ? 1.0f : sl;
    if (general) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int64_t col = key0 + nt * 8 + t * 2 + (e & 1);
          float &x = s[nt][e];
          x = col >= m.sk ? -INFINITY
                          : x * sl + (withBias ? toF(biasRows[e >> 1][col]) * kLog2e : 0.0f);
        }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tileMax = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        tileMax = fmaxf(tileMax, fmaxf(s[nt][2 * half], s[nt][2 * half + 1]));
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffff, tileMax, 1));
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffff, tileMax, 2));
      float newMax = fmaxf(mx[half], tileMax * mul);
      float base = newMax == -INFINITY ? 0.0f : newMax;
      float alpha = exp2Approx(mx[half] - base);
      float sum = 0;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float &x = s[nt][2 * half + e];
          x = exp2Approx(fmaf(x, mul, -base));
          sum += x;
        }
      l[half] = l[half] * alpha + sum;
      mx[half] = newMax;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        o[nd][2 * half] *= alpha;
        o[nd][2 * half + 1] *= alpha;
      }
    }
    productTile<T, D>(s, vs + buf * kTileElems, o);
    __syncthreads(); // the next iteration refills this buffer
    cur = next;
  }
  cpAsyncWait<0>(); // a block with no tiles still issued its own rows' copies
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = l[half];
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    sum += __shfl_xor_sync(0xffffffff, sum, 2);
    int64_t row = row0 + g + 8 * half;
    if (row >= m.sq)
      continue;
    bool empty = mx[half] == -INFINITY;
    float inv = empty ? 0.0f : 1.0f / sum, fill = m.nanToZero ? 0.0f : NAN;
    T *orow = out + m.oAt(b, row, h);
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      float lo = empty ? fill : o[nd][2 * half] * inv,
            hi = empty ? fill : o[nd][2 * half + 1] * inv;
      *reinterpret_cast<uint32_t *>(orow + nd * 8 + t * 2) = pack<T>(lo, hi);
    }
    if (t == 0)
      lse[m.lseAt(b, h, row)] = empty ? INFINITY : mx[half] * kLn2 + logf(sum);
  }
}

/// D[b, h, i] = sum_d dO * O (float), a warp per row.
template <typename T> __global__ void rowDotKernel(const T *g, const T *out, float *dsum, Dims m) {
  int64_t rows = m.b * m.h * m.sq;
  int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows)
    return;
  int64_t i = r % m.sq, h = (r / m.sq) % m.h, b = r / (m.sq * m.h);
  const T *gr = g + m.oAt(b, i, h), *orow = out + m.oAt(b, i, h);
  float acc = 0;
  for (int64_t d = threadIdx.x & 31; d < m.d; d += 32)
    acc += toF(gr[d]) * toF(orow[d]);
  for (int o = 16; o > 0; o >>= 1)
    acc += __shfl_xor_sync(0xffffffff, acc, o);
  if ((threadIdx.x & 31) == 0)
    dsum[r] = acc;
}

/// Backward for dq, tensor cores: block (query tile, b * H + h); k and v
/// tiles double-buffered as in the forward.
template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, D <= 64 ? 4 : 1)
    flashBackwardDqKernel(const T *q, const T *k, const T *v, const T *bias,
                          const unsigned char *tiles, const float *lse, const float *dsum,
                          const T *g, T *dq, Dims m) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kTileElems = kTile * (D + kPad);
  // q's and dO's 64 rows, then k and v: two buffers each.
  T *qs = reinterpret_cast<T *>(smem), *gs = qs + kTileElems, *ks = gs + kTileElems,
    *vs = ks + 2 * kTileElems;
  int64_t b = blockIdx.y / m.h, h = blockIdx.y % m.h, kh = m.kvHead(h);
  int warp = threadIdx.x >> 5, gi = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  int64_t row0 = blockIdx.x * kTile + warp * 16, kTiles = (m.sk + kTile - 1) / kTile;
  const T *qw = qs + warp * 16 * (D + kPad), *gw = gs + warp * 16 * (D + kPad);
  loadTileAsync<T, D>(q, m, b, h, blockIdx.x * kTile, m.sq, Rows::Q, qs);
  loadTileAsync<T, D>(g, m, b, h, blockIdx.x * kTile, m.sq, Rows::Out, gs);
  float rowLse[2], rowD[2];
  const T *biasRows[2];
  for (int half = 0; half < 2; ++half) {
    int64_t row = row0 + gi + 8 * half;
    bool in = row < m.sq;
    rowLse[half] = in ? lse[m.lseAt(b, h, row)] * kLog2e : INFINITY; // log2 domain
    rowD[half] = in ? dsum[m.lseAt(b, h, row)] : 0.0f;
    biasRows[half] = bias + m.biasRow(b, h, in ? row : 0);
  }
  float acc[D / 8][4] = {};
  const float sl = m.scale * kLog2e;
  int64_t cur = nextTile(tiles, m, b, h, 0, kTiles, true, blockIdx.x);
  if (cur < kTiles) {
    loadTileAsync<T, D>(k, m, b, kh, cur * kTile, m.sk, Rows::K, ks);
    loadTileAsync<T, D>(v, m, b, kh, cur * kTile, m.sk, Rows::K, vs);
  }
  cpAsyncCommit();
  for (int buf = 0; cur < kTiles; buf ^= 1) {
    int64_t next = nextTile(tiles, m, b, h, cur + 1, kTiles, true, blockIdx.x);
    if (next < kTiles) {
      loadTileAsync<T, D>(k, m, b, kh, next * kTile, m.sk, Rows::K, ks + (buf ^ 1) * kTileElems);
      loadTileAsync<T, D>(v, m, b, kh, next * kTile, m.sk, Rows::K, vs + (buf ^ 1) * kTileElems);
    }
    cpAsyncCommit();
    cpAsyncWait<1>();
    __syncthreads();
    int64_t key0 = cur * kTile;
    bool withBias = tiles[tileIndex(m, b, h, blockIdx.x, cur)] == kBiasTile;
    float s[8][4], dp[8][4];
    scoresTile<T, D>(qw, ks + buf * kTileElems, s);
    scoresTile<T, D>(gw, vs + buf * kTileElems, dp);
    // P = 2^(s scale log2(e) [+ bias log2(e)] - lse log2(e)); interior
    // tiles take one FFMA and one ex2 per score.
    if (withBias || key0 + kTile > m.sk) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int64_t col = key0 + nt * 8 + t * 2 + (e & 1);
          float bv = withBias && col < m.sk ? toF(biasRows[e >> 1][col]) * kLog2e : 0.0f;
          float p = col < m.sk ? exp2Approx(fmaf(s[nt][e], sl, bv - rowLse[e >> 1])) : 0.0f;
          s[nt][e] = p * (dp[nt][e] - rowD[e >> 1]); // dS
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[nt][e] = exp2Approx(fmaf(s[nt][e], sl, -rowLse[e >> 1])) * (dp[nt][e] - rowD[e >> 1]);
    }
    productTile<T, D>(s, ks + buf * kTileElems, acc);
    __syncthreads();
    cur = next;
  }
  cpAsyncWait<0>();
  for (int half = 0; half < 2; ++half) {
    int64_t row = row0 + gi + 8 * half;
    if (row >= m.sq)
      continue;
    T *drow = dq + m.dqAt(b, row, h);
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      *reinterpret_cast<uint32_t *>(drow + nd * 8 + t * 2) =
          pack<T>(acc[nd][2 * half] * m.scale, acc[nd][2 * half + 1] * m.scale);
  }
}

/// Backward for dk and dv, tensor cores: block (key tile, b * Hk + kv head);
/// the scores transposed (a warp's 16 keys x 64 queries of a query tile); q
/// and dO tiles double-buffered. With grouped-query attention the block
/// goes over the query heads that share its k/v head one after the other,
/// summing their contributions in its accumulators (no atomics).
template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, D <= 64 ? 3 : 1)
    flashBackwardDkvKernel(const T *q, const T *k, const T *v, const T *bias,
                           const unsigned char *tiles, const float *lse, const float *dsum,
                           const T *g, T *dk, T *dv, Dims m) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kTileElems = kTile * (D + kPad);
  // k's and v's 64 rows, q and dO (two buffers each), then lse and D of
  // the query tiles.
  T *kb = reinterpret_cast<T *>(smem), *vb = kb + kTileElems, *qs = vb + kTileElems,
    *gs = qs + 2 * kTileElems;
  float *tileLse = reinterpret_cast<float *>(gs + 2 * kTileElems), *tileD = tileLse + 2 * kTile;
  const int64_t group = m.group();
  int64_t b = blockIdx.y / m.hk, kh = blockIdx.y % m.hk, h = kh * group; // the group's first head
  int warp = threadIdx.x >> 5, gi = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  int64_t key0 = blockIdx.x * kTile + warp * 16, qTiles = (m.sq + kTile - 1) / kTile;
  const T *kw = kb + warp * 16 * (D + kPad), *vw = vb + warp * 16 * (D + kPad);
  loadTileAsync<T, D>(k, m, b, kh, blockIdx.x * kTile, m.sk, Rows::K, kb);
  loadTileAsync<T, D>(v, m, b, kh, blockIdx.x * kTile, m.sk, Rows::K, vb);
  float dkAcc[D / 8][4] = {}, dvAcc[D / 8][4] = {};
  const float sl = m.scale * kLog2e;
  auto load = [&](int64_t tile, int buf) {
    loadTileAsync<T, D>(q, m, b, h, tile * kTile, m.sq, Rows::Q, qs + buf * kTileElems);
    loadTileAsync<T, D>(g, m, b, h, tile * kTile, m.sq, Rows::Out, gs + buf * kTileElems);
    for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
      int64_t query = tile * kTile + r;
      bool in = query < m.sq;
      tileLse[buf * kTile + r] = in ? lse[m.lseAt(b, h, query)] * kLog2e : INFINITY;
      tileD[buf * kTile + r] = in ? dsum[m.lseAt(b, h, query)] : 0.0f;
    }
  };
  const int64_t lastHead = h + group - 1;
  int64_t cur = nextTile(tiles, m, b, h, 0, qTiles, false, blockIdx.x);
  if (cur < qTiles)
    load(cur, 0);
  cpAsyncCommit();
  for (int buf = 0;; buf ^= 1) {
    if (cur >= qTiles) { // this head is done: the group's next one
      if (h == lastHead)
        break;
      ++h;
      cur = nextTile(tiles, m, b, h, 0, qTiles, false, blockIdx.x);
      if (cur >= qTiles)
        continue;
      load(cur, buf);
      cpAsyncCommit();
    }
    int64_t next = nextTile(tiles, m, b, h, cur + 1, qTiles, false, blockIdx.x);
    if (next < qTiles)
      load(next, buf ^ 1);
    cpAsyncCommit();
    cpAsyncWait<1>();
    __syncthreads();
    int64_t q0 = cur * kTile;
    bool withBias = tiles[tileIndex(m, b, h, cur, blockIdx.x)] == kBiasTile;
    const T *biasTile = bias + m.biasRow(b, h, q0);
    const float *curLse = tileLse + buf * kTile, *curD = tileD + buf * kTile;
    float s[8][4], dp[8][4];
    scoresTile<T, D>(kw, qs + buf * kTileElems, s);  // S^T: keys x queries
    scoresTile<T, D>(vw, gs + buf * kTileElems, dp); // dP^T
    if (withBias || q0 + kTile > m.sq || (int64_t)(blockIdx.x + 1) * kTile > m.sk) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int64_t key = key0 + gi + 8 * (e >> 1);
          int col = nt * 8 + t * 2 + (e & 1);
          int64_t query = q0 + col;
          bool in = key < m.sk && query < m.sq;
          float bv = withBias && in ? toF(biasTile[col * m.sk + key]) * kLog2e : 0.0f;
          float p = in ? exp2Approx(fmaf(s[nt][e], sl, bv - curLse[col])) : 0.0f;
          s[nt][e] = p;
          dp[nt][e] = p * (dp[nt][e] - curD[col]); // dS^T
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int col = nt * 8 + t * 2 + (e & 1);
          float p = exp2Approx(fmaf(s[nt][e], sl, -curLse[col]));
          s[nt][e] = p;
          dp[nt][e] = p * (dp[nt][e] - curD[col]); // dS^T
        }
    }
    productTile<T, D>(s, gs + buf * kTileElems, dvAcc);
    productTile<T, D>(dp, qs + buf * kTileElems, dkAcc);
    __syncthreads();
    cur = next;
  }
  cpAsyncWait<0>();
  for (int half = 0; half < 2; ++half) {
    int64_t key = key0 + gi + 8 * half;
    if (key >= m.sk)
      continue;
    T *dkRow = dk + m.dkAt(b, key, kh), *dvRow = dv + m.dkAt(b, key, kh);
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      *reinterpret_cast<uint32_t *>(dkRow + nd * 8 + t * 2) =
          pack<T>(dkAcc[nd][2 * half] * m.scale, dkAcc[nd][2 * half + 1] * m.scale);
      *reinterpret_cast<uint32_t *>(dvRow + nd * 8 + t * 2) =
          pack<T>(dvAcc[nd][2 * half], dvAcc[nd][2 * half + 1]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

bool isPacked(bool backward, const KernelCall &c) {
  size_t flag = backward ? 0 : 1;
  return c.ints.size() > flag && c.ints[flag] != 0;
}

Operands operandsOf(bool backward, const KernelCall &c) {
  bool packed = isPacked(backward, c);
  const TensorRef &x = c.in[0];
  int64_t es = dtypeSize(x.dtype);
  Operands a;
  a.type = x.dtype;
  int64_t b = x.shape[0], sq = x.shape[1], h = packed ? x.shape[3] : x.shape[2],
          d = packed ? x.shape[4] : x.shape[3], sk = packed ? sq : c.in[1].shape[1];
  const TensorRef &bias = c.in[packed ? 1 : 3];
  int64_t in = packed ? 3 * h * d : h * d;
  a.m = Dims{b,
             sq,
             sk,
             h,
             d,
             bias.shape[0],
             bias.shape[1],
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
  a.bias = bias.data;
  if (!backward) {
    a.o = c.out[0].data;
    a.lseOut = c.out[1].as<float>();
    return a;
  }
  int at = packed ? 2 : 4; // out, lse, dout
  a.out = c.in[at].data;
  a.lse = c.in[at + 1].as<float>();
  a.g = c.in[at + 2].data;
  a.dq = c.out[0].data;
  a.dk = packed ? c.out[0].data + h * d * es : c.out[1].data;
  a.dv = packed ? c.out[0].data + 2 * h * d * es : c.out[2].data;
  return a;
}

/// Whether the tensor-core kernels take this call: 16-bit, D in {16, 32,
/// 64, 128}, every row of every operand 16-byte aligned.
bool tensorCorePath(const Operands &a) {
  int64_t d = a.m.d;
  if ((a.type != DType::BF16 && a.type != DType::F16) ||
      (d != 16 && d != 32 && d != 64 && d != 128))
    return false;
  for (const void *p : {(const void *)a.q, (const void *)a.k, (const void *)a.v,
                        (const void *)a.out, (const void *)a.g, (const void *)a.o,
                        (const void *)a.dq, (const void *)a.dk, (const void *)a.dv})
    if (p && !aligned16(p))
      return false;
  return true;
}

template <typename K> Status setSmem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess)
      return errorf("attention: ", cudaGetErrorString(e));
  }
  return Status::ok();
}

template <typename T, int D>
Status launchTensorCore(bool backward, const Operands &a, CudaContext &ctx, float *dsum,
                        unsigned char *tiles) {
  const Dims &m = a.m;
  cudaStream_t st = ctx.stream;
  auto in = [](const char *p) { return reinterpret_cast<const T *>(p); };
  auto out = [](char *p) { return reinterpret_cast<T *>(p); };
  const T *q = in(a.q), *k = in(a.k), *v = in(a.v), *bias = in(a.bias);
  dim3 block(kWarps * 32);
  tileMapKernel<T><<<dim3((unsigned)((m.sk + kTile - 1) / kTile),
                          (unsigned)((m.sq + kTile - 1) / kTile), (unsigned)(m.biasB * m.biasH)),
                     256, 0, st>>>(bias, tiles, m);
  if (!backward) {
    size_t bytes = sizeof(T) * 5 * kTile * (D + kPad); // q; k and v, two buffers each
    ZRT_RETURN_IF_ERROR(setSmem(flashForwardKernel<T, D>, bytes));
    dim3 grid((unsigned)((m.sq + kTile - 1) / kTile), (unsigned)(m.b * m.h));
    flashForwardKernel<T, D>
        <<<grid, block, bytes, st>>>(q, k, v, bias, tiles, out(a.o), a.lseOut, m);
    return Status::ok();
  }
  size_t dqBytes = sizeof(T) * 6 * kTile * (D + kPad);
  ZRT_RETURN_IF_ERROR(setSmem(flashBackwardDqKernel<T, D>, dqBytes));
  dim3 dqGrid((unsigned)((m.sq + kTile - 1) / kTile), (unsigned)(m.b * m.h));
  flashBackwardDqKernel<T, D>
      <<<dqGrid, block, dqBytes, st>>>(q, k, v, bias, tiles, a.lse, dsum, in(a.g), out(a.dq), m);
  size_t kvBytes = sizeof(T) * 6 * kTile * (D + kPad) + 4 * kTile * sizeof(float);
  ZRT_RETURN_IF_ERROR(setSmem(flashBackwardDkvKernel<T, D>, kvBytes));
  dim3 kvGrid((unsigned)((m.sk + kTile - 1) / kTile), (unsigned)(m.b * m.hk));
  flashBackwardDkvKernel<T, D><<<kvGrid, block, kvBytes, st>>>(q, k, v, bias, tiles, a.lse, dsum,
                                                               in(a.g), out(a.dk), out(a.dv), m);
  return Status::ok();
}

template <typename T> Status launchTyped(bool backward, const Operands &a, CudaContext &ctx) {
  const Dims &m = a.m;
  auto in = [](const char *p) { return reinterpret_cast<const T *>(p); };
  auto out = [](char *p) { return reinterpret_cast<T *>(p); };
  // Scratch: the backward's D = rowsum(dO * O), then the mask's tile map.
  int64_t rows = backward ? m.b * m.h * m.sq : 0;
  size_t dsumBytes = (size_t)(rows * sizeof(float) + 255) / 256 * 256;
  size_t mapBytes =
      (size_t)(m.biasB * m.biasH * ((m.sq + kTile - 1) / kTile) * ((m.sk + kTile - 1) / kTile));
  ZRT_RETURN_IF_ERROR(ctx.reserve(std::max<size_t>(dsumBytes + mapBytes, 1)));
  float *dsum = static_cast<float *>(ctx.scratch);
  unsigned char *tiles = static_cast<unsigned char *>(ctx.scratch) + dsumBytes;
  if (backward && rows > 0)
    rowDotKernel<T>
        <<<(unsigned)((rows + 7) / 8), 256, 0, ctx.stream>>>(in(a.g), in(a.out), dsum, m);
  if (m.b * m.h * std::max(m.sq, m.sk) == 0)
    return Status::ok();
  if constexpr (!std::is_same_v<T, float>) {
    if (tensorCorePath(a)) {
      switch (m.d) {
      case 16:
        return launchTensorCore<T, 16>(backward, a, ctx, dsum, tiles);
      case 32:
        return launchTensorCore<T, 32>(backward, a, ctx, dsum, tiles);
      case 64:
        return launchTensorCore<T, 64>(backward, a, ctx, dsum, tiles);
      default:
        return launchTensorCore<T, 128>(backward, a, ctx, dsum, tiles);
      }
    }
  }
  return launchSimtAttention<T>(backward, a, dsum, ctx.stream);
}

} // namespace

bool hasAttentionKernel(bool backward, const KernelCall &c) {
  return c.in[0].shape.back() <= kMaxSimtD && (isPacked(backward, c) || c.in[0].shape.size() == 4);
}

Status launchAttention(bool backward, const KernelCall &c, CudaContext &ctx) {
  Operands a = operandsOf(backward, c);
  switch (a.type) {
  case DType::F32:
    return launchTyped<float>(backward, a, ctx);
  case DType::BF16:
    return launchTyped<__nv_bfloat16>(backward, a, ctx);
  default:
    return launchTyped<__half>(backward, a, ctx);
  }
}

} // namespace zrt
