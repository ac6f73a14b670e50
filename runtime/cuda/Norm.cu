//===- Norm.cu - CUDA kernels: norm -----------------------------------------===//
//
// Norms and softmax: softmax/log_softmax and their gradients (a block per
// row), bias_softmax (a register-resident row when it fits), layer_norm and
// rms_norm and their gradients (dx per row, parameter sums by column tiles):
// 16-byte vectors and float element math where rows are whole vectors, else
// a warp per row up to 1024 columns (block kernels beyond) with row
// statistics in double, as the CPU kernels.
//
// Size: one kernel family. Softmax and its gradients could stand
// in a file of their own; open in issue 51, not done yet.
//
//===----------------------------------------------------------------------===//
#include "cuda/CpAsync.cuh"
#include "cuda/KernelSupport.cuh"

namespace zrt::cuda {
namespace {

__device__ __forceinline__ int64_t rowBase(int64_t r, int64_t dim, int64_t inner) {
  return (r / inner) * dim * inner + r % inner;
}

template <typename T>
__global__ void softmaxKernel(const T *x, T *y, int64_t dim, int64_t inner, bool log) {
  int64_t base = rowBase(blockIdx.x, dim, inner);
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    mx = fmaxf(mx, toF(x[base + j * inner]));
  mx = blockMax(mx);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    sum += exp((double)toF(x[base + j * inner]) - mx);
  sum = blockSum(sum);
  double lse = ::log(sum);
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    double z = (double)toF(x[base + j * inner]) - mx;
    y[base + j * inner] = fromF<T>((float)(log ? z - lse : exp(z) / sum));
  }
}

/// Where each row (all dimensions but the last) of a broadcast bias starts,
/// and its stride along the row (0 or 1).
struct BiasRows {
  int rank = 0;
  int64_t shape[kMaxRank] = {}, stride[kMaxRank] = {};
  int64_t step = 0;
};

/// Where row |row| of the input starts in the broadcast bias.
__device__ int64_t biasRowOffset(const BiasRows &rows, int64_t row) {
  int64_t offset = 0;
  for (int64_t d = rows.rank - 2, rest = row; d >= 0; --d) {
    offset += (rest % rows.shape[d]) * rows.stride[d];
    rest /= rows.shape[d];
  }
  return offset;
}

/// bias_softmax: one block per row; softmax(x + bias) with the CPU's
/// arithmetic (float sums of x and bias, double exp and sum), NaN -> 0 when
/// asked (PyTorch's attention guard).
template <typename T>
__global__ void biasSoftmaxKernel(const T *x, const T *bias, T *y, int64_t dim, BiasRows rows,
                                  bool nanToZero) {
  int64_t row = blockIdx.x;
  const T *xr = x + row * dim, *br = bias + biasRowOffset(rows, row);
  T *yr = y + row * dim;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    mx = fmaxf(mx, toF(xr[j]) + toF(br[j * rows.step]));
  mx = blockMax(mx);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    sum += exp((double)(toF(xr[j]) + toF(br[j * rows.step])) - mx);
  sum = blockSum(sum);
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    float p = (float)(exp((double)(toF(xr[j]) + toF(br[j * rows.step])) - mx) / sum);
    yr[j] = fromF<T>(nanToZero && isnan(p) ? 0.0f : p);
  }
}

/// bias_softmax for rows of up to kRowThreads * kPer elements: the row is
/// read once into registers, exp in float (expf), the sum of the row in
/// double; the same values as biasSoftmaxKernel up to float rounding of exp.
/// Reads the scores once and writes the probabilities once (the kernel is
/// bandwidth-bound: attention's [B, H, S, S] scores).
template <typename T, int kPer>
__global__ void biasSoftmaxRowKernel(const T *x, const T *bias, T *y, int64_t dim, BiasRows rows,
                                     bool nanToZero) {
  int64_t row = blockIdx.x;
  const T *xr = x + row * dim, *br = bias + biasRowOffset(rows, row);
  T *yr = y + row * dim;
  float z[kPer];
  float mx = -INFINITY;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    int64_t j = threadIdx.x + (int64_t)e * blockDim.x;
    z[e] = j < dim ? toF(xr[j]) + toF(br[j * rows.step]) : -INFINITY;
    mx = fmaxf(mx, z[e]);
  }
  mx = blockMax(mx);
  float partial = 0;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    int64_t j = threadIdx.x + (int64_t)e * blockDim.x;
    z[e] = j < dim ? expf(z[e] - mx) : 0.0f;
    partial += z[e];
  }
  float sum = (float)blockSum(partial);
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    int64_t j = threadIdx.x + (int64_t)e * blockDim.x;
    if (j < dim) {
      float p = z[e] / sum;
      yr[j] = fromF<T>(nanToZero && isnan(p) ? 0.0f : p);
    }
  }
}

template <typename T>
__global__ void softmaxGradKernel(const T *y, const T *g, T *dx, int64_t dim, int64_t inner,
                                  bool log) {
  int64_t base = rowBase(blockIdx.x, dim, inner);
  double dot = 0;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    int64_t k = base + j * inner;
    dot += log ? (double)toF(g[k]) : (double)toF(g[k]) * toF(y[k]);
  }
  dot = blockSum(dot);
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    int64_t k = base + j * inner;
    double gk = toF(g[k]), yk = toF(y[k]);
    dx[k] = fromF<T>((float)(log ? gk - exp(yk) * dot : yk * (gk - dot)));
  }
}

/// One block's row of a layer_norm (mean and 1/std) or rms_norm (mean 0 and
/// 1/rms); the forward and the backward both use it so they agree bit for bit.
template <typename T>
__device__ void rowMeanRstd(const T *xr, int64_t cols, double eps, bool rms, double &mean,
                            double &rstd) {
  mean = 0;
  if (!rms) {
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      mean += toF(xr[j]);
    mean = blockSum(mean) / cols;
  }
  double var = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double d = toF(xr[j]) - mean;
    var += d * d;
  }
  var = blockSum(var) / cols;
  rstd = 1.0 / sqrt(var + eps);
}

/// Threads per row of a norm kernel: a warp per 256 elements, 1 to 8 warps.
inline unsigned normThreads(int64_t cols) {
  return (unsigned)std::min<int64_t>(kRowThreads, std::max<int64_t>(32, (cols + 255) / 256 * 32));
}

/// layer_norm / rms_norm over the trailing `cols` elements of each row.
template <typename T>
__global__ void normKernel(const T *x, const T *w, const T *bias, T *y, int64_t cols, double eps,
                           bool rms) {
  const T *xr = x + blockIdx.x * cols;
  T *yr = y + blockIdx.x * cols;
  double mean, rstd;
  rowMeanRstd(xr, cols, eps, rms, mean, rstd);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double v = (toF(xr[j]) - mean) * rstd * toF(w[j]);
    yr[j] = fromF<T>((float)(bias ? v + toF(bias[j]) : v));
  }
}

//--- A warp per row (rows of at most 32 x kWarpRowMax elements) ---------===//
// The row stays in registers between its passes and the reductions are warp
// shuffles; with a block per row, GPT-2's 768-wide rows spent their time in
// __syncthreads of four block reductions. Same double accumulation.

constexpr int kWarpRowMax =
    32; // elements per lane: rows up to 1024 (wider: a block per row, measured faster on 2048)

/// The per-lane register count N for rows of |cols| (8, 16, 24 or 32 elements a lane).
/// Whether rows take the warp kernels (measured against the block kernels
/// on GPT-2 124M, docs/benchmarks.md); longer rows take the block kernels.
inline bool normWarpRows(int64_t cols) { return cols <= 32 * kWarpRowMax; }
inline int warpRowLanes(int64_t cols) {
  return (int)std::max<int64_t>(8, ((cols + 31) / 32 + 7) / 8 * 8);
}
/// f(std::integral_constant<int, N>) for the N of warpRowLanes(cols).
template <typename F> void withWarpRowLanes(int64_t cols, F f) {
  switch (warpRowLanes(cols)) {
  case 8:
    return f(std::integral_constant<int, 8>{});
  case 16:
    return f(std::integral_constant<int, 16>{});
  case 24:
    return f(std::integral_constant<int, 24>{});
  case 32:
    return f(std::integral_constant<int, 32>{});
  case 40:
    return f(std::integral_constant<int, 40>{});
  case 48:
    return f(std::integral_constant<int, 48>{});
  case 56:
    return f(std::integral_constant<int, 56>{});
  default:
    return f(std::integral_constant<int, 64>{});
  }
}

__device__ __forceinline__ double warpSum(double v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

/// Loads row |xr| (at most 32 N elements) into |xv| (lane's elements lane, lane + 32, ...) and
/// returns its mean (0 for RMSNorm) and rstd.
template <typename T, int N>
__device__ __forceinline__ void warpRowStats(const T *xr, int64_t cols, double eps, bool rms,
                                             float xv[N], double &mean, double &rstd) {
  int lane = threadIdx.x & 31;
  double sum = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    int64_t j = lane + 32 * i;
    xv[i] = j < cols ? toF(xr[j]) : 0.0f;
    sum += xv[i];
  }
  mean = rms ? 0.0 : warpSum(sum) / cols;
  double var = 0;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (lane + 32 * i < cols) {
      double d = xv[i] - mean;
      var += d * d;
    }
  rstd = 1.0 / sqrt(warpSum(var) / cols + eps);
}

template <typename T, int N>
__global__ void normWarpKernel(const T *x, const T *w, const T *bias, T *y, int64_t rows,
                               int64_t cols, double eps, bool rms) {
  int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows)
    return;
  int lane = threadIdx.x & 31;
  float xv[N];
  double mean, rstd;
  warpRowStats<T, N>(x + r * cols, cols, eps, rms, xv, mean, rstd);
  T *yr = y + r * cols;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    int64_t j = lane + 32 * i;
    if (j < cols) {
      double v = (xv[i] - mean) * rstd * toF(w[j]);
      yr[j] = fromF<T>((float)(bias ? v + toF(bias[j]) : v));
    }
  }
}

/// dx, plus the residual gradient where the backward's add was fused in:
/// dx rounded to T first, then the sum rounded, as the add kernel did.
template <typename T> __device__ __forceinline__ T plusResidual(T dx, const T *res, int64_t at) {
  return res ? fromF<T>(toF(dx) + toF(res[at])) : dx;
}

template <typename T, int N>
__global__ void normGradWarpKernel(const T *x, const T *w, const T *g, const T *res, T *dx,
                                   double *stats, int64_t rows, int64_t cols, double eps,
                                   bool rms) {
  int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows)
    return;
  int lane = threadIdx.x & 31;
  float xv[N];
  double mean, rstd;
  warpRowStats<T, N>(x + r * cols, cols, eps, rms, xv, mean, rstd);
  const T *gr = g + r * cols;
  double sumD = 0, sumDX = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    int64_t j = lane + 32 * i;
    if (j < cols) {
      double xhat = (xv[i] - mean) * rstd, dxhat = (double)toF(gr[j]) * toF(w[j]);
      sumD += dxhat;
      sumDX += dxhat * xhat;
    }
  }
  sumD = warpSum(sumD);
  sumDX = warpSum(sumDX);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    int64_t j = lane + 32 * i;
    if (j < cols) {
      double xhat = (xv[i] - mean) * rstd, dxhat = (double)toF(gr[j]) * toF(w[j]);
      double v = rms ? rstd * (dxhat - xhat * sumDX / cols)
                     : rstd * (dxhat - sumD / cols - xhat * sumDX / cols);
      dx[r * cols + j] = plusResidual(fromF<T>((float)v), res, r * cols + j);
    }
  }
  if (lane == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

/// The backward of a row: dx, and each row's mean and rstd for the
/// parameter gradients (a second, deterministic pass over the columns).
template <typename T>
__global__ void normGradRowKernel(const T *x, const T *w, const T *g, const T *res, T *dx,
                                  double *stats, int64_t cols, double eps, bool rms) {
  const T *xr = x + blockIdx.x * cols, *gr = g + blockIdx.x * cols;
  double mean, rstd;
  rowMeanRstd(xr, cols, eps, rms, mean, rstd);
  double sumD = 0, sumDX = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double xhat = (toF(xr[j]) - mean) * rstd, dxhat = (double)toF(gr[j]) * toF(w[j]);
    sumD += dxhat;
    sumDX += dxhat * xhat;
  }
  sumD = blockSum(sumD);
  sumDX = blockSum(sumDX);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double xhat = (toF(xr[j]) - mean) * rstd, dxhat = (double)toF(gr[j]) * toF(w[j]);
    double v = rms ? rstd * (dxhat - xhat * sumDX / cols)
                   : rstd * (dxhat - sumD / cols - xhat * sumDX / cols);
    dx[blockIdx.x * cols + j] = plusResidual(fromF<T>((float)v), res, blockIdx.x * cols + j);
  }
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = rstd;
  }
}

/// The parameter gradients, in two deterministic passes: each thread sums one
/// column over a chunk of rows (adjacent threads, adjacent columns), then a
/// thread per column adds the chunks in order.
template <typename T>
__global__ void normGradParamPartialKernel(const T *x, const T *g, const double *stats,
                                           double *partial, int64_t rows, int64_t cols,
                                           int64_t chunkRows) {
  int64_t chunks = (rows + chunkRows - 1) / chunkRows;
  ZRT_GRID_LOOP(t, chunks * cols) {
    int64_t j = t % cols, chunk = t / cols;
    int64_t begin = chunk * chunkRows, end = min(rows, begin + chunkRows);
    double sw = 0, sb = 0;
    for (int64_t r = begin; r < end; ++r) {
      double xhat = (toF(x[r * cols + j]) - stats[2 * r]) * stats[2 * r + 1];
      double gv = toF(g[r * cols + j]);
      sw += gv * xhat;
      sb += gv;
    }
    partial[2 * t] = sw;
    partial[2 * t + 1] = sb;
  }
}

template <typename T>
__global__ void normGradParamKernel(const double *partial, T *dw, T *db, int64_t chunks,
                                    int64_t cols) {
  ZRT_GRID_LOOP(j, cols) {
    double sw = 0, sb = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      sw += partial[2 * (c * cols + j)];
      sb += partial[2 * (c * cols + j) + 1];
    }
    dw[j] = fromF<T>((float)sw);
    if (db)
      db[j] = fromF<T>((float)sb);
  }
}

//--- Vectorized rows: 16-byte accesses, float element math ----------------===//
// Rows whose length is a multiple of V = 16 / sizeof(T) elements, 16-byte
// aligned: a group of |tpr| threads per row (a warp, or up to 32 warps), each
// holding K vectors of the row in registers between the passes. Element math
// in float; each thread's partial sums (at most 4 V elements) in float, the
// row's in double. The forward and the backward compute the statistics the
// same way, so they agree bit for bit. GPT-2's and Llama's 768- and 2048-wide
// rows spent 3-4x their memory time in the element-load, double-math kernels
// above (rms_norm_grad 4.1 ms/step on Llama 1B, layer_norm_grad 6.0 on GPT-2).

template <typename T> constexpr int kVec = 16 / sizeof(T);

template <typename T> __device__ __forceinline__ void widen(const uint4 &u, float (&f)[kVec<T>]) {
  const T *t = reinterpret_cast<const T *>(&u);
#pragma unroll
  for (int i = 0; i < kVec<T>; ++i)
    f[i] = toF(t[i]);
}
template <typename T> __device__ __forceinline__ void loadVec(const T *p, float (&f)[kVec<T>]) {
  widen<T>(*reinterpret_cast<const uint4 *>(p), f);
}
template <typename T> __device__ __forceinline__ void storeVec(T *p, const float (&f)[kVec<T>]) {
  uint4 u;
  T *t = reinterpret_cast<T *>(&u);
#pragma unroll
  for (int i = 0; i < kVec<T>; ++i)
    t[i] = fromF<T>(f[i]);
  *reinterpret_cast<uint4 *>(p) = u;
}

/// Sums |v| over the |tpr| threads of each row (consecutive threads of the
/// block, tpr a multiple of 32): every thread of the row gets the same total.
/// All the block's threads call it the same number of times.
template <int N> __device__ __forceinline__ void rowGroupSum(double (&v)[N], int tpr) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    for (int o = 16; o > 0; o >>= 1)
      v[i] += __shfl_xor_sync(0xffffffff, v[i], o); // a butterfly: each lane the same bits
  if (tpr == 32)
    return;
  __shared__ double part[N][32];
  int warp = threadIdx.x >> 5, first = (int)(threadIdx.x / tpr) * (tpr >> 5);
  __syncthreads(); // the previous call's reads are done
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int i = 0; i < N; ++i)
      part[i][warp] = v[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    double s = 0;
    for (int w = 0; w < (tpr >> 5); ++w)
      s += part[i][first + w];
    v[i] = s;
  }
}

/// Row |xr|'s vectors t, t + tpr, ... (K of them; past |nv| zeros) widened into
/// |xv|, and the row's mean (0 for rms_norm) and 1/std.
template <typename T, int K>
__device__ __forceinline__ void vecRowStats(const uint4 (&raw)[K], int64_t nv, int64_t cols, int t,
                                            int tpr, double eps, bool rms, float (&xv)[K][kVec<T>],
                                            float &mean, float &rstd) {
  float s = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    widen<T>(raw[k], xv[k]);
#pragma unroll
    for (int i = 0; i < kVec<T>; ++i)
      s += xv[k][i];
  }
  mean = 0;
  if (!rms) {
    double m[1] = {s};
    rowGroupSum(m, tpr);
    mean = (float)(m[0] / cols);
  }
  float q = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (t + k * tpr < nv)
#pragma unroll
      for (int i = 0; i < kVec<T>; ++i) {
        float d = xv[k][i] - mean;
        q += d * d;
      }
  double v[1] = {q};
  rowGroupSum(v, tpr);
  rstd = (float)(1.0 / sqrt(v[0] / cols + eps));
}

/// K vectors of row |p| (vectors t, t + tpr, ...; zeros past |nv|).
template <typename T, int K>
__device__ __forceinline__ void loadRow(const T *p, int64_t nv, int t, int tpr, uint4 (&raw)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k)
    raw[k] = t + k * tpr < nv ? *reinterpret_cast<const uint4 *>(p + (t + k * tpr) * kVec<T>)
                              : make_uint4(0, 0, 0, 0);
}

template <typename T, int K>
__global__ void normVecKernel(const T *x, const T *w, const T *bias, T *y, int64_t rows,
                              int64_t cols, int tpr, double eps, bool rms) {
  constexpr int V = kVec<T>;
  int64_t r = (int64_t)blockIdx.x * (blockDim.x / tpr) + threadIdx.x / tpr;
  int t = (int)(threadIdx.x % tpr);
  int64_t nv = r < rows ? cols / V : 0; // a block's rows past the end load nothing
  uint4 raw[K];
  loadRow<T, K>(x + r * cols, nv, t, tpr, raw);
  float xv[K][V], mean, rstd;
  vecRowStats<T, K>(raw, nv, cols, t, tpr, eps, rms, xv, mean, rstd);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int64_t c = t + k * tpr;
    if (c >= nv)
      continue;
    float wv[V], bv[V] = {};
    loadVec(w + c * V, wv);
    if (bias)
      loadVec(bias + c * V, bv);
#pragma unroll
    for (int i = 0; i < V; ++i)
      xv[k][i] = (xv[k][i] - mean) * rstd * wv[i] + bv[i];
    storeVec(y + r * cols + c * V, xv[k]);
  }
}

/// The backward of rows r = b, b + B, ... (block b of B, |blockDim.x|
/// threads to a row): dx of each row (plus the residual gradient where the
/// backward's add was fused in: dx rounded to T first, as the add kernel read
/// it), and the block's partial sums of the parameter gradients over its
/// rows, in their order: partW[b][column] = sum g xhat, partB (layer_norm)
/// sum g. x and g are read once: a second kernel over the rows for the
/// parameter sums read them again (rms_norm_grad 1.75 ms a step on Llama 1B,
/// half the memory rate). B is a function of the rows only, so the sums'
/// order and bits do not depend on the GPU. At most 64 registers a thread
/// (__launch_bounds__): 1024-thread rows launch at all (66 registers did
/// not). The rows ahead: with S > 0 stages, S - 1 rows' x, g and the
/// residual are in flight into shared memory (cp.async; each thread copies
/// and reads back only its own vectors, so no barrier guards the ring),
/// else the next row's in registers. At one row ahead and one block a SM
/// the kernel reached 24% of DRAM's rate in the Llama 3 8B step (113 us a
/// call, 45 us at the copy rate; ncu), at two blocks a SM 28% (95 us).
template <typename T, int K, bool Rms, int S>
__global__ void __launch_bounds__(1024)
    normGradVecKernel(const T *x, const T *w, const T *g, const T *res, T *dx, float *partW,
                      float *partB, int64_t rows, int64_t cols, double eps) {
  constexpr int V = kVec<T>;
  int tpr = (int)blockDim.x, t = (int)threadIdx.x;
  int64_t nv = cols / V, stride = gridDim.x;
  float sw[K][V] = {}, sb[Rms ? 1 : K][V] = {};
  int64_t r = blockIdx.x;
  // The row as loaded (16-bit vectors), widened where each pass uses it
  // rather than kept as float copies beside the next row's loads and the
  // partial sums (fewer registers, more threads resident).
  uint4 raw[K], graw[K], rraw[K], next[S ? 1 : K], gnext[S ? 1 : K], rnext[S ? 1 : K];
  auto load = [&](int64_t row, uint4(&xr)[K], uint4(&gr)[K], uint4(&rr)[K]) {
    int64_t n = row < rows ? nv : 0;
    loadRow<T, K>(x + row * cols, n, t, tpr, xr);
    loadRow<T, K>(g + row * cols, n, t, tpr, gr);
    if (res)
      loadRow<T, K>(res + row * cols, n, t, tpr, rr);
  };
  // The ring: stage s holds tensor q's vector k of this thread at
  // ring[((s * 3 + q) * K + k) * tpr + t].
  extern __shared__ uint4 ring[];
  auto slot = [&](int st, int q, int k) { return ring + ((st * 3 + q) * K + k) * tpr + t; };
  auto fetch = [&](int64_t row, int st) {
    int64_t n = row < rows ? nv : 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t c = t + k * tpr;
      bool valid = c < n;
      int64_t at = valid ? row * cols + c * V : 0;
      cpAsync16(slot(st, 0, k), x + at, valid);
      cpAsync16(slot(st, 1, k), g + at, valid);
      if (res)
        cpAsync16(slot(st, 2, k), res + at, valid);
    }
    cpAsyncCommit();
  };
  int stage = 0;
  if constexpr (S > 0) {
#pragma unroll
    for (int st = 0; st < S - 1; ++st)
      fetch(r + st * stride, st);
  } else {
    load(r, raw, graw, rraw);
  }
  for (; r < rows; r += stride) {
    if constexpr (S > 0) {
      cpAsyncWait<S - 2>(); // this row's group (the oldest) has landed
#pragma unroll
      for (int k = 0; k < K; ++k) {
        raw[k] = *slot(stage, 0, k);
        graw[k] = *slot(stage, 1, k);
        rraw[k] = res ? *slot(stage, 2, k) : make_uint4(0, 0, 0, 0);
      }
      // Into the stage the previous row used (read and used up there).
      int previous = stage == 0 ? S - 1 : stage - 1;
      fetch(r + (S - 1) * stride, previous);
      stage = stage + 1 == S ? 0 : stage + 1;
    }
    float mean = 0, rstd, meanD = 0, meanDX;
    if constexpr (Rms) {
      // One reduction a row: sum x^2 (vecRowStats' terms in its order: rstd
      // has the forward's bits) beside sum g w x, whence sum dxhat xhat =
      // rstd sum g w x; two reductions (four barriers) a row made the
      // kernel latency-bound.
      float q = 0, gwx = 0;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (t + k * tpr >= nv)
          continue;
        float xv[V], gv[V], wv[V];
        widen<T>(raw[k], xv);
        widen<T>(graw[k], gv);
        loadVec(w + (t + k * tpr) * V, wv); // from the cache after the first row
#pragma unroll
        for (int i = 0; i < V; ++i) {
          float d = xv[i] - mean;
          q += d * d;
          gwx += gv[i] * wv[i] * xv[i];
        }
      }
      double sums[2] = {q, gwx};
      rowGroupSum(sums, tpr);
      rstd = (float)(1.0 / sqrt(sums[0] / cols + eps));
      meanDX = (float)((double)rstd * sums[1] / cols);
      if constexpr (S == 0)
        load(r + stride, next, gnext, rnext);
    } else {
      {
        float xv[K][V];
        vecRowStats<T, K>(raw, nv, cols, t, tpr, eps, Rms, xv, mean, rstd);
      }
      if constexpr (S == 0)
        load(r + stride, next, gnext, rnext);
      float sumD = 0, sumDX = 0;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (t + k * tpr >= nv)
          continue;
        float xv[V], gv[V], wv[V];
        widen<T>(raw[k], xv);
        widen<T>(graw[k], gv);
        loadVec(w + (t + k * tpr) * V, wv); // from the cache after the first row
#pragma unroll
        for (int i = 0; i < V; ++i) {
          float xhat = (xv[i] - mean) * rstd;
          sw[k][i] += gv[i] * xhat;
          sb[k][i] += gv[i];
          float dxhat = gv[i] * wv[i];
          sumD += dxhat;
          sumDX += dxhat * xhat;
        }
      }
      double sums[2] = {sumD, sumDX};
      rowGroupSum(sums, tpr);
      meanD = (float)(sums[0] / cols), meanDX = (float)(sums[1] / cols);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t c = t + k * tpr;
      if (c >= nv)
        continue;
      float xv[V], gv[V], wv[V], rv[V], o[V];
      widen<T>(raw[k], xv);
      widen<T>(graw[k], gv);
      loadVec(w + c * V, wv);
      if (res)
        widen<T>(rraw[k], rv);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        float xhat = (xv[i] - mean) * rstd, dxhat = gv[i] * wv[i];
        if (Rms)
          sw[k][i] += gv[i] * xhat;
        o[i] = rstd * (dxhat - (Rms ? 0.0f : meanD) - xhat * meanDX);
        if (res) // __fadd_rn: never contracted into an FMA with the product above
          o[i] = __fadd_rn(toF(fromF<T>(o[i])), rv[i]);
      }
      storeVec(dx + r * cols + c * V, o);
    }
    if constexpr (S == 0)
#pragma unroll
      for (int k = 0; k < K; ++k) {
        raw[k] = next[k];
        graw[k] = gnext[k];
        rraw[k] = rnext[k];
      }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int64_t c = t + k * tpr;
    if (c >= nv)
      continue;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      partW[blockIdx.x * cols + c * V + i] = sw[k][i];
      if (!Rms)
        partB[blockIdx.x * cols + c * V + i] = sb[Rms ? 0 : k][i];
    }
  }
}

/// dw (and db) of column j: the blocks' partials in double, a block of
/// 32 x 8 threads per 32 columns (row ty of threads takes blocks ty, ty + 8,
/// ...), the 8 rows added in order.
template <typename T>
__global__ void normParamSumKernel(const float *partW, const float *partB, T *dw, T *db,
                                   int64_t parts, int64_t cols) {
  int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
  double a = 0, b = 0;
  if (j < cols)
    for (int64_t s = threadIdx.y; s < parts; s += 8) {
      a += partW[s * cols + j];
      if (partB)
        b += partB[s * cols + j];
    }
  __shared__ double part[2][8][32];
  part[0][threadIdx.y][threadIdx.x] = a;
  part[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols)
    return;
  for (int y = 1; y < 8; ++y) {
    a += part[0][y][threadIdx.x];
    b += part[1][y][threadIdx.x];
  }
  dw[j] = fromF<T>((float)a);
  if (db)
    db[j] = fromF<T>((float)b);
}

/// The vectorized kernels' split of a row: |tpr| threads (a multiple of 32,
/// at most 1024) of |k| vectors each (1-4). False where the rows are not whole
/// 16-byte vectors, a tensor is not 16-byte aligned, or a row is over 4096
/// vectors (the element kernels above take those).
struct VecRows {
  int tpr = 32, k = 1;
  unsigned rowsPerBlock() const { return (unsigned)std::max(1, 128 / tpr); }
  unsigned blocks(int64_t rows) const {
    return (unsigned)((rows + rowsPerBlock() - 1) / rowsPerBlock());
  }
};
static bool vecRows(int64_t cols, DType dt, std::initializer_list<const void *> tensors,
                    VecRows &v) {
  int64_t vec = 16 / dtypeSize(dt);
  if (cols <= 0 || cols % vec != 0 || cols / vec > 4096)
    return false;
  for (const void *p : tensors)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  int64_t nv = cols / vec;
  v.tpr = (int)std::min<int64_t>(1024, ((nv + 3) / 4 + 31) / 32 * 32);
  v.k = (int)((nv + v.tpr - 1) / v.tpr);
  return true;
}
/// f(std::integral_constant<int, K>) for the row split's K.
template <typename F> void withVecK(const VecRows &v, F f) {
  switch (v.k) {
  case 1:
    return f(std::integral_constant<int, 1>{});
  case 2:
    return f(std::integral_constant<int, 2>{});
  case 3:
    return f(std::integral_constant<int, 3>{});
  default:
    return f(std::integral_constant<int, 4>{});
  }
}

} // namespace

Status launchSoftmaxFamily(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t outer, dim, inner;
  around(c.in[0].shape, c.ints[0], outer, dim, inner);
  int64_t rows = outer * inner;
  if (rows > 0)
    ZRT_FLOAT_DISPATCH(
        c.in[0].dtype, T,
        softmaxKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(
            c.in[0].as<T>(), c.out[0].as<T>(), dim, inner, id == KernelId::LogSoftmax))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchSoftmax(const KernelCall &c, CudaContext &ctx) {
  return launchSoftmaxFamily(KernelId::Softmax, c, ctx);
}
Status launchLogSoftmax(const KernelCall &c, CudaContext &ctx) {
  return launchSoftmaxFamily(KernelId::LogSoftmax, c, ctx);
}

Status launchBiasSoftmax(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  const TensorRef &x = c.in[0], &bias = c.in[1];
  BiasRows rows;
  rows.rank = (int)x.shape.size();
  int64_t lead = rows.rank - (int64_t)bias.shape.size(), dim = x.shape.back();
  for (int64_t d = rows.rank - 1, s = 1; d >= 0; --d) {
    rows.shape[d] = x.shape[d];
    int64_t size = d < lead ? 1 : bias.shape[d - lead];
    rows.stride[d] = size == 1 ? 0 : s;
    s *= size;
  }
  rows.step = rows.stride[rows.rank - 1];
  int64_t count = x.numel() / std::max<int64_t>(dim, 1);
  bool nanToZero = c.ints[0] != 0;
  if (count > 0 && dim > 0)
    ZRT_FLOAT_DISPATCH(x.dtype, T,
                       if (dim <= kRowThreads * 2)
                           biasSoftmaxRowKernel<T, 2><<<(unsigned)count, kRowThreads, 0, st>>>(
                               x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero);
                       else if (dim <= kRowThreads * 4)
                           biasSoftmaxRowKernel<T, 4><<<(unsigned)count, kRowThreads, 0, st>>>(
                               x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero);
                       else if (dim <= kRowThreads * 8)
                           biasSoftmaxRowKernel<T, 8><<<(unsigned)count, kRowThreads, 0, st>>>(
                               x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero);
                       else biasSoftmaxKernel<T><<<(unsigned)count, kRowThreads, 0, st>>>(
                           x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchSoftmaxGradFamily(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t outer, dim, inner;
  around(c.out[0].shape, c.ints[0], outer, dim, inner);
  int64_t rows = outer * inner;
  if (rows > 0)
    ZRT_FLOAT_DISPATCH(c.out[0].dtype, T,
                       softmaxGradKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(
                           c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), dim, inner,
                           id == KernelId::LogSoftmaxGrad))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchSoftmaxGrad(const KernelCall &c, CudaContext &ctx) {
  return launchSoftmaxGradFamily(KernelId::SoftmaxGrad, c, ctx);
}
Status launchLogSoftmaxGrad(const KernelCall &c, CudaContext &ctx) {
  return launchSoftmaxGradFamily(KernelId::LogSoftmaxGrad, c, ctx);
}

/// A norm's rows (the dimensions before |axis|) and columns (from it on).
static void rowsAndCols(const TensorRef &x, int64_t axis, int64_t &rows, int64_t &cols) {
  rows = cols = 1;
  for (int64_t d = 0; d < axis; ++d)
    rows *= x.shape[d];
  for (size_t d = axis; d < x.shape.size(); ++d)
    cols *= x.shape[d];
}

Status launchNorm(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  // A block per row, a thread per ~8 elements (GPT-2's 768: 96 threads):
  // short rows with 256 threads spent their time in the block reductions.
  const TensorRef &x = c.in[0];
  int64_t rows, cols;
  rowsAndCols(x, c.ints[0], rows, cols);
  VecRows vr;
  const void *fwdBias = c.in.size() > 2 ? c.in[2].data : nullptr;
  if (rows > 0 && vecRows(cols, x.dtype, {x.data, c.in[1].data, fwdBias, c.out[0].data}, vr)) {
    ZRT_FLOAT_DISPATCH(x.dtype, T, withVecK(vr, [&](auto k) {
                         normVecKernel<T, decltype(k)::value>
                             <<<vr.blocks(rows), vr.rowsPerBlock() * vr.tpr, 0, st>>>(
                                 x.as<T>(), c.in[1].as<T>(), (const T *)fwdBias, c.out[0].as<T>(),
                                 rows, cols, vr.tpr, c.floats[0], id == KernelId::RmsNorm);
                       }))
  } else if (rows > 0 && normWarpRows(cols)) {
    const void *bias = c.in.size() > 2 ? c.in[2].data : nullptr;
    bool rms = id == KernelId::RmsNorm;
    ZRT_FLOAT_DISPATCH(
        x.dtype, T,
        auto launch =
            [&](auto lanes) {
              normWarpKernel<T, decltype(lanes)::value><<<(unsigned)((rows + 3) / 4), 128, 0, st>>>(
                  x.as<T>(), c.in[1].as<T>(), (const T *)bias, c.out[0].as<T>(), rows, cols,
                  c.floats[0], rms);
            };
        withWarpRowLanes(cols, launch))
  } else if (rows > 0)
    ZRT_FLOAT_DISPATCH(x.dtype, T,
                       normKernel<T><<<(unsigned)rows, normThreads(cols), 0, st>>>(
                           x.as<T>(), c.in[1].as<T>(), c.in.size() > 2 ? c.in[2].as<T>() : nullptr,
                           c.out[0].as<T>(), cols, c.floats[0], id == KernelId::RmsNorm))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchLayerNorm(const KernelCall &c, CudaContext &ctx) {
  return launchNorm(KernelId::LayerNorm, c, ctx);
}
Status launchRmsNorm(const KernelCall &c, CudaContext &ctx) {
  return launchNorm(KernelId::RmsNorm, c, ctx);
}

Status launchNormGrad(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  const TensorRef &x = c.in[0];
  bool rms = id == KernelId::RmsNormGrad;
  int64_t rows, cols;
  rowsAndCols(x, c.ints[0], rows, cols);
  const void *residualData = c.in.size() > 3 ? c.in[3].data : nullptr;
  VecRows vr;
  if (rows > 0 && vecRows(cols, x.dtype,
                          {x.data, c.in[1].data, c.in[2].data, residualData, c.out[0].data}, vr)) {
    // A block per 8 rows (at most 1024 blocks), a thread a vector of the row
    // where rows are up to 1024 vectors (66-90 registers: 2 vectors a thread
    // took 117-159, and fewer threads resident), else 1024 threads a row;
    // then the blocks' partials added in order.
    int64_t nv = cols / (16 / dtypeSize(x.dtype));
    VecRows split;
    split.tpr = (int)std::min<int64_t>(1024, (nv + 31) / 32 * 32);
    split.k = (int)((nv + split.tpr - 1) / split.tpr);
    int64_t parts = std::clamp<int64_t>((rows + 7) / 8, 1, 1024);
    ZRT_RETURN_IF_ERROR(ctx.reserve((rms ? 1 : 2) * parts * cols * sizeof(float)));
    float *partW = (float *)ctx.scratch, *partB = rms ? nullptr : partW + parts * cols;
    // One vector a thread: four stages of rows in shared memory (three
    // rows in flight a block); more: the next row in registers.
    constexpr int kStages = 4;
    size_t ringBytes = (size_t)kStages * 3 * split.tpr * sizeof(uint4);
    cudaError_t attrError = cudaSuccess;
    ZRT_FLOAT_DISPATCH(
        x.dtype, T,
        withVecK(split,
                 [&](auto k) {
                   constexpr int K = decltype(k)::value;
                   auto kernel = rms           ? normGradVecKernel < T, K, true,
                        K == 1 ? kStages : 0 > : normGradVecKernel < T, K, false,
                        K == 1 ? kStages : 0 > ;
                   size_t smem = K == 1 ? ringBytes : 0;
                   if (smem > 0) // with the static reductions' bytes: past 48 KB at 48 KB
                     attrError = cudaFuncSetAttribute(
                         kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
                   kernel<<<(unsigned)parts, split.tpr, smem, st>>>(
                       x.as<T>(), c.in[1].as<T>(), c.in[2].as<T>(), (const T *)residualData,
                       c.out[0].as<T>(), partW, partB, rows, cols, c.floats[0]);
                 });
        normParamSumKernel<T><<<(unsigned)((cols + 31) / 32), dim3(32, 8), 0, st>>>(
            partW, partB, c.out[1].as<T>(), rms ? nullptr : c.out[2].as<T>(), parts, cols))
    ZRT_CUDA(attrError);
    ZRT_CUDA(cudaGetLastError());
    return Status::ok();
  }
  // Rows' statistics, then the column partial sums of chunks of 64 rows
  // (at most 4096 chunks).
  int64_t chunkRows = std::max<int64_t>(64, (rows + 4095) / 4096);
  int64_t chunks = (rows + chunkRows - 1) / chunkRows;
  ZRT_RETURN_IF_ERROR(
      ctx.reserve((std::max<int64_t>(rows, 1) + chunks * cols) * 2 * sizeof(double)));
  double *stats = (double *)ctx.scratch, *partial = stats + 2 * std::max<int64_t>(rows, 1);
  if (rows > 0)
    ZRT_FLOAT_DISPATCH(
        x.dtype, T, const T *residual = c.in.size() > 3 ? c.in[3].as<T>() : nullptr;
        auto launchGrad =
            [&](auto lanes) {
              normGradWarpKernel<T, decltype(lanes)::value>
                  <<<(unsigned)((rows + 3) / 4), 128, 0, st>>>(
                      x.as<T>(), c.in[1].as<T>(), c.in[2].as<T>(), residual, c.out[0].as<T>(),
                      stats, rows, cols, c.floats[0], rms);
            };
        if (normWarpRows(cols)) { withWarpRowLanes(cols, launchGrad); } else normGradRowKernel<T>
        <<<(unsigned)rows, normThreads(cols), 0, st>>>(x.as<T>(), c.in[1].as<T>(), c.in[2].as<T>(),
                                                       residual, c.out[0].as<T>(), stats, cols,
                                                       c.floats[0], rms);
        normGradParamPartialKernel<T><<<blocksFor(chunks * cols), kThreads, 0, st>>>(
            x.as<T>(), c.in[2].as<T>(), stats, partial, rows, cols, chunkRows);
        normGradParamKernel<T><<<blocksFor(cols), kThreads, 0, st>>>(
            partial, c.out[1].as<T>(), rms ? nullptr : c.out[2].as<T>(), chunks, cols))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchLayerNormGrad(const KernelCall &c, CudaContext &ctx) {
  return launchNormGrad(KernelId::LayerNormGrad, c, ctx);
}
Status launchRmsNormGrad(const KernelCall &c, CudaContext &ctx) {
  return launchNormGrad(KernelId::RmsNormGrad, c, ctx);
}

bool supportsSoftmax(const KernelCall &c) { return ranksFit(c); }
bool supportsLogSoftmax(const KernelCall &c) { return ranksFit(c); }
bool supportsBiasSoftmax(const KernelCall &c) { return ranksFit(c); }
bool supportsSoftmaxGrad(const KernelCall &c) { return ranksFit(c); }
bool supportsLogSoftmaxGrad(const KernelCall &c) { return ranksFit(c); }
bool supportsLayerNorm(const KernelCall &c) { return ranksFit(c); }
bool supportsRmsNorm(const KernelCall &c) { return ranksFit(c); }
bool supportsLayerNormGrad(const KernelCall &c) { return ranksFit(c); }
bool supportsRmsNormGrad(const KernelCall &c) { return ranksFit(c); }

} // namespace zrt::cuda
