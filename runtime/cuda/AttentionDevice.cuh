//===- AttentionDevice.cuh - what the attention kernels share on the GPU -*- CUDA -*-===//
//
// Device code shared by the tensor-core attention kernels (cuda/Attention.cu:
// mma.sync and the one-warpgroup wgmma kernels; cuda/AttentionFa3.cu and
// AttentionFa3Bwd.cu: the warp-specialised ones): the mask's tile map, the structural masks and
// soft-capping over a warp's score accumulators, wgmma's shared-memory layout
// and instructions, and the forward's output rows.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_ATTENTIONDEVICE_CUH
#define ZRT_CUDA_ATTENTIONDEVICE_CUH

#include "cuda/AttentionShape.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace zrt::attn {

constexpr int kTile = 64; // keys (or queries) per tile, and the mask map's tile
constexpr int kWarps = 4;
constexpr int kPad = 8; // shared-memory row padding, elements

/// What the mask holds in each 64 x 64 tile: map[((bb * Hb + hb) * qTiles +
/// qt) * kTiles + kt] is kSkipTile where every element is -inf (the upper
/// triangle of a causal mask: the kernels skip the tile), kPlainTile where
/// every element is 0 (below the diagonal: the kernels do not read the
/// mask), kCausalTile where element (query i, key j) is 0 for j <= i and
/// -inf above (a causal mask's diagonal: the kernels form it from the
/// indices instead of reading it), kDocumentTile where packed documents'
/// starts cut it too (a structural mask with positions), else kBiasTile.
enum : unsigned char {
  kSkipTile = 0,
  kPlainTile = 1,
  kBiasTile = 2,
  kCausalTile = 3,
  kDocumentTile = 4
};
__host__ __device__ inline int64_t tileIndex(const Dims &m, int64_t b, int64_t h, int64_t qt,
                                             int64_t kt) {
  int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  return (((m.biasB == 1 ? 0 : b) * m.biasH + (m.biasH == 1 ? 0 : h)) * qTiles + qt) * kTiles + kt;
}

/// Block blockIdx.x of a 1-d grid of |blocks| row blocks for each (batch,
/// head) pair, a pair's blocks adjacent (FlashAttention-3's order): the
/// blocks running at once share their head's k and v (the backward's dk/dv:
/// q and dO) in L2, where (head, block) order streams every head's from
/// memory once per block at multi-head shapes (H100, 16 heads of 4k tokens
/// at D = 128: 413 against 556 TFLOP/s forward). |reversed|: the last block
/// first (under a causal mask, the longest).
struct HeadBlock {
  int64_t b, h, block;
};
__device__ __forceinline__ HeadBlock headBlock(int64_t heads, int64_t blocks, bool reversed) {
  const int64_t i = blockIdx.x, bh = i / blocks, r = i % blocks;
  return {bh / heads, bh % heads, reversed ? blocks - 1 - r : r};
}
/// The grid of headBlock: |pairs| (batch, head) pairs of |blocks| blocks.
inline dim3 headBlockGrid(int64_t pairs, int64_t blocks) {
  return dim3((unsigned)(pairs * blocks));
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
// exp2Approx and kLog2e (DeviceFloat.h): the softmax works in the log2
// domain, scale * log2(e) folded into one FFMA per score.

/// Where a warp's edge tile lies: its scores' first query q0 and key k0
/// as keys left (sk - k0), queries left (sq - q0) and diag = q0 - k0, 32-bit
/// (clamped: only compared with offsets inside a tile), the bias rows'
/// stride, and with documents the positions from query q0 of batch b.
struct MaskFrame {
  int keysLeft, rowsLeft, diag, window;
  int64_t stride;
  const int64_t *positions;
};
__host__ __device__ inline MaskFrame maskFrame(const Dims &m, int64_t b, int64_t q0, int64_t k0) {
  auto clamp = [](int64_t x) {
    return (int)(x < -(1 << 20) ? -(1 << 20) : x > (1 << 20) ? (1 << 20) : x);
  };
  int window = m.window > 0 && m.window < (1 << 28) ? (int)m.window : (1 << 28);
  return MaskFrame{clamp(m.sk - k0),
                   clamp(m.sq - q0),
                   clamp(q0 - k0),
                   window,
                   m.sk,
                   m.positions ? m.positions + b * m.sq + q0 : nullptr};
}

/// s = s scale log2(e) + mask log2(e) over a warp's accumulators (MR blocks
/// of 16 rows x 64 columns; rows are queries and columns keys, or the
/// other way round if |KeyRows|): -inf for keys past the end, above a
/// causal tile's diagonal, outside its window or before the query's
/// document (its position back) or where the bias is -inf; the bias read from
/// |biasAt| (the element of (q0, k0)) only in a kBiasTile, whose loop is
/// separate so that the causal one holds no addresses.
template <typename T, int MR, bool KeyRows, bool Bias = true>
__device__ __forceinline__ void maskScores(float s[MR][8][4], float sl, unsigned char kind,
                                           const T *biasAt, const MaskFrame &f) {
  int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  auto apply = [&](auto withBias, auto documents) {
    constexpr bool kDocs = decltype(documents)::value;
    // A document tile: the first key (from k0) each of this thread's queries
    // sees, read once (its rows, or with |KeyRows| its columns).
    int first[KeyRows ? 8 : MR][2];
    if constexpr (kDocs) {
#pragma unroll
      for (int i = 0; i < (KeyRows ? 8 : MR); ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          int qi = KeyRows ? i * 8 + t * 2 + half : i * 16 + g + 8 * half;
          int q = qi < f.rowsLeft ? qi : f.rowsLeft - 1;
          first[i][half] = qi + f.diag - (int)f.positions[q];
        }
    }
#pragma unroll
    for (int mr = 0; mr < MR; ++mr)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int r = mr * 16 + g + 8 * (e >> 1), c = nt * 8 + t * 2 + (e & 1);
          int qi = KeyRows ? c : r, kj = KeyRows ? r : c;
          float &x = s[mr][nt][e];
          bool masked = kj >= f.keysLeft || ((kDocs || kind == kCausalTile) &&
                                             (kj > qi + f.diag || kj <= qi + f.diag - f.window));
          if constexpr (kDocs)
            masked |= kj < (KeyRows ? first[nt][e & 1] : first[mr][e >> 1]);
          if (masked) {
            x = -INFINITY;
          } else if constexpr (decltype(withBias)::value) {
            int row = qi < f.rowsLeft ? qi : f.rowsLeft - 1;
            x = x * sl + toF(biasAt[row * f.stride + kj]) * kLog2e;
          } else {
            x = x * sl;
          }
        }
  };
  // One loop per kind of tile: the causal one holds no addresses, the
  // documents' reads stay out of the others.
  if (Bias && kind == kBiasTile)
    apply(std::true_type{}, std::false_type{});
  else if (kind == kDocumentTile)
    apply(std::false_type{}, std::true_type{});
  else
    apply(std::false_type{}, std::false_type{});
}

/// Logit soft-capping (m.softcap = c > 0) over a warp's raw scores, before
/// maskScores or the exponent's FFMA: x -> (c / scale) tanh(x scale / c),
/// which times the scale is the capped score c tanh(x scale / c), so that
/// the mask, softmax and gradient code after it is unchanged. tanh as
/// 1 - 2 / (e^2u + 1): one ex2 and one reciprocal, exact to ~1e-7 absolute.
template <int MR> __device__ __forceinline__ void capScores(float s[MR][8][4], const Dims &m) {
  if (!(m.softcap > 0) || m.scale == 0)
    return;
  float in = 2 * m.scale / m.softcap * kLog2e, out = m.softcap / m.scale;
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float u = fminf(s[mr][nt][e] * in, 126.0f); // e^2u past float's range: tanh = 1
        s[mr][nt][e] = out * (1.0f - 2.0f / (exp2Approx(u) + 1.0f));
      }
}
/// The soft-capped score's slope, 1 - tanh^2, from its probability |p| and
/// its row's lse (log2 domain): the score is (log2 p + lse) ln 2 where the
/// mask is structural (soft-capping takes no bias). 1 without soft-capping
/// (|capInv| = 0) and where p = 0 (dS = 0 there).
__device__ __forceinline__ float capSlope(float p, float lse2, float capInv) {
  if (capInv == 0.0f || !(p > 0.0f))
    return 1.0f;
  float t = (__log2f(p) + lse2) * kLn2 * capInv;
  return 1.0f - t * t;
}
__host__ __device__ inline float capInverse(const Dims &m) {
  return m.softcap > 0 ? 1.0f / m.softcap : 0.0f;
}

/// wgmma's operand layout in shared memory: 64 x 64 blocks of 128-byte rows
/// in the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8));
/// a tile of D columns is D / 64 blocks side by side.
constexpr int kSwBlock = 64 * 64; // elements of one swizzled 64 x 64 block
/// Elements of a 64-row swizzled tile of D columns: whole blocks (the last
/// one partly used where D is not a multiple of 64).
template <int D> constexpr int kSwTileElems = (D + 63) / 64 * kSwBlock;

/// Element offset of (row r, column c) in a tile of D / 64 swizzled blocks.
__device__ __forceinline__ int swizzled(int r, int c) {
  return (c >> 6) * kSwBlock + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
}

/// The forward's rows (this warp's, from |row0|) to out (o / sum; NaN, or 0
/// with nanToZero, where the mask leaves a row no key) and lse.
template <typename T, int D, int MR>
__device__ __forceinline__ void writeForward(const float o[MR][D / 8][4], const float mx[MR][2],
                                             const float l[MR][2], int64_t row0, int64_t b,
                                             int64_t h, const Dims &m, T *out, float *lse) {
  int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = l[mr][half];
      sum += __shfl_xor_sync(0xffffffff, sum, 1);
      sum += __shfl_xor_sync(0xffffffff, sum, 2);
      int64_t row = row0 + mr * 16 + g + 8 * half;
      if (row >= m.sq)
        continue;
      bool empty = mx[mr][half] == -INFINITY;
      float inv = empty ? 0.0f : 1.0f / sum, fill = m.nanToZero ? 0.0f : NAN;
      T *orow = out + m.oAt(b, row, h);
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        float lo = empty ? fill : o[mr][nd][2 * half] * inv,
              hi = empty ? fill : o[mr][nd][2 * half + 1] * inv;
        if (nd * 8 < m.d) // a padded head's columns from m.d are not written
          *reinterpret_cast<uint32_t *>(orow + nd * 8 + t * 2) = pack<T>(lo, hi);
      }
      if (t == 0)
        lse[m.lseAt(b, h, row)] = empty ? INFINITY : mx[mr][half] * kLn2 + logf(sum);
    }
}

/// lse (log2 domain) and D = rowsum(dO * O) of this warp's query rows
/// (from |row0|); rows past the end get lse = inf (P = 0).
template <int MR>
__device__ __forceinline__ void queryRowStats(const float *lse, const float *dsum, int64_t row0,
                                              int64_t b, int64_t h, const Dims &m,
                                              float rowLse[MR][2], float rowD[MR][2]) {
  int g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int64_t row = row0 + mr * 16 + g + 8 * half;
      bool in = row < m.sq;
      rowLse[mr][half] = in ? lse[m.lseAt(b, h, row)] * kLog2e : INFINITY;
      rowD[mr][half] = in ? dsum[m.lseAt(b, h, row)] : 0.0f;
    }
}

/// This warp's rows of acc (MR blocks of 16 from |row0|, W columns) times
/// |scale|, as T (float: the split dk/dv's partial sums), to the rows below
/// |rows| of a tensor whose row r's first column is at(r); columns from
/// |cols| on (a padded head's) are not written.
template <typename T, int W, int MR, typename At>
__device__ __forceinline__ void writeRows(const float acc[MR][W / 8][4], float scale, int64_t row0,
                                          int64_t rows, int64_t cols, At at) {
  int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int64_t row = row0 + mr * 16 + g + 8 * half;
      if (row >= rows)
        continue;
      T *dst = at(row);
#pragma unroll
      for (int nd = 0; nd < W / 8; ++nd)
        if (nd * 8 < cols) {
          const float lo = acc[mr][nd][2 * half] * scale, hi = acc[mr][nd][2 * half + 1] * scale;
          if constexpr (std::is_same_v<T, float>)
            *reinterpret_cast<float2 *>(dst + nd * 8 + t * 2) = make_float2(lo, hi);
          else
            *reinterpret_cast<uint32_t *>(dst + nd * 8 + t * 2) = pack<T>(lo, hi);
        }
    }
}

/// P^T into s over a tile whose rows are keys (this warp's 16) and columns
/// the 64 queries whose lse (log2 domain) is |colLse|; queries past the
/// end give P = 0. Without |Bias| (the warp-specialised kernels, which take
/// structural masks only) the bias tile's loop is not compiled: its
/// addresses pushed the split dk/dv kernel past its registers.
template <typename T, bool Bias = true>
__device__ __forceinline__ void keyProbs(float s[1][8][4], const float *colLse, float sl,
                                         bool general, unsigned char kind, const T *biasAt,
                                         const MaskFrame &f) {
  int t = threadIdx.x & 3;
  if (general)
    maskScores<T, 1, true, Bias>(s, sl, kind, biasAt, f);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int col = nt * 8 + t * 2 + (e & 1);
      s[0][nt][e] = !general            ? exp2Approx(fmaf(s[0][nt][e], sl, -colLse[col]))
                    : col >= f.rowsLeft ? 0.0f
                                        : exp2Approx(s[0][nt][e] - colLse[col]);
    }
}

/// dS^T = P^T (dP^T - D) into dp, columns the queries whose D and lse
/// (log2 domain) are |colD| and |colLse|; soft-capped, times the cap's
/// slope. P^T's 8-column block nt of this thread's elements is p(nt), a
/// float4 (registers, or the split dk/dv kernel's hand-over in shared
/// memory, read once each).
template <typename P>
__device__ __forceinline__ void keyDsFrom(P p, float dp[1][8][4], const float *colD,
                                          const float *colLse, float capInv) {
  int t = threadIdx.x & 3;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    float4 q = p(nt);
    float pv[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int col = nt * 8 + t * 2 + (e & 1);
      float slope = capInv != 0.0f ? capSlope(pv[e], colLse[col], capInv) : 1.0f;
      dp[0][nt][e] = pv[e] * (dp[0][nt][e] - colD[col]) * slope;
    }
  }
}
__device__ __forceinline__ void keyDs(const float p[1][8][4], float dp[1][8][4], const float *colD,
                                      const float *colLse, float capInv) {
  keyDsFrom([&](int nt) { return make_float4(p[0][nt][0], p[0][nt][1], p[0][nt][2], p[0][nt][3]); },
            dp, colD, colLse, capInv);
}

/// P (score accumulators) as wgmma's A operand in registers (mma.sync's A
/// fragments).
template <typename T>
__device__ __forceinline__ void packA(const float p[1][8][4], uint32_t a[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = pack<T>(p[0][2 * kk][0], p[0][2 * kk][1]);
    a[kk][1] = pack<T>(p[0][2 * kk][2], p[0][2 * kk][3]);
    a[kk][2] = pack<T>(p[0][2 * kk + 1][0], p[0][2 * kk + 1][1]);
    a[kk][3] = pack<T>(p[0][2 * kk + 1][2], p[0][2 * kk + 1][3]);
  }
}

/// dk (times the scale) and dv of this warp's 16 keys, from |key0|:
/// columns [C0, C0 + W) of each.
template <typename T, int C0, int W>
__device__ __forceinline__ void writeKeyGrads(const float dkAcc[1][W / 8][4],
                                              const float dvAcc[1][W / 8][4], int64_t key0,
                                              int64_t b, int64_t kh, const Dims &m, T *dk, T *dv) {
  writeRows<T, W, 1>(dkAcc, m.scale, key0, m.sk, m.d - C0,
                     [&](int64_t key) { return dk + m.dkAt(b, key, kh) + C0; });
  writeRows<T, W, 1>(dvAcc, 1.0f, key0, m.sk, m.d - C0,
                     [&](int64_t key) { return dv + m.dkAt(b, key, kh) + C0; });
}

/// Lets |kernel| take |bytes| of dynamic shared memory (above 48 KiB a
/// kernel must ask; host).
template <typename K> Status setSmem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess)
      return errorf("attention: ", cudaGetErrorString(e));
  }
  return Status::ok();
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) // the wgmma helpers
/// wgmma's shared-memory descriptor of a swizzled block at |p| (1024-byte
/// aligned, or that plus a multiple of 32 bytes to step along K within a
/// row): start address, 128-byte swizzle, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t swizzledDesc(const void *p) {
  uint64_t at = (uint32_t)__cvta_generic_to_shared(p);
  return ((at & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/// Waits until at most |N| of the committed groups are in flight (they
/// finish in order).
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Keeps the compiler from moving uses of |n| accumulators across an issue
/// or a wait.
template <int N> __device__ __forceinline__ void fenceOperands(float *x) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(x[i])::"memory");
}

/// A 64 x 64 float accumulator's 32 registers a thread, as asm operands.
#define WGMMA_D                                                                                    \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WGMMA_OUT(d)                                                                               \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),     \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),   \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),   \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

/// d (64 x 64, this thread's 32) = A B^T (+ d if |accumulate|), A and B
/// K-major 64 x 16 slices in shared memory.
template <typename T>
__device__ __forceinline__ void wgmmaSS(float d[32], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D
                 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : WGMMA_OUT(d)
                 : "l"(a), "l"(b), "r"(accumulate));
  else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WGMMA_D
                 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : WGMMA_OUT(d)
                 : "l"(a), "l"(b), "r"(accumulate));
}

/// d (64 x N, this thread's N / 2) += A B: A (64 x 16) in registers
/// (mma.sync's A fragments, this warp's 16 rows), B a 16 x N MN-major slice
/// in shared memory, N in {16, 32, 48, 64}: a 64-column block's columns, or
/// some of them (a head dimension that is not a multiple of 64 ends in a
/// narrower product).
template <typename T, int N>
__device__ __forceinline__ void wgmmaRS(float *d, const uint32_t a[4], uint64_t b) {
  static_assert(N == 16 || N == 32 || N == 48 || N == 64, "wgmma N");
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 64 && kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 64 && !kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 48 && kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %29, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23}"
                 ", {%24, %25, %26, %27}, %28, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 48 && !kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %29, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23}"
                 ", {%24, %25, %26, %27}, %28, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 32 && kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
                 ", {%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 32 && !kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
                 ", {%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 16 && kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}"
                 ", {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 16 && !kBf16)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}"
                 ", {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

#undef WGMMA_D
#undef WGMMA_OUT
#endif // __CUDA_ARCH_FEAT_SM90_ALL

} // namespace zrt::attn

namespace zrt {
/// The map of the mask's tiles into |tiles| (attn::tileIndex's layout): from
/// |bias| where there is one, else from the structural mask (cuda/AttentionMaps.cu).
template <typename T>
void launchTileMap(const T *bias, unsigned char *tiles, const Dims &m, cudaStream_t st);
/// The backward's D = rowsum(dO * O) into |dsum|, a float per (batch, head,
/// query) (cuda/AttentionMaps.cu).
template <typename T>
void launchRowDot(const T *g, const T *out, float *dsum, const Dims &m, cudaStream_t st);
/// The warp-specialised forward (cuda/AttentionFa3.cu) at kernel width D
/// (32 to 256) for a call without a bias tensor, |tiles| its structural
/// mask's map; Hopper (sm_90a) only.
template <typename T, int D>
Status launchFa3Forward(const Operands &a, const unsigned char *tiles, cudaStream_t st);
/// The warp-specialised backward's dq (cuda/AttentionFa3.cu) at kernel width
/// D (32 to 128), |dsum| = rowsum(dO * O); the same calls as launchFa3Forward.
template <typename T, int D>
Status launchFa3Dq(const Operands &a, const unsigned char *tiles, const float *dsum,
                   cudaStream_t st);
/// How the warp-specialised dk/dv splits each k/v head's query heads over
/// |parts| blocks (Attention.cu's dkvParts says when): each block's dk and
/// dv sums go to |partial| as float, laid out [dk, dv][part][batch][key]
/// [k/v head][kernel width], and a second kernel adds the parts in order
/// (deterministic). parts = 1: one block a k/v head and key block, writing
/// dk and dv itself.
struct DkvParts {
  int parts = 1;
  float *partial = nullptr;
};
/// The keys of one warp-specialised dk/dv block at kernel width |width|: 128
/// up to 128 (two consumer warpgroups of 64 keys), 64 above (the two split
/// each tile's products; cuda/AttentionFa3Bwd.cu).
constexpr int fa3DkvKeys(int width) { return width <= 128 ? 128 : 64; }
/// The float elements of DkvParts::partial for call |m| at kernel width D.
inline int64_t dkvPartialElems(const Dims &m, int parts, int width) {
  return parts > 1 ? 2 * parts * m.b * m.sk * m.hk * width : 0;
}
/// The warp-specialised backward's dk and dv (cuda/AttentionFa3Bwd.cu) at
/// kernel width D (32 to 256); the same calls as launchFa3Dq.
template <typename T, int D>
Status launchFa3Dkv(const Operands &a, const unsigned char *tiles, const float *dsum,
                    DkvParts split, cudaStream_t st);
} // namespace zrt

#endif // ZRT_CUDA_ATTENTIONDEVICE_CUH
