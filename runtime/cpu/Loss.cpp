//===- Loss.cpp - CPU kernels: loss -----------------------------------------===//
//
// Loss: mean cross-entropy over the positions whose label is not the ignore
// index, and its gradient; logits may carry padding columns beyond the real
// class count (zero-pad-gemms). Labels out of range are reported with their
// position.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cmath>

namespace zrt::cpu {

/// The parts of a stable log-sum-exp over one row of logits: its maximum and
/// the sum of exp(x - max). cross_entropy and its gradient share it so both
/// see the same numbers.
struct RowLse {
  float max;
  double sum;
};
static RowLse rowLse(const float *xr, int64_t classes) {
  RowLse r{-INFINITY, 0};
  for (int64_t j = 0; j < classes; ++j)
    r.max = std::max(r.max, xr[j]);
  for (int64_t j = 0; j < classes; ++j)
    r.sum += std::exp((double)xr[j] - r.max);
  return r;
}
static Status labelOutOfRange(int64_t label, int64_t position, int64_t classes, int64_t ignore) {
  return errorf("label ", label, " at position ", position, " is out of range for ", classes,
                " classes (use ", ignore, " to ignore a position)");
}

/// cross_entropy(_grad)'s ints: [ignore_index] or [ignore_index, classes]
/// (logits whose last dimension is padded beyond |classes|).
static std::string checkCrossEntropyInts(const KernelCall &c) {
  if (c.ints.size() != 1 && c.ints.size() != 2)
    return "expects 1 or 2 integer attributes (ignore_index, classes), got " +
           std::to_string(c.ints.size());
  if (c.ints.size() == 2 &&
      (c.in[0].shape.empty() || c.ints[1] < 1 || c.ints[1] > c.in[0].shape.back()))
    return "classes " + std::to_string(c.ints[1]) + " is not in [1, the logits' last dimension]";
  return "";
}
static int64_t crossEntropyClasses(const KernelCall &c) {
  return c.ints.size() > 1 ? c.ints[1] : c.in[0].shape.back();
}

std::string checkCrossEntropy(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &logits = c.in[0], &labels = c.in[1], &loss = c.out[0];
  if (!isFloatStorage(logits.dtype) || labels.dtype != DType::I64 || loss.dtype != DType::F32 ||
      !loss.shape.empty() || logits.shape.empty() ||
      labels.shape != Shape(logits.shape.begin(), logits.shape.end() - 1))
    return "expects float32 logits [N..., C], int64 labels [N...] and a float32 scalar";
  return checkCrossEntropyInts(c);
}
Status runCrossEntropyF32(const KernelCall &c) {
  const TensorRef &logits = c.in[0], &labels = c.in[1];
  int64_t stride = logits.shape.back(), classes = crossEntropyClasses(c), rows = labels.numel(),
          ignore = c.ints[0];
  const float *x = logits.as<float>();
  const int64_t *y = labels.as<int64_t>();
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] == ignore)
      continue;
    if (y[r] < 0 || y[r] >= classes)
      return labelOutOfRange(y[r], r, classes, ignore);
    const float *xr = x + r * stride;
    RowLse lse = rowLse(xr, classes);
    total += std::log(lse.sum) + lse.max - xr[y[r]];
    ++count;
  }
  // PyTorch: the mean over no positions is NaN.
  *c.out[0].as<float>() = count ? (float)(total / count) : NAN;
  return Status::ok();
}

std::string checkCrossEntropyGrad(const KernelCall &c) {
  if (auto e = arity(c, 3, c.out.size() == 2 ? 2 : 1); !e.empty())
    return e;
  const TensorRef &logits = c.in[0], &labels = c.in[1], &g = c.in[2], &dx = c.out[0];
  if (!isFloatStorage(logits.dtype) || labels.dtype != DType::I64 || g.dtype != DType::F32 ||
      !g.shape.empty() || logits.shape.empty() || dx.shape != logits.shape ||
      dx.dtype != logits.dtype ||
      labels.shape != Shape(logits.shape.begin(), logits.shape.end() - 1) ||
      (c.out.size() == 2 && (c.out[1].dtype != DType::F32 || !c.out[1].shape.empty())))
    return "expects float32 logits [N..., C], int64 labels [N...], a scalar dloss, dlogits "
           "(and the float32 scalar loss)";
  return checkCrossEntropyInts(c);
}
Status runCrossEntropyGradF32(const KernelCall &c) {
  const TensorRef &logits = c.in[0], &labels = c.in[1];
  int64_t stride = logits.shape.back(), classes = crossEntropyClasses(c), rows = labels.numel(),
          ignore = c.ints[0];
  const float *x = logits.as<float>();
  const int64_t *y = labels.as<int64_t>();
  double scale = *c.in[2].as<float>();
  float *dx = c.out[0].as<float>();
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += y[r] != ignore;
  // With a second output, the loss too: runCrossEntropyF32's sum, in its
  // order (the logits may be dx's bytes: each row's terms are read first).
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float *dr = dx + r * stride;
    if (y[r] != ignore && (y[r] < 0 || y[r] >= classes))
      return labelOutOfRange(y[r], r, classes, ignore);
    const float *xr = x + r * stride;
    RowLse lse{};
    if (y[r] != ignore) {
      lse = rowLse(xr, classes);
      total += std::log(lse.sum) + lse.max - xr[y[r]];
    }
    std::fill(dr + classes, dr + stride, 0.0f); // padding
    if (y[r] == ignore || count == 0) {
      std::fill(dr, dr + classes, 0.0f);
      continue;
    }
    for (int64_t j = 0; j < classes; ++j) {
      double p = std::exp((double)xr[j] - lse.max) / lse.sum - (j == y[r] ? 1.0 : 0.0);
      dr[j] = (float)(p * scale / count);
    }
  }
  if (c.out.size() == 2) // PyTorch: the mean over no positions is NaN
    *c.out[1].as<float>() = count ? (float)(total / count) : NAN;
  return Status::ok();
}

// bfloat16/float16 operands: widened to float32 around the float32 kernel.
Status runCrossEntropy(const KernelCall &c) { return viaFloat32(c, runCrossEntropyF32); }
Status runCrossEntropyGrad(const KernelCall &c) { return viaFloat32(c, runCrossEntropyGradF32); }

} // namespace zrt::cpu
