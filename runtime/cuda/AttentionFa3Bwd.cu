//===- AttentionFa3Bwd.cu - the warp-specialised attention dk/dv on Hopper --===//
//
// zero.attention_grad's dk and dv on Hopper (sm_90a) with FlashAttention-3's
// structure (cuda/AttentionTma.cuh), at every tensor-core width and the
// structural masks (causal, sliding window, packed documents, none;
// soft-capping): a block of keys of one k/v head and three warpgroups.
// The producer warpgroup's first warp loads the block's k and v rows once
// and then, for each (query head of the group, 64-query tile) the mask
// leaves live for the block, the q and dO tiles into a ring (3 stages up to D = 128, else 2)
// (TMA, the 128-byte swizzle, rows past the end zero-filled); its second
// warp writes the tile's lse (log2 domain) and D = rowsum(dO * O) beside
// them (plain loads: the rows past the end get lse = inf, so P = 0). Both
// count on the stage's mbarrier. Grouped-query attention: the block goes
// over the query heads of its k/v head one after the other, summing into
// its accumulators (no atomics). Where those blocks would not fill the GPU
// once (multi-query models, short sequences), each k/v head's query heads
// are split over a few blocks that write float sums, added in order by
// dkvPartsSumKernel (DkvParts; Attention.cu's dkvParts says when). dq
// stays with its own kernel (cuda/AttentionWgmma.cu).
//
// Up to D = 128 a block holds 128 keys, and warpgroups 1 and 2 each own 64
// of them and, per tile, as the one-warpgroup kernel does
// (flashBackwardDkvWgmmaKernel): S^T = K Q^T and dP^T = V dO^T issued
// together, P^T formed while dP^T's products run, dv += P^T dO issued,
// dS^T = P^T (dP^T - D) formed while it runs, dk += dS^T Q; then the stage
// goes back to the producer. Against that kernel: k and v loaded once for
// 128 keys (q and dO read half as often), loads by the copy engine ahead
// of the products instead of by the computing warps between them, and two
// warpgroups a SM whose products and softmax interleave.
//
// Above D = 128 one warpgroup cannot hold both dk's and dv's 64 x D float
// accumulators (D registers a thread), so the two split the products over
// the block's 64 keys, as FlashAttention-3 does at its wide head
// dimensions: warpgroup 1 issues S^T, forms P^T, hands it to warpgroup 2
// through shared memory (fp32, the registers' own layout: the same bits the
// other kernels use) and runs dv += P^T dO; warpgroup 2 issues dP^T, forms
// dS^T from the handed P^T and runs dk += dS^T Q. Each holds one 64 x D
// accumulator and issues half the products; nothing is computed twice (the
// one-warpgroup kernel's blocks at these widths each recompute S^T and dP^T
// for their half of the columns). Named barriers 3 (P^T written) and 4
// (P^T read) order the hand-over.
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionTma.cuh"

#include <cuda.h>

#include <cstdint>

namespace zrt {
namespace {

using namespace attn;

/// Keys a block (fa3DkvKeys).
template <int D> constexpr int dkvKeys() { return fa3DkvKeys(D); }
/// Whether the consumers split each tile's products (D > 128).
template <int D> constexpr bool dkvSplit() { return D > 128; }

/// k and v (the block's rows), q and dO (64 rows, |stages| stages each), lse
/// and D (64 floats, as many stages), the handed-over P^T (64 x 64 floats,
/// split blocks only), 1 + 2 |stages| mbarriers, and the swizzle's alignment.
template <typename T, int D> constexpr size_t fa3DkvSmemBytes(int stages) {
  return sizeof(T) * colBlocks<D>() * 64 * (2 * dkvKeys<D>() + 2 * stages * kTile) +
         2 * stages * kTile * sizeof(float) + (dkvSplit<D>() ? kTile * kTile * sizeof(float) : 0) +
         8 * (1 + 2 * stages) + 1024;
}
/// The q/dO ring's stages: three where they fit beside k and v (the copy
/// engine a tile further ahead of the products), else two.
template <typename T, int D> constexpr int fa3DkvStages() {
  return fa3DkvSmemBytes<T, D>(3) <= kFa3SmemLimit ? 3 : 2;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// A consumer of a split block (D > 128; the file's comment): warpgroup
/// |cw| 0 forms P^T and dv, 1 dS^T and dk, over the block's 64 keys (a
/// warp's 16). |seek| steps to the next live (head, query tile), as the
/// producer's.
template <typename T, int D, int NS, typename Seek>
__device__ __forceinline__ void
dkvSplitConsumer(const T *ks, const T *vs, const T *qs, const T *gs, const float *tileLse,
                 const float *tileD, float *handed, uint64_t *kvFull, uint64_t *full,
                 uint64_t *empty, const unsigned char *tiles, int64_t b, int64_t kh, int64_t h0,
                 int64_t hEnd, int64_t kBlock, int cw, Seek seek, T *dk, T *dv, float *partDk,
                 float *partDv, const Dims &m) {
  constexpr int kQElems = colBlocks<D>() * kTile * 64;
  constexpr int kWritten = 3, kRead = 4; // named barriers: P^T handed over, and read
  const int warp = __shfl_sync(0xffffffff, (int)((threadIdx.x >> 5) & 3), 0);
  const int lane = threadIdx.x & 31;
  const int64_t key0 = kBlock * kTile + warp * 16;
  const bool lastKeys = (kBlock + 1) * kTile > m.sk; // keys past the end in this tile
  const float sl = m.scale * kLog2e;
  const float capInv = capInverse(m);
  // This warpgroup's scores (S^T or dP^T: K Q^T or V dO^T) and its values
  // product's B (dO for dv, Q for dk); the handed P^T a thread's 32
  // floats as 8 float4s, 128 threads apart (conflict-free).
  const T *scoreA = cw == 0 ? ks : vs, *scoreB = cw == 0 ? qs : gs, *valueB = cw == 0 ? gs : qs;
  float4 *mine = reinterpret_cast<float4 *>(handed) + (threadIdx.x & 127);
  float acc[1][D / 8][4] = {}; // dv (warpgroup 1) or dk (warpgroup 2)
  mbarrierWait(kvFull, 0);
  int64_t h = h0, qt = 0;
  seek(h, qt);
  int it = 0;
  for (; h < hEnd; ++it) { // every step is live: a block is one map tile
    const int st = it % NS;
    const int kind = __shfl_sync(0xffffffff, (int)tiles[tileIndex(m, b, h, qt, kBlock)], 0);
    int64_t nextH = h, nextQt = qt + 1;
    const float *curLse = tileLse + st * kTile, *curD = tileD + st * kTile;
    const int64_t q0 = qt * kTile;
    mbarrierWait(&full[st], (it / NS) & 1);
    float s[1][8][4];
    uint32_t pa[4][4];
    wgmmaFence();
    issueScoresN<T, D, 64, 64>(scoreA, scoreB + st * kQElems, &s[0][0][0]);
    wgmmaCommit();
    seek(nextH, nextQt); // the next step while the products run
    wgmmaWait<0>();
    fenceOperands<32>(&s[0][0][0]);
    if (cw == 0) {
      capScores<1>(s, m);
      keyProbs<T, false>(s, curLse, sl, kind != kPlainTile || q0 + kTile > m.sq || lastKeys,
                         (unsigned char)kind, static_cast<const T *>(nullptr),
                         maskFrame(m, b, q0, key0)); // P^T
      if (it > 0)
        turnWait(kRead); // warpgroup 2 has read the last one
#pragma unroll
      for (int j = 0; j < 8; ++j)
        mine[j * 128] = make_float4(s[0][j][0], s[0][j][1], s[0][j][2], s[0][j][3]);
      turnPass(kWritten);
    } else {
      turnWait(kWritten);
      keyDsFrom([&](int nt) { return mine[nt * 128]; }, s, curD, curLse, capInv); // dS^T
      turnPass(kRead);
    }
    packA<T>(s, pa);
    fenceRegisters<16>(&pa[0][0]);
    wgmmaFence();
    issueValues<T, D, 64>(pa, valueB + st * kQElems, acc[0]); // dv += P^T dO, dk += dS^T Q
    wgmmaCommit();
    wgmmaWait<0>();
    fenceOperands<D / 2>(&acc[0][0][0]);
    if (lane == 0)
      mbarrierArrive(&empty[st]);
    h = nextH;
    qt = nextQt;
  }
  if (cw == 0 && it > 0)
    turnWait(kRead); // the last hand-over's read: the barrier's arrivals matched
  if (partDk)        // a part of the k/v head's query heads: its float sums, unscaled
    writeRows<float, D, 1>(acc, 1.0f, key0, m.sk, m.d, [&](int64_t key) {
      return (cw == 0 ? partDv : partDk) + (key * m.hk + kh) * D;
    });
  else
    writeRows<T, D, 1>(acc, cw == 0 ? 1.0f : m.scale, key0, m.sk, m.d,
                       [&](int64_t key) { return (cw == 0 ? dv : dk) + m.dkAt(b, key, kh); });
}

#endif

/// dk and dv: block (b * Hk + k/v head, key block, first first: under a
/// causal mask the first keys meet the most queries). See the file's
/// comment; |tiles| is the structural mask's map, |lse| the forward's (natural
/// log), |dsum| D.
template <typename T, int D>
__global__ void __launch_bounds__(kFa3Threads, 1)
    fa3DkvKernel(const __grid_constant__ CUtensorMap qMap, const __grid_constant__ CUtensorMap gMap,
                 const __grid_constant__ CUtensorMap kMap, const __grid_constant__ CUtensorMap vMap,
                 const unsigned char *tiles, const float *lse, const float *dsum, T *dk, T *dv,
                 DkvParts split, Dims m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int NB = colBlocks<D>(), KB = dkvKeys<D>(), NS = fa3DkvStages<T, D>();
  constexpr int kKvElems = NB * KB * 64, kQElems = NB * kTile * 64;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  unsigned skew = (1024 - (smemAddress(smemRaw) & 1023)) & 1023; // the swizzle's period
  T *ks = reinterpret_cast<T *>(smemRaw + skew), *vs = ks + kKvElems, *qs = vs + kKvElems,
    *gs = qs + NS * kQElems;
  float *tileLse = reinterpret_cast<float *>(gs + NS * kQElems), *tileD = tileLse + NS * kTile;
  float *handed = tileD + NS * kTile; // split blocks: P^T, 16-byte aligned
  uint64_t *bars = reinterpret_cast<uint64_t *>(handed + (dkvSplit<D>() ? kTile * kTile : 0));
  uint64_t *kvFull = bars, *full = bars + 1, *empty = bars + 1 + NS;

  // A block: (batch, k/v head, part of its query heads, key block); the
  // parts of one k/v head adjacent, sharing its k and v in L2.
  const int64_t per = m.group() / split.parts;
  const HeadBlock hb = headBlock(m.hk * split.parts, (m.sk + KB - 1) / KB, false);
  const int64_t b = hb.b, kh = hb.h / split.parts, part = hb.h % split.parts;
  const int64_t h0 = kh * m.group() + part * per, hEnd = h0 + per;
  const int64_t kBlock = hb.block;
  // Split: this part's float sums, [dk, dv][part][batch][key][k/v head][D].
  const int64_t partElems = m.b * m.sk * m.hk * D;
  float *partDk = split.parts > 1 ? split.partial + (part * m.b + b) * m.sk * m.hk * D : nullptr;
  float *partDv = partDk ? partDk + split.parts * partElems : nullptr;
  const int64_t qTiles = (m.sq + kTile - 1) / kTile, kTiles = (m.sk + kTile - 1) / kTile;
  const int64_t kt0 = kBlock * (KB / kTile),
                kt1 = kt0 + KB / kTile < kTiles ? kt0 + KB / kTile : kTiles;
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
    for (int s = 0; s < NS; ++s) {
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
        tmaLoad(ks + c * KB * 64, &kMap, kvFull, c * 64, (int)kh, (int)(kBlock * KB), (int)b);
        tmaLoad(vs + c * KB * 64, &vMap, kvFull, c * 64, (int)kh, (int)(kBlock * KB), (int)b);
      }
    }
    int64_t h = h0, qt = 0;
    seek(h, qt);
    for (int it = 0; h < hEnd; ++it) {
      const int st = it % NS;
      if (it >= NS)
        mbarrierWait(&empty[st], ((it / NS) - 1) & 1);
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

  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = wg - 1;
  if constexpr (dkvSplit<D>()) {
    dkvSplitConsumer<T, D, NS>(ks, vs, qs, gs, tileLse, tileD, handed, kvFull, full, empty, tiles,
                               b, kh, h0, hEnd, kBlock, cw, seek, dk, dv, partDk, partDv, m);
    return;
  } else {
    // A consumer: 64 keys of the block, a warp's 16 from key0.
    const int64_t myTile = kt0 + cw; // this warpgroup's keys' map tile
    const int64_t key0 = kBlock * KB + cw * 64 + warp * 16;
    const T *kw = ks + cw * 64 * 64, *vw = vs + cw * 64 * 64; // rows of 128-row blocks
    const float sl = m.scale * kLog2e;
    const float capInv = capInverse(m);
    const bool lastKeys = (myTile + 1) * kTile > m.sk; // keys past the end in this tile
    float dkAcc[1][D / 8][4] = {}, dvAcc[1][D / 8][4] = {};
    mbarrierWait(kvFull, 0);
    int64_t h = h0, qt = 0;
    seek(h, qt);
    for (int it = 0; h < hEnd; ++it) {
      const int st = it % NS;
      // Read before the stage is waited for: the latency off the path.
      const int kind = __shfl_sync(
          0xffffffff, myTile < kTiles ? (int)tiles[tileIndex(m, b, h, qt, myTile)] : (int)kSkipTile,
          0);
      int64_t nextH = h, nextQt = qt + 1;
      mbarrierWait(&full[st], (it / NS) & 1);
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
        keyProbs<T, false>(s, curLse, sl, kind != kPlainTile || q0 + kTile > m.sq || lastKeys,
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
    if (partDk) { // a part of the k/v head's query heads: its float sums, unscaled
      auto at = [&](float *base) {
        return [=](int64_t key) { return base + (key * m.hk + kh) * D; };
      };
      writeRows<float, D, 1>(dkAcc, 1.0f, key0, m.sk, m.d, at(partDk));
      writeRows<float, D, 1>(dvAcc, 1.0f, key0, m.sk, m.d, at(partDv));
    } else {
      writeKeyGrads<T, 0, D>(dkAcc, dvAcc, key0, b, kh, m, dk, dv);
    }
  }
#endif
}

/// dk and dv of a split (DkvParts): the parts' float sums added in part
/// order, dk times the scale, as T. One thread an element.
template <typename T, int D>
__global__ void dkvPartsSumKernel(const float *partial, int parts, T *dk, T *dv, Dims m) {
  const int64_t n = m.b * m.sk * m.hk * D; // one part of dk
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < 2 * n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const bool isV = i >= n;
    const int64_t j = isV ? i - n : i, col = j % D, row = j / D; // row: (b, key, kh)
    if (col >= m.d)
      continue;
    const float *src = partial + (isV ? parts * n : 0) + j;
    float sum = 0.0f;
    for (int p = 0; p < parts; ++p)
      sum += src[p * n];
    const int64_t kh = row % m.hk, key = row / m.hk % m.sk, b = row / m.hk / m.sk;
    (isV ? dv : dk)[m.dkAt(b, key, kh) + col] = T(isV ? sum : sum * m.scale);
  }
}

} // namespace

template <typename T, int D>
Status launchFa3Dkv(const Operands &a, const unsigned char *tiles, const float *dsum,
                    DkvParts split, cudaStream_t st) {
  const Dims &m = a.m;
  constexpr int KB = dkvKeys<D>();
  CUtensorMap q, g, k, v;
  ZRT_RETURN_IF_ERROR(tensorMap(&q, a.q, a.type, m.d, m.h, m.sq, m.b, m.inStride, kTile));
  ZRT_RETURN_IF_ERROR(tensorMap(&g, a.g, a.type, m.d, m.h, m.sq, m.b, m.outStride, kTile));
  ZRT_RETURN_IF_ERROR(tensorMap(&k, a.k, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, KB));
  ZRT_RETURN_IF_ERROR(tensorMap(&v, a.v, a.type, m.d, m.hk, m.sk, m.b, m.kvStride, KB));
  constexpr size_t bytes = fa3DkvSmemBytes<T, D>(fa3DkvStages<T, D>());
  ZRT_RETURN_IF_ERROR(setSmem(fa3DkvKernel<T, D>, bytes));
  if (split.parts < 1 || m.group() % split.parts != 0 || (split.parts > 1 && !split.partial))
    return errorf("attention_grad: dk/dv split into ", split.parts, " parts of ", m.group(),
                  " query heads a k/v head (an internal error)");
  T *dk = reinterpret_cast<T *>(a.dk), *dv = reinterpret_cast<T *>(a.dv);
  dim3 grid = headBlockGrid(m.b * m.hk * split.parts, (m.sk + KB - 1) / KB);
  fa3DkvKernel<T, D>
      <<<grid, kFa3Threads, bytes, st>>>(q, g, k, v, tiles, a.lse, dsum, dk, dv, split, m);
  if (split.parts > 1) {
    const int64_t n = dkvPartialElems(m, split.parts, D) / split.parts; // dk's and dv's elements
    dkvPartsSumKernel<T, D><<<(unsigned)std::min<int64_t>((n + 255) / 256, 4096), 256, 0, st>>>(
        split.partial, split.parts, dk, dv, m);
  }
  return Status::ok();
}

#define ZRT_FA3_DKV_WIDTH(T, D)                                                                    \
  template Status launchFa3Dkv<T, D>(const Operands &, const unsigned char *, const float *,       \
                                     DkvParts, cudaStream_t);
#define ZRT_FA3_DKV_WIDTHS(T)                                                                      \
  ZRT_FA3_DKV_WIDTH(T, 32)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 48)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 64)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 80)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 96)                                                                         \
  ZRT_FA3_DKV_WIDTH(T, 112)                                                                        \
  ZRT_FA3_DKV_WIDTH(T, 128)                                                                        \
  ZRT_FA3_DKV_WIDTH(T, 160)                                                                        \
  ZRT_FA3_DKV_WIDTH(T, 192)                                                                        \
  ZRT_FA3_DKV_WIDTH(T, 224)                                                                        \
  ZRT_FA3_DKV_WIDTH(T, 256)
ZRT_FA3_DKV_WIDTHS(__nv_bfloat16)
ZRT_FA3_DKV_WIDTHS(__half)

} // namespace zrt
