//===- Reduce.cu - CUDA kernels: reduce -------------------------------------===//
//
// Reductions: a thread per output element when each sums few inputs,
// else blocks over column chunks with a finishing pass; double
// accumulation in input order, as the CPU kernel.
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"

namespace zrt::cuda {
namespace {

struct ReduceMap {
  int rank = 0;
  int64_t keptShape[kMaxRank], keptStride[kMaxRank]; // output coords -> input offset
  int64_t redShape[kMaxRank], redStride[kMaxRank];   // reduced coords -> input offset
  int keptRank = 0, redRank = 0;
};

template <typename T, typename Y>
__global__ void reduceKernel(const T *x, Y *y, ReduceMap m, int64_t n, int64_t count, int kind) {
  ZRT_GRID_LOOP(i, n) {
    int64_t r = i, base = 0;
    for (int k = m.keptRank - 1; k >= 0; --k) {
      base += (r % m.keptShape[k]) * m.keptStride[k];
      r /= m.keptShape[k];
    }
    double a = kind == 2 ? -INFINITY : kind == 3 ? INFINITY : kind == 4 ? 1.0 : 0.0;
    for (int64_t e = 0; e < count; ++e) {
      int64_t q = e, off = base;
      for (int k = m.redRank - 1; k >= 0; --k) {
        off += (q % m.redShape[k]) * m.redStride[k];
        q /= m.redShape[k];
      }
      double v = toF(x[off]);
      if (kind <= 1)
        a += v;
      else if (kind == 5)
        a += (double)((float)v * (float)v);
      else if (kind == 2)
        a = a < v ? v : a;
      else if (kind == 3)
        a = v < a ? v : a;
      else
        a *= v;
    }
    y[i] = fromF<Y>((float)(kind == 1 ? a / count : a));
  }
}

__device__ __forceinline__ double reduceIdentity(int kind) {
  return kind == 2 ? -INFINITY : kind == 3 ? INFINITY : kind == 4 ? 1.0 : 0.0;
}
/// Two partial results combined (a NaN element leaves max/min as they were).
__device__ __forceinline__ double reduceStep(int kind, double a, double v) {
  return kind <= 1 || kind == 5 ? a + v
         : kind == 2            ? (a < v ? v : a)
         : kind == 3            ? (v < a ? v : a)
                                : a * v;
}
/// An element into a partial result: the CPU kernel's step (5: its square
/// in float, then summed).
__device__ __forceinline__ double reduceElement(int kind, double a, float v) {
  return kind == 5 ? a + (double)(v * v) : reduceStep(kind, a, (double)v);
}

__device__ double blockReduce(double v, int kind) {
  __shared__ double shared[32];
  for (int o = 16; o > 0; o >>= 1)
    v = reduceStep(kind, v, __shfl_down_sync(0xffffffff, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? shared[lane] : reduceIdentity(kind);
    for (int o = 16; o > 0; o >>= 1)
      v = reduceStep(kind, v, __shfl_down_sync(0xffffffff, v, o));
  }
  return v; // thread 0's is the block's
}

/// A split's block total: output |i| itself with one split, else block |b|'s
/// double partial for reduceFinishKernel.
template <typename Y>
__device__ __forceinline__ void blockResult(double a, int kind, Y *y, double *partial, int64_t i,
                                            int64_t b, int splits, int64_t count) {
  a = blockReduce(a, kind);
  if (threadIdx.x == 0) {
    if (splits == 1)
      y[i] = fromF<Y>((float)(kind == 1 ? a / count : a));
    else
      partial[b] = a;
  }
}

/// reduce over the leading axes of a contiguous tensor, viewed as [rows,
/// cols] -> [cols] (a bias gradient: dY summed over the batch and sequence):
/// thread j of column block x sums column j over row chunk y, so that a warp
/// reads 32 adjacent elements; the chunks' double partials are combined in
/// order by reduceFinishKernel. The block-per-output kernel would read each
/// column with a stride of |cols| elements.
template <typename T>
__global__ void reduceColumnsKernel(const T *x, double *partial, int64_t rows, int64_t cols,
                                    int64_t chunkRows, int kind) {
  int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols)
    return;
  int64_t begin = blockIdx.y * chunkRows, end = min(rows, begin + chunkRows);
  double a = reduceIdentity(kind);
  const T *col = x + j;
#pragma unroll 8
  for (int64_t r = begin; r < end; ++r)
    a = reduceElement(kind, a, toF(col[r * cols]));
  partial[j * gridDim.y + blockIdx.y] = a;
}

/// reduce, many elements per output: block b reduces split (b % splits) of
/// output (b / splits), its threads striding over the split; with one split
/// it writes the output, else a double partial that reduceFinishKernel
/// combines in split order. Deterministic (fixed grid and order).
template <typename T, typename Y>
__global__ void reduceBlocksKernel(const T *x, Y *y, double *partial, ReduceMap m, int64_t count,
                                   int64_t chunk, int splits, int kind) {
  int64_t b = blockIdx.x, i = b / splits, s = b % splits;
  int64_t r = i, base = 0;
  for (int k = m.keptRank - 1; k >= 0; --k) {
    base += (r % m.keptShape[k]) * m.keptStride[k];
    r /= m.keptShape[k];
  }
  int64_t begin = s * chunk, end = min(count, begin + chunk);
  double a = reduceIdentity(kind);
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    int64_t off = base;
    if (m.redRank == 1) {
      off += e * m.redStride[0];
    } else {
      for (int64_t q = e, k = m.redRank - 1; k >= 0; --k) {
        off += (q % m.redShape[k]) * m.redStride[k];
        q /= m.redShape[k];
      }
    }
    a = reduceElement(kind, a, toF(x[off]));
  }
  blockResult(a, kind, y, partial, i, b, splits, count);
}

/// reduceBlocksKernel's trailing-axes case ([n, count] -> [n], the rows
/// 16-byte aligned) with 16-byte loads, 4 in flight per thread: a gradient
/// bucket's sum of squares reads at memory speed in 16-bit types too (element
/// loads kept too few bytes in flight: 4.1 ms for Llama 1B's 2.5 GB of bf16).
/// The same split, block and combination order as reduceBlocksKernel.
template <typename T, typename Y>
__global__ void reduceRowsVecKernel(const T *x, Y *y, double *partial, int64_t count,
                                    int64_t chunkVecs, int splits, int kind) {
  constexpr int V = 16 / sizeof(T), U = 4;
  int64_t b = blockIdx.x, i = b / splits, s = b % splits;
  const uint4 *row = reinterpret_cast<const uint4 *>(x + i * count);
  int64_t begin = s * chunkVecs, end = min(count / V, begin + chunkVecs), step = blockDim.x;
  double a = reduceIdentity(kind);
  auto add = [&](const uint4 &v) {
    const T *t = reinterpret_cast<const T *>(&v);
#pragma unroll
    for (int k = 0; k < V; ++k)
      a = reduceElement(kind, a, toF(t[k]));
  };
  int64_t e = begin + threadIdx.x;
  for (; e + (U - 1) * step < end; e += U * step) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      v[u] = __ldcs(row + e + u * step); // read once: stream past the caches
#pragma unroll
    for (int u = 0; u < U; ++u)
      add(v[u]);
  }
  for (; e < end; e += step)
    add(__ldcs(row + e));
  blockResult(a, kind, y, partial, i, b, splits, count);
}

template <typename Y>
__global__ void reduceFinishKernel(const double *partial, Y *y, int64_t n, int splits,
                                   int64_t count, int kind) {
  ZRT_GRID_LOOP(i, n) {
    double a = reduceIdentity(kind);
    for (int s = 0; s < splits; ++s)
      a = reduceStep(kind, a, partial[i * splits + s]);
    y[i] = fromF<Y>((float)(kind == 1 ? a / count : a));
  }
}

/// dx = dy * GELU'(x): in double for float32 tensors (as the CPU kernel), in
/// float for 16-bit ones, whose result keeps 8 or 11 bits (double erf/exp
/// made this kernel 3x slower than its memory traffic on GPT-2's MLP).

} // namespace

Status launchReduce(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  const TensorRef &x = c.in[0], &y = c.out[0];
  std::vector<bool> reduced(x.shape.size(), false);
  for (size_t i = 2; i < c.ints.size(); ++i)
    reduced[c.ints[i]] = true;
  std::vector<int64_t> strides = contiguousStrides(x.shape);
  ReduceMap m;
  int64_t count = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (reduced[d]) {
      m.redShape[m.redRank] = x.shape[d];
      m.redStride[m.redRank++] = strides[d];
      count *= x.shape[d];
    } else {
      m.keptShape[m.keptRank] = x.shape[d];
      m.keptStride[m.keptRank++] = strides[d];
    }
  }
  int64_t n = y.numel();
  int kind = (int)c.ints[0];
  // The reduced axes are the leading ones: the input is [count, n].
  bool leading = m.redRank > 0 && count > 64 && n >= 64;
  for (int d = 0; d < (int)x.shape.size(); ++d)
    leading &= reduced[d] == (d < m.redRank);
  if (leading) {
    int64_t chunks =
        std::min<int64_t>((count + 127) / 128, std::max<int64_t>(1, 4096 / ((n + 255) / 256)));
    int64_t chunkRows = (count + chunks - 1) / chunks;
    chunks = (count + chunkRows - 1) / chunkRows;
    ZRT_RETURN_IF_ERROR(ctx.reserve(n * chunks * sizeof(double)));
    double *partial = static_cast<double *>(ctx.scratch);
    ZRT_FLOAT_DISPATCH(x.dtype, T,
                       reduceColumnsKernel<T>
                       <<<dim3((unsigned)((n + 255) / 256), (unsigned)chunks), 256, 0, st>>>(
                           x.as<T>(), partial, count, n, chunkRows, kind))
    ZRT_FLOAT_DISPATCH(y.dtype, Y,
                       reduceFinishKernel<Y><<<blocksFor(n), kThreads, 0, st>>>(
                           partial, y.as<Y>(), n, (int)chunks, count, kind))
  } else if (n > 0 && count <= 64) {
    // Few elements per output: a thread each.
    ZRT_FLOAT_DISPATCH(x.dtype, T,
                       ZRT_FLOAT_DISPATCH(y.dtype, Y,
                                          reduceKernel<T, Y><<<blocksFor(n), kThreads, 0, st>>>(
                                              x.as<T>(), y.as<Y>(), m, n, count, kind)))
  } else if (n > 0) {
    // A block per output, and several when there are few outputs to
    // spread a long reduction over the GPU (partials combined in order).
    int64_t splits = 1;
    if (n < 1024)
      splits = std::min<int64_t>((count + kRowThreads * 64 - 1) / (kRowThreads * 64),
                                 std::max<int64_t>(1, 2048 / n));
    int64_t chunk = (count + splits - 1) / splits;
    double *partial = nullptr;
    if (splits > 1) {
      ZRT_RETURN_IF_ERROR(ctx.reserve(n * splits * sizeof(double)));
      partial = static_cast<double *>(ctx.scratch);
    }
    // The reduced axes are the trailing ones and every row is 16-byte
    // aligned: whole vectors per split, 16-byte loads.
    int64_t vec = 16 / dtypeSize(x.dtype);
    bool trailing = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && count % vec == 0;
    for (int d = 0; d < (int)x.shape.size(); ++d)
      trailing &= reduced[d] == (d >= (int)x.shape.size() - m.redRank);
    if (trailing) {
      int64_t chunkVecs = (count / vec + splits - 1) / splits;
      ZRT_FLOAT_DISPATCH(x.dtype, T,
                         ZRT_FLOAT_DISPATCH(y.dtype, Y,
                                            reduceRowsVecKernel<T, Y>
                                            <<<(unsigned)(n * splits), kRowThreads, 0, st>>>(
                                                x.as<T>(), y.as<Y>(), partial, count, chunkVecs,
                                                (int)splits, kind)))
    } else {
      ZRT_FLOAT_DISPATCH(x.dtype, T,
                         ZRT_FLOAT_DISPATCH(y.dtype, Y,
                                            reduceBlocksKernel<T, Y>
                                            <<<(unsigned)(n * splits), kRowThreads, 0, st>>>(
                                                x.as<T>(), y.as<Y>(), partial, m, count, chunk,
                                                (int)splits, kind)))
    }
    if (splits > 1)
      ZRT_FLOAT_DISPATCH(y.dtype, Y,
                         reduceFinishKernel<Y><<<blocksFor(n), kThreads, 0, st>>>(
                             partial, y.as<Y>(), n, (int)splits, count, kind))
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

bool supportsReduce(const KernelCall &c) { return ranksFit(c); }

} // namespace zrt::cuda
