//===- Gemm.cu - CUDA kernels: GEMMs and their epilogues -----------------===//
//
// GEMMs through cuBLASLt (float32 accumulation; TF32 only when allowed),
// with the epilogues the compiler fuses: a bias added (matmul_bias), an
// addend of the result's shape added with beta = 1 (matmul_add), the
// bias gradient formed from the same GEMM (matmul_bgrad, BGRADA), GELU with
// its pre-activation kept (matmul_bias_gelu) and GELU's derivative applied
// (matmul_gelu_grad). One cuBLASLt plan per shape, built once; where no
// algorithm offers an epilogue, the plain GEMM and the separate kernel.
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"

#include <array>
#include <map>
#include <memory>

namespace zrt {

/// One GEMM shape's cuBLASLt objects (owned).
struct MatmulPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
  // zrun --gemm-tune: the heuristic's other candidates, timed on the first
  // call (the first is the heuristic's choice).
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  // matmul_bias: the bias is added in cuBLASLt's epilogue; matmul_bgrad:
  // the bias gradient is formed by it (BGRADA). Unless no algorithm offers
  // the epilogue for this shape: then the add or reduce kernel after.
  bool epilogue = false;
  ~MatmulPlan() {
    if (lc)
      cublasLtMatrixLayoutDestroy(lc);
    if (lb)
      cublasLtMatrixLayoutDestroy(lb);
    if (la)
      cublasLtMatrixLayoutDestroy(la);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};
struct MatmulPlans {
  // m, n, k, batch, transposes, batch strides, data and compute types.
  using Key = std::array<int64_t, 11>;
  std::map<Key, std::unique_ptr<MatmulPlan>> byShape;
};

namespace cuda {
namespace {

/// --gemm-tune: how many of the heuristic's algorithms are timed.
constexpr int kTuneCandidates = 8;

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

/// Builds the descriptors of a GEMM and asks the heuristic for its best
/// algorithm (once per shape: launchMatmul caches the result).
enum {
  kNoEpilogue = 0,
  kBiasEpilogue = 1,  // matmul_bias
  kBgradEpilogue = 2, // matmul_bgrad
  kGeluAuxBias = 3,   // matmul_bias_gelu: GELU(AB + bias), AB + bias kept as aux
  kDgelu = 4,         // matmul_gelu_grad: GELU'(aux) * AB
};

Status buildMatmulPlan(MatmulPlan &p, CudaContext &ctx, cudaDataType_t type,
                       cublasComputeType_t compute, bool ta, bool tb, int64_t m, int64_t n,
                       int64_t k, int64_t aRows, int64_t aCols, int64_t bRows, int64_t bCols,
                       int64_t batch, int64_t strideA, int64_t strideB, int epilogueKind) {
  ZRT_CUBLAS(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
  cublasOperation_t opFirst = tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opSecond = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZRT_CUBLAS(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof opFirst));
  ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
                                            sizeof opSecond));
  // First operand: B's storage viewed column-major (bCols x bRows), second: A's.
  ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&p.la, type, bCols, bRows, bCols));
  ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&p.lb, type, aCols, aRows, aCols));
  ZRT_CUBLAS(cublasLtMatrixLayoutCreate(&p.lc, type, n, m, n));
  int32_t count = (int32_t)batch;
  int64_t strideC = m * n;
  for (auto [layout, stride] : {std::pair{p.la, strideB}, {p.lb, strideA}, {p.lc, strideC}}) {
    ZRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof count));
    ZRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride));
  }
  cublasLtMatmulPreference_t pref = nullptr;
  ZRT_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = ctx.workspaceBytes;
  // With --gemm-tune, the heuristic's best few, timed by launchGemm.
  int want = ctx.tuneGemms ? kTuneCandidates : 1;
  cublasLtMatmulHeuristicResult_t results[kTuneCandidates];
  int found = 0;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
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
      st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, p.op, p.la, p.lb, p.lc, p.lc, pref, want, results,
                                          &found);
    p.epilogue = st == CUBLAS_STATUS_SUCCESS && found;
    if (!p.epilogue) {
      cublasLtEpilogue_t none = CUBLASLT_EPILOGUE_DEFAULT;
      st = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &none, sizeof none);
      found = 0;
    }
  }
  if (st == CUBLAS_STATUS_SUCCESS && !found)
    st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, p.op, p.la, p.lb, p.lc, p.lc, pref, want, results,
                                        &found);
  cublasLtMatmulPreferenceDestroy(pref);
  ZRT_CUBLAS(st);
  if (!found)
    return errorf("cuBLASLt has no algorithm for ", m, "x", k, " @ ", k, "x", n, " batch ", batch);
  p.algo = results[0].algo;
  if (found > 1)
    p.candidates.assign(results, results + found);
  return Status::ok();
}

/// What a GEMM's epilogue does besides the product (launchGemm).
struct Epilogue {
  int kind = kNoEpilogue;
  const TensorRef *vector = nullptr; // the bias (read) or its gradient (written)
  const TensorRef *aux = nullptr;    // the GELU's pre-activation (written / read)
  const TensorRef *addend = nullptr; // matmul_add: C, added with beta = 1 (may be the result)
};

bool overlaps(const TensorRef &x, const TensorRef &y) {
  const char *xl = x.data, *xh = xl + x.numel() * dtypeSize(x.dtype);
  const char *yl = y.data, *yh = yl + y.numel() * dtypeSize(y.dtype);
  return xl < yh && yl < xh;
}

/// --gemm-tune: times the heuristic's candidates for |p|'s shape on this
/// call's operands (|c| the addend or the result, D the result) and keeps
/// the fastest in p.algo; the heuristic's first unless another is at least
/// 1% faster. An addend that is also the result is copied aside first
/// (|aside|, freed by the caller after its call) so that every timed call
/// computes the same; a call whose result shares bytes with another operand
/// is not timed.
Status tuneGemm(MatmulPlan &p, const MatmulPlans::Key &key, const TensorRef &a, const TensorRef &b,
                const TensorRef &d, const TensorRef *addend, const Epilogue &e, const void *&c,
                void *&aside, CudaContext &ctx) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  ZRT_CUDA(cudaStreamIsCapturing(ctx.stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone)
    return Status::ok();
  std::vector<const TensorRef *> reads{&a, &b};
  if (p.epilogue && e.vector && e.kind != kBgradEpilogue)
    reads.push_back(e.vector);
  if (p.epilogue && e.aux && e.kind == kDgelu)
    reads.push_back(e.aux);
  std::vector<const TensorRef *> writes{&d};
  if (p.epilogue && e.vector && e.kind == kBgradEpilogue)
    writes.push_back(e.vector);
  if (p.epilogue && e.aux && e.kind == kGeluAuxBias)
    writes.push_back(e.aux);
  for (const TensorRef *w : writes)
    for (const TensorRef *r : reads)
      if (overlaps(*w, *r))
        return Status::ok();
  if (addend && overlaps(*addend, d)) {
    size_t bytes = addend->numel() * dtypeSize(addend->dtype);
    if (ctx.scratchLimit >= 0 && (int64_t)bytes > ctx.scratchLimit)
      return Status::ok();
    ZRT_CUDA(cudaMalloc(&aside, bytes));
    ZRT_CUDA(cudaMemcpyAsync(aside, addend->data, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    c = aside;
  }
  float alpha = 1.0f, beta = addend ? 1.0f : 0.0f;
  auto run = [&](const cublasLtMatmulAlgo_t &algo) {
    return cublasLtMatmul(ctx.lt, p.op, &alpha, b.data, p.la, a.data, p.lb, &beta, c, p.lc, d.data,
                          p.lc, &algo, ctx.workspace, ctx.workspaceBytes, ctx.stream);
  };
  cudaEvent_t start, stop;
  ZRT_CUDA(cudaEventCreate(&start));
  ZRT_CUDA(cudaEventCreate(&stop));
  constexpr int kCalls = 3, kRounds = 2;
  std::vector<float> best(p.candidates.size(), 1e30f);
  for (int round = 0; round < kRounds; ++round)
    for (size_t i = 0; i < p.candidates.size(); ++i) {
      if (run(p.candidates[i].algo) != CUBLAS_STATUS_SUCCESS) // unusable here: never chosen
        continue;
      cudaEventRecord(start, ctx.stream);
      for (int k = 0; k < kCalls; ++k)
        run(p.candidates[i].algo);
      cudaEventRecord(stop, ctx.stream);
      float ms = 0;
      if (cudaEventSynchronize(stop) == cudaSuccess &&
          cudaEventElapsedTime(&ms, start, stop) == cudaSuccess)
        best[i] = std::min(best[i], ms / kCalls);
    }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  ZRT_CUDA(cudaGetLastError());
  // The fastest, if it beats the heuristic's first by 1% (else the first).
  size_t chosen = std::min_element(best.begin(), best.end()) - best.begin();
  if (!(best[chosen] < 0.99f * best[0]))
    chosen = 0;
  GemmTuneStats &t = ctx.tuneStats;
  t.shapes += 1;
  t.changed += chosen != 0;
  t.heuristicMs += best[0];
  t.chosenMs += best[chosen];
  t.lines.push_back(errorf("m ", key[0], " n ", key[1], " k ", key[2], " batch ", key[3],
                           key[4] ? " ta" : "", key[5] ? " tb" : "", " epilogue ", key[10],
                           ": heuristic ", best[0], " ms, candidate ", chosen, " of ", best.size(),
                           " ", best[chosen], " ms")
                        .message());
  p.algo = p.candidates[chosen].algo;
  return Status::ok();
}

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
  int64_t strideA = batchOf(a) > 1 ? aRows * aCols : 0,
          strideB = batchOf(b) > 1 ? bRows * bCols : 0;
  cudaDataType_t type = cudaType(a.dtype);
  cublasComputeType_t compute =
      a.dtype == DType::F32 && ctx.allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (!ctx.matmulPlans)
    ctx.matmulPlans = std::make_shared<MatmulPlans>();
  // The epilogues against the separate kernels were measured on GPT-2 124M
  // (docs/benchmarks.md: bias gradients 5.57 vs 6.46 ms, GELU 1.83 + 1.99 vs
  // 5.83 + 2.41 ms); the separate kernels remain the fallback.
  int kind = e.kind;
  if (((kind == kGeluAuxBias || kind == kDgelu) && (n % 8 != 0 || batch != 1)) ||
      (e.vector && !aligned16(e.vector->data)) || (e.aux && !aligned16(e.aux->data)))
    kind = kNoEpilogue;
  // (aRows, aCols) follow from m, k and ta; (bRows, bCols) from k, n and tb.
  MatmulPlans::Key key{m,   n, k, batch, ta, tb, strideA, strideB, (int64_t)type, (int64_t)compute,
                       kind};
  std::unique_ptr<MatmulPlan> &plan = ctx.matmulPlans->byShape[key];
  if (!plan) {
    auto built = std::make_unique<MatmulPlan>();
    ZRT_RETURN_IF_ERROR(buildMatmulPlan(*built, ctx, type, compute, ta, tb, m, n, k, aRows, aCols,
                                        bRows, bCols, batch, strideA, strideB, kind));
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
      ZRT_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                &auxData, sizeof auxData));
    }
  }
  // Without the GELU epilogue the product goes where the separate kernels
  // read it: the pre-activation (forward) or the result (backward).
  const TensorRef &product = e.kind == kGeluAuxBias && !plan->epilogue ? *e.aux : o;
  // matmul_add: D = AB + C in the accumulator, rounded once (C may be D: the
  // planner lets the result take a dying addend's bytes).
  const TensorRef *addend = e.addend && aligned16(e.addend->data) ? e.addend : nullptr;
  // An unaligned addend is added by a kernel after the GEMM; when it shares
  // bytes with the result, which the GEMM overwrites, it is copied aside
  // first (the planner may place the result on a dying addend's bytes).
  TensorRef aside;
  if (e.addend && !addend) {
    const char *lo = e.addend->data, *hi = lo + e.addend->numel() * dtypeSize(e.addend->dtype);
    const char *olo = o.data, *ohi = olo + o.numel() * dtypeSize(o.dtype);
    aside = *e.addend;
    if (lo < ohi && olo < hi) {
      ZRT_RETURN_IF_ERROR(ctx.reserve(hi - lo));
      ZRT_CUDA(cudaMemcpyAsync(ctx.scratch, lo, hi - lo, cudaMemcpyDeviceToDevice, ctx.stream));
      aside.data = static_cast<char *>(ctx.scratch);
    }
  }
  float alpha = 1.0f, beta = addend ? 1.0f : 0.0f;
  const void *c = addend ? addend->data : product.data;
  void *tuneAside = nullptr; // an addend the result overwrites, kept for the timed calls
  if (!plan->candidates.empty()) {
    ZRT_RETURN_IF_ERROR(tuneGemm(*plan, key, a, b, product, addend, e, c, tuneAside, ctx));
    plan->candidates.clear();
  }
  cublasStatus_t st = cublasLtMatmul(ctx.lt, plan->op, &alpha, b.data, plan->la, a.data, plan->lb,
                                     &beta, c, plan->lc, product.data, plan->lc, &plan->algo,
                                     ctx.workspace, ctx.workspaceBytes, ctx.stream);
  if (tuneAside) {
    cudaStreamSynchronize(ctx.stream);
    cudaFree(tuneAside);
  }
  ZRT_CUBLAS(st);
  if (e.addend && !addend) { // an unaligned addend: the add kernel after the GEMM
    KernelCall sum;
    sum.in = {o, aside};
    sum.out = {o};
    return launchAdd(sum, ctx);
  }
  if (plan->epilogue || e.kind == kNoEpilogue)
    return Status::ok();
  KernelCall after;
  switch (e.kind) {
  case kBiasEpilogue:
    after.in = {o, *e.vector};
    after.out = {o};
    return launchAdd(after, ctx);
  case kBgradEpilogue:
    after.in = {b};
    after.out = {*e.vector};
    after.ints = {0, e.vector->shape.size() == 2 ? 1 : 0, 0}; // sum over rows
    return launchReduce(after, ctx);
  case kGeluAuxBias:
    after.in = {*e.aux, *e.vector};
    after.out = {*e.aux};
    ZRT_RETURN_IF_ERROR(launchAdd(after, ctx));
    after.in = {*e.aux};
    after.out = {o};
    after.ints = {1}; // tanh
    return launchGelu(after, ctx);
  default: // kDgelu
    after.in = {*e.aux, o};
    after.out = {o};
    after.ints = {1};
    return launchGeluGrad(after, ctx);
  }
}

} // namespace

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

Status launchMatmulBias(const KernelCall &c, CudaContext &ctx) { return launchMatmul(c, ctx); }

/// matmul_add: [a, b, addend] -> [a b + addend], beta = 1.
Status launchMatmulAdd(const KernelCall &c, CudaContext &ctx) {
  Epilogue e;
  e.addend = &c.in[2];
  return launchGemm(c.in[0], c.in[1], c.out[0], c.ints[0], c.ints[1], e, ctx);
}

bool supportsMatmul(const KernelCall &c) { return matmulSupported(c); }
bool supportsMatmulBias(const KernelCall &c) { return matmulSupported(c); }
bool supportsMatmulAdd(const KernelCall &c) { return matmulSupported(c); }
bool supportsMatmulBgrad(const KernelCall &) { return true; }
bool supportsMatmulBiasGelu(const KernelCall &) { return true; }
bool supportsMatmulGeluGrad(const KernelCall &) { return true; }

} // namespace cuda
} // namespace zrt
