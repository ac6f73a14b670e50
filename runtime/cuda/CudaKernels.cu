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
#include "cuda/DeviceFloat.h"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <cmath>
#include <set>
#include <type_traits>

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

/// Operands of the result's shape, 16-byte aligned (a residual add, a
/// gradient accumulation): 16 bytes per load and store, no index arithmetic.
template <typename T, Bin OP>
__global__ void binarySameKernel(const T *a, const T *b, T *o, int64_t n) {
  constexpr int V = 16 / sizeof(T);
  int64_t vectors = n / V, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < vectors; i += step) {
    uint4 ra = reinterpret_cast<const uint4 *>(a)[i], rb = reinterpret_cast<const uint4 *>(b)[i], ro;
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
                            double wd, int64_t n, bool vectors) {
  bool skipped = skip && *skip;
  double lr = *lrp, t = *stepp;
  float decay = (float)(1.0 - lr * wd);
  double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
  float stepSize = (float)(lr / bc1), bc2Sqrt = (float)sqrt(bc2);
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
    float4 pk = reinterpret_cast<const float4 *>(p)[k], gk = reinterpret_cast<const float4 *>(g)[k],
           mk = reinterpret_cast<const float4 *>(m)[k], vk = reinterpret_cast<const float4 *>(v)[k];
    update(pk.x, gk.x, mk.x, vk.x);
    update(pk.y, gk.y, mk.y, vk.y);
    update(pk.z, gk.z, mk.z, vk.z);
    update(pk.w, gk.w, mk.w, vk.w);
    reinterpret_cast<float4 *>(po)[k] = pk;
    reinterpret_cast<float4 *>(mo)[k] = mk;
    reinterpret_cast<float4 *>(vo)[k] = vk;
  }
  for (int64_t k = nv * 4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += step) {
    float pk = p[k], mk = m[k], vk = v[k];
    update(pk, g[k], mk, vk);
    po[k] = pk;
    mo[k] = mk;
    vo[k] = vk;
  }
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
  bool vectors = reinterpret_cast<uintptr_t>(c.in[0].data) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(c.out[0].data) % 16 == 0;
  unaryKernel<T, OP><<<blocksFor(vectors ? (n + 7) / 8 : n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<T>(), c.out[0].as<T>(), n, vectors);
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
/// or a single matrix shared by the batch (absent or all 1: batch stride 0).
int64_t batchOf(const TensorRef &t) {
  int64_t n = 1;
  for (size_t d = 0; d + 2 < t.shape.size(); ++d)
    n *= t.shape[d];
  return n;
}

bool matmulSupported(const KernelCall &c) {
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  std::vector<int64_t> batch(o.shape.begin(), o.shape.end() - 2);
  for (const TensorRef *t : {&a, &b}) {
    std::vector<int64_t> tb(t->shape.begin(), t->shape.end() - 2);
    if (!tb.empty() && tb != batch && batchOf(*t) != 1)
      return false;
  }
  return true;
}

} // namespace

/// One GEMM shape's cuBLASLt objects (owned).
struct MatmulPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
  // matmul_bias: the bias is added in cuBLASLt's epilogue; matmul_bgrad:
  // the bias gradient is formed by it (BGRADA). Unless no algorithm offers
  // the epilogue for this shape: then the add or reduce kernel after.
  bool epilogue = false;
  ~MatmulPlan() {
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};
struct MatmulPlans {
  // m, n, k, batch, transposes, batch strides, data and compute types.
  using Key = std::array<int64_t, 11>;
  std::map<Key, std::unique_ptr<MatmulPlan>> byShape;
};

namespace {

/// Builds the descriptors of a GEMM and asks the heuristic for its best
/// algorithm (once per shape: launchMatmul caches the result).
enum {
  kNoEpilogue = 0,
  kBiasEpilogue = 1,    // matmul_bias
  kBgradEpilogue = 2,   // matmul_bgrad
  kGeluAuxBias = 3,     // matmul_bias_gelu: GELU(AB + bias), AB + bias kept as aux
  kDgelu = 4,           // matmul_gelu_grad: GELU'(aux) * AB
};

Status buildMatmulPlan(MatmulPlan &p, CudaContext &ctx, cudaDataType_t type,
                       cublasComputeType_t compute, bool ta, bool tb, int64_t m, int64_t n,
                       int64_t k, int64_t aRows, int64_t aCols, int64_t bRows, int64_t bCols,
                       int64_t batch, int64_t strideA, int64_t strideB, int epilogueKind) {
  ZRT_CUBLAS(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
  cublasOperation_t opFirst = tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opSecond = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
                                            sizeof opFirst));
  ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
                                            sizeof opSecond));
  // First operand: B's storage viewed column-major (bCols x bRows), second: A's.
  ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&p.la, type, bCols, bRows, bCols));
  ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&p.lb, type, aCols, aRows, aCols));
  ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&p.lc, type, n, m, n));
  int32_t count = (int32_t)batch;
  int64_t strideC = m * n;
  for (auto [layout, stride] : {std::pair{p.la, strideB}, {p.lb, strideA}, {p.lc, strideC}}) {
    ZRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                &count, sizeof count));
    ZRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  cublasLtMatmulPreference_t pref = nullptr;
  ZRT_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = ctx.workspaceBytes;
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                           sizeof ws);
  if (st == CUBLAS_STATUS_SUCCESS && epilogueKind != kNoEpilogue) {
    // The bias (one value per row of the column-major result, i.e. per
    // column of ours), of the result's type, added before the rounding; or
    // its gradient, the first operand (dy) summed over the GEMM's k.
    cublasLtEpilogue_t epilogue = epilogueKind == kBiasEpilogue    ? CUBLASLT_EPILOGUE_BIAS
                                  : epilogueKind == kBgradEpilogue ? CUBLASLT_EPILOGUE_BGRADA
                                  : epilogueKind == kGeluAuxBias   ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                                   : CUBLASLT_EPILOGUE_DGELU;
    st = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                        sizeof epilogue);
    if (st == CUBLAS_STATUS_SUCCESS && (epilogueKind == kGeluAuxBias || epilogueKind == kDgelu)) {
      // The pre-activation, laid out as the result (n rows column-major).
      int64_t ld = n;
      st = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                          sizeof ld);
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                            &type, sizeof type);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type,
                                          sizeof type);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, p.op, p.la, p.lb, p.lc, p.lc, pref, 1,
                                          &result, &found);
    p.epilogue = st == CUBLAS_STATUS_SUCCESS && found;
    if (!p.epilogue) {
      cublasLtEpilogue_t none = CUBLASLT_EPILOGUE_DEFAULT;
      st = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &none,
                                          sizeof none);
      found = 0;
    }
  }
  if (st == CUBLAS_STATUS_SUCCESS && !found)
    st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, p.op, p.la, p.lb, p.lc, p.lc, pref, 1, &result,
                                        &found);
  cublasLtMatmulPreferenceDestroy(pref);
  ZRT_CUBLAS(st);
  if (!found)
    return errorf("cuBLASLt has no algorithm for ", m, "x", k, " @ ", k, "x", n, " batch ",
                  batch);
  p.algo = result.algo;
  return Status::ok();
}

/// What a GEMM's epilogue does besides the product (launchGemm).
struct Epilogue {
  int kind = kNoEpilogue;
  const TensorRef *vector = nullptr; // the bias (read) or its gradient (written)
  const TensorRef *aux = nullptr;    // the GELU's pre-activation (written / read)
};

/// C = op(A) op(B) through cuBLASLt, with the epilogue |e|: a bias added
/// (matmul_bias), the bias gradient = the column sums of B formed
/// (matmul_bgrad: A = x transposed, B = dy), GELU of AB + bias with AB +
/// bias kept (matmul_bias_gelu: C is the activation, aux the
/// pre-activation), or GELU's derivative at aux applied (matmul_gelu_grad).
/// Where no algorithm offers the epilogue for the shape, or its vectors
/// are not 16-byte aligned (a view into a parameter bucket), the plain GEMM
/// and the separate kernel after it.
Status launchGemm(const TensorRef &a, const TensorRef &b, const TensorRef &o, bool ta, bool tb,
                  Epilogue e, CudaContext &ctx) {
  size_t ra = a.shape.size(), rb = b.shape.size(), ro = o.shape.size();
  int64_t m = o.shape[ro - 2], n = o.shape[ro - 1], k = a.shape[ra - (ta ? 2 : 1)];
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < ro; ++d)
    batch *= o.shape[d];
  int64_t aRows = a.shape[ra - 2], aCols = a.shape[ra - 1];
  int64_t bRows = b.shape[rb - 2], bCols = b.shape[rb - 1];
  int64_t strideA = batchOf(a) > 1 ? aRows * aCols : 0, strideB = batchOf(b) > 1 ? bRows * bCols : 0;
  cudaDataType_t type = cudaType(a.dtype);
  cublasComputeType_t compute =
      a.dtype == DType::F32 && ctx.allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (!ctx.matmulPlans)
    ctx.matmulPlans = std::make_shared<MatmulPlans>();
  // ZRT_BGRAD_EPILOGUE=0 takes the reduce kernel for bias gradients and
  // ZRT_GELU_EPILOGUE=0 the GELU kernels (to compare: the same sums up to
  // float rounding order, the GELU before or after rounding the product).
  static const bool bgradEpilogue = [] {
    const char *v = std::getenv("ZRT_BGRAD_EPILOGUE");
    return !(v && std::string(v) == "0");
  }();
  static const bool geluEpilogue = [] {
    const char *v = std::getenv("ZRT_GELU_EPILOGUE");
    return !(v && std::string(v) == "0");
  }();
  int kind = e.kind;
  if ((kind == kBgradEpilogue && !bgradEpilogue) ||
      ((kind == kGeluAuxBias || kind == kDgelu) && (!geluEpilogue || n % 8 != 0 || batch != 1)) ||
      (e.vector && !aligned16(e.vector->data)) || (e.aux && !aligned16(e.aux->data)))
    kind = kNoEpilogue;
  // (aRows, aCols) follow from m, k and ta; (bRows, bCols) from k, n and tb.
  MatmulPlans::Key key{m,       n,       k,           batch,           ta,  tb,
                       strideA, strideB, (int64_t)type, (int64_t)compute, kind};
  std::unique_ptr<MatmulPlan> &plan = ctx.matmulPlans->byShape[key];
  if (!plan) {
    auto built = std::make_unique<MatmulPlan>();
    ZRT_RETURN_IF_ERROR(buildMatmulPlan(*built, ctx, type, compute, ta, tb, m, n, k, aRows,
                                        aCols, bRows, bCols, batch, strideA, strideB, kind));
    plan = std::move(built);
  }
  if (plan->epilogue) {
    if (e.vector) {
      const void *vecData = e.vector->data;
      ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &vecData, sizeof vecData));
    }
    if (e.aux) {
      const void *auxData = e.aux->data;
      ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(
          plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &auxData, sizeof auxData));
    }
  }
  // Without the GELU epilogue the product goes where the separate kernels
  // read it: the pre-activation (forward) or the result (backward).
  const TensorRef &product = e.kind == kGeluAuxBias && !plan->epilogue ? *e.aux : o;
  float alpha = 1.0f, beta = 0.0f;
  ZRT_CUBLAS(cublasLtMatmul(ctx.lt, plan->op, &alpha, b.data, plan->la, a.data, plan->lb, &beta,
                            product.data, plan->lc, product.data, plan->lc, &plan->algo,
                            ctx.workspace, ctx.workspaceBytes, ctx.stream));
  if (plan->epilogue || e.kind == kNoEpilogue)
    return Status::ok();
  KernelCall after;
  switch (e.kind) {
  case kBiasEpilogue:
    after.in = {o, *e.vector};
    after.out = {o};
    return launchCudaKernel("add", after, ctx);
  case kBgradEpilogue:
    after.in = {b};
    after.out = {*e.vector};
    after.ints = {0, e.vector->shape.size() == 2 ? 1 : 0, 0}; // sum over rows
    return launchCudaKernel("reduce", after, ctx);
  case kGeluAuxBias:
    after.in = {*e.aux, *e.vector};
    after.out = {*e.aux};
    ZRT_RETURN_IF_ERROR(launchCudaKernel("add", after, ctx));
    after.in = {*e.aux};
    after.out = {o};
    after.ints = {1}; // tanh
    return launchCudaKernel("gelu", after, ctx);
  default: // kDgelu
    after.in = {*e.aux, o};
    after.out = {o};
    after.ints = {1};
    return launchCudaKernel("gelu_grad", after, ctx);
  }
}

Status launchMatmul(const KernelCall &c, CudaContext &ctx) {
  Epilogue e;
  if (c.in.size() == 3) { // matmul_bias
    e.kind = kBiasEpilogue;
    e.vector = &c.in[2];
  }
  return launchGemm(c.in[0], c.in[1], c.out[0], c.ints[0], c.ints[1], e, ctx);
}

/// matmul_bgrad: x [R, K], dy [R, N] -> x^T dy [K, N] and dy's column sums.
Status launchMatmulBgrad(const KernelCall &c, CudaContext &ctx) {
  return launchGemm(c.in[0], c.in[1], c.out[0], true, false, {kBgradEpilogue, &c.out[1], nullptr},
                    ctx);
}

/// matmul_bias_gelu: [a, b, bias] -> [gelu_tanh(a b + bias), a b + bias].
Status launchMatmulBiasGelu(const KernelCall &c, CudaContext &ctx) {
  return launchGemm(c.in[0], c.in[1], c.out[0], c.ints[0], c.ints[1],
                    {kGeluAuxBias, &c.in[2], &c.out[1]}, ctx);
}

/// matmul_gelu_grad: [a, b, pre] -> [gelu_tanh'(pre) * (a b)].
Status launchMatmulGeluGrad(const KernelCall &c, CudaContext &ctx) {
  return launchGemm(c.in[0], c.in[1], c.out[0], c.ints[0], c.ints[1], {kDgelu, nullptr, &c.in[2]},
                    ctx);
}

Status launchAdamW(const KernelCall &c, CudaContext &ctx) {
  int64_t n = c.in[0].numel();
  const unsigned char *skip = c.in.size() == 7 ? c.in[6].as<unsigned char>() : nullptr;
  bool vectors = true; // float4 accesses where every array is 16-byte aligned
  for (int i = 0; i < 4; ++i)
    vectors &= reinterpret_cast<uintptr_t>(c.in[i].data) % 16 == 0;
  for (int i = 0; i < 3; ++i)
    vectors &= reinterpret_cast<uintptr_t>(c.out[i].data) % 16 == 0;
  adamwKernel<<<blocksFor(vectors ? (n + 3) / 4 : n), kThreads, 0, ctx.stream>>>(
      c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.in[3].as<float>(),
      c.in[4].as<float>(), c.in[5].as<float>(), skip, c.out[0].as<float>(), c.out[1].as<float>(),
      c.out[2].as<float>(), c.floats[0], c.floats[1], c.floats[2], c.floats[3], n, vectors);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Index mapping: comparisons, selection, casts, layout
//===----------------------------------------------------------------------===//

/// Up to three broadcast inputs.
struct Broadcast3 {
  int rank = 0;
  int64_t shape[kMaxRank];
  int64_t stride[3][kMaxRank];
};

Broadcast3 makeBroadcast3(const std::vector<int64_t> &out,
                          const std::vector<std::vector<int64_t>> &ins) {
  Broadcast3 b;
  b.rank = (int)out.size();
  for (int d = 0; d < b.rank; ++d)
    b.shape[d] = out[d];
  for (size_t i = 0; i < ins.size(); ++i) {
    int lead = b.rank - (int)ins[i].size();
    int64_t stride = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      int id = d - lead;
      b.stride[i][d] = (id < 0 || ins[i][id] == 1) ? 0 : stride;
      if (id >= 0)
        stride *= ins[i][id];
    }
  }
  return b;
}

__device__ __forceinline__ void offsets3(const Broadcast3 &d, int64_t i, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    int64_t c = i % d.shape[k];
    i /= d.shape[k];
    off[0] += c * d.stride[0][k];
    off[1] += c * d.stride[1][k];
    off[2] += c * d.stride[2][k];
  }
}

#define ZRT_GRID_LOOP(i, n)                                                                \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                \
       i += (int64_t)gridDim.x * blockDim.x)

template <typename T> __device__ __forceinline__ double loadD(const T *p, int64_t k) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>)
    return (double)toF(p[k]);
  else
    return (double)p[k];
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
      r = pred == 0 ? x == y : pred == 1 ? x != y : pred == 2 ? x < y : pred == 3 ? x <= y
          : pred == 4 ? x > y : x >= y;
    } else {
      float x = toF(a[off[0]]), y = toF(b[off[1]]);
      r = pred == 0 ? x == y : pred == 1 ? x != y : pred == 2 ? x < y : pred == 3 ? x <= y
          : pred == 4 ? x > y : x >= y;
    }
    o[i] = r;
  }
}

__global__ void logicKernel(const unsigned char *a, const unsigned char *b, unsigned char *o,
                            Broadcast3 d, int64_t n, int op) {
  ZRT_GRID_LOOP(i, n) {
    int64_t off[3];
    offsets3(d, i, off);
    o[i] = op == 0 ? (a[off[0]] && b[off[1]]) : op == 1 ? (a[off[0]] || b[off[1]])
                                                         : !a[off[0]];
  }
}

/// where and expand: bytes moved by element size.
__global__ void selectKernel(const unsigned char *cond, const char *a, const char *b, char *o,
                             Broadcast3 d, int64_t n, int es) {
  ZRT_GRID_LOOP(i, n) {
    int64_t off[3];
    offsets3(d, i, off);
    const char *src = (!cond || cond[off[0]]) ? a + off[1] * es : b + off[2] * es;
    for (int k = 0; k < es; ++k)
      o[i * es + k] = src[k];
  }
}

__device__ double castLoad(const char *x, int dt, int64_t k) {
  switch (dt) {
  case (int)DType::F32: return ((const float *)x)[k];
  case (int)DType::BF16: return __bfloat162float(((const __nv_bfloat16 *)x)[k]);
  case (int)DType::F16: return __half2float(((const __half *)x)[k]);
  case (int)DType::F64: return ((const double *)x)[k];
  case (int)DType::I64: return (double)((const int64_t *)x)[k];
  case (int)DType::I32: return ((const int32_t *)x)[k];
  default: return ((const unsigned char *)x)[k];
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
    case (int)DType::F32: ((float *)y)[k] = (float)v; break;
    case (int)DType::BF16: ((__nv_bfloat16 *)y)[k] = __float2bfloat16_rn((float)v); break;
    case (int)DType::F16: ((__half *)y)[k] = __float2half_rn((float)v); break;
    case (int)DType::F64: ((double *)y)[k] = v; break;
    case (int)DType::I64:
      ((int64_t *)y)[k] = from == (int)DType::I32 ? ((const int32_t *)x)[k] : (int64_t)v;
      break;
    case (int)DType::I32: ((int32_t *)y)[k] = (int32_t)v; break;
    default: ((unsigned char *)y)[k] = v != 0; break;
    }
  }
}

/// transpose and slice: output element i reads input element
/// base + sum(coord[d] * step[d]).
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

__device__ void recordError(long long *info, long long code, long long value, long long position,
                            long long bound, long long ignore) {
  if (atomicCAS((unsigned long long *)&info[0], 0ULL, (unsigned long long)code) == 0) {
    info[1] = value;
    info[2] = position;
    info[3] = bound;
    info[4] = ignore;
  }
}

template <typename I>
__global__ void gatherKernel(const char *x, const I *idx, char *y, int64_t outer, int64_t dim,
                             int64_t n, int64_t innerBytes, long long *err) {
  ZRT_GRID_LOOP(t, outer * n * innerBytes) {
    int64_t b = t % innerBytes, k = (t / innerBytes) % n, o = t / (innerBytes * n);
    int64_t j = idx[k];
    if (j < -dim || j >= dim) {
      if (b == 0)
        recordError(err, 2, j, k, dim, 0);
      continue;
    }
    if (j < 0)
      j += dim;
    y[t] = x[(o * dim + j) * innerBytes + b];
  }
}

template <typename T> __global__ void fromF32Kernel(const float *x, T *y, int64_t n) {
  ZRT_GRID_LOOP(k, n) { y[k] = fromF<T>(x[k]); }
}

// gather_grad, deterministically: the positions sorted by the row they add
// to (a stable radix sort), then each row sums its positions in position
// order in float32, as the CPU kernel does: bit-identical to it, and the same
// bits on every run (atomics would add in a different order each time).

/// The row position k adds to (dim: none, for the padding row or an index out
/// of range, which is reported).
template <typename I>
__global__ void gatherGradKeys(const I *idx, int64_t n, int64_t dim, int64_t padding,
                               int32_t *keys, int32_t *positions, long long *err) {
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
/// row j, in order, of g[o][position][:].
template <typename T>
__global__ void gatherGradRows(const int32_t *keys, const int32_t *positions, int64_t n,
                               const T *g, float *dx, int64_t dim, int64_t inner) {
  int64_t j = blockIdx.x, o = blockIdx.y;
  __shared__ int64_t range[2];
  if (threadIdx.x == 0) {
    range[0] = lowerBound(keys, n, j);
    range[1] = lowerBound(keys, n, j + 1);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    float sum = 0.0f;
    for (int64_t p = range[0]; p < range[1]; ++p)
      sum += toF(g[(o * n + positions[p]) * inner + i]);
    dx[(o * dim + j) * inner + i] = sum;
  }
}

//===----------------------------------------------------------------------===//
// Row kernels: one block per row, float32/double accumulation as the CPU
//===----------------------------------------------------------------------===//

constexpr int kRowThreads = 256;

__device__ double blockSum(double v) {
  __shared__ double shared[32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffff, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < (int)(blockDim.x + 31) / 32; ++w)
      total += shared[w];
    shared[0] = total;
  }
  __syncthreads();
  return shared[0];
}

__device__ float blockMax(float v) {
  __shared__ float shared[32];
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int w = 0; w < (int)(blockDim.x + 31) / 32; ++w)
      m = fmaxf(m, shared[w]);
    shared[0] = m;
  }
  __syncthreads();
  return shared[0];
}

/// Row r of an outer x dim x inner tensor: elements base + j * inner.
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

constexpr int kWarpRowMax = 32; // elements per lane: rows up to 1024

/// The per-lane register count N for rows of |cols| (8, 16, 24 or 32 elements a lane).
/// Whether rows that fit take the warp kernels (ZRT_NORM_WARP=0: the block
/// kernels, for comparison).
inline bool normWarpRows(int64_t cols) {
  static const bool enabled = [] {
    const char *e = std::getenv("ZRT_NORM_WARP");
    return !e || std::string(e) != "0";
  }();
  return enabled && cols <= 32 * kWarpRowMax;
}
inline int warpRowLanes(int64_t cols) { return (int)std::max<int64_t>(8, ((cols + 31) / 32 + 7) / 8 * 8); }

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

template <typename T, int N>
__global__ void normGradWarpKernel(const T *x, const T *w, const T *g, T *dx, double *stats,
                                   int64_t rows, int64_t cols, double eps, bool rms) {
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
      dx[r * cols + j] = fromF<T>((float)v);
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
__global__ void normGradRowKernel(const T *x, const T *w, const T *g, T *dx, double *stats,
                                  int64_t cols, double eps, bool rms) {
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
    dx[blockIdx.x * cols + j] = fromF<T>((float)v);
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

/// Calls f(j, x[j]) for the first |n| elements of a row, each once, spread
/// over the block: 16-byte loads where the row is 16-byte aligned (a padded
/// vocabulary's rows are), element loads for the tail.
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
template <typename T>
__global__ void crossEntropyGradKernel(const T *x, const int64_t *labels, const float *dloss,
                                       const double *countPtr, T *dx, int64_t classes,
                                       int64_t stride, int64_t ignore, long long *err) {
  int64_t r = blockIdx.x, label = labels[r];
  double count = *countPtr;
  T *dr = dx + r * stride;
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
  float mx;
  double sum;
  rowMaxExpSum(xr, classes, mx, sum);
  float invSum = (float)(1.0 / sum), coef = (float)((double)*dloss / count);
  auto grad = [&](int64_t j, float v) {
    return fromF<T>((expf(v - mx) * invSum - (j == label ? 1.0f : 0.0f)) * coef);
  };
  constexpr int V = 16 / sizeof(T);
  bool aligned = reinterpret_cast<uintptr_t>(xr) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(dr) % 16 == 0;
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
struct ReduceMap {
  int rank = 0;
  int64_t keptShape[kMaxRank], keptStride[kMaxRank]; // output coords -> input offset
  int64_t redShape[kMaxRank], redStride[kMaxRank];   // reduced coords -> input offset
  int keptRank = 0, redRank = 0;
};

template <typename T>
__global__ void reduceKernel(const T *x, T *y, ReduceMap m, int64_t n, int64_t count, int kind) {
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
      if (kind <= 1) a += v;
      else if (kind == 2) a = a < v ? v : a;
      else if (kind == 3) a = v < a ? v : a;
      else a *= v;
    }
    y[i] = fromF<T>((float)(kind == 1 ? a / count : a));
  }
}

__device__ __forceinline__ double reduceIdentity(int kind) {
  return kind == 2 ? -INFINITY : kind == 3 ? INFINITY : kind == 4 ? 1.0 : 0.0;
}
/// The CPU kernel's step (a NaN element leaves max/min as they were).
__device__ __forceinline__ double reduceStep(int kind, double a, double v) {
  return kind <= 1 ? a + v : kind == 2 ? (a < v ? v : a) : kind == 3 ? (v < a ? v : a) : a * v;
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
    a = reduceStep(kind, a, toF(col[r * cols]));
  partial[j * gridDim.y + blockIdx.y] = a;
}

/// reduce, many elements per output: block b reduces split (b % splits) of
/// output (b / splits), its threads striding over the split; with one split
/// it writes the output, else a double partial that reduceFinishKernel
/// combines in split order. Deterministic (fixed grid and order).
template <typename T>
__global__ void reduceBlocksKernel(const T *x, T *y, double *partial, ReduceMap m, int64_t count,
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
    a = reduceStep(kind, a, toF(x[off]));
  }
  a = blockReduce(a, kind);
  if (threadIdx.x == 0) {
    if (splits == 1)
      y[i] = fromF<T>((float)(kind == 1 ? a / count : a));
    else
      partial[b] = a;
  }
}

template <typename T>
__global__ void reduceFinishKernel(const double *partial, T *y, int64_t n, int splits,
                                   int64_t count, int kind) {
  ZRT_GRID_LOOP(i, n) {
    double a = reduceIdentity(kind);
    for (int s = 0; s < splits; ++s)
      a = reduceStep(kind, a, partial[i * splits + s]);
    y[i] = fromF<T>((float)(kind == 1 ? a / count : a));
  }
}

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
template <typename T> __global__ void geluGradKernel(const T *x, const T *g, T *dx, int64_t n,
                                                     bool approx, bool vectors) {
  constexpr int V = 16 / sizeof(T);
  int64_t nv = vectors ? n / V : 0, step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += step) {
    uint4 rx = reinterpret_cast<const uint4 *>(x)[i], rg = reinterpret_cast<const uint4 *>(g)[i], ro;
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

#define ZRT_FLOAT_DISPATCH(DT, T, ...)                                                     \
  switch (DT) {                                                                            \
  case DType::F32: { using T = float; __VA_ARGS__; break; }                                \
  case DType::BF16: { using T = __nv_bfloat16; __VA_ARGS__; break; }                       \
  default: { using T = __half; __VA_ARGS__; break; }                                       \
  }

void around(const std::vector<int64_t> &s, int64_t axis, int64_t &outer, int64_t &dim,
            int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= s[d];
  dim = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d)
    inner *= s[d];
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t d = (int64_t)s.size() - 2; d >= 0; --d)
    st[d] = st[d + 1] * s[d + 1];
  return st;
}

template <typename From>
void launchCastGroupTo(DType to, const CastGroup &g, int blocks, cudaStream_t st) {
  switch (to) {
  case DType::F32: castGroupKernel<From, float><<<blocks, kThreads, 0, st>>>(g); break;
  case DType::BF16: castGroupKernel<From, __nv_bfloat16><<<blocks, kThreads, 0, st>>>(g); break;
  default: castGroupKernel<From, __half><<<blocks, kThreads, 0, st>>>(g); break;
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
      case DType::F32: launchCastGroupTo<float>((DType)types.second, g, (int)blocks, ctx.stream); break;
      case DType::BF16: launchCastGroupTo<__nv_bfloat16>((DType)types.second, g, (int)blocks, ctx.stream); break;
      default: launchCastGroupTo<__half>((DType)types.second, g, (int)blocks, ctx.stream); break;
      }
      ZRT_CUDA(cudaGetLastError());
    }
  }
  return Status::ok();
}

Status launchMore(const std::string &name, const KernelCall &c, CudaContext &ctx) {
  cudaStream_t st = ctx.stream;
  if (name == "cmp") {
    int64_t n = c.out[0].numel();
    Broadcast3 d = makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[1].shape});
    int pred = (int)c.ints[0];
    switch (c.in[0].dtype) {
    case DType::F32: cmpKernel<float><<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<float>(), c.in[1].as<float>(), c.out[0].as<unsigned char>(), d, n, pred); break;
    case DType::BF16: cmpKernel<__nv_bfloat16><<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<__nv_bfloat16>(), c.in[1].as<__nv_bfloat16>(), c.out[0].as<unsigned char>(), d, n, pred); break;
    case DType::F16: cmpKernel<__half><<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<__half>(), c.in[1].as<__half>(), c.out[0].as<unsigned char>(), d, n, pred); break;
    default: cmpKernel<int64_t><<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<int64_t>(), c.in[1].as<int64_t>(), c.out[0].as<unsigned char>(), d, n, pred); break;
    }
  } else if (name == "and" || name == "or" || name == "not") {
    int64_t n = c.out[0].numel();
    bool unary = name == "not";
    Broadcast3 d = unary ? makeBroadcast3(c.out[0].shape, {c.in[0].shape})
                         : makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[1].shape});
    logicKernel<<<blocksFor(n), kThreads, 0, st>>>(
        c.in[0].as<unsigned char>(), unary ? nullptr : c.in[1].as<unsigned char>(),
        c.out[0].as<unsigned char>(), d, n, name == "and" ? 0 : name == "or" ? 1 : 2);
  } else if (name == "where") {
    int64_t n = c.out[0].numel();
    Broadcast3 d = makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[1].shape, c.in[2].shape});
    selectKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<unsigned char>(), c.in[1].data,
                                                   c.in[2].data, c.out[0].data, d, n,
                                                   (int)dtypeSize(c.out[0].dtype));
  } else if (name == "expand") {
    int64_t n = c.out[0].numel();
    // As a select with no condition: input 1 is x.
    Broadcast3 d = makeBroadcast3(c.out[0].shape, {c.in[0].shape, c.in[0].shape});
    selectKernel<<<blocksFor(n), kThreads, 0, st>>>(nullptr, c.in[0].data, c.in[0].data,
                                                   c.out[0].data, d, n,
                                                   (int)dtypeSize(c.out[0].dtype));
  } else if (name == "cast_many" || name == "cast_concat") {
    std::vector<std::pair<TensorRef, TensorRef>> pairs;
    int64_t at = 0;
    for (size_t i = 0; i < c.in.size(); ++i) {
      if (name == "cast_many") {
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
  } else if (name == "cast") {
    int64_t n = c.out[0].numel();
    DType from = c.in[0].dtype, to = c.out[0].dtype;
    bool vectors = reinterpret_cast<uintptr_t>(c.in[0].data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(c.out[0].data) % 16 == 0;
    unsigned blocks = blocksFor((n + 7) / 8);
    if (vectors && from == DType::F32 && to == DType::BF16)
      castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<float>(), c.out[0].as<__nv_bfloat16>(), n);
    else if (vectors && from == DType::F32 && to == DType::F16)
      castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<float>(), c.out[0].as<__half>(), n);
    else if (vectors && from == DType::BF16 && to == DType::F32)
      castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<__nv_bfloat16>(), c.out[0].as<float>(), n);
    else if (vectors && from == DType::F16 && to == DType::F32)
      castFloatKernel<<<blocks, kThreads, 0, st>>>(c.in[0].as<__half>(), c.out[0].as<float>(), n);
    else
      castKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].data, c.out[0].data, (int)from,
                                                   (int)to, n);
  } else if (name == "transpose" || name == "slice" || name == "slice_grad") {
    bool grad = name == "slice_grad";
    const TensorRef &src = grad ? c.out[0] : c.in[0], &small = grad ? c.in[0] : c.out[0];
    std::vector<int64_t> inStrides = contiguousStrides(src.shape);
    Gather g;
    g.rank = (int)small.shape.size();
    for (int d = 0; d < g.rank; ++d) {
      g.shape[d] = small.shape[d];
      if (name == "transpose") {
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
  } else if (name == "concat" || name == "split") {
    bool toWhole = name == "concat";
    const TensorRef &whole = toWhole ? c.out[0] : c.in[0];
    const std::vector<TensorRef> &parts = toWhole ? c.in : c.out;
    int64_t axis = c.ints[0], es = dtypeSize(whole.dtype), outer = 1, inner = es;
    for (int64_t d = 0; d < axis; ++d)
      outer *= whole.shape[d];
    for (size_t d = axis + 1; d < whole.shape.size(); ++d)
      inner *= whole.shape[d];
    int64_t wholeRow = whole.shape[axis] * inner, at = 0;
    // Each part is |outer| rows of |row| bytes, |wholeRow| apart in the
    // whole: one (2-D) device copy, which the driver runs at copy bandwidth.
    constexpr int64_t kMaxPitch = int64_t(1) << 31;
    for (const TensorRef &p : parts) {
      int64_t row = p.shape[axis] * inner;
      char *w = whole.data + at;
      if (outer * row == 0) {
      } else if (outer == 1) {
        ZRT_CUDA(cudaMemcpyAsync(toWhole ? w : p.data, toWhole ? p.data : w, row,
                                 cudaMemcpyDeviceToDevice, st));
      } else if (wholeRow < kMaxPitch) {
        if (toWhole)
          ZRT_CUDA(cudaMemcpy2DAsync(w, wholeRow, p.data, row, row, outer, cudaMemcpyDeviceToDevice, st));
        else
          ZRT_CUDA(cudaMemcpy2DAsync(p.data, row, w, wholeRow, row, outer, cudaMemcpyDeviceToDevice, st));
      } else {
        stackKernel<<<blocksFor(outer * row), kThreads, 0, st>>>(whole.data, p.data, outer, row,
                                                                 wholeRow, at, toWhole);
      }
      at += row;
    }
  } else if (name == "gather") {
    const TensorRef &x = c.in[0], &idx = c.in[1];
    int64_t axis = c.ints[0], dim = x.shape[axis], outer = 1, inner = dtypeSize(x.dtype);
    for (int64_t d = 0; d < axis; ++d)
      outer *= x.shape[d];
    for (size_t d = axis + 1; d < x.shape.size(); ++d)
      inner *= x.shape[d];
    int64_t n = idx.numel(), total = outer * n * inner;
    if (total > 0) {
      if (idx.dtype == DType::I64)
        gatherKernel<int64_t><<<blocksFor(total), kThreads, 0, st>>>(x.data, idx.as<int64_t>(), c.out[0].data, outer, dim, n, inner, ctx.errorInfo);
      else
        gatherKernel<int32_t><<<blocksFor(total), kThreads, 0, st>>>(x.data, idx.as<int32_t>(), c.out[0].data, outer, dim, n, inner, ctx.errorInfo);
    }
  } else if (name == "gather_grad") {
    // Sorted scatter-add in float32 (gatherGradRows; into float32 scratch
    // for 16-bit gradients, rounded once at the end, as the CPU's float32
    // widening).
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
    // Scratch: [float32 accumulator] keys, sorted keys, positions, sorted
    // positions, the sort's temporary storage.
    auto align = [](size_t b) { return (b + 255) / 256 * 256; };
    size_t accBytes = dx.dtype == DType::F32 ? 0 : align(std::max<int64_t>(dx.numel(), 1) * 4);
    size_t keyBytes = align(std::max<int64_t>(n, 1) * 4), sortBytes = 0;
    int bits = 1;
    while ((int64_t(1) << bits) <= dim)
      ++bits;
    ZRT_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, (int32_t *)nullptr,
                                             (int32_t *)nullptr, (int32_t *)nullptr,
                                             (int32_t *)nullptr, (int)n, 0, bits, st));
    ZRT_RETURN_IF_ERROR(ctx.reserve(accBytes + 4 * keyBytes + sortBytes));
    char *scratch = (char *)ctx.scratch;
    float *acc = accBytes ? (float *)scratch : dx.as<float>();
    int32_t *keys = (int32_t *)(scratch + accBytes), *sortedKeys = keys + keyBytes / 4,
            *positions = sortedKeys + keyBytes / 4, *sortedPositions = positions + keyBytes / 4;
    void *sortScratch = (char *)(sortedPositions) + keyBytes;
    if (n > 0) {
      if (idx.dtype == DType::I64)
        gatherGradKeys<int64_t><<<blocksFor(n), kThreads, 0, st>>>(idx.as<int64_t>(), n, dim, padding, keys, positions, ctx.errorInfo);
      else
        gatherGradKeys<int32_t><<<blocksFor(n), kThreads, 0, st>>>(idx.as<int32_t>(), n, dim, padding, keys, positions, ctx.errorInfo);
      ZRT_CUDA(cub::DeviceRadixSort::SortPairs(sortScratch, sortBytes, keys, sortedKeys, positions,
                                               sortedPositions, (int)n, 0, bits, st));
    }
    if (dx.numel() > 0) {
      dim3 grid((unsigned)dim, (unsigned)outer);
      int threads = (int)std::min<int64_t>(std::max<int64_t>(inner, 32), 256);
      ZRT_FLOAT_DISPATCH(g.dtype, T,
        gatherGradRows<T><<<grid, threads, 0, st>>>(sortedKeys, sortedPositions, n, g.as<T>(), acc, dim, inner))
    }
    if (dx.dtype == DType::BF16)
      fromF32Kernel<__nv_bfloat16><<<blocksFor(dx.numel()), kThreads, 0, st>>>(acc, dx.as<__nv_bfloat16>(), dx.numel());
    else if (dx.dtype == DType::F16)
      fromF32Kernel<__half><<<blocksFor(dx.numel()), kThreads, 0, st>>>(acc, dx.as<__half>(), dx.numel());
  } else if (name == "softmax" || name == "log_softmax") {
    int64_t outer, dim, inner;
    around(c.in[0].shape, c.ints[0], outer, dim, inner);
    int64_t rows = outer * inner;
    if (rows > 0)
      ZRT_FLOAT_DISPATCH(c.in[0].dtype, T,
        softmaxKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(c.in[0].as<T>(), c.out[0].as<T>(), dim, inner, name == "log_softmax"))
  } else if (name == "bias_softmax") {
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
          biasSoftmaxRowKernel<T, 2><<<(unsigned)count, kRowThreads, 0, st>>>(x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero);
        else if (dim <= kRowThreads * 4)
          biasSoftmaxRowKernel<T, 4><<<(unsigned)count, kRowThreads, 0, st>>>(x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero);
        else if (dim <= kRowThreads * 8)
          biasSoftmaxRowKernel<T, 8><<<(unsigned)count, kRowThreads, 0, st>>>(x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero);
        else
          biasSoftmaxKernel<T><<<(unsigned)count, kRowThreads, 0, st>>>(x.as<T>(), bias.as<T>(), c.out[0].as<T>(), dim, rows, nanToZero))
  } else if (name == "softmax_grad" || name == "log_softmax_grad") {
    int64_t outer, dim, inner;
    around(c.out[0].shape, c.ints[0], outer, dim, inner);
    int64_t rows = outer * inner;
    if (rows > 0)
      ZRT_FLOAT_DISPATCH(c.out[0].dtype, T,
        softmaxGradKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), dim, inner, name == "log_softmax_grad"))
  } else if (name == "layer_norm" || name == "rms_norm") {
    // A block per row, a thread per ~8 elements (GPT-2's 768: 96 threads):
    // short rows with 256 threads spent their time in the block reductions.
    const TensorRef &x = c.in[0];
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < c.ints[0]; ++d)
      rows *= x.shape[d];
    for (size_t d = c.ints[0]; d < x.shape.size(); ++d)
      cols *= x.shape[d];
    if (rows > 0 && normWarpRows(cols)) {
      const void *bias = c.in.size() > 2 ? c.in[2].data : nullptr;
      bool rms = name == "rms_norm";
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        auto launch = [&](auto lanes) {
          normWarpKernel<T, decltype(lanes)::value><<<(unsigned)((rows + 3) / 4), 128, 0, st>>>(x.as<T>(), c.in[1].as<T>(), (const T *)bias, c.out[0].as<T>(), rows, cols, c.floats[0], rms);
        };
        switch (warpRowLanes(cols)) {
        case 8: launch(std::integral_constant<int, 8>{}); break;
        case 16: launch(std::integral_constant<int, 16>{}); break;
        case 24: launch(std::integral_constant<int, 24>{}); break;
        default: launch(std::integral_constant<int, 32>{}); break;
        })
    } else if (rows > 0)
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        normKernel<T><<<(unsigned)rows, normThreads(cols), 0, st>>>(x.as<T>(), c.in[1].as<T>(), c.in.size() > 2 ? c.in[2].as<T>() : nullptr, c.out[0].as<T>(), cols, c.floats[0], name == "rms_norm"))
  } else if (name == "layer_norm_grad" || name == "rms_norm_grad") {
    const TensorRef &x = c.in[0];
    bool rms = name == "rms_norm_grad";
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < c.ints[0]; ++d)
      rows *= x.shape[d];
    for (size_t d = c.ints[0]; d < x.shape.size(); ++d)
      cols *= x.shape[d];
    // Rows' statistics, then the column partial sums of chunks of 64 rows
    // (at most 4096 chunks).
    int64_t chunkRows = std::max<int64_t>(64, (rows + 4095) / 4096);
    int64_t chunks = (rows + chunkRows - 1) / chunkRows;
    ZRT_RETURN_IF_ERROR(
        ctx.reserve((std::max<int64_t>(rows, 1) + chunks * cols) * 2 * sizeof(double)));
    double *stats = (double *)ctx.scratch, *partial = stats + 2 * std::max<int64_t>(rows, 1);
    if (rows > 0)
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        auto launchGrad = [&](auto lanes) {
          normGradWarpKernel<T, decltype(lanes)::value><<<(unsigned)((rows + 3) / 4), 128, 0, st>>>(x.as<T>(), c.in[1].as<T>(), c.in[2].as<T>(), c.out[0].as<T>(), stats, rows, cols, c.floats[0], rms);
        };
        if (normWarpRows(cols)) {
          switch (warpRowLanes(cols)) {
          case 8: launchGrad(std::integral_constant<int, 8>{}); break;
          case 16: launchGrad(std::integral_constant<int, 16>{}); break;
          case 24: launchGrad(std::integral_constant<int, 24>{}); break;
          default: launchGrad(std::integral_constant<int, 32>{}); break;
          }
        } else
          normGradRowKernel<T><<<(unsigned)rows, normThreads(cols), 0, st>>>(x.as<T>(), c.in[1].as<T>(), c.in[2].as<T>(), c.out[0].as<T>(), stats, cols, c.floats[0], rms);
        normGradParamPartialKernel<T><<<blocksFor(chunks * cols), kThreads, 0, st>>>(x.as<T>(), c.in[2].as<T>(), stats, partial, rows, cols, chunkRows);
        normGradParamKernel<T><<<blocksFor(cols), kThreads, 0, st>>>(partial, c.out[1].as<T>(), rms ? nullptr : c.out[2].as<T>(), chunks, cols))
  } else if (name == "cross_entropy") {
    const TensorRef &x = c.in[0], &labels = c.in[1];
    int64_t stride = x.shape.back(), classes = c.ints.size() > 1 ? c.ints[1] : stride;
    int64_t rows = labels.numel();
    ZRT_RETURN_IF_ERROR(ctx.reserve(std::max<int64_t>(rows, 1) * sizeof(double)));
    double *rowLoss = (double *)ctx.scratch;
    if (rows > 0)
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        crossEntropyRowKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(x.as<T>(), labels.as<int64_t>(), rowLoss, classes, stride, c.ints[0], ctx.errorInfo))
    meanLossKernel<<<1, 1024, 0, st>>>(rowLoss, labels.as<int64_t>(), rows, c.ints[0],
                                       c.out[0].as<float>());
  } else if (name == "cross_entropy_grad") {
    const TensorRef &x = c.in[0], &labels = c.in[1];
    int64_t stride = x.shape.back(), classes = c.ints.size() > 1 ? c.ints[1] : stride;
    int64_t rows = labels.numel();
    ZRT_RETURN_IF_ERROR(ctx.reserve(sizeof(double)));
    double *count = (double *)ctx.scratch;
    countLabelsKernel<<<1, 1024, 0, st>>>(labels.as<int64_t>(), rows, c.ints[0], count);
    if (rows > 0)
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        crossEntropyGradKernel<T><<<(unsigned)rows, kRowThreads, 0, st>>>(x.as<T>(), labels.as<int64_t>(), c.in[2].as<float>(), count, c.out[0].as<T>(), classes, stride, c.ints[0], ctx.errorInfo))
  } else if (name == "reduce") {
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
      int64_t chunks = std::min<int64_t>((count + 127) / 128, std::max<int64_t>(1, 4096 / ((n + 255) / 256)));
      int64_t chunkRows = (count + chunks - 1) / chunks;
      chunks = (count + chunkRows - 1) / chunkRows;
      ZRT_RETURN_IF_ERROR(ctx.reserve(n * chunks * sizeof(double)));
      double *partial = static_cast<double *>(ctx.scratch);
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        reduceColumnsKernel<T><<<dim3((unsigned)((n + 255) / 256), (unsigned)chunks), 256, 0, st>>>(x.as<T>(), partial, count, n, chunkRows, kind);
        reduceFinishKernel<T><<<blocksFor(n), kThreads, 0, st>>>(partial, y.as<T>(), n, (int)chunks, count, kind))
    } else if (n > 0 && count <= 64) {
      // Few elements per output: a thread each.
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        reduceKernel<T><<<blocksFor(n), kThreads, 0, st>>>(x.as<T>(), y.as<T>(), m, n, count, kind))
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
      ZRT_FLOAT_DISPATCH(x.dtype, T,
        reduceBlocksKernel<T><<<(unsigned)(n * splits), kRowThreads, 0, st>>>(x.as<T>(), y.as<T>(), partial, m, count, chunk, (int)splits, kind))
      if (splits > 1)
        ZRT_FLOAT_DISPATCH(x.dtype, T,
          reduceFinishKernel<T><<<blocksFor(n), kThreads, 0, st>>>(partial, y.as<T>(), n, (int)splits, count, kind))
    }
  } else if (name == "gelu_grad") {
    int64_t n = c.out[0].numel();
    bool vectors = true;
    for (const TensorRef *t : {&c.in[0], &c.in[1], &c.out[0]})
      vectors &= reinterpret_cast<uintptr_t>(t->data) % 16 == 0;
    ZRT_FLOAT_DISPATCH(c.out[0].dtype, T,
      geluGradKernel<T><<<blocksFor(vectors ? (n + 7) / 8 : n), kThreads, 0, st>>>(c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), n, c.ints[0] == 1, vectors))
  } else if (name == "sgd") {
    int64_t n = c.in[0].numel();
    const unsigned char *skip = c.in.size() == 5 ? c.in[4].as<unsigned char>() : nullptr;
    sgdKernel<<<blocksFor(n), kThreads, 0, st>>>(c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.in[3].as<float>(), skip, c.out[0].as<float>(), c.out[1].as<float>(), (float)c.floats[0], (float)c.floats[1], c.ints[0] != 0, n);
  } else {
    return errorf("no CUDA kernel '", name, "'");
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

const std::set<std::string> kMore = {
    "cmp", "and", "or", "not", "where", "expand", "cast", "cast_many", "cast_concat", "transpose", "slice", "slice_grad",
    "concat", "split", "gather", "gather_grad", "softmax", "bias_softmax", "log_softmax", "softmax_grad",
    "log_softmax_grad", "layer_norm", "rms_norm", "layer_norm_grad", "rms_norm_grad",
    "cross_entropy", "cross_entropy_grad", "reduce", "gelu_grad", "sgd"};

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
  if (name == "matmul" || name == "matmul_bias")
    return matmulSupported(c);
  if (name == "matmul_bgrad" || name == "matmul_bias_gelu" || name == "matmul_gelu_grad")
    return true;
  if (name == "elementwise")
    return c.code != nullptr;
  if (name == "attention" || name == "attention_grad")
    return hasAttentionKernel(name == "attention_grad", c);
  if (kMore.count(name)) {
    for (const std::vector<TensorRef> *list : {&c.in, &c.out})
      for (const TensorRef &t : *list)
        if (t.shape.size() > (size_t)kMaxRank)
          return false;
    return true;
  }
  return false;
}

namespace {
struct RankPointers {
  const float *p[kMaxDeviceRanks];
};

__global__ void rankReduceKernel(RankPointers in, int world, int64_t begin, int64_t n,
                                 float *out, bool avg) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x) {
    float acc = 0.0f;
    for (int r = 0; r < world; ++r)
      acc = __fadd_rn(acc, in.p[r][begin + k]);
    out[k] = avg ? __fdiv_rn(acc, (float)world) : acc;
  }
}
} // namespace

Status launchRankReduce(const float *const *inputs, int world, int64_t begin, int64_t n,
                        float *out, bool avg, cudaStream_t stream) {
  if (world < 1 || world > kMaxDeviceRanks)
    return errorf("an in-process collective of ", world, " ranks (at most ", kMaxDeviceRanks,
                  " on one device)");
  if (n == 0)
    return Status::ok();
  RankPointers ptrs{};
  for (int r = 0; r < world; ++r)
    ptrs.p[r] = inputs[r];
  rankReduceKernel<<<blocksFor(n), kThreads, 0, stream>>>(ptrs, world, begin, n, out, avg);
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

Status CudaContext::reserve(size_t bytes) {
  if (bytes <= scratchBytes)
    return Status::ok();
  if (scratchLimit >= 0 && (int64_t)bytes > scratchLimit)
    return errorf("a kernel needs ", bytes, " bytes of scratch, more than the ", scratchLimit,
                  " that --memory-budget leaves beside the arenas; raise the budget");
  ZRT_CUDA(cudaStreamSynchronize(stream));
  if (scratch)
    ZRT_CUDA(cudaFree(scratch));
  scratch = nullptr;
  scratchBytes = 0;
  ZRT_CUDA(cudaMalloc(&scratch, bytes));
  scratchBytes = bytes;
  return Status::ok();
}

std::string describeCudaError(const long long info[5]) {
  if (info[0] == 1)
    return errorf("label ", info[1], " at position ", info[2], " is out of range for ", info[3],
                  " classes (use ", info[4], " to ignore a position)")
        .message();
  if (info[0] == 2)
    return errorf("index ", info[1], " is out of range for a dimension of size ", info[3],
                  " (e.g. a token id >= the vocabulary size)")
        .message();
  return info[0] ? "kernel error " + std::to_string(info[0]) : "";
}

Status launchCudaKernel(const std::string &name, const KernelCall &c, CudaContext &ctx) {
  if (name == "attention" || name == "attention_grad") {
    ZRT_RETURN_IF_ERROR(launchAttention(name == "attention_grad", c, ctx));
    ZRT_CUDA(cudaGetLastError());
    return Status::ok();
  }
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
  if (name == "matmul" || name == "matmul_bias")
    return launchMatmul(c, ctx);
  if (name == "matmul_bgrad")
    return launchMatmulBgrad(c, ctx);
  if (name == "matmul_bias_gelu")
    return launchMatmulBiasGelu(c, ctx);
  if (name == "matmul_gelu_grad")
    return launchMatmulGeluGrad(c, ctx);
  if (name == "elementwise")
    return launchGenerated(c, ctx);
  return launchMore(name, c, ctx);
}

} // namespace zrt
