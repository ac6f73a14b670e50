//===- Loss.cu - CUDA kernels: loss -----------------------------------------===//
//
// Loss: cross-entropy (one online max/sum pass per row, float exp, 16-byte
// loads) and its gradient; labels out of range are recorded in the
// context's error slot and reported when the program ends.
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"

namespace zrt::cuda {
namespace {

/// f(k, vector k) over the 16-byte vectors k = threadIdx.x, + blockDim.x,
/// ... below |vectors|, in that order, four loads issued before their uses
/// (a load at a time left too few bytes in flight at one block a SM);
/// |LastUse|: loaded with __ldcs (evict first).
template <bool LastUse, typename F>
__device__ __forceinline__ void forVectors(const uint4 *p, int64_t vectors, F f) {
  auto load = [&](int64_t k) { return LastUse ? __ldcs(p + k) : p[k]; };
  int64_t k = threadIdx.x, step = blockDim.x;
  for (; k + 3 * step < vectors; k += 4 * step) {
    uint4 raw[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      raw[u] = load(k + u * step);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      f(k + u * step, raw[u]);
  }
  for (; k < vectors; k += step)
    f(k, load(k));
}

/// A row's maximum and sum of exp(x - max), over the block, in one read of
/// the row: each thread keeps a running maximum and sum (the online
/// softmax), a 16-byte vector at a time: the vector's maximum first, the
/// sum rescaled when it grows, then the vector's exps (exp2Approx) added as
/// a tree: one exp an element and a short dependency chain, where a branch,
/// a rescale and an expf per element made the pass compute-bound. The
/// threads' sums are rescaled to the row's maximum and added in double.
template <typename T>
__device__ void rowMaxExpSum(const T *xr, int64_t classes, float &mx, double &sum) {
  constexpr int V = 16 / sizeof(T);
  float m = -INFINITY, s = 0;
  auto addVector = [&](const float(&f)[V]) {
    float vm = f[0];
#pragma unroll
    for (int i = 1; i < V; ++i)
      vm = fmaxf(vm, f[i]);
    if (vm > m) {
      s *= exp2Approx((m - vm) * kLog2e); // 0 while m is -inf
      m = vm;
    }
    if (m == -INFINITY) // every element so far -inf: nothing to add
      return;
    float e[V];
#pragma unroll
    for (int i = 0; i < V; ++i)
      e[i] = exp2Approx((f[i] - m) * kLog2e);
#pragma unroll
    for (int w = 1; w < V; w *= 2)
#pragma unroll
      for (int i = 0; i + w < V; i += 2 * w)
        e[i] += e[i + w];
    s += e[0];
  };
  int64_t vectors = reinterpret_cast<uintptr_t>(xr) % 16 == 0 ? classes / V : 0;
  forVectors<false>(reinterpret_cast<const uint4 *>(xr), vectors, [&](int64_t, const uint4 &raw) {
    const T *e = reinterpret_cast<const T *>(&raw);
    float f[V];
#pragma unroll
    for (int i = 0; i < V; ++i)
      f[i] = toF(e[i]);
    addVector(f);
  });
  for (int64_t j = vectors * V + threadIdx.x; j < classes; j += blockDim.x) {
    float f[V];
    f[0] = toF(xr[j]);
#pragma unroll
    for (int i = 1; i < V; ++i)
      f[i] = -INFINITY; // exp(-inf - m) adds 0
    addVector(f);
  }
  mx = blockMax(m);
  sum = blockSum(m == -INFINITY ? 0.0 : (double)s * exp((double)m - mx));
}

/// Cross-entropy: per row, log-sum-exp minus the label's logit (0 for
/// ignored rows); then one block adds the rows in order. Rows are |stride|
/// apart, of which the first |classes| are logits (the rest: padding).
template <typename T>
__global__ void crossEntropyRowKernel(const T *x, const int64_t *labels, double *rowLoss,
                                      int64_t classes, int64_t stride, int64_t ignore,
                                      long long *err) {
  int64_t r = blockIdx.x, label = labels[r];
  if (label == ignore) {
    if (threadIdx.x == 0)
      rowLoss[r] = 0;
    return;
  }
  if (label < 0 || label >= classes) {
    if (threadIdx.x == 0) {
      recordError(err, 1, label, r, classes, ignore);
      rowLoss[r] = 0;
    }
    return;
  }
  const T *xr = x + r * stride;
  float mx;
  double sum;
  rowMaxExpSum(xr, classes, mx, sum);
  if (threadIdx.x == 0)
    rowLoss[r] = ::log(sum) + mx - toF(xr[label]);
}

__global__ void meanLossKernel(const double *rowLoss, const int64_t *labels, int64_t rows,
                               int64_t ignore, float *loss) {
  double total = 0;
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += rowLoss[r];
    count += labels[r] != ignore;
  }
  total = blockSum(total);
  double c = blockSum((double)count);
  if (threadIdx.x == 0)
    *loss = c > 0 ? (float)(total / c) : NAN;
}

/// The number of rows whose label is not ignore_index (one block).
__global__ void countLabelsKernel(const int64_t *labels, int64_t rows, int64_t ignore,
                                  double *count) {
  double c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    c += labels[r] != ignore;
  c = blockSum(c);
  if (threadIdx.x == 0)
    *count = c;
}

/// dlogits of the mean cross-entropy: two reads of the row (max and sum,
/// then the gradient) and one write, 16 bytes at a time where aligned;
/// padding columns [classes, stride) get 0. The block's rows are r =
/// blockIdx.x, + gridDim.x, ...; launched with one block of kCeThreads a
/// SM, the rows in flight (132 of Llama's 128256-column rows: 33 MB on an
/// H200) fit in L2, so the second read comes from there: a block a row, 8
/// blocks a SM, read the 1 GB of logits twice from DRAM (2.1 GB, 0.96 ms at
/// Llama 3 8B's shape; ncu). The second read and the write are marked
/// last-use and streaming (__ldcs, __stcs) so that they do not evict the
/// rows still to be read. A row's result depends on nothing but the row:
/// the same bits at any grid.
/// With |rowLoss|, also each row's term of the loss, as crossEntropyRowKernel
/// computes it (meanLossKernel adds them): the forward folded in.
constexpr int kCeThreads = 1024;
template <typename T>
__global__ void __launch_bounds__(kCeThreads)
    crossEntropyGradKernel(const T *x, const int64_t *labels, const float *dloss,
                           const double *countPtr, T *dx, double *rowLoss, int64_t rows,
                           int64_t classes, int64_t stride, int64_t ignore, long long *err) {
  double count = *countPtr;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t label = labels[r];
    T *dr = dx + r * stride;
    if (rowLoss && threadIdx.x == 0 && (label == ignore || label < 0 || label >= classes))
      rowLoss[r] = 0;
    for (int64_t j = classes + threadIdx.x; j < stride; j += blockDim.x)
      dr[j] = fromF<T>(0.0f);
    if (label == ignore || count == 0) {
      for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
        dr[j] = fromF<T>(0.0f);
      continue;
    }
    if (label < 0 || label >= classes) {
      if (threadIdx.x == 0)
        recordError(err, 1, label, r, classes, ignore);
      continue;
    }
    const T *xr = x + r * stride;
    float labelLogit = toF(xr[label]); // before any thread writes dx (which may be x)
    float mx;
    double sum;
    rowMaxExpSum(xr, classes, mx, sum);
    if (rowLoss && threadIdx.x == 0)
      rowLoss[r] = ::log(sum) + mx - labelLogit;
    float invSum = (float)(1.0 / sum), coef = (float)((double)*dloss / count),
          scale = invSum * coef;
    // (exp(v - max) / sum - [j = label]) coef, exp as 2^((v - max) log2(e));
    // in the vectors the label's element is patched after the others.
    auto grad = [&](int64_t j, float v) {
      return fromF<T>((exp2Approx((v - mx) * kLog2e) * invSum - (j == label ? 1.0f : 0.0f)) * coef);
    };
    constexpr int V = 16 / sizeof(T);
    bool aligned =
        reinterpret_cast<uintptr_t>(xr) % 16 == 0 && reinterpret_cast<uintptr_t>(dr) % 16 == 0;
    int64_t vectors = aligned ? classes / V : 0;
    forVectors<true>(
        reinterpret_cast<const uint4 *>(xr), vectors, [&](int64_t k, const uint4 &raw) {
          uint4 out;
          const T *e = reinterpret_cast<const T *>(&raw);
          T *o = reinterpret_cast<T *>(&out);
#pragma unroll
          for (int i = 0; i < V; ++i)
            o[i] = fromF<T>(exp2Approx((toF(e[i]) - mx) * kLog2e) * scale);
          if (k == label / V)
#pragma unroll
            for (int i = 0; i < V; ++i) // static indices: the vectors stay in registers
              if (i == label % V)
                o[i] = grad(label, toF(e[i]));
          __stcs(reinterpret_cast<uint4 *>(dr) + k, out);
        });
    for (int64_t j = vectors * V + threadIdx.x; j < classes; j += blockDim.x)
      dr[j] = grad(j, toF(xr[j]));
  }
}

/// reduce: double accumulation, as the CPU kernel; a thread per output
/// element (reduced elements in input order) when each has few, else
/// reduceBlocksKernel.

} // namespace

Status launchCrossEntropy(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  const TensorRef &x = c.in[0], &labels = c.in[1];
  int64_t stride = x.shape.back(), classes = c.ints.size() > 1 ? c.ints[1] : stride;
  int64_t rows = labels.numel();
  ZRT_RETURN_IF_ERROR(ctx.reserve(std::max<int64_t>(rows, 1) * sizeof(double)));
  double *rowLoss = (double *)ctx.scratch;
  if (rows > 0)
    ZRT_FLOAT_DISPATCH(
        x.dtype, T,
        crossEntropyRowKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(
            x.as<T>(), labels.as<int64_t>(), rowLoss, classes, stride, c.ints[0], ctx.errorInfo))
  meanLossKernel<<<1, 1024, 0, st>>>(rowLoss, labels.as<int64_t>(), rows, c.ints[0],
                                     c.out[0].as<float>());
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchCrossEntropyGrad(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  const TensorRef &x = c.in[0], &labels = c.in[1];
  int64_t stride = x.shape.back(), classes = c.ints.size() > 1 ? c.ints[1] : stride;
  int64_t rows = labels.numel();
  // With the loss as a second output: the rows' terms after the count.
  bool withLoss = c.out.size() == 2;
  ZRT_RETURN_IF_ERROR(
      ctx.reserve((1 + (withLoss ? std::max<int64_t>(rows, 1) : 0)) * sizeof(double)));
  double *count = (double *)ctx.scratch, *rowLoss = withLoss ? count + 1 : nullptr;
  countLabelsKernel<<<1, 1024, 0, st>>>(labels.as<int64_t>(), rows, c.ints[0], count);
  int device = 0, sms = 0;
  ZRT_CUDA(cudaGetDevice(&device));
  ZRT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (rows > 0)
    ZRT_FLOAT_DISPATCH(x.dtype, T,
                       crossEntropyGradKernel<T>
                       <<<(unsigned)std::min<int64_t>(rows, std::max(sms, 1)), kCeThreads, 0, st>>>(
                           x.as<T>(), labels.as<int64_t>(), c.in[2].as<float>(), count,
                           c.out[0].as<T>(), rowLoss, rows, classes, stride, c.ints[0],
                           ctx.errorInfo))
  if (withLoss)
    meanLossKernel<<<1, 1024, 0, st>>>(rowLoss, labels.as<int64_t>(), rows, c.ints[0],
                                       c.out[1].as<float>());
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

bool supportsCrossEntropy(const KernelCall &c) { return ranksFit(c); }
bool supportsCrossEntropyGrad(const KernelCall &c) { return ranksFit(c); }

} // namespace zrt::cuda
