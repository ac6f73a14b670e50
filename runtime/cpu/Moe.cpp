//===- Moe.cpp - CPU kernels: mixtures of experts, dropless ----------------===//
//
// moe_route (each token's k experts sorted into expert order: a stable
// counting sort), grouped_matmul (a GEMM per expert over its rows, OpenBLAS)
// and grouped_matmul_rhs_grad (each expert's matrix gradient). bf16/fp16 run
// in float32 (viaFloat32), as matmul does. ABI:
//
//   moe_route  ints [experts, capacity]  experts i64/i32 [N, k] -> (tokens [N k], positions
//                                     [N, k], offsets [experts + 1]), all i64; capacity C > 0:
//                                     tokens [E C], C rows an expert, choices past them dropped
//                                     (position E C), unused rows token N
//              ints [experts, 0, all experts]  (experts [M, k], first expert [1]): expert
//                                     parallelism, this rank's experts first .. first + experts
//                                     - 1 only, tokens [M min(k, experts)], other choices'
//                                     positions = that many rows, unused rows token M
//   grouped_matmul ints [transpose_rhs(, partial)]  (rows [M, K], rhs [E, K, N] or [E, N, K],
//                                         offsets i64 [E + 1]) -> [M, N], rows past offsets[E]
//                                         zero (partial: expert parallelism's may exist)
//   grouped_matmul_rhs_grad ints [transpose_rhs]  (rows [M, K], grad [M, N], offsets)
//                                                  -> [E, K, N] or [E, N, K]
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cblas.h>

#include <algorithm>

namespace zrt::cpu {
namespace {

int64_t indexAt(const TensorRef &t, int64_t k) {
  return t.dtype == DType::I64 ? t.as<int64_t>()[k] : t.as<int32_t>()[k];
}

/// The offsets of a grouped GEMM, checked at run time (they are data): they
/// start at 0, never decrease and end at |rows| (at most |rows| where a
/// rank routes only its own experts: expert parallelism leaves a tail).
Status groupBounds(const TensorRef &offsets, int64_t rows, std::vector<int64_t> &out) {
  out.resize(offsets.numel());
  for (int64_t e = 0; e < (int64_t)out.size(); ++e)
    out[e] = indexAt(offsets, e);
  for (size_t e = 0; e + 1 < out.size(); ++e)
    if (out[e] < 0 || out[e] > out[e + 1])
      return errorf("grouped_matmul: expert ", e, "'s rows [", out[e], ", ", out[e + 1],
                    ") are not in order (offsets must come from moe_route)");
  if (out.front() != 0 || out.back() > rows)
    return errorf("grouped_matmul: the offsets cover rows [", out.front(), ", ", out.back(),
                  "), not within the ", rows, " rows");
  return Status::ok();
}

/// What grouped_matmul and its gradient check alike: rows [M, K], expert
/// matrices |rhs| [E, K, N] ([E, N, K] transposed), offsets [E + 1].
std::string checkGrouped(const KernelCall &c, const TensorRef &rows, const TensorRef &rhs,
                         const TensorRef &offsets, int64_t &n, bool partial = false) {
  if (auto e = checkInts(c, partial && c.ints.size() == 2 ? 2 : 1); !e.empty())
    return e;
  if (!isFloatStorage(rows.dtype) || rhs.dtype != rows.dtype)
    return "expects float rows and expert matrices of one type";
  if (offsets.dtype != DType::I64 && offsets.dtype != DType::I32)
    return "offsets must be int64 or int32, got " + describe(offsets);
  if (rows.shape.size() != 2 || rhs.shape.size() != 3)
    return "expects rows [M, K] and expert matrices [E, K, N]";
  if (offsets.shape != Shape{rhs.shape[0] + 1})
    return "offsets " + describe(offsets) + " should hold experts + 1 values";
  bool t = c.ints[0];
  if (rows.shape[1] != rhs.shape[t ? 2 : 1])
    return "rows " + describe(rows) + " do not multiply expert matrices " + describe(rhs);
  n = rhs.shape[t ? 1 : 2];
  return "";
}

Status runGroupedMatmulF32(const KernelCall &c) {
  const TensorRef &x = c.in[0], &w = c.in[1], &o = c.out[0];
  bool t = c.ints[0];
  int64_t m = x.shape[0], k = x.shape[1], n = o.shape[1];
  std::vector<int64_t> off;
  ZRT_RETURN_IF_ERROR(groupBounds(c.in[2], m, off));
  for (size_t e = 0; e + 1 < off.size(); ++e) {
    int64_t rows = off[e + 1] - off[e];
    if (rows == 0)
      continue;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, t ? CblasTrans : CblasNoTrans, (int)rows, (int)n,
                (int)k, 1.0f, x.as<float>() + off[e] * k, (int)k, w.as<float>() + e * k * n,
                t ? (int)k : (int)n, 0.0f, o.as<float>() + off[e] * n, (int)n);
  }
  std::fill(o.as<float>() + off.back() * n, o.as<float>() + m * n, 0.0f); // unused rows
  return Status::ok();
}

Status runGroupedMatmulRhsGradF32(const KernelCall &c) {
  const TensorRef &x = c.in[0], &g = c.in[1], &o = c.out[0];
  bool t = c.ints[0];
  int64_t m = x.shape[0], k = x.shape[1], n = g.shape[1];
  std::vector<int64_t> off;
  ZRT_RETURN_IF_ERROR(groupBounds(c.in[2], m, off));
  float *out = o.as<float>();
  for (size_t e = 0; e + 1 < off.size(); ++e) {
    int64_t rows = off[e + 1] - off[e];
    float *dst = out + e * k * n;
    if (rows == 0) {
      std::fill(dst, dst + k * n, 0.0f);
      continue;
    }
    const float *xe = x.as<float>() + off[e] * k, *ge = g.as<float>() + off[e] * n;
    if (t) // [N, K] = grad^T rows
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)k, (int)rows, 1.0f, ge,
                  (int)n, xe, (int)k, 0.0f, dst, (int)k);
    else // [K, N] = rows^T grad
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)n, (int)rows, 1.0f, xe,
                  (int)k, ge, (int)n, 0.0f, dst, (int)n);
  }
  return Status::ok();
}

/// moe_route for one rank of an expert-parallel group: of every choice of
/// the group's M tokens among |all| experts, those of experts first .. first
/// + E - 1 get rows (token-major within an expert, as on one rank); the rest
/// position R (the rows' count), and the R - used unused rows token M.
Status routeLocal(const KernelCall &c) {
  const TensorRef &ex = c.in[0];
  int64_t experts = c.ints[0], all = c.ints[2], first = indexAt(c.in[1], 0);
  int64_t n = ex.shape[0], k = ex.shape[1], rows = c.out[0].numel();
  int64_t *tokens = c.out[0].as<int64_t>(), *positions = c.out[1].as<int64_t>(),
          *offsets = c.out[2].as<int64_t>();
  if (first < 0 || first + experts > all || first % experts)
    return errorf("moe_route: this rank's first expert ", first, " does not start one of the ",
                  all / experts, " slices of ", experts, " of the ", all, " experts");
  for (int64_t i = 0; i < n * k; ++i) {
    int64_t e = indexAt(ex, i);
    if (e < 0 || e >= all)
      return errorf("moe_route: token ", i / k, " chose expert ", e, ", outside the ", all,
                    " experts");
    if (e >= first && e < first + experts)
      ++offsets[e - first + 1];
  }
  for (int64_t e = 0; e < experts; ++e)
    offsets[e + 1] += offsets[e];
  if (offsets[experts] > rows)
    return errorf("moe_route: ", offsets[experts],
                  " choices of this rank's experts, more than "
                  "the ",
                  rows,
                  " rows a token choosing each expert once can need (a token "
                  "chose an expert twice)");
  std::vector<int64_t> next(offsets, offsets + experts);
  for (int64_t i = 0; i < n * k; ++i) {
    int64_t e = indexAt(ex, i) - first;
    if (e < 0 || e >= experts) {
      positions[i] = rows;
      continue;
    }
    int64_t row = next[e]++;
    tokens[row] = i / k;
    positions[i] = row;
  }
  std::fill(tokens + offsets[experts], tokens + rows, n);
  return Status::ok();
}

} // namespace

std::string checkMoeRoute(const KernelCall &c) {
  bool local = c.in.size() == 2; // expert parallelism: a rank's experts
  if (auto e = arity(c, local ? 2 : 1, 3); !e.empty())
    return e;
  if (auto e = checkInts(c, local ? 3 : 2); !e.empty())
    return e;
  const TensorRef &ex = c.in[0];
  int64_t experts = c.ints[0], capacity = c.ints[1];
  if (experts < 1 || capacity < 0)
    return "expects at least one expert and a capacity >= 0";
  if ((ex.dtype != DType::I64 && ex.dtype != DType::I32) || ex.shape.size() != 2)
    return "experts " + describe(ex) + " should be int64 or int32 [tokens, k]";
  int64_t n = ex.shape[0], k = ex.shape[1];
  if (local &&
      (capacity != 0 || c.ints[2] < experts || c.ints[2] % experts ||
       (c.in[1].dtype != DType::I64 && c.in[1].dtype != DType::I32) || c.in[1].numel() != 1))
    return "a rank's route expects no capacity, all experts a multiple of its own, and the "
           "first expert as one integer";
  int64_t rows = local ? n * std::min(k, experts) : capacity > 0 ? experts * capacity : n * k;
  const Shape want[3] = {{rows}, {n, k}, {experts + 1}};
  const char *name[3] = {"tokens", "positions", "offsets"};
  for (int i = 0; i < 3; ++i)
    if (c.out[i].dtype != DType::I64 || c.out[i].shape != want[i])
      return std::string(name[i]) + " " + describe(c.out[i]) + " should be int64 " +
             shapeStr(want[i]);
  return "";
}
Status runMoeRoute(const KernelCall &c) {
  const TensorRef &ex = c.in[0];
  int64_t experts = c.ints[0], capacity = c.ints[1], n = ex.shape[0], k = ex.shape[1];
  int64_t *tokens = c.out[0].as<int64_t>(), *positions = c.out[1].as<int64_t>(),
          *offsets = c.out[2].as<int64_t>();
  std::fill(offsets, offsets + experts + 1, 0);
  if (c.in.size() == 2)
    return routeLocal(c);
  for (int64_t i = 0; i < n * k; ++i) {
    int64_t e = indexAt(ex, i);
    if (e < 0 || e >= experts)
      return errorf("moe_route: token ", i / k, " chose expert ", e, ", outside the ", experts,
                    " experts");
    ++offsets[e + 1];
  }
  if (capacity > 0) { // C rows an expert, filled choice-major (first choices first)
    for (int64_t e = 0; e <= experts; ++e)
      offsets[e] = e * capacity;
    std::fill(tokens, tokens + experts * capacity, n);
    std::vector<int64_t> used(experts, 0);
    for (int64_t s = 0; s < k; ++s)
      for (int64_t t = 0; t < n; ++t) {
        int64_t e = indexAt(ex, t * k + s);
        bool kept = used[e] < capacity;
        positions[t * k + s] = kept ? e * capacity + used[e] : experts * capacity;
        if (kept)
          tokens[e * capacity + used[e]++] = t;
      }
    return Status::ok();
  }
  for (int64_t e = 0; e < experts; ++e)
    offsets[e + 1] += offsets[e];
  std::vector<int64_t> next(offsets, offsets + experts);
  for (int64_t i = 0; i < n * k; ++i) { // token-major: stable within an expert
    int64_t row = next[indexAt(ex, i)]++;
    tokens[row] = i / k;
    positions[i] = row;
  }
  return Status::ok();
}

std::string checkGroupedMatmul(const KernelCall &c) {
  if (auto e = arity(c, 3, 1); !e.empty())
    return e;
  int64_t n = 0;
  if (auto e = checkGrouped(c, c.in[0], c.in[1], c.in[2], n, /*partial=*/true); !e.empty())
    return e;
  const TensorRef &o = c.out[0];
  if (o.dtype != c.in[0].dtype || o.shape != Shape{c.in[0].shape[0], n})
    return "result " + describe(o) + " should be " + shapeStr({c.in[0].shape[0], n});
  return "";
}
Status runGroupedMatmul(const KernelCall &c) { return viaFloat32(c, runGroupedMatmulF32); }

std::string checkGroupedMatmulRhsGrad(const KernelCall &c) {
  if (auto e = arity(c, 3, 1); !e.empty())
    return e;
  int64_t n = 0;
  const TensorRef &g = c.in[1];
  if (auto e = checkGrouped(c, c.in[0], c.out[0], c.in[2], n); !e.empty())
    return e;
  if (g.dtype != c.in[0].dtype || g.shape != Shape{c.in[0].shape[0], n})
    return "grad " + describe(g) + " should be " + shapeStr({c.in[0].shape[0], n});
  return "";
}
Status runGroupedMatmulRhsGrad(const KernelCall &c) {
  return viaFloat32(c, runGroupedMatmulRhsGradF32);
}

} // namespace zrt::cpu
