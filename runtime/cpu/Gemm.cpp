//===- Gemm.cpp - CPU kernels: gemm -----------------------------------------===//
//
// GEMMs and their fused epilogues: matmul (OpenBLAS sgemm, bf16/fp16
// widened to float32), matmul_bias, matmul_bias_gelu, matmul_gelu_grad and
// matmul_bgrad. Each fused kernel runs the unfused kernels in order, so its
// results are the unfused pair's bits (the CPU is the reference).
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>

#include <sys/resource.h>

namespace zrt {

Status checkBlasMemory() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return Status::ok();
  constexpr size_t kBuffer = size_t(128) << 20; // OpenBLAS's BUFFER_SIZE on x86-64
  auto fits = [](size_t bytes) {
    void *p = std::malloc(bytes);
    std::free(p);
    return p != nullptr;
  };
  int threads = std::max(1, openblas_get_num_threads());
  if (fits((size_t)(threads + 1) * kBuffer))
    return Status::ok();
  if (fits(kBuffer)) { // room for one buffer: one thread
    openblas_set_num_threads(1);
    return Status::ok();
  }
  return errorf("the address-space limit (ulimit -v ", limit.rlim_cur / 1024,
                " KiB) leaves no room for the 128 MiB buffer OpenBLAS needs for the CPU "
                "backend's matrix products; raise it (ulimit -v 1000000 is enough for small "
                "plans)");
}

} // namespace zrt

namespace zrt::cpu {

std::string checkMatmul(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  if (auto e = checkInts(c, 2); !e.empty())
    return e;
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  if (!isFloatStorage(a.dtype) || b.dtype != a.dtype || o.dtype != a.dtype)
    return "expects float32 or bfloat16 operands and result of one type";
  if (a.shape.size() < 2 || b.shape.size() < 2)
    return "operands need rank >= 2";
  bool ta = c.ints[0], tb = c.ints[1];
  size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = a.shape[ra - (ta ? 1 : 2)], k = a.shape[ra - (ta ? 2 : 1)];
  int64_t k2 = b.shape[rb - (tb ? 1 : 2)], n = b.shape[rb - (tb ? 2 : 1)];
  Shape batch;
  if (k != k2 || !broadcastShape(Shape(a.shape.begin(), a.shape.end() - 2),
                                 Shape(b.shape.begin(), b.shape.end() - 2), batch))
    return "operands " + describe(a) + " and " + describe(b) + " do not multiply";
  batch.push_back(m);
  batch.push_back(n);
  if (o.shape != batch)
    return "result " + describe(o) + " should be " + shapeStr(batch);
  return "";
}
Status runMatmul(const KernelCall &c) {
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  bool ta = c.ints[0], tb = c.ints[1];
  size_t ra = a.shape.size(), rb = b.shape.size(), ro = o.shape.size();
  int64_t m = o.shape[ro - 2], n = o.shape[ro - 1], k = a.shape[ra - (ta ? 2 : 1)];
  Shape batch(o.shape.begin(), o.shape.end() - 2);
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  int64_t aMat = a.shape[ra - 2] * a.shape[ra - 1], bMat = b.shape[rb - 2] * b.shape[rb - 1];
  int lda = (int)a.shape[ra - 1], ldb = (int)b.shape[rb - 1];
  // bfloat16 / float16: widen the operands, multiply in float32, round.
  std::vector<float> wa, wb, wo;
  auto widen = [](const TensorRef &t, std::vector<float> &w) {
    w.resize(t.numel());
    for (int64_t k = 0; k < (int64_t)w.size(); ++k)
      w[k] = loadNarrow(t, k);
    return w.data();
  };
  bool bf16 = isNarrowFloat(a.dtype);
  const float *pa = bf16 ? widen(a, wa) : a.as<float>(), *pb = bf16 ? widen(b, wb) : b.as<float>();
  if (bf16)
    wo.resize(o.numel());
  float *po = bf16 ? wo.data() : o.as<float>();
  forEachBroadcast<2>(batch, {ba, bb}, [&](int64_t i, const std::array<int64_t, 2> &off) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, pa + off[0] * aMat, lda, pb + off[1] * bMat, ldb,
                0.0f, po + i * m * n, (int)n);
  });
  for (int64_t k = 0; k < (int64_t)wo.size(); ++k)
    storeNarrow(o, k, wo[k]);
  return Status::ok();
}

std::string checkMatmulBias(const KernelCall &c) {
  if (c.in.size() != 3)
    return "expects lhs, rhs and bias";
  KernelCall product = c;
  product.in.pop_back();
  if (auto e = checkMatmul(product); !e.empty())
    return e;
  const TensorRef &bias = c.in[2], &o = c.out[0];
  if (bias.dtype != o.dtype || bias.shape != Shape{o.shape.back()})
    return "bias " + describe(bias) + " should be one value per column of " + describe(o);
  return "";
}
/// The GEMM, then the bias added as the separate add kernel does (in float,
/// rounded to the storage type): the same bits as the unfused pair.
Status runMatmulBias(const KernelCall &c) {
  KernelCall product = c;
  product.in.pop_back();
  ZRT_RETURN_IF_ERROR(runMatmul(product));
  KernelCall add;
  add.in = {c.out[0], c.in[2]};
  add.out = {c.out[0]};
  return runAdd(add);
}

std::string checkMatmulAdd(const KernelCall &c) {
  if (c.in.size() != 3 || c.out.size() != 1)
    return "expects lhs, rhs and the addend, one result";
  KernelCall product = c;
  product.in.pop_back();
  if (auto e = checkMatmul(product); !e.empty())
    return e;
  const TensorRef &addend = c.in[2], &o = c.out[0];
  if (addend.dtype != o.dtype || addend.shape != o.shape)
    return "addend " + describe(addend) + " should be like the result " + describe(o);
  return "";
}
/// The product into a temporary (the result may share the addend's bytes),
/// then added as the separate add kernel does: the unfused pair's bits (the
/// GPU rounds the sum once).
Status runMatmulAdd(const KernelCall &c) {
  const TensorRef &o = c.out[0];
  std::vector<char> bytes(o.numel() * dtypeSize(o.dtype));
  TensorRef product = o;
  product.data = bytes.data();
  KernelCall mm = c;
  mm.in.pop_back();
  mm.out = {product};
  ZRT_RETURN_IF_ERROR(runMatmul(mm));
  KernelCall add;
  add.in = {product, c.in[2]};
  add.out = {o};
  return runAdd(add);
}

std::string checkMatmulBiasGelu(const KernelCall &c) {
  if (c.in.size() != 3 || c.out.size() != 2 || c.ints.size() != 2)
    return "expects lhs, rhs and bias, the result and the pre-activation, [transposes]";
  KernelCall product = c;
  product.out.pop_back();
  if (auto e = checkMatmulBias(product); !e.empty())
    return e;
  if (c.out[1].shape != c.out[0].shape || c.out[1].dtype != c.out[0].dtype)
    return "pre-activation " + describe(c.out[1]) + " should be like " + describe(c.out[0]);
  return "";
}
/// pre = matmul_bias, then the tanh-GELU of it: the unfused kernels' bits
/// (the GPU's epilogue applies the GELU before rounding pre).
Status runMatmulBiasGelu(const KernelCall &c) {
  KernelCall product = c;
  product.out = {c.out[1]};
  ZRT_RETURN_IF_ERROR(runMatmulBias(product));
  KernelCall gelu;
  gelu.in = {c.out[1]};
  gelu.out = {c.out[0]};
  gelu.ints = {1};
  return runGelu(gelu);
}

std::string checkMatmulGeluGrad(const KernelCall &c) {
  if (c.in.size() != 3 || c.out.size() != 1 || c.ints.size() != 2)
    return "expects lhs, rhs and the pre-activation, one result, [transposes]";
  KernelCall product = c;
  product.in.pop_back();
  if (auto e = checkMatmul(product); !e.empty())
    return e;
  if (c.in[2].shape != c.out[0].shape || c.in[2].dtype != c.out[0].dtype)
    return "pre-activation " + describe(c.in[2]) + " should be like " + describe(c.out[0]);
  return "";
}
/// The product, then gelu_grad(pre, product) in place: the unfused bits.
Status runMatmulGeluGrad(const KernelCall &c) {
  KernelCall product = c;
  product.in.pop_back();
  ZRT_RETURN_IF_ERROR(runMatmul(product));
  KernelCall grad;
  grad.in = {c.in[2], c.out[0]};
  grad.out = {c.out[0]};
  grad.ints = {1};
  return runGeluGrad(grad);
}

std::string checkMatmulBgrad(const KernelCall &c) {
  if (auto e = arity(c, 2, 2); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &dy = c.in[1], &w = c.out[0], &b = c.out[1];
  if (x.shape.size() != 2 || dy.shape.size() != 2 || x.shape[0] != dy.shape[0])
    return "expects x [R, K] and dy [R, N], got " + describe(x) + " and " + describe(dy);
  if (!isFloatStorage(x.dtype) || dy.dtype != x.dtype || w.dtype != x.dtype || b.dtype != x.dtype)
    return "expects one float type for x, dy and both gradients";
  int64_t k = x.shape[1], n = dy.shape[1];
  if (w.shape != Shape{k, n})
    return "weight gradient " + describe(w) + " should be " + shapeStr({k, n});
  if (b.shape != Shape{n} && b.shape != Shape{1, n})
    return "bias gradient " + describe(b) + " should be [" + std::to_string(n) + "] or [1, " +
           std::to_string(n) + "]";
  return "";
}
/// x^T dy and the column sums of dy: the matmul and reduce kernels the
/// unfused pair ran, so the same bits.
Status runMatmulBgrad(const KernelCall &c) {
  KernelCall product;
  product.in = {c.in[0], c.in[1]};
  product.out = {c.out[0]};
  product.ints = {1, 0};
  ZRT_RETURN_IF_ERROR(runMatmul(product));
  KernelCall sum;
  sum.in = {c.in[1]};
  sum.out = {c.out[1]};
  sum.ints = {0, c.out[1].shape.size() == 2 ? 1 : 0, 0};
  return runReduce(sum);
}

} // namespace zrt::cpu
