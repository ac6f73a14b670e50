//===- AttentionFa3.cu - the warp-specialised attention forward on Hopper --===//
//
// zero.attention's forward on Hopper (sm_90a) as FlashAttention-3 runs it, for
// the structural masks (causal, sliding window, packed documents, none; soft-
// capping) at every tensor-core width from 32 to 256: a block of 128 query
// rows and three warpgroups. Warpgroup 0 is the producer: one thread loads
// the block's q rows once and the k and v tiles (KN keys: 128 up to D = 128,
// 64 above) into a ring of 2-4 stages through TMA (cp.async.bulk.tensor, the
// 128-byte swizzle written by the copy engine, rows and columns past the
// tensor's end zero-filled), a tile's K and V each counted by their own
// mbarriers (KvRing) and given back separately, and blocks ordered with a
// head's query blocks adjacent (headBlock: its k and v shared in L2).
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
// Calls with a bias tensor keep the one-warpgroup kernel (AttentionWgmma.cu).
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionTma.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

namespace zrt {
namespace {

using namespace attn;

/// Keys a tile: 128 where the accumulators of a 128-key S and a D-wide O fit
/// in a consumer's registers (D <= 128), else 64.
template <int D> constexpr int fa3Keys() { return D <= 128 ? 128 : 64; }

/// Shared memory of a forward (|rows| = kFa3Rows: q) or dq (2 kFa3Rows: q
/// and dO) block with a K/V ring of |stages| tiles of |keys| keys: the
/// tiles, the mbarriers (fa3Barriers), the swizzle's alignment, and the
/// mask map's copy (what is left of the SM's 227 KB, at most 4 KB).
constexpr int fa3Barriers(int stages) { return 1 + 4 * stages; }
template <typename T> constexpr size_t fa3TileBytes(int d, int rows, int keys, int stages) {
  return sizeof(T) * (size_t)((d + 63) / 64) * 64 * (rows + 2 * stages * keys) +
         8 * fa3Barriers(stages) + 1024;
}
/// The deepest K/V ring (2 to 4 stages) that leaves 1 KB of the SM's 227 KB
/// for the mask map.
template <typename T> constexpr int fa3Stages(int d, int rows, int keys) {
  int stages = 4;
  while (stages > 2 && fa3TileBytes<T>(d, rows, keys, stages) + 1024 > kFa3SmemLimit)
    --stages;
  return stages;
}
template <typename T> constexpr size_t fa3MapBytes(size_t tileBytes) {
  size_t left = kFa3SmemLimit - tileBytes;
  return (left > 4096 ? 4096 : left) & ~(size_t)15;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// The K/V ring's mbarriers, laid out after the q barrier: a tile's K and V
/// arrive (full) and are given back (empty) separately, so that a K buffer
/// goes back to the producer as soon as its scores are done and the next
/// K load starts a turn or more before the consumers need it.
template <int NS> struct KvRing {
  uint64_t *kFull, *vFull, *kEmpty, *vEmpty;
  __device__ explicit KvRing(uint64_t *bars)
      : kFull(bars), vFull(bars + NS), kEmpty(bars + 2 * NS), vEmpty(bars + 3 * NS) {}
  /// Sets the barriers up (one thread): the loads' one arrival, the
  /// consumers' eight warps' arrivals.
  __device__ void init() const {
    for (int s = 0; s < NS; ++s) {
      mbarrierInit(&kFull[s], 1);
      mbarrierInit(&vFull[s], 1);
      mbarrierInit(&kEmpty[s], 8);
      mbarrierInit(&vEmpty[s], 8);
    }
  }
  /// The block's barriers, |qFull| (the resident rows' one load) and the
  /// ring's, set up by one thread before any is used (the whole block calls
  /// it: a __syncthreads follows, which the mask map's copy also needs).
  __device__ void initBlock(uint64_t *qFull) const {
    if (threadIdx.x == 0) {
      mbarrierInit(qFull, 1);
      init();
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
  }
  /// The stage and the parity of the |it|-th tile's barriers.
  __device__ static int stage(int it) { return it % NS; }
  __device__ static unsigned parity(int it) { return (unsigned)(it / NS) & 1; }
  /// A consumer warp's turns: wait for the tile's K (V), give it back.
  __device__ void waitK(int it) const { mbarrierWait(&kFull[stage(it)], parity(it)); }
  __device__ void waitV(int it) const { mbarrierWait(&vFull[stage(it)], parity(it)); }
  __device__ void releaseK(int it, int lane) const {
    if (lane == 0)
      mbarrierArrive(&kEmpty[stage(it)]);
  }
  __device__ void releaseV(int it, int lane) const {
    if (lane == 0)
      mbarrierArrive(&vEmpty[stage(it)]);
  }
};

/// The producer's K/V ring, shared by the forward and the dq kernel: each
/// live key tile (|nextLive|, below |tiles|) of KN keys through TMA into
/// stage it % NS of |ks| / |vs|, each buffer once the consumers' eight
/// warps gave its last tile back.
template <typename T, int NB, int KN, int NS, typename NextLive>
__device__ __forceinline__ void produceKv(T *ks, T *vs, const CUtensorMap *kMap,
                                          const CUtensorMap *vMap, const KvRing<NS> &ring,
                                          int64_t kh, int64_t b, int64_t tiles, NextLive nextLive) {
  constexpr int kKvElems = NB * KN * 64;
  int it = 0;
  for (int64_t kn = nextLive(0); kn < tiles; kn = nextLive(kn + 1), ++it) {
    const int st = KvRing<NS>::stage(it);
    const unsigned given = (KvRing<NS>::parity(it) ^ 1) & 1; // the previous round's
    if (it >= NS)
      mbarrierWait(&ring.kEmpty[st], given);
    mbarrierExpect(&ring.kFull[st], kKvElems * sizeof(T));
#pragma unroll
    for (int c = 0; c < NB; ++c)
      tmaLoad(ks + st * kKvElems + c * KN * 64, kMap, &ring.kFull[st], c * 64, (int)kh,
              (int)(kn * KN), (int)b);
    if (it >= NS)
      mbarrierWait(&ring.vEmpty[st], given);
    mbarrierExpect(&ring.vFull[st], kKvElems * sizeof(T));
#pragma unroll
    for (int c = 0; c < NB; ++c)
      tmaLoad(vs + st * kKvElems + c * KN * 64, vMap, &ring.vFull[st], c * 64, (int)kh,
              (int)(kn * KN), (int)b);
  }
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
  constexpr int NS = fa3Stages<T>(D, kFa3Rows, KN);
  constexpr size_t kTileBytes = fa3TileBytes<T>(D, kFa3Rows, KN, NS);
  constexpr int kQElems = NB * kFa3Rows * 64, kKvElems = NB * KN * 64;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  unsigned skew = (1024 - (smemAddress(smemRaw) & 1023)) & 1023; // the swizzle's period
  T *qs = reinterpret_cast<T *>(smemRaw + skew), *ks = qs + kQElems, *vs = ks + NS * kKvElems;
  uint64_t *bars = reinterpret_cast<uint64_t *>(vs + NS * kKvElems);
  uint64_t *qFull = bars;
  const KvRing<NS> ring(bars + 1);

  const HeadBlock hb = headBlock(m.h, (m.sq + kFa3Rows - 1) / kFa3Rows, true);
  const int64_t b = hb.b, h = hb.h, kh = m.kvHead(h), qBlock = hb.block; // longest first
  const int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  const int64_t tileCount = (m.sk + KN - 1) / KN;
  const int64_t qt0 = 2 * qBlock, qt1 = qt0 + 2 < qTiles ? qt0 + 2 : qTiles;
  // The block's map rows (query tiles qt0, qt1 - 1: contiguous).
  const unsigned char *map =
      blockMap(tiles, tileIndex(m, b, h, qt0, 0), (qt1 - qt0) * kTiles,
               smemRaw + skew + kTileBytes - 1024, fa3MapBytes<T>(kTileBytes));
  // Whether any of this block's 64 x 64 map tiles under key tile |kn| keeps a key.
  auto live = [&](int64_t kn) {
    for (int64_t kt = kn * kHalves; kt < (kn + 1) * kHalves && kt < kTiles; ++kt)
      for (int64_t qt = 0; qt < qt1 - qt0; ++qt)
        if (map[qt * kTiles + kt] != kSkipTile)
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
  ring.initBlock(qFull);

  if (wg == 0) { // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0) {
      mbarrierExpect(qFull, kQElems * sizeof(T));
#pragma unroll
      for (int c = 0; c < NB; ++c)
        tmaLoad(qs + c * kFa3Rows * 64, &qMap, qFull, c * 64, (int)h, (int)(qBlock * kFa3Rows),
                (int)b);
      produceKv<T, NB, KN, NS>(ks, vs, &kMap, &vMap, ring, kh, b, tileCount, nextLive);
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
  // The map's kinds of key tile |kn|'s halves for this warpgroup's query
  // tile: read while the tile's products run (their latency off the path).
  auto tileKinds = [&](int64_t kn, int kind[kHalves]) {
#pragma unroll
    for (int hf = 0; hf < kHalves; ++hf) {
      int64_t kt = kn * kHalves + hf;
      kind[hf] = kt < kTiles ? (int)map[(qt - qt0) * kTiles + kt] : (int)kSkipTile;
    }
  };
  auto softmax = [&](int64_t kn, const int loaded[kHalves], float alpha[2], float sum[2]) {
    bool general[kHalves];
    unsigned char kind[kHalves];
    bool anyGeneral = false;
#pragma unroll
    for (int hf = 0; hf < kHalves; ++hf) {
      int64_t kt = kn * kHalves + hf;
      kind[hf] = (unsigned char)__shfl_sync(0xffffffff, loaded[hf], 0);
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
  int it = 0;
  if (kn < tileCount) {
    ring.waitK(0);
    turnWait(1 + cw);
    wgmmaFence();
    issueScoresN<T, D, KN>(qw, ks, &s[0][0][0]);
    wgmmaCommit();
    turnPass(2 - cw);
    int kind[kHalves];
    tileKinds(kn, kind);
    const int64_t next = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    wgmmaWait<0>();
    fenceOperands<KN / 2>(&s[0][0][0]);
    ring.releaseK(0, lane);
    float alpha[2], sum[2];
    softmax(kn, kind, alpha, sum);
    l[0][0] = sum[0];
    l[0][1] = sum[1];
    packP();
    kn = next;
    it = 1;
  }
  for (; kn < tileCount; ++it) {
    const int st = KvRing<NS>::stage(it), prev = KvRing<NS>::stage(it - 1);
    ring.waitK(it);
    ring.waitV(it - 1); // V_{j-1}, loaded with K_{j-1}
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
    // While the products run: this tile's mask kinds and the next live tile
    // (global reads whose latency would otherwise sit before the issue).
    int kind[kHalves];
    tileKinds(kn, kind);
    const int64_t next = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    wgmmaWait<1>();
    fenceOperands<KN / 2>(&s[0][0][0]);
    ring.releaseK(it, lane); // S_j done: K_j's buffer back to the producer
    float alpha[2], sum[2];
    softmax(kn, kind, alpha, sum);
    wgmmaWait<0>(); // P_{j-1} V_{j-1} done: rescale O, give V_{j-1} back
    fenceOperands<D / 2>(&o[0][0][0]);
    ring.releaseV(it - 1, lane);
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
    kn = next;
  }
  if (it > 0) { // the last tile's P V
    ring.waitV(it - 1);
    fenceRegisters<KN / 4>(&pa[0][0]);
    wgmmaFence();
    issueValues<T, D, KN>(pa, vs + KvRing<NS>::stage(it - 1) * kKvElems, o[0]);
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
/// k and v tiles of 64 keys into a ring (KvRing); each consumer recomputes
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
  constexpr int NS = fa3Stages<T>(D, 2 * kFa3Rows, KN);
  constexpr size_t kTileBytes = fa3TileBytes<T>(D, 2 * kFa3Rows, KN, NS);
  constexpr int kQElems = NB * kFa3Rows * 64, kKvElems = NB * KN * 64;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  unsigned skew = (1024 - (smemAddress(smemRaw) & 1023)) & 1023;
  T *qs = reinterpret_cast<T *>(smemRaw + skew), *gs = qs + kQElems, *ks = gs + kQElems,
    *vs = ks + NS * kKvElems;
  uint64_t *bars = reinterpret_cast<uint64_t *>(vs + NS * kKvElems);
  uint64_t *qFull = bars;
  const KvRing<NS> ring(bars + 1);

  const HeadBlock hb = headBlock(m.h, (m.sq + kFa3Rows - 1) / kFa3Rows, true);
  const int64_t b = hb.b, h = hb.h, kh = m.kvHead(h), qBlock = hb.block;
  const int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  const int64_t qt0 = 2 * qBlock, qt1 = qt0 + 2 < qTiles ? qt0 + 2 : qTiles;
  const unsigned char *map =
      blockMap(tiles, tileIndex(m, b, h, qt0, 0), (qt1 - qt0) * kTiles,
               smemRaw + skew + kTileBytes - 1024, fa3MapBytes<T>(kTileBytes));
  auto nextLive = [&](int64_t from) {
    for (; from < kTiles; ++from)
      for (int64_t qt = 0; qt < qt1 - qt0; ++qt)
        if (map[qt * kTiles + from] != kSkipTile)
          return from;
    return kTiles;
  };
  const int wg = __shfl_sync(0xffffffff, (int)(threadIdx.x / 128), 0);
  ring.initBlock(qFull);

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
      produceKv<T, NB, KN, NS>(ks, vs, &kMap, &vMap, ring, kh, b, kTiles, nextLive);
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
  auto gradient = [&](int64_t kn, int loaded) {
    unsigned char kind = (unsigned char)__shfl_sync(0xffffffff, loaded, 0);
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
  int it = 0;
  if (kn < kTiles) {
    ring.waitK(0);
    ring.waitV(0);
    turnWait(1 + cw);
    wgmmaFence();
    issueScoresN<T, D, KN>(qw, ks, &s[0][0][0]);
    issueScoresN<T, D, KN>(gw, vs, &dp[0][0][0]);
    wgmmaCommit();
    turnPass(2 - cw);
    int kind = map[(qt - qt0) * kTiles + kn];
    const int64_t next = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    wgmmaWait<0>();
    fenceOperands<32>(&s[0][0][0]);
    fenceOperands<32>(&dp[0][0][0]);
    ring.releaseV(0, lane); // V_0 is done with; K_0 feeds the next turn's dq
    gradient(kn, kind);
    packDs();
    kn = next;
    it = 1;
  }
  for (; kn < kTiles; ++it) {
    const int st = KvRing<NS>::stage(it), prev = KvRing<NS>::stage(it - 1);
    ring.waitK(it);
    ring.waitV(it);
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
    int kind = map[(qt - qt0) * kTiles + kn]; // read while the products run
    const int64_t next = __shfl_sync(0xffffffff, nextLive(kn + 1), 0);
    wgmmaWait<1>();
    fenceOperands<32>(&s[0][0][0]);
    fenceOperands<32>(&dp[0][0][0]);
    ring.releaseV(it, lane);
    gradient(kn, kind); // while dS_{j-1} K_{j-1} runs
    wgmmaWait<0>();
    fenceOperands<D / 2>(&acc[0][0][0]);
    ring.releaseK(it - 1, lane);
    packDs();
    kn = next;
  }
  if (it > 0) {
    fenceRegisters<KN / 4>(&pds[0][0]);
    wgmmaFence();
    issueValues<T, D, KN>(pds, ks + KvRing<NS>::stage(it - 1) * kKvElems, acc[0]);
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
} // namespace

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

template <typename T, int D>
Status launchFa3Forward(const Operands &a, const unsigned char *tiles, cudaStream_t st) {
  const Dims &m = a.m;
  constexpr int KN = fa3Keys<D>();
  CUtensorMap q, k, v;
  ZRT_RETURN_IF_ERROR(tensorMap(&q, a.q, a.type, m.d, m.h, m.sq, m.b, m.inStride, kFa3Rows));
  ZRT_RETURN_IF_ERROR(tensorMap(&k, a.k, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, KN));
  ZRT_RETURN_IF_ERROR(tensorMap(&v, a.v, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, KN));
  constexpr size_t tileBytes = fa3TileBytes<T>(D, kFa3Rows, KN, fa3Stages<T>(D, kFa3Rows, KN));
  constexpr size_t bytes = tileBytes + fa3MapBytes<T>(tileBytes);
  static_assert(bytes <= kFa3SmemLimit);
  ZRT_RETURN_IF_ERROR(setSmem(fa3ForwardKernel<T, D>, bytes));
  dim3 grid = headBlockGrid(m.b * m.h, (m.sq + kFa3Rows - 1) / kFa3Rows);
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
  constexpr size_t tileBytes =
      fa3TileBytes<T>(D, 2 * kFa3Rows, kTile, fa3Stages<T>(D, 2 * kFa3Rows, kTile));
  constexpr size_t bytes = tileBytes + fa3MapBytes<T>(tileBytes);
  static_assert(bytes <= kFa3SmemLimit);
  ZRT_RETURN_IF_ERROR(setSmem(fa3DqKernel<T, D>, bytes));
  dim3 grid = headBlockGrid(m.b * m.h, (m.sq + kFa3Rows - 1) / kFa3Rows);
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
