//===- AttentionMaps.cu - the passes before the attention kernels ---------===//
//
// What the attention kernels (cuda/Attention.cu) read besides the operands:
// the map of the mask's 64 x 64 tiles (kSkipTile ... kDocumentTile,
// cuda/AttentionDevice.cuh), from a bias tensor or from the structural
// mask's corners, and the backward's D = rowsum(dO * O). Compiled once for
// every GPU (no sm_90a code here).
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionDevice.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace zrt {
namespace {

using namespace attn;

template <typename T> __global__ void tileMapKernel(const T *bias, unsigned char *map, Dims m) {
  int64_t kt = blockIdx.x, qt = blockIdx.y, bh = blockIdx.z;
  const T *base = bias + (bh * m.sq + qt * 64) * m.sk + kt * 64;
  int rows = m.sq - qt * 64 < 64 ? (int)(m.sq - qt * 64) : 64;
  int cols = m.sk - kt * 64 < 64 ? (int)(m.sk - kt * 64) : 64;
  bool finite = false, nonzero = false, causal = true;
  for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
    int r = e / cols, c = e % cols;
    float x = toF(base[(int64_t)r * m.sk + c]);
    finite |= x != -INFINITY;
    nonzero |= x != 0.0f;
    causal &= x == (kt * 64 + c <= qt * 64 + r ? 0.0f : -INFINITY);
  }
  finite = __syncthreads_or(finite);
  nonzero = __syncthreads_or(nonzero);
  causal = __syncthreads_and(causal);
  if (threadIdx.x == 0)
    map[(bh * ((m.sq + 63) / 64) + qt) * ((m.sk + 63) / 64) + kt] = !finite    ? kSkipTile
                                                                    : !nonzero ? kPlainTile
                                                                    : causal   ? kCausalTile
                                                                               : kBiasTile;
}

/// The map of a structural mask (no bias: causal, maybe a window and
/// documents, or none) from the tiles' corners: kSkipTile where no key is
/// kept, kPlainTile where every one is, kDocumentTile where a document
/// starts among the tile's keys for some row, else kCausalTile (the kernels
/// test each element's indices). With documents a map per batch row (biasB = B):
/// a document's start never decreases along the rows (zrun checks the
/// positions), so a tile's first row has the lowest and its last the
/// highest.
__global__ void bandTileMapKernel(unsigned char *map, Dims m) {
  int64_t qTiles = (m.sq + 63) / 64, kTiles = (m.sk + 63) / 64, per = qTiles * kTiles;
  int64_t count = (m.positions ? m.b : 1) * per;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < count;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t bb = t / per, qt = t % per / kTiles, kt = t % kTiles;
    int64_t r0 = qt * 64, r1 = min(m.sq, r0 + 64) - 1, c0 = kt * 64, c1 = min(m.sk, c0 + 64) - 1;
    bool none = m.causal && (c0 > r1 || (m.window > 0 && c1 <= r0 - m.window));
    bool all = !m.causal || (c1 <= r0 && (m.window <= 0 || c0 > r1 - m.window));
    // Documents: none where the first row's starts after the last key, no cut
    // where the last row's starts at or before the first key.
    bool docNone = m.positions && m.docStart(bb, r0) > c1;
    bool docAll = !m.positions || m.docStart(bb, r1) <= c0;
    map[t] = none || docNone ? kSkipTile
             : all && docAll ? kPlainTile
             : docAll        ? kCausalTile
                             : kDocumentTile;
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

/// rowDotKernel with 16-byte loads: L lanes a row, the first D / V of them
/// a vector each (V elements a vector; L the power of two at or above D / V),
/// rows taken in memory order (b, i, h) so that neighbouring lanes read
/// neighbouring bytes. The warp-a-row kernel's 2-byte loads reached a
/// third of DRAM's rate (45 us a call at Llama 3 8B's shape; ncu).
template <typename T, int L>
__global__ void rowDotVecKernel(const T *g, const T *out, float *dsum, Dims m) {
  constexpr int V = 16 / sizeof(T);
  int64_t rows = m.b * m.h * m.sq, t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t r = t / L, h = 0, i = 0, b = 0;
  int lane = (int)(t % L);
  float acc = 0;
  if (r < rows && lane * V < m.d) {
    h = r % m.h, i = (r / m.h) % m.sq, b = r / (m.h * m.sq);
    uint4 graw = *reinterpret_cast<const uint4 *>(g + m.oAt(b, i, h) + lane * V);
    uint4 oraw = *reinterpret_cast<const uint4 *>(out + m.oAt(b, i, h) + lane * V);
    const T *ge = reinterpret_cast<const T *>(&graw), *oe = reinterpret_cast<const T *>(&oraw);
#pragma unroll
    for (int k = 0; k < V; ++k)
      acc += toF(ge[k]) * toF(oe[k]);
  }
  for (int o = L / 2; o > 0; o >>= 1) // every lane of the warp takes part
    acc += __shfl_xor_sync(0xffffffff, acc, o);
  if (r < rows && lane == 0) // lane 0 of a row has its indices
    dsum[(b * m.h + h) * m.sq + i] = acc;
}

} // namespace

template <typename T>
void launchTileMap(const T *bias, unsigned char *tiles, const Dims &m, cudaStream_t st) {
  if (bias)
    tileMapKernel<T><<<dim3((unsigned)((m.sk + kTile - 1) / kTile),
                            (unsigned)((m.sq + kTile - 1) / kTile), (unsigned)(m.biasB * m.biasH)),
                       256, 0, st>>>(bias, tiles, m);
  else
    bandTileMapKernel<<<64, 256, 0, st>>>(tiles, m);
}

/// D = rowsum(dO * O) into dsum: rowDotVecKernel where a row is 1 to 32
/// whole aligned 16-byte vectors, else rowDotKernel.
template <typename T>
void launchRowDot(const T *g, const T *out, float *dsum, const Dims &m, cudaStream_t st) {
  constexpr int V = 16 / sizeof(T);
  int64_t rows = m.b * m.h * m.sq, lanes = m.d / V;
  bool vec = m.d % V == 0 && lanes >= 1 && lanes <= 32 && m.outStride % V == 0 && aligned16(g) &&
             aligned16(out);
  auto launch = [&](auto l) {
    constexpr int L = decltype(l)::value;
    rowDotVecKernel<T, L><<<(unsigned)((rows * L + 255) / 256), 256, 0, st>>>(g, out, dsum, m);
  };
  if (!vec) {
    rowDotKernel<T><<<(unsigned)((rows + 7) / 8), 256, 0, st>>>(g, out, dsum, m);
    return;
  }
  switch (lanes <= 1 ? 1 : 1 << (32 - __builtin_clz((unsigned)lanes - 1))) { // a power of two
  case 1:
    return launch(std::integral_constant<int, 1>{});
  case 2:
    return launch(std::integral_constant<int, 2>{});
  case 4:
    return launch(std::integral_constant<int, 4>{});
  case 8:
    return launch(std::integral_constant<int, 8>{});
  case 16:
    return launch(std::integral_constant<int, 16>{});
  default:
    return launch(std::integral_constant<int, 32>{});
  }
}

#define ZRT_ATTENTION_MAPS(T)                                                                      \
  template void launchTileMap<T>(const T *, unsigned char *, const Dims &, cudaStream_t);          \
  template void launchRowDot<T>(const T *, const T *, float *, const Dims &, cudaStream_t);
ZRT_ATTENTION_MAPS(float)
ZRT_ATTENTION_MAPS(__nv_bfloat16)
ZRT_ATTENTION_MAPS(__half)

} // namespace zrt
