//===- Elementwise.cu - CUDA kernels: elementwise ---------------------------===//
//
// Elementwise kernels: broadcast binary arithmetic (16-byte vectors when
// no operand broadcasts), unary math, comparisons, logic and select, casts
// (one tensor, or a group of up to 96 per launch: mixed precision's
// parameter and gradient casts), GELU's gradient, fill. 16-bit storage,
// float32 math, as the CPU kernels. The compiler's generated kernels
// (elementwise) are loaded by cuda/Generated.cu.
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"
#include "kernels/Philox.h"

#include <map>

namespace zrt::cuda {
namespace {

enum class Bin { Add, Sub, Mul, Div, Pow, Max, Min };

template <Bin OP> __device__ __forceinline__ float binary(float x, float y) {
  if constexpr (OP == Bin::Add)
    return x + y;
  if constexpr (OP == Bin::Sub)
    return x - y;
  if constexpr (OP == Bin::Mul)
    return x * y;
  if constexpr (OP == Bin::Div)
    return x / y;
  if constexpr (OP == Bin::Pow)
    return powf(x, y);
  if constexpr (OP == Bin::Max)
    return x < y ? y : x; // std::max
  return y < x ? y : x;   // std::min
}

template <typename T, Bin OP>
__global__ void binaryKernel(const T *a, const T *b, T *o, Broadcast d, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i, oa = 0, ob = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      int64_t c = r % d.shape[k];
      r /= d.shape[k];
      oa += c * d.stride[0][k];
      ob += c * d.stride[1][k];
    }
    o[i] = fromF<T>(binary<OP>(toF(a[oa]), toF(b[ob])));
  }
}

/// Operands of the result's shape, 16-byte aligned (a residual add, a
/// gradient accumulation): 16 bytes per load and store, no index arithmetic.
template <typename T, Bin OP>
__global__ void binarySameKernel(const T *a, const T *b, T *o, int64_t n) {
  constexpr int V = 16 / sizeof(T);
  int64_t vectors = n / V, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < vectors; i += step) {
    uint4 ra = reinterpret_cast<const uint4 *>(a)[i], rb = reinterpret_cast<const uint4 *>(b)[i],
          ro;
    const T *ea = reinterpret_cast<const T *>(&ra), *eb = reinterpret_cast<const T *>(&rb);
    T *eo = reinterpret_cast<T *>(&ro);
#pragma unroll
    for (int k = 0; k < V; ++k)
      eo[k] = fromF<T>(binary<OP>(toF(ea[k]), toF(eb[k])));
    reinterpret_cast<uint4 *>(o)[i] = ro;
  }
  for (int64_t i = vectors * V + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
    o[i] = fromF<T>(binary<OP>(toF(a[i]), toF(b[i])));
}

enum class Un {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Recip,
  Tanh,
  Erf,
  Sigmoid,
  Relu,
  Silu,
  Cos,
  Sin,
  Gelu,
  GeluTanh
};

template <Un OP> __device__ __forceinline__ float unary(float x) {
  if constexpr (OP == Un::Neg)
    return -x;
  if constexpr (OP == Un::Abs)
    return fabsf(x);
  if constexpr (OP == Un::Exp)
    return expf(x);
  if constexpr (OP == Un::Log)
    return logf(x);
  if constexpr (OP == Un::Sqrt)
    return sqrtf(x);
  if constexpr (OP == Un::Rsqrt)
    return 1.0f / sqrtf(x);
  if constexpr (OP == Un::Recip)
    return 1.0f / x;
  if constexpr (OP == Un::Tanh)
    return tanhf(x);
  if constexpr (OP == Un::Erf)
    return erff(x);
  if constexpr (OP == Un::Sigmoid)
    return 1.0f / (1.0f + expf(-x));
  if constexpr (OP == Un::Relu)
    return x < 0 ? 0.0f : x;
  if constexpr (OP == Un::Silu)
    return x / (1.0f + expf(-x));
  if constexpr (OP == Un::Cos)
    return cosf(x);
  if constexpr (OP == Un::Sin)
    return sinf(x);
  if constexpr (OP == Un::Gelu)
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  const float k = 0.7978845608028654f; // GeluTanh
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/// y = op(x); 16 bytes per access when both are 16-byte aligned.
template <typename T, Un OP>
__global__ void unaryKernel(const T *x, T *y, int64_t n, bool vectors) {
  constexpr int V = 16 / sizeof(T);
  int64_t nv = vectors ? n / V : 0, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += step) {
    uint4 rx = reinterpret_cast<const uint4 *>(x)[i], ry;
    const T *ex = reinterpret_cast<const T *>(&rx);
    T *ey = reinterpret_cast<T *>(&ry);
#pragma unroll
    for (int k = 0; k < V; ++k)
      ey[k] = fromF<T>(unary<OP>(toF(ex[k])));
    reinterpret_cast<uint4 *>(y)[i] = ry;
  }
  for (int64_t i = nv * V + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = fromF<T>(unary<OP>(toF(x[i])));
}

// Dropout (kernels/Philox.h): the CPU kernel's mask and arithmetic. With
// samples a multiple of 4 elements, a thread takes a group of 4 elements and
// one Philox call.
template <typename T>
__global__ void dropoutKernel(const T *x, T *y, const int64_t *rng, DropoutMask m, float scale,
                              int64_t n) {
  m.seed = (uint64_t)rng[0];
  m.position = (uint64_t)rng[1];
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  int64_t first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (m.perSample % 4 == 0) {
    for (int64_t g = first; g < n / 4; g += step) {
      PhiloxWords w = m.groupWords(4 * g);
#pragma unroll
      for (int k = 0; k < 4; ++k)
        y[4 * g + k] = fromF<T>(m.keeps(w.w[k]) ? toF(x[4 * g + k]) * scale : 0.0f);
    }
    return;
  }
  for (int64_t e = first; e < n; e += step)
    y[e] = fromF<T>(m.keep(e) ? toF(x[e]) * scale : 0.0f);
}

__global__ void fillF32(float *y, float v, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = v;
}

template <typename T>
__global__ void cmpKernel(const T *a, const T *b, unsigned char *o, Broadcast3 d, int64_t n,
                          int pred) {
  ZRT_GRID_LOOP(i, n) {
    int64_t off[3];
    offsets3(d, i, off);
    // Floats compare as float, int64 exactly (as the CPU kernel).
    bool r;
    if constexpr (std::is_same_v<T, int64_t>) {
      int64_t x = a[off[0]], y = b[off[1]];
      r = pred == 0   ? x == y
          : pred == 1 ? x != y
          : pred == 2 ? x < y
          : pred == 3 ? x <= y
          : pred == 4 ? x > y
                      : x >= y;
    } else {
      float x = toF(a[off[0]]), y = toF(b[off[1]]);
      r = pred == 0   ? x == y
          : pred == 1 ? x != y
          : pred == 2 ? x < y
          : pred == 3 ? x <= y
          : pred == 4 ? x > y
                      : x >= y;
    }
    o[i] = r;
  }
}

__global__ void logicKernel(const unsigned char *a, const unsigned char *b, unsigned char *o,
                            Broadcast3 d, int64_t n, int op) {
  ZRT_GRID_LOOP(i, n) {
    int64_t off[3];
    offsets3(d, i, off);
    o[i] = op == 0 ? (a[off[0]] && b[off[1]]) : op == 1 ? (a[off[0]] || b[off[1]]) : !a[off[0]];
  }
}

__device__ double castLoad(const char *x, int dt, int64_t k) {
  switch (dt) {
  case (int)DType::F32:
    return ((const float *)x)[k];
  case (int)DType::BF16:
    return __bfloat162float(((const __nv_bfloat16 *)x)[k]);
  case (int)DType::F16:
    return __half2float(((const __half *)x)[k]);
  case (int)DType::F64:
    return ((const double *)x)[k];
  case (int)DType::I64:
    return (double)((const int64_t *)x)[k];
  case (int)DType::I32:
    return ((const int32_t *)x)[k];
  default:
    return ((const unsigned char *)x)[k];
  }
}

/// float32 <-> 16-bit casts (mixed precision's parameter and gradient casts,
/// ~300 a step), 8 elements per thread with 16-byte accesses; the same
/// roundings as castKernel.
/// Elements 8 g .. 8 g + 7 of x converted into y, 16 bytes at a time (both
/// arrays 16-byte aligned).
template <typename From, typename To>
__device__ __forceinline__ void castGroupOf8(const From *x, To *y, int64_t g) {
  constexpr int kIn = sizeof(From) / 2, kOut = sizeof(To) / 2; // uint4s per 8 elements
  uint4 in[kIn], out[kOut];
#pragma unroll
  for (int i = 0; i < kIn; ++i)
    in[i] = reinterpret_cast<const uint4 *>(x)[g * kIn + i];
  const From *e = reinterpret_cast<const From *>(in);
  To *o = reinterpret_cast<To *>(out);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    o[k] = fromF<To>(toF(e[k]));
#pragma unroll
  for (int i = 0; i < kOut; ++i)
    reinterpret_cast<uint4 *>(y)[g * kOut + i] = out[i];
}

template <typename From, typename To>
__global__ void castFloatKernel(const From *x, To *y, int64_t n) {
  int64_t groups = n / 8, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < groups; g += step)
    castGroupOf8(x, y, g);
  for (int64_t k = groups * 8 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step)
    y[k] = fromF<To>(toF(x[k]));
}

//--- Many casts in one launch (cast_many, cast_concat) -------------------===//
// Mixed precision casts every parameter (and every gradient) separately: 148
// launches each way for GPT-2 124M, 580 for 1.5B, most of them small. One
// launch takes up to kCastGroupMax tensors: block b finds its tensor by a
// binary search over the tensors' first blocks (kernel parameters, read
// through the constant cache) and converts kCastChunk elements of it, 16
// bytes at a time where both arrays are 16-byte aligned. Same conversion as
// castKernel / castFloatKernel: float, then rounded to nearest even.

constexpr int kCastGroupMax = 96;    // the parameters stay under 4 KB
constexpr int64_t kCastChunk = 8192; // elements per block

struct CastGroup {
  const char *src[kCastGroupMax];
  char *dst[kCastGroupMax];
  int64_t n[kCastGroupMax];
  int firstBlock[kCastGroupMax + 1];
  unsigned char vectors[kCastGroupMax];
  int count;
};

template <typename From, typename To>
__global__ void castGroupKernel(const __grid_constant__ CastGroup g) {
  int b = blockIdx.x, lo = 0, hi = g.count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (g.firstBlock[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  const From *x = reinterpret_cast<const From *>(g.src[lo]);
  To *y = reinterpret_cast<To *>(g.dst[lo]);
  int64_t begin = (int64_t)(b - g.firstBlock[lo]) * kCastChunk;
  int64_t end = min(g.n[lo], begin + kCastChunk), scalarFrom = begin;
  if (g.vectors[lo]) {
    int64_t groups = (end - begin) / 8;
    for (int64_t k = threadIdx.x; k < groups; k += blockDim.x)
      castGroupOf8(x, y, begin / 8 + k);
    scalarFrom = begin + groups * 8;
  }
  for (int64_t i = scalarFrom + threadIdx.x; i < end; i += blockDim.x)
    y[i] = fromF<To>(toF(x[i]));
}

__global__ void castKernel(const char *x, char *y, int from, int to, int64_t n) {
  ZRT_GRID_LOOP(k, n) {
    if (from == (int)DType::I64 && to == (int)DType::I64) {
      ((int64_t *)y)[k] = ((const int64_t *)x)[k];
      continue;
    }
    double v = castLoad(x, from, k);
    switch (to) {
    case (int)DType::F32:
      ((float *)y)[k] = (float)v;
      break;
    case (int)DType::BF16:
      ((__nv_bfloat16 *)y)[k] = __float2bfloat16_rn((float)v);
      break;
    case (int)DType::F16:
      ((__half *)y)[k] = __float2half_rn((float)v);
      break;
    case (int)DType::F64:
      ((double *)y)[k] = v;
      break;
    case (int)DType::I64:
      ((int64_t *)y)[k] = from == (int)DType::I32 ? ((const int32_t *)x)[k] : (int64_t)v;
      break;
    case (int)DType::I32:
      ((int32_t *)y)[k] = (int32_t)v;
      break;
    default:
      ((unsigned char *)y)[k] = v != 0;
      break;
    }
  }
}

/// transpose and slice: output element i reads input element
/// base + sum(coord[d] * step[d]).

/// dx = dy * GELU'(x): in double for float32 tensors (as the CPU kernel), in
/// float for 16-bit ones, whose result keeps 8 or 11 bits (double erf/exp
/// made this kernel 3x slower than its memory traffic on GPT-2's MLP).
template <typename T> __device__ __forceinline__ T geluGrad(T xv, T gv, bool approx) {
  using M = std::conditional_t<std::is_same_v<T, float>, double, float>;
  M v = toF(xv), d;
  if (approx) {
    const M a = 0.7978845608028654, b = 0.044715;
    M inner = a * (v + b * v * v * v), t = tanh(inner);
    d = M(0.5) * (1 + t) + M(0.5) * v * (1 - t * t) * a * (1 + 3 * b * v * v);
  } else {
    d = M(0.5) * (1 + erf(v * M(0.70710678118654752))) +
        v * M(0.3989422804014327) * exp(M(-0.5) * v * v);
  }
  return fromF<T>((float)(toF(gv) * d));
}
template <typename T>
__global__ void geluGradKernel(const T *x, const T *g, T *dx, int64_t n, bool approx,
                               bool vectors) {
  constexpr int V = 16 / sizeof(T);
  int64_t nv = vectors ? n / V : 0, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += step) {
    uint4 rx = reinterpret_cast<const uint4 *>(x)[i], rg = reinterpret_cast<const uint4 *>(g)[i],
          ro;
    const T *ex = reinterpret_cast<const T *>(&rx), *eg = reinterpret_cast<const T *>(&rg);
    T *eo = reinterpret_cast<T *>(&ro);
#pragma unroll
    for (int k = 0; k < V; ++k)
      eo[k] = geluGrad(ex[k], eg[k], approx);
    reinterpret_cast<uint4 *>(dx)[i] = ro;
  }
  for (int64_t i = nv * V + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
    dx[i] = geluGrad(x[i], g[i], approx);
}

template <typename T, Bin OP> Status launchBinary(const KernelCall &c, CudaContext &ctx) {
  int64_t total = c.out[0].numel();
  auto aligned = [](const TensorRef &t) { return reinterpret_cast<uintptr_t>(t.data) % 16 == 0; };
  if (c.in[0].numel() == total && c.in[1].numel() == total && aligned(c.in[0]) &&
      aligned(c.in[1]) && aligned(c.out[0])) {
    binarySameKernel<T, OP><<<blocksFor((total + 7) / 8), kThreads, 0, ctx.stream>>>(
        c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), total);
    ZRT_CUDA(cudaGetLastError());
    return Status::ok();
  }
  Broadcast d;
  makeBroadcast(c.out[0].shape, {c.in[0].shape, c.in[1].shape}, d);
  int64_t n = c.out[0].numel();
  binaryKernel<T, OP><<<blocksFor(n), kThreads, 0, ctx.stream>>>(c.in[0].as<T>(), c.in[1].as<T>(),
                                                                 c.out[0].as<T>(), d, n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

template <Bin OP> Status binaryByType(const KernelCall &c, CudaContext &ctx) {
  switch (c.in[0].dtype) {
  case DType::F32:
    return launchBinary<float, OP>(c, ctx);
  case DType::BF16:
    return launchBinary<__nv_bfloat16, OP>(c, ctx);
  default:
    return launchBinary<__half, OP>(c, ctx);
  }
}

template <typename T, Un OP> Status launchUnary(const KernelCall &c, CudaContext &ctx) {
  int64_t n = c.out[0].numel();
  bool vectors = reinterpret_cast<uintptr_t>(c.in[0].data) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(c.out[0].data) % 16 == 0;
  unaryKernel<T, OP><<<blocksFor(vectors ? (n + 7) / 8 : n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<T>(), c.out[0].as<T>(), n, vectors);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

template <Un OP> Status unaryByType(const KernelCall &c, CudaContext &ctx) {
  switch (c.in[0].dtype) {
  case DType::F32:
    return launchUnary<float, OP>(c, ctx);
  case DType::BF16:
    return launchUnary<__nv_bfloat16, OP>(c, ctx);
  default:
    return launchUnary<__half, OP>(c, ctx);
  }
}

template <typename From>
void launchCastGroupTo(DType to, const CastGroup &g, int blocks, cudaStream_t st) {
  switch (to) {
  case DType::F32:
    castGroupKernel<From, float><<<blocks, kThreads, 0, st>>>(g);
    break;
  case DType::BF16:
    castGroupKernel<From, __nv_bfloat16><<<blocks, kThreads, 0, st>>>(g);
    break;
  default:
    castGroupKernel<From, __half><<<blocks, kThreads, 0, st>>>(g);
    break;
  }
}

/// Converts each (x_i, y_i) pair of float tensors, one launch per (from,
/// to) type pair and kCastGroupMax tensors.
Status launchCastPairs(const std::vector<std::pair<TensorRef, TensorRef>> &pairs,
                       CudaContext &ctx) {
  std::map<std::pair<int, int>, std::vector<size_t>> byTypes;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto &[x, y] = pairs[i];
    if (!isFloat(x.dtype) || !isFloat(y.dtype) || x.numel() != y.numel())
      return errorf("cast: pair ", i, ": ", x.numel(), " elements to ", y.numel(),
                    ", float types only");
    if (x.numel() > 0)
      byTypes[{(int)x.dtype, (int)y.dtype}].push_back(i);
  }
  for (const auto &[types, members] : byTypes) {
    for (size_t first = 0; first < members.size(); first += kCastGroupMax) {
      CastGroup g{};
      int64_t blocks = 0;
      for (size_t k = first; k < members.size() && g.count < kCastGroupMax; ++k) {
        const auto &[x, y] = pairs[members[k]];
        int i = g.count++;
        g.src[i] = x.data;
        g.dst[i] = y.data;
        g.n[i] = x.numel();
        g.firstBlock[i] = (int)blocks;
        g.vectors[i] = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y.data) % 16 == 0;
        blocks += (g.n[i] + kCastChunk - 1) / kCastChunk;
      }
      if (blocks > INT32_MAX / 2)
        return errorf("cast: ", blocks, " blocks in one launch");
      g.firstBlock[g.count] = (int)blocks;
      switch ((DType)types.first) {
      case DType::F32:
        launchCastGroupTo<float>((DType)types.second, g, (int)blocks, ctx.stream);
        break;
      case DType::BF16:
        launchCastGroupTo<__nv_bfloat16>((DType)types.second, g, (int)blocks, ctx.stream);
        break;
      default:
        launchCastGroupTo<__half>((DType)types.second, g, (int)blocks, ctx.stream);
        break;
      }
      ZRT_CUDA(cudaGetLastError());
    }
  }
  return Status::ok();
}

} // namespace

Status launchCmp(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t n = c.out[0].numel();
  Broadcast3 d = makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[1].shape});
  int pred = (int)c.ints[0];
  switch (c.in[0].dtype) {
  case DType::F32:
    cmpKernel<float><<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<float>(), c.in[1].as<float>(),
                                                        c.out[0].as<unsigned char>(), d, n, pred);
    break;
  case DType::BF16:
    cmpKernel<__nv_bfloat16><<<blocksFor(n), kThreads, 0, st>>>(
        c.in[0].as<__nv_bfloat16>(), c.in[1].as<__nv_bfloat16>(), c.out[0].as<unsigned char>(), d,
        n, pred);
    break;
  case DType::F16:
    cmpKernel<__half><<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<__half>(), c.in[1].as<__half>(),
                                                         c.out[0].as<unsigned char>(), d, n, pred);
    break;
  default:
    cmpKernel<int64_t><<<blocksFor(n), kThreads, 0, st>>>(
        c.in[0].as<int64_t>(), c.in[1].as<int64_t>(), c.out[0].as<unsigned char>(), d, n, pred);
    break;
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchLogic(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t n = c.out[0].numel();
  bool unary = id == KernelId::Not;
  Broadcast3 d = unary ? makeBroadcast3(c.out[0].shape, {c.in[0].shape})
                       : makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[1].shape});
  logicKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<unsigned char>(),
                                                 unary ? nullptr : c.in[1].as<unsigned char>(),
                                                 c.out[0].as<unsigned char>(), d, n,
                                                 id == KernelId::And  ? 0
                                                 : id == KernelId::Or ? 1
                                                                      : 2);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchAnd(const KernelCall &c, CudaContext &ctx) {
  return launchLogic(KernelId::And, c, ctx);
}
Status launchOr(const KernelCall &c, CudaContext &ctx) { return launchLogic(KernelId::Or, c, ctx); }
Status launchNot(const KernelCall &c, CudaContext &ctx) {
  return launchLogic(KernelId::Not, c, ctx);
}

Status launchWhere(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t n = c.out[0].numel();
  Broadcast3 d = makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[1].shape, c.in[2].shape});
  selectKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<unsigned char>(), c.in[1].data,
                                                  c.in[2].data, c.out[0].data, d, n,
                                                  (int)dtypeSize(c.out[0].dtype));
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchCastGroup(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  std::vector<std::pair<TensorRef, TensorRef>> pairs;
  int64_t at = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (id == KernelId::CastMany) {
      pairs.emplace_back(c.in[i], c.out[i]);
      continue;
    }
    TensorRef slice = c.out[0];
    slice.shape = {c.in[i].numel()};
    slice.data = c.out[0].data + at * (int64_t)dtypeSize(slice.dtype);
    at += c.in[i].numel();
    pairs.emplace_back(c.in[i], slice);
  }
  return launchCastPairs(pairs, ctx);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchCastMany(const KernelCall &c, CudaContext &ctx) {
  return launchCastGroup(KernelId::CastMany, c, ctx);
}
Status launchCastConcat(const KernelCall &c, CudaContext &ctx) {
  return launchCastGroup(KernelId::CastConcat, c, ctx);
}

Status launchCast(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t n = c.out[0].numel();
  DType from = c.in[0].dtype, to = c.out[0].dtype;
  bool vectors = reinterpret_cast<uintptr_t>(c.in[0].data) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(c.out[0].data) % 16 == 0;
  unsigned blocks = blocksFor((n + 7) / 8);
  if (vectors && from == DType::F32 && to == DType::BF16)
    castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<float>(), c.out[0].as<__nv_bfloat16>(),
                                                 n);
  else if (vectors && from == DType::F32 && to == DType::F16)
    castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<float>(), c.out[0].as<__half>(), n);
  else if (vectors && from == DType::BF16 && to == DType::F32)
    castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<__nv_bfloat16>(), c.out[0].as<float>(),
                                                 n);
  else if (vectors && from == DType::F16 && to == DType::F32)
    castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<__half>(), c.out[0].as<float>(), n);
  else
    castKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].data, c.out[0].data, (int)from, (int)to,
                                                  n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchGeluGrad(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t n = c.out[0].numel();
  bool vectors = true;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.out[0]})
    vectors &= reinterpret_cast<uintptr_t>(t->data) % 16 == 0;
  ZRT_FLOAT_DISPATCH(
      c.out[0].dtype, T,
      geluGradKernel<T><<<blocksFor(vectors ? (n + 7) / 8 : n), kThreads, 0, st>>>(
          c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), n, c.ints[0] == 1, vectors))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchAdd(const KernelCall &c, CudaContext &ctx) { return binaryByType<Bin::Add>(c, ctx); }
Status launchSub(const KernelCall &c, CudaContext &ctx) { return binaryByType<Bin::Sub>(c, ctx); }
Status launchMul(const KernelCall &c, CudaContext &ctx) { return binaryByType<Bin::Mul>(c, ctx); }
Status launchDiv(const KernelCall &c, CudaContext &ctx) { return binaryByType<Bin::Div>(c, ctx); }
Status launchPow(const KernelCall &c, CudaContext &ctx) { return binaryByType<Bin::Pow>(c, ctx); }
Status launchMax(const KernelCall &c, CudaContext &ctx) { return binaryByType<Bin::Max>(c, ctx); }
Status launchMin(const KernelCall &c, CudaContext &ctx) { return binaryByType<Bin::Min>(c, ctx); }
Status launchNeg(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Neg>(c, ctx); }
Status launchAbs(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Abs>(c, ctx); }
Status launchExp(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Exp>(c, ctx); }
Status launchLog(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Log>(c, ctx); }
Status launchSqrt(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Sqrt>(c, ctx); }
Status launchRsqrt(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Rsqrt>(c, ctx); }
Status launchReciprocal(const KernelCall &c, CudaContext &ctx) {
  return unaryByType<Un::Recip>(c, ctx);
}
Status launchTanh(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Tanh>(c, ctx); }
Status launchErf(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Erf>(c, ctx); }
Status launchSigmoid(const KernelCall &c, CudaContext &ctx) {
  return unaryByType<Un::Sigmoid>(c, ctx);
}
Status launchRelu(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Relu>(c, ctx); }
Status launchSilu(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Silu>(c, ctx); }
Status launchCos(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Cos>(c, ctx); }
Status launchSin(const KernelCall &c, CudaContext &ctx) { return unaryByType<Un::Sin>(c, ctx); }
Status launchGelu(const KernelCall &c, CudaContext &ctx) {
  return c.ints[0] == 1 ? unaryByType<Un::GeluTanh>(c, ctx) : unaryByType<Un::Gelu>(c, ctx);
}
Status launchFill(const KernelCall &c, CudaContext &ctx) {
  int64_t n = c.out[0].numel();
  fillF32<<<blocksFor(n), kThreads, 0, ctx.stream>>>(c.out[0].as<float>(), (float)c.floats[0], n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchElementwise(const KernelCall &c, CudaContext &ctx) { return launchGenerated(c, ctx); }

template <typename T> Status launchDropoutAs(const KernelCall &c, CudaContext &ctx) {
  DropoutMask m;
  m.key = (uint32_t)c.ints[0];
  m.threshold = dropoutThreshold(c.floats[0]);
  m.perSample = c.in[0].numel() / c.ints[1];
  int64_t n = c.out[0].numel();
  dropoutKernel<T><<<blocksFor(m.perSample % 4 == 0 ? n / 4 : n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<T>(), c.out[0].as<T>(), c.in[1].as<int64_t>(), m, dropoutScale(c.floats[0]), n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchDropout(const KernelCall &c, CudaContext &ctx) {
  switch (c.in[0].dtype) {
  case DType::F32:
    return launchDropoutAs<float>(c, ctx);
  case DType::BF16:
    return launchDropoutAs<__nv_bfloat16>(c, ctx);
  default:
    return launchDropoutAs<__half>(c, ctx);
  }
}

bool supportsAdd(const KernelCall &c) {
  return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
}
bool supportsSub(const KernelCall &c) {
  return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
}
bool supportsMul(const KernelCall &c) {
  return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
}
bool supportsDiv(const KernelCall &c) {
  return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
}
bool supportsPow(const KernelCall &c) {
  return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
}
bool supportsMax(const KernelCall &c) {
  return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
}
bool supportsMin(const KernelCall &c) {
  return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
}
bool supportsNeg(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsAbs(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsExp(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsLog(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsSqrt(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsRsqrt(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsReciprocal(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsTanh(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsErf(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsSigmoid(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsRelu(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsSilu(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsCos(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsSin(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsGelu(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsFill(const KernelCall &c) { return c.out[0].dtype == DType::F32; }
bool supportsDropout(const KernelCall &c) { return isFloat(c.in[0].dtype); }
bool supportsElementwise(const KernelCall &c) { return c.code != nullptr; }
bool supportsCmp(const KernelCall &c) { return ranksFit(c); }
bool supportsAnd(const KernelCall &c) { return ranksFit(c); }
bool supportsOr(const KernelCall &c) { return ranksFit(c); }
bool supportsNot(const KernelCall &c) { return ranksFit(c); }
bool supportsWhere(const KernelCall &c) { return ranksFit(c); }
bool supportsCastMany(const KernelCall &c) { return ranksFit(c); }
bool supportsCastConcat(const KernelCall &c) { return ranksFit(c); }
bool supportsCast(const KernelCall &c) { return ranksFit(c); }
bool supportsGeluGrad(const KernelCall &c) { return ranksFit(c); }

} // namespace zrt::cuda
