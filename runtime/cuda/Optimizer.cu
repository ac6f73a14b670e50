//===- Optimizer.cu - CUDA kernels: optimizer -------------------------------===//
//
// Optimizers: AdamW (PyTorch's arithmetic, float4 accesses) and SGD; lr
// and the step count are device scalars, and an fp16 overflow's `skip`
// input leaves every state unchanged.
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"

#include <type_traits>

namespace zrt::cuda {
namespace {

/// The block's threads' |s| added in a fixed tree order (for thread 0).
__device__ double treeSum(double s) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if ((int)threadIdx.x < stride)
      part[threadIdx.x] += part[threadIdx.x + stride];
    __syncthreads();
  }
  return part[0];
}

/// AdamW's step scalars: 1 - lr wd, lr / (1 - b1^t), sqrt(1 - b2^t), in
/// double as PyTorch's Python arithmetic, rounded to float.
__device__ __forceinline__ void adamwScalars(const float *lrp, const float *stepp, double b1,
                                             double b2, double wd, float *out) {
  double lr = *lrp, t = *stepp;
  double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
  out[0] = (float)(1.0 - lr * wd);
  out[1] = (float)(lr / bc1);
  out[2] = (float)sqrt(bc2);
}

__global__ void adamwScalarsKernel(const float *lrp, const float *stepp, double b1, double b2,
                                   double wd, float *out) {
  adamwScalars(lrp, stepp, b1, b2, wd, out);
}

/// PyTorch's AdamW (non-capturable) as the CPU kernel does it: scalars in
/// double, tensor math in float32, in the same order. lr and the step count
/// are device scalars. The gradient may be 16-bit (a bf16 gradient bucket:
/// the values the float32 one would hold).
template <typename G, typename C>
__global__ void adamwKernel(const float *p, const G *g, const float *m, const float *v,
                            const float *lrp, const float *stepp, const unsigned char *skip,
                            const float *scalep, const float *given, float *po, float *mo,
                            float *vo, C *copy, double *partial, unsigned *done, float *squaresOut,
                            double b1, double b2, double eps, double wd, int64_t n, bool vectors) {
  bool skipped = skip && *skip;
  // zero-fuse-optimizer: the gradient read is g * scale (clipping's factor),
  // rounded as the separate multiply was.
  const bool scaled = scalep != nullptr;
  const float scale = scaled ? *scalep : 1.0f;
  double squares = 0; // |partial|: this thread's sum of g^2 (each square in float)
  // The step's scalars: from adamwScalarsKernel where given, else once a
  // block (double pow and division: the block waits for them, which costs
  // ~10% of the memory rate on a 58M-element update).
  __shared__ float scalars[3];
  if (!given && threadIdx.x == 0)
    adamwScalars(lrp, stepp, b1, b2, wd, scalars);
  if (!given)
    __syncthreads();
  const float *sc = given ? given : scalars;
  const float decay = sc[0], stepSize = sc[1], bc2Sqrt = sc[2];
  float w1 = (float)(1.0 - b1), fb2 = (float)b2, w2 = (float)(1.0 - b2), feps = (float)eps;
  // The CPU kernel's operations in its order, each rounded (no FMA
  // contraction): the host AdamW of an offloaded optimizer gives the same
  // bits as this one.
  auto update = [&](float &pk, float gk, float &mk, float &vk) {
    if (skipped)
      return;
    pk = __fmul_rn(pk, decay);
    mk = __fadd_rn(mk, __fmul_rn(w1, __fsub_rn(gk, mk)));
    vk = __fadd_rn(__fmul_rn(vk, fb2), __fmul_rn(__fmul_rn(w2, gk), gk));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vk), bc2Sqrt), feps);
    pk = __fsub_rn(pk, __fmul_rn(stepSize, __fdiv_rn(mk, denom)));
  };
  int64_t step = (int64_t)gridDim.x * blockDim.x, nv = vectors ? n / 4 : 0;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < nv; k += step) {
    float4 pk = reinterpret_cast<const float4 *>(p)[k], mk = reinterpret_cast<const float4 *>(m)[k],
           vk = reinterpret_cast<const float4 *>(v)[k], gk;
    if constexpr (std::is_same_v<G, float>) {
      gk = reinterpret_cast<const float4 *>(g)[k];
    } else { // four 16-bit values, one 8-byte load
      uint2 raw = reinterpret_cast<const uint2 *>(g)[k];
      const G *h = reinterpret_cast<const G *>(&raw);
      gk = make_float4(toF(h[0]), toF(h[1]), toF(h[2]), toF(h[3]));
    }
    if (scaled)
      gk = make_float4(__fmul_rn(gk.x, scale), __fmul_rn(gk.y, scale), __fmul_rn(gk.z, scale),
                       __fmul_rn(gk.w, scale));
    if (partial)
      squares += (double)__fmul_rn(gk.x, gk.x) + (double)__fmul_rn(gk.y, gk.y) +
                 (double)__fmul_rn(gk.z, gk.z) + (double)__fmul_rn(gk.w, gk.w);
    update(pk.x, gk.x, mk.x, vk.x);
    update(pk.y, gk.y, mk.y, vk.y);
    update(pk.z, gk.z, mk.z, vk.z);
    update(pk.w, gk.w, mk.w, vk.w);
    reinterpret_cast<float4 *>(po)[k] = pk;
    reinterpret_cast<float4 *>(mo)[k] = mk;
    reinterpret_cast<float4 *>(vo)[k] = vk;
    if (copy) { // the 16-bit copy: four values, one 8-byte store
      uint2 u;
      C *h = reinterpret_cast<C *>(&u);
      h[0] = fromF<C>(pk.x);
      h[1] = fromF<C>(pk.y);
      h[2] = fromF<C>(pk.z);
      h[3] = fromF<C>(pk.w);
      reinterpret_cast<uint2 *>(copy)[k] = u;
    }
  }
  for (int64_t k = nv * 4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step) {
    float pk = p[k], mk = m[k], vk = v[k], gk = toF(g[k]);
    if (scaled)
      gk = __fmul_rn(gk, scale);
    if (partial)
      squares += (double)__fmul_rn(gk, gk);
    update(pk, gk, mk, vk);
    po[k] = pk;
    mo[k] = mk;
    vo[k] = vk;
    if (copy)
      copy[k] = fromF<C>(pk);
  }
  if (partial) { // the block's sum, in a fixed order: partial[block]
    for (int o = 16; o > 0; o >>= 1)
      squares += __shfl_xor_sync(0xffffffff, squares, o);
    __shared__ double warps[kThreads / 32];
    if ((threadIdx.x & 31) == 0)
      warps[threadIdx.x >> 5] = squares;
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) {
      double s = 0;
      for (int w = 0; w < (int)(blockDim.x >> 5); ++w)
        s += warps[w];
      partial[blockIdx.x] = s;
      if (done) { // visible to the last block before the count says so
        __threadfence();
        last = atomicAdd(done, 1u) == gridDim.x - 1;
      }
    }
    // One launch where the partials are one run (at most 1024 blocks): the
    // last block to finish adds them as sumPartialRunsKernel and
    // sumPartialsKernel would (one run; the second pass adds zeros to it),
    // so the bits are the two kernels'.
    if (done) {
      __syncthreads();
      if (!last)
        return;
      double s = 0;
      for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x)
        s += __ldcg(partial + b);
      s = treeSum(s);
      if (threadIdx.x == 0) {
        *squaresOut = (float)s;
        *done = 0; // for the next kernel on this stream
      }
    }
  }
}

/// The blocks' partial sums of squares, a contiguous run of them a block
/// (gridDim.x runs), each added in a fixed order: |mid| holds the runs' sums
/// for sumPartialsKernel. Two levels, so that no one block reads all the
/// partials (a block per 1024 elements: 2 MB on Llama 3.2 1B's buckets).
__global__ void sumPartialRunsKernel(const double *partial, int blocks, double *mid) {
  int per = (blocks + gridDim.x - 1) / gridDim.x, begin = blockIdx.x * per;
  int end = min(blocks, begin + per);
  double s = 0;
  for (int b = begin + threadIdx.x; b < end; b += blockDim.x)
    s += partial[b];
  s = treeSum(s);
  if (threadIdx.x == 0)
    mid[blockIdx.x] = s;
}

/// The runs' sums, added in a fixed order (one block).
__global__ void sumPartialsKernel(const double *partial, int blocks, float *out) {
  double s = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x)
    s += partial[b];
  s = treeSum(s);
  if (threadIdx.x == 0)
    *out = (float)s;
}

__global__ void sgdKernel(const float *p, const float *g, const float *b, const float *lrp,
                          const unsigned char *skip, float *po, float *bo, float mom, float wd,
                          bool nesterov, int64_t n) {
  bool skipped = skip && *skip;
  float lr = *lrp;
  ZRT_GRID_LOOP(k, n) {
    if (skipped) {
      po[k] = p[k];
      bo[k] = b[k];
      continue;
    }
    float d = wd != 0 ? g[k] + wd * p[k] : g[k];
    float buf = mom != 0 ? mom * b[k] + d : 0.0f;
    if (mom != 0)
      d = nesterov ? d + mom * buf : buf;
    po[k] = p[k] - lr * d;
    bo[k] = buf;
  }
}

Status launchAdamW(const KernelCall &c, CudaContext &ctx) {
  int64_t n = c.in[0].numel();
  // After lr and step, each optional: skip (bool), the gradient's scale (float).
  const unsigned char *skip = nullptr;
  const float *scale = nullptr;
  for (size_t i = 6; i < c.in.size(); ++i)
    if (c.in[i].dtype == DType::Bool)
      skip = c.in[i].as<unsigned char>();
    else
      scale = c.in[i].as<float>();
  bool vectors = true; // float4 accesses where every array is 16-byte aligned
  for (int i = 0; i < 4; ++i)
    vectors &= reinterpret_cast<uintptr_t>(c.in[i].data) % 16 == 0;
  for (int i = 0; i < 3; ++i)
    vectors &= reinterpret_cast<uintptr_t>(c.out[i].data) % 16 == 0;
  // After the three states: the 16-bit parameter copy (8-byte stores) and
  // the gradient's sum of squares (a float32 scalar), each optional.
  const TensorRef *copyOut = nullptr, *squaresOut = nullptr;
  for (size_t i = 3; i < c.out.size(); ++i)
    (c.out[i].shape.empty() ? squaresOut : copyOut) = &c.out[i];
  if (copyOut)
    vectors &= reinterpret_cast<uintptr_t>(copyOut->data) % 8 == 0;
  const int blocks = blocksFor(vectors ? (n + 3) / 4 : n);
  // The sum of squares: a partial sum a block, then runs of 1024 of them
  // (fixed: the bits do not depend on the GPU), then the runs' sums.
  const int runs = (blocks + 1023) / 1024;
  double *partial = nullptr;
  // Large updates take their scalars from a one-thread kernel before them
  // (the same bits); below 16M elements the extra launch costs more.
  const bool scalarsFirst = n >= (int64_t{1} << 24);
  const size_t partialBytes = squaresOut ? (size_t)(blocks + runs) * sizeof(double) : 0;
  if (squaresOut || scalarsFirst)
    ZRT_RETURN_IF_ERROR(ctx.reserve(partialBytes + (scalarsFirst ? 4 * sizeof(float) : 0)));
  if (squaresOut)
    partial = static_cast<double *>(ctx.scratch);
  float *given = scalarsFirst ? (float *)((char *)ctx.scratch + partialBytes) : nullptr;
  if (given)
    adamwScalarsKernel<<<1, 1, 0, ctx.stream>>>(c.in[4].as<float>(), c.in[5].as<float>(),
                                                c.floats[0], c.floats[1], c.floats[3], given);
  // At most 1024 blocks (1M elements: biases, norms and the smaller
  // projections of a per-parameter update): the sum of squares in the same
  // launch.
  const bool oneLaunch = squaresOut && runs == 1 && ctx.blocksDone;
  auto launch = [&](auto g, auto copy) {
    using G = std::remove_cv_t<std::remove_pointer_t<decltype(g)>>;
    using C = std::remove_pointer_t<decltype(copy)>;
    adamwKernel<G, C><<<blocks, kThreads, 0, ctx.stream>>>(
        c.in[0].as<float>(), g, c.in[2].as<float>(), c.in[3].as<float>(), c.in[4].as<float>(),
        c.in[5].as<float>(), skip, scale, given, c.out[0].as<float>(), c.out[1].as<float>(),
        c.out[2].as<float>(), copy, partial, oneLaunch ? ctx.blocksDone : nullptr,
        squaresOut ? squaresOut->as<float>() : nullptr, c.floats[0], c.floats[1], c.floats[2],
        c.floats[3], n, vectors);
  };
  ZRT_FLOAT_DISPATCH(c.in[1].dtype, G, {
    if (!copyOut)
      launch(c.in[1].as<G>(), (__nv_bfloat16 *)nullptr);
    else if (copyOut->dtype == DType::BF16)
      launch(c.in[1].as<G>(), copyOut->as<__nv_bfloat16>());
    else
      launch(c.in[1].as<G>(), copyOut->as<__half>());
  })
  if (squaresOut && !oneLaunch) {
    sumPartialRunsKernel<<<runs, kThreads, 0, ctx.stream>>>(partial, blocks, partial + blocks);
    sumPartialsKernel<<<1, kThreads, 0, ctx.stream>>>(partial + blocks, runs,
                                                      squaresOut->as<float>());
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

} // namespace

Status launchSgd(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t n = c.in[0].numel();
  const unsigned char *skip = c.in.size() == 5 ? c.in[4].as<unsigned char>() : nullptr;
  sgdKernel<<<blocksFor(n), kThreads, 0, st>>>(
      c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.in[3].as<float>(), skip,
      c.out[0].as<float>(), c.out[1].as<float>(), (float)c.floats[0], (float)c.floats[1],
      c.ints[0] != 0, n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchAdamw(const KernelCall &c, CudaContext &ctx) { return launchAdamW(c, ctx); }

bool supportsAdamw(const KernelCall &c) { return true; }
bool supportsSgd(const KernelCall &c) { return ranksFit(c); }

} // namespace zrt::cuda
