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

template <typename T, typename F>
__device__ __forceinline__ void forRowElements(const T *xr, int64_t n, F f) {
  constexpr int V = 16 / sizeof(T);
  int64_t vectors = reinterpret_cast<uintptr_t>(xr) % 16 == 0 ? n / V : 0;
  const uint4 *xv = reinterpret_cast<const uint4 *>(xr);
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    uint4 raw = xv[k];
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i)
      f(k * V + i, toF(e[i]));
  }
  for (int64_t j = vectors * V + threadIdx.x; j < n; j += blockDim.x)
    f(j, toF(xr[j]));
}

/// A row's maximum and sum of exp(x - max), over the block, in one read of
/// the row: each thread keeps a running maximum and rescales its float sum
/// when the maximum grows (the online softmax); the threads' sums are
/// rescaled to the row's maximum and added in double.
template <typename T>
__device__ void rowMaxExpSum(const T *xr, int64_t classes, float &mx, double &sum) {
  float m = -INFINITY, s = 0;
  forRowElements(xr, classes, [&](int64_t, float v) {
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else {
      s += expf(v - m);
    }
  });
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
/// padding columns [classes, stride) get 0.
/// With |rowLoss|, also each row's term of the loss, as crossEntropyRowKernel
/// computes it (meanLossKernel adds them): the forward folded in.
template <typename T>
__global__ void crossEntropyGradKernel(const T *x, const int64_t *labels, const float *dloss,
                                       const double *countPtr, T *dx, double *rowLoss,
                                       int64_t classes, int64_t stride, int64_t ignore,
                                       long long *err) {
  int64_t r = blockIdx.x, label = labels[r];
  double count = *countPtr;
  T *dr = dx + r * stride;
  if (rowLoss && threadIdx.x == 0 && (label == ignore || label < 0 || label >= classes))
    rowLoss[r] = 0;
  for (int64_t j = classes + threadIdx.x; j < stride; j += blockDim.x)
    dr[j] = fromF<T>(0.0f);
  if (label == ignore || count == 0) {
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      dr[j] = fromF<T>(0.0f);
    return;
  }
  if (label < 0 || label >= classes) {
    if (threadIdx.x == 0)
      recordError(err, 1, label, r, classes, ignore);
    return;
  }
  const T *xr = x + r * stride;
  float labelLogit = toF(xr[label]); // before any thread writes dx (which may be x)
  float mx;
  double sum;
  rowMaxExpSum(xr, classes, mx, sum);
  if (rowLoss && threadIdx.x == 0)
    rowLoss[r] = ::log(sum) + mx - labelLogit;
  float invSum = (float)(1.0 / sum), coef = (float)((double)*dloss / count);
  auto grad = [&](int64_t j, float v) {
    return fromF<T>((expf(v - mx) * invSum - (j == label ? 1.0f : 0.0f)) * coef);
  };
  constexpr int V = 16 / sizeof(T);
  bool aligned =
      reinterpret_cast<uintptr_t>(xr) % 16 == 0 && reinterpret_cast<uintptr_t>(dr) % 16 == 0;
  int64_t vectors = aligned ? classes / V : 0;
  for (int64_t k = threadIdx.x; k < vectors; k += blockDim.x) {
    uint4 raw = reinterpret_cast<const uint4 *>(xr)[k], out;
    const T *e = reinterpret_cast<const T *>(&raw);
    T *o = reinterpret_cast<T *>(&out);
#pragma unroll
    for (int i = 0; i < V; ++i)
      o[i] = grad(k * V + i, toF(e[i]));
    reinterpret_cast<uint4 *>(dr)[k] = out;
  }
  for (int64_t j = vectors * V + threadIdx.x; j < classes; j += blockDim.x)
    dr[j] = grad(j, toF(xr[j]));
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
  if (rows > 0)
    ZRT_FLOAT_DISPATCH(x.dtype, T,
                       crossEntropyGradKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(
                           x.as<T>(), labels.as<int64_t>(), c.in[2].as<float>(), count,
                           c.out[0].as<T>(), rowLoss, classes, stride, c.ints[0], ctx.errorInfo))
  if (withLoss)
    meanLossKernel<<<1, 1024, 0, st>>>(rowLoss, labels.as<int64_t>(), rows, c.ints[0],
                                       c.out[1].as<float>());
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

bool supportsCrossEntropy(const KernelCall &c) { return ranksFit(c); }
bool supportsCrossEntropyGrad(const KernelCall &c) { return ranksFit(c); }

} // namespace zrt::cuda
