//===- AttentionFa3Bwd.cu - the warp-specialised attention dk/dv on Hopper --===//
//
// zero.attention_grad's dk and dv on Hopper (sm_90a) with FlashAttention-3's
// structure (cuda/AttentionTma.cuh), at the tensor-core widths up to 128 and
// the structural masks (causal, sliding window, packed documents, none;
// soft-capping): a block of 128 keys of one k/v head and three warpgroups.
// The producer warpgroup's first warp loads the block's k and v rows once
// and then, for each (query head of the group, 64-query tile) the mask
// leaves live for the block, the q and dO tiles into a two-stage ring
// (TMA, the 128-byte swizzle, rows past the end zero-filled); its second
// warp writes the tile's lse (log2 domain) and D = rowsum(dO * O) beside
// them (plain loads: the rows past the end get lse = inf, so P = 0). Both
// count on the stage's mbarrier. Warpgroups 1 and 2 each own 64 of the
// block's keys and, per tile, as the one-warpgroup kernel does
// (flashBackwardDkvWgmmaKernel): S^T = K Q^T and dP^T = V dO^T issued
// together, P^T formed while dP^T's products run, dv += P^T dO issued,
// dS^T = P^T (dP^T - D) formed while it runs, dk += dS^T Q; then the stage
// goes back to the producer. Against that kernel: k and v loaded once for
// 128 keys (q and dO read half as often), loads by the copy engine ahead
// of the products instead of by the computing warps between them, and two
// warpgroups a SM whose products and softmax interleave. dq stays with its
// own kernel (cuda/AttentionWgmma.cu). Grouped-query attention: the block goes
// over the query heads of its k/v head one after the other, summing into
// its accumulators (no atomics).
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionTma.cuh"

#include <cuda.h>

#include <cstdint>

namespace zrt {
namespace {

using namespace attn;

constexpr int kDkvKeys = 128; // keys a block: two consumer warpgroups of 64

/// k and v (128 rows), q and dO (64 rows, two stages each), lse and D (64
/// floats, two stages each), five mbarriers, and the swizzle's alignment.
template <typename T, int D> constexpr size_t fa3DkvSmemBytes() {
  return sizeof(T) * colBlocks<D>() * 64 * (2 * kDkvKeys + 4 * kTile) + 4 * kTile * sizeof(float) +
         8 * 8 + 1024;
}

/// dk and dv: block (b * Hk + k/v head, 128-key block, first first: under
/// a causal mask the first keys meet the most queries). See the file's
/// comment; |tiles| is the structural mask's map, |lse| the forward's (natural
/// log), |dsum| D.
template <typename T, int D>
__global__ void __launch_bounds__(kFa3Threads, 1)
    fa3DkvKernel(const __grid_constant__ CUtensorMap qMap, const __grid_constant__ CUtensorMap gMap,
                 const __grid_constant__ CUtensorMap kMap, const __grid_constant__ CUtensorMap vMap,
                 const unsigned char *tiles, const float *lse, const float *dsum, T *dk, T *dv,
                 Dims m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int NB = colBlocks<D>();
  constexpr int kKvElems = NB * kDkvKeys * 64, kQElems = NB * kTile * 64;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  unsigned skew = (1024 - (smemAddress(smemRaw) & 1023)) & 1023; // the swizzle's period
  T *ks = reinterpret_cast<T *>(smemRaw + skew), *vs = ks + kKvElems, *qs = vs + kKvElems,
    *gs = qs + 2 * kQElems;
  float *tileLse = reinterpret_cast<float *>(gs + 2 * kQElems), *tileD = tileLse + 2 * kTile;
  uint64_t *bars = reinterpret_cast<uint64_t *>(tileD + 2 * kTile);
  uint64_t *kvFull = bars, *full = bars + 1, *empty = bars + 3;

  const int64_t group = m.group();
  const int64_t b = blockIdx.x / m.hk, kh = blockIdx.x % m.hk, h0 = kh * group, hEnd = h0 + group;
  const int64_t kBlock = blockIdx.y;
  const int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  const int64_t kt0 = 2 * kBlock, kt1 = kt0 + 2 < kTiles ? kt0 + 2 : kTiles;
  const int lane = threadIdx.x & 31;
  // The steps: (query head h, query tile qt) for which the mask keeps a key
  // of this block, heads in order and tiles in order within each. seek
  // moves (h, qt) to the first step at or after it (h = hEnd: none left);
  // a whole warp calls it, its lanes testing 32 tiles at a time (one round
  // of map reads where a causal mask's run of skipped tiles would take one
  // each).
  auto live = [&](int64_t h, int64_t qt) {
    for (int64_t kt = kt0; kt < kt1; ++kt)
      if (tiles[tileIndex(m, b, h, qt, kt)] != kSkipTile)
        return true;
    return false;
  };
  auto seek = [&](int64_t &h, int64_t &qt) {
    for (; h < hEnd; ++h, qt = 0)
      for (; qt < qTiles; qt += 32) {
        unsigned found = __ballot_sync(0xffffffff, qt + lane < qTiles && live(h, qt + lane));
        if (found) {
          qt += __ffs(found) - 1;
          return;
        }
      }
  };
  const int wg = __shfl_sync(0xffffffff, (int)(threadIdx.x / 128), 0);
  const int warp = __shfl_sync(0xffffffff, (int)((threadIdx.x >> 5) & 3), 0);
  if (threadIdx.x == 0) {
    mbarrierInit(kvFull, 1);
    for (int s = 0; s < 2; ++s) {
      mbarrierInit(&full[s], 1 + 32); // the TMA thread and the lse/D warp
      mbarrierInit(&empty[s], 8);     // the consumers' warps
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) { // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (warp >= 2)
      return;
    if (warp == 0 && lane == 0) {
      mbarrierExpect(kvFull, 2 * kKvElems * sizeof(T));
#pragma unroll
      for (int c = 0; c < NB; ++c) {
        tmaLoad(ks + c * kDkvKeys * 64, &kMap, kvFull, c * 64, (int)kh, (int)(kBlock * kDkvKeys),
                (int)b);
        tmaLoad(vs + c * kDkvKeys * 64, &vMap, kvFull, c * 64, (int)kh, (int)(kBlock * kDkvKeys),
                (int)b);
      }
    }
    int64_t h = h0, qt = 0;
    seek(h, qt);
    for (int it = 0; h < hEnd; ++it) {
      const int st = it & 1;
      if (it >= 2)
        mbarrierWait(&empty[st], ((it >> 1) - 1) & 1);
      if (warp == 0) {
        if (lane == 0) {
          mbarrierExpect(&full[st], 2 * kQElems * sizeof(T));
#pragma unroll
          for (int c = 0; c < NB; ++c) {
            tmaLoad(qs + st * kQElems + c * kTile * 64, &qMap, &full[st], c * 64, (int)h,
                    (int)(qt * kTile), (int)b);
            tmaLoad(gs + st * kQElems + c * kTile * 64, &gMap, &full[st], c * 64, (int)h,
                    (int)(qt * kTile), (int)b);
          }
        }
      } else {
        for (int r = lane; r < kTile; r += 32) {
          int64_t query = qt * kTile + r;
          bool in = query < m.sq;
          tileLse[st * kTile + r] = in ? lse[m.lseAt(b, h, query)] * kLog2e : INFINITY;
          tileD[st * kTile + r] = in ? dsum[m.lseAt(b, h, query)] : 0.0f;
        }
        mbarrierArrive(&full[st]);
      }
      ++qt;
      seek(h, qt);
    }
    return;
  }

  // A consumer: 64 keys of the block, a warp's 16 from key0.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = wg - 1;
  const int64_t myTile = kt0 + cw; // this warpgroup's keys' map tile
  const int64_t key0 = kBlock * kDkvKeys + cw * 64 + warp * 16;
  const T *kw = ks + cw * 64 * 64, *vw = vs + cw * 64 * 64; // rows of 128-row blocks
  const float sl = m.scale * kLog2e;
  const float capInv = capInverse(m);
  const bool lastKeys = (myTile + 1) * kTile > m.sk; // keys past the end in this tile
  float dkAcc[1][D / 8][4] = {}, dvAcc[1][D / 8][4] = {};
  mbarrierWait(kvFull, 0);
  int64_t h = h0, qt = 0;
  seek(h, qt);
  for (int it = 0; h < hEnd; ++it) {
    const int st = it & 1;
    // Read before the stage is waited for: the latency off the path.
    const int kind = __shfl_sync(
        0xffffffff, myTile < kTiles ? (int)tiles[tileIndex(m, b, h, qt, myTile)] : (int)kSkipTile,
        0);
    int64_t nextH = h, nextQt = qt + 1;
    mbarrierWait(&full[st], (it >> 1) & 1);
    if (kind != kSkipTile) {
      const T *qt_ = qs + st * kQElems, *gt = gs + st * kQElems;
      const float *curLse = tileLse + st * kTile, *curD = tileD + st * kTile;
      const int64_t q0 = qt * kTile;
      float s[1][8][4], dp[1][8][4];
      uint32_t pa[4][4], dsa[4][4];
      wgmmaFence();
      issueScoresN<T, D, 64>(kw, qt_, &s[0][0][0]); // S^T: keys x queries
      wgmmaCommit();
      issueScoresN<T, D, 64>(vw, gt, &dp[0][0][0]); // dP^T
      wgmmaCommit();
      seek(nextH, nextQt); // the next step while the products run
      wgmmaWait<1>();
      fenceOperands<32>(&s[0][0][0]);
      capScores<1>(s, m);
      keyProbs<T>(s, curLse, sl, kind != kPlainTile || q0 + kTile > m.sq || lastKeys,
                  (unsigned char)kind, static_cast<const T *>(nullptr),
                  maskFrame(m, b, q0, key0)); // P^T
      packA<T>(s, pa);
      fenceRegisters<16>(&pa[0][0]);
      wgmmaFence();
      issueValues<T, D, 64>(pa, gt, dvAcc[0]); // dv += P^T dO
      wgmmaCommit();
      wgmmaWait<1>(); // dP^T done; dv's products run on
      fenceOperands<32>(&dp[0][0][0]);
      keyDs(s, dp, curD, curLse, capInv); // dS^T
      packA<T>(dp, dsa);
      fenceRegisters<16>(&dsa[0][0]);
      wgmmaFence();
      issueValues<T, D, 64>(dsa, qt_, dkAcc[0]); // dk += dS^T Q
      wgmmaCommit();
      wgmmaWait<0>();
      fenceOperands<D / 2>(&dvAcc[0][0][0]);
      fenceOperands<D / 2>(&dkAcc[0][0][0]);
    } else {
      seek(nextH, nextQt);
    }
    if (lane == 0)
      mbarrierArrive(&empty[st]);
    h = nextH;
    qt = nextQt;
  }
  writeKeyGrads<T, 0, D>(dkAcc, dvAcc, key0, b, kh, m, dk, dv);
#endif
}

} // namespace

template <typename T, int D>
Status launchFa3Dkv(const Operands &a, const unsigned char *tiles, const float *dsum,
                    cudaStream_t st) {
  static_assert(D <= 128, "the warp-specialised dk/dv kernel holds D <= 128");
  const Dims &m = a.m;
  CUtensorMap q, g, k, v;
  ZRT_RETURN_IF_ERROR(tensorMap(&q, a.q, a.type, m.d, m.h, m.sq, m.b, m.inStride, kTile));
  ZRT_RETURN_IF_ERROR(tensorMap(&g, a.g, a.type, m.d, m.h, m.sq, m.b, m.outStride, kTile));
  ZRT_RETURN_IF_ERROR(tensorMap(&k, a.k, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, kDkvKeys));
  ZRT_RETURN_IF_ERROR(tensorMap(&v, a.v, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, kDkvKeys));
  constexpr size_t bytes = fa3DkvSmemBytes<T, D>();
  ZRT_RETURN_IF_ERROR(setSmem(fa3DkvKernel<T, D>, bytes));
  dim3 grid((unsigned)(m.b * m.hk), (unsigned)((m.sk + kDkvKeys - 1) / kDkvKeys));
  fa3DkvKernel<T, D><<<grid, kFa3Threads, bytes, st>>>(
      q, g, k, v, tiles, a.lse, dsum, reinterpret_cast<T *>(a.dk), reinterpret_cast<T *>(a.dv), m);
  return Status::ok();
}

#define ZRT_FA3_DKV_WIDTH(T, D)                                                                    \
  template Status launchFa3Dkv<T, D>(const Operands &, const unsigned char *, const float *,       \
                                     cudaStream_t);
#define ZRT_FA3_DKV_WIDTHS(T)                                                                      \
  ZRT_FA3_DKV_WIDTH(T, 32)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 48)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 64)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 80)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 96)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 112)                                                                        \
  ZRT_FA3_DKV_WIDTH(T, 128)
ZRT_FA3_DKV_WIDTHS(__nv_bfloat16)
ZRT_FA3_DKV_WIDTHS(__half)

} // namespace zrt
