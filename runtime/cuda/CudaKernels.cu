//===- CudaKernels.cu - CUDA implementations of plan kernels --------------===//
//
// First set: elementwise arithmetic and unary math with broadcasting (float32,
// bfloat16, float16 storage, float32 math as on the CPU), fill, AdamW, and
// matmul through cuBLASLt (float32 accumulation; TF32 only when allowed).
// Everything else takes the executor's host fallback for now.
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaCheck.h"
#include "cuda/CudaKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace zrt {
namespace {

constexpr int kMaxRank = 8;
constexpr int kThreads = 256;

int blocksFor(int64_t n) {
  return (int)std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 4));
}

/// The output's shape and each input's element strides over it (0 where the
/// input broadcasts), aligned from the right as NumPy does.
struct Broadcast {
  int rank = 0;
  int64_t shape[kMaxRank];
  int64_t stride[2][kMaxRank];
};

bool makeBroadcast(const std::vector<int64_t> &out, const std::vector<std::vector<int64_t>> &ins,
                   Broadcast &b) {
  if (out.size() > (size_t)kMaxRank || ins.size() > 2)
    return false;
  b.rank = (int)out.size();
  for (int d = 0; d < b.rank; ++d)
    b.shape[d] = out[d];
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::vector<int64_t> &in = ins[i];
    int lead = b.rank - (int)in.size();
    int64_t stride = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      int id = d - lead;
      if (id < 0 || in[id] == 1) {
        b.stride[i][d] = 0;
      } else {
        b.stride[i][d] = stride;
      }
      if (id >= 0)
        stride *= in[id];
    }
  }
  return true;
}

template <typename T> __device__ __forceinline__ float toF(T v);
template <> __device__ __forceinline__ float toF<float>(float v) { return v; }
template <> __device__ __forceinline__ float toF<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <> __device__ __forceinline__ float toF<__half>(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T fromF(float v);
template <> __device__ __forceinline__ float fromF<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half fromF<__half>(float v) { return __float2half_rn(v); }

enum class Bin { Add, Sub, Mul, Div, Pow, Max, Min };

template <Bin OP> __device__ __forceinline__ float binary(float x, float y) {
  if constexpr (OP == Bin::Add) return x + y;
  if constexpr (OP == Bin::Sub) return x - y;
  if constexpr (OP == Bin::Mul) return x * y;
  if constexpr (OP == Bin::Div) return x / y;
  if constexpr (OP == Bin::Pow) return powf(x, y);
  if constexpr (OP == Bin::Max) return x < y ? y : x; // std::max
  return y < x ? y : x;                              // std::min
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

enum class Un { Neg, Abs, Exp, Log, Sqrt, Rsqrt, Recip, Tanh, Erf, Sigmoid, Relu, Silu, Cos, Sin,
                Gelu, GeluTanh };

template <Un OP> __device__ __forceinline__ float unary(float x) {
  if constexpr (OP == Un::Neg) return -x;
  if constexpr (OP == Un::Abs) return fabsf(x);
  if constexpr (OP == Un::Exp) return expf(x);
  if constexpr (OP == Un::Log) return logf(x);
  if constexpr (OP == Un::Sqrt) return sqrtf(x);
  if constexpr (OP == Un::Rsqrt) return 1.0f / sqrtf(x);
  if constexpr (OP == Un::Recip) return 1.0f / x;
  if constexpr (OP == Un::Tanh) return tanhf(x);
  if constexpr (OP == Un::Erf) return erff(x);
  if constexpr (OP == Un::Sigmoid) return 1.0f / (1.0f + expf(-x));
  if constexpr (OP == Un::Relu) return x < 0 ? 0.0f : x;
  if constexpr (OP == Un::Silu) return x / (1.0f + expf(-x));
  if constexpr (OP == Un::Cos) return cosf(x);
  if constexpr (OP == Un::Sin) return sinf(x);
  if constexpr (OP == Un::Gelu) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  const float k = 0.7978845608028654f; // GeluTanh
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

template <typename T, Un OP> __global__ void unaryKernel(const T *x, T *y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fromF<T>(unary<OP>(toF(x[i])));
}

__global__ void fillF32(float *y, float v, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = v;
}

/// PyTorch's AdamW (non-capturable) as the CPU kernel does it: scalars in
/// double, tensor math in float32, in the same order. lr and the step count
/// are device scalars.
__global__ void adamwKernel(const float *p, const float *g, const float *m, const float *v,
                            const float *lrp, const float *stepp, const unsigned char *skip,
                            float *po, float *mo, float *vo, double b1, double b2, double eps,
                            double wd, int64_t n) {
  bool skipped = skip && *skip;
  double lr = *lrp, t = *stepp;
  float decay = (float)(1.0 - lr * wd);
  double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
  float stepSize = (float)(lr / bc1), bc2Sqrt = (float)sqrt(bc2);
  float w1 = (float)(1.0 - b1), fb2 = (float)b2, w2 = (float)(1.0 - b2), feps = (float)eps;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x) {
    if (skipped) {
      po[k] = p[k];
      mo[k] = m[k];
      vo[k] = v[k];
      continue;
    }
    float pk = p[k] * decay;
    float mk = m[k] + w1 * (g[k] - m[k]);
    float vk = v[k] * fb2 + w2 * g[k] * g[k];
    float denom = sqrtf(vk) / bc2Sqrt + feps;
    po[k] = pk - stepSize * (mk / denom);
    mo[k] = mk;
    vo[k] = vk;
  }
}

template <typename T, Bin OP> Status launchBinary(const KernelCall &c, CudaContext &ctx) {
  Broadcast d;
  makeBroadcast(c.out[0].shape, {c.in[0].shape, c.in[1].shape}, d);
  int64_t n = c.out[0].numel();
  binaryKernel<T, OP><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), d, n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

template <Bin OP> Status binaryByType(const KernelCall &c, CudaContext &ctx) {
  switch (c.in[0].dtype) {
  case DType::F32: return launchBinary<float, OP>(c, ctx);
  case DType::BF16: return launchBinary<__nv_bfloat16, OP>(c, ctx);
  default: return launchBinary<__half, OP>(c, ctx);
  }
}

template <typename T, Un OP> Status launchUnary(const KernelCall &c, CudaContext &ctx) {
  int64_t n = c.out[0].numel();
  unaryKernel<T, OP><<<blocksFor(n), kThreads, 0, ctx.stream>>>(c.in[0].as<T>(),
                                                                c.out[0].as<T>(), n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

template <Un OP> Status unaryByType(const KernelCall &c, CudaContext &ctx) {
  switch (c.in[0].dtype) {
  case DType::F32: return launchUnary<float, OP>(c, ctx);
  case DType::BF16: return launchUnary<__nv_bfloat16, OP>(c, ctx);
  default: return launchUnary<__half, OP>(c, ctx);
  }
}

bool isFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

cudaDataType_t cudaType(DType t) {
  return t == DType::F32 ? CUDA_R_32F : t == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/// Row-major C = op(A) op(B), batched, through cuBLASLt's column-major view:
/// C^T (n x m) = op(B)^T op(A)^T, where a stored row-major matrix is its own
/// transpose in column-major order. Batch dimensions: equal to the output's,
/// or absent (a shared 2-D operand, batch stride 0).
bool matmulSupported(const KernelCall &c) {
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  std::vector<int64_t> batch(o.shape.begin(), o.shape.end() - 2);
  for (const TensorRef *t : {&a, &b}) {
    std::vector<int64_t> tb(t->shape.begin(), t->shape.end() - 2);
    if (!tb.empty() && tb != batch)
      return false;
  }
  return true;
}

Status launchMatmul(const KernelCall &c, CudaContext &ctx) {
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  bool ta = c.ints[0], tb = c.ints[1];
  size_t ra = a.shape.size(), rb = b.shape.size(), ro = o.shape.size();
  int64_t m = o.shape[ro - 2], n = o.shape[ro - 1], k = a.shape[ra - (ta ? 2 : 1)];
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < ro; ++d)
    batch *= o.shape[d];
  int64_t aRows = a.shape[ra - 2], aCols = a.shape[ra - 1];
  int64_t bRows = b.shape[rb - 2], bCols = b.shape[rb - 1];
  int64_t strideA = ra > 2 ? aRows * aCols : 0, strideB = rb > 2 ? bRows * bCols : 0;
  cudaDataType_t type = cudaType(a.dtype);
  cublasComputeType_t compute =
      a.dtype == DType::F32 && ctx.allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  Status status = Status::ok();
  auto run = [&]() -> Status {
    ZRT_CUBLAS(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
    cublasOperation_t opFirst = tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                      opSecond = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
                                              sizeof opFirst));
    ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
                                              sizeof opSecond));
    // First operand: B's storage viewed column-major (bCols x bRows), second: A's.
    ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&la, type, bCols, bRows, bCols));
    ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&lb, type, aCols, aRows, aCols));
    ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&lc, type, n, m, n));
    int32_t count = (int32_t)batch;
    int64_t strideC = m * n;
    for (auto [layout, stride] : {std::pair{la, strideB}, {lb, strideA}, {lc, strideC}}) {
      ZRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                  &count, sizeof count));
      ZRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    ZRT_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = ctx.workspaceBytes;
    ZRT_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    ZRT_CUBLAS(cublasLtMatmulAlgoGetHeuristic(ctx.lt, op, la, lb, lc, lc, pref, 1, &result,
                                              &found));
    if (!found)
      return errorf("cuBLASLt has no algorithm for ", m, "x", k, " @ ", k, "x", n, " batch ",
                    batch);
    float alpha = 1.0f, beta = 0.0f;
    ZRT_CUBLAS(cublasLtMatmul(ctx.lt, op, &alpha, b.data, la, a.data, lb, &beta, o.data, lc,
                              o.data, lc, &result.algo, ctx.workspace, ctx.workspaceBytes,
                              ctx.stream));
    return Status::ok();
  };
  status = run();
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  return status;
}

Status launchAdamW(const KernelCall &c, CudaContext &ctx) {
  int64_t n = c.in[0].numel();
  const unsigned char *skip = c.in.size() == 7 ? c.in[6].as<unsigned char>() : nullptr;
  adamwKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.in[3].as<float>(),
      c.in[4].as<float>(), c.in[5].as<float>(), skip, c.out[0].as<float>(), c.out[1].as<float>(),
      c.out[2].as<float>(), c.floats[0], c.floats[1], c.floats[2], c.floats[3], n);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

const std::set<std::string> kBinary = {"add", "sub", "mul", "div", "pow", "max", "min"};
const std::set<std::string> kUnary = {"neg", "abs", "exp", "log", "sqrt", "rsqrt",
                                      "reciprocal", "tanh", "erf", "sigmoid", "relu", "silu",
                                      "cos", "sin", "gelu"};

} // namespace

bool hasCudaKernel(const std::string &name, const KernelCall &c) {
  if (kBinary.count(name))
    return isFloat(c.in[0].dtype) && c.out[0].shape.size() <= (size_t)kMaxRank;
  if (kUnary.count(name))
    return isFloat(c.in[0].dtype);
  if (name == "fill")
    return c.out[0].dtype == DType::F32;
  if (name == "adamw")
    return true;
  if (name == "matmul")
    return matmulSupported(c);
  return false;
}

Status launchCudaKernel(const std::string &name, const KernelCall &c, CudaContext &ctx) {
  if (name == "add") return binaryByType<Bin::Add>(c, ctx);
  if (name == "sub") return binaryByType<Bin::Sub>(c, ctx);
  if (name == "mul") return binaryByType<Bin::Mul>(c, ctx);
  if (name == "div") return binaryByType<Bin::Div>(c, ctx);
  if (name == "pow") return binaryByType<Bin::Pow>(c, ctx);
  if (name == "max") return binaryByType<Bin::Max>(c, ctx);
  if (name == "min") return binaryByType<Bin::Min>(c, ctx);
  if (name == "neg") return unaryByType<Un::Neg>(c, ctx);
  if (name == "abs") return unaryByType<Un::Abs>(c, ctx);
  if (name == "exp") return unaryByType<Un::Exp>(c, ctx);
  if (name == "log") return unaryByType<Un::Log>(c, ctx);
  if (name == "sqrt") return unaryByType<Un::Sqrt>(c, ctx);
  if (name == "rsqrt") return unaryByType<Un::Rsqrt>(c, ctx);
  if (name == "reciprocal") return unaryByType<Un::Recip>(c, ctx);
  if (name == "tanh") return unaryByType<Un::Tanh>(c, ctx);
  if (name == "erf") return unaryByType<Un::Erf>(c, ctx);
  if (name == "sigmoid") return unaryByType<Un::Sigmoid>(c, ctx);
  if (name == "relu") return unaryByType<Un::Relu>(c, ctx);
  if (name == "silu") return unaryByType<Un::Silu>(c, ctx);
  if (name == "cos") return unaryByType<Un::Cos>(c, ctx);
  if (name == "sin") return unaryByType<Un::Sin>(c, ctx);
  if (name == "gelu")
    return c.ints[0] == 1 ? unaryByType<Un::GeluTanh>(c, ctx) : unaryByType<Un::Gelu>(c, ctx);
  if (name == "fill") {
    int64_t n = c.out[0].numel();
    fillF32<<<blocksFor(n), kThreads, 0, ctx.stream>>>(c.out[0].as<float>(), (float)c.floats[0],
                                                       n);
    ZRT_CUDA(cudaGetLastError());
    return Status::ok();
  }
  if (name == "adamw")
    return launchAdamW(c, ctx);
  if (name == "matmul")
    return launchMatmul(c, ctx);
  return errorf("no CUDA kernel '", name, "'");
}

} // namespace zrt
