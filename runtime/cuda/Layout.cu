//===- Layout.cu - CUDA kernels: layout -------------------------------------===//
//
// Layout and copies: expand, transpose, slice and its gradient (one
// strided-gather kernel), concat and split as 2-D device copies, gather
// (embedding rows) and its gradient (a deterministic sort of the indices,
// then one row sum per distinct index: no float atomics).
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace zrt::cuda {
namespace {

struct Gather {
  int rank = 0;
  int64_t shape[kMaxRank], step[kMaxRank];
  int64_t base = 0;
};

__global__ void gatherCopyKernel(const char *x, char *y, Gather g, int64_t n, int es) {
  ZRT_GRID_LOOP(i, n) {
    int64_t r = i, off = g.base;
    for (int k = g.rank - 1; k >= 0; --k) {
      off += (r % g.shape[k]) * g.step[k];
      r /= g.shape[k];
    }
    for (int b = 0; b < es; ++b)
      y[i * es + b] = x[off * es + b];
  }
}

/// slice_grad: zero dx, then scatter dy into the slice's positions.
__global__ void scatterCopyKernel(const char *g, char *dx, Gather s, int64_t n, int es) {
  ZRT_GRID_LOOP(i, n) {
    int64_t r = i, off = s.base;
    for (int k = s.rank - 1; k >= 0; --k) {
      off += (r % s.shape[k]) * s.step[k];
      r /= s.shape[k];
    }
    for (int b = 0; b < es; ++b)
      dx[off * es + b] = g[i * es + b];
  }
}

/// concat / split: one piece's rows of `row` bytes at column `at` of the
/// whole's rows of `wholeRow` bytes.
__global__ void stackKernel(char *whole, char *part, int64_t outer, int64_t row, int64_t wholeRow,
                            int64_t at, bool toWhole) {
  ZRT_GRID_LOOP(i, outer * row) {
    int64_t o = i / row, b = i % row;
    char *w = whole + o * wholeRow + at + b;
    char *p = part + i;
    if (toWhole)
      *w = *p;
    else
      *p = *w;
  }
}

/// Up to kSmallPieces small contiguous pieces of a concat / split, a block
/// each, in one launch (by value: 2.5 KB of parameters).
constexpr int kSmallPieces = 128;
struct SmallPieces {
  char *part[kSmallPieces];
  int64_t at[kSmallPieces];
  int32_t bytes[kSmallPieces];
};
__global__ void smallPiecesKernel(char *whole, SmallPieces pieces, bool toWhole) {
  char *p = pieces.part[blockIdx.x], *w = whole + pieces.at[blockIdx.x];
  for (int b = threadIdx.x; b < pieces.bytes[blockIdx.x]; b += blockDim.x)
    if (toWhole)
      w[b] = p[b];
    else
      p[b] = w[b];
}

/// A thread a word W (16 bytes where rows and pointers allow: a byte a
/// thread, with three 64-bit divisions each, took 0.24 ms for Llama 3 8B's
/// 32 MB embedding lookup).
template <typename I, typename W>
__global__ void gatherKernel(const W *x, const I *idx, W *y, int64_t outer, int64_t dim, int64_t n,
                             int64_t inner, long long *err) {
  ZRT_GRID_LOOP(t, outer * n * inner) {
    int64_t b = t % inner, k = (t / inner) % n, o = t / (inner * n);
    int64_t j = idx[k];
    if (j < -dim || j >= dim) {
      if (b == 0)
        recordError(err, 2, j, k, dim, 0);
      continue;
    }
    if (j < 0)
      j += dim;
    y[t] = x[(o * dim + j) * inner + b];
  }
}

// gather_grad, deterministically: the positions sorted by the row they add
// to (a stable radix sort), then each row sums its positions in position
// order in float32, as the CPU kernel does: bit-identical to it, and the same
// bits on every run (atomics would add in a different order each time).

/// The row position k adds to (dim: none, for the padding row or an index out
/// of range, which is reported).
template <typename I>
__global__ void gatherGradKeys(const I *idx, int64_t n, int64_t dim, int64_t padding, int32_t *keys,
                               int32_t *positions, long long *err) {
  ZRT_GRID_LOOP(k, n) {
    int64_t j = idx[k];
    if (j < -dim || j >= dim) {
      recordError(err, 2, j, k, dim, 0);
      j = dim;
    } else {
      if (j < 0)
        j += dim;
      if (j == padding)
        j = dim;
    }
    keys[k] = (int32_t)j;
    positions[k] = (int32_t)k;
  }
}

__device__ int64_t lowerBound(const int32_t *keys, int64_t n, int64_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Block (row j, outer o): dx[o][j][:] = the sum over the sorted positions of
/// row j, in order, of g[o][position][:], in float32 and rounded once (the
/// CPU's float32 widening).
/// With |acc| (gather_grad's addend, not in place: gatherGradAddRuns takes
/// that): dx = acc + the rounded sum, rounded again (the separate add's
/// bits); rows without positions get acc's bits.
template <typename T>
__global__ void gatherGradRows(const int32_t *keys, const int32_t *positions, int64_t n, const T *g,
                               const T *acc, T *dx, int64_t dim, int64_t inner) {
  int64_t j = blockIdx.x, o = blockIdx.y;
  __shared__ int64_t range[2];
  if (threadIdx.x == 0) {
    range[0] = lowerBound(keys, n, j);
    range[1] = lowerBound(keys, n, j + 1);
  }
  __syncthreads();
  int64_t row = (o * dim + j) * inner;
  if (acc && range[0] == range[1]) {
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      dx[row + i] = acc[row + i];
    return;
  }
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    float sum = 0.0f;
    for (int64_t p = range[0]; p < range[1]; ++p)
      sum += toF(g[(o * n + positions[p]) * inner + i]);
    dx[row + i] = acc ? fromF<T>(toF(acc[row + i]) + toF(fromF<T>(sum))) : fromF<T>(sum);
  }
}

/// offsets[j] = the first sorted position of row j (j in [0, dim]): rows'
/// runs as a CSR, a thread a row.
__global__ void gatherGradOffsets(const int32_t *keys, int64_t n, int64_t dim, int32_t *offsets) {
  ZRT_GRID_LOOP(j, dim + 1) { offsets[j] = (int32_t)lowerBound(keys, n, j); }
}

/// gatherGradRows with 16-byte accesses: rows jo = blockIdx.x, +
/// gridDim.x, ... of the outer x dim table (whole aligned vectors of V
/// elements), the block's threads over a row's vectors, each row's run from
/// |offsets|: the same sums in the same order, so the same bits. A block a
/// row (its run found by a binary search behind a barrier, 2-byte stores)
/// wrote Llama 3 8B's 1 GB untied embedding gradient at a third of DRAM's
/// rate (0.65 ms; ncu); a thread a vector of the whole table, with 64-bit
/// divisions for its row and column, at 42% (0.52 ms).
template <typename T>
__global__ void gatherGradRowsVec(const int32_t *offsets, const int32_t *positions, int64_t n,
                                  const T *g, const T *acc, T *dx, int64_t dim, int64_t inner,
                                  int64_t tableRows) {
  constexpr int V = 16 / sizeof(T);
  int64_t vpr = inner / V;
  for (int64_t jo = blockIdx.x; jo < tableRows; jo += gridDim.x) {
    int64_t j = jo % dim, o = jo / dim;
    int32_t p0 = offsets[j], p1 = offsets[j + 1];
    for (int64_t c = threadIdx.x; c < vpr; c += blockDim.x) {
      float sum[V] = {};
      for (int32_t p = p0; p < p1; ++p) {
        uint4 raw = *reinterpret_cast<const uint4 *>(g + (o * n + positions[p]) * inner + c * V);
        const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
        for (int i = 0; i < V; ++i)
          sum[i] += toF(e[i]);
      }
      int64_t at = jo * inner + c * V;
      uint4 out;
      T *w = reinterpret_cast<T *>(&out);
      if (acc) {
        uint4 araw = *reinterpret_cast<const uint4 *>(acc + at);
        const T *a = reinterpret_cast<const T *>(&araw);
#pragma unroll
        for (int i = 0; i < V; ++i)
          w[i] = p0 == p1 ? a[i] : fromF<T>(toF(a[i]) + toF(fromF<T>(sum[i])));
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i)
          w[i] = fromF<T>(sum[i]);
      }
      *reinterpret_cast<uint4 *>(dx + at) = out;
    }
  }
}

/// gather_grad into its addend in place (dx is acc): a block per sorted
/// position; the first position of each row's run adds the run's sum into
/// the row, as gatherGradRows does, and the rest return. n blocks instead of
/// one per row of the table (Llama 3.2 1B: 4096 against 128256).
template <typename T>
__global__ void gatherGradAddRuns(const int32_t *keys, const int32_t *positions, int64_t n,
                                  const T *g, T *dx, int64_t dim, int64_t inner) {
  int64_t b = blockIdx.x, o = blockIdx.y;
  int64_t j = keys[b];
  if (j >= dim || (b > 0 && keys[b - 1] == j)) // padding or out of range, or not the run's first
    return;
  __shared__ int64_t end;
  if (threadIdx.x == 0)
    end = lowerBound(keys, n, j + 1);
  __syncthreads();
  int64_t row = (o * dim + j) * inner;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    float sum = 0.0f;
    for (int64_t p = b; p < end; ++p)
      sum += toF(g[(o * n + positions[p]) * inner + i]);
    dx[row + i] = fromF<T>(toF(dx[row + i]) + toF(fromF<T>(sum)));
  }
}

} // namespace

Status launchExpand(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  int64_t n = c.out[0].numel();
  // As a select with no condition: input 1 is x.
  Broadcast3 d = makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[0].shape});
  selectKernel<<<blocksFor(n), kThreads, 0, st>>>(
      nullptr, c.in[0].data, c.in[0].data, c.out[0].data, d, n, (int)dtypeSize(c.out[0].dtype));
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchStrided(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  bool grad = id == KernelId::SliceGrad;
  const TensorRef &src = grad ? c.out[0] : c.in[0], &small = grad ? c.in[0] : c.out[0];
  std::vector<int64_t> inStrides = contiguousStrides(src.shape);
  Gather g;
  g.rank = (int)small.shape.size();
  for (int d = 0; d < g.rank; ++d) {
    g.shape[d] = small.shape[d];
    if (id == KernelId::Transpose) {
      g.step[d] = inStrides[c.ints[d]];
    } else {
      g.base += c.ints[d] * inStrides[d];
      g.step[d] = c.ints[g.rank + d] * inStrides[d];
    }
  }
  int64_t n = small.numel();
  int es = (int)dtypeSize(small.dtype);
  if (grad) {
    ZRT_CUDA(cudaMemsetAsync(c.out[0].data, 0, c.out[0].numel() * es, st));
    scatterCopyKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].data, c.out[0].data, g, n, es);
  } else {
    gatherCopyKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].data, c.out[0].data, g, n, es);
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchTranspose(const KernelCall &c, CudaContext &ctx) {
  return launchStrided(KernelId::Transpose, c, ctx);
}
Status launchSlice(const KernelCall &c, CudaContext &ctx) {
  return launchStrided(KernelId::Slice, c, ctx);
}
Status launchSliceGrad(const KernelCall &c, CudaContext &ctx) {
  return launchStrided(KernelId::SliceGrad, c, ctx);
}

Status launchStacked(KernelId id, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  bool toWhole = id == KernelId::Concat;
  const TensorRef &whole = toWhole ? c.out[0] : c.in[0];
  const std::vector<TensorRef> &parts = toWhole ? c.in : c.out;
  int64_t axis = c.ints[0], es = dtypeSize(whole.dtype), outer = 1, inner = es;
  for (int64_t d = 0; d < axis; ++d)
    outer *= whole.shape[d];
  for (size_t d = axis + 1; d < whole.shape.size(); ++d)
    inner *= whole.shape[d];
  int64_t wholeRow = whole.shape[axis] * inner, at = 0;
  // Many small contiguous pieces (the per-parameter sums of squares of
  // zcc --optimizer-in-backward's gradient norm: 580 scalars on GPT-2 1.5B,
  // 1.05 ms as device copies): kSmallPieces a launch.
  if (outer == 1 && parts.size() >= 8 &&
      std::all_of(parts.begin(), parts.end(),
                  [&](const TensorRef &p) { return p.shape[axis] * inner <= 4096; })) {
    SmallPieces pieces;
    int count = 0;
    auto flush = [&] {
      if (count)
        smallPiecesKernel<<<count, 128, 0, st>>>(whole.data, pieces, toWhole);
      count = 0;
    };
    for (const TensorRef &p : parts) {
      int64_t row = p.shape[axis] * inner;
      if (row > 0 && whole.data + at != p.data) { // not already in place
        pieces.part[count] = p.data;
        pieces.at[count] = at;
        pieces.bytes[count] = (int32_t)row;
        if (++count == kSmallPieces)
          flush();
      }
      at += row;
    }
    flush();
    ZRT_CUDA(cudaGetLastError());
    return Status::ok();
  }
  // Each part is |outer| rows of |row| bytes, |wholeRow| apart in the
  // whole: one (2-D) device copy, which the driver runs at copy bandwidth.
  constexpr int64_t kMaxPitch = int64_t(1) << 31;
  for (const TensorRef &p : parts) {
    int64_t row = p.shape[axis] * inner;
    char *w = whole.data + at;
    // A part already in place (its producer wrote into the whole: gradients
    // into their bucket, zero-plan-memory) is not copied.
    if (outer * row == 0 || (outer == 1 && w == p.data)) {
    } else if (outer == 1) {
      ZRT_CUDA(cudaMemcpyAsync(toWhole ? w : p.data, toWhole ? p.data : w, row,
                               cudaMemcpyDeviceToDevice, st));
    } else if (wholeRow < kMaxPitch) {
      if (toWhole)
        ZRT_CUDA(
            cudaMemcpy2DAsync(w, wholeRow, p.data, row, row, outer, cudaMemcpyDeviceToDevice, st));
      else
        ZRT_CUDA(
            cudaMemcpy2DAsync(p.data, row, w, wholeRow, row, outer, cudaMemcpyDeviceToDevice, st));
    } else {
      stackKernel<<<blocksFor(outer * row), kThreads, 0, st>>>(whole.data, p.data, outer, row,
                                                               wholeRow, at, toWhole);
    }
    at += row;
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchConcat(const KernelCall &c, CudaContext &ctx) {
  return launchStacked(KernelId::Concat, c, ctx);
}
Status launchSplit(const KernelCall &c, CudaContext &ctx) {
  return launchStacked(KernelId::Split, c, ctx);
}

Status launchGather(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  const TensorRef &x = c.in[0], &idx = c.in[1];
  int64_t axis = c.ints[0], dim = x.shape[axis], outer = 1, inner = dtypeSize(x.dtype);
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t n = idx.numel();
  auto launch = [&](auto word) {
    using W = decltype(word);
    int64_t words = inner / (int64_t)sizeof(W), total = outer * n * words;
    if (total == 0)
      return;
    const W *xw = reinterpret_cast<const W *>(x.data);
    W *yw = reinterpret_cast<W *>(c.out[0].data);
    if (idx.dtype == DType::I64)
      gatherKernel<int64_t, W><<<blocksFor(total), kThreads, 0, st>>>(
          xw, idx.as<int64_t>(), yw, outer, dim, n, words, ctx.errorInfo);
    else
      gatherKernel<int32_t, W><<<blocksFor(total), kThreads, 0, st>>>(
          xw, idx.as<int32_t>(), yw, outer, dim, n, words, ctx.errorInfo);
  };
  auto fits = [&](size_t w) {
    return inner % (int64_t)w == 0 && reinterpret_cast<uintptr_t>(x.data) % w == 0 &&
           reinterpret_cast<uintptr_t>(c.out[0].data) % w == 0;
  };
  if (fits(16))
    launch(uint4{});
  else if (fits(4))
    launch(uint32_t{});
  else
    launch(char{});
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchGatherGrad(const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  // Sorted scatter-add: each row sums its positions in float32 and rounds
  // once (gatherGradRowsVec, or gatherGradRows where rows are not whole
  // aligned 16-byte vectors; a float32 scratch table and a rounding pass
  // over it cost 0.7 ms on Llama 1B's 128256 x 2048 bf16 table).
  const TensorRef &idx = c.in[0], &g = c.in[1], &dx = c.out[0];
  int64_t axis = c.ints[0], dim = dx.shape[axis], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= dx.shape[d];
  for (size_t d = axis + 1; d < dx.shape.size(); ++d)
    inner *= dx.shape[d];
  int64_t padding = c.ints.size() > 1 ? c.ints[1] : INT64_MIN, n = idx.numel();
  if (n >= INT32_MAX || dim >= INT32_MAX || outer > 65535)
    return errorf("gather_grad: ", n, " indices into ", dim, " rows (", outer,
                  " outer) exceed the sort's 32-bit keys or the grid");
  // Scratch: keys, sorted keys, positions, sorted positions, the sort's
  // temporary storage.
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  size_t keyBytes = align(std::max<int64_t>(n, 1) * 4), sortBytes = 0;
  int bits = 1;
  while ((int64_t(1) << bits) <= dim)
    ++bits;
  ZRT_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, (int32_t *)nullptr,
                                           (int32_t *)nullptr, (int32_t *)nullptr,
                                           (int32_t *)nullptr, (int)n, 0, bits, st));
  // Then the rows' offsets into the sorted positions (the vector kernel's).
  size_t offsetBytes = align((size_t)(dim + 1) * 4);
  ZRT_RETURN_IF_ERROR(ctx.reserve(4 * keyBytes + align(sortBytes) + offsetBytes));
  int32_t *keys = (int32_t *)ctx.scratch, *sortedKeys = keys + keyBytes / 4,
          *positions = sortedKeys + keyBytes / 4, *sortedPositions = positions + keyBytes / 4;
  void *sortScratch = (char *)(sortedPositions) + keyBytes;
  int32_t *offsets = (int32_t *)((char *)sortScratch + align(sortBytes));
  if (n > 0) {
    if (idx.dtype == DType::I64)
      gatherGradKeys<int64_t><<<blocksFor(n), kThreads, 0, st>>>(idx.as<int64_t>(), n, dim, padding,
                                                                 keys, positions, ctx.errorInfo);
    else
      gatherGradKeys<int32_t><<<blocksFor(n), kThreads, 0, st>>>(idx.as<int32_t>(), n, dim, padding,
                                                                 keys, positions, ctx.errorInfo);
    ZRT_CUDA(cub::DeviceRadixSort::SortPairs(sortScratch, sortBytes, keys, sortedKeys, positions,
                                             sortedPositions, (int)n, 0, bits, st));
  }
  int threads = (int)std::min<int64_t>(std::max<int64_t>(inner, 32), 256);
  if (c.in.size() == 3 && c.in[2].data == dx.data) { // in place: only the rows indexed
    if (n > 0 && inner > 0)
      ZRT_FLOAT_DISPATCH(g.dtype, T,
                         gatherGradAddRuns<T>
                         <<<dim3((unsigned)n, (unsigned)outer), threads, 0, st>>>(
                             sortedKeys, sortedPositions, n, g.as<T>(), dx.as<T>(), dim, inner))
  } else if (dx.numel() > 0 && inner % (16 / dtypeSize(g.dtype)) == 0 && aligned16(g.data) &&
             aligned16(dx.data) && (c.in.size() < 3 || aligned16(c.in[2].data))) {
    // Blocks of up to 256 threads, as many as a row has vectors; 8 rows a
    // block (a block's setup once for 64 KB of Llama's 4096-wide rows).
    int64_t vpr = inner / (16 / dtypeSize(g.dtype)), tableRows = outer * dim;
    int threadsVec = (int)std::clamp<int64_t>((vpr + 31) / 32 * 32, 32, 256);
    unsigned blocks = (unsigned)std::clamp<int64_t>((tableRows + 7) / 8, 1, 65535 * 4);
    gatherGradOffsets<<<blocksFor(dim + 1), kThreads, 0, st>>>(sortedKeys, n, dim, offsets);
    ZRT_FLOAT_DISPATCH(g.dtype, T,
                       gatherGradRowsVec<T>
                       <<<blocks, threadsVec, 0, st>>>(offsets, sortedPositions, n, g.as<T>(),
                                                       c.in.size() == 3 ? c.in[2].as<T>() : nullptr,
                                                       dx.as<T>(), dim, inner, tableRows))
  } else if (dx.numel() > 0) {
    dim3 grid((unsigned)dim, (unsigned)outer);
    ZRT_FLOAT_DISPATCH(g.dtype, T,
                       gatherGradRows<T><<<grid, threads, 0, st>>>(
                           sortedKeys, sortedPositions, n, g.as<T>(),
                           c.in.size() == 3 ? c.in[2].as<T>() : nullptr, dx.as<T>(), dim, inner))
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

bool supportsExpand(const KernelCall &c) { return ranksFit(c); }
bool supportsTranspose(const KernelCall &c) { return ranksFit(c); }
bool supportsSlice(const KernelCall &c) { return ranksFit(c); }
bool supportsSliceGrad(const KernelCall &c) { return ranksFit(c); }
bool supportsConcat(const KernelCall &c) { return ranksFit(c); }
bool supportsSplit(const KernelCall &c) { return ranksFit(c); }
bool supportsGather(const KernelCall &c) { return ranksFit(c); }
bool supportsGatherGrad(const KernelCall &c) { return ranksFit(c); }

} // namespace zrt::cuda
