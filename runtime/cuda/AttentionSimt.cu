//===- AttentionSimt.cu - attention, a thread per query row --------------===//
//
// zero.attention and its gradient for any float type and head dimensions up
// to kMaxSimtD: a thread per query (or key) row walks the other side in
// plain float, with the tensor-core kernels' arithmetic order where it
// matters (scores, lse, D = rowsum(dO * O)); for float32 plans, exactness
// tests and small models (cuda/Attention.cu has the fast path).
//
//===----------------------------------------------------------------------===//
#include "cuda/AttentionShape.cuh"

#include <cmath>

namespace zrt {
namespace {

template <typename T>
__global__ void simtForwardKernel(const T *q, const T *k, const T *v, const T *bias, T *out,
                                  float *lse, Dims m) {
  int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= m.b * m.h * m.sq)
    return;
  int64_t i = r % m.sq, h = (r / m.sq) % m.h, b = r / (m.sq * m.h);
  const T *qi = q + m.qAt(b, i, h);
  float o[kMaxSimtD];
  for (int d = 0; d < m.d; ++d)
    o[d] = 0;
  float mx = -INFINITY, l = 0;
  for (int64_t j = 0; j < m.sk; ++j) {
    const T *kj = k + m.kAt(b, j, m.kvHead(h)), *vj = v + m.kAt(b, j, m.kvHead(h));
    float dot = 0;
    for (int d = 0; d < m.d; ++d)
      dot += toF(qi[d]) * toF(kj[d]);
    float s = m.score(dot) + maskAt(bias, m, b, h, i, j);
    if (s == -INFINITY)
      continue;
    if (s > mx) {
      float alpha = expf(mx - s);
      l *= alpha;
      for (int d = 0; d < m.d; ++d)
        o[d] *= alpha;
      mx = s;
    }
    float p = expf(s - mx);
    l += p;
    for (int d = 0; d < m.d; ++d)
      o[d] += p * toF(vj[d]);
  }
  T *oi = out + m.oAt(b, i, h);
  bool empty = mx == -INFINITY;
  for (int d = 0; d < m.d; ++d)
    oi[d] = fromF<T>(empty ? (m.nanToZero ? 0.0f : NAN) : o[d] / l);
  lse[m.lseAt(b, h, i)] = empty ? INFINITY : mx + logf(l);
}

template <typename T>
__global__ void simtBackwardDqKernel(const T *q, const T *k, const T *v, const T *bias,
                                     const float *lse, const float *dsum, const T *g, T *dq,
                                     Dims m) {
  int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= m.b * m.h * m.sq)
    return;
  int64_t i = r % m.sq, h = (r / m.sq) % m.h, b = r / (m.sq * m.h);
  const T *qi = q + m.qAt(b, i, h), *gi = g + m.oAt(b, i, h);
  float rowLse = lse[m.lseAt(b, h, i)], rowD = dsum[m.lseAt(b, h, i)];
  float acc[kMaxSimtD];
  for (int d = 0; d < m.d; ++d)
    acc[d] = 0;
  for (int64_t j = 0; rowLse != INFINITY && j < m.sk; ++j) {
    const T *kj = k + m.kAt(b, j, m.kvHead(h)), *vj = v + m.kAt(b, j, m.kvHead(h));
    float dot = 0, dp = 0;
    for (int d = 0; d < m.d; ++d) {
      dot += toF(qi[d]) * toF(kj[d]);
      dp += toF(gi[d]) * toF(vj[d]);
    }
    float x = m.score(dot);
    float p = expf(x + maskAt(bias, m, b, h, i, j) - rowLse);
    float ds = p * (dp - rowD) * m.capSlope(x);
    for (int d = 0; d < m.d; ++d)
      acc[d] += ds * toF(kj[d]);
  }
  T *out = dq + m.dqAt(b, i, h);
  for (int d = 0; d < m.d; ++d)
    out[d] = fromF<T>(acc[d] * m.scale);
}

template <typename T>
__global__ void simtBackwardDkvKernel(const T *q, const T *k, const T *v, const T *bias,
                                      const float *lse, const float *dsum, const T *g, T *dk, T *dv,
                                      Dims m) {
  int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= m.b * m.hk * m.sk)
    return;
  // Key j of k/v head kh: the sum over the query heads that share it.
  int64_t j = r % m.sk, kh = (r / m.sk) % m.hk, b = r / (m.sk * m.hk), group = m.group();
  const T *kj = k + m.kAt(b, j, kh), *vj = v + m.kAt(b, j, kh);
  float dkAcc[kMaxSimtD], dvAcc[kMaxSimtD];
  for (int d = 0; d < m.d; ++d)
    dkAcc[d] = dvAcc[d] = 0;
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
    for (int64_t i = 0; i < m.sq; ++i) {
      float rowLse = lse[m.lseAt(b, h, i)];
      if (rowLse == INFINITY)
        continue;
      const T *qi = q + m.qAt(b, i, h), *gi = g + m.oAt(b, i, h);
      float dot = 0, dp = 0;
      for (int d = 0; d < m.d; ++d) {
        dot += toF(qi[d]) * toF(kj[d]);
        dp += toF(gi[d]) * toF(vj[d]);
      }
      float x = m.score(dot);
      float p = expf(x + maskAt(bias, m, b, h, i, j) - rowLse);
      float ds = p * (dp - dsum[m.lseAt(b, h, i)]) * m.capSlope(x);
      for (int d = 0; d < m.d; ++d) {
        dkAcc[d] += ds * toF(qi[d]);
        dvAcc[d] += p * toF(gi[d]);
      }
    }
  T *dkRow = dk + m.dkAt(b, j, kh), *dvRow = dv + m.dkAt(b, j, kh);
  for (int d = 0; d < m.d; ++d) {
    dkRow[d] = fromF<T>(dkAcc[d] * m.scale);
    dvRow[d] = fromF<T>(dvAcc[d]);
  }
}

} // namespace

template <typename T>
Status launchSimtAttention(bool backward, const Operands &a, const float *dsum,
                           cudaStream_t stream) {
  const Dims &m = a.m;
  auto in = [](const char *p) { return reinterpret_cast<const T *>(p); };
  auto out = [](char *p) { return reinterpret_cast<T *>(p); };
  const T *q = in(a.q), *k = in(a.k), *v = in(a.v), *bias = in(a.bias);
  constexpr int kThreadsPerBlock = 128;
  auto blocks = [&](int64_t n) {
    return (unsigned)((n + kThreadsPerBlock - 1) / kThreadsPerBlock);
  };
  if (!backward) {
    simtForwardKernel<T><<<blocks(m.b * m.h * m.sq), kThreadsPerBlock, 0, stream>>>(
        q, k, v, bias, out(a.o), a.lseOut, m);
    return Status::ok();
  }
  if (m.sq > 0)
    simtBackwardDqKernel<T><<<blocks(m.b * m.h * m.sq), kThreadsPerBlock, 0, stream>>>(
        q, k, v, bias, a.lse, dsum, in(a.g), out(a.dq), m);
  if (m.sk > 0)
    simtBackwardDkvKernel<T><<<blocks(m.b * m.hk * m.sk), kThreadsPerBlock, 0, stream>>>(
        q, k, v, bias, a.lse, dsum, in(a.g), out(a.dk), out(a.dv), m);
  return Status::ok();
}

template Status launchSimtAttention<float>(bool, const Operands &, const float *, cudaStream_t);
template Status launchSimtAttention<__nv_bfloat16>(bool, const Operands &, const float *,
                                                   cudaStream_t);
template Status launchSimtAttention<__half>(bool, const Operands &, const float *, cudaStream_t);

} // namespace zrt
