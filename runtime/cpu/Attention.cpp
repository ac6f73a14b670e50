//===- Attention.cpp - CPU kernels: attention -------------------------------===//
//
// Attention: the reference for the flash-attention kernels of the CUDA
// backend (zero.attention and its gradient). Per query row, scores and
// probabilities in double; the backward recomputes the probabilities from
// the forward's per-row log-sum-exp, as the GPU kernels do.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cmath>

namespace zrt::cpu {

/// zero.attention's operands: q [B, Sq, H, D], k and v [B, Sk, Hk, D] (Hk
/// dividing H: grouped-query attention, query head h reads k/v head
/// h / (H / Hk)), bias [B or 1, H or 1, Sq, Sk]; or, packed (zero.attention_packed), q, k, v the
/// three parts of qkv [B, S, 3, H, D] and dq, dk, dv those of dqkv. The
/// mask: 0 the bias input; 1 causal, no bias (query i sees keys j <= i,
/// and with a window w > 0 only j > i - w); 2 none. With documents (causal
/// only) the last input is positions, int64 [B, S]: query i also sees only
/// keys j >= i - positions[b, i] (packed documents, zcc --per-document).
///   attention       (q, k, v[, bias][, positions]) -> (out, lse)
///                       ints [nan_to_zero, 0, mask, window, documents]
///                   (qkv[, bias][, positions]) -> (out, lse)
///                       ints [nan_to_zero, 1, mask, window, documents]
///   attention_grad  (q, k, v[, bias], out, lse, dout[, positions]) -> (dq, dk, dv)
///                       ints [0, mask, window, documents]
///                   (qkv[, bias], out, lse, dout[, positions]) -> (dqkv)
///                       ints [1, mask, window, documents]
/// (trailing ints may be left out: 0). floats [scale] or [scale, softcap]:
/// with a softcap c > 0 (structural masks only) each scaled score s is
/// c tanh(s / c) before the mask is added.
/// Position i of head h starts at (b S + i) * stride + h D, with the stride
/// of q (|in|), k/v (|kvIn|), out and dout (|out|), dq (|grad|) and dk/dv
/// (|kvGrad|).
struct AttentionShape {
  bool packed = false, documents = false;
  int64_t mask = 0, window = 0;
  /// Per-document positions [B, S] (documents), else null.
  const int64_t *positions = nullptr;
  double softcap = 0;
  int64_t b, sq, sk, h, hk, d, biasB, biasH, in, kvIn, out, grad, kvGrad;
  int64_t qAt(int64_t bi, int64_t i, int64_t hi) const { return (bi * sq + i) * in + hi * d; }
  int64_t kAt(int64_t bi, int64_t j, int64_t hi) const {
    return (bi * sk + j) * kvIn + hi / (h / hk) * d;
  }
  int64_t oAt(int64_t bi, int64_t i, int64_t hi) const { return (bi * sq + i) * out + hi * d; }
  int64_t dqAt(int64_t bi, int64_t i, int64_t hi) const { return (bi * sq + i) * grad + hi * d; }
  int64_t dkAt(int64_t bi, int64_t j, int64_t hi) const {
    return (bi * sk + j) * kvGrad + hi / (h / hk) * d;
  }
  int64_t biasRow(int64_t bi, int64_t hi, int64_t i) const {
    return (((biasB == 1 ? 0 : bi) * biasH + (biasH == 1 ? 0 : hi)) * sq + i) * sk;
  }
  int64_t lseAt(int64_t bi, int64_t hi, int64_t i) const { return (bi * h + hi) * sq + i; }
  /// Offsets of k and v (and dk, dv) from q's (dq's) data, in elements.
  int64_t kOffset() const { return packed ? h * d : 0; }
  int64_t vOffset() const { return packed ? 2 * h * d : 0; }
  bool hasBias() const { return mask == 0; }
  /// The index of the bias among the inputs (if any).
  int biasIndex() const { return packed ? 1 : 3; }
  /// The index of the backward's first input after q, k, v and the mask.
  int afterMask() const { return biasIndex() + (hasBias() ? 1 : 0); }
  /// q, k, v and the mask (null when causal) of a (float32) call.
  std::array<const float *, 4> inputs(const KernelCall &c) const {
    const float *q = c.in[0].as<float>();
    return {q, packed ? q + kOffset() : c.in[1].as<float>(),
            packed ? q + vOffset() : c.in[2].as<float>(),
            hasBias() ? c.in[biasIndex()].as<float>() : nullptr};
  }
  /// The score (before the mask) of the product |dot| of q and k: scaled,
  /// then soft-capped.
  double score(double dot, double scale) const {
    double x = dot * scale;
    return softcap > 0 ? softcap * std::tanh(x / softcap) : x;
  }
  /// d score / d dot at the score |x| (score()'s result).
  double slope(double x, double scale) const {
    if (softcap <= 0)
      return scale;
    double t = x / softcap;
    return scale * (1 - t * t);
  }
  /// The mask's element (query i, key j) of batch |bi|, the row that starts
  /// at |row|.
  double maskAt(const float *row, int64_t bi, int64_t i, int64_t j) const {
    if (row)
      return row[j];
    if (positions && j < i - positions[bi * sq + i])
      return -INFINITY; // an earlier document's
    return mask == 2 || (j <= i && (window <= 0 || j > i - window)) ? 0.0 : -INFINITY;
  }
  const float *maskRow(const float *bias, int64_t bi, int64_t hi, int64_t i) const {
    return bias ? bias + biasRow(bi, hi, i) : nullptr;
  }
};
static std::string attentionShape(const KernelCall &c, bool backward, AttentionShape &a) {
  size_t flag = backward ? 0 : 1;
  auto intAt = [&](size_t k) { return c.ints.size() > k ? c.ints[k] : 0; };
  a.packed = intAt(flag) != 0;
  a.mask = intAt(flag + 1);
  a.window = intAt(flag + 2);
  a.documents = intAt(flag + 3) != 0;
  if (a.mask < 0 || a.mask > 2 || a.window < 0 || (a.window && a.mask != 1) ||
      (a.documents && a.mask != 1))
    return "expects a mask kind of 0 (bias), 1 (causal) or 2 (none), a window and documents "
           "only with causal";
  size_t inputs =
      (a.packed ? 1 : 3) + (a.hasBias() ? 1 : 0) + (backward ? 3 : 0) + (a.documents ? 1 : 0);
  if (c.in.size() != inputs || c.out.size() != (backward ? (a.packed ? 1u : 3u) : 2u))
    return "expects " + std::to_string(inputs) + " inputs and " +
           std::to_string(backward ? (a.packed ? 1 : 3) : 2) + " results";
  const TensorRef &q = c.in[0];
  TensorRef none;
  none.dtype = q.dtype;
  none.shape = {1, 1, 1, 1};
  const TensorRef &bias = a.hasBias() ? c.in[a.biasIndex()] : none;
  bool typesAgree = isFloatStorage(q.dtype) && bias.dtype == q.dtype;
  if (!a.packed)
    typesAgree &= c.in[1].dtype == q.dtype && c.in[2].dtype == q.dtype;
  if (!typesAgree || q.shape.size() != (a.packed ? 5u : 4u) || bias.shape.size() != 4)
    return a.packed ? "expects qkv [B, S, 3, H, D] and bias [B|1, H|1, S, S] of one float type"
                    : "expects q [B, Sq, H, D], k and v [B, Sk, Hk, D] and bias [B|1, H|1, Sq, "
                      "Sk] of one float type";
  if (a.packed) {
    if (q.shape[2] != 3)
      return "expects qkv [B, S, 3, H, D]";
    a.b = q.shape[0], a.sq = a.sk = q.shape[1], a.h = a.hk = q.shape[3], a.d = q.shape[4];
    a.in = a.grad = a.kvIn = a.kvGrad = 3 * a.h * a.d;
  } else {
    const TensorRef &k = c.in[1], &v = c.in[2];
    bool rank4 = k.shape.size() == 4;
    a.b = q.shape[0], a.sq = q.shape[1], a.sk = rank4 ? k.shape[1] : -1,
    a.hk = rank4 ? k.shape[2] : -1, a.h = q.shape[2], a.d = q.shape[3];
    if (k.shape != Shape{a.b, a.sk, a.hk, a.d} || v.shape != k.shape || a.hk < 1 || a.h % a.hk != 0)
      return "q " + shapeStr(q.shape) + " and k/v " + shapeStr(k.shape) +
             " do not agree (k/v heads must divide q's)";
    a.in = a.grad = a.h * a.d;
    a.kvIn = a.kvGrad = a.hk * a.d;
  }
  a.out = a.h * a.d;
  a.biasB = bias.shape[0], a.biasH = bias.shape[1];
  if (a.hasBias() && ((a.biasB != 1 && a.biasB != a.b) || (a.biasH != 1 && a.biasH != a.h) ||
                      bias.shape[2] != a.sq || bias.shape[3] != a.sk))
    return "bias " + shapeStr(bias.shape) + " does not agree with the attention's shape";
  if (a.mask == 1 && a.sq != a.sk)
    return "causal needs as many queries as keys";
  if (a.documents) {
    const TensorRef &p = c.in.back();
    if (p.dtype != DType::I64 || p.shape != Shape{a.b, a.sq})
      return "expects positions, int64 " + shapeStr({a.b, a.sq}) + ", as the last input";
    a.positions = p.as<int64_t>();
  }
  if (c.floats.empty() || c.floats.size() > 2)
    return "expects floats [scale] or [scale, softcap]";
  a.softcap = c.floats.size() > 1 ? c.floats[1] : 0;
  if (!(a.softcap >= 0) || (a.softcap > 0 && a.mask == 0))
    return "expects a softcap > 0, with a causal mask or none (not a bias)";
  Shape outShape{a.b, a.sq, a.h, a.d}, lseShape{a.b, a.h, a.sq};
  const TensorRef &result = backward ? c.in[a.afterMask()] : c.out[0];
  const TensorRef &lse = backward ? c.in[a.afterMask() + 1] : c.out[1];
  if (result.shape != outShape || result.dtype != q.dtype || lse.dtype != DType::F32 ||
      lse.shape != lseShape)
    return "expects a result " + shapeStr(outShape) + " of q's type and a float32 lse " +
           shapeStr(lseShape);
  if (backward) {
    const TensorRef &g = c.in[a.afterMask() + 2];
    if (g.shape != outShape || g.dtype != q.dtype)
      return "expects a result gradient of the result's type and shape";
    for (size_t i = 0; i < c.out.size(); ++i)
      if (c.out[i].shape != c.in[i].shape || c.out[i].dtype != c.in[i].dtype)
        return "expects gradients of the inputs' types and shapes";
  }
  return "";
}
std::string checkAttention(const KernelCall &c) {
  if (c.ints.empty() || c.ints.size() > 5)
    return "expects ints [nan_to_zero, packed, mask, window, documents]";
  AttentionShape a;
  return attentionShape(c, false, a);
}
/// The reference flash attention: per row, the scaled, biased scores, their
/// log-sum-exp and the probability-weighted sum of v (double accumulation).
/// A row whose scores are all -inf gets 0 (nan_to_zero) or NaN, lse +inf.
Status runAttentionF32(const KernelCall &c) {
  AttentionShape a;
  attentionShape(c, false, a);
  auto [q, k, v, bias] = a.inputs(c);
  float *out = c.out[0].as<float>(), *lse = c.out[1].as<float>();
  double scale = c.floats[0];
  bool nanToZero = c.ints[0] != 0;
  std::vector<double> s(a.sk), o(a.d);
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.sq; ++i) {
        const float *qi = q + a.qAt(b, i, h), *bi = a.maskRow(bias, b, h, i);
        double m = -INFINITY;
        for (int64_t j = 0; j < a.sk; ++j) {
          const float *kj = k + a.kAt(b, j, h);
          double dot = 0;
          for (int64_t d = 0; d < a.d; ++d)
            dot += (double)qi[d] * kj[d];
          s[j] = a.score(dot, scale) + a.maskAt(bi, b, i, j);
          m = std::max(m, s[j]);
        }
        float *oi = out + a.oAt(b, i, h);
        if (m == -INFINITY) {
          std::fill(oi, oi + a.d, nanToZero ? 0.0f : NAN);
          lse[a.lseAt(b, h, i)] = INFINITY;
          continue;
        }
        double l = 0;
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j < a.sk; ++j) {
          double p = std::exp(s[j] - m);
          l += p;
          const float *vj = v + a.kAt(b, j, h);
          for (int64_t d = 0; d < a.d; ++d)
            o[d] += p * vj[d];
        }
        for (int64_t d = 0; d < a.d; ++d)
          oi[d] = (float)(o[d] / l);
        lse[a.lseAt(b, h, i)] = (float)(m + std::log(l));
      }
  return Status::ok();
}
std::string checkAttentionGrad(const KernelCall &c) {
  if (c.ints.size() > 4)
    return "expects ints [packed, mask, window, documents]";
  AttentionShape a;
  return attentionShape(c, true, a);
}
/// The reference backward: probabilities recomputed from lse; dS = P (dP - rowsum(dO * O)).
Status runAttentionGradF32(const KernelCall &c) {
  AttentionShape a;
  attentionShape(c, true, a);
  int at = a.afterMask();
  auto [q, k, v, bias] = a.inputs(c);
  const float *out = c.in[at].as<float>(), *lse = c.in[at + 1].as<float>(),
              *g = c.in[at + 2].as<float>();
  double scale = c.floats[0];
  // Accumulators in the gradients' layout (dqkv packed: one array).
  std::vector<double> dq(c.out[0].numel()), dkOwn, dvOwn;
  if (!a.packed) {
    dkOwn.resize(c.out[1].numel());
    dvOwn.resize(c.out[2].numel());
  }
  double *dk = a.packed ? dq.data() + a.kOffset() : dkOwn.data();
  double *dv = a.packed ? dq.data() + a.vOffset() : dvOwn.data();
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.sq; ++i) {
        double rowLse = lse[a.lseAt(b, h, i)];
        if (rowLse == INFINITY)
          continue; // an all -inf row: its probabilities are 0
        const float *qi = q + a.qAt(b, i, h), *gi = g + a.oAt(b, i, h), *oi = out + a.oAt(b, i, h),
                    *bi = a.maskRow(bias, b, h, i);
        double rowD = 0;
        for (int64_t d = 0; d < a.d; ++d)
          rowD += (double)gi[d] * oi[d];
        double *dqi = dq.data() + a.dqAt(b, i, h);
        for (int64_t j = 0; j < a.sk; ++j) {
          const float *kj = k + a.kAt(b, j, h), *vj = v + a.kAt(b, j, h);
          double dot = 0, dp = 0;
          for (int64_t d = 0; d < a.d; ++d) {
            dot += (double)qi[d] * kj[d];
            dp += (double)gi[d] * vj[d];
          }
          double x = a.score(dot, scale);
          double p = std::exp(x + a.maskAt(bi, b, i, j) - rowLse);
          if (p == 0)
            continue;
          double ds = p * (dp - rowD) * a.slope(x, scale);
          double *dkj = dk + a.dkAt(b, j, h), *dvj = dv + a.dkAt(b, j, h);
          for (int64_t d = 0; d < a.d; ++d) {
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
            dvj[d] += p * gi[d];
          }
        }
      }
  std::vector<std::vector<double> *> acc{&dq};
  if (!a.packed)
    acc.insert(acc.end(), {&dkOwn, &dvOwn});
  for (size_t i = 0; i < acc.size(); ++i) {
    float *o = c.out[i].as<float>();
    for (size_t e = 0; e < acc[i]->size(); ++e)
      o[e] = (float)(*acc[i])[e];
  }
  return Status::ok();
}

// bfloat16/float16 operands: widened to float32 around the float32 kernel.
Status runAttention(const KernelCall &c) { return viaFloat32(c, runAttentionF32); }
Status runAttentionGrad(const KernelCall &c) { return viaFloat32(c, runAttentionGradF32); }

} // namespace zrt::cpu
