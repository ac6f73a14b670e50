//===- AttentionShape.cuh - what the attention kernels share ----*- CUDA -*-===//
//
// The operands of zero.attention / attention_grad as the CUDA kernels see
// them (Dims: where row i of head h of each operand starts; Operands: the
// device pointers of a call), for the tensor-core kernels
// (cuda/Attention.cu) and the per-row kernels (cuda/AttentionSimt.cu).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_ATTENTIONSHAPE_CUH
#define ZRT_CUDA_ATTENTIONSHAPE_CUH

#include "cuda/CudaKernels.h"
#include "cuda/DeviceFloat.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace zrt {

/// Which rows a tile or fragment load reads: q, k or v, or the result's
/// layout (the output gradient dO).
enum class Rows { Q, K, Out };

/// Element (b, i, h, 0) of each operand: rows (positions) |inStride| apart
/// in q (H * D, or 3 H * D when q, k, v are the packed projection
/// [B, S, 3, H, D]), |kvStride| in k and v, |outStride| in the result and its
/// gradient, |gradStride| in dq and |kvGradStride| in dk, dv. Grouped-query
/// attention: k and v have |hk| heads, H / hk query heads share each (query
/// head h reads k/v head h / (H / hk)).
struct Dims {
  int64_t b, sq, sk, h, d, biasB, biasH;
  float scale;
  bool nanToZero;
  int64_t inStride, outStride, gradStride;
  int64_t hk, kvStride, kvGradStride;
  /// Without a bias: with |causal| query i sees keys j <= i and, with a
  /// window (> 0), j > i - window; else every key.
  bool causal = false;
  int64_t window = 0;
  /// Logit soft-capping (> 0; structural masks only): each scaled score s
  /// is softcap tanh(s / softcap) before the mask.
  float softcap = 0;
  /// Packed documents (causal only; zcc --per-document): positions [B, S],
  /// each token's position in its document; query i of batch b sees only
  /// keys j >= i - positions[b, i]. Null without.
  const int64_t *positions = nullptr;
  /// The first key query |i| of batch |bi| may see: its document's start.
  __host__ __device__ int64_t docStart(int64_t bi, int64_t i) const {
    return positions ? i - positions[bi * sq + i] : 0;
  }
  /// The score (before the mask) of the product |dot| of a query and a key.
  __device__ float score(float dot) const {
    float x = dot * scale;
    return softcap > 0 ? softcap * tanhf(x / softcap) : x;
  }
  /// d score / d (dot scale) at the score |x|: 1 - tanh^2 soft-capped, else 1.
  __device__ float capSlope(float x) const {
    float t = softcap > 0 ? x / softcap : 0.0f;
    return 1.0f - t * t;
  }
  /// Whether the structural mask keeps key j for query i of batch |bi|.
  __host__ __device__ bool keeps(int64_t bi, int64_t i, int64_t j) const {
    return !causal || (j <= i && (window <= 0 || j > i - window) && j >= docStart(bi, i));
  }
  __host__ __device__ int64_t group() const { return h / hk; }
  /// The k/v head query head |hi| reads (32-bit: the index math runs per
  /// tile row, and a 64-bit division is a long subroutine on the GPU).
  __host__ __device__ int64_t kvHead(int64_t hi) const { return (uint32_t)hi / (uint32_t)(h / hk); }
  __host__ __device__ int64_t qAt(int64_t bi, int64_t i, int64_t hi) const {
    return (bi * sq + i) * inStride + hi * d;
  }
  /// Rows of k and v (and dk, dv) are addressed by their own head |kh|
  /// (kvHead of a query head).
  __host__ __device__ int64_t kAt(int64_t bi, int64_t j, int64_t kh) const {
    return (bi * sk + j) * kvStride + kh * d;
  }
  __host__ __device__ int64_t oAt(int64_t bi, int64_t i, int64_t hi) const {
    return (bi * sq + i) * outStride + hi * d;
  }
  __host__ __device__ int64_t dqAt(int64_t bi, int64_t i, int64_t hi) const {
    return (bi * sq + i) * gradStride + hi * d;
  }
  __host__ __device__ int64_t dkAt(int64_t bi, int64_t j, int64_t kh) const {
    return (bi * sk + j) * kvGradStride + kh * d;
  }
  /// Row |row| of an operand of layout |which| (for Rows::K, |hi| is the
  /// k/v head).
  __host__ __device__ int64_t at(Rows which, int64_t bi, int64_t row, int64_t hi) const {
    return which == Rows::Q   ? qAt(bi, row, hi)
           : which == Rows::K ? kAt(bi, row, hi)
                              : oAt(bi, row, hi);
  }
  /// Elements between consecutive rows of layout |which|.
  __host__ __device__ int64_t rowStride(Rows which) const {
    return which == Rows::Q ? inStride : which == Rows::K ? kvStride : outStride;
  }
  __host__ __device__ int64_t biasRow(int64_t bi, int64_t hi, int64_t i) const {
    return (((biasB == 1 ? 0 : bi) * biasH + (biasH == 1 ? 0 : hi)) * sq + i) * sk;
  }
  __host__ __device__ int64_t lseAt(int64_t bi, int64_t hi, int64_t i) const {
    return (bi * h + hi) * sq + i;
  }
};

/// The mask's element (query i, key j) of batch |bi|, head |hi|: the bias's,
/// or 0 / -inf as the structural mask keeps it (|bias| null).
template <typename T>
__device__ inline float maskAt(const T *bias, const Dims &m, int64_t bi, int64_t hi, int64_t i,
                               int64_t j) {
  return bias ? toF(bias[m.biasRow(bi, hi, i) + j]) : m.keeps(bi, i, j) ? 0.0f : -INFINITY;
}

/// A call's operands, packed (q, k, v in one [B, S, 3, H, D] tensor and
/// dq, dk, dv in one of the same shape) or not.
///   attention       (q, k, v[, bias][, positions]) -> (out, lse)
///                       ints [nan_to_zero, 0, mask, window, documents]
///                   (qkv[, bias][, positions]) -> (out, lse)
///                       ints [nan_to_zero, 1, mask, window, documents]
///   attention_grad  (q, k, v[, bias], out, lse, dout[, positions]) -> (dq, dk, dv)
///                       ints [0, mask, window, documents]
///                   (qkv[, bias], out, lse, dout[, positions]) -> (dqkv)
///                       ints [1, mask, window, documents]
/// mask: 0 the bias input, 1 causal (Dims::causal, window, positions), 2 none;
/// |bias| is null without one.
struct Operands {
  Dims m;
  const char *q, *k, *v, *bias, *out = nullptr, *g = nullptr;
  const float *lse = nullptr;
  char *o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float *lseOut = nullptr;
  DType type;
};

/// The head dimensions the per-row kernels take (their row in registers).
constexpr int kMaxSimtD = 256;

/// The per-row kernels for |a| (any float type, D <= kMaxSimtD): forward,
/// or the backward's dq and dk/dv from lse and |dsum| = rowsum(dO * O).
/// Instantiated for float, __nv_bfloat16 and __half (AttentionSimt.cu).
template <typename T>
Status launchSimtAttention(bool backward, const Operands &a, const float *dsum,
                           cudaStream_t stream);

} // namespace zrt

#endif // ZRT_CUDA_ATTENTIONSHAPE_CUH
