//===- AttentionTiles.cuh - the cp.async attention kernels' tiles -*- CUDA -*-===//
//
// What the mma.sync kernels (cuda/Attention.cu) and the one-warpgroup wgmma
// kernels (cuda/AttentionWgmma.cu) share: 64-row tiles copied into shared
// memory with cp.async (padded rows, or wgmma's swizzle), the loops over a
// block's key or query tiles with the next tile's copies in flight, the
// online softmax and the probabilities from lse, the dk/dv kernels' column
// halves, and the launches' shared pieces.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_ATTENTIONTILES_CUH
#define ZRT_CUDA_ATTENTIONTILES_CUH

#include "cuda/AttentionDevice.cuh"
#include "cuda/CpAsync.cuh"

#include <cstdint>

namespace zrt::attn {

/// Starts copying columns [C0, C0 + W) of a 64-row tile of a [.., S, H, d]
/// tensor (rows [row0, row0 + 64) of head |h|) into shared memory
/// (cp.async; rows past |rows| and columns past the operand's width m.d
/// are zero), the block's 128 threads together: in wgmma's swizzled layout
/// if |Swizzled|, else tile[r][c] with rows of D + kPad. W is a power of two
/// (16 to 128; at most 64, inside one swizzled block, if |Swizzled|). A
/// thread's 16-byte chunks share their column and lie kRowStep rows apart
/// (a multiple of 8, so the swizzle's XOR is the same for all): the
/// addresses are set up once a span and each chunk costs an add and a
/// compare (index math per chunk was the wgmma kernels' largest integer
/// cost: 15-25% of their time).
template <typename T, int D, bool Swizzled, int C0, int W>
__device__ __forceinline__ void loadSpan(const T *x, const Dims &m, int64_t b, int64_t h,
                                         int64_t row0, int64_t rows, Rows which, T *tile) {
  constexpr int kChunks = W / 8, kRowStep = kWarps * 32 / kChunks;
  static_assert(kTile % kRowStep == 0 && (!Swizzled || (kRowStep % 8 == 0 && W <= 64)),
                "chunk rows");
  int r0 = (int)threadIdx.x / kChunks, c = C0 + ((int)threadIdx.x % kChunks) * 8;
  int64_t stride = m.rowStride(which), left = c < m.d ? rows - row0 - r0 : 0;
  const T *from = x + m.at(which, b, row0 + r0, h) + c;
  T *to = tile + (Swizzled ? swizzled(r0, c) : r0 * (D + kPad) + c);
  constexpr int kStep = kRowStep * (Swizzled ? 64 : D + kPad); // elements between a thread's rows
#pragma unroll
  for (int i = 0; i < kTile / kRowStep; ++i) {
    bool valid = i * kRowStep < left;
    cpAsync16(to + i * kStep, valid ? from + i * kRowStep * stride : x, valid);
  }
}

/// The widest span (a power of two, 16 to |cap| columns) that fits in |left|.
constexpr int spanWidth(int left, int cap) {
  int w = cap;
  while (w > left)
    w /= 2;
  return w;
}

/// Starts copying a 64-row tile of D columns (loadSpan): spans of
/// decreasing powers of two, each inside one swizzled 64-column block (D =
/// 96: 64 + 32; D = 112: 64 + 32 + 16). Columns from m.d on (a head
/// dimension padded to the kernel's width D) are zeros.
template <typename T, int D, bool Swizzled, int C0 = 0>
__device__ __forceinline__ void loadTile(const T *x, const Dims &m, int64_t b, int64_t h,
                                         int64_t row0, int64_t rows, Rows which, T *tile) {
  if constexpr (C0 < D) {
    constexpr int W = spanWidth(D - C0, Swizzled ? 64 : 128);
    loadSpan<T, D, Swizzled, C0, W>(x, m, b, h, row0, rows, which, tile);
    loadTile<T, D, Swizzled, C0 + W>(x, m, b, h, row0, rows, which, tile);
  }
}

/// The first tile i in [from, count) for which |live|(i) holds (|count|
/// when none): |from| itself first (the usual case inside a mask's live
/// run), then the warp's lanes test 32 tiles at a time (one round of map
/// reads where a causal mask's run of skipped tiles would take one each).
/// Every lane of the warp calls it and gets the same answer.
template <typename Live> __device__ __forceinline__ int firstLive(int from, int count, Live live) {
  if (from >= count || live(from))
    return from < count ? from : count;
  int lane = threadIdx.x & 31;
  for (int base = from + 1; base < count; base += 32) {
    unsigned found = __ballot_sync(0xffffffff, base + lane < count && live(base + lane));
    if (found)
      return base + __ffs(found) - 1;
  }
  return count;
}

/// The next key tile at or after |from| that the mask does not rule out
/// for some query tile in [qt0, qt1) (|count| when none); the same for the
/// whole block.
__device__ __forceinline__ int64_t nextKeyTile(const unsigned char *tiles, const Dims &m, int64_t b,
                                               int64_t h, int64_t from, int64_t count, int64_t qt0,
                                               int64_t qt1) {
  const unsigned char *row = tiles + tileIndex(m, b, h, qt0, 0);
  int kTiles = (int)((m.sk + kTile - 1) / kTile), rows = (int)(qt1 - qt0);
  return firstLive((int)from, (int)count, [&](int i) {
    for (int qt = 0; qt < rows; ++qt)
      if (row[qt * kTiles + i] != kSkipTile)
        return true;
    return false;
  });
}

/// The next query tile at or after |from| that the mask does not rule out
/// for key tile |kt| (|count| when none).
__device__ __forceinline__ int64_t nextQueryTile(const unsigned char *tiles, const Dims &m,
                                                 int64_t b, int64_t h, int64_t from, int64_t count,
                                                 int64_t kt) {
  const unsigned char *column = tiles + tileIndex(m, b, h, 0, kt);
  int kTiles = (int)((m.sk + kTile - 1) / kTile);
  return firstLive((int)from, (int)count, [&](int i) { return column[i * kTiles] != kSkipTile; });
}

/// The key tiles that query tiles [qt0, qt1) of (b, h) see, in order,
/// with k and v tiles (k/v head |kh|) double-buffered in ks and vs (|Elems|
/// elements a buffer; |Swizzled|: wgmma's layout, else rows padded by
/// kPad): step(tile, buf) computes on buffer |buf| once every thread's
/// copies have landed (and, swizzled, are visible to wgmma's async proxy),
/// while the next tile's copies run.
template <typename T, int D, bool Swizzled, typename Step>
__device__ __forceinline__ void
forKeyTiles(const unsigned char *tiles, const Dims &m, int64_t b, int64_t h, int64_t kh,
            int64_t qt0, int64_t qt1, const T *k, const T *v, T *ks, T *vs, int elems, Step step) {
  auto load = [&](int64_t tile, int buf) {
    loadTile<T, D, Swizzled>(k, m, b, kh, tile * kTile, m.sk, Rows::K, ks + buf * elems);
    loadTile<T, D, Swizzled>(v, m, b, kh, tile * kTile, m.sk, Rows::K, vs + buf * elems);
  };
  int64_t kTiles = (m.sk + kTile - 1) / kTile;
  int64_t cur = nextKeyTile(tiles, m, b, h, 0, kTiles, qt0, qt1);
  if (cur < kTiles)
    load(cur, 0);
  cpAsyncCommit();
  for (int buf = 0; cur < kTiles; buf ^= 1) {
    int64_t next = nextKeyTile(tiles, m, b, h, cur + 1, kTiles, qt0, qt1);
    if (next < kTiles)
      load(next, buf ^ 1);
    cpAsyncCommit();
    cpAsyncWait<1>();
    if constexpr (Swizzled) // cp.async wrote through the generic proxy
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    step(cur, buf);
    __syncthreads(); // the next iteration refills this buffer
    cur = next;
  }
  cpAsyncWait<0>(); // a block with no tiles still issued its own rows' copies
}

/// lse (log2 domain) and D of query tile |tile| of (b, h) into shared
/// memory (the block's threads together); rows past the end get lse = inf.
__device__ __forceinline__ void queryTileStats(const float *lse, const float *dsum, int64_t b,
                                               int64_t h, int64_t tile, const Dims &m,
                                               float *tileLse, float *tileD) {
  for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
    int64_t query = tile * kTile + r;
    bool in = query < m.sq;
    tileLse[r] = in ? lse[m.lseAt(b, h, query)] * kLog2e : INFINITY;
    tileD[r] = in ? dsum[m.lseAt(b, h, query)] : 0.0f;
  }
}

/// The query tiles that key tile |kt| of batch |b| sees, for each of the
/// |group| query heads from |h0| in turn (grouped-query attention: the
/// heads that share a k/v head), with the tiles' q and dO rows
/// double-buffered in qs and gs and their lse and D in tileLse and tileD
/// (kTile floats a buffer) as forKeyTiles does k and v; step(tile, head,
/// buf).
template <typename T, int D, bool Swizzled, typename Step>
__device__ __forceinline__ void
forQueryTiles(const unsigned char *tiles, const Dims &m, int64_t b, int64_t h0, int64_t group,
              int64_t kt, const T *q, const T *g, const float *lse, const float *dsum, T *qs, T *gs,
              float *tileLse, float *tileD, int elems, Step step) {
  auto load = [&](int64_t tile, int64_t h, int buf) {
    loadTile<T, D, Swizzled>(q, m, b, h, tile * kTile, m.sq, Rows::Q, qs + buf * elems);
    loadTile<T, D, Swizzled>(g, m, b, h, tile * kTile, m.sq, Rows::Out, gs + buf * elems);
    queryTileStats(lse, dsum, b, h, tile, m, tileLse + buf * kTile, tileD + buf * kTile);
  };
  int64_t qTiles = (m.sq + kTile - 1) / kTile, h = h0, lastHead = h0 + group - 1;
  int64_t cur = nextQueryTile(tiles, m, b, h, 0, qTiles, kt);
  if (cur < qTiles)
    load(cur, h, 0);
  cpAsyncCommit();
  for (int buf = 0;; buf ^= 1) {
    if (cur >= qTiles) { // this head is done: the group's next one
      if (h == lastHead)
        break;
      ++h;
      cur = nextQueryTile(tiles, m, b, h, 0, qTiles, kt);
      if (cur >= qTiles)
        continue;
      load(cur, h, buf);
      cpAsyncCommit();
    }
    int64_t next = nextQueryTile(tiles, m, b, h, cur + 1, qTiles, kt);
    if (next < qTiles)
      load(next, h, buf ^ 1);
    cpAsyncCommit();
    cpAsyncWait<1>();
    if constexpr (Swizzled)
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    step(cur, h, buf);
    __syncthreads();
    cur = next;
  }
  cpAsyncWait<0>();
}

/// The online softmax over one tile's scores (FlashAttention-2), per row:
/// the new maximum (log2 domain; |mul| is the scale still to apply, 1 where
/// maskScores applied it), s -> 2^(s mul - max), the running sum, and the
/// output rescaled by 2^(old max - new max).
template <int D, int MR>
__device__ __forceinline__ void onlineSoftmax(float s[MR][8][4], float mul, float mx[MR][2],
                                              float l[MR][2], float o[MR][D / 8][4]) {
#pragma unroll
  for (int mr = 0; mr < MR; ++mr)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tileMax = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        tileMax = fmaxf(tileMax, fmaxf(s[mr][nt][2 * half], s[mr][nt][2 * half + 1]));
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffff, tileMax, 1));
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffff, tileMax, 2));
      float newMax = fmaxf(mx[mr][half], tileMax * mul);
      float base = newMax == -INFINITY ? 0.0f : newMax;
      float alpha = exp2Approx(mx[mr][half] - base);
      float sum = 0;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float &x = s[mr][nt][2 * half + e];
          x = exp2Approx(fmaf(x, mul, -base));
          sum += x;
        }
      l[mr][half] = l[mr][half] * alpha + sum;
      mx[mr][half] = newMax;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        o[mr][nd][2 * half] *= alpha;
        o[mr][nd][2 * half + 1] *= alpha;
      }
    }
}

/// P into s over a tile whose rows are queries: P = 2^(s scale log2(e) +
/// mask log2(e) - lse log2(e)); |general| tiles (a mask to apply or keys
/// past the end) go through maskScores, interior ones take one FFMA and one
/// ex2 per score. |WithDs|: dS = P (dP - D) in the same pass (where dP is
/// at hand already).
template <typename T, int MR, bool WithDs>
__device__ __forceinline__ void
queryProbs(float s[MR][8][4], const float rowLse[MR][2], float sl, bool general, unsigned char kind,
           const T *biasAt, const MaskFrame &f, float capInv = 0, const float (*dp)[8][4] = nullptr,
           const float (*rowD)[2] = nullptr) {
  auto each = [&](auto scoreOf, auto capped) {
#pragma unroll
    for (int mr = 0; mr < MR; ++mr)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float p = exp2Approx(scoreOf(s[mr][nt][e], rowLse[mr][e >> 1]));
          if constexpr (WithDs) {
            float ds = p * (dp[mr][nt][e] - rowD[mr][e >> 1]);
            if constexpr (decltype(capped)::value)
              ds *= capSlope(p, rowLse[mr][e >> 1], capInv);
            p = ds;
          }
          s[mr][nt][e] = p;
        }
  };
  // Soft-capped or not: a uniform branch around the loops (without a cap
  // the slope's log2 is neither paid nor predicated).
  auto run = [&](auto capped) {
    if (general) {
      maskScores<T, MR, false>(s, sl, kind, biasAt, f);
      each([](float x, float lse) { return x - lse; }, capped);
    } else {
      each([sl](float x, float lse) { return fmaf(x, sl, -lse); }, capped);
    }
  };
  if (WithDs && capInv != 0.0f)
    run(std::true_type{});
  else
    run(std::false_type{});
}

/// dS = P (dP - D) into p, rows queries (queryProbs without |WithDs|
/// first); soft-capped, times the cap's slope.
__device__ __forceinline__ void queryDs(float p[1][8][4], const float dp[1][8][4],
                                        const float rowD[1][2], const float rowLse[1][2],
                                        float capInv) {
  if (capInv != 0.0f) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        p[0][nt][e] *=
            (dp[0][nt][e] - rowD[0][e >> 1]) * capSlope(p[0][nt][e], rowLse[0][e >> 1], capInv);
    return;
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      p[0][nt][e] *= dp[0][nt][e] - rowD[0][e >> 1];
}

/// The columns of dk and dv one block of the dk/dv kernels accumulates:
/// all of D up to 128, else half (blockIdx.z picks which): the two sets of
/// D / 2 accumulators fit in registers where D would not (at D = 256, 256
/// floats a thread), at the price of both halves' blocks forming S^T and
/// dP^T (the backward's FLOPs 9/7 of one pass). D is then a multiple of 32.
template <int D> constexpr int kvGradColumns() { return D <= 128 ? D : D / 2; }

/// Runs body(integral_constant<int, C0>) for the column half C0 of
/// blockIdx.z (kvGradColumns).
template <int D, typename Body> __device__ __forceinline__ void forKvGradHalf(Body body) {
  constexpr int W = kvGradColumns<D>();
  if constexpr (W == D) {
    body(std::integral_constant<int, 0>{});
  } else {
    static_assert(D % 32 == 0, "halves of whole 16-column blocks");
    if (blockIdx.z == 0)
      body(std::integral_constant<int, 0>{});
    else
      body(std::integral_constant<int, W>{});
  }
}

template <typename T> struct Pointers { const T *q, *k, *v, *bias; };

} // namespace zrt::attn

namespace zrt {
/// The one-warpgroup wgmma kernels (cuda/AttentionWgmma.cu) at kernel width
/// D (32 to 256): the forward, and the backward's dq and dk/dv (|wsDq|,
/// |wsDkv|: those by the warp-specialised kernels instead, D <= 128 for dq;
/// |split| the latter's, |dsum| = rowsum(dO * O)). Hopper (sm_90a) only.
template <typename T, int D>
Status launchForwardWgmma(const Operands &a, const attn::Pointers<T> &p, const unsigned char *tiles,
                          cudaStream_t st);
template <typename T, int D>
Status launchBackwardWgmma(const Operands &a, const attn::Pointers<T> &p,
                           const unsigned char *tiles, const float *dsum, cudaStream_t st,
                           bool wsDq, bool wsDkv, DkvParts split);
} // namespace zrt

#endif // ZRT_CUDA_ATTENTIONTILES_CUH
