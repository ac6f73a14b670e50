//===- Moe.cu - CUDA kernels: mixtures of experts ----------------------------===//
//
// moe_route, grouped_matmul and grouped_matmul_rhs_grad (cpu/Moe.cpp has the
// reference and the ABI).
//
// moe_route: a stable radix sort (cub) of the (token, choice) entries by
// expert, token-major (choice-major under a capacity: first choices keep
// their rows first), then the experts' offsets by binary search in the
// sorted keys and one pass placing each entry: the CPU's counting sort,
// entry for entry. An expert id outside [0, experts) is the CPU's error,
// reported through the error slot. A rank of an expert-parallel group
// routes its own experts only: the others' choices sort last.
//
// The grouped GEMMs: bfloat16 and float16 on Hopper take the wgmma kernels
// (cuda/MoeGemm.cu); everything else (float32, other GPUs, operands TMA
// cannot describe) the SIMT kernels below: 64 x 64 tiles, 4 x 4 results a
// thread, float accumulation in a fixed order.
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"
#include "cuda/MoeGemm.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace zrt::cuda {
namespace {

/// Expert parallelism: the rank's experts are first .. first + experts - 1
/// of |all| (first: device data, a zero.local_shard); a choice of another
/// rank's expert sorts past the rank's, as an invalid id does.
struct LocalExperts {
  const void *first = nullptr; // null: every expert is the rank's
  bool firstWide = true;
  int64_t all = 0;
};

template <typename I>
__global__ void routeKeys(const I *ex, int64_t n, int64_t k, int64_t experts, bool choiceMajor,
                          LocalExperts local, int32_t *keys, int32_t *entries, long long *err) {
  const int64_t all = local.first ? local.all : experts;
  const int64_t first = !local.first      ? 0
                        : local.firstWide ? *static_cast<const int64_t *>(local.first)
                                          : *static_cast<const int32_t *>(local.first);
  ZRT_GRID_LOOP(j, n * k) {
    // The entry sorted j-th before the sort: token-major, or choice-major.
    int64_t i = choiceMajor ? (j % n) * k + j / n : j;
    int64_t e = (int64_t)ex[i];
    if (e < 0 || e >= all) {
      recordError(err, 3, e, i / k, all, 0);
      e = experts; // sorted past every expert; the run fails when the program ends
    } else {
      e -= first;
      if (e < 0 || e >= experts)
        e = experts; // another rank's
    }
    keys[j] = (int32_t)e;
    entries[j] = (int32_t)i;
  }
}

/// starts[e] = the first sorted entry of expert e (e = experts: the count
/// of valid entries); the dropless plan's offsets are these.
__global__ void routeStarts(const int32_t *sortedKeys, int64_t total, int64_t experts,
                            int64_t *starts) {
  ZRT_GRID_LOOP(e, experts + 1) {
    int64_t lo = 0, hi = total;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (sortedKeys[mid] < e)
        lo = mid + 1;
      else
        hi = mid;
    }
    starts[e] = lo;
  }
}

/// |rows|: the plan's routed rows (total, or fewer for a rank of an
/// expert-parallel group, whose other ranks' choices sort last and get
/// position |rows|).
__global__ void routePlace(const int32_t *sortedKeys, const int32_t *sortedEntries,
                           const int64_t *starts, int64_t total, int64_t k, int64_t experts,
                           int64_t capacity, int64_t rows, int64_t *tokens, int64_t *positions,
                           long long *err) {
  ZRT_GRID_LOOP(r, total) {
    const int64_t e = sortedKeys[r], i = sortedEntries[r];
    if (capacity == 0) {
      if (e >= experts) { // another rank's expert (or an invalid id, reported)
        positions[i] = rows;
      } else if (r >= rows) { // a token chose one of this rank's experts twice
        recordError(err, 4, starts[experts], i / k, rows, 0);
        positions[i] = rows;
      } else {
        tokens[r] = i / k;
        positions[i] = r;
      }
      continue;
    }
    const int64_t rank = e < experts ? r - starts[e] : capacity;
    if (rank < capacity) {
      tokens[e * capacity + rank] = i / k;
      positions[i] = e * capacity + rank;
    } else {
      positions[i] = experts * capacity; // dropped
    }
  }
}

__global__ void fillI64(int64_t *p, int64_t n, int64_t v, int64_t step) {
  ZRT_GRID_LOOP(i, n) { p[i] = v + i * step; }
}

//===----------------------------------------------------------------------===//
// The SIMT grouped GEMMs
//===----------------------------------------------------------------------===//

constexpr int kSimtTile = 64, kSimtK = 16;

__device__ __forceinline__ int64_t offsetAt(const void *offsets, bool wide, int64_t e) {
  return wide ? static_cast<const int64_t *>(offsets)[e] : static_cast<const int32_t *>(offsets)[e];
}

/// grouped_matmul: block (n tile, row tile t); thread 0 scans the offsets
/// for row tile t's expert (64-row tiles).
template <typename T>
__global__ void __launch_bounds__(256)
    groupedMatmulSimt(const T *x, const T *w, const void *offsets, bool wide, int64_t experts,
                      int64_t m, int64_t k, int64_t n, bool transposeRhs, T *y) {
  __shared__ float xs[kSimtK][kSimtTile + 4], ws[kSimtK][kSimtTile + 4];
  __shared__ int64_t tile[3]; // expert, first row, end
  if (threadIdx.x == 0) {
    int64_t t = blockIdx.y, before = 0;
    tile[0] = -1;
    for (int64_t e = 0; e < experts; ++e) {
      int64_t lo = offsetAt(offsets, wide, e), hi = offsetAt(offsets, wide, e + 1);
      int64_t count = (hi - lo + kSimtTile - 1) / kSimtTile;
      if (t < before + count) {
        tile[0] = e, tile[1] = lo + (t - before) * kSimtTile, tile[2] = hi;
        break;
      }
      before += count;
    }
  }
  __syncthreads();
  const int64_t e = tile[0];
  if (e < 0)
    return;
  const int64_t r0 = tile[1], end = tile[2], n0 = (int64_t)blockIdx.x * kSimtTile;
  const T *we = w + e * k * n;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kSimtK) {
    for (int i = threadIdx.x; i < kSimtK * kSimtTile; i += 256) {
      int kk = i % kSimtK, r = i / kSimtK; // x: rows r, columns kk
      int64_t row = r0 + r, col = k0 + kk;
      xs[kk][r] = row < end && col < k ? toF(x[row * k + col]) : 0.f;
      int c = i % kSimtTile, kw = i / kSimtTile; // w: k index kw, column c
      int64_t nn = n0 + c, kq = k0 + kw;
      ws[kw][c] = nn < n && kq < k ? toF(transposeRhs ? we[nn * k + kq] : we[kq * n + nn]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtK; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += xs[kk][ty * 4 + i] * ws[kk][tx * 4 + j];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    int64_t row = r0 + ty * 4 + i;
    if (row >= end)
      continue;
    for (int j = 0; j < 4; ++j)
      if (n0 + tx * 4 + j < n)
        y[row * n + n0 + tx * 4 + j] = fromF<T>(acc[i][j]);
  }
}

/// out[e] (p x q) = left_e^T right_e: block (q tile, p tile, expert).
template <typename T>
__global__ void __launch_bounds__(256)
    groupedGradSimt(const T *left, const T *right, const void *offsets, bool wide, int64_t p,
                    int64_t q, T *out) {
  __shared__ float ls[kSimtK][kSimtTile + 4], rs[kSimtK][kSimtTile + 4];
  const int64_t e = blockIdx.z, p0 = (int64_t)blockIdx.y * kSimtTile,
                q0 = (int64_t)blockIdx.x * kSimtTile;
  const int64_t r0 = offsetAt(offsets, wide, e), r1 = offsetAt(offsets, wide, e + 1);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int64_t c0 = r0; c0 < r1; c0 += kSimtK) {
    for (int i = threadIdx.x; i < kSimtK * kSimtTile; i += 256) {
      int c = i % kSimtTile, r = i / kSimtTile;
      int64_t row = c0 + r;
      ls[r][c] = row < r1 && p0 + c < p ? toF(left[row * p + p0 + c]) : 0.f;
      rs[r][c] = row < r1 && q0 + c < q ? toF(right[row * q + q0 + c]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtK; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += ls[kk][ty * 4 + i] * rs[kk][tx * 4 + j];
    __syncthreads();
  }
  T *dst = out + e * p * q;
  for (int i = 0; i < 4; ++i) {
    int64_t row = p0 + ty * 4 + i;
    if (row >= p)
      continue;
    for (int j = 0; j < 4; ++j)
      if (q0 + tx * 4 + j < q)
        dst[row * q + q0 + tx * 4 + j] = fromF<T>(acc[i][j]);
  }
}

bool wideOffsets(const TensorRef &t) { return t.dtype == DType::I64; }

/// Rows offsets[experts] .. m of |out| [m, n] = 0: the rows an
/// expert-parallel rank's route leaves unused.
template <typename T>
__global__ void zeroUnusedRows(const void *offsets, bool wide, int64_t experts, int64_t m,
                               int64_t n, T *out) {
  const int64_t used = offsetAt(offsets, wide, experts);
  ZRT_GRID_LOOP(i, (m - used) * n) { out[used * n + i] = fromF<T>(0.0f); }
}

} // namespace

bool supportsMoeRoute(const KernelCall &c) {
  // The sort's 32-bit keys and entries.
  return c.in[0].numel() < INT32_MAX && c.ints[0] < INT32_MAX;
}

Status launchMoeRoute(const KernelCall &c, CudaContext &ctx) {
  const TensorRef &ex = c.in[0];
  const int64_t experts = c.ints[0], capacity = c.ints[1], n = ex.shape[0], k = ex.shape[1];
  const int64_t total = n * k, rows = c.out[0].numel();
  LocalExperts local;
  if (c.in.size() == 2) // expert parallelism (cpu/Moe.cpp's ABI)
    local = {c.in[1].data, c.in[1].dtype == DType::I64, c.ints[2]};
  cudaStream_t st = ctx.stream;
  int64_t *tokens = c.out[0].as<int64_t>(), *positions = c.out[1].as<int64_t>(),
          *offsets = c.out[2].as<int64_t>();
  int bits = 1;
  while ((int64_t(1) << bits) <= experts) // keys 0..experts (experts: an invalid id)
    ++bits;
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  size_t keyBytes = align(std::max<int64_t>(total, 1) * 4), sortBytes = 0;
  ZRT_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, (int32_t *)nullptr,
                                           (int32_t *)nullptr, (int32_t *)nullptr,
                                           (int32_t *)nullptr, (int)total, 0, bits, st));
  size_t startBytes = align((experts + 1) * 8);
  ZRT_RETURN_IF_ERROR(ctx.reserve(4 * keyBytes + align(sortBytes) + startBytes));
  char *s = static_cast<char *>(ctx.scratch);
  int32_t *keys = (int32_t *)s, *sortedKeys = (int32_t *)(s + keyBytes),
          *entries = (int32_t *)(s + 2 * keyBytes), *sortedEntries = (int32_t *)(s + 3 * keyBytes);
  void *sortScratch = s + 4 * keyBytes;
  // Dropless: the starts are the offsets; with a capacity, scratch.
  int64_t *starts = capacity > 0 ? (int64_t *)(s + 4 * keyBytes + align(sortBytes)) : offsets;
  if (total > 0) {
    if (ex.dtype == DType::I64)
      routeKeys<<<blocksFor(total), kThreads, 0, st>>>(
          ex.as<int64_t>(), n, k, experts, capacity > 0, local, keys, entries, ctx.errorInfo);
    else
      routeKeys<<<blocksFor(total), kThreads, 0, st>>>(
          ex.as<int32_t>(), n, k, experts, capacity > 0, local, keys, entries, ctx.errorInfo);
    ZRT_CUDA(cub::DeviceRadixSort::SortPairs(sortScratch, sortBytes, keys, sortedKeys, entries,
                                             sortedEntries, (int)total, 0, bits, st));
  }
  routeStarts<<<blocksFor(experts + 1), kThreads, 0, st>>>(sortedKeys, total, experts, starts);
  if (capacity > 0) {
    fillI64<<<blocksFor(experts * capacity), kThreads, 0, st>>>(tokens, experts * capacity, n, 0);
    fillI64<<<blocksFor(experts + 1), kThreads, 0, st>>>(offsets, experts + 1, 0, capacity);
  } else if (local.first && rows > 0) { // a rank's unused rows hold token n
    fillI64<<<blocksFor(rows), kThreads, 0, st>>>(tokens, rows, n, 0);
  }
  if (total > 0)
    routePlace<<<blocksFor(total), kThreads, 0, st>>>(sortedKeys, sortedEntries, starts, total, k,
                                                      experts, capacity, rows, tokens, positions,
                                                      ctx.errorInfo);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

bool supportsGroupedMatmul(const KernelCall &c) {
  const int64_t rowTiles = (c.in[0].shape[0] + kSimtTile - 1) / kSimtTile;
  return rowTiles + c.in[1].shape[0] < 65535;
}
bool supportsGroupedMatmulRhsGrad(const KernelCall &c) {
  return c.out[0].shape[0] < 65535 && c.out[0].shape[1] / kSimtTile < 65535;
}

Status launchGroupedMatmul(const KernelCall &c, CudaContext &ctx) {
  const TensorRef &x = c.in[0], &w = c.in[1], &off = c.in[2], &y = c.out[0];
  GroupedOperands g;
  g.type = x.dtype, g.rows = x.data, g.rhs = w.data, g.offsets = off.data, g.out = y.data;
  g.offsets64 = wideOffsets(off), g.transposeRhs = c.ints[0] != 0;
  g.m = x.shape[0], g.k = x.shape[1], g.n = y.shape[1], g.experts = w.shape[0];
  if (g.m == 0 || g.n == 0)
    return Status::ok();
  if (c.ints.size() == 2 && c.ints[1]) // expert parallelism: unused rows may follow
    ZRT_FLOAT_DISPATCH(x.dtype, T,
                       zeroUnusedRows<T><<<blocksFor(g.m * g.n), kThreads, 0, ctx.stream>>>(
                           off.data, g.offsets64, g.experts, g.m, g.n, y.as<T>()))
  if (groupedWgmmaFits(g))
    return launchGroupedWgmma(g, ctx.stream);
  dim3 grid((unsigned)((g.n + kSimtTile - 1) / kSimtTile),
            (unsigned)((g.m + kSimtTile - 1) / kSimtTile + g.experts));
  ZRT_FLOAT_DISPATCH(x.dtype, T,
                     groupedMatmulSimt<T><<<grid, 256, 0, ctx.stream>>>(
                         x.as<T>(), w.as<T>(), off.data, g.offsets64, g.experts, g.m, g.k, g.n,
                         g.transposeRhs, y.as<T>()))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status launchGroupedMatmulRhsGrad(const KernelCall &c, CudaContext &ctx) {
  // out [E, K, N] = x_e^T grad_e, or [E, N, K] = grad_e^T x_e (transposed).
  const TensorRef &x = c.in[0], &grad = c.in[1], &off = c.in[2], &o = c.out[0];
  const bool t = c.ints[0] != 0;
  const TensorRef &left = t ? grad : x, &right = t ? x : grad;
  GroupedOperands g;
  g.type = x.dtype, g.rows = left.data, g.rhs = right.data, g.offsets = off.data, g.out = o.data;
  g.offsets64 = wideOffsets(off);
  g.m = x.shape[0], g.k = left.shape[1], g.n = right.shape[1], g.experts = o.shape[0];
  if (o.numel() == 0)
    return Status::ok();
  if (groupedWgmmaFits(g))
    return launchGroupedRhsGradWgmma(g, ctx.stream);
  dim3 grid((unsigned)((g.n + kSimtTile - 1) / kSimtTile),
            (unsigned)((g.k + kSimtTile - 1) / kSimtTile), (unsigned)g.experts);
  ZRT_FLOAT_DISPATCH(x.dtype, T,
                     groupedGradSimt<T><<<grid, 256, 0, ctx.stream>>>(
                         left.as<T>(), right.as<T>(), off.data, g.offsets64, g.k, g.n, o.as<T>()))
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

} // namespace zrt::cuda
